"""Benchmark of the builtin anatomy backend on the held-out split (never trained on).

Prints, per source of the held-out ``test`` split (JSRT/SCR, COVID-19 v7labs,
COVID-QU-Ex; docs/anatomy.md): Dice of right lung, left lung and both lungs, for the
visible and the whole lungs, and of the heart against the reference masks, with issue
28's targets (each source scored in the convention its radiologists drew); the absolute error of the cardiothoracic ratio against
the CTR of the reference masks (JSRT/SCR, the only source with hearts); milliseconds
per image for ``segment()`` on 512 x 512 JSRT images with one CPU thread; the
process's peak resident memory; and what the near-duplicate rule of
``cxrils.training.anatomy_data`` found across and within the sources.

With the shipped weights ``--publish anatomy`` writes the tables to
``docs/results/anatomy.md`` (``benchmarks/results.py``); with ``--weights`` (a candidate)
they are only printed. ``--part validation`` scores the validation part of ``cxrils
train-anatomy`` instead (carved from the train split, default 10 %), the part on which
candidates and settings are chosen; it is never published.

Usage: ``PYTHONPATH=src nice -n 10 python -m benchmarks.anatomy [--data ../shared/data] [--weights W]
[--part test|validation] [--publish anatomy]``
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.results import benchmark_parser, publish_if_asked
from cxrils.evaluation import mask_dice

#: Display names of the sources, in table order.
SOURCE_NAMES = {"jsrt_scr": "JSRT/SCR", "covid_ieee8023": "COVID-19 v7labs", "covid_qu_ex": "COVID-QU-Ex"}


def dice(a: np.ndarray, b: np.ndarray) -> float:
    """Dice of two bool masks (1.0 when both are empty: both leave the organ out)."""
    return mask_dice(a, b, empty=1.0)


#: Lung Dice targets of issue 28 per source: the convention the source's radiologists drew
#: (docs/anatomy.md) and the lowest Dice of each lung (right, left) or of both lungs.
TARGETS = {
    "jsrt_scr": ("visible", "both lungs", 0.95),
    "covid_qu_ex": ("visible", "both lungs", 0.95),
    "covid_ieee8023": ("whole", "each lung", 0.92),
}


def accuracy_table(seg, samples) -> str:
    """Markdown tables of lung Dice in both conventions, heart Dice and CTR error per
    source of ``samples``, and the issue 28 target lines.

    Each source's reference lungs are drawn in one convention
    (:data:`cxrils.training.anatomy_data.FULL_LUNG_SOURCES`): the visible lungs
    (``AnatomyMasks.organs()``) and the whole lungs (``AnatomyMasks.masks``) are both
    scored against them, so the table also shows how far the two conventions lie apart."""
    from cxrils.training.anatomy_data import FULL_LUNG_SOURCES, read_gray
    from cxrils.types import AnatomyMasks
    from cxrils.vision.anatomy import cardiothoracic_ratio

    rows: dict[str, dict[str, list[float]]] = {}
    keys = [f"{conv} {organ}" for conv in ("visible", "whole") for organ in ("right lung", "left lung", "both lungs")]
    for s in samples:
        whole = seg.segment(read_gray(s.image_path))
        seen = whole.organs()
        r = rows.setdefault(s.source, {k: [] for k in [*keys, "heart", "ctr_err"]})
        for conv, m in (("visible", seen), ("whole", whole)):
            r[f"{conv} right lung"].append(dice(m["right lung"], s.right_lung))
            r[f"{conv} left lung"].append(dice(m["left lung"], s.left_lung))
            r[f"{conv} both lungs"].append(dice(m["right lung"] | m["left lung"], s.right_lung | s.left_lung))
        if s.heart is not None:
            r["heart"].append(dice(whole["heart"], s.heart))
            ref = AnatomyMasks(
                {"right lung": s.right_lung, "left lung": s.left_lung, "heart": s.heart},
                s.right_lung.shape,
                "reference",
            )
            if whole["heart"].any() and (seen["right lung"] | seen["left lung"]).any():
                r["ctr_err"].append(abs(cardiothoracic_ratio(whole) - cardiothoracic_ratio(ref)))
            else:  # no heart or lungs found: no CTR to compare; counted below the table
                r["no_ctr"] = r.get("no_ctr", 0) + 1
    lines = [
        "| source (its radiologists' convention) | n | visible: Dice right / left / both lungs "
        "| whole: Dice right / left / both lungs | Dice heart | CTR abs. error mean / median / max "
        "| lowest both-lungs Dice, own convention |",
        "|---|---|---|---|---|---|---|",
    ]
    target_lines = []
    for source in SOURCE_NAMES:
        r = rows.get(source)
        if r is None:
            continue

        def mean(key):
            return f"{np.mean(r[key]):.3f}" if r[key] else "-"

        own = "whole" if source in FULL_LUNG_SOURCES else "visible"
        e = r["ctr_err"]
        ctr = f"{np.mean(e):.4f} / {np.median(e):.4f} / {np.max(e):.3f}" if e else "-"
        if r.get("no_ctr"):
            ctr += f" ({r['no_ctr']} images without a heart or lungs)"
        cells = [
            " / ".join(mean(f"{conv} {o}") for o in ("right lung", "left lung", "both lungs"))
            for conv in ("visible", "whole")
        ]
        lines.append(
            f"| {SOURCE_NAMES[source]} ({own}) | {len(r['visible right lung'])} | {cells[0]} | {cells[1]} "
            f"| {mean('heart')} | {ctr} | {np.min(r[f'{own} both lungs']):.3f} |"
        )
        conv, what, goal = TARGETS[source]
        organs = ("right lung", "left lung") if what == "each lung" else ("both lungs",)
        for organ in organs:
            v = float(np.mean(r[f"{conv} {organ}"]))
            target_lines.append(
                f"| {conv} lungs vs {SOURCE_NAMES[source]}: Dice {organ} | >= {goal} | {v:.3f} "
                f"| {'met' if v >= goal else '**missed**'} |"
            )
    lines += [
        "",
        "Issue 28's anatomy targets:",
        "",
        "| target | goal | this run | |",
        "|---|---|---|---|",
        *target_lines,
    ]
    return "\n".join(lines)


def duplicate_lines(split, data_root: Path) -> str:
    """Markdown: split counts per source and what the near-duplicate rule found among
    all image files of the sources (with or without masks)."""
    from cxrils.training.anatomy_data import SPLIT, near_duplicates

    files = [(source, p) for source in SOURCE_NAMES for p in sorted((data_root / source / "images").glob("*.png"))]
    order = list(SOURCE_NAMES)
    pairs: Counter = Counter()
    with_copy: dict[tuple[str, str], set[str]] = {}
    for i, j, _ in near_duplicates([f[1] for f in files], [f[1] for f in files]):
        (a, pa), (b, _) = files[i], files[j]
        if a != b:
            if order.index(a) < order.index(b):
                pairs[(a, b)] += 1
            with_copy.setdefault((a, b), set()).add(pa.stem)
    excluded = Counter(s.source for s, _ in split.excluded)
    train, test = Counter(s.source for s in split.train), Counter(s.source for s in split.test)
    lines = [
        "| source | image files | train (used) | train left out as near-duplicates of held-back images "
        "| test (held back, with masks) |",
        "|---|---|---|---|---|",
    ]
    n_files = Counter(f[0] for f in files)
    for source, name in SOURCE_NAMES.items():
        lines.append(f"| {name} | {n_files[source]} | {train[source]} | {excluded[source]} | {test[source]} |")
    lines += [
        "",
        f"Near-duplicates between sources (thumbnail correlation >= {SPLIT.dup_min_correlation}, "
        "all image files, any split):",
        "",
        "| sources A - B | pairs | images of A with a match in B | images of B with a match in A |",
        "|---|---|---|---|",
    ]
    for a_i, a in enumerate(order):
        for b in order[a_i + 1 :]:
            lines.append(
                f"| {SOURCE_NAMES[a]} - {SOURCE_NAMES[b]} | {pairs[(a, b)]} | "
                f"{len(with_copy.get((a, b), ()))} | {len(with_copy.get((b, a), ()))} |"
            )
    by_match = Counter((s.source, src) for s, m in split.excluded for src in {t[0] for t in m})
    lines += [
        "",
        "Train images left out, by the source of the held-back image they match: "
        + ", ".join(f"{SOURCE_NAMES[a]} ~ {SOURCE_NAMES[b]} {n}" for (a, b), n in sorted(by_match.items()))
        + ".",
    ]
    return "\n".join(lines)


#: Thumbnail correlation from which a COVID-19 / COVID-QU-Ex pair is taken as the same
#: image for :func:`reference_agreement` (ours; stricter than the leakage rule so that
#: follow-up images of one patient are not compared).
SAME_IMAGE_CORRELATION = 0.97


def reference_agreement(data_root: Path) -> str:
    """Markdown line: Dice between the COVID-19 collection's v7labs masks and
    COVID-QU-Ex's masks of the same images (pairs at :data:`SAME_IMAGE_CORRELATION`),
    the v7labs mask resized (nearest) onto COVID-QU-Ex's 256 x 256 square. Different
    crops of one image lower it, so it is a lower bound of the references' agreement."""
    import cv2

    from cxrils.training.anatomy_data import covid_qu_ex_samples, covid_samples, near_duplicates

    v7, qu = covid_samples(data_root), covid_qu_ex_samples(data_root)
    scores: dict[str, list[float]] = {"both lungs": [], "right lung": [], "left lung": []}
    for i, j, _ in near_duplicates([s.image_path for s in qu], [s.image_path for s in v7], SAME_IMAGE_CORRELATION):
        q, v = qu[i], v7[j]

        def onto(m: np.ndarray) -> np.ndarray:
            return cv2.resize(m.astype(np.uint8), q.right_lung.shape[::-1], interpolation=cv2.INTER_NEAREST) > 0

        scores["both lungs"].append(dice(q.right_lung | q.left_lung, onto(v.right_lung | v.left_lung)))
        scores["right lung"].append(dice(q.right_lung, onto(v.right_lung)))
        scores["left lung"].append(dice(q.left_lung, onto(v.left_lung)))
    return (
        f"Agreement of the two sources' reference masks on the same images ({len(scores['both lungs'])} "
        f"COVID-QU-Ex / COVID-19 v7labs pairs, thumbnail correlation >= {SAME_IMAGE_CORRELATION}, any split): "
        + ", ".join(f"Dice {k} {np.mean(v):.3f}" for k, v in scores.items())
        + " (v7labs masks reach the mediastinum, COVID-QU-Ex's follow the heart border)."
    )


