"""Issue 15's CARMIN 0.3.1 facade at /rest/ over real HTTPS and a real PostgreSQL: every answer is
checked against the CARMIN spec's own schemas (tests/conformance/carmin/carmin.yaml, read with
PyYAML and checked with python3-jsonschema). Keys in the apikey header (and as Bearer), CARMIN
error bodies (40101 for a missing or bad key), the platform, one pipeline per kind, the file
space under /vip/Home, and tenant isolation on every route."""
import base64
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import time
import warnings
import zipfile

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

ROOT = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
with open(os.path.join(ROOT, "tests", "conformance", "carmin", "carmin.yaml")) as f:
    SPEC = yaml.safe_load(f)

H = SRV = None
BODY_LIMIT = 1 << 20
A = B = None      # two tenants' keys


def check(value, schema_name):
    """value against the spec's components/schemas/<schema_name> (refs resolved in the spec)."""
    schema = {"$ref": "#/components/schemas/" + schema_name, "components": SPEC["components"]}
    jsonschema.validate(value, schema)
    return value


def call(method, path, key=None, body=None, headers=None, bearer=False):
    hdrs = dict(headers or {})
    if key and bearer:
        hdrs["Authorization"] = "Bearer " + key
    elif key:
        hdrs["apikey"] = key
    return SRV.client(key="").request(method, "/rest" + path, body=body, headers=hdrs)


def ok_json(r, status=200):
    assert r.status == status, (r.status, r.body[:400])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    return r.json()


def error(r, status, code):
    assert r.status == status, (r.status, r.body[:400])
    body = check(r.json(), "ErrorCodeAndMessage")
    assert body["errorCode"] == code, body
    return body


def setup():
    global H, SRV, A, B
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "1", "--max-body-bytes", str(BODY_LIMIT)])
    admin = SRV.client()
    A = admin.json("POST", "/v1/api-keys", {"tenant": "carmin-a", "label": "a"}, expect=201)["key"]
    B = admin.json("POST", "/v1/api-keys", {"tenant": "carmin-b", "label": "b"}, expect=201)["key"]


def test_platform_needs_no_key():
    p = check(ok_json(call("GET", "/platform")), "PlatformProperties")
    assert p["supportedAPIVersion"] == "0.3.1" and "Processing" in p["supportedModules"], p
    assert 40101 in [e["errorCode"] for e in p["APIErrorCodesAndMessages"]]


AUTHED = [("GET", "/pipelines"), ("GET", "/pipelines/recon"), ("GET", "/pipelines/recon/boutiquesdescriptor"),
          ("GET", "/path/vip/Home?action=list"), ("GET", "/path/vip/Home?action=exists"),
          ("PUT", "/path/vip/Home/x"), ("DELETE", "/path/vip/Home/x")]


def test_every_route_wants_a_key():
    for method, path in AUTHED:
        error(call(method, path), 401, 40101)
        error(call(method, path, key="gjk_not_a_key"), 401, 40101)
        error(call(method, path, key="gjk_not_a_key", bearer=True), 401, 40101)
    # the same key works in both places
    ok_json(call("GET", "/pipelines", key=A))
    ok_json(call("GET", "/pipelines", key=A, bearer=True))


def test_server_errors_are_carmin_shaped():
    """Errors the server raises before a CARMIN route runs come in CARMIN's shape under /rest/
    (a VIP client decodes every error alike), and stay problem+json elsewhere."""
    error(call("GET", "/no-such-route", key=A), 404, 40401)
    error(call("PATCH", "/platform", key=A), 405, 40501)
    r = SRV.client().request("GET", "/v1/no-such-route")
    assert r.status == 404 and r.headers["content-type"].startswith("application/problem+json"), r


def test_pipelines_are_the_kinds():
    kinds = {k["name"]: k for k in SRV.client(key=A).json("GET", "/v1/kinds", expect=200)["kinds"]}
    pipes = ok_json(call("GET", "/pipelines", key=A))
    for p in pipes:
        check(p, "Pipeline")
    assert {p["identifier"] for p in pipes} == set(kinds), pipes
    recon = check(ok_json(call("GET", "/pipelines/recon", key=A)), "Pipeline")
    files = {p["name"]: p for p in recon["parameters"] if p["type"] == "File"}
    assert set(files) == {i["name"] for i in kinds["recon"]["inputs"]}, recon
    for i in kinds["recon"]["inputs"]:
        assert files[i["name"]]["isOptional"] == (not i["required"])
    params = [p for p in recon["parameters"] if p["name"] == "params"]
    assert params and params[0]["type"] == "String", recon
    only = ok_json(call("GET", "/pipelines?property=kind&propertyValue=noop", key=A))
    assert [p["identifier"] for p in only] == ["noop"], only
    error(call("GET", "/pipelines?property=colour", key=A), 400, 40001)
    error(call("GET", "/pipelines/no-such-kind", key=A), 404, 40401)
    d = ok_json(call("GET", "/pipelines/recon/boutiquesdescriptor", key=A))
    assert d["name"] == "recon" and d["schema-version"] == "0.5", d
    assert {i["id"] for i in d["inputs"]} == set(files) | {"params"}, d
    assert d["custom"]["gpujobd-params-schema"] == kinds["recon"]["params_schema"]


def put_file(key, path, data):
    r = call("PUT", "/path" + path, key=key, body=data, headers={"Content-Type": "application/octet-stream"})
    p = check(ok_json(r, 201), "Path")
    assert r.headers["location"] == "/rest/path" + path, r.headers
    assert p["platformPath"] == path and not p["isDirectory"] and p["size"] == len(data), p
    return p


