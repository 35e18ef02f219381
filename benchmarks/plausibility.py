"""Frontal-view plausibility check (``cxrils.vision.anatomy.frontal_plausibility``) on
public data: what the human-annotated frontal anatomy of JSRT measures, and what the
check decides on JSRT, on the IU lateral images and on the public pairs.

Usage: ``python -m benchmarks.plausibility [--data ../shared/data] [--publish plausibility]``

Prints (and with ``--publish plausibility`` writes to ``docs/results/plausibility.md``):

1. the range of each measure over the JSRT SCR human masks (247 PA images): the
   source of the bounds in ``cxrils.config.QCConfig`` (ours, widened from these);
2. how many images the check passes: JSRT human masks, the builtin segmentation of
   the IU lateral images (``images.csv`` ``view_visual``), and of every image of
   ``pairs/all_pairs.csv`` (frontal images), with the failing checks counted.
"""

from __future__ import annotations

import argparse
import csv
import re
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.results import benchmark_parser, publish_if_asked
from cxrils.config import Config
from cxrils.io import load_image
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy import cardiothoracic_ratio, frontal_plausibility, get_segmenter


def measures(m: AnatomyMasks) -> dict[str, float]:
    """The quantities the check bounds, for one image."""
    right, left, heart = (np.asarray(m[k], bool) for k in ("right lung", "left lung", "heart"))
    r_rows, l_rows = np.flatnonzero(right.any(1)), np.flatnonzero(left.any(1))
    r_cols, l_cols = np.flatnonzero(right.any(0)), np.flatnonzero(left.any(0))
    shared = min(r_rows[-1], l_rows[-1]) - max(r_rows[0], l_rows[0]) + 1
    return {
        "smaller lung's area (of the image)": min(right.mean(), left.mean()),
        "larger lung's area (of the image)": max(right.mean(), left.mean()),
        "smaller / larger lung": min(right.mean(), left.mean()) / max(right.mean(), left.mean()),
        "lungs' shared rows": max(0, shared) / min(r_rows[-1] - r_rows[0] + 1, l_rows[-1] - l_rows[0] + 1),
        "lungs' shared columns": np.intersect1d(r_cols, l_cols).size / min(r_cols.size, l_cols.size),
        "heart area (of the image)": heart.mean(),
        "CTR": cardiothoracic_ratio(m),
    }


def jsrt(data: Path) -> list[AnatomyMasks]:
    from cxrils.sources.jsrt import read_jsrt_images

    out = []
    for r in (r for r in read_jsrt_images(data) if r.heart is not None):
        organs = {
            k: np.asarray(Image.open(p)) > 127
            for k, p in (("right lung", r.right_lung), ("left lung", r.left_lung), ("heart", r.heart))
        }
        out.append(AnatomyMasks(masks=organs, shape=organs["heart"].shape, backend="jsrt-scr"))
    return out


def verdicts(masks: list[AnatomyMasks], cfg: Config) -> tuple[int, Counter]:
    reasons = [frontal_plausibility(m, cfg.qc) for m in masks]
    failed = Counter(re.split(r"[\d(:]", r)[0].strip() for r in reasons if r)  # the check, without values
    return sum(r is None for r in reasons), failed


def main() -> None:
    ap = benchmark_parser(__doc__, data=True, page="plausibility", formatter_class=argparse.RawDescriptionHelpFormatter)
    args = ap.parse_args()
    cfg = Config()
    human = jsrt(args.data)
    table = [measures(m) for m in human]
    lines = [
        "JSRT SCR human masks (247 PA images), range of each measure:",
        "",
        "| measure | min | median | max |",
        "|---|---:|---:|---:|",
    ]
    for key in table[0]:
        v = np.array([t[key] for t in table])
        lines.append(f"| {key} | {v.min():.3f} | {np.median(v):.3f} | {v.max():.3f} |")
    seg = get_segmenter("builtin", cfg)
    with open(args.data / "iu_xray" / "images.csv", newline="") as fh:
        lateral = [args.data / "iu_xray" / r["file"] for r in csv.DictReader(fh) if r["view_visual"] == "lateral"]
    pairs = args.data / "pairs" / "all_pairs.csv"
    with open(pairs, newline="", encoding="utf-8") as fh:
        frontal = [pairs.parent / r["image_path"] for r in csv.DictReader(fh)]
    lines += [
        "",
        "The check with the default bounds (`cxrils.config.QCConfig`):",
        "",
        "| images | anatomy from | pass | fail | failing checks |",
        "|---|---|---:|---:|---|",
    ]
    for name, source, masks in (
        ("JSRT PA", "human masks", human),
        ("IU lateral, given as frontal", "builtin", [seg.segment(load_image(p).pixels) for p in lateral]),
        ("public pairs (all_pairs.csv, frontal)", "builtin", [seg.segment(load_image(p).pixels) for p in frontal]),
    ):
        ok, failed = verdicts(masks, cfg)
        detail = ", ".join(f"{k}: {n}" for k, n in failed.most_common()) or "-"
        lines.append(f"| {name} | {source} | {ok} | {len(masks) - ok} | {detail} |")
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
