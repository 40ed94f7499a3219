"""One HTTP/1.1 request over its own TLS connection whose body the test sends at its own
pace (slow uploads, stalls, bodies cut short), and whose answer it can read while the
body is still unsent. Standard library only."""
import select
import socket
import ssl
import time


class RawRequest:
    def __init__(self, srv, method, path, headers, length=None, chunked=False):
        raw = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
        self.sock = srv.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{srv.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        self.sent = 0

    def send(self, data):
        """Sends data; False when the server has closed the connection."""
        try:
            self.sock.sendall(data)
            self.sent += len(data)
            return True
        except (OSError, ssl.SSLError):
            return False

    def readable(self):
        """True when the server sent something (an answer, or the end of the connection)."""
        if self.buf or self.sock.pending():
            return True
        r, _, _ = select.select([self.sock], [], [], 0)
        return bool(r)

    def response(self, timeout=30):
        """(status, headers, body) of the answer; raises on a connection closed without one."""
        deadline = time.time() + timeout
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end >= 0:
                lines = self.buf[:head_end].decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ")[1])
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                if len(self.buf) >= head_end + 4 + n:
                    return status, headers, self.buf[head_end + 4:head_end + 4 + n]
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"no complete answer in {timeout}s (have {self.buf[:200]!r})")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed without an answer (have {self.buf[:200]!r})")
            self.buf += chunk

    def closed_by_server(self, timeout):
        """True when the server ends the connection (EOF or reset) within timeout, having
        sent nothing more."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.time()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionError, ssl.SSLError, OSError):
                return True
            if not chunk:
                return True
            self.buf += chunk
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
