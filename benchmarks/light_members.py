"""Validation scores of a light-model ensemble and of each of its members alone (issue 28).

A :class:`~cxrils.models.light.network.LightEnsemble` trains its members side by side on
the same batches, each on its own loss (the loss is the members' mean, so each member's
gradient is scaled by 1/E, which AdamW's update ignores but for its epsilon; no gradient
clipping couples them), so each member alone is a single network trained as
``ensemble=1`` trains one, from its own random start.
This benchmark chooses thresholds (:func:`cxrils.models.light.calibrate.calibrate`, the
model's own rule and N-Acc constraint) on the ``validate`` split for the averaged
ensemble and for every member alone, and prints, for each, the pooled gIoU, cIoU and
N-Acc and each target's presence threshold, gIoU and N-Acc. It is the rule for choosing
between shipping the ensemble and one network: the higher pooled validation gIoU under
the same N-Acc constraint. Each figure is measured on the split its thresholds were
chosen on, so all are optimistic, and picking the best of 1 + E candidates on them adds
a little more; the human-mask benchmark (``benchmarks/human_masks.py``) is the test.
Nothing here sees the test split or a human-mask benchmark image (the COVID-QU-Ex report
part is never in a light training dataset). A run trained on out-of-fold priors
(``oof_anomaly_weights``) is scored on them too, as its thresholds were chosen.

Usage::

    python -m benchmarks.light_members --run RUN --dataset LIGHT_DATA [--threads 2]
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.results import apply_threads, benchmark_parser, publish_if_asked


def _line(name: str, cal: dict) -> str:
    return (
        f"| {name} | {100 * cal['gIoU']:.1f} | {100 * cal['cIoU']:.1f} | {100 * cal['n_acc']:.1f} "
        f"| {100 * cal['n_acc_lower']:.1f} | {'yes' if cal['constraint_met'] else 'no'} |"
    )


def _target_lines(name: str, cal: dict) -> list[str]:
    return [
        f"| {name} | {t} | {c['n_positive']} | {c['n_negative']} | {c['tau_presence']:.3f} "
        f"| {100 * c['gIoU']:.1f} | {100 * c['n_acc']:.1f} | {'yes' if c['constraint_met'] else 'no'} |"
        for t, c in sorted(cal["by_target"].items())
    ]


def candidates(seg) -> list[tuple[str, object]]:
    """``(name, segmenter)``: ``seg`` (a :class:`~cxrils.models.light.segmenter.LightSegmenter`)
    and, when it is an ensemble, each member alone (:meth:`LightSegmenter.members`)."""
    out: list[tuple[str, object]] = [(f"ensemble of {seg.config.ensemble}", seg)]
    if seg.config.ensemble > 1:
        out += [(f"member {k} alone", m) for k, m in enumerate(seg.members())]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = benchmark_parser(__doc__.splitlines()[0], threads=2, page="light_members")
    ap.add_argument("--run", type=Path, required=True, help="trained light run (or weights) folder")
    ap.add_argument("--dataset", type=Path, required=True, help="the light training dataset (validate split)")
    args = ap.parse_args(argv)
    apply_threads(args)

    from cxrils.models import Segmenter
    from cxrils.models.light.calibrate import calibrate
    from cxrils.models.light.segmenter import LightSegmenter

    seg = Segmenter.from_pretrained(args.run)
    if not isinstance(seg, LightSegmenter):
        print(f"{args.run}: not a light model")
        return 1
    stored = seg.config  # the rule's settings, as trained (calibrate changes only thresholds)
    cache: dict = {}  # one set of priors for every network
    priors_of = None
    if stored.oof_anomaly_weights:  # the priors the run chose its thresholds on
        from cxrils.models.light.priors import default_anatomy
        from cxrils.training.prior_folds import OutOfFoldPriors

        try:
            priors_of = OutOfFoldPriors(stored, default_anatomy())
        except (ValueError, RuntimeError) as err:
            print(f"{args.run}: trained on out-of-fold priors, which cannot be rebuilt: {err}")
            return 1
    results = [
        (name, calibrate(s, args.dataset, "validate", prior_cache=cache, priors_of=priors_of))
        for name, s in candidates(seg)
    ]
    n = results[0][1]["n_records"]
    text = "\n".join(
        [
            f"Run: {args.run.name}; dataset: {args.dataset.name}, validate split, {n} template records; "
            f"N-Acc constraint {stored.calib_min_n_acc} at {stored.calib_confidence} one-sided confidence "
            "(network resolution)"
            + ("; priors out of fold, as in training (cxrils.training.prior_folds)." if priors_of else "."),
            "",
            "| network | gIoU | cIoU | N-Acc | N-Acc lower bound | constraint met |",
            "|---|---|---|---|---|---|",
            *(_line(name, cal) for name, cal in results),
            "",
            "Per target (own presence threshold at the shared tau_mask):",
            "",
            "| network | target | positives | negatives | tau_presence | gIoU | N-Acc | constraint met |",
            "|---|---|---|---|---|---|---|---|",
            *(line for name, cal in results for line in _target_lines(name, cal)),
        ]
    )
    print(text)
    publish_if_asked(args, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
