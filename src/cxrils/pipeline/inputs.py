"""What the pipeline does with its inputs once read (:mod:`cxrils.sources` reads them):
patient-level split checks and the report-length cap."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

from cxrils.config import SPLIT_BY, InputConfig
from cxrils.sources import InputError, StudyInput

__all__ = ["check_splits", "cap_report"]


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
            raise InputError(
                source,
                f"{len(anonymous)} image(s) have no patient_id and no split (e.g. {where}"
                f"image {first.image_id!r}): splits are made by patient so that a patient's "
                "images never land in two splits. Add a patient_id column, give every row a "
                'split, or pass --split-by study (set split.by = "study", recorded in the '
                "manifest) if every study is a different patient",
            )
    key = (lambda s: s.patient_id) if split_by == "patient" else (lambda s: s.study_id)
    given: dict[str, tuple[str, StudyInput]] = {}
    for s in good:
        if s.split is None or not key(s):
            continue
        seen = given.setdefault(key(s), (s.split, s))
        if seen[0] != s.split:
            other = seen[1]
            raise InputError(
                source,
                f"{split_by} {key(s)!r} is in two splits: {seen[0]} (image "
                f"{other.image_id!r}) and {s.split} (image {s.image_id!r}); a {split_by}'s "
                "images must share one split",
            )
    out = []
    for s in items:
        if s.problem is None and s.split is None and key(s) in given:
            s = dataclasses.replace(s, split=given[key(s)][0])
        out.append(s)
    return out


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


def apply_report_cap(text: str, inputs: InputConfig, where: str) -> tuple[str | None, str | None]:
    """The report as the pipeline structures it under ``inputs``' length cap.

    Parameters
    ----------
    text : str
        Raw report text.
    inputs : InputConfig
        ``report_max_chars``, ``report_max_sentences`` (:func:`cap_report`) and
        ``report_over_cap`` ("exclude" or "truncate").
    where : str
        Names the study in the note, e.g. ``"study s1, pairs.csv line 3"``.

    Returns
    -------
    (str or None, str or None)
        ``(text, None)`` within the cap; over it, ``(None, "too long: ... (where)")`` (the
        exclusion reason) or, with ``report_over_cap = "truncate"``, ``(cut text,
        "truncated: ... (where); cut to N characters")`` (a flag for the provenance).
    """
    cut, over = cap_report(text, inputs.report_max_chars, inputs.report_max_sentences)
    if over is None:
        return text, None
    if inputs.report_over_cap == "truncate":
        return cut, f"truncated: {over} ({where}); cut to {len(cut)} characters"
    return None, f"too long: {over} ({where})"
