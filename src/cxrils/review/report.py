"""``cxrils review-stats`` output: console tables (rich) and one self-contained HTML page.

Rates are printed as percentages with their 95% Wilson interval, "91.2% [85.0-95.0]",
beside the number of records decided; the paper's rates (Table 3, Table 13) stand in
their own column with the source line under the table.
"""

from __future__ import annotations

import datetime as _dt
import html
import math

import pandas as pd

from cxrils import __version__
from cxrils.review import paper
from cxrils.review.stats import ReviewStats

#: Column titles of the group columns.
TITLES: dict[str, str] = {"lesion_type": "lesion type", "polarity": "polarity", "instruction_type": "instruction type"}


def pct(rate: float, low: float | None = None, high: float | None = None) -> str:
    """ "91.2%" or "91.2% [85.0-95.0]"; "-" for NaN."""
    if rate is None or (isinstance(rate, float) and math.isnan(rate)):
        return "-"
    text = f"{100 * rate:.1f}%"
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{100 * low:.1f}-{100 * high:.1f}]"
    return text


def _kappa(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def tables(stats: ReviewStats) -> list[tuple[str, pd.DataFrame, str]]:
    """Every table as (title, display DataFrame of strings, note), in report order."""
    out = []
    titles = {
        (): "all sampled records",
        ("polarity",): "by polarity",
        ("lesion_type",): "by lesion type",
        ("instruction_type",): "by instruction type",
        ("lesion_type", "polarity"): "by lesion type and polarity",
        ("polarity", "instruction_type"): "by polarity and instruction type",
        ("lesion_type", "polarity", "instruction_type"): "by stratum (lesion type, polarity, instruction type)",
    }
    for by, t in stats.rates.items():
        shown = pd.DataFrame({TITLES[c]: t[c].astype(str) for c in by})
        shown["decided"] = t["n"].astype(str)
        shown["accepted"] = t["accepted"].astype(str)
        shown["acceptance [95% CI]"] = [pct(r, lo, hi) for r, lo, hi in zip(t["rate"], t["low"], t["high"])]
        out.append(
            (
                f"Acceptance (consensus), {titles[by]}",
                shown,
                "consensus: rejected if any reviewer rejected, accepted if one accepted and none rejected",
            )
        )
    e = stats.dataset_estimate
    out.append(
        (
            "Dataset estimate (strata weighted by their size in the dataset)",
            pd.DataFrame(
                {
                    "records": e["polarity"],
                    "acceptance [95% CI]": [pct(r, lo, hi) for r, lo, hi in zip(e["rate"], e["low"], e["high"])],
                    "strata reviewed": [f"{a} of {b}" for a, b in zip(e["strata_reviewed"], e["strata"])],
                }
            ),
            "stratified estimate; strata without decisions are left out of the weights",
        )
    )
    r = stats.reviewer_rates
    out.append(
        (
            "Acceptance per reviewer",
            pd.DataFrame(
                {
                    "reviewer": r["reviewer"],
                    "records": r["polarity"],
                    "decided": r["n"].astype(str),
                    "acceptance [95% CI]": [pct(v, lo, hi) for v, lo, hi in zip(r["rate"], r["low"], r["high"])],
                }
            ),
            "",
        )
    )
    a = stats.agreement
    out.append(
        (
            "Agreement between reviewers (Cohen's kappa)",
            pd.DataFrame(
                {
                    "reviewers": [f"{x} / {y}" for x, y in zip(a["reviewer_a"], a["reviewer_b"])],
                    "records both decided": a["both"].astype(str),
                    "agreement": [pct(v) for v in a["agree"]],
                    "kappa": [_kappa(v) for v in a["kappa"]],
                }
            ),
            "on records both accepted or rejected; n/a when one label covers every record of both"
            if len(a)
            else "needs two reviewers who decided the same records",
        )
    )
    rs = stats.reasons
    out.append(
        (
            "Rejections by reason",
            pd.DataFrame({"records": rs["polarity"], "reason": rs["reason"], "rejections": rs["n"].astype(str)}),
            "every reviewer's current rejections",
        )
    )
    p = stats.paper
    out.append(
        (
            "This review beside the paper's expert evaluation",
            pd.DataFrame(
                {
                    "records": p["what"],
                    "decided": p["n"].astype(str),
                    "this review [95% CI]": [pct(v, lo, hi) for v, lo, hi in zip(p["rate"], p["low"], p["high"])],
                    "paper": p["paper"],
                }
            ),
            paper.SOURCE,
        )
    )
    return out


def summary_line(stats: ReviewStats) -> str:
    """One line: sample size, decisions, reviewers."""
    c = stats.counts
    who = ", ".join(c["reviewers"]) or "nobody yet"
    return (
        f"{c['sample']} records sampled; {c['with_consensus']} accepted or rejected, {c['skipped_only']} only "
        f"skipped; {c['current']} current decisions ({c['decisions']} rows in the log, undos included) by {who}"
    )


def print_stats(stats: ReviewStats, console) -> None:
    """Print the tables with rich."""
    from rich import box
    from rich.table import Table

    console.print(summary_line(stats))
    for title, frame, note in tables(stats):
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, caption=note or None, caption_justify="left")
        for col in frame.columns:
            t.add_column(
                col,
                justify="left"
                if col in TITLES.values() or col in ("reviewer", "records", "reason", "reviewers", "paper")
                else "right",
            )
        for row in frame.itertuples(index=False):
            t.add_row(*[str(v) for v in row])
        if not len(frame):
            t.add_row(*(["-"] * len(frame.columns)))
        console.print(t)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; background: #fafafa; }
table { border-collapse: collapse; margin: 0.4rem 0 0.3rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: right; }
th { background: #eee; } td.l, th.l { text-align: left; } p.note { color: #555; font-size: 0.85rem; margin: 0 0 1.2rem; }
"""


def stats_html(stats: ReviewStats, dataset_name: str) -> str:
    """The whole report as one HTML page (no external resource)."""
    left = set(TITLES.values()) | {"reviewer", "records", "reason", "reviewers", "paper"}
    parts = [
        f"<h1>Expert review of {html.escape(dataset_name)}</h1>",
        f"<p class='note'>{html.escape(summary_line(stats))}. Written "
        f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by cxrils {__version__} "
        "(cxrils review-stats).</p>",
    ]
    for title, frame, note in tables(stats):
        head = "".join(f"<th class='{'l' if c in left else ''}'>{html.escape(c)}</th>" for c in frame.columns)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td class='{'l' if c in left else ''}'>{html.escape(str(v))}</td>" for c, v in zip(frame.columns, row)
            )
            + "</tr>"
            for row in frame.itertuples(index=False)
        )
        parts.append(
            f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{body}</table>"
            + (f"<p class='note'>{html.escape(note)}</p>" if note else "")
        )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
        f"<title>cxrils review: {html.escape(dataset_name)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )
