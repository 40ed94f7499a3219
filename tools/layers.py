#!/usr/bin/env python3
"""The layers of service/: each folder's meson.build says which other folders (and single
headers) its files may include, on a line

  # may include: base db ../server.h http/http_server.h

A folder name allows every header in it; "../x.h" a header of service/ itself; "f/x.h" one
header of folder f. A file may always include its own folder. Prints each include that breaks
its folder's rule and exits 1 when there is one. Usage: tools/layers.py [--root DIR]
"""
import argparse
import os
import re
import sys

RULE = re.compile(r"^#\s*may include:\s*(.*)$", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"service/([^"]+)"', re.M)


def rules(service):
    """{folder: set of allowed entries} for every folder whose meson.build states a rule."""
    out = {}
    for d in sorted(os.listdir(service)):
        build = os.path.join(service, d, "meson.build")
        if not os.path.isfile(build):
            continue
        m = RULE.search(open(build, encoding="utf-8").read())
        if m:
            out[d] = set(m.group(1).split()) - {"(nothing", "of", "service/)"}
    return out


def allowed(folder, allow, target):
    parts = target.split("/")
    if len(parts) == 1:
        return "../" + target in allow
    return parts[0] == folder or parts[0] in allow or target in allow


def breaks(root):
    service = os.path.join(root, "service")
    found = []
    for folder, allow in rules(service).items():
        for name in sorted(os.listdir(os.path.join(service, folder))):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(service, folder, name)
            for target in INCLUDE.findall(open(path, encoding="utf-8").read()):
                if not allowed(folder, allow, target):
                    found.append(f"service/{folder}/{name} includes service/{target}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    args = ap.parse_args()
    if not rules(os.path.join(args.root, "service")):
        print("no folder of service/ states a rule: wrong --root?", file=sys.stderr)
        return 1
    found = breaks(args.root)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
