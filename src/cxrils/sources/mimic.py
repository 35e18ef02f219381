"""The MIMIC-CXR folder: reports ``files/pXX/pXXXXXXXX/sXXXXXXXX.txt``, images (DICOM or
JPG/PNG) in ``files/pXX/pXXXXXXXX/sXXXXXXXX/``, optional ``*metadata.csv`` and
``*split.csv`` beside ``files/`` (mimic-cxr-2.0.0, mimic-cxr-jpg-2.0.0)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from cxrils.sources.base import IMAGE_SUFFIXES, InputError, StudyInput, csv_rows, hide_uids, norm_split, read_view

log = logging.getLogger(__name__)


_PATIENT_RE = re.compile(r"^p\d+$")
_STUDY_RE = re.compile(r"^s\d+$")


def files_dir(folder: Path) -> Path | None:
    """The ``files/`` folder of a MIMIC-CXR(-JPG) copy at ``folder`` (``folder`` itself
    when it is that folder), recognised by its ``pXX`` group folders; None otherwise."""
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
    return {row["dicom_id"].strip(): row[column] for _, row, _ in csv_rows(path, ("dicom_id", column))}


def read_mimic(path: Path) -> Iterator[StudyInput]:
    """The studies of a MIMIC-CXR(-JPG) folder (``files/pXX/pNNNNNNNN/sNNNNNNNN``): one
    :class:`StudyInput` per study with its report ``sNNNNNNNN.txt`` and its images, the
    view from the ``*metadata.csv`` (ViewPosition only) and the split from the
    ``*split.csv`` when the folder has them.

    Raises
    ------
    InputError
        No ``files/pXX/`` folders, naming ``path``.
    """
    files = files_dir(path)
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
                    q
                    for q in (study_dirs[study].iterdir() if study in study_dirs else [])
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
                        study_id=study,
                        image_id=hide_uids(dicom_id),  # a UID file name (a PACS export) hashed
                        patient_id=patient.name,
                        image_path=image.resolve(),
                        report=report,
                        view=read_view(views.get(dicom_id)),
                        split=norm_split(split, split_csv, f"dicom_id {dicom_id}") if split else None,
                    )
    if n_no_image:
        log.info("MIMIC input %s: %d studies have a report but no image (skipped)", root, n_no_image)
