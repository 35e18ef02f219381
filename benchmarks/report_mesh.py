"""Report structuring against NLM's manual MeSH indexing of the 3,955 IU reports, and its speed.

Accuracy: for each of the seven lesion types, precision, recall and F1 of "the report
says this type is present" against the type's MeSH major headings, with the strict
and the lenient scoring of ``benchmarks/mesh_scoring.py`` (the yardstick, written
apart from the structurer), on the two halves of the reports separately:

    tuning half   = reports whose SHA-256(report_id)[0] is even (rules were changed
                    by reading its failures; only its disagreements are printed)
    untuned half  = the others (never read for failures)

The structurer runs with the configuration that ``cxrils structure`` would use
(``--config`` / ``--set``, e.g. ``--set report.differential_certainty=definitive``);
the strict F1 of the other ``report.differential_certainty`` value is printed beside
it, with the issue's targets checked for both values. A third table says how the MeSH
indexers treat each certainty class of ours: of the (report, type) pairs that we give
as definitive, as definitive only when differential items count
(``differential_certainty = definitive``), or as tentative only (hedged: "possible",
"may represent"), how many MeSH indexes. Text: findings + impression, since the MeSH
indexers read both (``--paper-section``: the paper's findings-else-impression choice).

Speed: reports per second of the cxrils text stage (section text -> findings with
location labels, ``cxrils.report.structure_reports``) and, in the same process,
back to back, of medspaCy's ConText with the same target lexicon (medspaCy's own
cue rules, its clinical tokenizer, spaCy's rule-based sentencizer, which is faster
than medspaCy's PyRuSH), over the same texts, pinned to one CPU core; repeated
``--repeats`` times alternating the order; the median of the per-repeat ratios is
the result. The load average is printed with each repeat and in the header.

Usage::

    PYTHONPATH=src python -m benchmarks.report_mesh [--csv PATH] [--set report.KEY=VALUE]
        [--repeats 5] [--examples 10] [--no-speed] [--publish report_mesh]

``--publish NAME`` writes the tables to ``docs/results/NAME.md``, with the default
configuration only (no ``--config``, ``--set`` or ``--paper-section``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

from benchmarks.mesh_scoring import (  # noqa: E402
    LENIENT_MESH,
    STRICT_MESH,
    any_types,
    half,
    mesh_types,
    score,
    strict_types,
    table,
)
from benchmarks.results import DEFAULT_DATA, benchmark_parser, publish_if_asked  # noqa: E402
from cxrils.config import DIFFERENTIAL_CERTAINTIES, load_config  # noqa: E402
from cxrils.report import get_location_mapper, get_structurer, select_iu_section, structure_reports  # noqa: E402
from cxrils.report.lexicon import CARDIOMEGALY_PATTERNS, CONGESTION_PATTERNS, lesion_terms  # noqa: E402
from cxrils.report.sections import SectionChoice  # noqa: E402
from cxrils.vocab import LESION_TYPES  # noqa: E402

#: Issue 17's strict-F1 targets on the untuned half (sides: agreement over all types).
TARGETS: dict[str, float] = {
    "cardiomegaly": 0.90,
    "effusion": 0.90,
    "edema": 0.90,
    "pneumonia": 0.85,
    "atelectasis": 0.85,
    "opacity": 0.85,
    "consolidation": 0.85,
    "sides": 0.92,
}

DEFAULT_CSV = DEFAULT_DATA / "iu_xray" / "nlmcxr_reports_all.csv"


def pin_one_core() -> str:
    """Pin this process to one CPU (Linux); returns a note on what was done."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})
        return f"pinned to CPU {cpus[0]}"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity)"


def load_average() -> str:
    try:
        return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:
        return "?"


def context_peer():
    """medspaCy's ConText with our target lexicon (medspaCy's default cue rules)."""
    import medspacy
    from medspacy.target_matcher import TargetRule

    nlp = medspacy.load(medspacy_enable=["medspacy_tokenizer", "medspacy_target_matcher", "medspacy_context"])
    nlp.add_pipe("sentencizer", first=True)
    rules = [TargetRule(phrase, t or "FINDING") for phrase, t in lesion_terms().items()]
    rules += [TargetRule("cardiomegaly", "cardiomegaly", pattern=p) for p in CARDIOMEGALY_PATTERNS]
    rules += [TargetRule("vascular congestion", "FINDING", pattern=p) for p in CONGESTION_PATTERNS]
    nlp.get_pipe("medspacy_target_matcher").add(rules)
    return nlp


def run_peer(nlp, texts: list[str]) -> int:
    """ConText over ``texts``; returns the number of (target, modifier) assertions read."""
    n = 0
    for doc in nlp.pipe(texts, batch_size=64):
        for ent in doc.ents:
            n += len(ent._.modifiers)
    return n


