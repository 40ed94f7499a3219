#!/bin/sh
# gpujobd-entrypoint -- the image's entrypoint (tini runs it as PID 1's child).
#
#   (no arguments) or options only   gpujobd serve [options]
#   serve|migrate|run|bench|dicom|version ...   that gpujobd command
#   any other program of the image   run as given (docker run -it IMAGE bash)
#
# Before `serve` and `migrate` it checks what containers most often get wrong, and says so in
# one line naming the setting: a data directory the service user cannot write (a volume not
# mounted, or mounted without fsGroup), a Secret file that is not there, a user id without a
# passwd entry (initdb needs one). gpujobd checks every setting itself; this only explains the
# container's side. Then it execs gpujobd, which so receives SIGTERM directly.
set -eu

me=gpujobd-entrypoint
uid=$(id -u)

die() {
    printf '%s: %s\n' "$me" "$*" >&2
    exit 2
}

# flag_value NAME ARGS... prints the last value of --NAME VALUE or --NAME=VALUE in ARGS
# (getopt's rule: the last one wins); fails when ARGS do not give it.
flag_value() {
    name=$1
    shift
    found=1
    value=
    while [ $# -gt 0 ]; do
        case $1 in
            --"$name"=*) value=${1#*=}; found=0 ;;
            --"$name") if [ $# -gt 1 ]; then value=$2; found=0; shift; fi ;;
        esac
        shift
    done
    [ $found -eq 0 ] && printf '%s\n' "$value"
    return $found
}

# setting NAME ARGS... prints the flag's value, else its environment twin's (GPUJOBD_NAME).
setting() {
    name=$1
    shift
    if flag_value "$name" "$@"; then
        return 0
    fi
    env_name=GPUJOBD_$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')
    eval "printf '%s\n' \"\${$env_name:-}\""
}

# check_writable_dir WHAT DIR: DIR exists (or can be created, like mkdir -p) and this user can
# write it.
check_writable_dir() {
    what=$1
    dir=$2
    hint="mount a volume there that uid $uid can write (Kubernetes: a PVC or emptyDir with securityContext.fsGroup: $(id -g))"
    if [ ! -e "$dir" ]; then
        parent=$(dirname "$dir")
        while [ ! -e "$parent" ]; do
            parent=$(dirname "$parent")
        done
        { [ -d "$parent" ] && [ -w "$parent" ] && [ -x "$parent" ]; } ||
            die "$what $dir does not exist and uid $uid cannot create it in $parent: $hint"
        return 0
    fi
    [ -d "$dir" ] || die "$what $dir is not a directory"
    { [ -w "$dir" ] && [ -x "$dir" ]; } ||
        die "$what $dir is not writable by uid $uid (it belongs to uid $(stat -c %u "$dir")): $hint"
}

# check_secret_file WHAT FILE: a mounted Secret is a readable, non-empty file.
check_secret_file() {
    [ -n "$2" ] || return 0
    { [ -f "$2" ] && [ -r "$2" ]; } ||
        die "$1 $2: no readable file there for uid $uid (is the Secret mounted at that path?)"
    [ -s "$2" ] || die "$1 $2: the file is empty"
}

# what NAME: how a message names a setting, "--data-dir (GPUJOBD_DATA_DIR)".
what() {
    printf -- '--%s (GPUJOBD_%s)' "$1" "$(printf '%s' "$1" | tr 'a-z-' 'A-Z_')"
}

# preflight COMMAND ARGS...: the container-side checks of serve and migrate.
preflight() {
    command=$1
    shift
    database_url=$(setting database-url "$@")
    data_dir=$(setting data-dir "$@")
    data_dir=${data_dir:-./var}
    if [ "$command" = serve ] || [ -z "$database_url" ]; then
        check_writable_dir "data directory $(what data-dir)" "$data_dir"
    fi
    if [ "$command" = serve ]; then
        work_dir=$(setting work-dir "$@")
        [ -z "$work_dir" ] || check_writable_dir "work directory $(what work-dir)" "$work_dir"
        for flag in admin-key-file tls-cert tls-key pseudonym-secret-file; do
            check_secret_file "$(what "$flag")" "$(setting "$flag" "$@")"
        done
    fi
    check_secret_file "$(what database-password-file)" "$(setting database-password-file "$@")"
    if [ -z "$database_url" ] && [ "$uid" != 0 ] && ! id -un >/dev/null 2>&1; then
        die "uid $uid has no entry in /etc/passwd, and the embedded PostgreSQL (initdb) needs one: run as uid 10001, or give --database-url"
    fi
}

[ $# -gt 0 ] || set -- serve
case $1 in
    -*) set -- serve "$@" ;;
esac

case $1 in
    serve|migrate)
        preflight "$@"
        exec gpujobd "$@"
        ;;
    run|bench|dicom|version)
        exec gpujobd "$@"
        ;;
    *)
        command -v "$1" >/dev/null 2>&1 ||
            die "unknown command '$1': expected a gpujobd command (serve, migrate, run, bench, dicom, version) or a program of the image"
        exec "$@"
        ;;
esac
