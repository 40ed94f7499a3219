#!/usr/bin/python3
"""toolkit_test.py — the DICOM reader against files written by other toolkits.

usage: toolkit_test.py TOOL GROUP [HOSTILE_BINARY]

TOOL is a binary that runs `dicom info FILE --pixels OUT --frame N` (the
standalone dicom_tool or `gpujobd`). Every file is generated here, in a
temporary directory, with DCMTK (dump2dcm, img2dcm, dcmconv, dcmcjpeg,
dcmcjpls, dcmcrle, dcmdjpeg, dcmdjpls, dcmdrle, dcmdump) and GDCM (gdcmconv).

Truth: the stored values we wrote (python), and the pixel data the toolkit
itself decompresses to (dcmdjpeg/dcmdrle/dcmdjpls/gdcmconv --raw, read back
raw with `dcmdump +W`). Lossless syntaxes must match both exactly; lossy ones
(JPEG baseline, JPEG-LS near-lossless, JPEG 2000 irreversible) must match the
toolkit's own decompression within the tolerances in TOL below.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Skipped with the reason (exit 77) rather than left out of the suite where the
# toolkits are missing: tools/debian-packages.txt installs them.
_missing = [t for t in ("dump2dcm", "img2dcm", "dcmconv", "dcmcjpeg", "dcmcjpls", "dcmcrle", "dcmdjpeg",
                        "dcmdjpls", "dcmdrle", "dcmdump", "gdcmconv") if not shutil.which(t)]
if _missing:
    print("skipped: DCMTK / GDCM tools missing (%s): apt-get install dcmtk libgdcm-tools" % ", ".join(_missing))
    sys.exit(77)
try:
    import numpy as np
except ImportError:
    print("skipped: numpy missing from this python (%s): apt-get install python3-numpy" % sys.executable)
    sys.exit(77)

# Lossy tolerances: maximum absolute difference from the toolkit's decoding.
TOL = {
    "jpeg_baseline": 2,       # libjpeg-turbo (accurate islow IDCT) vs DCMTK's IJG 6b: rounding of IDCT/upsampling
    "jpeg_extended12": 2,     # own double-precision IDCT vs DCMTK's IJG 12-bit integer IDCT
    "jpegls_near": 0,         # JPEG-LS near-lossless decoding is deterministic
    "j2k_irreversible": 1,    # OpenJPEG vs GDCM's OpenJPEG: same library, same result
}

TOOL = sys.argv[1]
GROUP = sys.argv[2]
HOSTILE = sys.argv[3] if len(sys.argv) > 3 else None
if not os.access(TOOL, os.X_OK):
    print("%s not built: skipped" % TOOL)
    sys.exit(77)
TMP = tempfile.mkdtemp(prefix="dicomtest-")
failures = []
checks = 0


def sh(*args, ok=True):
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=TMP)
    if ok and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.decode(errors="replace")[-800:]))
    return r


def check(cond, msg):
    global checks
    checks += 1
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def path(name):
    return os.path.join(TMP, name)


# ---- cases -----------------------------------------------------------------

class Case:
    def __init__(self, name, stored, ba, bs, hb, signed, pi, slope=None, intercept=None,
                 planar=0, written=None, extra=()):
        self.name, self.ba, self.bs, self.hb, self.signed, self.pi = name, ba, bs, hb, signed, pi
        self.slope, self.intercept, self.planar, self.extra = slope, intercept, planar, extra
        self.stored = stored            # (frames, rows, cols) or (frames, rows, cols, 3), int
        self.written = written          # the pixel bit patterns written, if not stored itself
        self.frames, self.rows, self.cols = stored.shape[:3]
        self.spp = 3 if stored.ndim == 4 else 1

    def expected(self, frame):
        """Float32 modality values / RGB planes our reader must return."""
        s = self.stored[frame].astype(np.float64)
        if self.spp == 3:
            if self.pi == "YBR_FULL":
                return None
            return np.moveaxis(s, -1, 0).astype(np.float32)  # planes
        slope = self.slope if self.slope is not None else 1.0
        icpt = self.intercept if self.intercept is not None else 0.0
        return (s * slope + icpt).astype(np.float32)

    def pixel_bytes(self):
        w = self.written if self.written is not None else self.stored
        if self.spp == 3 and self.planar:
            w = np.moveaxis(w, -1, 1)   # frames, 3, rows, cols
        if self.ba == 8:
            return (w.astype(np.int64) & 0xFF).astype(np.uint8).tobytes()
        return (w.astype(np.int64) & 0xFFFF).astype("<u2").tobytes()


def make_cases(rows=48, cols=64):
    rng = np.random.default_rng(1234)
    yy, xx = np.mgrid[0:rows, 0:cols]
    smooth = (np.sin(xx / 7.0) + np.cos(yy / 5.0) + 2) / 4.0  # 0..1
    cases = []
    # 16-bit unsigned, 12 bits stored, garbage in the top 4 bits (masking), CT-like rescale
    st = (smooth * 4000 + rng.integers(0, 60, (rows, cols))).astype(np.int64)[None]
    garbage = st | (rng.integers(0, 16, st.shape) << 12)
    cases.append(Case("u16_12bit", st, 16, 12, 11, 0, "MONOCHROME2", 1.0, -1024.0, written=garbage,
                      extra=[("0028,1050", "DS", "40"), ("0028,1051", "DS", "400")]))
    # 16-bit signed, 16 bits stored, slope 0.5 intercept -100
    st = (smooth * 60000 - 30000 + rng.integers(-200, 200, (rows, cols))).astype(np.int64)[None]
    cases.append(Case("s16", st, 16, 16, 15, 1, "MONOCHROME2", 0.5, -100.0))
    # 16-bit signed, 12 bits stored (sign bit 11)
    st = (smooth * 4000 - 2048 + rng.integers(-20, 20, (rows, cols))).clip(-2048, 2047).astype(np.int64)[None]
    cases.append(Case("s12", st, 16, 12, 11, 1, "MONOCHROME2"))
    # 8-bit MONOCHROME1
    st = (smooth * 250 + rng.integers(0, 5, (rows, cols))).astype(np.int64)[None]
    cases.append(Case("mono1_8", st, 8, 8, 7, 0, "MONOCHROME1"))
    # multi-frame 16-bit, 3 frames
    st = np.stack([(smooth * 3000 + 500 * f + rng.integers(0, 30, (rows, cols))) for f in range(3)]).astype(np.int64)
    cases.append(Case("multi16", st, 16, 16, 15, 0, "MONOCHROME2", 2.0, 5.0))
    # RGB 8-bit, interleaved and planar
    rgb = np.stack([smooth * 255, (1 - smooth) * 255, (xx * 255 // max(cols - 1, 1)) + 0 * smooth], -1)
    st = (rgb + rng.integers(0, 3, rgb.shape)).clip(0, 255).astype(np.int64)[None]
    cases.append(Case("rgb8", st, 8, 8, 7, 0, "RGB"))
    cases.append(Case("rgb8_planar", st, 8, 8, 7, 0, "RGB", planar=1))
    return cases


def ybr_case(rows=48, cols=64):
    """YBR_FULL 8-bit: written as YCbCr, expected RGB computed here."""
    rng = np.random.default_rng(77)
    y = rng.integers(40, 215, (rows, cols))
    cb = rng.integers(100, 156, (rows, cols))
    cr = rng.integers(100, 156, (rows, cols))
    st = np.stack([y, cb, cr], -1).astype(np.int64)[None]
    c = Case("ybr_full8", st, 8, 8, 7, 0, "YBR_FULL")
    r = y + 1.402 * (cr - 128)
    g = y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128)
    b = y + 1.772 * (cb - 128)
    c.rgb = np.stack([np.clip(np.round(v), 0, 255) for v in (r, g, b)]).astype(np.float32)
    return c


def write_dump(case, name):
    raw = path(name + ".pix")
    with open(raw, "wb") as f:
        f.write(case.pixel_bytes())
    lines = [
        "(0002,0010) UI =LittleEndianExplicit",
        "(0008,0016) UI =SecondaryCaptureImageStorage",
        "(0008,0018) UI [1.2.826.0.1.3680043.2.1125.1.%d]" % (abs(hash(name)) % 10**9),
        "(0008,0060) CS [OT]",
        "(0010,0010) PN [Secret^Patient]",
        "(0010,0020) LO [SECRETID42]",
        "(0018,0015) CS [CHEST]",
        "(0018,5101) CS [PA]",
        "(0020,000d) UI [1.2.826.0.1.3680043.2.1125.2]",
        "(0020,000e) UI [1.2.826.0.1.3680043.2.1125.3]",
        "(0028,0002) US %d" % case.spp,
        "(0028,0004) CS [%s]" % case.pi,
    ]
    if case.spp == 3:
        lines.append("(0028,0006) US %d" % case.planar)
    if case.frames > 1:
        lines.append("(0028,0008) IS [%d]" % case.frames)
    lines += [
        "(0028,0010) US %d" % case.rows,
        "(0028,0011) US %d" % case.cols,
        "(0028,0100) US %d" % case.ba,
        "(0028,0101) US %d" % case.bs,
        "(0028,0102) US %d" % case.hb,
        "(0028,0103) US %d" % case.signed,
    ]
    if case.slope is not None:
        lines.append("(0028,1052) DS [%r]" % case.intercept)
        lines.append("(0028,1053) DS [%r]" % case.slope)
    for tag, vr, val in case.extra:
        lines.append("(%s) %s [%s]" % (tag, vr, val))
    lines.append("(7fe0,0010) %s =%s" % ("OB" if case.ba == 8 else "OW", raw))
    lines.sort(key=lambda s: s[1:10].lower())
    dump = path(name + ".dump")
    with open(dump, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = path(name + ".dcm")
    sh("dump2dcm", dump, out)
    return out


def decode(f, frame=1, expect_ok=True):
    out = f + ".%d.f32" % frame
    r = subprocess.run([TOOL, "dicom", "info", f, "--pixels", out, "--frame", str(frame)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    text = r.stdout.decode(errors="replace")
    if "Secret" in text or "SECRETID" in text or "Secret" in r.stderr.decode(errors="replace"):
        check(False, "%s: patient name/ID printed" % f)
    if r.returncode != 0:
        if expect_ok:
            check(False, "%s frame %d: reader failed: %s" % (f, frame, r.stderr.decode(errors="replace").strip()))
        return None, r.stderr.decode(errors="replace")
    info = json.loads(text)
    return info, np.fromfile(out, dtype="<f4")


def toolkit_raw(f, case, attrs_of):
    """Pixel data of an uncompressed file as the toolkit writes it (dcmdump +W),
    as modality values (its own bits stored, sign, rescale: a lossy toolkit
    may change them; taken from attrs_of, the file our reader decodes)
    shaped like our output, per frame."""
    d = path("w_" + os.path.basename(f))
    os.makedirs(d, exist_ok=True)
    sh("dcmdump", "+W", d, f)
    files = glob.glob(os.path.join(d, "*.raw"))
    if len(files) != 1:
        raise RuntimeError("dcmdump +W wrote %d files for %s" % (len(files), f))
    r = subprocess.run([TOOL, "dicom", "info", attrs_of], stdout=subprocess.PIPE, check=True)
    attrs = json.loads(r.stdout)
    ba, bs, hb, signed = attrs["bits_allocated"], attrs["bits_stored"], attrs["high_bit"], attrs["pixel_representation"]
    dt = np.uint8 if ba == 8 else np.dtype("<u2")
    a = np.fromfile(files[0], dtype=dt).astype(np.int64)
    n = case.rows * case.cols * case.spp
    a = a[: n * case.frames]
    a = (a >> (hb + 1 - bs)) & ((1 << bs) - 1)
    if signed:
        a = np.where(a >= (1 << (bs - 1)), a - (1 << bs), a)
    frames = []
    for k in range(case.frames):
        fr = a[k * n:(k + 1) * n]
        if case.spp == 3:
            # the decompressed file's planar configuration decides the layout
            pc = planar_of(f)
            fr = fr.reshape(3, case.rows, case.cols) if pc else np.moveaxis(fr.reshape(case.rows, case.cols, 3), -1, 0)
            frames.append(fr.astype(np.float32))
        else:
            frames.append((fr.reshape(case.rows, case.cols) * attrs["rescale_slope"]
                           + attrs["rescale_intercept"]).astype(np.float32))
    return frames


def planar_of(f):
    r = sh("dcmdump", "+P", "0028,0006", f)
    s = r.stdout.decode()
    return 1 if " US 1" in s else 0


def compare_truth(f, case, label, tol=0):
    for k in range(case.frames):
        info, px = decode(f, k + 1)
        if px is None:
            return
        check(info["rows"] == case.rows and info["columns"] == case.cols and info["frames"] == case.frames,
              "%s: geometry %s" % (label, info))
        exp = case.rgb if case.pi == "YBR_FULL" and not hasattr(case, "keep_ybr") else case.expected(k)
        if px.size != exp.size:
            check(False, "%s frame %d: %d values, expected %d" % (label, k + 1, px.size, exp.size))
            continue
        diff = np.abs(px.astype(np.float64) - exp.reshape(-1).astype(np.float64)).max()
        check(diff <= tol, "%s frame %d: max |diff| vs truth %g > %g" % (label, k + 1, diff, tol))


def compare_toolkit(f, ref_uncompressed, case, label, tol=0):
    """Our decoding of f vs the toolkit's decompressed file read raw."""
    ref = toolkit_raw(ref_uncompressed, case, f)
    worst = 0.0
    for k in range(case.frames):
        info, px = decode(f, k + 1)
        if px is None:
            return None
        exp = ref[k].reshape(-1)
        if px.size != exp.size:
            check(False, "%s frame %d: %d values, toolkit %d" % (label, k + 1, px.size, exp.size))
            return None
        diff = np.abs(px.astype(np.float64) - exp.astype(np.float64)).max()
        worst = max(worst, diff)
    check(worst <= tol, "%s: max |diff| vs toolkit %g > %g" % (label, worst, tol))
    print("  %-44s vs toolkit: max |diff| %g (tolerance %g)" % (label, worst, tol))
    return worst


