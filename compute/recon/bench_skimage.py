#!/usr/bin/python3
"""scikit-image iradon on the sinogram `gpujobd bench recon` reconstructs (run by it).

usage: bench_skimage.py DIR N BINS VIEWS OUR_SECONDS_PER_IMAGE
DIR holds sino.raw (float32 [views][bins], our convention t = x cos b + y sin b),
truth.raw and ours.raw (float32 N x N, pixel centres at integers from -N/2, which is
scikit-image's grid). scikit-image projects on t = x cos b - y sin b (rows are y), so
its theta is minus our angle. Prints one line of text and one JSON object.
"""
import json
import sys
import time

import numpy as np
from skimage.transform import iradon

d, n, bins, views, ours_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
sino = np.fromfile(d + "/sino.raw", dtype="<f4").reshape(views, bins)
truth = np.fromfile(d + "/truth.raw", dtype="<f4").reshape(n, n)
ours = np.fromfile(d + "/ours.raw", dtype="<f4").reshape(n, n)
theta = -np.arange(views, dtype=np.float64)          # our angles are 0, 1, ..., 179 degrees
t0 = time.perf_counter()
rec = iradon(sino.T.astype(np.float64), theta=theta, output_size=n, filter_name="ramp",
             interpolation="linear", circle=False)
t = time.perf_counter() - t0


def psnr(a, b):
    return float(10 * np.log10(1.0 / np.mean((a.astype(np.float64) - b) ** 2)))


res = {"skimage_s_per_image": t, "ours_s_per_image": ours_s, "time_ratio_skimage_over_ours": t / ours_s,
       "psnr_skimage_db": psnr(rec, truth), "psnr_ours_db": psnr(ours, truth)}
print("scikit-image iradon %dx%d: %.3f s per image (ours %.4f s: %.1fx faster); PSNR skimage %.2f dB, ours %.2f dB"
      % (n, n, t, ours_s, t / ours_s, res["psnr_skimage_db"], res["psnr_ours_db"]))
print(json.dumps(res))
