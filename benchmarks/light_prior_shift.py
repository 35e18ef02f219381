"""The light model's opacity answers on the validation split, split by whether the builtin anomaly map trained on the image (issue 28).

The light model reads the builtin anomaly map x_ano as an input (``LightConfig.priors``).
That map trains on the ``anomaly`` half of the COVID-QU-Ex tuning part
(:func:`cxrils.training.lesion_data.tuning_role`), and the light model's training and
validation records come from both halves (:mod:`cxrils.training.light_data`). On the
images the map trained on, its false positives on normal lungs are fewer than on new
images, and so are the light model's. Its presence thresholds are chosen on the whole
validate split, half of whose COVID-QU-Ex images are such images, while the held-back
test (``benchmarks/human_masks.py``, the COVID-QU-Ex report part) holds none.

This benchmark answers every template opacity question (basic and global) of the
validate split's COVID-QU-Ex images with the model as it answers users
(``predict_many``, consistent answers included), with the opacity threshold set to each
value of :data:`THRESHOLDS` and the shipped one, and prints per tuning-part half: N-Acc
of the lung-level questions on Normal images (global, right lung, left lung, both lungs:
the questions ``human_masks`` asks of normal images), N-Acc of all opacity negatives, and
the presence recall of the opacity positives. A diagnostic: nothing is chosen from it
(choosing the threshold on the half the map never saw would move the operating point on
a split of a few dozen normal images; the remedy it points to is training and
calibrating the light model on priors from a map that never saw the image, see the
light model card).

With ``--out-of-fold`` (a model trained with out-of-fold priors,
:mod:`cxrils.training.prior_folds`), each half is also answered with the priors of the
lesion models that never saw it: the priors its thresholds were chosen on, and the
situation of a new film.

Usage::

    python -m benchmarks.light_prior_shift --dataset LIGHT_DATA [--run RUN] [--out-of-fold] [--threads 2]
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from benchmarks.light_validate import add_light_validate_options, count_cell, load_light_run, out_of_fold_segmenters
from benchmarks.results import apply_threads, benchmark_parser, publish_if_asked
from cxrils.training.light_data import HUMAN_PREFIX

#: Opacity presence thresholds tried besides the shipped one (ours; a grid around it).
THRESHOLDS: tuple[float, ...] = (0.85, 0.9, 0.95, 0.975)
#: The target scored.
TARGET = "opacity"
#: The halves of the COVID-QU-Ex tuning part, and what each is to the builtin anomaly map.
HALVES: tuple[tuple[str, str], ...] = (
    ("anomaly", "anomaly half (the map trained on these images)"),
    ("detector", "detector half (the map never saw them)"),
)


#: Labels of the lesion models the priors come from (the table's second column).
SHIPPED = "shipped"
OUT_OF_FOLD = "out of fold"


def answers_at(seg, x, instructions: list[str], taus: list[float]) -> list[list[bool]]:
    """Per threshold of ``taus``: whether ``seg`` answers each instruction about ``x``
    present (``predict_many``, as users get it) with its opacity threshold set to it; the
    model's thresholds are restored afterwards."""
    by_target = seg.config.tau_presence_by_target
    keep = dict(by_target)
    out = []
    try:
        for tau in taus:
            by_target[TARGET] = tau
            out.append([bool(p.mask.any()) for p in seg.predict_many([x] * len(instructions), instructions)])
    finally:
        by_target.clear()
        by_target.update(keep)
    return out


def is_lung_level(locations) -> bool:
    """Whether a question's locations are the global question's (none) or whole lungs only."""
    return all(loc in ("right lung", "left lung") for loc in locations)


def tally(rows: list[tuple[str, bool, bool, bool]]) -> dict[str, tuple[int, int, int, int, int, int]]:
    """Per half: (normal lung-level absent, of, negatives absent, of, positives present, of)
    from ``(half, positive, normal-image lung-level question, answered present)`` rows."""
    out: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    for half, positive, normal_lung, present in rows:
        t = out[half]
        if positive:
            t[4] += present
            t[5] += 1
            continue
        t[2] += not present
        t[3] += 1
        if normal_lung:
            t[0] += not present
            t[1] += 1
    return {k: (t[0], t[1], t[2], t[3], t[4], t[5]) for k, t in out.items()}


