#!/usr/bin/python3
"""Writes the seed inputs of the fuzz harnesses into OUTDIR/<harness>/, from files real tools
write (DCMTK, GDCM, teem's unu, torch.onnx.export, the onnx package) and the project's own
test data. The kept corpora (fuzz/corpus/<harness>/) started as these seeds, merged with
libFuzzer's -merge=1 (FUZZING.md has the commands); the smoke test does not need this script.

    /usr/bin/python3 fuzz/seeds.py OUTDIR [HARNESS...]

Run with Debian's python3 (numpy, torch, onnx). A harness whose tools are missing is skipped
with a note."""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import uuid

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def put(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def have(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        print("  skipped: %s not found" % ", ".join(missing))
    return not missing


# ---- DICOM: DCMTK and GDCM write one small image in every transfer syntax the reader knows.
DUMP_HDR = """(0002,0010) UI =LittleEndianExplicit
(0008,0016) UI =SecondaryCaptureImageStorage
(0008,0018) UI [1.2.3.4]
(0008,0060) CS [OT]
"""
GRAY = DUMP_HDR + """(0028,0002) US 1
(0028,0004) CS [MONOCHROME2]
(0028,0010) US 8
(0028,0011) US 12
(0028,0100) US 16
(0028,0101) US 12
(0028,0102) US 11
(0028,0103) US 0
(0028,1050) DS [40]
(0028,1051) DS [400]
(0028,1052) DS [-1024]
(0028,1053) DS [1]
(7fe0,0010) OW =px16.raw
"""
RGB = DUMP_HDR + """(0008,1140) SQ (Sequence with undefined length)
(fffe,e000) na (Item with undefined length)
(0008,1150) UI [1.2.3]
(0008,1155) UI [1.2.3.5]
(fffe,e00d) na
(fffe,e0dd) na
(0028,0002) US 3
(0028,0004) CS [RGB]
(0028,0006) US 0
(0028,0008) IS [2]
(0028,0010) US 4
(0028,0011) US 12
(0028,0100) US 8
(0028,0101) US 8
(0028,0102) US 7
(0028,0103) US 0
(7fe0,0010) OB =rgb.raw
"""


def seeds_dicom(out):
    if not have("dump2dcm", "dcmconv", "dcmcjpeg", "dcmcjpls", "dcmcrle"):
        return
    tmp = tempfile.mkdtemp()
    y, x = np.mgrid[0:8, 0:12]
    ((x * 300 + y * 40) % 4096).astype("<u2").tofile(os.path.join(tmp, "px16.raw"))
    (np.stack([x * 20, y * 30, x + y], -1) % 256).astype("u1").tofile(os.path.join(tmp, "rgb.raw"))  # 2 frames

    def run(*cmd):
        return subprocess.run(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0

    for name, dump in (("gray", GRAY), ("rgb", RGB)):
        open(os.path.join(tmp, name + ".dump"), "w").write(dump)
        run("dump2dcm", name + ".dump", name + ".dcm")
        run("dcmconv", "+ti", name + ".dcm", name + "_ti.dcm")
        run("dcmconv", "+tb", name + ".dcm", name + "_tb.dcm")
        run("dcmconv", "+td", name + ".dcm", name + "_td.dcm")
        run("dcmcjpeg", "+e1", name + ".dcm", name + "_jl.dcm")
        run("dcmcjpeg", "+e1", "-ot", "+fs", "1", name + ".dcm", name + "_jlfrag.dcm")
        run("dcmcjpls", name + ".dcm", name + "_ls.dcm")
        run("dcmcjpls", "+ee", "+md", "2", name + ".dcm", name + "_ls_near.dcm")
        run("dcmcrle", name + ".dcm", name + "_rle.dcm")
        run("gdcmconv", "--j2k", name + ".dcm", name + "_j2k.dcm")
        run("gdcmconv", "--jpegls", name + ".dcm", name + "_gdcm_ls.dcm")
        run("gdcmconv", "--raw", name + "_rle.dcm", name + "_gdcm_raw.dcm")
    run("dcmcjpeg", "+eb", "rgb.dcm", "rgb_jb.dcm")
    run("dcmcjpeg", "+ee", "gray.dcm", "gray_je.dcm")
    run("dcmcjpeg", "+ep", "gray.dcm", "gray_jp.dcm")
    for f in sorted(glob.glob(os.path.join(tmp, "*.dcm"))):
        shutil.copy(f, os.path.join(out, os.path.basename(f)))
    shutil.rmtree(tmp)


# ---- multipart: bodies as clients send them, with their boundaries.
def mp_body(boundary, parts, preamble=b"", epilogue=b"", pad=b"", eol=b"\r\n", close=True):
    b = boundary.encode()
    body = preamble
    for headers, data in parts:
        body += b"--" + b + pad + eol
        for h in headers:
            body += h.encode() + eol
        body += eol + data + eol
    if close:
        body += b"--" + b + b"--" + pad + eol + epilogue
    return body


def seeds_multipart_related(out):
    dcm = b"\0" * 128 + b"DICM" + bytes(range(40))
    boundaries = {
        "orthanc": "%s-%s" % (uuid.UUID(int=1), uuid.UUID(int=2)),           # 73: two UUIDs
        "curl": "-" * 24 + "a1b2c3d4e5f60718",
        "webkit": "----WebKitFormBoundary7MA4YWxkTrZu0gW",
        "urllib3": "9051914041544843365972754266",
        "dicomweb-client": "DICOMwebBoundary" + "0123456789abcdef" * 2,
        "rfc70": "b" * 70,
        "long200": "x" * 199 + "y",
        "spaces": "gc0p4Jq0M2Yt08j34c0p ok",
        "short": "b0und",
    }
    n = 0
    for kind, bd in boundaries.items():
        quoted = '"%s"' % bd if " " in bd or kind in ("orthanc", "long200") else bd
        stow = 'multipart/related; type="application/dicom"; boundary=%s' % quoted
        form = "multipart/form-data; boundary=%s" % quoted
        bodies = [
            (stow, mp_body(bd, [(["Content-Type: application/dicom"], dcm)])),
            (stow, mp_body(bd, [(["Content-Type: application/dicom", "Content-Length: %d" % len(dcm)], dcm)] * 3,
                           preamble=b"preamble\r\n", epilogue=b"epilogue", pad=b" \t")),
            (form, mp_body(bd, [(['Content-Disposition: form-data; name="config"',
                                  "Content-Type: application/json"], b'{"name":"m","platform":"onnx"}'),
                                (['Content-Disposition: form-data; name="model"; filename="model.onnx"',
                                  "Content-Type: application/octet-stream"], b"\x08\x07\x12\x04test")])),
            (form, mp_body(bd, [(['Content-Disposition: form-data;\r\n name="folded"'], b"x")])),
            (stow, mp_body(bd, [(["Content-Type: application/dicom"], dcm)], eol=b"\n")),
            (stow, mp_body(bd, [(["Content-Type: application/dicom"], dcm + b"\r\n--" + bd.encode()[:-1])],
                           close=False)),
        ]
        for ct, body in bodies:
            chunk = bytes([n * 7 % 64])
            put(out, "mp-%s-%d" % (kind, n), chunk + ct.encode() + b"\n" + body)
            n += 1


# ---- brkga: the test data, behind the byte that picks the parser.
def seeds_brkga(out):
    d = os.path.join(ROOT, "tests", "brkga", "data")
    picks = [(0, "net*.xml"), (0, "net*.json"), (1, "dem*.xml"), (1, "dem*.json"), (2, "*.tsp"), (3, "params*.xml")]
    for which, pat in picks:
        for f in sorted(glob.glob(os.path.join(d, pat))):
            data = open(f, "rb").read()
            if len(data) <= 8192:
                put(out, "%d-%s" % (which, os.path.basename(f)), bytes([which]) + data)


# ---- JSON Schema: every test of the official suite (draft 2020-12): schema, NUL, data.
def seeds_json_schema(out):
    suite = os.path.join(ROOT, "tests", "conformance", "json-schema-test-suite", "draft2020-12")
    for f in sorted(glob.glob(os.path.join(suite, "*.json"))):
        for gi, group in enumerate(json.load(open(f))):
            schema = json.dumps(group["schema"], separators=(",", ":"))
            for ti, test in enumerate(group["tests"]):
                data = json.dumps(test["data"], separators=(",", ":"))
                put(out, "%s-%d-%d" % (os.path.basename(f)[:-5], gi, ti), schema + "\0" + data)


# ---- NRRD: files teem's unu writes, and the recon module's own output form.
def seeds_nrrd(out):
    tmp = tempfile.mkdtemp()
    raw = os.path.join(tmp, "a.raw")
    np.arange(24, dtype="<f4").tofile(raw)
    if have("teem-unu"):
        variants = [
            ["-s", "24"],
            ["-s", "4", "6", "-sp", "0.5", "2"],
            ["-s", "4", "3", "2", "-sp", "1", "1", "2.5", "-c", "projections"],
            ["-s", "2", "3", "2", "2", "-kv", "gpujobd:=test", "-l", "u", "v", "row", "col"],
            ["-s", "4", "3", "2", "-spc", "LPS", "-orig", "(0,0,0)", "-dirs", "(1,0,0) (0,1,0) (0,0,2)"],
            ["-s", "4", "3", "2", "-en", "big"],
            ["-s", "4", "3", "2", "-e", "ascii"],
        ]
        for i, v in enumerate(variants):
            args = ["teem-unu", "make", "-i", raw, "-t", "float", "-e", "raw", "-en", "little"] + v + \
                   ["-o", os.path.join(out, "unu-%d.nrrd" % i)]
            subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["teem-unu", "make", "-i", raw, "-t", "float", "-s", "4", "6", "-e", "raw", "-en", "little",
                        "-h", "-o", os.path.join(tmp, "detached.nhdr")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if os.path.exists(os.path.join(tmp, "detached.nhdr")):
            shutil.copy(os.path.join(tmp, "detached.nhdr"), os.path.join(out, "unu-detached.nhdr"))
    data = np.linspace(0, 1, 24, dtype="<f4").tobytes()
    # the header rc_nrrd_write writes for a volume (space directions) and for projections
    put(out, "gpujobd-volume.nrrd",
        b"NRRD0004\n# written by gpujobd recon\ntype: float\ndimension: 3\nsizes: 4 3 2\n"
        b"space: left-posterior-superior\nspace directions: (0.5,0,0) (0,0.5,0) (0,0,1)\n"
        b"space origin: (-1,-0.75,-0.5)\nspace units: \"mm\" \"mm\" \"mm\"\nkinds: domain domain domain\n"
        b"endian: little\nencoding: raw\n\n" + data)
    put(out, "gpujobd-proj.nrrd",
        b"NRRD0004\n# written by gpujobd recon\ntype: float\ndimension: 3\nsizes: 4 3 2\nspacings: 1 1 1\n"
        b"endian: little\nencoding: raw\n\n" + data)
    put(out, "crlf.nrrd", b"NRRD0005\r\ntype: float32\r\ndimension: 2\r\nsizes: 6 4\r\nencoding: raw\r\n\r\n" + data)
    put(out, "nan.nrrd", b"NRRD0004\ntype: float\ndimension: 1\nsizes: 2\nencoding: raw\n\n" +
        struct.pack("<2f", 1.0, float("nan")))
    put(out, "raw.f32", data)
    shutil.rmtree(tmp)


# ---- ONNX: small graphs torch.onnx.export writes, and one graph per operator (onnx.helper).
def torch_models(out):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "onnx"))
    from models import ViT
    torch.manual_seed(1)

    class Cnn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(1, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.c2 = torch.nn.Conv2d(4, 4, 3, padding=1, groups=2)
            self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
            self.avg = torch.nn.AvgPool2d(3, stride=2, padding=1)
            self.fc = torch.nn.Linear(8, 3)

        def forward(self, x):
            y = torch.relu(self.bn(self.c1(x)))
            y = self.pool(y + self.c2(y))
            z = torch.cat([self.avg(y).mean((2, 3)), torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)], 1)
            return torch.softmax(self.fc(z), 1)

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(6, 5)
            self.n = torch.nn.LayerNorm(5)

        def forward(self, x):
            y = torch.nn.functional.gelu(self.n(self.a(x)))
            return torch.where(y == 0, torch.sigmoid(y), torch.tanh(y)).reshape(x.shape[0], 5, 1).squeeze(2)

    models = [("cnn", Cnn(), torch.randn(1, 1, 8, 8)), ("mlp", Mlp(), torch.randn(2, 6)),
              ("vit", ViT(img=8, patch=4, dim=4, depth=1, heads=2, ncls=3), torch.randn(1, 3, 8, 8))]
    for name, m, x in models:
        m.eval()
        for opset in (11, 13, 17):
            path = os.path.join(out, "torch-%s-op%d.onnx" % (name, opset))
            torch.onnx.export(m, x, path, opset_version=opset, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def helper_models(out):
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    def model(name, nodes, inputs, outputs, inits=(), opset=17):
        g = h.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
        m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="fuzz-seeds")
        m.ir_version = 8
        put(out, "op-%s.onnx" % name, m.SerializeToString())

    def vi(n, shape, t=T.FLOAT):
        return h.make_tensor_value_info(n, t, shape)

    def init(n, a):
        return nh.from_array(np.asarray(a), n)

    x4 = [vi("x", ["N", 2, 4, 4])]
    y = [vi("y", None)]
    f = np.float32
    model("conv", [h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[1, 1],
                               dilations=[1, 1], group=1)],
          x4, y, [init("w", np.ones((3, 2, 3, 3), f)), init("b", np.zeros(3, f))])
    model("conv_autopad", [h.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2], group=2)],
          x4, y, [init("w", np.ones((2, 1, 2, 2), f))])
    model("bn_relu", [h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["t"], epsilon=1e-5),
                      h.make_node("Relu", ["t"], ["y"])],
          x4, y, [init(k, np.ones(2, f)) for k in "sbmv"])
    model("maxpool", [h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                  ceil_mode=1)], x4, y)
    model("avgpool", [h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], count_include_pad=1)], x4, y)
    model("gap_flatten_gemm", [h.make_node("GlobalAveragePool", ["x"], ["g"]),
                               h.make_node("Flatten", ["g"], ["f"], axis=1),
                               h.make_node("Gemm", ["f", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
          x4, y, [init("w", np.ones((3, 2), f)), init("c", np.zeros(3, f))])
    model("matmul_bcast", [h.make_node("MatMul", ["x", "w"], ["y"])], x4, y, [init("w", np.ones((2, 4, 3), f))])
    model("arith", [h.make_node("Add", ["x", "c"], ["a"]), h.make_node("Sub", ["a", "x"], ["b"]),
                    h.make_node("Mul", ["b", "c"], ["m"]), h.make_node("Div", ["m", "c"], ["d"]),
                    h.make_node("Pow", ["d", "two"], ["p"]), h.make_node("Sqrt", ["p"], ["s"]),
                    h.make_node("Erf", ["s"], ["e"]), h.make_node("Neg", ["e"], ["y"])],
          x4, y, [init("c", np.full((4,), 2, f)), init("two", np.array(2, f))])
    model("equal_where", [h.make_node("Equal", ["x", "z"], ["q"]), h.make_node("Where", ["q", "x", "z"], ["y"])],
          x4, y, [init("z", np.zeros((1, 4), f))])
    model("expand_cast", [h.make_node("Expand", ["x", "shape"], ["e"]),
                          h.make_node("Cast", ["e"], ["y"], to=T.INT64)],
          x4, [vi("y", None, T.INT64)], [init("shape", np.array([2, 2, 4, 4], np.int64))])
    model("softmax_ln", [h.make_node("Softmax", ["x"], ["s"], axis=-1),
                         h.make_node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
          x4, y, [init("g", np.ones(4, f)), init("b", np.zeros(4, f))])
    model("reducemean", [h.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)], x4, y)
    model("reducemean18", [h.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)], x4, y,
          [init("axes", np.array([-1], np.int64))], opset=18)
    model("shape_ops", [h.make_node("Shape", ["x"], ["s"]),
                        h.make_node("Gather", ["s", "i"], ["g"], axis=0),
                        h.make_node("Concat", ["g", "m1"], ["ns"], axis=0),
                        h.make_node("Reshape", ["x", "ns"], ["r"]),
                        h.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
                        h.make_node("Unsqueeze", ["t", "ax"], ["u"]),
                        h.make_node("Squeeze", ["u", "ax"], ["y"])],
          x4, y, [init("i", np.array([0], np.int64)), init("m1", np.array([-1], np.int64)),
                  init("ax", np.array([0], np.int64))])
    model("slice_pad", [h.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
                        h.make_node("Pad", ["s", "pads", "v"], ["y"], mode="constant")],
          x4, y, [init("st", np.array([3, 0], np.int64)), init("en", np.array([-5, 4], np.int64)),
                  init("ax", np.array([2, 3], np.int64)), init("sp", np.array([-1, 2], np.int64)),
                  init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), init("v", np.array(0.5, f))])
    model("constants", [h.make_node("Constant", [], ["c"], value=init("cv", np.array([3], np.int64))),
                        h.make_node("ConstantOfShape", ["c"], ["z"], value=init("zv", np.array([1.5], f))),
                        h.make_node("Range", ["r0", "r1", "r2"], ["r"]),
                        h.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
                        h.make_node("Add", ["z", "rf"], ["a"]),
                        h.make_node("Identity", ["a"], ["i"]),
                        h.make_node("Dropout", ["i"], ["d"]),
                        h.make_node("Add", ["x", "d"], ["y"])],
          [vi("x", ["N", 3])], y, [init("r0", np.array(0, np.int64)), init("r1", np.array(3, np.int64)),
                                  init("r2", np.array(1, np.int64))])
    model("gelu20", [h.make_node("Gelu", ["x"], ["y"], approximate="tanh")], x4, y, opset=20)
    model("int32_const", [h.make_node("Cast", ["x"], ["xi"], to=T.INT64),
                          h.make_node("Add", ["xi", "c"], ["y"])],
          x4, [vi("y", None, T.INT64)], [init("c", np.array([1, 2, 3, 4], np.int32))], opset=11)
    model("bool_input", [h.make_node("Where", ["q", "x", "z"], ["y"])],
          [vi("q", ["N", 4], T.BOOL), vi("x", ["N", 4])], y, [init("z", np.zeros(4, f))], opset=13)
    model("two_inputs", [h.make_node("MatMul", ["a", "b"], ["y"])],
          [vi("a", ["N", 3, 2]), vi("b", ["N", 2, 3])], y)


def seeds_onnx(out):
    try:
        import onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("  skipped: %s" % e)
        return
    helper_models(out)
    torch_models(out)


# ---- HTTP requests: every route of the spec with plausible and hostile values.
def seeds_http_route(out):
    import base64
    import re
    uid = "3f2b8c1e-9a4d-4e6f-8b7a-0c1d2e3f4a5b"
    cursor = base64.urlsafe_b64encode(("2026-11-23T10:00:00.123456Z," + uid).encode()).decode().rstrip("=")
    values = {"id": uid, "name": "chest-xray-demo", "version": "1", "study": "1.2.840.113619.2.55.3"}
    routes = []
    path = None
    for line in open(os.path.join(ROOT, "openapi", "openapi.yaml")):
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path = m.group(1)
        m = re.match(r"^    (get|put|post|delete|patch):\s*$", line)
        if m and path:
            routes.append((m.group(1).upper(), path))
    n = 0
    for method, tmpl in routes:
        p = re.sub(r"{(\w+)}", lambda m: values.get(m.group(1), "x"), tmpl)
        put(out, "r%02d" % n, "%s %s\nAuthorization: Bearer gj_0123456789abcdef\n" % (method, p))
        n += 1
    hostile = [
        "GET /v1/jobs?limit=50&cursor=%s&created_after=2026-01-01T00:00:00Z&created_before=2026-12-31&state=running"
        "&kind=recon\n" % cursor,
        "GET /v1/jobs?cursor=%s%%00&limit=-1&created_after=2026-02-30T25:61:61%%2B99:99\n" % cursor,
        "GET /v1/inference-results?from=2026-11-23T10:00:00.5%%2B01:00&to=2026-11-24&model=m&version=3\n",
        "GET /v1/blobs/%s\nRange: bytes=0-99\nIf-None-Match: W/\"4f2a\", \"abc\"\n" % uid,
        "GET /v1/blobs/%s\nRange: bytes=-5\nIf-None-Match: *\n" % uid.upper(),
        "GET /v1/blobs/%s\nRange: bytes=5-,0-1\n" % uid,
        "GET /v1/blobs/%s\nRange: bytes=18446744073709551615-18446744073709551616\n" % uid,
        "POST /v1/blobs\nContent-Digest: sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:, md5=:x:\n"
        "Content-Type: application/octet-stream\nContent-Length: 0\n",
        "POST /v1/jobs\nContent-Type: application/vnd.gpujobd+json; charset=utf-8\nContent-Length: 18446744073709551615\n",
        "GET /v1/jobs/%s/outputs/..%%2f..%%2fetc%%2fpasswd\n" % uid,
        "GET /v1/jobs/%s/outputs/volume.nrrd\nRange: bytes=0-0\n" % uid,
        "GET /healthz%00/../x\n",
        "HEAD /v1/jobs/%s/outputs\n" % uid,
        "DELETE /v1/kinds\n",
        "OPTIONS /v2/models/m/versions/1/infer\n",
        "GET //v1//jobs/%s/\n" % uid,
        "GET /v2/models/%s/ready\n" % ("n" * 300),
        "GET /dicomweb/studies/%s\nAccept: multipart/related; type=\"application/dicom\"\n" % ("1." * 40),
        "GET /v1/jobs/%s/events\nLast-Event-ID: 12\n" % uid,
    ]
    for i, h in enumerate(hostile):
        put(out, "h%02d" % i, h)


# ---- /v2 inference requests with JSON tensors, as tritonclient writes them, and edge numbers.
def seeds_oip_json_data(out):
    rng = np.random.default_rng(1)
    f32 = [float(v) for v in rng.standard_normal(12).astype(np.float32)]
    reqs = [
        {"inputs": [{"name": "image", "shape": [1, 3, 4], "datatype": "FP32", "data": f32}],
         "outputs": [{"name": "logits", "parameters": {"binary_data": False}}]},
        {"inputs": [{"name": "a", "shape": [2, 2], "datatype": "INT64", "data": [[1, -2], [9223372036854775807, -9223372036854775808]]},
                    {"name": "b", "shape": [3], "datatype": "BOOL", "data": [True, False, 1]},
                    {"name": "c", "shape": [2], "datatype": "BYTES", "data": ["x", "y\u00e9"]}]},
        {"id": "7", "parameters": {"timeout": 1000}, "inputs": [{"name": "x", "shape": [6], "datatype": "FP64",
         "data": [-0.0, 1e308, 5e-324, 9007199254740993, 2.2250738585072014e-308, 0.1]}]},
    ]
    for i, r in enumerate(reqs):
        put(out, "req%d" % i, json.dumps(r))
        put(out, "req%d-indent" % i, json.dumps(r, indent=2))
    edges = ["01", "1.", ".5", "1e", "-", "+1", "NaN", "Infinity", "1e400", "18446744073709551615", "[1]]",
             "[[1]", "1, \"x\"", "1e-400", "123456789012345678901.5", "0.30000000000000004"]
    for i, e in enumerate(edges):
        put(out, "edge%02d" % i, '{"inputs":[{"name":"x","data":[%s]},{"data":[1],"data":[2]}]}' % e)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    names = sys.argv[2:] or ["dicom", "multipart_related", "brkga", "json_schema", "nrrd", "onnx", "http_route",
                             "oip_json_data"]
    for n in names:
        print("%s:" % n)
        d = os.path.join(outdir, n)
        os.makedirs(d, exist_ok=True)
        globals()["seeds_" + n](d)
        print("  %d files" % len(os.listdir(d)))


if __name__ == "__main__":
    main()
