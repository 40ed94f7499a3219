#!/usr/bin/env python3
"""Issue 25: the job store owns the statements on jobs and its tables. Outside service/jobs/
(the store, the queue and the worker pool), no C file of service/ names jobs, job_inputs,
job_outputs, job_events or job_dependencies in SQL, except the lines listed in ALLOWED
(each with why it stays; none now). A new one fails here: ask the store (job_store.h) instead, or
list it with its reason. Usage: job_sql_owner.py ROOT"""
import os
import re
import sys

SQL = re.compile(r"\b(FROM|JOIN|INTO|UPDATE|EXISTS \(SELECT 1 FROM)\s+(jobs|job_inputs|job_outputs|job_events|"
                 r"job_dependencies)\b")

# file (under service/) -> how many such lines it may keep, and why
ALLOWED = {
}


def lines(root):
    service = os.path.join(root, "service")
    for d, _, files in os.walk(service):
        rel = os.path.relpath(d, service)
        if rel == "jobs" or rel.startswith("jobs" + os.sep):
            continue
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(d, f)
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    if SQL.search(line):
                        yield os.path.relpath(path, service), n, line.strip()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    seen = {}
    for rel, n, line in lines(root):
        seen.setdefault(rel, []).append(f"service/{rel}:{n}: {line}")
    bad = 0
    for rel, found in sorted(seen.items()):
        most = ALLOWED.get(rel, (0, ""))[0]
        if len(found) > most:
            bad = 1
            print(f"service/{rel}: {len(found)} statement line(s) on the job tables, {most} allowed:")
            for f in found:
                print("  " + f)
    return bad


if __name__ == "__main__":
    sys.exit(main())