def test_file_space():
    d = check(ok_json(call("PUT", "/path/vip/Home/proj", key=A), 201), "Path")
    assert d["isDirectory"] and d["platformPath"] == "/vip/Home/proj", d
    error(call("PUT", "/path/vip/Home/proj", key=A), 409, 40901)             # exists
    error(call("PUT", "/path/vip/Home/none/sub", key=A), 409, 40901)         # no parent
    data = os.urandom(300000)
    put_file(A, "/vip/Home/proj/p.raw", data)
    put_file(A, "/vip/Home/proj/p.raw", data[:1000])                          # replaced
    put_file(A, "/vip/Home/proj/p.raw", data)
    error(call("PUT", "/path/vip/Home/proj/p.raw/x", key=A, body=b"1"), 409, 40901)  # parent is a file
    error(call("PUT", "/path/vip/Home/proj", key=A, body=b"1"), 409, 40901)          # a directory there
    r = call("GET", "/path/vip/Home/proj/p.raw?action=content", key=A)
    assert r.status == 200 and r.body == data, (r.status, len(r.body))
    md5 = check(ok_json(call("GET", "/path/vip/Home/proj/p.raw?action=md5", key=A)), "PathMD5")
    assert md5["md5"] == hashlib.md5(data).hexdigest()
    props = check(ok_json(call("GET", "/path/vip/Home/proj/p.raw?action=properties", key=A)), "Path")
    assert props["size"] == len(data) and props["mimeType"] == "application/octet-stream", props
    home = check(ok_json(call("GET", "/path/vip/Home?action=properties", key=A)), "Path")
    assert home["isDirectory"] and home["size"] == len(data), home
    listing = check(ok_json(call("GET", "/path/vip/Home?action=list", key=A)), "DirectoryList")
    assert [(p["platformPath"], p["size"]) for p in listing] == [("/vip/Home/proj", len(data))], listing
    listing = check(ok_json(call("GET", "/path/vip/Home/proj?action=list", key=A)), "DirectoryList")
    assert [p["platformPath"] for p in listing] == ["/vip/Home/proj/p.raw"], listing
    assert check(ok_json(call("GET", "/path/vip/Home/proj?action=exists", key=A)), "BooleanResponse")["exists"]
    assert not ok_json(call("GET", "/path/vip/Home/nope?action=exists", key=A))["exists"]
    error(call("GET", "/path/vip/Home/proj/p.raw?action=list", key=A), 400, 40001)
    # a directory's content is a tar archive, read here by GNU tar
    longdir, longfile = "d" * 60, "f" * 60 + ".bin"
    ok_json(call("PUT", "/path/vip/Home/proj/" + longdir, key=A), 201)
    put_file(A, "/vip/Home/proj/%s/%s" % (longdir, longfile), b"deep")
    r = call("GET", "/path/vip/Home/proj?action=content", key=A)
    assert r.status == 200 and r.headers["content-type"] == "application/x-tar", r
    assert int(r.headers["content-length"]) == len(r.body) and len(r.body) % 512 == 0
    out = os.path.join(H.tmp, "untar")
    os.makedirs(out)
    subprocess.run(["tar", "-xf", "-", "-C", out], input=r.body, check=True)
    with open(os.path.join(out, "proj", "p.raw"), "rb") as f:
        assert f.read() == data
    with open(os.path.join(out, "proj", longdir, longfile), "rb") as f:
        assert f.read() == b"deep"
    assert call("DELETE", "/path/vip/Home/proj/" + longdir, key=A).status == 204
    error(call("GET", "/path/vip/Home/nope?action=properties", key=A), 404, 40401)
    error(call("GET", "/path/vip/Home/proj", key=A), 400, 40001)             # no action
    for bad in ("/etc/passwd", "/vip/Other/x", "/vip/Home/a/../b", "/vip/Home//x"):
        error(call("GET", "/path" + bad + "?action=exists", key=A), 400, 40001)
    # over the body limit: refused, nothing stored
    r = call("PUT", "/path/vip/Home/proj/big", key=A, body=b"x" * (BODY_LIMIT + 1))
    error(r, 413, 41301)          # the server's own limit, in CARMIN's shape under /rest/
    assert r.headers["content-type"].startswith("application/json"), r.headers
    assert not ok_json(call("GET", "/path/vip/Home/proj/big?action=exists", key=A))["exists"]
    # CARMIN's UploadData: a base64 File, its md5 checked; an empty Archive or another type refused; nothing
    # half-written (archives: test_archive_*)
    small = os.urandom(5000)

    def upload_json(path, **data):
        return call("PUT", "/path" + path, key=A, body=json.dumps(data).encode(),
                    headers={"Content-Type": "application/carmin+json"})
    r = upload_json("/vip/Home/proj/b64.bin", base64Content=base64.b64encode(small).decode(), type="File",
                    md5=hashlib.md5(small).hexdigest())
    assert check(ok_json(r, 201), "Path")["size"] == len(small)
    assert call("GET", "/path/vip/Home/proj/b64.bin?action=content", key=A).body == small
    for bad in ({"base64Content": base64.b64encode(small).decode(), "type": "File", "md5": "0" * 32},
                {"base64Content": "!!!", "type": "File"}, {"base64Content": "", "type": "Archive"}, {"type": "File"},
                {"base64Content": "", "type": "Folder"}):
        error(upload_json("/vip/Home/proj/bad.bin", **bad), 400, 40001)
    assert not ok_json(call("GET", "/path/vip/Home/proj/bad.bin?action=exists", key=A))["exists"]
    assert call("DELETE", "/path/vip/Home/proj/b64.bin", key=A).status == 204


def test_tenant_isolation():
    put_file(A, "/vip/Home/secret.txt", b"tenant A only")
    for action in ("content", "properties", "md5", "list"):
        error(call("GET", "/path/vip/Home/secret.txt?action=" + action, key=B), 404, 40401)
    assert not ok_json(call("GET", "/path/vip/Home/secret.txt?action=exists", key=B))["exists"]
    assert ok_json(call("GET", "/path/vip/Home?action=list", key=B)) == []
    assert ok_json(call("GET", "/path/vip/Home?action=properties", key=B))["size"] == 0
    r = call("GET", "/path/vip/Home?action=content", key=B)
    assert r.status == 200 and b"secret" not in r.body and b"proj" not in r.body, r.body[:600]
    error(call("DELETE", "/path/vip/Home/secret.txt", key=B), 404, 40401)
    put_file(B, "/vip/Home/secret.txt", b"B's own")                           # the same name, apart
    assert call("GET", "/path/vip/Home/secret.txt?action=content", key=A).body == b"tenant A only"
    assert call("GET", "/path/vip/Home/secret.txt?action=content", key=B).body == b"B's own"


# ---------- UploadData of type Archive: a zip made into a directory ----------

