"""Benchmark of ``cxrils.evaluation``: time and peak memory to evaluate a test-set-sized run.

Builds a synthetic dataset the size of the paper's MIMIC-ILS test split (12,235
records, 2,354 positives; composition of Table 12: 852 / 1,049 / 453 positive and
8,316 / 796 / 769 negative basic / global / lesion-inference records) with 512x512
masks (ellipses), and predictions of a simulated model (shifted, rescaled ellipses
on positives, ~10 % false-positive blobs on negatives, ~94 % right answers). Each
measurement runs in a fresh process pinned to one CPU core (pyarrow limited to one
thread) and prints the evaluation time (first, cold run) and its peak memory (peak
RSS during a second run minus RSS before it, libraries already loaded). It repeats
at about 3k records to show that memory does not grow with the number of records.

Usage::

    nice -n 10 python -m benchmarks.evaluation [--records 12235] [--positives 2354] [--publish evaluation]

``--publish evaluation`` writes ``docs/results/evaluation.md`` (``benchmarks/results.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.results import REPO_ROOT, benchmark_parser, publish_if_asked

SIZE = 512
#: Paper Table 12 (test split): (instruction type, polarity) -> records.
COMPOSITION = {
    ("basic", "positive"): 852,
    ("global", "positive"): 1049,
    ("lesion_inference", "positive"): 453,
    ("basic", "negative"): 8316,
    ("global", "negative"): 796,
    ("lesion_inference", "negative"): 769,
}


def _ellipse(
    rng: np.random.Generator,
    rr: np.ndarray,
    cc: np.ndarray,
    scale: float = 1.0,
    centre: tuple[float, float] | None = None,
    radii: tuple[float, float] | None = None,
):
    cy, cx = centre if centre is not None else (rng.uniform(120, 400), rng.uniform(80, 430))
    ry, rx = radii if radii is not None else (rng.uniform(10, 110), rng.uniform(8, 80))
    mask = ((rr - cy) / (ry * scale)) ** 2 + ((cc - cx) / (rx * scale)) ** 2 <= 1.0
    return mask, (cy, cx), (ry, rx)


def build(root: Path, n_records: int, n_positive: int, seed: int = 0) -> tuple[Path, Path]:
    """Write a dataset folder and a predictions file; returns (dataset_dir, predictions)."""
    from cxrils import vocab
    from cxrils.masks import encode_rle
    from cxrils.templates import render_answer, render_instruction

    rng = np.random.default_rng(seed)
    rr, cc = np.mgrid[0:SIZE, 0:SIZE]
    total_pos = sum(v for (_, p), v in COMPOSITION.items() if p == "positive")
    total_neg = sum(v for (_, p), v in COMPOSITION.items() if p == "negative")
    plan = []
    for (itype, pol), count in COMPOSITION.items():
        share = n_positive / total_pos if pol == "positive" else (n_records - n_positive) / total_neg
        plan += [(itype, pol)] * round(count * share)
    plan = [plan[j] for j in rng.permutation(len(plan))[:n_records]]  # mixed, as a real test split
    empty = encode_rle(np.zeros((SIZE, SIZE), bool))
    refs, preds = [], []
    for i, (itype, pol) in enumerate(plan):
        lesion = vocab.INFERENCE_LESION_TYPES[i % 3] if itype == "lesion_inference" else vocab.LESION_TYPES[i % 7]
        loc = ["right lung base"]
        target = None if itype == "lesion_inference" else lesion
        if pol == "positive":
            ref, centre, radii = _ellipse(rng, rr, cc)
            ref_rle = encode_rle(ref)
            shift = (centre[0] + rng.normal(0, 6), centre[1] + rng.normal(0, 6))
            pred_rle = encode_rle(_ellipse(rng, rr, cc, rng.uniform(0.8, 1.2), shift, radii)[0])
            answer = (
                render_answer(itype, pol, lesion=lesion, certainty="definitive")
                if itype == "lesion_inference"
                else render_answer(itype, pol, target=lesion, locations=loc)
            )
        else:
            ref_rle = empty
            pred_rle = encode_rle(_ellipse(rng, rr, cc, 0.3)[0]) if rng.random() < 0.1 else empty
            answer = render_answer(itype, pol, target=target or "opacity", locations=loc)
        rid = f"img{i // 8}:{i % 8}"
        refs.append(
            {
                "record_id": rid,
                "split": "test",
                "lesion_type": lesion,
                "instruction_type": itype,
                "polarity": pol,
                "instruction": render_instruction(itype, target, loc),
                "answer": answer,
                "mask": ref_rle,
                "height": SIZE,
                "width": SIZE,
            }
        )
        preds.append(
            {
                "record_id": rid,
                "mask": pred_rle,
                "answer": answer if rng.random() < 0.94 else render_answer("basic", "positive"),
            }
        )
    ds = root / "dataset"
    (ds / "records").mkdir(parents=True)
    for k in range(0, len(refs), 4096):
        pq.write_table(pa.Table.from_pylist(refs[k : k + 4096]), ds / "records" / f"part-{k // 4096:05d}.parquet")
    (ds / "manifest.json").write_text(json.dumps({"schema_version": 1}))
    order = np.random.default_rng(seed + 1).permutation(len(preds))  # predictions in another order
    pred_path = root / "predictions.parquet"
    from cxrils.evaluation import write_predictions

    write_predictions(pred_path, (preds[j] for j in order))
    return ds, pred_path


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(dataset: str, predictions: str) -> None:
    """Run in a fresh process pinned to one core; print JSON.

    Times a first (cold) evaluation, then resets the peak-RSS counter
    (``/proc/self/clear_refs``) and evaluates again: the memory of evaluation is that
    run's peak RSS minus the RSS before it (libraries already loaded).
    """
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    from cxrils.evaluation import evaluate_predictions

    t0 = time.perf_counter()
    report = evaluate_predictions(dataset, predictions)
    seconds = time.perf_counter() - t0
    del report
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    before = _status_mib("VmRSS")
    t0 = time.perf_counter()
    report = evaluate_predictions(dataset, predictions)
    warm_seconds = time.perf_counter() - t0
    peak = _status_mib("VmHWM")
    t4 = report.table4()
    print(
        json.dumps(
            {
                "records": report.n_samples,
                "positives": t4["n_positive"],
                "seconds": seconds,
                "warm_seconds": warm_seconds,
                "peak_mib": peak,
                "eval_mib": peak - before,
                "gIoU": t4["gIoU"],
                "cIoU": t4["cIoU"],
                "n_acc": t4["n_acc"],
                "text_accuracy": t4["text_accuracy"],
            }
        )
    )


def main() -> None:
    ap = benchmark_parser(__doc__.splitlines()[0], page="evaluation")
    ap.add_argument("--records", type=int, default=12235)
    ap.add_argument("--positives", type=int, default=2354)
    ap.add_argument("--measure", nargs=2, metavar=("DATASET", "PREDICTIONS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for n, p in ((args.records // 4, args.positives // 4), (args.records, args.positives)):
            t0 = time.perf_counter()
            ds, pred = build(Path(tmp) / str(n), n, p)
            print(
                f"built {n} records ({p} positives, {SIZE}x{SIZE} masks) in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.evaluation", "--measure", str(ds), str(pred)],
                env=env,
                cwd=REPO_ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
        for r in results:
            print(
                f"{r['records']:>6} records ({r['positives']} positives): evaluate_predictions "
                f"{r['seconds']:.2f} s on one core ({r['warm_seconds']:.2f} s warm); peak RSS "
                f"{r['peak_mib']:.0f} MiB, of which evaluation {r['eval_mib']:.1f} MiB; "
                f"gIoU {r['gIoU']:.3f} cIoU {r['cIoU']:.3f} N-Acc {r['n_acc']:.3f} text {r['text_accuracy']:.3f}"
            )
        small, big = results
        print(
            f"records x{big['records'] / small['records']:.1f} -> evaluation memory "
            f"{small['eval_mib']:.1f} -> {big['eval_mib']:.1f} MiB; time per record "
            f"{1e6 * big['seconds'] / big['records']:.0f} us"
        )
    rows = [
        f"| {r['records']:,} ({r['positives']:,} positives) | {r['seconds']:.2f} s / {r['warm_seconds']:.2f} s | "
        f"{r['eval_mib']:.1f} MiB | {r['gIoU']:.3f} / {r['cIoU']:.3f} / {r['n_acc']:.3f} / "
        f"{r['text_accuracy']:.3f} |"
        for r in results
    ]
    publish_if_asked(
        args,
        "\n".join(
            [
                f"Synthetic test-set-sized runs ({SIZE}x{SIZE} ellipse masks, composition of paper Table 12, a "
                "simulated model), `evaluate_predictions` in a fresh process pinned to one core, pyarrow on one thread.",
                "",
                "| records | time, one core (cold / warm) | evaluation memory (peak RSS above baseline) | "
                "gIoU / cIoU / N-Acc / text of the simulated model |",
                "|---|---:|---:|---|",
                *rows,
                "",
                f"Time per record: {1e6 * big['seconds'] / big['records']:.0f} us (cold, {big['records']:,} records).",
            ]
        ),
    )


if __name__ == "__main__":
    main()