# ---- groups ----------------------------------------------------------------

def group_native():
    for case in make_cases() + [ybr_case()]:
        src = write_dump(case, case.name)
        compare_truth(src, case, case.name + " explicit LE (dump2dcm)")
        if case.pi != "YBR_FULL":
            compare_toolkit(src, src, case, case.name + " explicit LE raw")
        for opt, ts in (("+ti", "1.2.840.10008.1.2"), ("+te", "1.2.840.10008.1.2.1"),
                        ("+tb", "1.2.840.10008.1.2.2"), ("+td", "1.2.840.10008.1.2.1.99")):
            out = path("%s_%s.dcm" % (case.name, opt[1:]))
            sh("dcmconv", opt, src, out)
            info, _ = decode(out)
            if info:
                check(info["transfer_syntax"] == ts, "%s %s: transfer syntax %s" % (case.name, opt, info["transfer_syntax"]))
            compare_truth(out, case, "%s dcmconv %s" % (case.name, opt))
    # summary fields
    case = make_cases()[0]
    info, _ = decode(path("u16_12bit.dcm"))
    for k, v in (("modality", "OT"), ("body_part_examined", "CHEST"), ("view_position", "PA"),
                 ("photometric_interpretation", "MONOCHROME2"), ("bits_allocated", 16), ("bits_stored", 12),
                 ("window_center", 40), ("window_width", 400), ("rescale_intercept", -1024),
                 ("sop_class_uid", "1.2.840.10008.5.1.4.1.1.7"),
                 ("study_instance_uid", "1.2.826.0.1.3680043.2.1125.2"),
                 ("series_instance_uid", "1.2.826.0.1.3680043.2.1125.3")):
        check(info.get(k) == v, "summary %s = %r, expected %r" % (k, info.get(k), v))
    # img2dcm from a BMP (uncompressed RGB) and from a JPEG (baseline, encapsulated as is)
    from PIL import Image
    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:40, 0:56]
    img = np.stack([xx * 4, yy * 6, (xx + yy) * 2], -1).clip(0, 255).astype(np.uint8)
    img = (img + rng.integers(0, 4, img.shape)).clip(0, 255).astype(np.uint8)
    Image.fromarray(img).save(path("in.bmp"))
    sh("img2dcm", "-i", "BMP", path("in.bmp"), path("bmp.dcm"))
    info, px = decode(path("bmp.dcm"))
    if px is not None:
        diff = np.abs(px - np.moveaxis(img.astype(np.float32), -1, 0).reshape(-1)).max()
        check(diff == 0, "img2dcm BMP: max diff %g" % diff)
    gray = (xx * 3 + yy * 2).clip(0, 255).astype(np.uint8)
    Image.fromarray(gray).save(path("in_gray.bmp"))
    sh("img2dcm", "-i", "BMP", path("in_gray.bmp"), path("bmp_gray.dcm"))
    info, px = decode(path("bmp_gray.dcm"))
    if px is not None:
        check(np.abs(px - gray.reshape(-1)).max() == 0, "img2dcm gray BMP differs")