def run_cxrils(items, cfg, structurer, mapper) -> list:
    return list(structure_reports(items, cfg, structurer=structurer, mapper=mapper))


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n\n")[0], page="report_mesh")
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--backend", default="rules", help="report structurer (config backends.report_structurer)")
    ap.add_argument("--config", type=Path, default=None, help="TOML configuration, as for cxrils structure")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="section.key=value")
    ap.add_argument("--paper-section", action="store_true", help="findings else impression, as the pipeline")
    ap.add_argument("--examples", type=int, default=10, help="disagreements printed per kind (tuning half only)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-speed", action="store_true")
    args = ap.parse_args()
    if args.publish and (args.overrides or args.config is not None or args.paper_section):
        ap.error(
            "--publish: only the default configuration's tables are published (no --config, --set or --paper-section)"
        )
    if not args.csv.exists():
        raise SystemExit(f"{args.csv}: not found (the IU reports of ../shared/data)")
    pinned = pin_one_core()
    df = pd.read_csv(args.csv, dtype=str).fillna("")
    if args.paper_section:
        choices = [select_iu_section(f, i) for f, i in zip(df.findings, df.impression)]
    else:
        choices = []
        for f, i in zip(df.findings, df.impression):
            text = " ".join(x for x in (f.strip(), i.strip()) if x)
            choices.append(SectionChoice("findings", text) if text else SectionChoice(None, "", excluded="empty"))
    items = list(zip(df.report_id, choices))
    halves = [half(r) for r in df.report_id]
    cfg = load_config(args.config, args.overrides)
    t0 = time.perf_counter()
    structurer = get_structurer(args.backend, cfg)
    build_ours = time.perf_counter() - t0
    mapper = get_location_mapper(None, cfg)
    reports = run_cxrils(items, cfg, structurer, mapper)

    out: list[str] = [
        f"IU reports: {len(df)} ({halves.count('tuning')} tuning, {halves.count('untuned')} untuned; "
        "tuning = first byte of SHA-256(report_id) even). Backend: "
        f"{args.backend}, mapper {cfg.backends.location_mapper}, report.differential_certainty = "
        f"{cfg.report.differential_certainty}. Text: "
        f"{'paper section choice (findings else impression)' if args.paper_section else 'findings + impression'}.",
        "",
        "Strict: MeSH "
        + ", ".join(f"{k} -> {v}" for k, v in STRICT_MESH.items())
        + "; Cardiac Shadow/enlarged, Heart/enlarged -> cardiomegaly. Lenient adds "
        + ", ".join(f"{k} -> {v}" for k, v in LENIENT_MESH.items() if k not in STRICT_MESH)
        + ".",
    ]
    wrong_tuning = {}
    for h in ("untuned", "tuning"):
        rows = [(m, rep.findings) for m, rep, hh in zip(df.mesh_major, reports, halves) if hh == h]
        for strict in (True, False):
            s, wrong = score(rows, strict)
            out += ["", table(s, f"{h} half, {'strict' if strict else 'lenient'}")]
            if h == "tuning" and strict:
                idx = [i for i, hh in enumerate(halves) if hh == h]
                wrong_tuning = {k: [idx[i] for i in v] for k, v in wrong.items()}

    if args.backend == "rules":
        other = next(v for v in DIFFERENTIAL_CERTAINTIES if v != cfg.report.differential_certainty)
        cfg2 = load_config(args.config, args.overrides + [f"report.differential_certainty={other}"])
        reports2 = run_cxrils(items, cfg2, get_structurer("rules", cfg2), mapper)
        out += [
            "",
            f"Strict F1 with report.differential_certainty = {other}:",
            "",
            "| half | " + " | ".join(LESION_TYPES) + " | sides |",
            "|---" * (len(LESION_TYPES) + 2) + "|",
        ]
        for h in ("untuned", "tuning"):
            rows = [(m, rep.findings) for m, rep, hh in zip(df.mesh_major, reports2, halves) if hh == h]
            s, _ = score(rows, True)
            ok, n = s.sides()
            out.append(f"| {h} | " + " | ".join(f"{s.f1(t):.3f}" for t in LESION_TYPES) + f" | {ok / max(n, 1):.3f} |")
        by_value = {cfg.report.differential_certainty: reports, other: reports2}
        out += [
            "",
            targets_table(df.mesh_major, by_value, halves),
            "",
            certainty_classes(df.mesh_major, by_value["tentative"], by_value["definitive"], halves),
        ]

    if not args.no_speed and args.backend == "rules":
        out += ["", speed(items, cfg, structurer, mapper, [c.text for c in choices], args.repeats, pinned, build_ours)]

    text = "\n".join(out)
    print(text)
    if args.examples:
        print(f"\n=== disagreements on the TUNING half (strict), first {args.examples} per kind ===")
        for kind in sorted(wrong_tuning):
            print(f"\n--- {kind}: {len(wrong_tuning[kind])}")
            for i in wrong_tuning[kind][: args.examples]:
                mine = [
                    f"{f.entity}({f.presence},{f.certainty}/{f.inference_certainty},{f.lesion_type}/"
                    f"{f.predicted_lesion_type},{f.locations}->{f.labels})"
                    for f in reports[i].findings
                    if f.lesion_type in LESION_TYPES or f.predicted_lesion_type in LESION_TYPES
                ]
                print(
                    f"  {df.report_id[i]}: MeSH={df.mesh_major[i]!r}\n      ours={mine}\n      text={choices[i].text!r}"
                )
    publish_if_asked(args, text)


