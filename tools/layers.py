#!/usr/bin/env python3
"""The layers and modules of service/: each folder's meson.build says which other folders
(and single headers) its files may include, on a line

  # may include: base db ../server.h http/http_server.h compute/infer

A folder name allows every header in it; "../x.h" a header of service/ itself; "f/x.h" one
header of folder f; "compute/m" the headers of compute/m/ (compute/common/ is open to all).
A file may always include its own folder. service/meson.build names the layers on a line
"# layers: base db ..." and states the rule of its own files (main.c, config.c, server.h,
module.h) the same way; every other folder is a module's service half.

Beyond the lines, what no line may allow:
  - a layer (or a file of service/ itself) includes no module folder and no module's
    compute headers (compute/<m>/ but common): it reaches modules through module.h only;
  - a module includes no other module's compute headers (the kind registry,
    compute/common/gj_kind.h, or an interface of the module that owns them instead).

Prints each break and exits 1 when there is one.
Usage: tools/layers.py [--root DIR] | tools/layers.py --self-test
"""
import argparse
import os
import re
import sys

RULE = re.compile(r"^#\s*may include:\s*(.*)$", re.M)
LAYERS = re.compile(r"^#\s*layers:\s*(.*)$", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ROOT = "."   # the unit of service/'s own files


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rule_of(build):
    """The set of entries of build's rule, or None when it states none."""
    m = RULE.search(read(build))
    return set(m.group(1).split()) - {"(nothing", "of", "service/)"} if m else None


class Tree:
    def __init__(self, root):
        self.service = os.path.join(root, "service")
        top = read(os.path.join(self.service, "meson.build"))
        m = LAYERS.search(top)
        self.layer_names = set(m.group(1).split()) if m else set()
        self.folders = sorted(d for d in os.listdir(self.service)
                              if os.path.isfile(os.path.join(self.service, d, "meson.build")))
        self.modules = set(self.folders) - self.layer_names
        compute = os.path.join(root, "compute")
        self.compute = {d for d in os.listdir(compute) if os.path.isdir(os.path.join(compute, d))} \
            if os.path.isdir(compute) else set()
        self.compute_modules = self.compute - {"common"}

    def is_layer(self, unit):
        return unit == ROOT or unit in self.layer_names

    def rules(self):
        """{unit: (meson.build path, allowed entries or None)}"""
        out = {ROOT: ("service/meson.build", rule_of(os.path.join(self.service, "meson.build")))}
        for d in self.folders:
            out[d] = (f"service/{d}/meson.build", rule_of(os.path.join(self.service, d, "meson.build")))
        return out

    def files(self, unit):
        folder = os.path.join(self.service, unit)
        for name in sorted(os.listdir(folder)):
            if name.endswith((".c", ".h")):
                yield (f"service/{name}" if unit == ROOT else f"service/{unit}/{name}",
                       os.path.join(folder, name))


def entry_breaks(tree, unit, build, allow):
    """What a rule line allows that no line may."""
    found = []
    for entry in sorted(allow):
        head = entry.split("/")[0]
        if head == "compute":
            m = entry.split("/")[1] if "/" in entry else ""
            if m in tree.compute_modules and tree.is_layer(unit):
                found.append(f"{build}: a layer may not include module headers (compute/{m}/): "
                             "reach the module through service/module.h")
            elif m in tree.compute_modules and m != unit:
                found.append(f"{build}: module {unit} may not include module {m}'s compute headers "
                             f"(compute/{m}/): through the kind registry or an interface of {m}")
        elif head in tree.modules and tree.is_layer(unit):
            found.append(f"{build}: a layer may not include module {head} (service/{head}/): "
                         "reach it through service/module.h")
    return found


def allowed(tree, unit, allow, target):
    if target.startswith("service/"):
        parts = target[len("service/"):].split("/")
        if len(parts) == 1:
            return unit == ROOT or "../" + parts[0] in allow
        return parts[0] == unit or parts[0] in allow or "/".join(parts) in allow
    head = target.split("/")[0]
    if "/" in target and head in tree.compute_modules:
        return "compute/" + head in allow
    return True   # compute/common, the C library, generated headers


def breaks(root):
    tree = Tree(root)
    found = []
    if not tree.layer_names:
        found.append("service/meson.build: no '# layers:' line names the layers")
    for name in sorted(tree.layer_names - set(tree.folders)):
        found.append(f"service/meson.build: layer {name} has no folder with a meson.build")
    for unit, (build, allow) in tree.rules().items():
        if allow is None:
            found.append(f"{build}: no '# may include:' line")
            continue
        found += entry_breaks(tree, unit, build, allow)
        for shown, path in tree.files(unit):
            for target in INCLUDE.findall(read(path)):
                if not allowed(tree, unit, allow, target):
                    found.append(f"{shown} includes {target}")
    return found


def self_test():
    """A clean tree passes; each kind of leak, put into a copy of it, is found."""
    import tempfile
    clean = {
        "service/meson.build": "# layers: base cli\n# may include: base cli\n",
        "service/main.c": '#include "service/module.h"\n#include "service/cli/cli.h"\n#include "common/k.h"\n',
        "service/module.h": '#include "service/base/log.h"\n',
        "service/base/meson.build": "# may include: (nothing of service/)\n",
        "service/base/log.h": "#include <stdio.h>\n",
        "service/cli/meson.build": "# may include: base ../module.h\n",
        "service/cli/cli.h": '#include "service/base/log.h"\n',
        "service/cli/run.c": '#include "service/module.h"\n#include "common/k.h"\n#include "gj_config.h"\n',
        "service/infer/meson.build": "# may include: base cli ../module.h compute/infer\n",
        "service/infer/module.c": '#include "service/module.h"\n#include "service/cli/cli.h"\n'
                                  '#include "infer/dicom.h"\n',
        "service/portal/meson.build": "# may include: base ../module.h infer/frame.h\n",
        "service/portal/thumb.c": '#include "service/infer/frame.h"\n#include "service/base/log.h"\n',
        "service/infer/frame.h": "int frame(void);\n",
        "compute/common/k.h": "",
        "compute/infer/dicom.h": "",
        "compute/recon/recon.h": "",
    }
    leaks = {
        "a layer includes a module": ("service/cli/run.c", '#include "service/infer/frame.h"\n',
                                      ["service/cli/run.c includes service/infer/frame.h"]),
        "a layer includes a module's compute header": (
            "service/cli/run.c", '#include "infer/dicom.h"\n', ["service/cli/run.c includes infer/dicom.h"]),
        "main.c includes a module's compute header": (
            "service/main.c", '#include "infer/dicom.h"\n', ["service/main.c includes infer/dicom.h"]),
        "a layer's line names a module": (
            "service/cli/meson.build", "# may include: base ../module.h infer/frame.h\n",
            ["service/cli/meson.build: a layer may not include module infer (service/infer/): "
             "reach it through service/module.h"]),
        "a layer's line names a module's compute folder": (
            "service/cli/meson.build", "# may include: base ../module.h compute/recon\n",
            ["service/cli/meson.build: a layer may not include module headers (compute/recon/): "
             "reach the module through service/module.h"]),
        "a module includes another module's compute header": (
            "service/portal/thumb.c", '#include "recon/recon.h"\n',
            ["service/portal/thumb.c includes recon/recon.h"]),
        "a module's line names another module's compute folder": (
            "service/portal/meson.build", "# may include: base ../module.h infer/frame.h compute/infer\n",
            ["service/portal/meson.build: module portal may not include module infer's compute headers "
             "(compute/infer/): through the kind registry or an interface of infer"]),
        "a module includes a header its line does not name": (
            "service/portal/thumb.c", '#include "service/infer/infer.h"\n',
            ["service/portal/thumb.c includes service/infer/infer.h"]),
        "a folder states no rule": ("service/portal/meson.build", "# the portal\n",
                                    ["service/portal/meson.build: no '# may include:' line"]),
    }

    def check(files, expect, what):
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                    f.write(text)
            got = breaks(root)
        if got != expect:
            print(f"self-test: {what}: expected {expect}, got {got}", file=sys.stderr)
            return 1
        return 0

    failed = check(clean, [], "the clean tree")
    for what, (path, text, expect) in leaks.items():
        files = dict(clean)
        files[path] = text if path.endswith("meson.build") else files[path] + text
        failed += check(files, expect, what)
    if failed:
        return 1
    print(f"self-test: the clean tree passes; {len(leaks)} kinds of leak found")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.root, "service", "meson.build")):
        print("no service/meson.build: wrong --root?", file=sys.stderr)
        return 1
    found = breaks(args.root)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
