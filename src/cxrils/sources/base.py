"""What every corpus reader shares: the input item (:class:`StudyInput`), the input
error, and the CSV reading (UTF-8 with a clear refusal of UTF-16/32, fields of any size,
one bad row spoiling only itself)."""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import itertools
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cxrils import vocab
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
        for a frontal image of unknown projection), or None when unknown. Any spelling
        is read as an input table's view cell is (:func:`read_view`: "pa" -> "PA"; a
        trial's "pa" from the Python API was excluded as not frontal).
    split : str or None
        "train", "validate" or "test" from the input, or None.
    first_of_study : bool
        True for the image of its study that gets the study's absent-type negatives (at
        most one per type per study, Appendix C.2) unless the pipeline excludes it (its
        pixels, QC, grounding, records or a rejected commit; the runner then gives them
        to the study's next image that is not excluded): the first in
        input order that the input does not already exclude (no ``problem``; a frontal or
        unknown view when ``QCConfig.frontal_only``; :func:`cxrils.sources.read_inputs`).
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

    def __post_init__(self) -> None:
        if self.view is not None and self.view not in vocab.VIEW_POSITIONS:
            object.__setattr__(self, "view", read_view(self.view))


#: Largest CSV field the reader accepts: any (a field is at most the file's size, which is
#: read whole anyway); Python's csv module refuses fields over 131,072 characters by default.
_CSV_FIELD_LIMIT = 2**31 - 1


def open_text(path: Path):
    """Text of a (gzipped) CSV; bytes that are not UTF-8 become lone surrogates
    (``surrogateescape``) so one bad byte spoils only its own row (:func:`undecodable`).

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
        raise InputError(
            path,
            "the CSV is not UTF-8 (it looks like UTF-16 or UTF-32 text); save it as UTF-8 "
            "(e.g. iconv -f UTF-16 -t UTF-8 IN.csv > OUT.csv) and run again",
        )
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="surrogateescape", newline="")
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")


@contextmanager
def any_field_size() -> Iterator[None]:
    """Context in which the csv module reads fields of any size (a whole report in one
    cell exceeds its 128 KiB default); the old limit comes back on exit."""
    old = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        yield
    finally:
        csv.field_size_limit(old)


SURROGATE = re.compile("[\udc80-\udcff]")


def undecodable(row: dict[str, str]) -> str | None:
    """The problem of a row with bytes that are not UTF-8 (as decoded by :func:`open_text`)."""
    for key, value in row.items():
        m = SURROGATE.search(value) or SURROGATE.search(key)
        if m:
            byte = ord(m.group()) - 0xDC00
            column = SURROGATE.sub("?", key)
            return f"column {column!r} holds a byte that is not UTF-8 (0x{byte:02x} at character {m.start()})"
    return None


def csv_header(path: Path) -> list[str]:
    """The stripped column names of the CSV at ``path`` (empty for an empty file).

    Raises
    ------
    InputError
        The file cannot be read or parsed, naming ``path``.
    """
    try:
        with open_text(path) as fh, any_field_size():
            return [h.strip() for h in next(csv.reader(fh), [])]
    except (OSError, csv.Error) as err:
        raise InputError(path, f"cannot read CSV: {err}") from err


class _Lines:
    """The lines of a text file for :class:`csv.reader`, noting the number of the first
    one that is not blank since :attr:`first_content` was last reset (where a row starts)."""

    def __init__(self, fh: Iterator[str]) -> None:
        self.fh = fh
        self.n = 0
        self.first_content: int | None = None

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self.fh)
        self.n += 1
        if self.first_content is None and line.strip():
            self.first_content = self.n
        return line


def csv_rows(
    path: Path, required: tuple[str, ...], *, strict: bool = True
) -> Iterator[tuple[str, dict[str, str], str | None]]:
    """Yield ``(where, row, problem)`` with stripped keys; check required columns first.

    ``where`` is ``"row {n} (line {first line of the row})"``.
    ``problem`` is None for a usable row; otherwise the row holds bytes that are not
    UTF-8 or the CSV parser rejected it (then ``row`` is empty). With ``strict`` a
    problem raises :class:`InputError` instead (metadata and split files, whose rows
    must all be right). A quoted field that is never closed raises it always (it would
    swallow every row after it).
    """
    try:
        with open_text(path) as fh, any_field_size():
            # strict: a quoted field that the file's end closes is an error, not the rest of the file
            lines = _Lines(fh)
            reader = csv.DictReader(lines, strict=True)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in required if c not in header]
            if missing:
                raise InputError(path, f"missing column(s) {missing}; has {header}")
            for n in itertools.count(1):
                lines.first_content = None
                try:
                    raw = next(reader)
                except StopIteration:
                    return
                except csv.Error as err:  # the parser goes on at the next line
                    # the row's first line that is not blank (the csv reader skips blank
                    # lines between rows; its own count goes on through them)
                    first = lines.first_content or reader.reader.line_num
                    where = f"row {n} (line {first})"
                    if "unexpected end of data" in str(err):  # nothing after it is a row of its own
                        raise InputError(
                            path,
                            f"{where}: a quoted field opened in this row is never closed (an unbalanced "
                            "'\"'): the rest of the file would be read as one field; close or remove the quote",
                        ) from None
                    problem, row = f"the CSV parser rejects the row: {err}", {}
                    if reader.reader.line_num > first:  # a quote left open joined the lines after it
                        problem += (
                            f"; lines {first}-{reader.reader.line_num} were read as this one row (if a quote "
                            f"was left open on line {first}, the rows of the lines after it are in it, not read)"
                        )
                else:
                    where = f"row {n} (line {lines.first_content or reader.reader.line_num})"
                    row = {(k or "").strip(): (v if isinstance(v, str) else "") for k, v in raw.items()}
                    problem = undecodable(row)
                if problem and strict:
                    raise InputError(path, f"{where}: {problem}")
                yield where, row, problem
    except OSError as err:
        raise InputError(path, f"cannot read CSV: {err}") from err


def norm_split(value: str, path: Path, where: str) -> str | None:
    """A split cell normalised to one of :data:`cxrils.vocab.SPLITS` ("val" ->
    "validate"); None for an empty cell.

    Raises
    ------
    InputError
        Not a split name, naming ``path`` and ``where`` (the row).
    """
    if not value.strip():
        return None
    try:
        return normalize_split(value)
    except SplitError:
        raise InputError(path, f"{where}: split {value!r} is not one of {list(SPLITS)}") from None


def read_view(value: str | None) -> str | None:
    """The view position of an input's view cell (:func:`cxrils.vocab.read_view_position`:
    "p.a." and "PA VIEW" -> "PA", "AP PORTABLE" -> "AP", "postero-anterior" -> "PA",
    "cross-table lateral" -> "XTABLE LATERAL"), the cell's view words when a word of it
    makes the view not frontal ("LEFT LATERAL", "LATERAL DECUBITUS", "Doe lateral" ->
    "LATERAL": the view QC excludes it),
    or None when the cell is empty or names no view position (then the view is unknown:
    it passes the view QC, and the anatomy QC decides; a warning names each such value
    once)."""
    term, not_frontal = vocab.read_view_position(value)
    if term is not None or not_frontal is not None:
        return term or not_frontal
    v = " ".join((value or "").split()).upper()
    if v:
        _warn_unknown_view(v)
    return None


@functools.lru_cache(maxsize=64)
def _warn_unknown_view(view: str) -> None:
    log.warning("view %r is not a view position (one of %s): read as unknown", view[:40], sorted(vocab.VIEW_POSITIONS))


# --- the labelled public corpora (covid_qu_ex, covid19, jsrt, nih, xrv_tests) ---------------

#: Where the shared data's folders are described (for the messages of a missing file).
DATA_README = "../shared/data/README.md"


def require_folder(folder: Path) -> Path:
    """``folder``, a folder of a corpus whose files a reader lists.

    Raises
    ------
    FileNotFoundError
        If it does not exist (the message names it).
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: folder not found (see {DATA_README})")
    return folder


