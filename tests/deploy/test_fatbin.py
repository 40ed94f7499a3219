"""The CUDA device code inside gpujobd matches -Dgpu_arch: one cubin (SASS) per listed compute
capability, and PTX of the highest, which the driver compiles for newer GPUs. Read from the
binary's .nv_fatbin section (NVIDIA's fatbinary container: a header, then entries each naming
its kind, PTX or ELF, and its SM version), so that no cuobjdump is needed. Skips (77) in a build
without CUDA."""

import json
import os
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND = {1: "ptx", 2: "elf"}

gpujobd = os.environ.get("GPUJOBD") or os.path.join(os.environ.get("GJ_BUILD_ROOT", "build"), "service", "gpujobd")
build_root = os.environ.get("GJ_BUILD_ROOT", os.path.dirname(os.path.dirname(gpujobd)))


def section(path, name):
    """(file offset, size) of an ELF section, from readelf."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == name:
            return int(fields[4], 16), int(fields[5], 16)
    return None


def fatbin_entries(data):
    """[(kind, sm)] of every entry of every fatbinary in data."""
    entries = []
    pos = 0
    while pos + 16 <= len(data):
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbinaries are 8-byte aligned in the section
            continue
        entry, end = pos + header_size, pos + header_size + body_size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            if entry_header == 0:
                raise ValueError(f"malformed fatbinary entry at {entry}")
            entries.append((KIND.get(kind, str(kind)), sm))
            entry += entry_header + payload
        pos = end
    return entries


def main():
    version = subprocess.run([gpujobd, "version"], capture_output=True, text=True, check=True).stdout
    if "(CUDA)" not in version:
        print(f"skip: {gpujobd} is a build without CUDA")
        return 77
    options = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", build_root],
                                        capture_output=True, text=True, check=True).stdout)
    arch = next(o["value"] for o in options if o["name"] == "gpu_arch").replace(" ", "").split(",")
    numeric = sorted(int(a) for a in arch if a.isdigit())
    want_elf = set(numeric)
    want_ptx = {numeric[-1]} if numeric else set()

    where = section(gpujobd, ".nv_fatbin")
    if where is None:
        print(f"FAIL: {gpujobd} says CUDA but has no .nv_fatbin section")
        return 1
    with open(gpujobd, "rb") as f:
        f.seek(where[0])
        entries = fatbin_entries(f.read(where[1]))
    have_elf = {sm for kind, sm in entries if kind == "elf"}
    have_ptx = {sm for kind, sm in entries if kind == "ptx"}
    print(f"-Dgpu_arch={','.join(arch)}: {len(entries)} entries; SASS {sorted(have_elf)}, PTX {sorted(have_ptx)}")

    failed = 0
    for what, have, want in (("SASS (cubin)", have_elf, want_elf), ("PTX", have_ptx, want_ptx)):
        if have == want:
            print(f"ok   {what}: {sorted(have)}")
        else:
            print(f"FAIL {what}: the binary has {sorted(have)}, -Dgpu_arch asks for {sorted(want)}")
            failed += 1
    print(f"{2 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