def main(argv: list[str] | None = None) -> int:
    """Answer the validate split's COVID-QU-Ex opacity questions at each threshold and
    print (and with ``--publish`` write) the table; 1 when the model is not a light model
    with the anomaly prior."""
    ap = benchmark_parser(__doc__.splitlines()[0], threads=2, page="light_prior_shift")
    add_light_validate_options(ap)
    ap.add_argument(
        "--out-of-fold",
        action="store_true",
        help="also answer each half with the priors of the lesion models that never saw it "
        "(the run's oof_anomaly_weights / oof_detector_weights, cxrils.training.prior_folds)",
    )
    args = ap.parse_args(argv)
    apply_threads(args)
    run, seg = load_light_run(args)

    from cxrils.dataset import read_records
    from cxrils.io import load_image
    from cxrils.models import Segmenter
    from cxrils.models.light.segmenter import LightSegmenter
    from cxrils.training.lesion_data import tuning_role

    if not isinstance(seg, LightSegmenter) or not seg.config.priors:
        print(f"{run}: not a light model with the anomaly prior")
        return 1
    rec = read_records(args.dataset, "validate")
    rec = rec[
        (rec.target == TARGET)
        & rec.instruction_type.isin(["basic", "global"])
        & (rec.paraphrase_of == "")
        & rec.image_id.str.startswith(HUMAN_PREFIX)
    ]
    by_image = {k: g for k, g in rec.groupby("image_id", sort=True)}
    shipped = seg.config.tau_presence_by_target.get(TARGET, seg.config.tau_presence)
    taus = sorted({*THRESHOLDS, shipped})
    models: dict[str, dict[str, Segmenter]] = {SHIPPED: {h: seg for h, _ in HALVES}}
    if args.out_of_fold:
        try:
            models[OUT_OF_FOLD] = out_of_fold_segmenters(run, seg)
        except (ValueError, RuntimeError) as err:
            print(f"{run}: no out-of-fold lesion models to answer with: {err}")
            return 1
    rows: dict[tuple[str, float], list[tuple[str, bool, bool, bool]]] = {(k, t): [] for k in models for t in taus}
    for image_id, g in by_image.items():
        x = load_image(Path(args.dataset) / g.image_path.iloc[0]).pixels
        half = tuning_role(image_id[len(HUMAN_PREFIX) :])
        normal = image_id.startswith(f"{HUMAN_PREFIX}Normal")
        for kind, by_half in models.items():
            for tau, present in zip(taus, answers_at(by_half[half], x, g.instruction.tolist(), taus)):
                for r, p in zip(g.itertuples(), present):
                    rows[(kind, tau)].append((half, r.polarity == "positive", normal and is_lung_level(r.locations), p))
    n_images = {h: sum(tuning_role(i[len(HUMAN_PREFIX) :]) == h for i in by_image) for h, _ in HALVES}
    lines = [
        f"Model: {run.name}; dataset: {Path(args.dataset).name}, validate split: {len(rec)} template {TARGET} "
        f"questions (basic and global) on {len(by_image)} COVID-QU-Ex images "
        f"({', '.join(f'{h} half {n}' for h, n in n_images.items())}); answers as the model gives them "
        f"(consistent_answers = {seg.config.consistent_answers}); shipped {TARGET} threshold {shipped:.4f}"
        + (
            f"; out of fold: each half's priors from the lesion models that never saw it "
            f"(oof_anomaly_weights {Path(seg.config.oof_anomaly_weights).name}, "
            f"oof_detector_weights {Path(seg.config.oof_detector_weights).name})."
            if args.out_of_fold
            else "."
        ),
        "",
        "| half of the tuning part | lesion models of the priors | opacity threshold "
        "| Normal images, lung-level questions: N-Acc "
        "| all opacity negatives: N-Acc | opacity positives: presence recall |",
        "|---|---|---|---|---|---|",
    ]
    for half, label in HALVES:
        for kind in models:
            for tau in taus:
                t = tally(rows[(kind, tau)]).get(half, (0,) * 6)
                mark = f"{tau:.4f} (shipped)" if tau == shipped else f"{tau:.3f}"
                lines.append(
                    f"| {label} | {kind} | {mark} | {count_cell(t[0], t[1])} | {count_cell(t[2], t[3])} "
                    f"| {count_cell(t[4], t[5])} |"
                )
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