def zip_of(entries):
    """A zip made by Python's zipfile of (ZipInfo or name, bytes or None for a directory entry,
    compression) entries; names are written as given."""
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "Duplicate name" is one of the cases
        with zipfile.ZipFile(out, "w") as z:
            for info, data, compression in entries:
                if not isinstance(info, zipfile.ZipInfo):
                    info = zipfile.ZipInfo(info)
                    if info.filename.endswith("/"):
                        info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
                info.compress_type = compression
                z.writestr(info, data or b"")
    return out.getvalue()


def upload_archive(key, path, data, md5=True):
    body = {"base64Content": base64.b64encode(data).decode(), "type": "Archive"}
    if md5:
        body["md5"] = hashlib.md5(data).hexdigest()
    return call("PUT", "/path" + path, key=key, body=json.dumps(body).encode(),
                headers={"Content-Type": "application/carmin+json"})


def listing(key, path):
    return sorted(p["platformPath"] for p in check(ok_json(call("GET", "/path%s?action=list" % path, key=key)),
                                                   "DirectoryList"))


def assert_tree(key, root, files, dirs):
    """root holds exactly files (relative name -> bytes) and dirs, each read back by list, properties and
    content."""
    want = {}
    for name in list(files) + list(dirs):
        parent = os.path.dirname(name)
        want.setdefault(root + ("/" + parent if parent else ""), []).append(root + "/" + name)
    for d in [""] + sorted(dirs):
        path = root + ("/" + d if d else "")
        assert listing(key, path) == sorted(want.get(path, [])), (path, listing(key, path))
        assert check(ok_json(call("GET", "/path%s?action=properties" % path, key=key)), "Path")["isDirectory"]
    for name, data in files.items():
        props = check(ok_json(call("GET", "/path%s/%s?action=properties" % (root, name), key=key)), "Path")
        assert not props["isDirectory"] and props["size"] == len(data), (name, props)
        r = call("GET", "/path%s/%s?action=content" % (root, name), key=key)
        assert r.status == 200 and r.body == data, (name, r.status, len(r.body))
        md5 = ok_json(call("GET", "/path%s/%s?action=md5" % (root, name), key=key))["md5"]
        assert md5 == hashlib.md5(data).hexdigest(), name


ARCHIVE_FILES = {"top.bin": os.urandom(100000), "a/b/c.txt": b"nested, stored\n" * 50, "empty": b"",
                 "explicit/inner/deep.txt": b"under explicit directories\n" * 1000}
ARCHIVE_DIRS = ["a", "a/b", "explicit", "explicit/inner", "explicit/empty-dir"]


def test_archive_upload():
    """A zip by Python's zipfile (deflated and stored entries, explicit directory entries, one of
    them after the files that made it, an empty file and an empty directory) becomes a directory
    whose files read back byte for byte, also through the directory's own tar archive."""
    data = zip_of([("top.bin", ARCHIVE_FILES["top.bin"], zipfile.ZIP_DEFLATED),
                   ("a/b/c.txt", ARCHIVE_FILES["a/b/c.txt"], zipfile.ZIP_STORED),
                   ("a/", None, zipfile.ZIP_STORED),                  # a directory its files made already
                   ("empty", b"", zipfile.ZIP_DEFLATED),
                   ("explicit/", None, zipfile.ZIP_STORED), ("explicit/inner/", None, zipfile.ZIP_STORED),
                   ("explicit/empty-dir/", None, zipfile.ZIP_STORED),
                   ("explicit/inner/deep.txt", ARCHIVE_FILES["explicit/inner/deep.txt"], zipfile.ZIP_DEFLATED)])
    r = upload_archive(A, "/vip/Home/unzipped", data)
    p = check(ok_json(r, 201), "Path")
    assert r.headers["location"] == "/rest/path/vip/Home/unzipped", r.headers
    assert p["platformPath"] == "/vip/Home/unzipped" and p["isDirectory"], p
    assert p["size"] == sum(len(v) for v in ARCHIVE_FILES.values()), p
    assert_tree(A, "/vip/Home/unzipped", ARCHIVE_FILES, ARCHIVE_DIRS)
    r = call("GET", "/path/vip/Home/unzipped?action=content", key=A)
    out = os.path.join(H.tmp, "untar-archive")
    os.makedirs(out)
    subprocess.run(["tar", "-xf", "-", "-C", out], input=r.body, check=True)
    for name, content in ARCHIVE_FILES.items():
        with open(os.path.join(out, "unzipped", name), "rb") as f:
            assert f.read() == content, name
    # the same path again: it exists (as a directory creation is refused), nothing changes
    error(upload_archive(A, "/vip/Home/unzipped", zip_of([("other", b"x", zipfile.ZIP_STORED)])), 409, 40901)
    error(upload_archive(A, "/vip/Home/unzipped/top.bin", data), 409, 40901)        # a file there
    error(upload_archive(A, "/vip/Home/no-parent/x", data), 409, 40901)
    assert not ok_json(call("GET", "/path/vip/Home/unzipped/other?action=exists", key=A))["exists"]
    assert not ok_json(call("GET", "/path/vip/Home/no-parent?action=exists", key=A))["exists"]


def test_archive_made_by_zip_command():
    """A zip made by Info-ZIP's zip (its own extra fields, Unix modes, directory entries), without md5."""
    src = os.path.join(H.tmp, "zip-src")
    files = {"readme.txt": b"made by Info-ZIP\n" * 300, "data/raw.bin": os.urandom(20000), "data/sub/zero": b""}
    for name, content in files.items():
        os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
        with open(os.path.join(src, name), "wb") as f:
            f.write(content)
    os.makedirs(os.path.join(src, "lonely"))
    zipped = os.path.join(H.tmp, "by-zip.zip")
    subprocess.run(["zip", "-q", "-r", zipped, "."], cwd=src, check=True)
    with open(zipped, "rb") as f:
        data = f.read()
    assert check(ok_json(upload_archive(A, "/vip/Home/by-zip", data, md5=False), 201), "Path")["isDirectory"]
    assert_tree(A, "/vip/Home/by-zip", files, ["data", "data/sub", "lonely"])


