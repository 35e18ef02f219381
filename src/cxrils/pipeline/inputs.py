"""Input readers: image-report pairs as :class:`StudyInput` items, in input order.

Three layouts are recognised by :func:`detect_input_kind`:

``mimic``
    A MIMIC-CXR folder (the folder that holds ``files/``, or ``files/`` itself):
    reports ``files/pXX/pXXXXXXXX/sXXXXXXXX.txt``, images (DICOM ``.dcm`` or
    ``.jpg``/``.png``) in ``files/pXX/pXXXXXXXX/sXXXXXXXX/``. Optional CSVs beside
    ``files/`` (plain or ``.gz``): ``*metadata.csv`` (``dicom_id``, ``ViewPosition``)
    and ``*split.csv`` (``dicom_id``, ``split``), as in mimic-cxr-2.0.0 and
    mimic-cxr-jpg-2.0.0. Order: sorted by patient, study, image file name.
``iu``
    The Indiana University collection: a folder with the reports CSV
    (``nlmcxr_reports_all.csv``: ``report_id``, ``image_ids``, ``indication``,
    ``comparison``, ``findings``, ``impression``) or the OpenI XML reports
    (``ecgen-radiology/*.xml``), PNGs in ``images/`` named ``{image_id}.png``, and
    optionally ``images.csv`` (``image_id``, ``report_id``, ``view_visual``) whose row
    order and views are used. Listed images without a PNG are skipped (logged).
``csv``
    A generic CSV file: ``image_path`` (relative to the CSV's folder, or absolute)
    and ``report`` (raw text); optional ``study_id``, ``patient_id``, ``image_id``,
    ``view``, ``split``. Order: row order. A row that cannot be used (bytes that are
    not UTF-8, a report-only row without ``image_path``, a bad split value, a row the
    CSV parser rejects) becomes a :class:`StudyInput` with ``problem`` set: the
    pipeline excludes that row with the reason (row and line number, study id) and runs
    the rest. Fields of any size are read (a too long report is the report-length
    cap's business, ``cxrils.config.InputConfig``).

Views are the PA/AP/LATERAL... strings of the source (upper-cased), or None when
unknown; splits are ``train``/``validate``/``test`` or None (then the pipeline
assigns one by patient, :func:`check_splits` and :func:`cxrils.dataset.assign_split`).
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import itertools
import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cxrils.config import SPLIT_BY, InputConfig
from cxrils.vocab import SPLITS, SplitError, normalize_split

log = logging.getLogger(__name__)

IMAGE_SUFFIXES: tuple[str, ...] = (".dcm", ".jpg", ".jpeg", ".png")


class InputError(ValueError):
    """An input file or folder that cannot be read; the message names it and the problem."""

    def __init__(self, path: str | Path, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class StudyInput:
    """One image with the report of its study: the unit of work of the pipeline.

    Attributes
    ----------
    study_id : str
        Study id; images of one study share their report.
    image_id : str
        Unique image id within the input; names the dataset image and its records.
    patient_id : str
        Patient id ('' when unknown); used for patient-level splits.
    image_path : pathlib.Path
        Absolute path of the image file (DICOM, PNG or JPEG).
    report : str
        Raw report text of the study ('' when missing).
    view : str or None
        View position of the source, upper case ("PA", "AP", "LATERAL", "FRONTAL"
        for a frontal image of unknown projection), or None when unknown.
    split : str or None
        "train", "validate" or "test" from the input, or None.
    first_of_study : bool
        True for the first image of its study in input order: only that image gets the
        study's absent-type negatives (at most one per type per study, Appendix C.2).
    where : str or None
        Where the item is in the input, for messages: ``"row 3 (line 11)"`` of a
        generic CSV (data rows counted from 1 below the header; a row's first line in
        the file, which differs when reports span several lines).
    problem : str or None
        Why this input row cannot be processed (e.g. ``"row 6 (line 7), study s5: no
        image_path: a report-only row..."``); the pipeline excludes it with this reason.
        Then ``image_path`` is the input file itself and is never read.
    """

    study_id: str
    image_id: str
    patient_id: str
    image_path: Path
    report: str
    view: str | None
    split: str | None
    first_of_study: bool = True
    where: str | None = None
    problem: str | None = None


def detect_input_kind(path: str | Path) -> str:
    """Return ``"mimic"``, ``"iu"`` or ``"csv"`` for an input path.

    Raises
    ------
    InputError
        If the path does not exist or matches none of the layouts.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(p, "input not found")
    if p.is_file():
        if p.suffix.lower() != ".csv":
            raise InputError(p, "unknown input: expected a generic CSV (.csv), a MIMIC-CXR folder or an IU X-ray folder")
        header = _csv_header(p)
        if {"image_path", "report"} <= set(header):
            return "csv"
        if {"report_id", "image_ids"} <= set(header):
            return "iu"
        raise InputError(p, f"CSV has columns {header}; a generic input CSV needs 'image_path' and 'report'")
    if _mimic_files_dir(p) is not None:
        return "mimic"
    if _iu_reports_source(p) is not None:
        return "iu"
    raise InputError(
        p, "unknown input layout: expected a MIMIC-CXR folder (files/pXX/pXXXXXXXX/sXXXXXXXX.txt), "
        "an IU X-ray folder (nlmcxr_reports_all.csv or ecgen-radiology/*.xml, and images/) "
        "or a CSV with columns image_path, report")


def read_inputs(path: str | Path, kind: str | None = None, inputs: InputConfig | None = None
                ) -> Iterator[StudyInput]:
    """Yield the studies of an input in input order.

    Parameters
    ----------
    path : path
        A MIMIC-CXR folder, an IU X-ray folder (or its reports CSV), or a generic CSV.
    kind : {"mimic", "iu", "csv"}, optional
        Layout; detected with :func:`detect_input_kind` when None.
    inputs : cxrils.config.InputConfig, optional
        ``iu_sections``: the IU report sections a study's report joins (default
        :class:`~cxrils.config.InputConfig`).

    Raises
    ------
    InputError
        For an unknown layout, a missing column, a bad split value in a MIMIC split
        file, or duplicate ids. A bad row of a generic CSV is not an error: it is
        yielded with ``problem`` set.
    """
    p = Path(path)
    kind = kind or detect_input_kind(p)
    cfg = inputs or InputConfig()
    readers: dict[str, Callable[[Path], Iterator[StudyInput]]] = {
        "mimic": _read_mimic, "iu": lambda q: _read_iu(q, cfg), "csv": _read_generic_csv}
    if kind not in readers:
        raise InputError(p, f"unknown input kind {kind!r}; known: {sorted(readers)}")
    seen: set[str] = set()
    studies: set[str] = set()
    for item in readers[kind](p):
        if item.image_id in seen:
            raise InputError(p, f"duplicate image id {item.image_id!r}")
        seen.add(item.image_id)
        if item.problem is None:
            if item.study_id in studies:
                item = dataclasses.replace(item, first_of_study=False)
            studies.add(item.study_id)
        yield item


def check_splits(studies: Iterable[StudyInput], source: str | Path, split_by: str = "patient") -> list[StudyInput]:
    """Keep each patient's images in one split; return the studies (splits completed).

    Images without a split from the input get one later from
    :func:`cxrils.dataset.assign_split`, a hash of the patient id (``split_by =
    "patient"``) or of the study id (``"study"``, for inputs where each study is a
    different patient; the choice is part of the configuration and so recorded in the
    manifest). Here: with ``"patient"``, every such image needs a patient id; a
    patient whose rows name two different splits is refused; a patient's rows without
    a split take the split its other rows name. Rows with a ``problem`` are passed
    through untouched.

    Parameters
    ----------
    studies : iterable of StudyInput
        The whole input (not only a ``--limit`` part), so a patient's split does not
        depend on how many rows a run takes.
    source : path
        The input, named in error messages.
    split_by : {"patient", "study"}
        ``cfg.split.by``.

    Raises
    ------
    InputError
        If an image has no split and no patient id (``"patient"``), or a patient's
        rows name different splits, or ``split_by`` is unknown.
    """
    if split_by not in SPLIT_BY:
        raise InputError(source, f"split.by must be one of {list(SPLIT_BY)}, got {split_by!r}")
    items = list(studies)
    good = [s for s in items if s.problem is None]
    if split_by == "patient":
        anonymous = [s for s in good if s.split is None and not s.patient_id]
        if anonymous:
            first = anonymous[0]
            where = f"{first.where}, " if first.where else ""
            raise InputError(source, f"{len(anonymous)} image(s) have no patient_id and no split (e.g. {where}"
                                     f"image {first.image_id!r}): splits are made by patient so that a patient's "
                                     "images never land in two splits. Add a patient_id column, give every row a "
                                     "split, or pass --split-by study (set split.by = \"study\", recorded in the "
                                     "manifest) if every study is a different patient")
    key = (lambda s: s.patient_id) if split_by == "patient" else (lambda s: s.study_id)
    given: dict[str, tuple[str, StudyInput]] = {}
    for s in good:
        if s.split is None or not key(s):
            continue
        seen = given.setdefault(key(s), (s.split, s))
        if seen[0] != s.split:
            other = seen[1]
            raise InputError(source, f"{split_by} {key(s)!r} is in two splits: {seen[0]} (image "
                                     f"{other.image_id!r}) and {s.split} (image {s.image_id!r}); a {split_by}'s "
                                     "images must share one split")
    out = []
    for s in items:
        if s.problem is None and s.split is None and key(s) in given:
            s = dataclasses.replace(s, split=given[key(s)][0])
        out.append(s)
    return out


# ---------------------------------------------------------------- helpers


#: Largest CSV field the reader accepts: any (a field is at most the file's size, which is
#: read whole anyway); Python's csv module refuses fields over 131,072 characters by default.
_CSV_FIELD_LIMIT = 2**31 - 1


def _open_text(path: Path):
    """Text of a (gzipped) CSV; bytes that are not UTF-8 become lone surrogates
    (``surrogateescape``) so one bad byte spoils only its own row (:func:`_undecodable`).

    Raises
    ------
    InputError
        If the file starts as UTF-16 or UTF-32 text does (a byte-order mark, or NUL bytes
        in its first characters): its column names would otherwise come out garbled.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(64)
    except (OSError, EOFError) as err:
        raise InputError(path, f"cannot read CSV: {err}") from err
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        raise InputError(path, "the CSV is not UTF-8 (it looks like UTF-16 or UTF-32 text); save it as UTF-8 "
                               "(e.g. iconv -f UTF-16 -t UTF-8 IN.csv > OUT.csv) and run again")
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="surrogateescape", newline="")
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")


@contextmanager
def _any_field_size() -> Iterator[None]:
    old = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        yield
    finally:
        csv.field_size_limit(old)


_SURROGATE = re.compile("[\udc80-\udcff]")


def _undecodable(row: dict[str, str]) -> str | None:
    """The problem of a row with bytes that are not UTF-8 (as decoded by :func:`_open_text`)."""
    for key, value in row.items():
        m = _SURROGATE.search(value) or _SURROGATE.search(key)
        if m:
            byte = ord(m.group()) - 0xDC00
            column = _SURROGATE.sub("?", key)
            return f"column {column!r} holds a byte that is not UTF-8 (0x{byte:02x} at character {m.start()})"
    return None


def _csv_header(path: Path) -> list[str]:
    try:
        with _open_text(path) as fh, _any_field_size():
            return [h.strip() for h in next(csv.reader(fh), [])]
    except (OSError, csv.Error) as err:
        raise InputError(path, f"cannot read CSV: {err}") from err


def _csv_rows(path: Path, required: tuple[str, ...], *, strict: bool = True
              ) -> Iterator[tuple[str, dict[str, str], str | None]]:
    """Yield ``(where, row, problem)`` with stripped keys; check required columns first.

    ``where`` is ``"row {n} (line {first line of the row})"``.
    ``problem`` is None for a usable row; otherwise the row holds bytes that are not
    UTF-8 or the CSV parser rejected it (then ``row`` is empty). With ``strict`` a
    problem raises :class:`InputError` instead (metadata and split files, whose rows
    must all be right).
    """
    try:
        with _open_text(path) as fh, _any_field_size():
            reader = csv.DictReader(fh)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in required if c not in header]
            if missing:
                raise InputError(path, f"missing column(s) {missing}; has {header}")
            for n in itertools.count(1):
                where = f"row {n} (line {reader.line_num + 1})"
                try:
                    raw = next(reader)
                except StopIteration:
                    return
                except csv.Error as err:  # the parser goes on at the next line
                    problem, row = f"the CSV parser rejects the row: {err}", {}
                else:
                    row = {(k or "").strip(): (v if isinstance(v, str) else "") for k, v in raw.items()}
                    problem = _undecodable(row)
                if problem and strict:
                    raise InputError(path, f"{where}: {problem}")
                yield where, row, problem
    except OSError as err:
        raise InputError(path, f"cannot read CSV: {err}") from err


def _norm_split(value: str, path: Path, where: str) -> str | None:
    if not value.strip():
        return None
    try:
        return normalize_split(value)
    except SplitError:
        raise InputError(path, f"{where}: split {value!r} is not one of {list(SPLITS)}") from None


def _norm_view(value: str | None) -> str | None:
    v = (value or "").strip().upper()
    return v or None


# ---------------------------------------------------------------- generic CSV


def _bad_row(path: Path, where: str, row: dict[str, str], problem: str) -> StudyInput:
    """The input item of a row that cannot be processed: excluded by the pipeline with
    ``problem``. Its id is ``row-{n}`` (its own ids may be what is wrong with it)."""
    study = row.get("study_id", "").strip()
    study = "" if _SURROGATE.search(study) else study
    row_id = "row-" + where.split()[1]
    return StudyInput(study_id=study or row_id, image_id=row_id, patient_id="",
                      image_path=path.resolve(), report="", view=None, split=None, first_of_study=False,
                      where=where, problem=f"{where}" + (f", study {study}" if study else "") + f": {problem}")


def _read_generic_csv(path: Path) -> Iterator[StudyInput]:
    base = path.parent
    rows = list(_csv_rows(path, ("image_path", "report"), strict=False))
    stems: dict[str, int] = {}
    for _, row, problem in rows:
        if problem is None:
            stem = Path(row["image_path"].strip()).stem
            stems[stem] = stems.get(stem, 0) + 1
    for where, row, problem in rows:
        if problem is not None:
            yield _bad_row(path, where, row, problem)
            continue
        rel = row["image_path"].strip()
        if not rel:
            yield _bad_row(path, where, row, "no image_path: a report-only row has no image to segment")
            continue
        value = row.get("split", "")
        try:
            split = normalize_split(value) if value.strip() else None
        except SplitError:
            yield _bad_row(path, where, row, f"split {value!r} is not one of {list(SPLITS)}")
            continue
        image_path = Path(rel) if Path(rel).is_absolute() else (base / rel)
        image_id = row.get("image_id", "").strip() or Path(rel).stem
        if not row.get("image_id", "").strip() and stems[Path(rel).stem] > 1:
            # Same file name in different folders: disambiguate deterministically.
            image_id = f"{image_id}-{hashlib.sha1(rel.encode()).hexdigest()[:8]}"
        yield StudyInput(
            study_id=row.get("study_id", "").strip() or image_id,
            image_id=image_id,
            patient_id=row.get("patient_id", "").strip(),
            image_path=image_path.resolve(),
            report=row["report"],
            view=_norm_view(row.get("view")),
            split=split,
            where=where,
        )


# ---------------------------------------------------------------- IU X-ray


def _iu_reports_source(folder: Path) -> Path | None:
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


def read_iu_reports(source: str | Path, names: tuple[str, ...] = InputConfig.iu_sections
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
    for _, row, _ in _csv_rows(csv_path, ("report_id", "image_ids", "findings", "impression")):
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


def _read_iu(path: Path, inputs: InputConfig) -> Iterator[StudyInput]:
    folder = path.parent if path.is_file() else path
    source = path if path.is_file() else _iu_reports_source(folder)
    if source is None:
        raise InputError(folder, "no IU reports (nlmcxr_reports_all.csv or ecgen-radiology/*.xml)")
    images_dir = folder / "images"
    if not images_dir.is_dir():
        raise InputError(folder, "IU input has no images/ folder")
    reports = {rid: (ids, text) for rid, ids, text in read_iu_reports(source, inputs.iu_sections)}
    listing: list[tuple[str, str, str | None]] = []  # (image_id, report_id, view)
    if (folder / "images.csv").is_file():
        for _, row, _ in _csv_rows(folder / "images.csv", ("image_id", "report_id")):
            view = row.get("view_visual") or row.get("view") or ""
            listing.append((row["image_id"].strip(), row["report_id"].strip(), _norm_view(view)))
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
            study_id=f"iu-{report_id}", image_id=image_id, patient_id=f"iu-{report_id}",
            image_path=image_path.resolve(), report=reports[report_id][1], view=view, split=None,
        )
    if missing:
        log.info("IU input %s: %d listed images have no PNG in %s (skipped)", folder, missing, images_dir)


# ---------------------------------------------------------------- MIMIC-CXR

_PATIENT_RE = re.compile(r"^p\d+$")
_STUDY_RE = re.compile(r"^s\d+$")


def _mimic_files_dir(folder: Path) -> Path | None:
    for cand in (folder / "files", folder):
        if cand.is_dir() and cand.name == "files":
            groups = [d for d in cand.iterdir() if d.is_dir() and re.fullmatch(r"p\d\d", d.name)]
            if groups:
                return cand
    return None


def _find_csv(folder: Path, suffix: str) -> Path | None:
    found = sorted(q for q in folder.glob(f"*{suffix}*") if q.name.endswith((f"{suffix}.csv", f"{suffix}.csv.gz")))
    return found[0] if found else None


def _mimic_table(path: Path | None, column: str) -> dict[str, str]:
    if path is None:
        return {}
    return {row["dicom_id"].strip(): row[column] for _, row, _ in _csv_rows(path, ("dicom_id", column))}


def _read_mimic(path: Path) -> Iterator[StudyInput]:
    files = _mimic_files_dir(path)
    if files is None:
        raise InputError(path, "not a MIMIC-CXR folder: no files/pXX/ folders")
    root = files.parent
    views = _mimic_table(_find_csv(root, "metadata"), "ViewPosition")
    split_csv = _find_csv(root, "split")
    splits = _mimic_table(split_csv, "split")
    n_no_image = 0
    for group in sorted(d for d in files.iterdir() if d.is_dir()):
        for patient in sorted(d for d in group.iterdir() if d.is_dir() and _PATIENT_RE.match(d.name)):
            reports = {q.stem: q for q in patient.glob("s*.txt") if _STUDY_RE.match(q.stem)}
            study_dirs = {d.name: d for d in patient.iterdir() if d.is_dir() and _STUDY_RE.match(d.name)}
            for study in sorted(set(reports) | set(study_dirs)):
                images = sorted(
                    q for q in (study_dirs[study].iterdir() if study in study_dirs else [])
                    if q.is_file() and q.suffix.lower() in IMAGE_SUFFIXES
                )
                if not images:
                    n_no_image += 1
                    continue
                report = ""
                if study in reports:
                    try:
                        report = reports[study].read_text(encoding="utf-8", errors="replace")
                    except OSError as err:
                        raise InputError(reports[study], f"cannot read report: {err}") from err
                for image in images:
                    dicom_id = image.stem
                    split = splits.get(dicom_id, "")
                    yield StudyInput(
                        study_id=study, image_id=dicom_id, patient_id=patient.name,
                        image_path=image.resolve(), report=report,
                        view=_norm_view(views.get(dicom_id)),
                        split=_norm_split(split, split_csv, f"dicom_id {dicom_id}") if split else None,
                    )
    if n_no_image:
        log.info("MIMIC input %s: %d studies have a report but no image (skipped)", root, n_no_image)


# ---------------------------------------------------------------- report length

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")  # one character: no backtracking over runs


def cap_report(text: str, max_chars: int, max_sentences: int) -> tuple[str, str | None]:
    """Apply the report-length cap (``cfg.inputs``), in time linear in the text's length.

    Parameters
    ----------
    text : str
        Raw report text.
    max_chars, max_sentences : int
        Caps; 0 turns a cap off. A sentence ends in ``.``, ``!`` or ``?`` followed by
        white space or the end of the text.

    Returns
    -------
    (str, str or None)
        ``(text, None)`` within the caps. Over a cap: the text cut after the last
        sentence end that keeps both caps (a hard cut at ``max_chars`` when there is
        none), and why, e.g. ``"1000000 characters, more than inputs.report_max_chars
        = 20000"``.
    """
    reasons = []
    cut = len(text)
    if max_chars and len(text) > max_chars:
        reasons.append(f"{len(text)} characters, more than inputs.report_max_chars = {max_chars}")
        cut = max_chars
    if max_sentences:
        ends = []
        for m in _SENTENCE_END.finditer(text, 0, cut):
            ends.append(m.end())
            if len(ends) > max_sentences:
                reasons.append(f"more than inputs.report_max_sentences = {max_sentences} sentences")
                cut = ends[max_sentences - 1]
                break
        else:
            if cut < len(text) and ends:
                cut = ends[-1]
    elif cut < len(text):
        last = None
        for last in _SENTENCE_END.finditer(text, 0, cut):  # noqa: B007 (keeps the last match)
            pass
        cut = last.end() if last is not None else cut
    if not reasons:
        return text, None
    return text[:cut], "; ".join(reasons)
