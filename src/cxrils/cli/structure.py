"""``cxrils structure``: reports -> one JSON line of structured findings per study."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import typer

from cxrils.cli.common import fail


def _capped(items, cfg, notes: deque):
    """``(study_id, text)`` items (a text, or a section choice excluded already) under the
    pipeline's report-length cap (``cfg.inputs``, as ``generate`` and ``ground`` apply
    it): over the cap, an excluded section with the
    reason, or with ``report_over_cap = "truncate"`` the text cut at the cap. Appends to
    ``notes``, per item in input order, its "truncated: ..." note or None
    (:func:`cxrils.report.structure_reports` yields one report per item, in that order)."""
    from cxrils.pipeline.inputs import apply_report_cap
    from cxrils.report.sections import SectionChoice

    for sid, text in items:
        if isinstance(text, SectionChoice):  # excluded already (an unreadable report file)
            notes.append(None)
            yield sid, text
            continue
        kept, note = apply_report_cap(text, cfg.inputs, f"study {sid}")
        notes.append(note if kept is not None else None)
        yield sid, kept if kept is not None else SectionChoice(None, "", excluded=note)


def register(app: typer.Typer) -> None:
    """Add the report commands to the ``cxrils`` app."""
    app.command("structure")(structure)


def structure(
    input: Path = typer.Argument(
        ..., metavar="INPUT", help="CSV (study_id,report), the IU CSV, or a folder of MIMIC .txt reports."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output JSON Lines file."),
    structurer: str | None = typer.Option(None, help="rules | llm (default: config backends.report_structurer)."),
    mapper: str | None = typer.Option(None, help="lexicon | llm (default: config backends.location_mapper)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML configuration file."),
    set_: list[str] = typer.Option([], "--set", help="Override as section.key=value (repeatable)."),
) -> None:
    """Structure reports (paper section 3.1 step 1): section choice, six-element findings, location labels.

    Writes one JSON line per study: study_id, section_used, section_text, findings
    (entity, sentence_index, presence, certainty, locations, labels, lesion_type,
    predicted_lesion_type), excluded (reason or null), flags.
    """
    import json
    from collections import Counter

    from rich.console import Console
    from rich.table import Table

    from cxrils.config import ConfigError, load_config
    from cxrils.fsutil import atomic_path
    from cxrils.progress import progress_bar
    from cxrils.report import get_location_mapper, get_structurer, structure_reports
    from cxrils.report.llm import LLMError
    from cxrils.sources.reports import UNREADABLE_REPORT, ReportInputError, count_reports, read_reports

    try:
        cfg = load_config(config, set_)
        s = get_structurer(structurer, cfg)
        m = get_location_mapper(mapper, cfg)
    except (ConfigError, ValueError, FileNotFoundError, ImportError) as err:
        fail(str(err))
    if not input.exists():
        text = str(input)
        if any(c.isspace() for c in text):  # a report's text, or a mistyped path with a space
            shown = text if len(text) <= 60 else text[:57] + "..."
            fail(
                f"{shown!r}: no such file or folder. INPUT names a CSV, the IU CSV or a folder of .txt reports; "
                "for one report's text, put it in a .txt file inside a folder and give the folder"
            )
        fail(f"{input}: no such file or folder")
    n_total = count_reports(input)
    sections, excluded, types = Counter(), Counter(), Counter()
    n = 0
    truncated: deque = deque()
    n_truncated = 0
    try:
        # the bar closes before an error line is printed, so that line starts a line of its own
        with (
            progress_bar(total=n_total, unit="report", desc="structure") as bar,
            atomic_path(out) as tmp,
            open(tmp, "w", encoding="utf-8") as fh,
        ):
            for rep in structure_reports(_capped(read_reports(input), cfg, truncated), cfg, structurer=s, mapper=m):
                note = truncated.popleft()
                if note:
                    rep.flags = list(rep.flags) + [note]
                    n_truncated += 1
                fh.write(json.dumps(rep.to_dict(), ensure_ascii=False) + "\n")
                n += 1
                bar.update(1)
                if rep.excluded:
                    # one row for every unreadable file (each reason names its own file)
                    excluded[UNREADABLE_REPORT if UNREADABLE_REPORT in rep.excluded else rep.excluded] += 1
                else:
                    sections[rep.section_used] += 1
                for f in rep.findings:
                    if f.target_type:  # a question (Finding.asked) is neither stated nor denied
                        types[(f.target_type, "asked" if f.asked else f.presence)] += 1
    except ReportInputError as err:
        fail(str(err))
    except LLMError as err:
        typer.echo(f"error: LLM backend: {err}", err=True)
        raise typer.Exit(1) from err

    console = Console()
    table = Table(title=f"{n} studies -> {out}")
    table.add_column("item")
    table.add_column("count", justify="right")
    for name, c in sections.most_common():
        table.add_row(f"section used: {name}", str(c))
    for reason, c in excluded.most_common():
        table.add_row(f"excluded: {reason}", str(c))
    if n_truncated:
        table.add_row("cut at the report-length cap (flag 'truncated: ...')", str(n_truncated))
    for (t, pres), c in sorted(types.items()):
        table.add_row(f"grounds {t} ({pres})", str(c))
    console.print(table)
