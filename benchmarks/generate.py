"""Benchmark of ``cxrils generate``: throughput and peak memory.

Prints, for the local runner with the built-in backends:

- text side: all IU X-ray reports (3,955) structured in one batch -> reports/s;
- full pipeline: the paired images of ``pairs/all_pairs.csv`` -> images/s;
- Ray overhead: the same images with ``--runner ray`` (local instance) vs local.

Each part runs in its own process so its peak resident memory is its own (with
worker processes: the parent's peak plus workers x the largest worker's peak, an
upper bound). Ray's workers are not children of the driver, so the Ray line gives
the driver's peak only. Targets of issue 7: text side
>= 200 reports/s, full pipeline >= 1 image/s at 512 px, peak memory <= 4 GB.

``--publish generate`` writes (``benchmarks/results.py``) ``docs/results/generate_speed.md``
(one row per run) and ``docs/results/generate_summary.md`` (the dataset of the first run:
images, records, the pipeline recall per lesion type; every run writes the same dataset).

Usage::

    nice -n 10 python -m benchmarks.generate [--data ../shared/data] [--limit N]
        [--workers 1,2] [--threads 2] [--skip-ray] [--publish generate]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results import REPO_ROOT as REPO
from benchmarks.results import benchmark_parser, publish_if_asked


def _peak_mb(workers: int = 0) -> float:
    """Peak resident memory in MB: this process's, plus ``workers`` times the largest
    child's (``ru_maxrss`` of children is the largest one, not their sum), an upper
    bound of the run's total."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (self_kb + workers * child_kb) / 1024.0


def part_text(args: argparse.Namespace) -> dict:
    from cxrils.config import Config
    from cxrils.pipeline.stages import BuiltinStages
    from cxrils.sources import read_iu_reports

    items = [(f"iu-{rid}", text) for rid, _, text in read_iu_reports(args.data / "iu_xray")]
    stages = BuiltinStages()
    cfg = Config()
    t0 = time.perf_counter()
    list(stages.structure_reports(items[:1], cfg))  # load the structurer once (not timed below)
    t1 = time.perf_counter()
    out = list(stages.structure_reports(items, cfg))
    t2 = time.perf_counter()
    return {
        "reports": len(out),
        "load_s": t1 - t0,
        "seconds": t2 - t1,
        "per_s": len(out) / (t2 - t1),
        "findings": sum(len(r.findings) for r in out),
        "peak_mb": _peak_mb(),
    }


def part_generate(args: argparse.Namespace) -> dict:
    from cxrils.config import Config
    from cxrils.dataset import read_manifest
    from cxrils.dataset.stats import image_counts
    from cxrils.pipeline.runner import generate

    pairs = args.data / "pairs" / "all_pairs.csv"
    with tempfile.TemporaryDirectory(prefix="cxrils-bench-") as tmp:
        t0 = time.perf_counter()
        summary = generate(
            pairs, Path(tmp) / "ds", Config(), runner=args.runner, workers=args.workers, limit=args.limit
        )
        seconds = time.perf_counter() - t0
        manifest = read_manifest(Path(tmp) / "ds")
        images = image_counts(Path(tmp) / "ds", manifest)
    n = summary["studies"]["total"]
    return {
        "runner": args.runner,
        "workers": args.workers,
        "images": n,
        "seconds": seconds,
        "per_s": n / seconds,
        "done": summary["studies"]["done"],
        "records": summary["records"]["total"],
        "peak_mb": _peak_mb(args.workers if args.runner == "local" and args.workers > 1 else 0),
        "summary": summary,
        "image_counts": images,
        "by_split": manifest["counts"]["by_split"],
    }


def _run_part(part: str, args: argparse.Namespace, workers: int = 1, **extra: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.generate",
        "--part",
        part,
        "--data",
        str(args.data),
        "--workers",
        str(workers),
        "--threads",
        str(args.threads),
    ]
    if args.limit is not None:
        cmd += ["--limit", str(args.limit)]
    for k, v in extra.items():
        cmd += [f"--{k}", v]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": str(args.threads),
    }
    load0 = os.getloadavg()[0]
    res = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"part {part} failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["load"] = f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"  # 1-minute load average at start and end
    return out