def training_line(weights: Path) -> str:
    """Markdown line: the training summary stored in the weights' metadata by
    ``cxrils train-anatomy`` (counts, schedule, chosen epoch, wall and CPU time)."""
    import json

    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as fh:
        t = json.loads((fh.metadata() or {}).get("training", "{}"))
    if not t:
        return "Training summary: none in the weights' metadata."
    keys = (
        "init",
        "init_tensors_reshaped",
        "epochs",
        "epochs_run",
        "per_epoch",
        "batch_size",
        "lr",
        "seed",
        "best_epoch",
        "best_val_dice",
        "best_val_dice_per_source",
        "train_images",
        "validation_images",
        "near_duplicates_left_out",
        "final_loss",
        "seconds",
        "cpu_seconds",
    )
    return (
        "Training summary (weights metadata, written by `cxrils train-anatomy`): "
        + "; ".join(f"{k} {json.dumps(t[k])}" for k in keys if k in t)
        + "."
    )


def main() -> None:
    parser = benchmark_parser(__doc__.splitlines()[0], data=True, page="anatomy")
    parser.add_argument(
        "--weights",
        type=Path,
        default=None,
        help="candidate weights (printed only); default: the shipped weights (published)",
    )
    parser.add_argument("--timing-images", type=int, default=20)
    parser.add_argument("--part", choices=("test", "validation"), default="test")
    parser.add_argument("--val-percent", type=int, default=10, help="with --part validation")
    args = parser.parse_args()
    if args.publish and (args.weights is not None or args.part == "validation"):
        parser.error(
            "--publish: only the shipped weights' test-split tables are published; "
            "a candidate's (--weights) and the validation part's are printed only"
        )

    import torch

    torch.set_num_threads(1)
    from cxrils.training.anatomy_data import load_split, read_gray, split_of
    from cxrils.training.anatomy_train import is_validation
    from cxrils.vision.anatomy.builtin import BuiltinSegmenter, default_weights

    seg = BuiltinSegmenter(args.weights)
    if args.part == "validation":
        split = load_split(args.data)
        val = [s for s in split.train if is_validation(s.source, s.patient_id, args.val_percent)]
        print(f"Builtin anatomy `{seg.version}` on the validation part ({args.val_percent} % of the train split)\n")
        print(accuracy_table(seg, val))
        return
    # timing and memory first, before the data set is loaded (the peak would count it)
    from cxrils.sources.jsrt import read_jsrt_images

    jsrt = [r.image_path for r in read_jsrt_images(args.data) if split_of("jsrt_scr", r.image_id) == "test"][
        : args.timing_images
    ]
    images = [read_gray(p) for p in jsrt]
    assert images and all(x.shape == (512, 512) for x in images)
    for x in images[:2]:
        seg.segment(x)  # warm-up
    times = []
    for x in images:
        t0 = time.perf_counter()
        seg.segment(x)
        times.append((time.perf_counter() - t0) * 1000)
    timing = (
        f"Time per 512 x 512 JSRT image (whole `segment()`), 1 torch thread: median "
        f"{statistics.median(times):.1f} ms, mean {statistics.mean(times):.1f} ms (n={len(times)}; "
        f"load {os.getloadavg()[0]:.1f}). Peak resident memory of the process up to here "
        f"(model + imports, before the data set is loaded): "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB."
    )

    split = load_split(args.data)
    parts = [
        f"Builtin anatomy `{seg.version}` on the held-out `test` split (never trained on, never used "
        "to choose anything).",
        "",
        accuracy_table(seg, split.test),
        "",
        timing,
        "",
        reference_agreement(args.data),
        "",
        duplicate_lines(split, args.data),
        "",
        training_line(args.weights or default_weights()),
    ]
    text = "\n".join(parts)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