def group_jpeg():
    cases = {c.name: c for c in make_cases()}
    # lossless process 14 (SV1 and other predictors), with fragmentation and without offset table
    for name in ("u16_12bit", "s16", "s12", "mono1_8", "multi16", "rgb8"):
        case = cases[name]
        src = write_dump(case, name)
        for opts in (["+e1"], ["+el", "+sv", "4"], ["+el", "+sv", "7"], ["+e1", "-ot", "+fs", "1"],
                     ["+e1", "+fs", "1"]):
            tag = "".join(opts).replace("+", "p").replace("-", "m")
            out = path("%s_jl_%s.dcm" % (name, tag))
            sh("dcmcjpeg", *opts, src, out)
            label = "%s dcmcjpeg %s" % (name, " ".join(opts))
            compare_truth(out, case, label)
            ref = path("%s_jl_%s_d.dcm" % (name, tag))
            sh("dcmdjpeg", out, ref)
            compare_toolkit(out, ref, case, label)
    # baseline (8-bit), lossy: vs dcmdjpeg within TOL
    for name in ("mono1_8", "rgb8"):
        case = cases[name]
        src = path(name + ".dcm")
        for opts in (["+eb"], ["+eb", "-ot", "+fs", "1"]):
            out = path("%s_jb%d.dcm" % (name, len(opts)))
            sh("dcmcjpeg", *opts, src, out)
            ref = path("%s_jb%d_d.dcm" % (name, len(opts)))
            sh("dcmdjpeg", out, ref)
            compare_toolkit(out, ref, case, "%s dcmcjpeg %s" % (name, " ".join(opts)), TOL["jpeg_baseline"])
    # img2dcm from a JPEG file written by PIL (encapsulated baseline, YBR_FULL_422)
    from PIL import Image
    yy, xx = np.mgrid[0:48, 0:64]
    img = np.stack([xx * 4, yy * 5, 255 - xx * 3], -1).clip(0, 255).astype(np.uint8)
    Image.fromarray(img).save(path("in.jpg"), quality=90)
    sh("img2dcm", path("in.jpg"), path("jpg.dcm"))
    sh("dcmdjpeg", path("jpg.dcm"), path("jpg_d.dcm"))
    c = Case("img2dcm_jpeg", img.astype(np.int64)[None], 8, 8, 7, 0, "RGB")
    compare_toolkit(path("jpg.dcm"), path("jpg_d.dcm"), c, "img2dcm JPEG (YBR_FULL_422)", TOL["jpeg_baseline"])
    # extended 12-bit DCT (own decoder: Debian's libjpeg-turbo is 8-bit only), with restarts too
    for name in ("u16_12bit", "s12"):
        case = cases[name]
        for opts in (["+ee"], ["+ee", "-ot", "+fs", "1"], ["+ee", "+q", "100"]):
            tag = "".join(opts).replace("+", "p").replace("-", "m")
            out = path("%s_%s.dcm" % (name, tag))
            sh("dcmcjpeg", *opts, path(name + ".dcm"), out)
            ref = path("%s_%s_d.dcm" % (name, tag))
            sh("dcmdjpeg", out, ref)
            compare_toolkit(out, ref, case, "%s dcmcjpeg %s (12-bit)" % (name, " ".join(opts)),
                            TOL["jpeg_extended12"])


