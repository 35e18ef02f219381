"""The generic CSV input: ``image_path`` (relative to the CSV's folder, or absolute) and
``report`` (raw text); optional ``study_id``, ``patient_id``, ``image_id``, ``view``,
``split``. Order: row order. A row that cannot be used becomes a :class:`StudyInput`
with ``problem`` set, which the pipeline excludes with its reason; so does a row whose
image id an earlier row already gave, or, without an ``image_id`` of its own, whose
image file (the earlier row runs), or whose ``image_id`` is no safe file name
(:data:`cxrils.fsutil.SAFE_IMAGE_ID`); an id derived from a file name that is none
(".x.png", a stem over 200 characters) gets a hash of the path instead."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from cxrils.fsutil import SAFE_IMAGE_ID
from cxrils.sources.base import SURROGATE, StudyInput, csv_rows, hide_uids, read_view, stem_id
from cxrils.vocab import SPLITS, SplitError, normalize_split

log = logging.getLogger(__name__)
#: Characters an image id derived from a file name cannot keep (:data:`cxrils.fsutil.SAFE_IMAGE_ID`).
_UNSAFE = re.compile(r"[\\\x00-\x1f]")


def _bad_row(path: Path, where: str, row: dict[str, str], problem: str) -> StudyInput:
    """The input item of a row that cannot be processed: excluded by the pipeline with
    ``problem``. Its id is ``row-{n}`` (its own ids may be what is wrong with it)."""
    study = row.get("study_id", "").strip()
    study = "" if SURROGATE.search(study) else study
    row_id = "row-" + where.split()[1]
    return StudyInput(
        study_id=study or row_id,
        image_id=row_id,
        patient_id="",
        image_path=path.resolve(),
        report="",
        view=None,
        split=None,
        first_of_study=False,
        where=where,
        problem=f"{where}" + (f", study {study}" if study else "") + f": {problem}",
    )


def _resolve(base: Path, rel: str) -> Path:
    """The image file a row's ``image_path`` names: absolute, or relative to the CSV's folder."""
    rel = rel.strip()
    return (Path(rel) if Path(rel).is_absolute() else base / rel).resolve()


def _path_key(base: Path, rel: str) -> str:
    """How a repeated file stem's image id is told apart: the row's path relative to the
    CSV's folder, normalised as text (POSIX; ``../`` for a file beside it; links are not
    followed, so a folder of symbolic links gives the same ids wherever it lies), so
    ``a/x.png``, ``./a/x.png`` and ``/abs/csvdir/a/x.png`` give one id. A file on another
    drive (Windows) keeps its normalised absolute path."""
    folder = os.path.normpath(os.path.abspath(base))
    file = os.path.normpath(os.path.join(folder, rel.strip()))
    try:
        return Path(os.path.relpath(file, folder)).as_posix()
    except ValueError:  # another drive
        return Path(file).as_posix()


def read_generic_csv(path: Path) -> Iterator[StudyInput]:
    """The input items of a generic CSV (module docstring), in row order.

    Parameters
    ----------
    path : Path
        The CSV file; relative ``image_path`` values are read from its folder.

    Raises
    ------
    InputError
        If the file cannot be read as a CSV with ``image_path`` and ``report`` columns
        (:func:`cxrils.sources.base.csv_rows`); a bad row is an item with ``problem``.
    """
    base = path.parent
    rows = list(csv_rows(path, ("image_path", "report"), strict=False))
    files = {  # each usable row's image file, resolved once
        where: _resolve(base, row["image_path"])
        for where, row, problem in rows
        if problem is None and row["image_path"].strip()
    }
    files_of_stem: dict[str, set[Path]] = {}  # distinct files, so a repeated row renames nothing
    for where, row, _ in rows:
        if where in files:
            files_of_stem.setdefault(Path(row["image_path"].strip()).stem, set()).add(files[where])
    taken: dict[str, tuple[str, Path]] = {}  # image id -> (where, image file) of its first row
    listed: dict[Path, str] = {}  # image file -> where its first row is
    reports: dict[str, tuple[str, str]] = {}  # study id -> (where, report) of its first row
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
        image_path = files[where]
        if image_path in listed and not row.get("image_id", "").strip():  # an id of its own makes another item
            yield _bad_row(
                path,
                where,
                row,
                f"names image {hide_uids(rel if not Path(rel).is_absolute() else Path(rel).name)} again "
                f"({listed[image_path]} does); list each image once",
            )
            continue
        given = row.get("image_id", "").strip()
        if given and not SAFE_IMAGE_ID.match(given):  # it names the image's files in the dataset
            yield _bad_row(
                path,
                where,
                row,
                f"image_id {given[:80]!r} is not a safe file name (no '/', '\\', control characters or "
                "leading '.', at most 200 characters)",
            )
            continue
        image_id = given or stem_id(rel)
        if not given and (len(files_of_stem[Path(rel).stem]) > 1 or not SAFE_IMAGE_ID.match(image_id)):
            # Same file name in different folders, or a file name that is no safe id (".x.png",
            # over 200 characters): disambiguate deterministically.
            safe = _UNSAFE.sub("_", image_id.lstrip("."))[:180] or "image"
            image_id = f"{safe}-{hashlib.sha1(_path_key(base, rel).encode()).hexdigest()[:8]}"
        if image_id in taken:
            first, first_path = taken[image_id]
            why = f"image id {image_id!r} is also that of {first} ({hide_uids(first_path.name)}); each image needs its own id"
            yield _bad_row(path, where, row, why)
            continue
        taken[image_id] = (where, image_path)
        listed.setdefault(image_path, where)
        study_id = row.get("study_id", "").strip() or image_id
        text = " ".join(row["report"].split())
        if reports.setdefault(study_id, (where, text))[1] != text:
            log.warning(
                "%s: %s gives study %s another report than %s does; each image is grounded in its own row's report",
                path,
                where,
                study_id,
                reports[study_id][0],
            )
        yield StudyInput(
            study_id=study_id,
            image_id=image_id,
            patient_id=row.get("patient_id", "").strip(),
            image_path=image_path,
            report=row["report"],
            view=read_view(row.get("view")),
            split=split,
            where=where,
        )