def summary_markdown(g: dict) -> str:
    """The dataset of one run: images, records and the pipeline recall per lesion type."""
    s, ic = g["summary"], g["image_counts"]
    st, rec = s["studies"], s["records"]
    excl = ", ".join(f"{k} {v}" for k, v in st["excluded_by_reason"].items()) or "none"
    pos, neg = (sum(v[p] for v in rec["by_lesion_type"].values()) for p in ("positive", "negative"))
    lines = [
        f"`cxrils generate pairs/all_pairs.csv` (built-in backends, {st['total']} image-text pairs of ../shared/data):",
        "",
        "| | |",
        "|---|---|",
        f"| images | {st['total']}: done {st['done']}, excluded {st['excluded']} ({excl}) |",
        f"| images with records | {ic['with_records']} ({len(ic['without_records'])} done without any record: "
        f"{', '.join(ic['without_records'][:3]) or '-'}) |",
        f"| records | {rec['total']} (" + ", ".join(f"{k} {v}" for k, v in g["by_split"].items()) + ") |",
        f"| polarity | {pos} positive, {neg} negative |",
        "| instruction types | "
        + ", ".join(
            f"{k.replace('_', ' ')} {v['positive']} + / {v['negative']} -"
            for k, v in rec["by_instruction_type"].items()
        )
        + " |",
        "",
        "Findings grounded per lesion type (the pipeline recall, paper Appendix A.7 / Table 8):",
        "",
        "| lesion type | reported | grounded | recall |",
        "|---|---:|---:|---:|",
    ]
    for t, f in s["findings"].items():
        r = "-" if f["recall"] is None else f"{100 * f['recall']:.1f}%"
        lines.append(f"| {t} | {f['reported']} | {f['grounded']} | {r} |")
    return "\n".join(lines)


def main() -> None:
    ap = benchmark_parser(
        __doc__,
        data=True,
        threads=2,
        page="generate",
        parts=("speed", "summary"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--limit", type=int, default=None, help="images for the full pipeline (default: all)")
    ap.add_argument("--workers", default="1", help="comma-separated worker counts, one run each (e.g. 1,2)")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--part", choices=["text", "generate"], help=argparse.SUPPRESS)
    ap.add_argument("--runner", default="local", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:
        import logging

        import torch

        logging.disable(logging.WARNING)
        torch.set_num_threads(args.threads)
        args.workers = int(args.workers)
        fn = part_text if args.part == "text" else part_generate
        print(json.dumps(fn(args)))
        return
    if not (args.data / "pairs" / "all_pairs.csv").is_file():
        raise SystemExit(f"{args.data}: no pairs/all_pairs.csv (see cxrils demo for the data)")
    worker_counts = [int(w) for w in str(args.workers).split(",")]
    print(
        f"cxrils generate benchmark: {os.cpu_count()} CPUs, workers {worker_counts}, "
        f"{args.threads} torch thread(s), built-in backends"
    )
    t = _run_part("text", args)
    print(
        f"text side : {t['reports']} IU reports in {t['seconds']:.1f} s = {t['per_s']:.0f} reports/s "
        f"(structurer load {t['load_s']:.1f} s; {t['findings']} findings); peak {t['peak_mb']:.0f} MB"
    )
    rows = [
        f"| text side: {t['reports']} IU reports, one batch (rules + lexicon) | {t['seconds']:.1f} s "
        f"(+ structurer load {t['load_s']:.1f} s) | {t['per_s']:.0f} reports/s | {t['peak_mb']:.0f} MB | "
        f"{t['load']} |"
    ]
    runs = []
    for w in worker_counts:
        for runner in ("local",) + (() if args.skip_ray else ("ray",)):
            g = _run_part("generate", args, workers=w, runner=runner)
            runs.append(g)
            what = f"{w} worker{'s' if w > 1 else ''}" if runner == "local" else f"{w} actor(s) per step"
            mem = "driver " if runner == "ray" else ("<= " if w > 1 else "")
            print(
                f"full {runner:<5}: {what}: {g['images']} images in {g['seconds']:.1f} s = {g['per_s']:.2f} "
                f"images/s ({g['done']} done, {g['records']} records; includes model loading"
                f"{' and Ray start' if runner == 'ray' else ''}); peak {mem}{g['peak_mb']:.0f} MB"
            )
            rows.append(
                f"| full pipeline, {runner}, {what}, {g['images']} pairs | {g['seconds']:.1f} s | "
                f"{g['per_s']:.2f} images/s | {mem}{g['peak_mb']:.0f} MB | {g['load']} |"
            )
    speed = "\n".join(
        [
            "Times include model loading (and the Ray start for Ray rows); memory is peak RSS "
            "(local, several workers: parent + workers x the largest worker, an upper bound; "
            "Ray: the driver only). The machine's 1-minute load average at the start and end of each "
            f"row is in the last column: on {os.cpu_count()} CPUs, a load above {os.cpu_count()} means "
            "other jobs shared them, and rates then fall.",
            "",
            "| part | time | throughput | peak memory | load |",
            "|---|---:|---:|---:|---:|",
            *rows,
        ]
    )
    publish_if_asked(args, {"speed": speed, "summary": summary_markdown(runs[0])})


if __name__ == "__main__":
    main()