def group_jpegls():
    cases = {c.name: c for c in make_cases()}
    for name in ("u16_12bit", "s16", "s12", "mono1_8", "multi16", "rgb8", "rgb8_planar"):
        case = cases[name]
        src = write_dump(case, name)
        for opts in ([], ["-ot", "+fs", "1"]):
            out = path("%s_ls%d.dcm" % (name, len(opts)))
            sh("dcmcjpls", *opts, src, out)
            label = "%s dcmcjpls %s" % (name, " ".join(opts))
            compare_truth(out, case, label)
            ref = path("%s_ls%d_d.dcm" % (name, len(opts)))
            sh("dcmdjpls", out, ref)
            compare_toolkit(out, ref, case, label)
        if name in ("u16_12bit", "mono1_8"):
            out = path("%s_lsn.dcm" % name)
            sh("dcmcjpls", "+en", src, out)
            ref = path("%s_lsn_d.dcm" % name)
            sh("dcmdjpls", out, ref)
            compare_toolkit(out, ref, case, "%s dcmcjpls +en (near-lossless)" % name, TOL["jpegls_near"])
            compare_truth(out, case, "%s dcmcjpls +en vs truth" % name, 2 * (case.slope or 1))
        out = path("%s_gls.dcm" % name)
        if sh("gdcmconv", "--jpegls", src, out, ok=False).returncode == 0:
            compare_truth(out, case, "%s gdcmconv --jpegls" % name)