def targets_table(mesh, by_value: dict, halves: list[str]) -> str:
    """Issue 17's targets on the untuned half, strict F1, for each differential_certainty value."""
    lines = [
        "Targets on the untuned half (strict F1; met when >= target):",
        "",
        "| report.differential_certainty | " + " | ".join(f"{k} (>= {v:.2f})" for k, v in TARGETS.items()) + " | met |",
        "|---" * (len(TARGETS) + 2) + "|",
    ]
    for value, reps in by_value.items():
        rows = [(m, r.findings) for m, r, h in zip(mesh, reps, halves) if h == "untuned"]
        s, _ = score(rows, True)
        ok, n = s.sides()
        got = {t: s.f1(t) for t in LESION_TYPES} | {"sides": ok / max(n, 1)}
        met = [k for k, v in TARGETS.items() if got[k] >= v]
        lines.append(
            f"| {value} | "
            + " | ".join(f"{got[k]:.3f}" + ("" if got[k] >= v else " (missed)") for k, v in TARGETS.items())
            + f" | {len(met)}/{len(TARGETS)} |"
        )
    return "\n".join(lines)


def certainty_classes(mesh, tentative_reps, definitive_reps, halves: list[str]) -> str:
    """How often MeSH indexes a type, by the certainty class of our findings of that type.

    For each (report, type): "definitive" when the type is definitively present with
    differential items tentative, "differential item" when it is so only with them
    definitive, "hedged" when it is present only tentatively (a possibility cue), else
    "absent". Cells: indexed by MeSH (strict mapping) / pairs of that class.
    """
    classes = ("definitive", "differential item", "hedged", "absent")
    lines = [
        "How MeSH indexes our certainty classes (strict mapping; cells: MeSH indexes the type / "
        "(report, type) pairs of the class):",
        "",
        "| half | type | " + " | ".join(classes) + " |",
        "|---" * (len(classes) + 2) + "|",
    ]
    for h in ("tuning", "untuned"):
        counts = {(t, c): [0, 0] for t in LESION_TYPES for c in classes}
        for m, rt, rd, hh in zip(mesh, tentative_reps, definitive_reps, halves):
            if hh != h:
                continue
            gold = mesh_types(m, STRICT_MESH)
            st, sd, an = strict_types(rt.findings), strict_types(rd.findings), any_types(rt.findings)
            for t in LESION_TYPES:
                c = "definitive" if t in st else "differential item" if t in sd else "hedged" if t in an else "absent"
                counts[(t, c)][0] += t in gold
                counts[(t, c)][1] += 1
        for t in LESION_TYPES:
            lines.append(
                f"| {h} | {t} | " + " | ".join(f"{counts[(t, c)][0]}/{counts[(t, c)][1]}" for c in classes) + " |"
            )
    return "\n".join(lines)


def speed(items, cfg, structurer, mapper, texts, repeats: int, pinned: str, build_ours: float) -> str:
    """Back-to-back throughput of cxrils and medspaCy ConText; markdown lines."""
    t0 = time.perf_counter()
    nlp = context_peer()
    build_peer = time.perf_counter() - t0
    run_peer(nlp, texts[:50])
    run_cxrils(items[:50], cfg, structurer, mapper)
    lines = [
        "Speed, one core (" + pinned + f"), {len(items)} reports, {repeats} repeats back to back in one "
        "process (order alternating):",
        "",
        "| repeat | load avg (1/5/15 min) | cxrils reports/s | medspaCy ConText reports/s | ratio |",
        "|---|---|---|---|---|",
    ]
    ratios = []
    for r in range(repeats):
        rates = {}
        for who in ("cxrils", "peer") if r % 2 == 0 else ("peer", "cxrils"):
            t0 = time.perf_counter()
            if who == "cxrils":
                run_cxrils(items, cfg, structurer, mapper)
            else:
                run_peer(nlp, texts)
            rates[who] = len(items) / (time.perf_counter() - t0)
        ratios.append(rates["cxrils"] / rates["peer"])
        lines.append(f"| {r + 1} | {load_average()} | {rates['cxrils']:.0f} | {rates['peer']:.0f} | {ratios[-1]:.2f} |")
        print(lines[-1], file=sys.stderr)
    lines += [
        "",
        f"Median ratio cxrils / medspaCy ConText: **{statistics.median(ratios):.2f}** (goal >= 2). "
        f"Building the pipelines (not timed above): cxrils {build_ours:.2f} s, medspaCy {build_peer:.2f} s.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
