#!/usr/bin/env python3
"""psnr.py TRUTH.nrrd VOLUME.nrrd...: a TSV of each volume's PSNR (dB, peak 1.0) against the
truth. Reads the raw float32 little-endian NRRD files gpujobd writes (standard library only)."""
import array
import math
import sys


def read_nrrd(path):
    data = open(path, "rb").read()
    head, _, body = data.partition(b"\n\n")
    fields = dict(line.split(": ", 1) for line in head.decode().splitlines()[1:] if ": " in line)
    if fields.get("type") not in ("float", "float32") or fields.get("encoding") != "raw":
        raise SystemExit(f"{path}: not a raw float32 NRRD")
    values = array.array("f")
    values.frombytes(body)
    if sys.byteorder != "little":
        values.byteswap()
    return fields["sizes"], values


def psnr(volume, truth):
    mse = sum((a - b) ** 2 for a, b in zip(volume, truth)) / len(truth)
    return 10 * math.log10(1.0 / mse) if mse > 0 else float("inf")


def main():
    sizes, truth = read_nrrd(sys.argv[1])
    print("volume\tpsnr_db")
    for path in sys.argv[2:]:
        vsizes, volume = read_nrrd(path)
        if vsizes != sizes:
            raise SystemExit(f"{path}: sizes {vsizes} differ from the truth's {sizes}")
        print(f"{path.split('/')[-2]}\t{psnr(volume, truth):.2f}")


if __name__ == "__main__":
    main()
