"""Time to structure ONE report text of growing length: is the text stage linear?

The text is the IU reports' findings + impression joined in report-id order until it
has the wanted number of characters (1k, 10k, 100k, 1M by default), cut at a
sentence end. For each length: seconds for ``cxrils.report.structure_report`` (rules
structurer + lexicon mapper, one core), and microseconds per character; the same
for medspaCy's ConText with the same target lexicon (as in report_mesh.py) up to
``--peer-max`` characters. Linear work shows as a flat time per character.

Usage::

    PYTHONPATH=src python -m benchmarks.report_scaling [--lengths 1000 10000 100000 1000000]
        [--repeats 3] [--peer-max 100000] [--publish report_scaling]
"""

from __future__ import annotations

import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

from benchmarks.report_mesh import DEFAULT_CSV, context_peer, load_average, pin_one_core, run_peer  # noqa: E402
from benchmarks.results import benchmark_parser, publish_if_asked  # noqa: E402
from cxrils.report import get_location_mapper, get_structurer, structure_report  # noqa: E402


def corpus_text(csv: Path, n_chars: int) -> str:
    """IU findings + impression joined until ``n_chars`` characters, cut after a period."""
    df = pd.read_csv(csv, dtype=str).fillna("")
    parts, size = [], 0
    while size < n_chars:
        for f, i in zip(df.findings, df.impression):
            t = " ".join(x for x in (f.strip(), i.strip()) if x)
            if t:
                parts.append(t)
                size += len(t) + 1
                if size >= n_chars:
                    break
    text = " ".join(parts)[:n_chars]
    cut = text.rfind(". ")
    return text[: cut + 1] if cut > 0 else text


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n\n")[0], page="report_scaling")
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peer-max", type=int, default=100_000, help="longest text given to medspaCy")
    args = ap.parse_args()
    if not args.csv.exists():
        raise SystemExit(f"{args.csv}: not found (the IU reports of ../shared/data)")
    pinned = pin_one_core()
    structurer, mapper = get_structurer("rules"), get_location_mapper("lexicon")
    nlp = context_peer() if args.peer_max else None
    structure_report("warm", "FINDINGS: Small left effusion.", structurer=structurer, mapper=mapper)
    lines = [
        f"One text per length, best of {args.repeats}, one core ({pinned}); IU findings + impression "
        "joined in report order.",
        "",
        "| characters | sentences (findings) | cxrils s | cxrils µs/char | medspaCy ConText s | "
        "medspaCy µs/char | load avg |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in args.lengths:
        text = corpus_text(args.csv, n)
        rep = structure_report("x", "FINDINGS: " + text, structurer=structurer, mapper=mapper)
        ours = best_of(
            lambda: structure_report("x", "FINDINGS: " + text, structurer=structurer, mapper=mapper), args.repeats
        )
        n_sent = max((f.sentence_index for f in rep.findings), default=0)
        if nlp is not None and len(text) <= args.peer_max:
            peer = best_of(lambda: run_peer(nlp, [text]), 1 if len(text) > 20_000 else args.repeats)
            peer_txt = f"{peer:.3f} | {peer / len(text) * 1e6:.2f}"
        else:
            peer_txt = "not run | -"
        lines.append(
            f"| {len(text):,} | {n_sent} ({len(rep.findings)}) | {ours:.3f} | "
            f"{ours / len(text) * 1e6:.2f} | {peer_txt} | {load_average()} |"
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
