"""The image's entrypoint and healthcheck (deploy/docker/entrypoint.sh, healthcheck.sh), run
here as the image runs them: the dispatch checked with a fake gpujobd that records its argv and
pid (exec: the pid must be the entrypoint's own); the container checks (data directory, Secret
files, passwd entry) with the real failure each guards against; the real gpujobd behind it,
refusing a bad setting, serving on a real PostgreSQL and on its embedded default as an
unprivileged user (the image's way), answering the healthcheck, and stopping on SIGTERM."""

import http.client
import os
import pwd
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.environ.get("GJ_SOURCE_ROOT", "."), "tests", "integration"))
from harness import GPUJOBD, Harness, free_port, run_tests  # noqa: E402

ROOT = os.environ.get("GJ_SOURCE_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
ENTRYPOINT = os.path.join(ROOT, "deploy", "docker", "entrypoint.sh")
HEALTHCHECK = os.path.join(ROOT, "deploy", "docker", "healthcheck.sh")
IS_ROOT = os.getuid() == 0
TMP = tempfile.mkdtemp(prefix="gj-entrypoint-")
os.chmod(TMP, 0o755)

FAKE = """#!/bin/sh
# fake gpujobd: records its pid and arguments, one a line
{ echo "$$"; for a in "$@"; do echo "$a"; done; } > "%s"
"""


def fake_bin():
    """A PATH directory whose gpujobd is the fake; returns (dir, record file)."""
    d = tempfile.mkdtemp(dir=TMP)
    record = os.path.join(d, "record")
    with open(os.path.join(d, "gpujobd"), "w") as f:
        f.write(FAKE % record)
    os.chmod(os.path.join(d, "gpujobd"), 0o755)
    os.chmod(d, 0o1777)  # the fake writes its record as whichever user the test switches to
    return d, record


def real_bin():
    """A PATH directory whose gpujobd is the build's binary."""
    d = tempfile.mkdtemp(dir=TMP)
    os.symlink(os.path.abspath(GPUJOBD), os.path.join(d, "gpujobd"))
    os.chmod(d, 0o755)
    return d


def clean_env(bindir, **extra):
    env = {"PATH": bindir + ":/usr/local/bin:/usr/bin:/bin"}
    env.update(extra)
    return env


def entrypoint(args, env, as_user=None, **kw):
    cmd = ["sh", ENTRYPOINT] + list(args)
    if as_user:
        pw = pwd.getpwnam(as_user) if isinstance(as_user, str) else None
        uid, gid = (pw.pw_uid, pw.pw_gid) if pw else (as_user, as_user)
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"] + cmd
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def run_fake(args, **env_extra):
    """Runs the entrypoint with the fake gpujobd; returns (proc, stderr, recorded argv or None)."""
    bindir, record = fake_bin()
    data = os.path.join(TMP, "data-ok")
    os.makedirs(data, exist_ok=True)
    env = clean_env(bindir, GPUJOBD_DATA_DIR=data)
    env.update(env_extra)
    p = entrypoint(args, env)
    _, err = p.communicate(timeout=30)
    if not os.path.exists(record):
        return p, err, None
    with open(record) as f:
        lines = f.read().splitlines()
    if int(lines[0]) != p.pid:
        raise AssertionError(f"gpujobd ran as pid {lines[0]}, not in place of the entrypoint ({p.pid}): no exec")
    return p, err, lines[1:]


def expect_refusal(p, err, argv, *needles):
    if p.returncode != 2:
        raise AssertionError(f"exit {p.returncode}, expected 2; stderr: {err}")
    if argv is not None:
        raise AssertionError(f"gpujobd ran anyway with {argv}")
    if len(err.strip().splitlines()) != 1:
        raise AssertionError(f"expected one line, got: {err!r}")
    for n in needles:
        if n not in err:
            raise AssertionError(f"{n!r} not in the message: {err!r}")


# ------------------------------------------------------------------ dispatch (fake gpujobd)

def test_no_arguments_exec_serve():
    p, err, argv = run_fake([])
    assert p.returncode == 0 and argv == ["serve"], (p.returncode, argv, err)


def test_options_only_become_serve_options():
    p, err, argv = run_fake(["--role", "api", "--listen=0.0.0.0:8080", "--insecure-http"])
    assert argv == ["serve", "--role", "api", "--listen=0.0.0.0:8080", "--insecure-http"], (argv, err)


def test_commands_pass_through_unchanged():
    for args in (["serve", "--role", "worker"], ["migrate", "--database-url", "postgresql://db/x"], ["version"],
                 ["run", "noop", "--params", "p.json", "--out", "o"], ["dicom", "info", "f.dcm"]):
        p, err, argv = run_fake(args)
        assert p.returncode == 0 and argv == args, (args, argv, err)


def test_another_program_runs_as_given():
    bindir, _ = fake_bin()
    p = entrypoint(["echo", "hello from the image"], clean_env(bindir))
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and out == "hello from the image\n", (p.returncode, out, err)


def test_unknown_command_is_named():
    p, err, argv = run_fake(["sevre"])
    expect_refusal(p, err, argv, "unknown command 'sevre'", "serve, migrate")


# ------------------------------------------------------------------ container checks

def test_data_dir_that_is_a_file():
    f = os.path.join(TMP, "a-file")
    open(f, "w").close()
    p, err, argv = run_fake(["serve"], GPUJOBD_DATA_DIR=f)
    expect_refusal(p, err, argv, "GPUJOBD_DATA_DIR", f, "not a directory")


def test_data_dir_the_user_cannot_write():
    d = os.path.join(TMP, "root-only")
    os.makedirs(d, mode=0o755, exist_ok=True)
    bindir, record = fake_bin()
    env = clean_env(bindir, GPUJOBD_DATA_DIR=d)
    if IS_ROOT:
        p = entrypoint(["serve"], env, as_user="nobody")
        uid = pwd.getpwnam("nobody").pw_uid
    else:
        os.chmod(d, 0o555)
        p = entrypoint(["serve"], env)
        uid = os.getuid()
    _, err = p.communicate(timeout=30)
    expect_refusal(p, err, None if not os.path.exists(record) else "ran", "not writable by uid %d" % uid, "fsGroup")
    # migrate with a database URL needs no data directory at all
    p = entrypoint(["migrate", "--database-url", "postgresql://db/x"], env, as_user="nobody" if IS_ROOT else None)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err


def test_data_dir_created_below_a_writable_parent():
    d = os.path.join(TMP, "new", "deeper", "data")
    p, err, argv = run_fake(["serve", "--data-dir", d])
    assert p.returncode == 0 and argv == ["serve", "--data-dir", d], (argv, err)


def test_secret_files():
    missing = os.path.join(TMP, "secrets", "admin.key")
    p, err, argv = run_fake(["serve"], GPUJOBD_ADMIN_KEY_FILE=missing)
    expect_refusal(p, err, argv, "GPUJOBD_ADMIN_KEY_FILE", missing, "Secret mounted")
    os.makedirs(os.path.dirname(missing), exist_ok=True)
    open(missing, "w").close()
    p, err, argv = run_fake(["serve"], GPUJOBD_ADMIN_KEY_FILE=missing)
    expect_refusal(p, err, argv, "is empty")
    with open(missing, "w") as f:
        f.write("gjk_" + "a" * 40 + "\n")
    p, err, argv = run_fake(["serve"], GPUJOBD_ADMIN_KEY_FILE=missing)
    assert p.returncode == 0 and argv == ["serve"], err
    p, err, argv = run_fake(["serve", "--tls-cert", "/nonexistent/tls.crt", "--tls-key", missing])
    expect_refusal(p, err, argv, "--tls-cert", "/nonexistent/tls.crt")
    for command in ("serve", "migrate"):   # the database password's file: both read it
        p, err, argv = run_fake([command, "--database-url", "postgresql://db/x"],
                                GPUJOBD_DATABASE_PASSWORD_FILE="/nonexistent/db.pw")
        expect_refusal(p, err, argv, "GPUJOBD_DATABASE_PASSWORD_FILE", "/nonexistent/db.pw")
    p, err, argv = run_fake(["serve", "--pseudonym-secret-file", "/nonexistent/pseudonym"])
    expect_refusal(p, err, argv, "--pseudonym-secret-file", "/nonexistent/pseudonym")


def test_uid_without_passwd_entry_and_embedded_postgres():
    if not IS_ROOT:
        return  # needs to switch to a uid that has no passwd entry
    uid = 4242
    while True:
        try:
            pwd.getpwuid(uid)
            uid += 1
        except KeyError:
            break
    d = tempfile.mkdtemp(dir=TMP)
    os.chown(d, uid, uid)
    bindir, record = fake_bin()
    p = entrypoint(["serve"], clean_env(bindir, GPUJOBD_DATA_DIR=d), as_user=uid)
    _, err = p.communicate(timeout=30)
    expect_refusal(p, err, None if not os.path.exists(record) else "ran", f"uid {uid} has no entry", "--database-url")
    p = entrypoint(["serve", "--database-url", "postgresql://db/x"], clean_env(bindir, GPUJOBD_DATA_DIR=d), as_user=uid)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err


# ------------------------------------------------------------------ the real gpujobd

def test_real_gpujobd_refuses_a_bad_setting_in_one_line():
    p = entrypoint(["serve"], clean_env(real_bin(), GPUJOBD_DATA_DIR=TMP, GPUJOBD_ROLE="bogus"))
    _, err = p.communicate(timeout=60)
    expect_refusal(p, err, None, "GPUJOBD_ROLE (--role): expected all, api or worker", "bogus")


def healthcheck(pid):
    env = dict(os.environ, GJ_HEALTHCHECK_PID=str(pid))
    return subprocess.run(["sh", HEALTHCHECK], env=env, capture_output=True, text=True, timeout=60)


class Served:
    """gpujobd started through the entrypoint, its log in a file."""

    def __init__(self, args, env, as_user=None):
        self.log_path = os.path.join(tempfile.mkdtemp(dir=TMP), "log")
        self.log = open(self.log_path, "w")
        cmd = ["sh", ENTRYPOINT] + list(args)
        if as_user:
            pw = pwd.getpwnam(as_user)
            cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"] + cmd
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_log(self, needle, timeout=90):
        deadline = time.time() + timeout
        while needle not in self.text():
            if self.proc.poll() is not None:
                raise AssertionError(f"gpujobd exited {self.proc.returncode}: {self.text()[-3000:]}")
            if time.time() > deadline:
                raise AssertionError(f"no '{needle}' in {timeout}s: {self.text()[-3000:]}")
            time.sleep(0.1)

    def check_exec(self):
        with open(f"/proc/{self.proc.pid}/comm") as f:
            comm = f.read().strip()
        assert comm == "gpujobd", f"pid {self.proc.pid} is {comm!r}: the entrypoint did not exec gpujobd"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("gpujobd did not stop on SIGTERM within 60 s")
        self.log.close()
        assert self.proc.returncode == 0 and "stopped cleanly" in self.text(), \
            (self.proc.returncode, self.text()[-2000:])


def readyz(port, tls):
    if tls:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/readyz")
    return conn.getresponse().status


def serve_and_check(args, env, tls, port, as_user=None):
    """gpujobd through the entrypoint: exec'd in place, ready, healthy; after SIGTERM, a clean
    stop, and the healthcheck fails."""
    s = Served(args, env, as_user)
    try:
        s.wait_log("gpujobd ready")
        s.check_exec()
        assert readyz(port, tls) == 200
        h = healthcheck(s.proc.pid)
        assert h.returncode == 0, f"healthcheck failed on a serving gpujobd: {h.stderr}"
    finally:
        s.stop()
    h = healthcheck(s.proc.pid)
    assert h.returncode == 1, f"healthcheck passed for a stopped gpujobd: {h.stdout} {h.stderr}"


HARNESS = None


def test_serves_plain_http_set_by_environment():
    port = free_port()
    env = clean_env(real_bin(), GPUJOBD_DATA_DIR=tempfile.mkdtemp(dir=TMP), GPUJOBD_DATABASE_URL=HARNESS.url,
                    GPUJOBD_LISTEN=f"127.0.0.1:{port}", GPUJOBD_INSECURE_HTTP="true")
    serve_and_check([], env, tls=False, port=port)


def test_serves_tls_set_by_flags():
    port = free_port()
    env = clean_env(real_bin(), GPUJOBD_DATA_DIR=tempfile.mkdtemp(dir=TMP), GPUJOBD_DATABASE_URL=HARNESS.url)
    serve_and_check(["--listen", f"127.0.0.1:{port}", "--role", "api"], env, tls=True, port=port)


def test_worker_is_healthy_while_it_runs():
    env = clean_env(real_bin(), GPUJOBD_DATA_DIR=tempfile.mkdtemp(dir=TMP), GPUJOBD_DATABASE_URL=HARNESS.url)
    s = Served(["serve", "--role", "worker"], env)
    try:
        s.wait_log("gpujobd ready")
        s.check_exec()
        h = healthcheck(s.proc.pid)
        assert h.returncode == 0, h.stderr
    finally:
        s.stop()
    assert healthcheck(s.proc.pid).returncode == 1


def test_worker_with_metrics_listener_is_asked_there():
    """A worker with --metrics-listen (the production overlay's) is healthy when its /healthz
    there answers, not merely while its process exists: stopped (SIGSTOP), it is unhealthy."""
    port = free_port()
    env = clean_env(real_bin(), GPUJOBD_DATA_DIR=tempfile.mkdtemp(dir=TMP), GPUJOBD_DATABASE_URL=HARNESS.url,
                    GPUJOBD_METRICS_LISTEN=f"127.0.0.1:{port}")
    s = Served(["serve", "--role", "worker"], env)
    try:
        s.wait_log("gpujobd ready")
        s.check_exec()
        h = healthcheck(s.proc.pid)
        assert h.returncode == 0, h.stderr
        s.proc.send_signal(signal.SIGSTOP)
        try:
            h = healthcheck(s.proc.pid)
        finally:
            s.proc.send_signal(signal.SIGCONT)
        assert h.returncode == 1 and f"127.0.0.1:{port}/healthz" in h.stderr, (h.returncode, h.stderr)
    finally:
        s.stop()


def test_embedded_default_as_an_unprivileged_user():
    """The image's default run: no settings but the image's ENV, a non-root user (here
    `postgres`, one that exists, as uid 10001 does in the image), the embedded PostgreSQL
    initialised by gpujobd itself, the self-signed certificate, the healthcheck over TLS."""
    port = free_port()
    user = "postgres" if IS_ROOT else None
    data = tempfile.mkdtemp(dir=TMP)
    if user:
        pw = pwd.getpwnam(user)
        os.chown(data, pw.pw_uid, pw.pw_gid)
    env = clean_env(real_bin(), GPUJOBD_DATA_DIR=data, GPUJOBD_LISTEN=f"127.0.0.1:{port}", GPUJOBD_PG_NOSYNC="1")
    serve_and_check([], env, tls=True, port=port, as_user=user)
    for made in ("pg/PG_VERSION", "tls/cert.pem", "admin.key"):
        assert os.path.exists(os.path.join(data, made)), f"the default start made no {made}"


if __name__ == "__main__":
    HARNESS = Harness()
    try:
        run_tests([
            test_no_arguments_exec_serve, test_options_only_become_serve_options,
            test_commands_pass_through_unchanged, test_another_program_runs_as_given, test_unknown_command_is_named,
            test_data_dir_that_is_a_file, test_data_dir_the_user_cannot_write,
            test_data_dir_created_below_a_writable_parent, test_secret_files,
            test_uid_without_passwd_entry_and_embedded_postgres, test_real_gpujobd_refuses_a_bad_setting_in_one_line,
            test_serves_plain_http_set_by_environment, test_serves_tls_set_by_flags, test_worker_is_healthy_while_it_runs,
            test_worker_with_metrics_listener_is_asked_there, test_embedded_default_as_an_unprivileged_user,
        ])
    finally:
        HARNESS.close()
        shutil.rmtree(TMP, ignore_errors=True)
