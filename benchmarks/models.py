"""Benchmark of the light ILS model on a generated dataset (issue 9, docs/models.md).

Trains the light model on the ``train`` split with 2 torch threads (once per
instruction encoder asked for: ``structured`` and/or ``minilm``), then prints, on the
held-out split (``test``, template instructions as the paper's Table 4):

* gIoU, cIoU, N-Acc and text accuracy of each trained model, next to the
  ``whole-lung`` and ``always-empty`` baselines of :mod:`cxrils.evaluation`;
* the training wall time on 2 threads;
* the inference latency per query on one thread (median and 90th percentile over
  the held-out queries; image already decoded). "cold": every query on a new image,
  so it includes the anatomy and anomaly priors (and the anatomy a global positive
  answer needs); "warm": further queries on an image already seen (priors cached).

Usage::

    nice -n 10 python -m benchmarks.models --dataset DATASET [--steps 600] [--image-size 96]
        [--encoders structured,minilm] [--priors on,off] [--split test] [--work runs/bench_models]
    nice -n 10 python -m benchmarks.models --dataset DATASET --from-run RUN   # score a trained run

With ``--from-run`` nothing is trained: the run's own ``train_summary.json`` gives the
training time (n/a for the shipped model, ``src/cxrils/weights/light_ils``), and its
thresholds (chosen on the validation split) are used as stored. Besides the table it
prints each model's errors: negatives that get a mask and positives called absent,
by lesion type.

The dataset is the one ``cxrils generate`` makes from ``../shared/data``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.results import benchmark_parser, publish_if_asked


def _pct(v) -> str:
    return "  n/a" if v is None else f"{100 * v:5.1f}"


def _row(name: str, t4: dict) -> str:
    return (
        f"| {name:<34} | {_pct(t4['gIoU'])} | {_pct(t4['cIoU'])} | {_pct(t4['n_acc'])} "
        f"| {_pct(t4['text_accuracy'])} | {t4['n_positive']:>4} | {t4['n_negative']:>4} |"
    )


def _template_rows(dataset: Path, split: str):
    from cxrils.dataset import read_records

    recs = read_records(dataset, split)
    return recs[recs["paraphrase_of"] == ""].reset_index(drop=True)


def _evaluate(dataset: Path, split: str, rows: list[dict]) -> dict:
    import pyarrow as pa

    from cxrils.evaluation import evaluate_predictions

    return evaluate_predictions(dataset, pa.Table.from_pylist(rows), split=split).table4()


def _errors(dataset: Path, split: str, preds: Path) -> str:
    """False-positive negatives and missed positives by lesion type, from a predictions file."""
    from collections import Counter

    import pyarrow.parquet as pq

    from cxrils.masks import decode_rle

    nonempty = {r["record_id"]: bool(decode_rle(r["mask"]).any()) for r in pq.read_table(preds).to_pylist()}
    recs = _template_rows(dataset, split)
    neg, pos = recs[recs["polarity"] == "negative"], recs[recs["polarity"] == "positive"]
    fp = Counter(r.lesion_type for r in neg.itertuples() if nonempty[r.record_id])
    missed = Counter(r.lesion_type for r in pos.itertuples() if not nonempty[r.record_id])
    return (
        f"{sum(fp.values())} of {len(neg)} negatives get a mask {dict(fp.most_common())}; "
        f"{sum(missed.values())} of {len(pos)} positives are called absent {dict(missed.most_common())}"
    )


def _baseline(name: str, dataset: Path, split: str) -> dict | str:
    from cxrils.evaluation import EvaluationError
    from cxrils.evaluation.baselines import BASELINES_WITH_ANSWERS, baseline_predictions

    try:
        rows = list(baseline_predictions(name, dataset, split=split))
        if name not in BASELINES_WITH_ANSWERS:  # masks only: text accuracy n/a, as `cxrils evaluate` says
            rows = [{k: v for k, v in r.items() if k != "answer"} for r in rows]
        return _evaluate(dataset, split, rows)
    except EvaluationError as err:
        return f"n/a ({err})"


def _latency(run: Path, dataset: Path, split: str, max_queries: int) -> dict[str, tuple[float, float, int]]:
    import torch
    from PIL import Image

    from cxrils.models import Segmenter

    torch.set_num_threads(1)
    seg = Segmenter.from_pretrained(run)
    recs = _template_rows(dataset, split).head(max_queries)
    images = {p: np.asarray(Image.open(dataset / p).convert("L")) for p in recs["image_path"].unique()}
    first = recs.iloc[0]
    for _ in range(3):  # warm-up: first-call allocations, anatomy and text encoder loading
        seg.predict(images[first["image_path"]], first["instruction"])
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    for r in recs.itertuples():
        for kind in ("cold", "warm"):
            if kind == "cold" and hasattr(seg, "clear_prior_cache"):
                seg.clear_prior_cache()
            t0 = time.perf_counter()
            seg.predict(images[r.image_path], r.instruction)
            times[kind].append(time.perf_counter() - t0)
    return {kind: (1000 * float(np.median(t)), 1000 * float(np.percentile(t, 90)), len(t)) for kind, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = benchmark_parser(__doc__.splitlines()[0], page="light_model")
    ap.add_argument("--dataset", type=Path, required=True, help="cxrils dataset folder (cxrils generate)")
    ap.add_argument("--split", default="test", help="held-out split to score (default test)")
    ap.add_argument("--encoders", default="structured", help="instruction encoders to compare (structured,minilm)")
    ap.add_argument("--priors", default="on,off", help="train with and/or without the anatomy/anomaly priors")
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: LightConfig)")
    ap.add_argument("--image-size", type=int, default=None, help="network input side (default: LightConfig)")
    ap.add_argument("--work", type=Path, default=Path("runs/bench_models"), help="run folders")
    ap.add_argument("--latency-queries", type=int, default=100)
    ap.add_argument(
        "--from-run", type=Path, default=None, help="score this trained light run folder instead of training"
    )
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)

    import pyarrow.parquet as pq
    import torch

    from cxrils.dataset import read_manifest
    from cxrils.models.light import LightConfig
    from cxrils.models.predict import predict_dataset
    from cxrils.training.light_train import train_light

    manifest = read_manifest(args.dataset)
    print(
        f"dataset {args.dataset}: {manifest['n_images']} images, {manifest['n_records']} records, "
        f"by split {manifest['counts']['by_split']}"
    )
    held_out = _template_rows(args.dataset, args.split)
    if not len(held_out):
        print(f"no {args.split} records: nothing to score")
        return 1
    results: dict[str, dict | str] = {}
    timings: dict[str, tuple] = {}
    errors: dict[str, str] = {}
    variants = [(e, p == "on") for e in args.encoders.split(",") if e for p in args.priors.split(",") if p]
    if args.from_run is not None:
        stored = LightConfig.from_dict(json.loads((args.from_run / "config.json").read_text()))
        variants = [(stored.text_encoder, stored.priors)]
    for enc, priors in variants:
        torch.set_num_threads(2)
        if args.from_run is not None:
            run = args.from_run
            cfg = LightConfig.from_dict(json.loads((run / "config.json").read_text()))
            summary = run / "train_summary.json"  # absent for runs saved without training
            res = json.loads(summary.read_text()) if summary.is_file() else {"train_seconds": float("nan")}
            wall = float("nan")
        else:
            overrides = {k: v for k, v in (("steps", args.steps), ("image_size", args.image_size)) if v is not None}
            cfg = LightConfig(text_encoder=enc, priors=priors, **overrides)
            run = args.work / f"light_{enc}_{'priors' if priors else 'nopriors'}"
            t0 = time.perf_counter()
            res = train_light(args.dataset, run, cfg, resume=False, progress=False, evaluate=False)
            wall = time.perf_counter() - t0
        from cxrils.models import Segmenter

        name = f"light ({enc}, {'priors' if priors else 'no priors'}" + (
            f", x{cfg.ensemble})" if cfg.ensemble > 1 else ")"
        )
        seg = Segmenter.from_pretrained(run)
        preds = args.work / f"{run.name}_predictions_{args.split}.parquet"  # never inside the run folder
        predict_dataset(seg, args.dataset, args.split, preds, progress=False, templates_only=True)
        results[name] = _evaluate(args.dataset, args.split, pq.read_table(preds).to_pylist())
        errors[name] = _errors(args.dataset, args.split, preds)
        timings[name] = (
            cfg.steps,
            cfg.batch_size,
            cfg.image_size,
            res["train_seconds"],
            wall,
            _latency(run, args.dataset, args.split, args.latency_queries),
            cfg.tau_presence,
            cfg.tau_mask,
            cfg.tau_presence_by_target,
        )
    for name in ("whole-lung", "always-empty"):
        results[name] = _baseline(name, args.dataset, args.split)

    lines = [
        f"dataset {args.dataset.name}: {manifest['n_images']} images, {manifest['n_records']} records, "
        f"by split {manifest['counts']['by_split']}",
        "",
        f"{args.split} split, template instructions (percent):",
        "",
        "| model                    |  gIoU |  cIoU | N-Acc |  text | pos  | neg  |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t4 in results.items():
        lines.append(_row(name, t4) if isinstance(t4, dict) else f"| {name:<34} | {t4} |")
    lines += ["", "training and inference latency (1 thread, per query):", ""]
    for name, (steps, bs, size, train_s, wall, latency, tau_p, tau_m, by_target) in timings.items():
        lat = "; ".join(f"{kind} median {med:.1f} ms, p90 {p90:.1f} ms" for kind, (med, p90, _) in latency.items())
        trained = f"{train_s:.0f} s training" if train_s == train_s else "training time not stored with the run"
        setup = f" ({wall:.0f} s with setup)" if wall == wall else ""
        lines.append(
            f"- {name}: {steps} steps x batch {bs} at {size} px: {trained}{setup}; "
            f"latency {lat} over {latency['cold'][2]} queries; "
            f"thresholds from the validation split: tau_presence {tau_p:.3f}, tau_mask {tau_m:.2f}"
            + (
                "; tau_presence by target: " + ", ".join(f"{t} {v:.3f}" for t, v in sorted(by_target.items()))
                if by_target
                else ""
            )
        )
    lines += ["", "errors of each light model:", ""]
    for name, line in errors.items():
        lines.append(f"- {name}: {line}")
    print("\n" + "\n".join(lines[2:]))
    publish_if_asked(args, "\n".join(lines))
    out = args.work / "results.json"
    out.write_text(json.dumps({"results": results, "timings": timings}, indent=2, default=str))
    print(f"\nresults -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
