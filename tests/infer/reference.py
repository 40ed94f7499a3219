"""Independent reference for the `infer` kind's tests (run with /usr/bin/python3).

- preprocess(): the config's preprocessing in numpy (float64), written from the spec in
  compute/infer/serving/preprocess.h, not from the C code;
- OnnxTorch: runs an ONNX file with torch.nn.functional, weights read with
  onnx.numpy_helper (so the exported file itself is what is checked, not the .pt);
- make_dicom(): a PNG of the synthetic generator -> BMP -> DICOM with DCMTK's img2dcm
  (which reads JPEG and BMP, not PNG), then dcmodify for the attributes.
"""
import os
import subprocess
import sys

import numpy as np


# ---- preprocessing ------------------------------------------------------------------

def voi_linear(x, c, w):
    lo = c - 0.5 - (w - 1) / 2
    hi = c - 0.5 + (w - 1) / 2
    y = np.where(x <= lo, 0.0, np.where(x > hi, 1.0, ((x - (c - 0.5)) / max(w - 1, 1e-300)) + 0.5))
    return y


def area_weights(n_in, n_out):
    """Matrix (n_out, n_in) of the box filter: output k averages [k*s, (k+1)*s)."""
    s = n_in / n_out
    m = np.zeros((n_out, n_in))
    for k in range(n_out):
        lo, hi = k * s, min((k + 1) * s, n_in)
        for i in range(int(np.floor(lo)), min(int(np.ceil(hi)), n_in)):
            ov = min(hi, i + 1) - max(lo, i)
            if ov > 0:
                m[k, i] = ov / (hi - lo)
    return m


def resize_area(img, h, w):
    return area_weights(img.shape[0], h) @ img @ area_weights(img.shape[1], w).T


def resize_bilinear_torch(img, h, w):
    import torch
    import torch.nn.functional as F
    t = torch.from_numpy(np.ascontiguousarray(img, dtype=np.float64))[None, None]
    return F.interpolate(t, size=(h, w), mode="bilinear", align_corners=False)[0, 0].numpy()


def preprocess(stored, pre, voi=None, monochrome1=False):
    """stored: 2-D array of modality values. pre: config.json's preprocessing dict."""
    x = stored.astype(np.float64)
    win = pre.get("window", {})
    if win.get("source", "file") == "file" and voi is not None:
        c, w = voi
    else:
        c, w = win["center"], win["width"]
    y = voi_linear(x, c, w)
    if monochrome1 and pre.get("invert_monochrome1", True):
        y = 1.0 - y
    h, wd = pre["resize"]["height"], pre["resize"]["width"]
    if pre["resize"]["method"] == "area":
        y = resize_area(y, h, wd)
    elif pre["resize"]["method"] == "bilinear":
        y = resize_bilinear_torch(y, h, wd)
    else:
        raise ValueError(pre["resize"]["method"])
    ch = pre.get("channels", 1)
    mean = np.broadcast_to(np.asarray(pre.get("mean", [0.0]), dtype=np.float64), (ch,))
    std = np.broadcast_to(np.asarray(pre.get("std", [1.0]), dtype=np.float64), (ch,))
    return np.stack([(y - mean[k]) / std[k] for k in range(ch)]).astype(np.float32)


# ---- ONNX through torch -------------------------------------------------------------

class OnnxTorch:
    def __init__(self, path):
        import onnx
        from onnx import numpy_helper
        import torch
        self.torch = torch
        self.m = onnx.load(path)
        self.w = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
                  for i in self.m.graph.initializer}

    def __call__(self, x):
        import onnx
        import torch.nn.functional as F
        torch = self.torch
        env = dict(self.w)
        env[self.m.graph.input[0].name] = torch.from_numpy(x)
        for n in self.m.graph.node:
            a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
            ins = [env[i] if i else None for i in n.input]
            op = n.op_type
            if op == "Conv":
                p = list(a.get("pads", [0, 0, 0, 0]))
                assert p[0] == p[2] and p[1] == p[3], "asymmetric pads"
                out = F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                               stride=a.get("strides", [1, 1]), padding=p[:2],
                               dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
            elif op == "Relu":
                out = F.relu(ins[0])
            elif op == "MaxPool":
                p = list(a.get("pads", [0, 0, 0, 0]))
                out = F.max_pool2d(ins[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]),
                                   p[:2], ceil_mode=bool(a.get("ceil_mode", 0)))
            elif op == "GlobalAveragePool":
                out = ins[0].mean(dim=(2, 3), keepdim=True)
            elif op == "Flatten":
                out = ins[0].flatten(a.get("axis", 1))
            elif op == "Gemm":
                A = ins[0].T if a.get("transA", 0) else ins[0]
                B = ins[1].T if a.get("transB", 0) else ins[1]
                out = a.get("alpha", 1.0) * (A @ B)
                if len(ins) > 2 and ins[2] is not None:
                    out = out + a.get("beta", 1.0) * ins[2]
            elif op == "BatchNormalization":
                out = F.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], False, 0.0,
                                   a.get("epsilon", 1e-5))
            else:
                raise NotImplementedError(op)
            env[n.output[0]] = out
        return env[self.m.graph.output[0].name].numpy()


def activation(logits, kind):
    if kind == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    if kind == "softmax":
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    return logits


# ---- DICOM files --------------------------------------------------------------------

def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr}")


def make_dicom(png, dcm, tags):
    """PNG (8-bit gray) -> BMP -> img2dcm -> dcmodify -i TAG=VALUE for each tag."""
    from PIL import Image
    bmp = os.path.splitext(dcm)[0] + ".bmp"
    Image.open(png).save(bmp)
    run(["img2dcm", "-q", "-i", "BMP", bmp, dcm])
    os.unlink(bmp)
    if tags:
        cmd = ["dcmodify", "-q", "-nb"]
        for k, v in tags.items():
            cmd += ["-i", f"{k}={v}"]
        run(cmd + [dcm])
