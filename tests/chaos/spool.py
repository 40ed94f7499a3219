"""The server's upload spool as a test sees it: its open files under DATA_DIR/spool
(unnamed, O_TMPFILE: '.../spool/#123 (deleted)'), and that none is left."""
import os
import time


def spool_files(srv):
    fd_dir = f"/proc/{srv.proc.pid}/fd"
    out = []
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if "/spool/" in target:
            out.append(target)
    return out


def wait_spool_files(srv, n, timeout=5):
    """Waits until the server holds n spool files; returns them."""
    deadline = time.time() + timeout
    while len(spool_files(srv)) != n and time.time() < deadline:
        time.sleep(0.05)
    files = spool_files(srv)
    assert len(files) == n, files
    return files


def wait_no_spool(srv, timeout=5):
    wait_spool_files(srv, 0, timeout)
    assert os.listdir(os.path.join(srv.data_dir, "spool")) == [], "a spool file has a name"
