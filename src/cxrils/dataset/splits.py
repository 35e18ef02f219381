"""Train / validate / test assignment, always by patient (never by image).

With an official split file (MIMIC-CXR's ``mimic-cxr-2.0.0-split.csv(.gz)``, columns
``dicom_id, study_id, subject_id, split``) the official split is used, as in the
paper (section 3.2: "split following the official MIMIC-CXR partition"). Without
one, a patient's split is a pure function of ``(cfg.split.seed, patient_id)``
through SHA-256, so every image of a patient lands in the same split on every
machine and in every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from cxrils.config import Config
from cxrils.vocab import SPLITS, SplitError, normalize_split

__all__ = ["SPLITS", "SplitError", "assign_split", "load_official_split", "normalize_split"]


def _unit_interval(seed: int, patient_id: str) -> float:
    digest = hashlib.sha256(f"{seed}:{patient_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_split(
    patient_id: str, cfg: Config, *, official: Mapping[str, str] | None = None, key: str | None = None
) -> str:
    """The split of an image, decided by patient.

    Parameters
    ----------
    patient_id : str
        Patient id (non-empty).
    cfg : Config
        ``cfg.split.val_fraction``, ``test_fraction`` and ``seed`` for the hash split.
    official : mapping, optional
        An official split mapping (:func:`load_official_split`): id -> split. When
        given, ``key`` (e.g. the DICOM or study id), then ``patient_id``, is looked up.
    key : str, optional
        The id to look up in ``official`` first.

    Returns
    -------
    str
        "train", "validate" or "test".

    Raises
    ------
    SplitError
        On an empty patient id, fractions outside [0, 1] or summing above 1, or an id
        missing from ``official``.
    """
    if official is not None:
        for k in (key, patient_id):
            if k is not None and k in official:
                return normalize_split(official[k])
        raise SplitError(f"neither {key!r} nor patient {patient_id!r} is in the official split mapping")
    if not patient_id:
        raise SplitError("a hash split needs a patient id: images without one cannot be kept apart by patient")
    val, test = cfg.split.val_fraction, cfg.split.test_fraction
    if not (0.0 <= val <= 1.0 and 0.0 <= test <= 1.0 and val + test <= 1.0):
        raise SplitError(f"split fractions must lie in [0, 1] and sum to <= 1, got val={val}, test={test}")
    u = _unit_interval(cfg.split.seed, patient_id)
    if u < test:
        return "test"
    if u < test + val:
        return "validate"
    return "train"


def load_official_split(path: str | Path, key: str = "dicom_id") -> dict[str, str]:
    """Read an official split CSV (optionally gzipped) into ``{key value: split}``.

    Parameters
    ----------
    path : path
        CSV with a ``split`` column and the ``key`` column (MIMIC-CXR:
        ``dicom_id, study_id, subject_id, split``).
    key : str
        Column to index by.

    Raises
    ------
    SplitError
        If the file cannot be read, lacks the columns, or maps one id to two splits.
    """
    import pandas as pd

    p = Path(path)
    try:
        df = pd.read_csv(p, dtype=str)
    except (OSError, ValueError) as err:
        raise SplitError(f"{p}: cannot read split file: {err}") from err
    for col in (key, "split"):
        if col not in df.columns:
            raise SplitError(f"{p}: split file lacks column {col!r}; has {list(df.columns)}")
    out: dict[str, str] = {}
    for k, s in zip(df[key], df["split"]):
        s = normalize_split(s)
        if out.setdefault(k, s) != s:
            raise SplitError(f"{p}: {key} {k!r} is in two splits ({out[k]}, {s})")
    return out