def group_rle():
    cases = {c.name: c for c in make_cases()}
    for name in ("u16_12bit", "s16", "s12", "mono1_8", "multi16", "rgb8", "rgb8_planar"):
        case = cases[name]
        src = write_dump(case, name)
        for opts in ([], ["-ot"]):
            out = path("%s_rle%d.dcm" % (name, len(opts)))
            sh("dcmcrle", *opts, src, out)
            label = "%s dcmcrle %s" % (name, " ".join(opts))
            compare_truth(out, case, label)
            ref = path("%s_rle%d_d.dcm" % (name, len(opts)))
            sh("dcmdrle", out, ref)
            compare_toolkit(out, ref, case, label)
        out = path("%s_grle.dcm" % name)
        sh("gdcmconv", "--rle", src, out)
        compare_truth(out, case, "%s gdcmconv --rle" % name)
    c = ybr_case()
    src = write_dump(c, c.name)
    out = path("ybr_rle.dcm")
    sh("dcmcrle", src, out)
    compare_truth(out, c, "ybr_full8 dcmcrle", 0)


def group_j2k():
    cases = {c.name: c for c in make_cases()}
    for name in ("u16_12bit", "s16", "s12", "mono1_8", "multi16", "rgb8"):
        case = cases[name]
        src = write_dump(case, name)
        out = path("%s_j2k.dcm" % name)
        sh("gdcmconv", "--j2k", src, out)
        label = "%s gdcmconv --j2k" % name
        compare_truth(out, case, label)
        ref = path("%s_j2k_raw.dcm" % name)
        sh("gdcmconv", "--raw", out, ref)
        compare_toolkit(out, ref, case, label)
        if name in ("u16_12bit", "mono1_8", "rgb8"):
            out = path("%s_j2kl.dcm" % name)
            sh("gdcmconv", "--j2k", "--lossy", "--irreversible", "-q", "30", src, out)
            ref = path("%s_j2kl_raw.dcm" % name)
            sh("gdcmconv", "--raw", out, ref)
            compare_toolkit(out, ref, case, "%s gdcmconv --j2k --lossy --irreversible" % name,
                            TOL["j2k_irreversible"])
    # YBR_FULL through J2K: whatever photometric interpretation GDCM writes, the result is RGB
    c = ybr_case()
    src = write_dump(c, c.name)
    out = path("ybr_j2k.dcm")
    sh("gdcmconv", "--j2k", src, out)
    r = subprocess.run(["dcmdump", "+P", "0028,0004", out], stdout=subprocess.PIPE)
    print("  ybr_full8 gdcmconv --j2k writes", r.stdout.decode().split("#")[0].strip())
    compare_truth(out, c, "ybr_full8 gdcmconv --j2k", 0)


