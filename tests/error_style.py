#!/usr/bin/env python3
"""Issue 25: the service reports errors one way: a layer below the routes fills a struct
gj_error (status, field, message) and the route answers it once (gj_respond_error,
carmin_respond_error). This keeps the submit codes from growing back into a second style:
enum gj_submit_rc keeps its members (a new refusal of gj_queue_submit is worded in
out->err, not added as a code for every route to word), and the refusals gj_queue_submit
words are named nowhere outside service/jobs/ (a route answers out->err instead).
Usage: error_style.py ROOT"""
import os
import re
import sys

# every code as it stands; callers outside service/jobs/ act only on OK, DUPLICATE (a replay),
# LEASE_LOST, INPUT_GONE (which a rerun and CARMIN word in their own terms) and ERROR
SUBMIT_CODES = {"GJ_SUBMIT_OK", "GJ_SUBMIT_DUPLICATE", "GJ_SUBMIT_LEASE_LOST", "GJ_SUBMIT_INPUT_GONE",
                "GJ_SUBMIT_UPSTREAM_GONE", "GJ_SUBMIT_UPSTREAM_FAILED", "GJ_SUBMIT_NO_OUTPUT",
                "GJ_SUBMIT_CHAIN_TOO_DEEP", "GJ_SUBMIT_TOO_MANY_WAITING", "GJ_SUBMIT_ERROR"}
WORDED_BELOW = {"GJ_SUBMIT_UPSTREAM_GONE", "GJ_SUBMIT_UPSTREAM_FAILED", "GJ_SUBMIT_NO_OUTPUT",
                "GJ_SUBMIT_CHAIN_TOO_DEEP", "GJ_SUBMIT_TOO_MANY_WAITING"}


def problems(root):
    found = []
    queue_h = open(os.path.join(root, "service", "jobs", "queue.h"), encoding="utf-8").read()
    m = re.search(r"enum gj_submit_rc \{(.*?)\};", queue_h, re.S)
    if not m:
        return ["service/jobs/queue.h: no enum gj_submit_rc found"]
    members = set(re.findall(r"\b(GJ_SUBMIT_\w+)\s*=", m.group(1)))
    for extra in sorted(members - SUBMIT_CODES):
        found.append(f"service/jobs/queue.h: new submit code {extra}: word the refusal in out->err instead")
    service = os.path.join(root, "service")
    for d, _, files in os.walk(service):
        rel = os.path.relpath(d, service)
        if rel == "jobs" or rel.startswith("jobs" + os.sep):
            continue
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                for code in sorted(WORDED_BELOW & set(re.findall(r"\bGJ_SUBMIT_\w+", line))):
                    found.append(f"service/{os.path.relpath(path, service)}:{n}: {code} answered by the route; "
                                 f"answer gj_queue_submit's out.err (gj_respond_error) instead")
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = problems(root)
    for p in found:
        print(p)
    if found:
        return 1
    print("error style: one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
