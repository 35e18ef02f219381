"""Run summary: per-study counts, their totals, and the printed table.

Per study (:func:`study_stats`): the exclusion reason, the positive findings of
each lesion type the report gave (``reported``) and those Algorithm 1 grounded
(``grounded``), counted only for images that reached Algorithm 1, and the records
by lesion type, instruction type and polarity. The run summary
(:func:`summarize`) adds them up; ``grounded / reported`` per lesion type is the
pipeline's recall (paper section 4, Appendix A.7, Table 8).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from cxrils import vocab
from cxrils.types import StructuredReport, StudyGrounding


def exclusion_category(reason: str) -> str:
    """The category of an exclusion reason: the text before the first ': '."""
    return reason.split(": ", 1)[0]


def study_stats(
    report: StructuredReport | None, grounding: StudyGrounding | None, records: list[dict] | None, excluded: str | None
) -> dict[str, Any]:
    """JSON-ready counts of one image (see the module docstring)."""
    reported: Counter[str] = Counter()
    grounded: Counter[str] = Counter()
    if grounding is not None:
        for gf in grounding.findings:
            ltype = gf.lesion_type
            if ltype in vocab.LESION_TYPES and gf.finding.presence == "positive":
                reported[ltype] += 1
                grounded[ltype] += int(gf.mask is not None and bool(gf.mask.any()))
    return {
        "excluded": excluded,
        "reported": dict(sorted(reported.items())),
        "grounded": dict(sorted(grounded.items())),
        "records": record_counts(records or []),
        "n_findings": len(report.findings) if report is not None else 0,
    }


def record_counts(records: list[dict]) -> dict[str, int]:
    """The ``records`` counts of :func:`study_stats`: ``"lesion_type|instruction_type|polarity"``
    -> number of records, keys sorted."""
    rec: Counter[str] = Counter()
    for r in records:
        rec["|".join(str(r.get(k, "")) for k in ("lesion_type", "instruction_type", "polarity"))] += 1
    return dict(sorted(rec.items()))


def summarize(stats: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Totals of :func:`study_stats` dicts (JSON-ready; deterministic key order).

    Returns
    -------
    dict
        ``studies``: total, done (not excluded), excluded, excluded_by_reason
        (category -> count); ``findings``: per lesion type reported, grounded and
        recall (None when nothing was reported), plus ``all``; ``records``: total,
        by_lesion_type (type -> polarity -> count), by_instruction_type
        (instruction type -> polarity -> count).
    """
    n = done = 0
    reasons: Counter[str] = Counter()
    reported: Counter[str] = Counter()
    grounded: Counter[str] = Counter()
    records: Counter[tuple[str, str, str]] = Counter()
    for s in stats:
        n += 1
        if s["excluded"]:
            reasons[exclusion_category(s["excluded"])] += 1
        else:
            done += 1
        reported.update(s["reported"])
        grounded.update(s["grounded"])
        for key, count in s["records"].items():
            records[tuple(key.split("|"))] += count

    def recall(g: int, r: int) -> float | None:
        return round(g / r, 4) if r else None

    findings = {
        t: {"reported": reported[t], "grounded": grounded[t], "recall": recall(grounded[t], reported[t])}
        for t in vocab.LESION_TYPES
    }
    tot_r, tot_g = sum(reported.values()), sum(grounded.values())
    findings["all"] = {"reported": tot_r, "grounded": tot_g, "recall": recall(tot_g, tot_r)}
    by_type = {
        t: {p: sum(c for (lt, _, pol), c in records.items() if lt == t and pol == p) for p in vocab.POLARITIES}
        for t in vocab.LESION_TYPES
    }
    by_itype = {
        i: {p: sum(c for (_, it, pol), c in records.items() if it == i and pol == p) for p in vocab.POLARITIES}
        for i in vocab.INSTRUCTION_TYPES
    }
    return {
        "studies": {
            "total": n,
            "done": done,
            "excluded": n - done,
            "excluded_by_reason": dict(sorted(reasons.items())),
        },
        "findings": findings,
        "records": {"total": sum(records.values()), "by_lesion_type": by_type, "by_instruction_type": by_itype},
    }


def format_summary(summary: dict[str, Any]) -> str:
    """Plain-text tables of a :func:`summarize` result (what ``cxrils generate`` prints),
    with full column headers so that a log keeps them readable."""
    st = summary["studies"]
    lines = [f"images: {st['total']}  done: {st['done']}  excluded: {st['excluded']}"]
    for reason, count in st["excluded_by_reason"].items():
        lines.append(f"  excluded {reason}: {count}")
    lines.append("")
    head = ("lesion type", "reported", "grounded", "recall", "positive records", "negative records")
    lines.append(f"{head[0]:<15}{head[1]:>10}{head[2]:>10}{head[3]:>8}{head[4]:>18}{head[5]:>18}")
    for t, f in summary["findings"].items():
        rec = summary["records"]["by_lesion_type"].get(t)
        pos, neg = (
            (rec["positive"], rec["negative"])
            if rec
            else (
                sum(v["positive"] for v in summary["records"]["by_lesion_type"].values()),
                sum(v["negative"] for v in summary["records"]["by_lesion_type"].values()),
            )
        )
        r = "-" if f["recall"] is None else f"{100 * f['recall']:.1f}%"
        lines.append(f"{t:<15}{f['reported']:>10}{f['grounded']:>10}{r:>8}{pos:>18}{neg:>18}")
    lines.append(
        "(reported: positive findings of images that reached Algorithm 1; grounded: those with a "
        "non-empty mask; recall = grounded / reported)"
    )
    lines.append("")
    lines.append(f"{'instruction type':<18}{'positive records':>18}{'negative records':>18}")
    for i, v in summary["records"]["by_instruction_type"].items():
        lines.append(f"{i.replace('_', ' '):<18}{v['positive']:>18}{v['negative']:>18}")
    lines.append(f"records: {summary['records']['total']}")
    return "\n".join(lines)
