"""Readers of reports without images, for ``cxrils structure``.

Three layouts are accepted:

- a CSV with columns ``study_id`` and ``report`` (raw text with ``NAME:`` headers);
- the Indiana University CSV (``nlmcxr_reports_all.csv``: ``report_id``,
  ``findings``, ``impression``), whose sections are joined into one text exactly as
  ``cxrils generate`` joins them (:func:`cxrils.sources.iu.iu_report_text`), so both
  commands make the same section choice (:func:`cxrils.report.sections.select_section`);
- a folder of MIMIC-CXR-style ``.txt`` reports (searched recursively; the study
  id is the file stem, e.g. ``s50414267``). A file that cannot be read as UTF-8 text
  is one excluded study, with the reason; the others are read.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from cxrils.report.sections import SectionChoice
from cxrils.sources.base import any_field_size
from cxrils.sources.iu import iu_report_text

#: The exclusion reason of a report file that cannot be read, after its file name
#: (``cxrils structure`` counts them in one row).
UNREADABLE_REPORT = "cannot read report text"


class ReportInputError(ValueError):
    """An input that cannot be read as reports; the message names the file and problem."""


def count_reports(path: str | Path) -> int | None:
    """Number of reports :func:`read_reports` yields from ``path`` (for a progress bar):
    a folder's ``.txt`` files, a CSV's studies (one row per image counts once, so the
    CSV is read through); None if unknown (a CSV that :func:`read_reports` refuses)."""
    p = Path(path)
    if p.is_dir():
        return sum(1 for _ in p.rglob("*.txt"))
    try:
        return sum(1 for _ in read_reports(p))
    except (ReportInputError, OSError):
        return None


def read_reports(path: str | Path) -> Iterator[tuple[str, str | SectionChoice]]:
    """Yield ``(study_id, raw report text)``; for the IU CSV the text joins the sections
    of ``InputConfig.iu_sections`` (:func:`~cxrils.sources.iu.iu_report_text`). A
    folder's report file that cannot be read (not UTF-8 text, unreadable) yields
    ``(study_id, SectionChoice)`` excluded with the file and the reason
    (:func:`cxrils.report.structure_reports` takes both), so one bad file never stops a
    folder.

    Raises
    ------
    ReportInputError
        If the path does not exist, a folder holds no ``.txt`` report, a CSV lacks the
        needed columns, is not UTF-8 text, or has a study id empty or repeated with a
        different report. Rows that repeat a study with the same report (one row per
        image) are skipped.
    """
    p = Path(path)
    if not p.exists():
        raise ReportInputError(f"{p}: no such file or folder")
    if p.is_dir():
        files = sorted(p.rglob("*.txt"))
        if not files:
            raise ReportInputError(f"{p}: folder holds no .txt reports")
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                yield f.stem, SectionChoice(None, "", excluded=f"{f.name}: {UNREADABLE_REPORT}: {err}")
            else:
                yield f.stem, text
        return
    try:
        fh = open(p, newline="", encoding="utf-8")
    except OSError as err:
        raise ReportInputError(f"{p}: cannot open: {err}") from err
    with fh, any_field_size():  # a report longer than csv's default 131,072 characters is a report
        try:
            reader = csv.DictReader(fh)
            cols = set(reader.fieldnames or [])
            if {"study_id", "report"} <= cols:
                kind = "generic"
            elif {"report_id", "findings", "impression"} <= cols:
                kind = "iu"
            else:
                one_report = (
                    " (one report? put its .txt file in a folder and give the folder)"
                    if p.suffix.lower() != ".csv"
                    else ""
                )
                raise ReportInputError(
                    f"{p}: expected a CSV with columns study_id,report (or the IU columns report_id,findings,"
                    f"impression), or a folder of .txt reports; found columns {sorted(cols)}{one_report}"
                )
            seen: dict[str, str] = {}
            for line, row in enumerate(reader, start=2):
                sid = (row["study_id"] if kind == "generic" else row["report_id"]) or ""
                sid = sid.strip()
                if not sid:
                    raise ReportInputError(f"{p}:{line}: empty study id")
                text = (row["report"] if kind == "generic" else iu_report_text(row)) or ""
                if sid in seen:
                    # One row per image of a study (e.g. the pairs CSVs): same report, structured once.
                    if seen[sid] == text:
                        continue
                    raise ReportInputError(f"{p}:{line}: study id {sid!r} repeated with a different report")
                seen[sid] = text
                yield sid, text
        except (UnicodeDecodeError, csv.Error) as err:
            raise ReportInputError(f"{p}: not a readable UTF-8 CSV: {err}") from err
