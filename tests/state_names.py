#!/usr/bin/env python3
"""Issue 25: a job's stored states are named as the API shows them. The stored names that
were the public names swapped ('blocked' for a public 'waiting', 'waiting' for a parent shown
'running') are gone from the service's C and from every migration after the one that
converted them (0016); migrations before it are applied history and never edited. And the
states the newest CHECK constraint on jobs.state allows are the states of
service/jobs/job_state.c, whose public states openapi.yaml lists. Usage: state_names.py ROOT"""
import glob
import os
import re
import sys

CONVERTED_BY = 16   # migrations/0016_job_states.sql renames the old states


def migrations(root):
    out = []
    for path in sorted(glob.glob(os.path.join(root, "migrations", "*.sql"))):
        m = re.match(r"(\d+)_", os.path.basename(path))
        if m:
            out.append((int(m.group(1)), path))
    return out


def c_sources(root):
    for d, _, files in os.walk(os.path.join(root, "service")):
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def problems(root):
    found = []
    old_c = re.compile(r"""['"]blocked['"]""")
    for path in c_sources(root):
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if old_c.search(line):
                found.append(f"{path}:{n}: the old state name 'blocked': {line.strip()}")
    old_sql = [(re.compile(r"'blocked'|jobs_tenant_blocked"), "the old state name 'blocked'"),
               (re.compile(r"state\s*=\s*'waiting'\s+THEN\s+'running'", re.I), "'waiting' shown as 'running'")]
    for number, path in migrations(root):
        if number <= CONVERTED_BY:
            continue
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            for pattern, why in old_sql:
                if pattern.search(line):
                    found.append(f"{path}:{n}: {why}: {line.strip()}")
    # the newest CHECK on jobs.state against job_state.c's table
    checks = []
    for _, path in migrations(root):
        text = open(path, encoding="utf-8").read()
        checks += re.findall(r"jobs_state_check\s+CHECK\s*\(state IN \(([^)]*)\)\)", text)
        checks += re.findall(r"state\s+text NOT NULL DEFAULT 'queued'\s+CHECK \(state IN \(([^)]*)\)\)", text)
    if not checks:
        return found + ["no CHECK on jobs.state found in migrations/"]
    sql_states = set(re.findall(r"'(\w+)'", checks[-1]))
    c_table = open(os.path.join(root, "service", "jobs", "job_state.c"), encoding="utf-8").read()
    c_states = set(re.findall(r'\[GJ_JOB_\w+\] = \{ "(\w+)", "\w+" \}', c_table))
    if sql_states != c_states:
        found.append(f"jobs.state allows {sorted(sql_states)} but job_state.c names {sorted(c_states)}")
    # the public states: job_state.c's list, the API's description of a job's state
    m = re.search(r"public_states\[\] = \{([^}]*)\}", c_table)
    public = re.findall(r'"(\w+)"', m.group(1)) if m else []
    spec = open(os.path.join(root, "openapi", "openapi.yaml"), encoding="utf-8").read()
    m = re.search(r"JobState:\s+type: string\s+enum: \[([^\]]*)\]", spec)
    listed = [name.strip() for name in m.group(1).split(",")] if m else []
    if not public or listed != public:
        found.append(f"openapi.yaml's JobState {listed} is not job_state.c's public states {public}")
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = problems(root)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
