#!/usr/bin/python3
"""make_portal_sample.py — portal/samples/chest-synthetic.dcm, the portal's "try it" input of the
`infer` kind: one synthetic chest radiograph (DX, PA, CHEST; 256 x 256, 8 bits) made by the demo
model's image generator (tools/train_demo_model.py: make_image) with a cardiomegaly-like heart
shadow, written by DCMTK (img2dcm, dcmodify).

It is not a patient's image: the patient attributes say SYNTHETIC, and every UID is fixed under
the UUID-derived root 2.25 so that the file is the same on each run (dcmodify -nb; the
generator is seeded). Run with Debian's python (numpy, PIL) and DCMTK:

    /usr/bin/python3 tools/make_portal_sample.py [--out portal/samples/chest-synthetic.dcm]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_demo_model import make_image  # noqa: E402

ROOT = "2.25.302571393862416307207451302183958713"   # a fixed UUID as an OID
TAGS = {
    "(0008,0060)": "DX", "(0018,5101)": "PA", "(0018,0015)": "CHEST",
    "(0010,0010)": "SYNTHETIC^CHEST", "(0010,0020)": "SYNTHETIC-0001", "(0010,0030)": "",
    "(0010,0040)": "O", "(0008,0020)": "20260101", "(0008,0030)": "120000",
    "(0008,0023)": "20260101", "(0008,0033)": "120000", "(0008,0012)": "20260101",
    "(0008,0013)": "120000", "(0008,1030)": "Synthetic chest radiograph (gpujobd portal sample)",
    "(0020,000D)": ROOT + ".1", "(0020,000E)": ROOT + ".2", "(0008,0018)": ROOT + ".3",
    "(0020,0010)": "1", "(0020,0011)": "1", "(0020,0013)": "1",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "portal", "samples",
                                                  "chest-synthetic.dcm"))
    args = ap.parse_args()
    rng = np.random.default_rng(20260101)
    img = np.round(make_image(rng, {"cardiomegaly"}) * 255).astype(np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        bmp = os.path.join(tmp, "chest.bmp")
        dcm = os.path.join(tmp, "chest.dcm")
        Image.fromarray(img, "L").save(bmp)
        subprocess.run(["img2dcm", "-q", "-i", "BMP", bmp, dcm], check=True)
        cmd = ["dcmodify", "-q", "-nb"]
        for k, v in TAGS.items():
            cmd += ["-i", f"{k}={v}"]
        subprocess.run(cmd + [dcm], check=True)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(dcm, "rb") as f:
            data = f.read()
    with open(args.out, "wb") as f:
        f.write(data)
    print(f"{args.out}: {len(data)} bytes")


if __name__ == "__main__":
    main()
