"""Secrets from files with real `gpujobd serve` processes: the admin key of
GPUJOBD_ADMIN_KEY_FILE registered on an empty database (none made, written or logged),
a second key file on a database that has one warned about and refused; the database
password of GPUJOBD_DATABASE_PASSWORD_FILE against a PostgreSQL that asks for one
(scram-sha-256); files other users could read refused at start with one clear line;
no secret in any log."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, Harness, free_port, run_tests  # noqa: E402

H = None
KEY = "gjk_" + "Qk9PVFNUUkFQLWtleS1mcm9tLWEtU2VjcmV0LXZvbHVtZQ"[:43]
OTHER = "gjk_" + "b3RoZXIta2V5LW5vdC1yZWdpc3RlcmVkLWFueXdoZXJlLg"[:43]
PASSWORD = "pw-from-a-file:Secret volume 42"
DB_USER = "gj_pw"


def setup():
    global H
    H = Harness()
    # A role that must give its password, on a database of its own.
    H.sql(f"CREATE ROLE {DB_USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
    H.sql(f"CREATE DATABASE gjpw OWNER {DB_USER}")
    hba = os.path.join(H.pgdir, "pg_hba.conf")
    with open(hba) as f:
        rules = f.read()
    with open(hba, "w") as f:
        f.write(f"local gjpw {DB_USER} scram-sha-256\n" + rules)
    H.sql("SELECT pg_reload_conf()")


def secret(name, text, mode=0o600):
    path = os.path.join(H.tmp, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def start_fails(args, env):
    """gpujobd serve that must refuse to start: (exit code, its output)."""
    cmd = [GPUJOBD, "serve", "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
           os.path.join(H.tmp, "refused"), "--database-url", H.url] + args
    r = subprocess.run(cmd, env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r
    return r.returncode, r.stdout + r.stderr


def test_admin_key_file_registered_never_made():
    env = {"GPUJOBD_ADMIN_KEY_FILE": secret("admin.key", KEY + "\n", 0o400)}
    srv = H.start_server(env=env)
    assert not os.path.exists(os.path.join(srv.data_dir, "admin.key"))
    c = srv.client(key=KEY)
    assert c.request("GET", "/v1/gpus").status == 200
    assert c.request("POST", "/v1/api-keys", json={"tenant": "t1", "role": "user"}).status == 201
    # a second replica given the same Secret: the key is there, nothing made
    srv2 = H.start_server(env=env)
    assert not os.path.exists(os.path.join(srv2.data_dir, "admin.key"))
    assert srv2.client(key=KEY).request("GET", "/v1/gpus").status == 200
    assert H.scalar("SELECT count(*) FROM api_keys WHERE role = 'admin'") == "1"
    assert "registered the admin API key" in srv.log_text()
    for s in (srv, srv2):
        assert KEY not in s.log_text() and KEY[4:20] not in s.log_text()


def test_other_key_file_warned_not_registered():
    env = {"GPUJOBD_ADMIN_KEY_FILE": secret("other.key", OTHER + "\n")}
    srv = H.start_server(env=env)
    log = srv.log_text()
    assert "is not an admin key of this database" in log and "other.key" in log, log[-2000:]
    assert OTHER not in log
    assert srv.client(key=OTHER).request("GET", "/v1/gpus").status == 401
    assert srv.client(key=KEY).request("GET", "/v1/gpus").status == 200


def test_loose_files_refused_at_start():
    for mode in (0o644, 0o604, 0o660):
        path = secret("loose.key", KEY + "\n", mode)
        code, out = start_fails([], {"GPUJOBD_ADMIN_KEY_FILE": path})
        assert code == 2, (code, out)
        assert f"mode {mode:04o}" in out and "--admin-key-file" in out and "chmod 600" in out, out
        assert KEY not in out
    code, out = start_fails([], {"GPUJOBD_ADMIN_KEY_FILE": secret("bad.key", "hunter2\n")})
    assert "does not hold an API key" in out and "hunter2" not in out, out
    pw = secret("loose.pw", PASSWORD + "\n", 0o640 if os.geteuid() != 0 else 0o644)
    code, out = start_fails([], {"GPUJOBD_DATABASE_PASSWORD_FILE": pw})
    assert code == 2 and "--database-password-file" in out and PASSWORD not in out, out


def pw_url():
    return f"postgresql:///gjpw?host={H.sockdir}&user={DB_USER}"


def test_database_password_from_file():
    # without it, PostgreSQL refuses the connection and the server says why
    code, out = start_fails(["--database-url", pw_url()], {})
    assert "password" in out and "cannot connect to the database" in out, out
    env = {"GPUJOBD_DATABASE_PASSWORD_FILE": secret("db.pw", PASSWORD + "\n"),
           "GPUJOBD_ADMIN_KEY_FILE": secret("admin2.key", KEY + "\n")}
    srv = H.start_server(["--database-url", pw_url()], env=env)
    c = srv.client(key=KEY)
    assert c.request("GET", "/v1/gpus").status == 200
    # the migrate subcommand reads it too
    r = subprocess.run([GPUJOBD, "migrate", "--database-url", pw_url()],
                       env=dict(os.environ, GPUJOBD_DATABASE_PASSWORD_FILE=env["GPUJOBD_DATABASE_PASSWORD_FILE"]),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    assert PASSWORD not in r.stdout + r.stderr
    srv.terminate()
    assert PASSWORD not in srv.log_text() and KEY not in srv.log_text()


if __name__ == "__main__":
    setup()
    run_tests([test_admin_key_file_registered_never_made, test_other_key_file_warned_not_registered,
               test_loose_files_refused_at_start, test_database_password_from_file])
