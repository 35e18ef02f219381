"""The Indiana University collection (IU X-ray, OpenI): the reports CSV
``nlmcxr_reports_all.csv`` or the XML reports ``ecgen-radiology/*.xml``, PNGs in
``images/``, optionally ``images.csv``. One section choice for every user: a study's
report joins the sections ``InputConfig.iu_sections`` as ``NAME: text`` paragraphs, and
the report stage picks the paper's section from that text."""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from cxrils.config import InputConfig
from cxrils.sources.base import InputError, StudyInput, csv_rows, read_view

log = logging.getLogger(__name__)


def reports_source(folder: Path) -> Path | None:
    """Where the IU reports of ``folder`` are: ``nlmcxr_reports_all.csv``, else the
    folder of the OpenI XML files (``ecgen-radiology/`` or ``folder`` itself); None when
    there are none."""
    if (folder / "nlmcxr_reports_all.csv").is_file():
        return folder / "nlmcxr_reports_all.csv"
    for sub in ("ecgen-radiology", "."):
        if any((folder / sub).glob("*.xml")):
            return folder / sub
    return None


def iu_report_text(sections: dict[str, str], names: tuple[str, ...] = InputConfig.iu_sections) -> str:
    """Join the IU report sections ``names`` (default ``cxrils.config.InputConfig.iu_sections``:
    INDICATION, COMPARISON, FINDINGS, IMPRESSION) as ``NAME: text`` paragraphs, in that
    order, skipping empty ones: the layout of ``pairs/iu_pairs.csv``."""
    parts = []
    for name in names:
        text = (sections.get(name) or "").strip()
        if text and text.lower() != "nan":
            parts.append(f"{name.upper()}: {text}")
    return "\n\n".join(parts) + ("\n" if parts else "")


def read_iu_reports(
    source: str | Path, names: tuple[str, ...] = InputConfig.iu_sections
) -> Iterator[tuple[str, list[str], str]]:
    """Yield ``(report_id, image_ids, report_text)`` from the IU reports CSV or XML folder;
    the text joins the sections ``names`` (:func:`iu_report_text`).

    Raises
    ------
    InputError
        If the CSV lacks a column or an XML file cannot be parsed.
    """
    src = Path(source)
    if src.is_dir() and not (src / "nlmcxr_reports_all.csv").is_file():
        for xml_path in sorted(src.glob("*.xml"), key=lambda q: _natural_key(q.name)):
            yield _parse_iu_xml(xml_path, names)
        return
    csv_path = src / "nlmcxr_reports_all.csv" if src.is_dir() else src
    for _, row, _ in csv_rows(csv_path, ("report_id", "image_ids", "findings", "impression")):
        ids = [i.strip() for i in row["image_ids"].split(";") if i.strip()]
        yield row["report_id"].strip(), ids, iu_report_text(row, names)


def _parse_iu_xml(path: Path, names: tuple[str, ...]) -> tuple[str, list[str], str]:
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as err:
        raise InputError(path, f"cannot parse IU report XML: {err}") from err
    sections = {}
    for node in root.iter("AbstractText"):
        label = (node.get("Label") or "").strip().lower()
        if label in names:
            sections[label] = "".join(node.itertext())
    ids = [n.get("id", "").strip() for n in root.iter("parentImage") if n.get("id")]
    report_id = path.stem if path.stem.upper().startswith("CXR") else f"CXR{path.stem}"
    return report_id, ids, iu_report_text(sections, names)


def _natural_key(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def read_iu(path: Path, inputs: InputConfig) -> Iterator[StudyInput]:
    """The studies of an IU X-ray (OpenI) folder, or of its reports CSV ``path``: one
    :class:`StudyInput` per report with its images under ``images/`` (report sections
    joined as ``inputs.iu_sections`` says).

    Raises
    ------
    InputError
        No reports, or no ``images/`` folder, naming the folder.
    """
    folder = path.parent if path.is_file() else path
    source = path if path.is_file() else reports_source(folder)
    if source is None:
        raise InputError(folder, "no IU reports (nlmcxr_reports_all.csv or ecgen-radiology/*.xml)")
    images_dir = folder / "images"
    if not images_dir.is_dir():
        raise InputError(folder, "IU input has no images/ folder")
    reports = {rid: (ids, text) for rid, ids, text in read_iu_reports(source, inputs.iu_sections)}
    listing: list[tuple[str, str, str | None]] = []  # (image_id, report_id, view)
    if (folder / "images.csv").is_file():
        for _, row, _ in csv_rows(folder / "images.csv", ("image_id", "report_id")):
            view = row.get("view_visual") or row.get("view") or ""
            listing.append((row["image_id"].strip(), row["report_id"].strip(), read_view(view)))
    else:
        listing = [(iid, rid, None) for rid, (ids, _) in reports.items() for iid in ids]
    missing = 0
    for image_id, report_id, view in listing:
        image_path = images_dir / f"{image_id}.png"
        if not image_path.is_file():
            missing += 1
            continue
        if report_id not in reports:
            raise InputError(folder / "images.csv", f"image {image_id}: report {report_id!r} not in {source}")
        yield StudyInput(
            study_id=f"iu-{report_id}",
            image_id=image_id,
            patient_id=f"iu-{report_id}",
            image_path=image_path.resolve(),
            report=reports[report_id][1],
            view=view,
            split=None,
        )
    if missing:
        log.info("IU input %s: %d listed images have no PNG in %s (skipped)", folder, missing, images_dir)
