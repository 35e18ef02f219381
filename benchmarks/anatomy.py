"""Benchmark of the builtin anatomy backend on the held-out split (never trained on).

Prints, per source of the held-out ``test`` split (docs/anatomy.md):
Dice of right lung, left lung and heart against the reference masks; the absolute
error of the cardiothoracic ratio against the CTR of the reference masks (JSRT/SCR,
the only source with hearts); milliseconds per image for ``segment()`` on 512 x 512
JSRT images with one CPU thread; and the process's peak resident memory.

Usage: ``PYTHONPATH=src nice -n 10 python benchmarks/anatomy.py [--data ../shared/data]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import numpy as np


def dice(a: np.ndarray, b: np.ndarray) -> float:
    """Dice of two bool masks (1.0 when both are empty)."""
    s = a.sum() + b.sum()
    return 1.0 if s == 0 else float(2 * (a & b).sum() / s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
    parser.add_argument("--weights", type=Path, default=None, help="default: the shipped weights")
    parser.add_argument("--timing-images", type=int, default=20)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from cxrils.types import AnatomyMasks
    from cxrils.vision.anatomy import cardiothoracic_ratio
    from cxrils.vision.anatomy.builtin import BuiltinSegmenter
    from cxrils.vision.anatomy.data import load_samples, read_gray

    seg = BuiltinSegmenter(args.weights)
    samples = load_samples(args.data, "test")
    print(f"builtin anatomy {seg.version}; held-out test images: "
          f"{sum(s.source == 'jsrt_scr' for s in samples)} JSRT/SCR, "
          f"{sum(s.source == 'covid_ieee8023' for s in samples)} COVID-19 v7labs")
    rows: dict[str, dict[str, list[float]]] = {}
    for s in samples:
        m = seg.segment(read_gray(s.image_path))
        r = rows.setdefault(s.source, {k: [] for k in ("right lung", "left lung", "both lungs", "heart", "ctr_err")})
        r["right lung"].append(dice(m["right lung"], s.right_lung))
        r["left lung"].append(dice(m["left lung"], s.left_lung))
        r["both lungs"].append(dice(m["right lung"] | m["left lung"], s.right_lung | s.left_lung))
        if s.heart is not None:
            r["heart"].append(dice(m["heart"], s.heart))
            ref = AnatomyMasks({"right lung": s.right_lung, "left lung": s.left_lung, "heart": s.heart},
                               s.right_lung.shape, "reference")
            r["ctr_err"].append(abs(cardiothoracic_ratio(m) - cardiothoracic_ratio(ref)))
    print(f"{'source':16} {'n':>4} {'Dice RL':>8} {'Dice LL':>8} {'Dice lungs':>10} {'Dice heart':>10} "
          f"{'CTR |err| mean':>14} {'median':>7} {'max':>6}")
    for source, r in rows.items():
        def mean(key):
            return f"{np.mean(r[key]):.4f}" if r[key] else "-"
        ctr = (f"{np.mean(r['ctr_err']):14.4f} {np.median(r['ctr_err']):7.4f} {np.max(r['ctr_err']):6.3f}"
               if r["ctr_err"] else f"{'-':>14} {'-':>7} {'-':>6}")
        print(f"{source:16} {len(r['right lung']):4d} {mean('right lung'):>8} {mean('left lung'):>8} "
              f"{mean('both lungs'):>10} {mean('heart'):>10} {ctr}")

    jsrt = [s for s in samples if s.source == "jsrt_scr"][: args.timing_images]
    images = [read_gray(s.image_path) for s in jsrt]
    assert all(x.shape == (512, 512) for x in images)
    for x in images[:2]:
        seg.segment(x)  # warm-up
    times = []
    for x in images:
        t0 = time.perf_counter()
        seg.segment(x)
        times.append((time.perf_counter() - t0) * 1000)
    print(f"time per 512x512 image, 1 thread: median {statistics.median(times):.1f} ms, "
          f"mean {statistics.mean(times):.1f} ms (n={len(times)}; machine shared, load "
          f"{open('/proc/loadavg').read().split()[0] if Path('/proc/loadavg').exists() else '?'})")
    print(f"peak resident memory of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
