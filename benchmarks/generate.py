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

Usage::

    nice -n 10 python benchmarks/generate.py [--data ../shared/data] [--limit N]
        [--workers 1] [--threads 2] [--skip-ray]
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

REPO = Path(__file__).resolve().parents[1]


def _peak_mb(workers: int = 0) -> float:
    """Peak resident memory in MB: this process's, plus ``workers`` times the largest
    child's (``ru_maxrss`` of children is the largest one, not their sum), an upper
    bound of the run's total."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (self_kb + workers * child_kb) / 1024.0


def part_text(args: argparse.Namespace) -> dict:
    from cxrils.config import Config
    from cxrils.pipeline.inputs import read_iu_reports
    from cxrils.pipeline.stages import BuiltinStages

    items = [(f"iu-{rid}", text) for rid, _, text in read_iu_reports(args.data / "iu_xray")]
    stages = BuiltinStages()
    cfg = Config()
    t0 = time.perf_counter()
    list(stages.structure_reports(items[:1], cfg))  # load the structurer once (not timed below)
    t1 = time.perf_counter()
    out = list(stages.structure_reports(items, cfg))
    t2 = time.perf_counter()
    return {"reports": len(out), "load_s": t1 - t0, "seconds": t2 - t1, "per_s": len(out) / (t2 - t1),
            "findings": sum(len(r.findings) for r in out), "peak_mb": _peak_mb()}


def part_generate(args: argparse.Namespace) -> dict:
    from cxrils.config import Config
    from cxrils.pipeline.runner import generate

    pairs = args.data / "pairs" / "all_pairs.csv"
    with tempfile.TemporaryDirectory(prefix="cxrils-bench-") as tmp:
        t0 = time.perf_counter()
        summary = generate(pairs, Path(tmp) / "ds", Config(), runner=args.runner, workers=args.workers,
                           limit=args.limit)
        seconds = time.perf_counter() - t0
    n = summary["studies"]["total"]
    return {"runner": args.runner, "images": n, "seconds": seconds, "per_s": n / seconds,
            "done": summary["studies"]["done"], "records": summary["records"]["total"],
            "peak_mb": _peak_mb(args.workers if args.runner == "local" and args.workers > 1 else 0)}


def _run_part(part: str, args: argparse.Namespace, **extra: str) -> dict:
    cmd = [sys.executable, __file__, "--part", part, "--data", str(args.data), "--workers", str(args.workers),
           "--threads", str(args.threads)]
    if args.limit is not None:
        cmd += ["--limit", str(args.limit)]
    for k, v in extra.items():
        cmd += [f"--{k}", v]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": str(args.threads)}
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"part {part} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--limit", type=int, default=None, help="images for the full pipeline (default: all)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="torch threads per process")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--part", choices=["text", "generate"], help=argparse.SUPPRESS)
    ap.add_argument("--runner", default="local", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:
        import logging

        import torch

        logging.disable(logging.WARNING)
        torch.set_num_threads(args.threads)
        fn = part_text if args.part == "text" else part_generate
        print(json.dumps(fn(args)))
        return
    if not (args.data / "pairs" / "all_pairs.csv").is_file():
        raise SystemExit(f"{args.data}: no pairs/all_pairs.csv (see cxrils demo for the data)")
    print(f"cxrils generate benchmark: {os.cpu_count()} CPUs, {args.workers} worker(s), "
          f"{args.threads} torch thread(s), built-in backends")
    t = _run_part("text", args)
    print(f"text side : {t['reports']} IU reports in {t['seconds']:.1f} s = {t['per_s']:.0f} reports/s "
          f"(structurer load {t['load_s']:.1f} s; {t['findings']} findings); peak {t['peak_mb']:.0f} MB")
    g = _run_part("generate", args)
    print(f"full local: {g['images']} images in {g['seconds']:.1f} s = {g['per_s']:.2f} images/s "
          f"({g['done']} done, {g['records']} records; includes model loading); peak {g['peak_mb']:.0f} MB")
    if not args.skip_ray:
        r = _run_part("generate", args, runner="ray")
        print(f"full ray  : {r['images']} images in {r['seconds']:.1f} s = {r['per_s']:.2f} images/s "
              f"(includes Ray start); overhead vs local {r['seconds'] - g['seconds']:+.1f} s "
              f"({r['seconds'] / g['seconds']:.2f}x); driver peak {r['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
