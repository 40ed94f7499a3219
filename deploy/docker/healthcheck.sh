#!/bin/sh
# gpujobd-healthcheck -- the image's HEALTHCHECK: exit 0 healthy, 1 not.
#
# Finds the gpujobd process, reads how it listens from its command line (--listen,
# --insecure-http, --role; else their GPUJOBD_* environment twins, from /proc/PID/environ) and
# asks its /healthz over loopback (-k: the certificate may be the self-signed default). A worker
# (--role worker) has no API listener: it is asked on its --metrics-listen (plain HTTP), and
# without one it is healthy while its process runs. Liveness, not readiness: a database that is
# away for a moment must not get the container replaced.
# GJ_HEALTHCHECK_PID names the process instead of searching /proc (tests).
set -u

unhealthy() {
    echo "gpujobd-healthcheck: $*" >&2
    exit 1
}

pid=${GJ_HEALTHCHECK_PID:-}
if [ -z "$pid" ]; then
    for dir in /proc/[0-9]*; do
        if [ "$(cat "$dir/comm" 2>/dev/null)" = gpujobd ]; then
            pid=${dir#/proc/}
            break
        fi
    done
fi
{ [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ]; } || unhealthy "no gpujobd process"

# The command line and environment, one entry a line.
args=$(tr '\0' '\n' <"/proc/$pid/cmdline") || unhealthy "cannot read /proc/$pid/cmdline"
environ=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || environ=

# last_flag NAME [bare]: the last value of --NAME VALUE or --NAME=VALUE; with "bare", a flag
# whose value is optional (getopt never takes the next argument as its value): --NAME is "true".
last_flag() {
    printf '%s\n' "$args" | awk -v flag="--$1" -v bare="${2:-}" '
        want { value = $0; found = 1; want = 0; next }
        $0 == flag { found = 1; value = "true"; want = (bare == ""); next }
        index($0, flag "=") == 1 { value = substr($0, length(flag) + 2); found = 1 }
        END { if (found) print value; exit !found }'
}

# setting NAME ENV_NAME DEFAULT [bare]
setting() {
    last_flag "$1" "${4:-}" && return 0
    value=$(printf '%s\n' "$environ" | sed -n "s/^$2=//p" | tail -n 1)
    printf '%s\n' "${value:-$3}"
}

role=$(setting role GPUJOBD_ROLE all)
if [ "$role" = worker ]; then
    listen=$(setting metrics-listen GPUJOBD_METRICS_LISTEN "")
    [ -n "$listen" ] || exit 0   # alive: /proc/$pid/cmdline was readable above
    scheme=http
else
    listen=$(setting listen GPUJOBD_LISTEN 127.0.0.1:8443)
    # --insecure-http is optional-valued: a bare flag, or =true/=1/=yes.
    case $(setting insecure-http GPUJOBD_INSECURE_HTTP false bare) in
        true|1|yes|"") scheme=http ;;
        *) scheme=https ;;
    esac
fi

port=${listen##*:}
host=${listen%:*}
case $host in
    0.0.0.0|"") host=127.0.0.1 ;;
    "[::]"|::) host="[::1]" ;;
    \[*) ;;
    *:*) host="[$host]" ;;
esac

curl -fsS -k --max-time 5 -o /dev/null "$scheme://$host:$port/healthz" ||
    unhealthy "$scheme://$host:$port/healthz did not answer 200"
exit 0