def group_hostile_files():
    """Small toolkit-written files, each truncated at every offset and mutated."""
    c = make_cases(rows=12, cols=16)
    files = []
    case = c[0]
    src = write_dump(case, "h_" + case.name)
    for cmd, out in ((["dcmconv", "+td"], "h_def.dcm"), (["dcmconv", "+tb"], "h_be.dcm"),
                     (["dcmconv", "+ti"], "h_imp.dcm"),
                     (["dcmcjpeg", "+e1", "+fs", "1"], "h_jl.dcm"), (["dcmcjpls"], "h_ls.dcm"),
                     (["dcmcjpeg", "+ee"], "h_je.dcm"),
                     (["dcmcrle"], "h_rle.dcm"), (["gdcmconv", "--j2k"], "h_j2k.dcm")):
        sh(*cmd, src, path(out))
        files.append(path(out))
    rgb = write_dump(c[5], "h_rgb")
    sh("dcmcjpeg", "+eb", rgb, path("h_jb.dcm"))
    files.append(path("h_jb.dcm"))
    multi = write_dump(c[4], "h_multi")
    sh("dcmcrle", "-ot", multi, path("h_mrle.dcm"))
    files.append(path("h_mrle.dcm"))
    r = subprocess.run([HOSTILE] + files)
    check(r.returncode == 0, "hostile binary on toolkit files: exit %d" % r.returncode)


