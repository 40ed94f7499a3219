"""Network namespaces for the partition tests (issue 28): namespaces and veth pairs this test
makes and removes itself (iproute2), processes started inside them, and client sockets opened
inside them from this process. Nothing is added to the host's own namespace: every address
lives on a veth between two namespaces of the test.

Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); available() says whether it can run here.
"""
import contextlib
import ctypes
import os
import subprocess

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def available():
    """(True, '') when namespaces can be made here, else (False, why)."""
    if os.geteuid() != 0:
        return False, "needs root (ip netns)"
    name = f"gjprobe{os.getpid()}"
    r = _ip("netns", "add", name, check=False)
    if r.returncode != 0:
        return False, f"ip netns add: {r.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return True, ""


class Namespaces:
    """Named namespaces (prefix + pid + tag) and veths between them; close() removes them all."""

    def __init__(self):
        self.prefix = f"gjp{os.getpid() % 100000}"
        self.names = []

    def add(self, tag):
        name = self.prefix + tag
        _ip("netns", "add", name)
        self.names.append(name)
        _ip("-n", name, "link", "set", "lo", "up")
        return name

    def link(self, ns_a, addr_a, ns_b, addr_b, tag):
        """A veth pair between two of these namespaces, addressed (a /30 each side) and up.
        Returns (device in ns_a, device in ns_b)."""
        dev_a, dev_b = f"{self.prefix}{tag}a", f"{self.prefix}{tag}b"
        _ip("-n", ns_a, "link", "add", dev_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b)
        _ip("-n", ns_a, "addr", "add", f"{addr_a}/30", "dev", dev_a)
        _ip("-n", ns_b, "addr", "add", f"{addr_b}/30", "dev", dev_b)
        _ip("-n", ns_a, "link", "set", dev_a, "up")
        _ip("-n", ns_b, "link", "set", dev_b, "up")
        return dev_a, dev_b

    @staticmethod
    def set_link(ns, dev, up):
        """Cuts (down) or restores (up) a veth from one side. The far side keeps its address
        and route but loses carrier: what it sends is dropped without a word (a black hole,
        as a partition looks to it), nothing is refused or reset."""
        _ip("-n", ns, "link", "set", dev, "up" if up else "down")

    def close(self):
        """Removes every namespace made (their veths go with them). Processes inside must be
        stopped first, or their namespace lingers until they exit."""
        for name in reversed(self.names):
            _ip("netns", "del", name, check=False)
        self.names = []


def command_in(ns, argv, user=None):
    """argv run inside namespace ns (nsenter execs it: the process's pid is argv's), as user
    when given."""
    cmd = ["nsenter", f"--net=/run/netns/{ns}"]
    if user:
        import pwd
        pw = pwd.getpwnam(user)
        cmd += ["-S", str(pw.pw_uid), "-G", str(pw.pw_gid)]
    return cmd + ["--", *argv]


@contextlib.contextmanager
def entered(ns):
    """This thread inside namespace ns (a network namespace is per thread); sockets made
    meanwhile stay in it after the thread leaves."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(target)
        os.close(own)