def encrypted_zip():
    src = os.path.join(H.tmp, "enc-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "secret.txt"), "wb") as f:
        f.write(b"encrypted with ZipCrypto\n")
    out = os.path.join(H.tmp, "enc.zip")
    subprocess.run(["zip", "-q", "-P", "hunter2", out, "secret.txt"], cwd=src, check=True)
    with open(out, "rb") as f:
        return f.read()


def unix_entry(name, mode):
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


def corrupt_crc():
    data = bytearray(zip_of([("ok.txt", b"fine", zipfile.ZIP_STORED),
                             ("bad.txt", b"these bytes are changed after the CRC", zipfile.ZIP_STORED)]))
    at = bytes(data).index(b"these bytes")
    data[at] ^= 0xff
    return bytes(data)


OK_FIRST = ("ok-first.txt", b"written before the bad entry", zipfile.ZIP_DEFLATED)   # rolled back with it
ARCHIVE_REFUSALS = [
    ("absolute", zip_of([OK_FIRST, ("/etc/passwd", b"x", zipfile.ZIP_STORED)]), "is absolute"),
    ("dot-dot", zip_of([OK_FIRST, ("a/../../escape", b"x", zipfile.ZIP_STORED)]), '".." part'),
    ("dot", zip_of([OK_FIRST, ("a/./x", b"x", zipfile.ZIP_STORED)]), '"." part'),
    ("empty part", zip_of([OK_FIRST, ("a//x", b"x", zipfile.ZIP_STORED)]), "empty part"),
    # libarchive reads a '\\' as '/' (Windows tools write them): a Windows-style escape is a ".." part
    ("backslashes", zip_of([OK_FIRST, ("a\\..\\..\\x", b"x", zipfile.ZIP_STORED)]), '".." part'),
    ("not ASCII", zip_of([OK_FIRST, ("caf\u00e9", b"x", zipfile.ZIP_STORED)]), "not a plain name"),
    ("control character", zip_of([OK_FIRST, ("bell\x07", b"x", zipfile.ZIP_STORED)]), "not a plain name"),
    ("too long", zip_of([OK_FIRST, ("/".join(["d" * 100] * 5) + "/f", b"x", zipfile.ZIP_STORED)]),
     "makes a path of over 511 bytes"),
    ("symlink", zip_of([OK_FIRST, (unix_entry("link", stat.S_IFLNK | 0o777), b"/etc/passwd", zipfile.ZIP_STORED)]),
     "is a link"),
    ("character device", zip_of([OK_FIRST, (unix_entry("tty", stat.S_IFCHR | 0o644), b"", zipfile.ZIP_STORED)]),
     "not a file or a directory"),
    ("block device", zip_of([OK_FIRST, (unix_entry("sda", stat.S_IFBLK | 0o644), b"", zipfile.ZIP_STORED)]),
     "not a file or a directory"),
    ("socket", zip_of([OK_FIRST, (unix_entry("sock", stat.S_IFSOCK | 0o644), b"", zipfile.ZIP_STORED)]),
     "not a file or a directory"),
    ("duplicate file", zip_of([OK_FIRST, ("dup.txt", b"one", zipfile.ZIP_STORED),
                               ("dup.txt", b"two", zipfile.ZIP_STORED)]), "names a path an earlier entry made"),
    ("file over a directory", zip_of([OK_FIRST, ("d/x", b"one", zipfile.ZIP_STORED), ("d", b"two", zipfile.ZIP_STORED)]),
     "names a path an earlier entry made"),
    ("under a file", zip_of([OK_FIRST, ("f", b"one", zipfile.ZIP_STORED), ("f/x", b"two", zipfile.ZIP_STORED)]),
     "is under f, a file of the archive"),
    ("bad CRC", corrupt_crc(), "cannot be read"),
    ("not a zip", b"plain text, not a zip at all", "not a zip archive"),
    ("truncated zip", zip_of([OK_FIRST])[:40], "not a readable zip"),
    ("entries", zip_of([("%05d" % i, b"", zipfile.ZIP_STORED) for i in range(10001)]), "over 10000 entries"),
]


def assert_nothing_made(before_list, blobs_before, name):
    assert not ok_json(call("GET", "/path/vip/Home/refused?action=exists", key=A))["exists"], name
    assert listing(A, "/vip/Home") == before_list, name
    assert tenant_blobs("carmin-a") == blobs_before, name


def tenant_blobs(tenant):
    return int(H.scalar("SELECT count(*) FROM blobs b JOIN tenants t ON t.id = b.tenant_id WHERE t.name = '%s'"
                        % tenant))


def test_archive_refusals():
    """Each hostile or broken zip is refused with a message naming the problem, and nothing of it
    stays: not the directory, not the entries written before the bad one, not their blobs."""
    before, blobs = listing(A, "/vip/Home"), tenant_blobs("carmin-a")
    cases = ARCHIVE_REFUSALS + [("encrypted", encrypted_zip(), "is encrypted")]
    for name, data, message in cases:
        r = upload_archive(A, "/vip/Home/refused", data)
        assert r.status == 400, (name, r.status, r.body[:300])
        body = error(r, 400, 40001)
        assert message in body["errorMessage"] and "nothing was stored" in body["errorMessage"], (name, body)
        assert_nothing_made(before, blobs, name)
    # the md5, when given, is of the zip's bytes
    good = zip_of([OK_FIRST])
    body = json.dumps({"base64Content": base64.b64encode(good).decode(), "type": "Archive",
                       "md5": hashlib.md5(good + b"x").hexdigest()}).encode()
    body = error(call("PUT", "/path/vip/Home/refused", key=A, body=body,
                      headers={"Content-Type": "application/carmin+json"}), 400, 40001)
    assert "does not match its md5" in body["errorMessage"], body
    assert_nothing_made(before, blobs, "md5")
    # the entries are few but the paths they make (each entry's own directory too) are over the bound
    many = zip_of([("d%05d/x/" % i, None, zipfile.ZIP_STORED) for i in range(5001)])
    body = error(upload_archive(A, "/vip/Home/refused", many), 400, 40001)
    assert "makes over 10000 paths" in body["errorMessage"], body
    assert_nothing_made(before, blobs, "paths")


def test_archive_bomb():
    """Files inflating past --max-body-bytes (the test server's BODY_LIMIT) are refused as they
    inflate: one entry, several entries that only pass it together, and one whose headers claim a
    small size. Each zip is a few kilobytes; nothing stays."""
    before, blobs = listing(A, "/vip/Home"), tenant_blobs("carmin-a")
    one = zip_of([OK_FIRST, ("bomb", bytes(BODY_LIMIT + 1), zipfile.ZIP_DEFLATED)])
    together = zip_of([("part%d" % i, bytes(BODY_LIMIT // 3 + 1), zipfile.ZIP_DEFLATED) for i in range(3)])
    assert len(one) < 5000 and len(together) < 5000, (len(one), len(together))
    for name, data in (("one entry", one), ("together", together)):
        body = error(upload_archive(A, "/vip/Home/refused", data), 413, 41301)
        assert "over %d bytes" % BODY_LIMIT in body["errorMessage"], (name, body)
        assert_nothing_made(before, blobs, name)
    # the same bomb with its sizes rewritten to 10 bytes in both headers: what inflates counts
    lying = bytearray(zip_of([("bomb", bytes(4 * BODY_LIMIT), zipfile.ZIP_DEFLATED)]))
    size = (4 * BODY_LIMIT).to_bytes(4, "little")
    for at in (i for i in range(len(lying) - 4) if lying[i:i + 4] == size):
        lying[at:at + 4] = (10).to_bytes(4, "little")
    assert lying != bytearray(zip_of([("bomb", bytes(4 * BODY_LIMIT), zipfile.ZIP_DEFLATED)]))
    # libarchive inflates past the stated 10 bytes (it only warns at the end): the count stops it
    body = error(upload_archive(A, "/vip/Home/refused", bytes(lying)), 413, 41301)
    assert "over %d bytes" % BODY_LIMIT in body["errorMessage"], body
    assert_nothing_made(before, blobs, "lying sizes")
    # under the limit the same kind of file goes in
    fits = zip_of([("zeros", bytes(BODY_LIMIT - 1000), zipfile.ZIP_DEFLATED)])
    assert check(ok_json(upload_archive(A, "/vip/Home/fits", fits), 201), "Path")["size"] == BODY_LIMIT - 1000
    assert call("DELETE", "/path/vip/Home/fits", key=A).status == 204


def test_archive_tenant_isolation():
    """Another tenant sees none of the extracted files, and its own archive at the same path is apart."""
    for path in ("/vip/Home/unzipped", "/vip/Home/unzipped/top.bin", "/vip/Home/unzipped/a/b/c.txt"):
        assert not ok_json(call("GET", "/path%s?action=exists" % path, key=B))["exists"], path
        for action in ("content", "properties", "list"):
            error(call("GET", "/path%s?action=%s" % (path, action), key=B), 404, 40401)
    assert "/vip/Home/unzipped" not in listing(B, "/vip/Home")
    mine = zip_of([("top.bin", b"B's own", zipfile.ZIP_STORED)])
    assert check(ok_json(upload_archive(B, "/vip/Home/unzipped", mine), 201), "Path")["size"] == 7
    assert call("GET", "/path/vip/Home/unzipped/top.bin?action=content", key=B).body == b"B's own"
    assert call("GET", "/path/vip/Home/unzipped/top.bin?action=content", key=A).body == ARCHIVE_FILES["top.bin"]
    assert call("DELETE", "/path/vip/Home/unzipped", key=B).status == 204
    assert listing(A, "/vip/Home/unzipped/a/b") == ["/vip/Home/unzipped/a/b/c.txt"]


def test_delete_takes_the_tree_and_its_blobs():
    blobs = lambda: int(H.scalar("SELECT count(*) FROM blobs b JOIN tenants t ON t.id = b.tenant_id"  # noqa: E731
                                 " WHERE t.name = 'carmin-a'"))
    ok_json(call("PUT", "/path/vip/Home/tree", key=A), 201)
    ok_json(call("PUT", "/path/vip/Home/tree/sub", key=A), 201)
    before = blobs()
    put_file(A, "/vip/Home/tree/sub/f1", b"one")
    put_file(A, "/vip/Home/tree/f2", b"two")
    assert blobs() == before + 2
    error(call("DELETE", "/path/vip/Home", key=A), 400, 40001)
    r = call("DELETE", "/path/vip/Home/tree", key=A)
    assert r.status == 204, r
    assert blobs() == before
    for p in ("/vip/Home/tree", "/vip/Home/tree/sub/f1"):
        assert not ok_json(call("GET", "/path" + p + "?action=exists", key=A))["exists"]
    error(call("DELETE", "/path/vip/Home/tree", key=A), 404, 40401)
    assert call("GET", "/path/vip/Home/secret.txt?action=exists", key=A).json()["exists"]   # untouched
    # a file a job took as input, deleted from the space: the blob lives while the job does, then goes
    put_file(A, "/vip/Home/in.bin", b"input bytes")
    e = execution(A, {"name": "reads in.bin", "pipelineIdentifier": "noop", "inputValues": {"input": "/vip/Home/in.bin"},
                      "resultsLocation": "/vip/Home"})
    assert wait_execution(A, e["identifier"])["status"] == "Finished"
    assert call("DELETE", "/path/vip/Home/in.bin", key=A).status == 204
    assert blobs() == before + 2, blobs()             # in.bin, and result.json placed in /vip/Home/<id>
    assert call("DELETE", "/executions/" + e["identifier"], key=A).status == 204
    assert blobs() == before + 1, blobs()             # result.json stays: the space holds it
    assert call("DELETE", "/path/vip/Home/%s/result.json" % e["identifier"], key=A).status == 204
    assert blobs() == before, blobs()


GEOMETRY = {"type": "parallel2d", "angles_deg": {"start": 0, "step": 3, "count": 60},
            "detector": {"cols": 91, "spacing_u": 1.0}}
VOLUME = {"nx": 64, "ny": 64, "voxel_mm": 1.0}


def execution(key, body):
    e = check(ok_json(call("POST", "/executions", key=key, body=json.dumps(body).encode(),
                           headers={"Content-Type": "application/json"})), "Execution")
    assert e["identifier"] and e["status"] in ("Ready", "Running", "Finished"), e
    return e


def wait_execution(key, ident, timeout=40):
    deadline = time.time() + timeout
    while True:
        e = check(ok_json(call("GET", "/executions/" + ident, key=key)), "Execution")
        if e["status"] in ("Finished", "ExecutionFailed", "Killed") or time.time() > deadline:
            return e
        time.sleep(0.1)


def test_gateway_flow():
    """A gateway's way: projections uploaded into /vip/Home (made by a phantom execution here,
    downloaded, uploaded as the gateway would), a reconstruction run on them, polled, its
    results listed and downloaded from the file space."""
    ph = execution(A, {"name": "phantom", "pipelineIdentifier": "phantom",
                       "inputValues": {"params": json.dumps({"phantom": "shepp-logan", "geometry": GEOMETRY,
                                                             "volume": VOLUME})}})
    ph = wait_execution(A, ph["identifier"])
    assert ph["status"] == "Finished" and ph["endDate"] >= ph["startDate"], ph
    urls = ph["returnedFiles"]["results"]
    proj_url = [u for u in urls if u.endswith("/projections.nrrd?action=content")]
    assert proj_url and urls == sorted(urls), ph
    projections = call("GET", proj_url[0][len("/rest"):], key=A).body
    assert projections.startswith(b"NRRD"), projections[:20]
    # the gateway's upload
    ok_json(call("PUT", "/path/vip/Home/study", key=A), 201)
    ok_json(call("PUT", "/path/vip/Home/study/out", key=A), 201)
    put_file(A, "/vip/Home/study/projections.nrrd", projections)
    body = {"name": "fbp of the study", "pipelineIdentifier": "recon", "resultsLocation": "/vip/Home/study/out",
            "inputValues": {"projections": "/vip/Home/study/projections.nrrd",
                            "params": {"algorithm": "fbp", "filter": "ram-lak", "geometry": GEOMETRY,
                                       "volume": VOLUME}}}
    ex = execution(A, body)
    assert ex["pipelineIdentifier"] == "recon" and ex["name"] == "fbp of the study", ex
    ex = wait_execution(A, ex["identifier"])
    assert ex["status"] == "Finished", (ex, call("GET", "/executions/%s/stderr" % ex["identifier"], key=A).body)
    results = ok_json(call("GET", "/executions/%s/results" % ex["identifier"], key=A))
    rdir = "/vip/Home/study/out/" + ex["identifier"]   # a directory of the execution's own
    for p in results:
        check(p, "Path")
        assert p["platformPath"].startswith(rdir + "/") and p["executionId"] == ex["identifier"], p
    names = {p["platformPath"].rsplit("/", 1)[1]: p for p in results}
    assert "volume.nrrd" in names, names
    listing = ok_json(call("GET", "/path%s?action=list" % rdir, key=A))
    assert sorted(p["platformPath"] for p in listing) == sorted(p["platformPath"] for p in results)
    assert [p["platformPath"] for p in ok_json(call("GET", "/path/vip/Home/study/out?action=list", key=A))] == [rdir]
    vol = call("GET", "/path%s/volume.nrrd?action=content" % rdir, key=A)
    assert vol.status == 200 and vol.body.startswith(b"NRRD") and len(vol.body) == names["volume.nrrd"]["size"]
    # the same bytes as the job's own output
    job_out = SRV.client(key=A).request("GET", "/v1/jobs/%s/outputs/volume.nrrd" % ex["identifier"])
    assert job_out.status == 200 and job_out.body == vol.body
    out = call("GET", "/executions/%s/stdout" % ex["identifier"], key=A)
    assert out.status == 200 and out.headers["content-type"].startswith("text/plain") and out.body, out
    listed = ok_json(call("GET", "/executions", key=A))
    for e in listed:
        check(e, "Execution")
    assert [e["identifier"] for e in listed[:2]] == [ex["identifier"], ph["identifier"]], listed
    assert [e["identifier"] for e in ok_json(call("GET", "/executions?offset=1&limit=1", key=A))] == [ph["identifier"]]
    count = call("GET", "/executions/count", key=A)
    assert count.status == 200 and int(count.body) == len(listed), count
    assert call("PUT", "/executions/%s/play" % ex["identifier"], key=A).status == 204
    upd = lambda body: call("PUT", "/executions/" + ex["identifier"], key=A, body=json.dumps(body).encode(),  # noqa
                            headers={"Content-Type": "application/json"})
    assert upd({"name": "renamed", "pipelineIdentifier": "ignored"}).status == 204
    assert ok_json(call("GET", "/executions/" + ex["identifier"], key=A))["name"] == "renamed"
    assert SRV.client(key=A).json("GET", "/v1/jobs/" + ex["identifier"], expect=200)["name"] == "renamed"
    error(upd({"status": "Running"}), 400, 40001)
    error(upd({"identifier": ph["identifier"]}), 400, 40001)
    error(call("PUT", "/executions/%s/kill" % ex["identifier"], key=A), 409, 40901)   # it has ended
    # deleting the job keeps the files (the space owns them), deleting with deleteFiles takes them
    assert SRV.client(key=A).request("DELETE", "/v1/jobs/" + ph["identifier"]).status == 204
    assert call("GET", proj_url[0][len("/rest"):], key=A).body == projections
    error(call("GET", "/executions/" + ph["identifier"], key=A), 404, 40401)
    assert call("DELETE", "/executions/%s?deleteFiles=true" % ex["identifier"], key=A).status == 204
    assert not ok_json(call("GET", "/path%s?action=exists" % rdir, key=A))["exists"]   # emptied: gone
    assert ok_json(call("GET", "/path/vip/Home/study/out?action=exists", key=A))["exists"]   # the gateway's
    assert ok_json(call("GET", "/path/vip/Home/study/projections.nrrd?action=exists", key=A))["exists"]
    error(call("GET", "/executions/" + ex["identifier"], key=A), 404, 40401)


def test_execution_errors_and_kill():
    # each refusal's status, code and words (checked once, at the edge: carmin_respond_error)
    bad = [({"name": "x"}, 400, 40001, "an execution is {name (1 to 200 characters, no control characters), "
            "pipelineIdentifier, inputValues (an object), resultsLocation and timeout (optional)}"),
           ({"name": "x", "pipelineIdentifier": "nope", "inputValues": {}}, 404, 40401, "no pipeline nope"),
           ({"name": "x", "pipelineIdentifier": "recon", "inputValues": {"colour": "red"}}, 400, 40001,
            "pipeline recon has no parameter colour"),
           ({"name": "x", "pipelineIdentifier": "recon", "inputValues": {"projections": "/vip/Home/none"}}, 404,
            40401, "input projections: no file "),
           ({"name": "x", "pipelineIdentifier": "recon", "inputValues": {"params": "{not json"}}, 400, 40001,
            "params is a JSON object (or its text)"),
           ({"name": "x", "pipelineIdentifier": "noop", "inputValues": {}, "resultsLocation": "/vip/Home/secret.txt"},
            409, 40901, " is not a directory: it, or a directory above it, is a file"),
           ({"name": "x", "pipelineIdentifier": "recon", "inputValues": {"params": {"algorithm": "magic"}}}, 400,
            40001, "geometry: geometry is required"),   # the kind's field: its words
           ({"name": "x", "pipelineIdentifier": "noop", "inputValues": {}, "timeout": -1}, 400, 40001, "timeout")]
    before = int(call("GET", "/executions/count", key=A).body)
    for body, status, code, words in bad:
        got = error(call("POST", "/executions", key=A, body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"}), status, code)
        assert words in got["errorMessage"], (body, got)
    assert int(call("GET", "/executions/count", key=A).body) == before          # nothing half-made
    e = execution(A, {"name": "long", "pipelineIdentifier": "noop", "inputValues": {"params": {"sleep_ms": 20000}}})
    r = call("PUT", "/executions/%s/kill" % e["identifier"], key=A)
    assert r.status == 204, r
    assert wait_execution(A, e["identifier"])["status"] == "Killed"
    error(call("GET", "/executions/not-a-uuid", key=A), 404, 40401)


def test_delete_one_rule_for_both_apis():
    """Issue 25: DELETE /v1/jobs/{id} and CARMIN's DELETE /rest/executions/{id} follow one rule
    (ARCHITECTURE.md): a job no worker runs (queued, waiting for another job's output,
    finished) goes at once, 204; a running one is canceled and goes once it has stopped, 202.
    Each state is made twice, one job deleted through each API; each job is an execution too
    (a row of carmin_executions), so both APIs can name it."""
    v1 = SRV.client(key=A)

    def job(params, **kw):
        j = v1.submit("noop", params, **kw)
        H.sql("INSERT INTO carmin_executions (job_id, tenant_id, name, pipeline, input_values, results_location)"
              " SELECT id, tenant_id, 'del', 'noop', '{}', '/vip/Home' FROM jobs WHERE id = '%s'" % j["id"])
        return j["id"]

    def gone(ident, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if v1.request("GET", "/v1/jobs/" + ident).status == 404:
                break
            time.sleep(0.1)
        assert v1.request("GET", "/v1/jobs/" + ident).status == 404, ident
        error(call("GET", "/executions/" + ident, key=A), 404, 40401)

    def both(pair, state, status):
        for ident in pair:
            assert v1.json("GET", "/v1/jobs/" + ident, expect=200)["state"] == state, (ident, state)
        answers = (v1.request("DELETE", "/v1/jobs/" + pair[0]).status,
                   call("DELETE", "/executions/" + pair[1], key=A).status)
        assert answers == (status, status), (state, answers)

    # the one worker runs `busy`; what comes after waits behind it
    busy = job({"sleep_ms": 30000})
    v1.wait_job(busy, states=("running",), timeout=30)
    upstream = job({"sleep_ms": 30000, "output_bytes": 8})
    waiting = [job({}, inputs={"input": {"job": upstream, "output": "data.bin"}}) for _ in range(2)]
    both(waiting, "waiting", 204)
    queued = [job({}) for _ in range(2)]
    both(queued, "queued", 204)
    for ident in waiting + queued:
        gone(ident, timeout=0)
    # running: `busy` through /v1, then `upstream` (it runs next) through CARMIN
    assert v1.request("DELETE", "/v1/jobs/" + busy).status == 202
    v1.wait_job(upstream, states=("running",), timeout=30)
    assert call("DELETE", "/executions/" + upstream, key=A).status == 202
    gone(busy)
    gone(upstream)
    finished = {"succeeded": [job({}) for _ in range(2)],
                "failed": [job({"fail_with": "no"}, max_attempts=1) for _ in range(2)]}
    for pair in finished.values():
        for ident in pair:
            v1.wait_job(ident)
    finished["canceled"] = [job({"sleep_ms": 30000}) for _ in range(2)]
    for ident in finished["canceled"]:
        assert v1.request("POST", "/v1/jobs/%s/cancel" % ident).status in (200, 202)
        v1.wait_job(ident)
    for state, pair in finished.items():
        both(pair, state, 204)
        for ident in pair:
            gone(ident, timeout=0)
    # either way, one that is gone is not found
    assert v1.request("DELETE", "/v1/jobs/" + busy).status == 404
    error(call("DELETE", "/executions/" + busy, key=A), 404, 40401)


def test_execution_timeout():
    p = ok_json(call("GET", "/platform"))
    assert p["minAuthorizedExecutionTimeout"] == 0 and p["maxAuthorizedExecutionTimeout"] == 2592000, p
    assert "defaultExecutionTimeout" not in p, p                       # none unless the server sets one
    before = int(call("GET", "/executions/count", key=A).body)
    for t in (-1, "10", 1.5, 2592001):
        error(call("POST", "/executions", key=A, headers={"Content-Type": "application/json"},
                   body=json.dumps({"name": "t", "pipelineIdentifier": "noop", "inputValues": {},
                                    "timeout": t}).encode()), 400, 40001)
    assert int(call("GET", "/executions/count", key=A).body) == before
    # a run past its timeout is stopped: ExecutionFailed, and stderr says why
    slow = execution(A, {"name": "slow", "pipelineIdentifier": "noop", "timeout": 2,
                         "inputValues": {"params": {"sleep_ms": 60000}}})
    assert slow["timeout"] == 2, slow
    deadline = time.time() + 30
    while wait_execution(A, slow["identifier"], timeout=0)["status"] != "Running" and time.time() < deadline:
        time.sleep(0.1)
    # the one worker is busy: the next waits (Ready), and its timeout can still change
    later = execution(A, {"name": "later", "pipelineIdentifier": "noop", "inputValues": {}})
    assert "timeout" not in later, later
    r = call("PUT", "/executions/" + later["identifier"], key=A, body=b'{"timeout": 30}',
             headers={"Content-Type": "application/json"})
    assert r.status == 204, r
    assert ok_json(call("GET", "/executions/" + later["identifier"], key=A))["timeout"] == 30
    # a running one's cannot (its run keeps the limit it started with)
    error(call("PUT", "/executions/" + slow["identifier"], key=A, body=b'{"timeout": 600}',
               headers={"Content-Type": "application/json"}), 409, 40901)
    error(call("PUT", "/executions/" + later["identifier"], key=A, body=b'{"timeout": "1h"}',
               headers={"Content-Type": "application/json"}), 400, 40001)
    done = wait_execution(A, slow["identifier"])
    assert done["status"] == "ExecutionFailed" and done["timeout"] == 2, done
    assert done["endDate"] - done["startDate"] < 15, done
    assert b"timed out" in call("GET", "/executions/%s/stderr" % slow["identifier"], key=A).body
    assert wait_execution(A, later["identifier"])["status"] == "Finished"


def test_executions_are_the_tenants_own():
    e = execution(A, {"name": "a's", "pipelineIdentifier": "noop", "inputValues": {}})
    ident = e["identifier"]
    for method, suffix in (("GET", ""), ("PUT", ""), ("GET", "/results"), ("GET", "/stdout"), ("GET", "/stderr"),
                           ("PUT", "/play"), ("PUT", "/kill"), ("DELETE", "?deleteFiles=true")):
        error(call(method, "/executions/" + ident + suffix, key=B), 404, 40401)
        error(call(method, "/executions/" + ident + suffix), 401, 40101)
    assert ident not in [x["identifier"] for x in ok_json(call("GET", "/executions", key=B))]
    # B cannot run on A's file; a resultsLocation naming A's path is made in B's own space
    body = {"name": "b", "pipelineIdentifier": "recon", "inputValues": {"projections": "/vip/Home/study/projections.nrrd"}}
    error(call("POST", "/executions", key=B, body=json.dumps(body).encode(),
               headers={"Content-Type": "application/json"}), 404, 40401)
    body = {"name": "b", "pipelineIdentifier": "noop", "inputValues": {},
            "resultsLocation": "/vip/Home/study/projections.nrrd"}
    b = ok_json(call("POST", "/executions", key=B, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"}))
    assert ok_json(call("GET", "/path/vip/Home/study/projections.nrrd?action=properties", key=B))["isDirectory"]
    assert not ok_json(call("GET", "/path/vip/Home/study/projections.nrrd?action=properties", key=A))["isDirectory"]
    assert wait_execution(B, b["identifier"])["status"] == "Finished"
    for path in ("/executions", "/executions/count"):
        error(call("GET", path), 401, 40101)
    error(call("POST", "/executions", body=b"{}", headers={"Content-Type": "application/json"}), 401, 40101)
    assert wait_execution(A, ident)["status"] == "Finished"


def test_execution_names_as_v1():
    """Issue 28 #7: CARMIN execution names skipped /v1's checks: control characters passed, and
    the length was counted in bytes (200 two-byte characters refused). One rule for both."""
    v1 = SRV.client(key=A)
    before = int(call("GET", "/executions/count", key=A).body)
    for name in ("line\nbreak", "tab\there", "bell\x07", "\x7f", "é" * 201, ""):
        body = {"name": name, "pipelineIdentifier": "noop", "inputValues": {}}
        error(call("POST", "/executions", key=A, body=json.dumps(body).encode(),
                   headers={"Content-Type": "application/json"}), 400, 40001)
        assert v1.request("POST", "/v1/jobs", json={"kind": "noop", "name": name}).status == 422, repr(name)
    assert int(call("GET", "/executions/count", key=A).body) == before
    wide = "é" * 200                                   # 200 characters, 400 bytes: /v1 takes it
    assert v1.request("POST", "/v1/jobs", json={"kind": "noop", "name": wide}).status == 201
    e = execution(A, {"name": wide, "pipelineIdentifier": "noop", "inputValues": {}})
    assert e["name"] == wide, e
    for name in ("new\nline", "é" * 201, ""):
        error(call("PUT", "/executions/" + e["identifier"], key=A, body=json.dumps({"name": name}).encode(),
                   headers={"Content-Type": "application/json"}), 400, 40001)
    r = call("PUT", "/executions/" + e["identifier"], key=A, body=json.dumps({"name": "ü" * 200}).encode(),
             headers={"Content-Type": "application/json"})
    assert r.status == 204, r
    assert ok_json(call("GET", "/executions/" + e["identifier"], key=A))["name"] == "ü" * 200


def test_rate_limit_holds():
    """--rate-limit holds on the CARMIN routes too (a second server on the same database)."""
    limited = H.start_server(["--cpu-workers", "1", "--rate-limit", "1"])
    try:
        c = limited.client(key="")
        answers = [c.request("GET", "/rest/pipelines/noop", headers={"apikey": A}) for _ in range(14)]
        refused = [r for r in answers if r.status == 429]
        assert refused and answers[0].status == 200, [r.status for r in answers]
        body = check(refused[0].json(), "ErrorCodeAndMessage")
        assert body["errorCode"] == 42901 and refused[0].headers["retry-after"] == "1", refused[0]
        assert c.request("GET", "/rest/pipelines/noop", headers={"apikey": B}).status == 200   # per key
    finally:
        limited.terminate()


def test_server_stops_clean():
    """Last: under ASan/UBSan (CI's second run) a leak or an error in these routes shows here."""
    code = SRV.terminate()
    log = SRV.log_text()
    assert code == 0, log[-3000:]
    assert "Sanitizer" not in log and "runtime error" not in log, log[-3000:]


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_platform_needs_no_key, test_every_route_wants_a_key, test_server_errors_are_carmin_shaped, test_pipelines_are_the_kinds,
                   test_file_space, test_tenant_isolation, test_archive_upload, test_archive_made_by_zip_command,
                   test_archive_refusals, test_archive_bomb, test_archive_tenant_isolation,
                   test_delete_takes_the_tree_and_its_blobs, test_gateway_flow, test_execution_errors_and_kill,
                   test_delete_one_rule_for_both_apis,
                   test_execution_timeout, test_executions_are_the_tenants_own, test_execution_names_as_v1,
                   test_rate_limit_holds,
                   test_server_stops_clean])
    finally:
        H.close()
