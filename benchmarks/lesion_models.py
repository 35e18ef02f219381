"""Benchmark: the built-in lesion models alone (the learned anomaly map and the learned
detector), and the anomaly-map candidates compared, against expert masks.

Prints, with the EXPERT lung masks of COVID-QU-Ex given to the anomaly mappers (so the
numbers are the maps', not the anatomy model's):

1. per anomaly backend (``builtin``: the learned lesion map; ``atlas``: the healthy-lung
   atlas fitted on normal JSRT images, no lesion label) and per image set: pixel AUROC of
   x_ano (lesion pixels against non-lesion lung pixels of COVID-19 and normal images),
   mean IoU of ``A = x_ano >= tau_ano`` (0.10) with the expert mask on COVID-19 images,
   the whole-lung IoU for comparison, the share of normal lungs in A (whole lungs and
   their medial fifth, where heart border, mediastinum and hila lie), and the normal
   images whose A covers at least :data:`NORMAL_FLAGGED_SHARE` of their lungs;
2. the detector: average precision at IoU 0.5 against one box per expert lesion
   component (``cxrils.grounding.expert.lesion_boxes``), and the image-level AUROC of
   its top confidence (COVID-19 against normal).

Image sets: ``tuning (detector half)``: tuning-part images of the detector's half, which
the anomaly map never trained on: the set the anomaly backend was chosen on;
``report part``: the held-back images (reported only).

Run: ``PYTHONPATH=src nice -n 10 python -m benchmarks.lesion_models [--limit N] [--publish NAME]``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.results import apply_threads, benchmark_parser, publish_if_asked
from cxrils.evaluation import histogram_auroc, mask_iou

#: A normal image whose A covers at least this share of its lungs counts as flagged (ours):
#: the size of the false regions the light model answered "opacity" on (issue 28).
NORMAL_FLAGGED_SHARE = 0.15


def medial_band(right: np.ndarray, left: np.ndarray, fraction: float = 0.2) -> np.ndarray:
    """The medial ``fraction`` of each lung's width (patient right lung = image left,
    whose medial edge is its rightmost column)."""
    band = np.zeros_like(right)
    for lung, medial_is_right in ((right, True), (left, False)):
        cols = np.flatnonzero(lung.any(0))
        if cols.size == 0:
            continue
        w = int(fraction * (cols[-1] - cols[0] + 1))
        sl = slice(cols[-1] + 1 - w, cols[-1] + 1) if medial_is_right else slice(cols[0], cols[0] + w)
        band[:, sl] |= lung[:, sl]
    return band


def anomaly_rows(mappers: dict, samples, tau: float) -> list[str]:
    rows = []
    for name, m in mappers.items():
        hp, hn = np.zeros(256, np.int64), np.zeros(256, np.int64)
        ious, wl, flagged, flagged_med, failed = [], [], [], [], 0
        for s in samples:
            right, left = s.lungs()
            lungs = right | left
            try:
                xa = m.map(s.image(), lungs, lungs=lungs).x_ano
            except ValueError:  # the atlas refuses flat images: scored as an empty map
                xa, failed = np.zeros(lungs.shape, np.float32), failed + 1
            k = np.clip(np.rint(xa * 255), 0, 255).astype(np.int64)
            lesion = s.lesion(lungs.shape) & lungs
            hp += np.bincount(k[lesion], minlength=256)
            hn += np.bincount(k[lungs & ~lesion], minlength=256)
            a = (xa >= tau) & lungs
            if s.positive:
                ious.append(mask_iou(a, lesion))
                wl.append(mask_iou(lungs, lesion))  # lesion is inside the lungs: |lesion| / |lungs|
            else:
                med = medial_band(right, left)
                flagged.append(a.sum() / max(1, lungs.sum()))
                flagged_med.append((a & med).sum() / max(1, med.sum()))
        big = int(np.sum(np.asarray(flagged) >= NORMAL_FLAGGED_SHARE))
        rows.append(
            f"| {name} | {histogram_auroc(hp, hn):.3f} | {100 * np.mean(ious):.1f} | {100 * np.mean(wl):.1f} "
            f"| {100 * np.mean(flagged):.1f} | {100 * np.mean(flagged_med):.1f} "
            f"| {big}/{len(flagged)} = {100 * big / max(1, len(flagged)):.1f} | {failed} |"
        )
    return rows


def detector_row(det, samples) -> str:
    from cxrils.config import LesionDataConfig
    from cxrils.grounding.expert import lesion_boxes
    from cxrils.vision.detection.centernet import average_precision

    dets, truths, top_pos, top_neg = [], [], [], []
    for s in samples:
        right, left = s.lungs()
        boxes = det.detect(s.image())
        dets.append([(b.x0, b.y0, b.x1, b.y1, b.confidence) for b in boxes])
        truths.append(
            lesion_boxes(s.lesion(), LesionDataConfig().box_min_area_frac, right | left) if s.positive else []
        )
        (top_pos if s.positive else top_neg).append(boxes[0].confidence if boxes else 0.0)
    pos, neg = np.asarray(top_pos), np.asarray(top_neg)
    auc = (
        float(((pos[:, None] > neg[None]) + 0.5 * (pos[:, None] == neg[None])).mean())
        if len(pos) and len(neg)
        else float("nan")
    )
    return f"| {average_precision(dets, truths, 0.5):.3f} | {auc:.3f} | {len(pos)} | {len(neg)} |"


def training_meta(path: Path) -> dict:
    """The ``training`` summary stored in a weights file's metadata."""
    import json

    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        return json.loads(fh.metadata()["training"])


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n")[0], data=True, threads=1, page="lesion_models")
    ap.add_argument("--limit", type=int, default=None, help="first N COVID-19 and N/2 normal images per set")
    ap.add_argument(
        "--candidate",
        action="append",
        default=[],
        metavar="LABEL=WEIGHTS",
        help="also score learned lesion-map weights not shipped (repeatable)",
    )
    args = ap.parse_args()
    apply_threads(args)
    from cxrils.config import Config
    from cxrils.training.lesion_data import covid_qu_ex_samples, training_samples
    from cxrils.vision.anomaly import get_anomaly_mapper
    from cxrils.vision.anomaly.builtin import default_weights as ano_weights
    from cxrils.vision.detection import get_detector
    from cxrils.vision.detection.builtin import default_weights as det_weights

    t0 = time.time()
    cfg = Config()
    mappers = {
        "builtin (learned lesion map)": get_anomaly_mapper("builtin", cfg),
        "atlas (normal JSRT images only)": get_anomaly_mapper("atlas", cfg),
    }
    for item in args.candidate:
        label, _, path = item.partition("=")
        cand = Config()
        cand.anomaly.builtin_weights = path
        mappers[f"candidate, not shipped: {label}"] = get_anomaly_mapper("builtin", cand)
    det = get_detector("builtin", cfg)
    sets = {
        "tuning (detector half)": training_samples(args.data, "detector"),
        "report part": covid_qu_ex_samples(args.data, "report"),
    }
    if args.limit:
        sets = {
            k: [s for s in v if s.positive][: args.limit] + [s for s in v if not s.positive][: args.limit // 2]
            for k, v in sets.items()
        }
    lines = ["### Anomaly maps against the expert masks of COVID-QU-Ex (expert lungs given)", ""]
    for label, samples in sets.items():
        n_pos = sum(s.positive for s in samples)
        lines += [
            f"{label}: {n_pos} COVID-19 and {len(samples) - n_pos} normal images",
            "",
            f"| backend | pixel AUROC | IoU of A (tau_ano {cfg.grounding.tau_ano}) | whole-lung IoU "
            "| normal lungs in A (%) | medial fifth of normal lungs in A (%) "
            f"| normal images with A on at least {100 * NORMAL_FLAGGED_SHARE:.0f} % of the lungs | images refused (empty map) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += anomaly_rows(mappers, samples, cfg.grounding.tau_ano) + [""]
    lines += [
        "### Detector (builtin CenterNet) against one box per expert lesion component",
        "",
        "| image set | AP at IoU 0.5 | image AUROC of the top confidence | COVID-19 | normal |",
        "|---|---|---|---|---|",
    ]
    for label, samples in sets.items():
        if label.startswith("tuning"):  # the detector trained on these
            continue
        lines.append(f"| {label} " + detector_row(det, samples))
    lines += [
        "",
        "### Training runs (from the shipped weights' metadata, written by `cxrils train-*`)",
        "",
        "| model | images (COVID-19 / normal) | train / validation | best epoch of | validation score "
        "| seconds (load at the time) |",
        "|---|---|---|---|---|---|",
    ]
    for name, path in (("detector", det_weights()), ("anomaly map", ano_weights())):
        t = training_meta(path)
        score = (
            f"AP50 {t['validation_ap50']:.3f}"
            if "validation_ap50" in t
            else (
                "" if "validation_auroc" not in t else f"pixel AUROC {t['validation_auroc']:.3f} (chooses the epoch), "
            )
            + f"IoU {t['validation_iou']:.3f} at p_star {t['p_star']}"
        )
        lines.append(
            f"| {name} | {t['images']} ({t['covid_images']} / {t['normal_images']}) "
            f"| {t['train_images']} / {t['validation_images']} | {t['best_epoch']} of {len(t['history'])} "
            f"| {score} | {t['train_seconds']:.0f} |"
        )
    lines.append(
        f"\nAnomaly weights {mappers['builtin (learned lesion map)'].version} (p_star "
        f"{mappers['builtin (learned lesion map)'].p_star}); detector {det.version}; wall time "
        f"{time.time() - t0:.0f} s."
    )
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
