"""serve.py — a real PostgreSQL and a real `gpujobd serve` over HTTPS (tests/integration/harness.py)
for the browser tests, which are written in JavaScript (Playwright).

    /usr/bin/python3 serve.py [gpujobd serve flags...]

Prints one line of JSON: {"url", "admin_key", "data_dir"}; then reads commands, one JSON object
a line, and answers each with one line of JSON:

    {"sql": "SELECT ..."}     -> {"rows": [[...], ...]}      (psql, the test's database)
    {"log": true}             -> {"log": "..."}              (the server's log so far)
    {"dicom": "PATH"}         -> {"path": "PATH"}            (a chest-like DX image written there by
                                                              DCMTK's img2dcm and dcmodify, chaoslib)

and stops everything when its standard input closes.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
from harness import Harness  # noqa: E402
from chaoslib import make_dicom  # noqa: E402


def main():
    h = Harness()
    try:
        srv = h.start_server(args=sys.argv[1:], env={"GPUJOBD_PG_NOSYNC": "1"})
        print(json.dumps({"url": f"https://127.0.0.1:{srv.port}", "admin_key": srv.admin_key,
                          "data_dir": srv.data_dir}), flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            try:
                if "sql" in cmd:
                    out = {"rows": h.sql(cmd["sql"])}
                elif "dicom" in cmd:
                    make_dicom(cmd["dicom"], size=256)
                    out = {"path": cmd["dicom"]}
                elif "log" in cmd:
                    out = {"log": srv.log_text()}
                else:
                    out = {"error": f"unknown command {cmd}"}
            except Exception as e:  # the test sees why
                out = {"error": str(e)}
            print(json.dumps(out), flush=True)
    finally:
        h.close()


if __name__ == "__main__":
    main()
