#!/usr/bin/env python3
"""Include cycles between the units of the tree: fails on any.

A unit is a header and the .c files that implement it: x.c belongs to x.h when there is
one beside it, else to the header that declares most of what it defines (a .c that
implements no header is a unit of its own). Unit A depends on unit B when a .c file of A
uses a function or variable that a header it includes (directly or through other
headers) declares and a .c file of B defines: what A needs to link. Including a header
for its types alone is no dependency. Includes ("...") resolve against the including
file's directory, the source root and compute/, as the build's include directories do. A
cycle (A -> ... -> A over two or more units) means none of them can be read, tested or
changed alone: a header shared across a boundary, a hook called upward. Usage:

  tools/include_graph.py [--root DIR] [--allow A,B,...] [--dot] DIR...

prints each cycle found under the DIRs (relative to the root) and exits 1 when there is
one; --allow takes a set of units (header paths without .h, comma-separated) whose cycle
among themselves is known and tolerated for now (reported, not failed); --dot prints the
dependency graph in Graphviz form.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
PREPROC = re.compile(r"^\s*#.*?(?<!\\)$", re.M | re.S)
# in a header: a name followed by its parameter list (a prototype, a macro, an inline's call)
DECL_FN = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
DECL_VAR = re.compile(r"\bextern\b[^;(]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*;")
# in a .c file, at the start of a line: a definition that is not static
DEF_FN = re.compile(r"^(?!static\b)(?:[A-Za-z_][\w \t*]*?[\s*])([A-Za-z_]\w*)\s*\([^;{}]*\)\s*"
                    r"(?:__attribute__\s*\(\([^)]*\)\)\s*)?\{", re.M)
DEF_VAR = re.compile(r"^(?!static\b)(?!extern\b)(?:const\s+)?(?:struct\s+\w+|[A-Za-z_]\w*)(?:\s+const)?"
                     r"[\s*]+([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*=", re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "__attribute__", "typeof"}


def source_files(root, dirs):
    out = []
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(base, f), root))
    return out


def resolve(root, including, name):
    """The header an include names, relative to root, or None (system, generated, outside)."""
    for base in (os.path.dirname(including), "", "compute"):
        rel = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, rel)):
            return rel
    return None


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
        return fh.read()


def unit_of(files, text, declared, c):
    """The unit (a header path without .h, or the .c's own) a .c file belongs to."""
    own = c[:-2] + ".h"
    if own in text:
        return own[:-2]
    code = COMMENT.sub(" ", text[c])
    defs = set(DEF_FN.findall(code)) | set(DEF_VAR.findall(code))
    best, n = None, 0
    for h, names in sorted(declared.items()):
        k = len(defs & names)
        if k > n:
            best, n = h, k
    return best[:-2] if best else c[:-2]


def graph(root, files):
    """unit -> units it depends on: the units defining what its .c files use, among the
    names declared in the headers they include (directly or through other headers)."""
    text = {f: read(root, f) for f in files}
    includes = {f: {h for h in (resolve(root, f, n) for n in INCLUDE.findall(text[f])) if h in text}
                for f in files}
    declared = {}
    for h in (f for f in files if f.endswith(".h")):
        code = COMMENT.sub(" ", text[h])
        declared[h] = (set(DECL_FN.findall(PREPROC.sub(" ", code))) | set(DECL_VAR.findall(code))) - KEYWORDS
    unit = {f: f[:-2] if f.endswith(".h") else unit_of(files, text, declared, f) for f in files}
    defined_in = {}
    for c in (f for f in files if f.endswith(".c")):
        code = COMMENT.sub(" ", text[c])
        for name in set(DEF_FN.findall(code)) | set(DEF_VAR.findall(code)):
            defined_in.setdefault(name, set()).add(unit[c])
    edges = {u: set() for u in unit.values()}
    for c in (f for f in files if f.endswith(".c")):
        used = set(IDENT.findall(COMMENT.sub(" ", text[c])))
        seen, todo = set(), [c]
        while todo:
            for h in includes[todo.pop()]:
                if h not in seen:
                    seen.add(h)
                    todo.append(h)
        for h in seen:
            for name in declared[h] & used:
                edges[unit[c]] |= defined_in.get(name, set()) - {unit[c]}
    return edges


def cycles(edges):
    """The strongly connected components of two or more units (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        work = [(start, iter(sorted(edges[start])))]
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def self_test():
    """A tree with the shape of the old service circle (a hook header called upward) is
    refused; the same tree with the hook handed in is clean."""
    import tempfile
    files = {
        "s/http.h": "int http_start(void);\n",
        "s/http.c": '#include "s/http.h"\n#include "s/metrics.h"\n'
                    'int http_start(void)\n{\n    metrics_write();\n    return 0;\n}\n',
        "s/metrics.h": "void metrics_write(void);\n",
        "s/metrics.c": '#include "s/metrics.h"\n#include "s/oip.h"\n'
                       'void metrics_write(void)\n{\n    oip_metrics();\n}\n',
        "s/oip.h": "void oip_metrics(void);\n",
        "s/routes_oip.c": '#include "s/oip.h"\n#include "s/http.h"\n'
                          'void oip_metrics(void)\n{\n    (void)http_start;\n}\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        found = cycles(graph(root, source_files(root, ["s"])))
        assert found == [["s/http", "s/metrics", "s/oip"]], found
        with open(os.path.join(root, "s/metrics.c"), "w") as f:   # the writer handed in instead
            f.write('#include "s/metrics.h"\n#include "s/oip.h"\nvoid metrics_write(void)\n{\n}\n')
        found = cycles(graph(root, source_files(root, ["s"])))
        assert found == [], found
    print("self-test: a cycle found, its absence seen")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--allow", action="append", default=[],
                    help="comma-separated units whose cycle is known (reported, not failed)")
    ap.add_argument("--dot", action="store_true")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    files = source_files(root, a.dirs)
    edges = graph(root, files)
    units = edges
    if a.dot:
        print("digraph includes {")
        for u in sorted(edges):
            for v in sorted(edges[u]):
                print(f'  "{u}" -> "{v}";')
        print("}")
        return 0
    allowed = [set(x.split(",")) for x in a.allow]
    bad = 0
    for comp in cycles(edges):
        known = any(set(comp) <= s for s in allowed)
        print(("known include cycle (allowed for now): " if known else "include cycle: ") + " <-> ".join(comp))
        bad += not known
    print(f"{len(units)} units under {', '.join(a.dirs)}: "
          f"{'no include cycle' if not bad else str(bad) + ' include cycle(s)'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