def group_cli():
    """The `gpujobd dicom` subcommand itself: usage errors, JSON, no PHI."""
    case = make_cases()[0]
    src = write_dump(case, "cli")
    r = subprocess.run([TOOL, "dicom", "info", src], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 0, "dicom info exit %d" % r.returncode)
    info = json.loads(r.stdout)
    check(info["rows"] == 48 and info["ok"] is True, "dicom info JSON %s" % info)
    check(b"Secret" not in r.stdout and b"SECRETID" not in r.stdout, "patient data printed")
    r = subprocess.run([TOOL, "dicom"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 2, "dicom without args: exit %d" % r.returncode)
    with open(path("garbage.dcm"), "wb") as f:
        f.write(os.urandom(5000))
    r = subprocess.run([TOOL, "dicom", "info", path("garbage.dcm"), "--pixels", path("g.f32")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 1 and not os.path.exists(path("g.f32")), "garbage: exit %d" % r.returncode)


GROUPS = {"native": group_native, "jpeg": group_jpeg, "jpegls": group_jpegls, "rle": group_rle,
          "j2k": group_j2k, "hostile_files": group_hostile_files, "cli": group_cli}

try:
    GROUPS[GROUP]()
except Exception as e:  # a toolkit step failed
    failures.append("exception: %s" % e)
    print("FAIL: exception:", e)
finally:
    subprocess.run(["rm", "-rf", TMP])
print("%s: %d checks, %d failures" % (GROUP, checks, len(failures)))
sys.exit(1 if failures else 0)
