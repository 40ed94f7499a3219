"""`gpujobd submit|status|wait|fetch|cancel` against a real server over HTTPS: files sent in the
submit, --wait and --out, inputs from another job's output, --timeout, and the exit status a workflow
manager relies on (0 succeeded, 1 failed or canceled, 2 bad params or inputs with the server's
message naming the field, 3 server unreachable)."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, Harness, free_port, run_tests  # noqa: E402

H = SRV = None
ENV = {}


def setup():
    global H, SRV, ENV
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "2"])
    ENV = dict(os.environ, GPUJOBD_SERVER=f"https://127.0.0.1:{SRV.port}",
               GPUJOBD_CACERT=os.path.join(SRV.data_dir, "tls", "cert.pem"), GPUJOBD_API_KEY=SRV.admin_key)


def cli(*args, env=None, timeout=120):
    r = subprocess.run([GPUJOBD, *args], capture_output=True, text=True, env=env or ENV, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def write(name, data):
    path = os.path.join(H.tmp, name)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def test_submit_wait_out_with_a_file():
    params = write("p1.json", json.dumps({"sleep_ms": 300, "output_bytes": 777}))
    data = write("in.bin", b"\x01" * 12345)
    out = os.path.join(H.tmp, "out1")
    rc, so, se = cli("submit", "noop", "--params", params, "--input", f"input={data}", "--name", "cli-one",
                     "--label", "pipeline=test", "--wait", "--out", out)
    assert rc == 0, (rc, se)
    job_id = so.strip()
    assert len(job_id) == 36, so
    assert f"job {job_id}: succeeded" in se, se                      # one line per state change
    assert sorted(os.listdir(out)) == ["data.bin", "result.json"], os.listdir(out)
    assert os.path.getsize(os.path.join(out, "data.bin")) == 777
    assert json.load(open(os.path.join(out, "result.json")))["inputs"]["input"] == 12345
    job = SRV.client().json("GET", f"/v1/jobs/{job_id}", expect=200)
    assert job["name"] == "cli-one" and job["labels"] == {"pipeline": "test"}, job
    rc, so, _ = cli("status", job_id)
    assert rc == 0 and so == "succeeded\n", so
    rc, so, _ = cli("status", job_id, "--json")
    assert rc == 0 and json.loads(so)["id"] == job_id
    out2 = os.path.join(H.tmp, "out2")
    assert cli("fetch", job_id, "--out", out2)[0] == 0
    assert open(os.path.join(out2, "data.bin"), "rb").read() == open(os.path.join(out, "data.bin"), "rb").read()


def test_chain_by_job_output():
    rc, so, se = cli("submit", "noop", "--params", write("p2.json", '{"sleep_ms": 800, "output_bytes": 999}'))
    assert rc == 0, se
    parent = so.strip()
    out = os.path.join(H.tmp, "out3")
    rc, so, se = cli("submit", "noop", "--input", f"input=job:{parent}/data.bin", "--wait", "--out", out)
    assert rc == 0, se
    assert json.load(open(os.path.join(out, "result.json")))["inputs"]["input"] == 999
    assert "waiting" in se.splitlines()[0], se


def test_failed_job_exits_1():
    rc, so, se = cli("submit", "noop", "--params", write("p3.json", '{"fail_with": "no convergence"}'), "--wait")
    assert rc == 1 and "failed" in se and "no convergence" in se, (rc, se)
    assert cli("wait", so.strip())[0] == 1


def test_timed_out_job_exits_1():
    rc, so, se = cli("submit", "noop", "--params", write("p6.json", '{"sleep_ms": 60000}'), "--timeout", "1",
                     "--wait")
    assert rc == 1 and "failed" in se and "timed out" in se, (rc, se)
    assert SRV.client().json("GET", f"/v1/jobs/{so.strip()}", expect=200)["timeout_seconds"] == 1
    rc, so, se = cli("submit", "noop", "--timeout", "soon")
    assert rc == 2 and so == "" and "--timeout soon" in se, (rc, se)
    rc, so, se = cli("submit", "noop", "--timeout", "99999999")
    assert rc == 2 and so == "" and "timeout_seconds" in se and "HTTP 422" in se, (rc, se)


def test_bad_params_and_inputs_exit_2():
    rc, so, se = cli("submit", "noop", "--params", write("p4.json", '{"sleep_ms": "slow"}'))
    assert rc == 2 and so == "" and "sleep_ms" in se and "HTTP 422" in se, (rc, se)
    rc, so, _ = cli("submit", "--help")
    assert rc == 0 and "exit: 0 succeeded" in so, (rc, so)
    rc, _, se = cli("submit", "noop", "--frobnicate")
    assert rc == 2 and "--frobnicate" in se, se
    rc, _, se = cli("submit", "nosuchkind")
    assert rc == 2 and "kind" in se, se
    rc, _, se = cli("submit", "noop", "--input", "input=/nonexistent/file")
    assert rc == 2 and "cannot read" in se, se
    rc, _, se = cli("submit", "noop", "--params", write("p5.json", "{not json"))
    assert rc == 2 and "p5.json" in se, se
    rc, _, se = cli("status", "00000000-0000-0000-0000-000000000000")
    assert rc == 2 and "404" in se, se
    rc, _, se = cli("status", "00000000-0000-0000-0000-000000000000", env=dict(ENV, GPUJOBD_API_KEY="wrong"))
    assert rc == 2 and "401" in se, se


def test_unreachable_exits_3():
    t0 = time.time()
    rc, _, se = cli("status", "00000000-0000-0000-0000-000000000000", "--retries", "2",
                    "--server", f"https://127.0.0.1:{free_port()}")
    assert rc == 3 and "cannot be reached" in se, (rc, se)
    assert time.time() - t0 >= 1.4, "retried with backoff (0.5 s + 1 s)"
    t0 = time.time()
    rc, _, se = cli("status", "x", env=dict(ENV, GPUJOBD_CACERT=""))   # the system CAs do not know the server
    assert rc == 3 and "certificate" in se.lower(), se
    assert time.time() - t0 < 5, "an untrusted certificate is not retried"


def test_cancel_exits_1_on_wait():
    rc, so, se = cli("submit", "noop", "--params", write("p6.json", '{"sleep_ms": 30000}'))
    job_id = so.strip()
    SRV.client().wait_job(job_id, states=("running",), timeout=30)
    assert cli("cancel", job_id)[0] == 0
    rc, _, se = cli("wait", job_id)
    assert rc == 1 and "canceled" in se, (rc, se)
    assert cli("status", job_id)[1] == "canceled\n"


class LosingProxy:
    """TCP in front of the server (TLS passes through untouched). On its first connection it
    forwards the client's request but drops the server's answer to it and hangs up: the submit
    happened, the client never heard."""

    def __init__(self, port):
        self.target, self.conns = port, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            cl, _ = self.sock.accept()
            self.conns += 1
            up = socket.create_connection(("127.0.0.1", self.target))
            lose = self.conns == 1
            sent = [0]
            threading.Thread(target=self.pipe, args=(cl, up, sent, None), daemon=True).start()
            threading.Thread(target=self.pipe, args=(up, cl, sent, lose), daemon=True).start()

    @staticmethod
    def pipe(src, dst, sent, lose):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if lose is None:
                    sent[0] += len(data)
                elif lose and sent[0] > 4000:       # the request went through: its answer is lost
                    time.sleep(1.0)
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_retried_submit_makes_one_job():
    proxy = LosingProxy(SRV.port)
    data = write("idem.bin", os.urandom(20000))
    rc, so, se = cli("submit", "noop", "--input", f"input={data}", "--name", "idem-once",
                     "--server", f"https://127.0.0.1:{proxy.port}", timeout=60)
    assert rc == 0 and len(so.strip()) == 36, (rc, so, se)
    assert proxy.conns >= 2, "the first answer was lost and the submit retried"
    jobs = SRV.client().json("GET", "/v1/jobs?name=idem-once", expect=200)["jobs"]
    assert [j["id"] for j in jobs] == [so.strip()], jobs


def teardown():
    H.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_submit_wait_out_with_a_file, test_chain_by_job_output, test_failed_job_exits_1,
                   test_timed_out_job_exits_1,
                   test_bad_params_and_inputs_exit_2, test_unreachable_exits_3, test_cancel_exits_1_on_wait,
                   test_retried_submit_makes_one_job])
    finally:
        teardown()
