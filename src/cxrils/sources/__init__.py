"""The corpus readers: image-report pairs as :class:`StudyInput` items, in input order.

One module per corpus, each with one reader and one report-section choice, used by
``cxrils generate``, ``cxrils structure`` and the benchmarks.

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

The labelled public corpora of ``../shared/data`` (human masks, boxes and labels, no
reports) have one reader module each, used by the training code, the anomaly atlas build
and the benchmarks, not by :func:`read_inputs`: :mod:`~cxrils.sources.covid_qu_ex`,
:mod:`~cxrils.sources.covid19` (``covid_ieee8023/``), :mod:`~cxrils.sources.jsrt`
(``jsrt_scr/``), :mod:`~cxrils.sources.nih` (``nih_bbox/``) and
:mod:`~cxrils.sources.xrv_tests`. Each takes the data root, returns frozen dataclasses
(ids, image and mask paths, boxes and labels as the files give them) in file order,
raises ``FileNotFoundError`` naming a missing table or folder and :class:`InputError`
naming the file and row of a malformed one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

from cxrils import vocab
from cxrils.config import InputConfig
from cxrils.sources import iu, mimic
from cxrils.sources.base import InputError, StudyInput, csv_header
from cxrils.sources.generic_csv import read_generic_csv
from cxrils.sources.iu import iu_report_text, read_iu_reports

__all__ = [
    "InputError",
    "StudyInput",
    "detect_input_kind",
    "input_excludes",
    "read_inputs",
    "read_iu_reports",
    "iu_report_text",
]


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
            raise InputError(
                p, "unknown input: expected a generic CSV (.csv), a MIMIC-CXR folder or an IU X-ray folder"
            )
        header = csv_header(p)
        if {"image_path", "report"} <= set(header):
            return "csv"
        if {"report_id", "image_ids"} <= set(header):
            return "iu"
        raise InputError(p, f"CSV has columns {header}; a generic input CSV needs 'image_path' and 'report'")
    if mimic.files_dir(p) is not None:
        return "mimic"
    if iu.reports_source(p) is not None:
        return "iu"
    raise InputError(
        p,
        "unknown input layout: expected a MIMIC-CXR folder (files/pXX/pXXXXXXXX/sXXXXXXXX.txt), "
        "an IU X-ray folder (nlmcxr_reports_all.csv or ecgen-radiology/*.xml, and images/) "
        "or a CSV with columns image_path, report",
    )


def input_excludes(item: StudyInput, frontal_only: bool) -> bool:
    """Whether the pipeline excludes ``item`` for what the input already says: a row
    ``problem``, or, with ``frontal_only`` (``QCConfig.frontal_only``), a known view
    that is not frontal (:data:`cxrils.vocab.FRONTAL_VIEWS`)."""
    return item.problem is not None or (frontal_only and item.view is not None and item.view not in vocab.FRONTAL_VIEWS)


def read_inputs(
    path: str | Path, kind: str | None = None, inputs: InputConfig | None = None, *, frontal_only: bool = True
) -> Iterator[StudyInput]:
    """Yield the studies of an input in input order.

    ``StudyInput.first_of_study`` marks each study's first image in input order that
    the pipeline will not exclude for what the input already says, that is, one
    without a ``problem`` and, with ``frontal_only``, whose view is frontal or unknown:
    the image that gets the study's absent-type negatives unless the pipeline excludes
    it (its pixels, QC, grounding, records or a rejected commit; the runner then gives
    them to the study's next image that is not excluded). A lateral listed first
    (MIMIC-CXR orders a study's images by dicom_id) thus leaves them to the frontal image.

    Parameters
    ----------
    path : path
        A MIMIC-CXR folder, an IU X-ray folder (or its reports CSV), or a generic CSV.
    kind : {"mimic", "iu", "csv"}, optional
        Layout; detected with :func:`detect_input_kind` when None.
    inputs : cxrils.config.InputConfig, optional
        ``iu_sections``: the IU report sections a study's report joins (default
        :class:`~cxrils.config.InputConfig`).
    frontal_only : bool
        ``QCConfig.frontal_only``: images of a known non-frontal view are excluded,
        so none of them is a study's first image.

    Raises
    ------
    InputError
        For an unknown layout, a missing column, a bad split value in a MIMIC split
        file, or duplicate image ids of a MIMIC or IU input (naming both image files). A
        bad row of a generic CSV is not an error, nor is one that repeats an earlier
        row's image or image id: it is yielded with ``problem`` set.
    """
    p = Path(path)
    kind = kind or detect_input_kind(p)
    cfg = inputs or InputConfig()
    readers: dict[str, Callable[[Path], Iterator[StudyInput]]] = {
        "mimic": mimic.read_mimic,
        "iu": lambda q: iu.read_iu(q, cfg),
        "csv": read_generic_csv,
    }
    if kind not in readers:
        raise InputError(p, f"unknown input kind {kind!r}; known: {sorted(readers)}")
    seen: set[str] = set()
    studies: set[str] = set()
    for item in readers[kind](p):
        if item.image_id in seen:
            # Read again up to the first item of that id (ids only are kept: inputs are large).
            first = next(s for s in readers[kind](p) if s.image_id == item.image_id)
            raise InputError(p, _duplicate_message(first, item))
        seen.add(item.image_id)
        if not input_excludes(item, frontal_only) and item.study_id not in studies:
            studies.add(item.study_id)
            if not item.first_of_study:
                item = dataclasses.replace(item, first_of_study=True)
        elif item.first_of_study:
            item = dataclasses.replace(item, first_of_study=False)
        yield item


def _duplicate_message(first: StudyInput, again: StudyInput) -> str:
    """Why two input items cannot share an image id: where each is (``"row 1 (line 2)"``
    of a generic CSV) and its image file. Two rows of one file are named without the id,
    which may be one the reader derived (a file name with a hash suffix)."""
    if first.image_path == again.image_path:
        if first.where and again.where:
            return f"{first.where} and {again.where} both name image {again.image_path}; list each image once"
        return f"image {again.image_path} is listed twice"

    def place(s: StudyInput) -> str:
        return f"{s.where} names {s.image_path}" if s.where else str(s.image_path)

    return f"duplicate image id {again.image_id!r}: {place(first)} and {place(again)}; each image needs its own id"
