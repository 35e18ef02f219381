"""Image loading and mask encoding speed.

Prints:
* images/s loading the JSRT PNGs of ``../shared/data/jsrt_scr/images`` (all of them);
* images/s loading the CR DICOM (``RG1_UNCR.dcm``, 1955x1841, 15-bit) and its JPEG 2000
  version (``RG1_J2KR.dcm``);
* COCO RLE encode + decode time for a 1024x1024 mask (a lesion-like mask of a few blobs,
  and a worst-case noisy mask).

Run: ``nice -n 10 python -m benchmarks.io_bench [--data PATH] [--publish io]`` (single process);
``--publish io`` writes ``docs/results/io.md`` (``benchmarks/results.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.results import benchmark_parser, publish_if_asked
from cxrils.io import load_image
from cxrils.masks import decode_rle, encode_rle
from cxrils.sources.jsrt import read_jsrt_images


def _rate(paths: list[Path], repeats: int = 1) -> tuple[float, int]:
    load_image(paths[0])  # warm-up (imports, decoder plugins)
    n = 0
    t0 = time.perf_counter()
    for _ in range(repeats):
        for p in paths:
            load_image(p)
            n += 1
    return n / (time.perf_counter() - t0), n


def _rle_ms(mask: np.ndarray, repeats: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    for _ in range(repeats):
        rle = encode_rle(mask)
        out = decode_rle(rle)
    dt = (time.perf_counter() - t0) / repeats
    assert np.array_equal(out, mask)
    return dt * 1000.0, len(rle["counts"])


def main() -> None:
    parser = benchmark_parser(__doc__.splitlines()[0], data=True, page="io")
    parser.add_argument("--dicom-repeats", type=int, default=5)
    args = parser.parse_args()
    data = args.data.resolve()

    rows = []
    try:
        pngs = [r.image_path for r in read_jsrt_images(data)]
    except FileNotFoundError:
        pngs = []
    if pngs:
        rate, n = _rate(pngs)
        print(f"JSRT PNG (512 px, 8-bit): {rate:.1f} images/s over {n} images")
        rows.append(f"| load JSRT PNGs (512 px, 8-bit) | {rate:.1f} images/s | {n} images |")
    else:
        print(f"JSRT PNG: no images under {data / 'jsrt_scr' / 'images'}")
    for name in ("RG1_UNCR.dcm", "RG1_J2KR.dcm"):
        path = data / "dicom" / name
        if path.is_file():
            rate, n = _rate([path], args.dicom_repeats)
            print(f"CR DICOM {name} (1955x1841, 15-bit): {rate:.2f} images/s over {n} loads")
            kind = "uncompressed" if "UNCR" in name else "JPEG 2000 lossless"
            rows.append(f"| load CR DICOM {name} (1955x1841, 15-bit, {kind}) | {rate:.2f} images/s | {n} loads |")
        else:
            print(f"CR DICOM {name}: not found under {data / 'dicom'}")

    yy, xx = np.mgrid[:1024, :1024]
    blobs = ((yy - 600) ** 2 / 120**2 + (xx - 300) ** 2 / 80**2 <= 1) | ((yy - 650) ** 2 + (xx - 720) ** 2 <= 90**2)
    noisy = np.random.default_rng(0).random((1024, 1024)) < 0.5
    for label, mask, repeats in (("lesion-like (2 blobs)", blobs, 50), ("noisy (50% random)", noisy, 3)):
        ms, nchar = _rle_ms(mask, repeats)
        print(f"COCO RLE 1024x1024 {label}: encode+decode {ms:.2f} ms ({nchar} counts chars)")
        rows.append(f"| COCO RLE encode + decode, 1024x1024 {label} | {ms:.2f} ms | {nchar} counts characters |")
    publish_if_asked(args, "\n".join(["One process.", "", "| what | speed | over |", "|---|---:|---|", *rows]))


if __name__ == "__main__":
    main()
