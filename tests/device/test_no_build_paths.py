#!/usr/bin/python3
"""No path of the build machine is compiled into the binaries the device kit carries
(tools/device/gpu-kit.sh --build-here): they run from another folder on another machine, so
they find their data through GJ_SOURCE_ROOT or their own location, never a path fixed here.

    test_no_build_paths.py SOURCE_ROOT BINARY...

Each binary is stripped (as the kit strips it) and searched for SOURCE_ROOT. Allowed: the
source folders in the line tables of CUDA device code (nvcc -lineinfo, `BUILD/../kernels/x`),
which strip cannot reach and nothing reads but a debugger or compute-sanitizer."""
import os
import re
import subprocess
import sys
import tempfile


def compiled_paths(binary, root):
    with tempfile.TemporaryDirectory() as d:
        stripped = os.path.join(d, "b")
        subprocess.run(["strip", "-o", stripped, binary], check=True)
        with open(stripped, "rb") as f:
            data = f.read()
    found = set(m.group(0).decode("latin-1") for m in re.finditer(re.escape(root.encode()) + rb"[\x20-\x7e]*", data))
    line_table_dir = re.compile(r"^" + re.escape(root) + r"/.*/\.\./(kernels|compute)/[A-Za-z0-9_/]*$")
    return sorted(p for p in found if not line_table_dir.match(p))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.realpath(argv[0])
    bad = 0
    for b in argv[1:]:
        paths = compiled_paths(b, root)
        print("%s: %s" % (os.path.basename(b), "; ".join(paths) if paths else "no path of this machine"))
        bad += bool(paths)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