def table_rows(path: Path, required: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
    """``(where, row)`` of every row of a corpus table (UTF-8 CSV, keys stripped, values
    as in the file), in file order; ``where`` is ``"row N (line L)"``.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    InputError
        If a required column is missing, a row holds bytes that are not UTF-8 or the CSV
        parser rejects a row (the message names the file and the row).
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: table not found (see {DATA_README})")
    return [(where, row) for where, row, _ in csv_rows(path, required)]


def cell_id(path: Path, where: str, row: dict[str, str], column: str, seen: set[str] | None = None) -> str:
    """The stripped, non-empty id in ``column``; with ``seen``, also unique in the file.

    Raises
    ------
    InputError
        For an empty or (with ``seen``) repeated id.
    """
    value = (row.get(column) or "").strip()
    if not value:
        raise InputError(path, f"{where}: empty {column}")
    if seen is not None:
        if value in seen:
            raise InputError(path, f"{where}: duplicate {column} {value!r}")
        seen.add(value)
    return value


#: Cell values read as "not given" in an optional numeric column (JSRT writes ``?``).
MISSING_VALUES: tuple[str, ...] = ("", "?", "nan", "NaN")


def cell_float(path: Path, where: str, row: dict[str, str], column: str, *, optional: bool = False) -> float | None:
    """The number in ``column`` as a float; None for an absent column or a value of
    :data:`MISSING_VALUES` when ``optional``.

    Raises
    ------
    InputError
        If the value is not a number (or is missing and not ``optional``).
    """
    value = (row.get(column) or "").strip()
    if value in MISSING_VALUES:
        if optional:
            return None
        raise InputError(path, f"{where}: no value in column {column!r}")
    try:
        return float(value)
    except ValueError:
        raise InputError(path, f"{where}: column {column!r} holds {value!r}, not a number") from None


def cell_number(path: Path, where: str, row: dict[str, str], column: str) -> float:
    """The number in the required column ``column`` (:func:`cell_float`)."""
    value = cell_float(path, where, row, column)
    assert value is not None
    return value


def cell_int(path: Path, where: str, row: dict[str, str], column: str) -> int | None:
    """The whole number in the optional column ``column``; None when absent or missing.

    Raises
    ------
    InputError
        If the value is not a whole number.
    """
    value = cell_float(path, where, row, column, optional=True)
    if value is None:
        return None
    if not value.is_integer():
        raise InputError(path, f"{where}: column {column!r} holds {row[column]!r}, not a whole number")
    return int(value)


def existing(path: Path) -> Path | None:
    """``path`` if it is a file, else None."""
    return path if path.is_file() else None


# A DICOM UID in a file name ("1.2.840.113619.2.55.3.604688119.969.1268071029.321.dcm"): digits
# joined by at least four dots, standing alone; not the standard's own public UIDs
# ("1.2.840.10008.1.2.4.50", a transfer syntax), which name no patient or study.
_UID = re.compile(r"(?<![A-Za-z0-9.])(?!1\.2\.840\.10008\.)\d+(?:\.\d+){4,}(?![A-Za-z0-9])")


def stem_id(name: str) -> str:
    """The image id a file name gives: its stem, with each DICOM UID in it replaced by
    ``uid-`` and the first 12 hex digits of its SHA-1, so that no UID reaches the
    dataset's ids and file names (docs/io.md: no header field leaves the loader).
    MIMIC-CXR's own ``dicom_id`` stems (de-identified hex) are kept as they are."""
    return hide_uids(Path(name).stem)


def hide_uids(text: str) -> str:
    """``text`` with each DICOM UID replaced as :func:`stem_id` replaces it (paths in
    error messages that reach the dataset)."""
    return _UID.sub(lambda m: "uid-" + hashlib.sha1(m.group(0).encode()).hexdigest()[:12], text)
