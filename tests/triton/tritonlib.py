"""What the triton suite's tests share: a gpujobd started by tests/integration/harness.py
(real PostgreSQL, real HTTPS) and NVIDIA's tritonclient.http pointed at it, unchanged.

The client is set up as a Triton user would for a server behind TLS with an API key: ssl=True
with the server's CA (ssl_context_factory) and the key sent by a client plugin (the public
InferenceServerClient.register_plugin API), so every call carries Authorization: Bearer."""
import os
import ssl
import sys

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
sys.path.insert(0, os.path.join(SRC, "tests", "conformance", "tritonclient"))

import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402,F401
from harness import Harness, run_tests  # noqa: E402,F401

DEMO = "chest-xray-demo"
DEMO_ONNX = os.path.join(SRC, "models", DEMO, "1", "model.onnx")


class BearerKey:
    """A tritonclient plugin: adds the API key to every request's headers."""

    def __init__(self, key):
        self.key = key

    def __call__(self, request):
        request.headers["Authorization"] = f"Bearer {self.key}"


def client(srv, key=None, concurrency=1, **kw):
    """tritonclient.http.InferenceServerClient for server srv (harness.Server), over HTTPS
    trusting the server's own certificate; key: the API key (default the admin's; "" none)."""
    cafile = os.path.join(srv.data_dir, "tls", "cert.pem")
    c = httpclient.InferenceServerClient(
        f"127.0.0.1:{srv.port}", ssl=True, concurrency=concurrency,
        ssl_context_factory=lambda: ssl.create_default_context(cafile=cafile), **kw)
    key = srv.admin_key if key is None else key
    if key:
        c.register_plugin(BearerKey(key))
    return c
