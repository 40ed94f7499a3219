# flags.sh — the libFuzzer options of each harness, sourced by smoke.sh and campaign.sh so
# the CI smoke run and the campaign (FUZZING.md) fuzz alike.
#   fuzz_flags HARNESS   prints the options (after the common ones)
# Common: an input over 10 s is a timeout, over 2 GiB RSS an out-of-memory.
FUZZ_COMMON_FLAGS="-timeout=10 -rss_limit_mb=2048 -print_final_stats=1"
fuzz_flags() {
  local d
  d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dict
  case $1 in
    dicom) echo "-max_len=8192 -malloc_limit_mb=1024" ;;
    multipart_related) echo "-max_len=8192 -dict=$d/multipart.dict" ;;
    brkga) echo "-max_len=8192 -dict=$d/brkga.dict" ;;
    json_schema) echo "-max_len=4096 -dict=$d/json_schema.dict" ;;
    nrrd) echo "-max_len=4096 -dict=$d/nrrd.dict" ;;
    onnx) echo "-max_len=32768" ;;
    http_route) echo "-max_len=4096 -dict=$d/http_route.dict" ;;
    pbtxt) echo "-max_len=4096 -dict=$d/pbtxt.dict" ;;
    oip_json_data) echo "-max_len=4096 -dict=$d/oip_json_data.dict" ;;
    *) return 1 ;;
  esac
}
