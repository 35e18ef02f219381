"""Public training data of the builtin anatomy model and its fixed patient-level split.

Sources (read from ``../shared/data``; never copied into the project):

- ``jsrt_scr``: JSRT PA images with SCR masks of right lung, left lung and heart
  (one image per patient, so the image id is the patient id).
- ``covid_ieee8023``: the COVID-19 image collection's hand-drawn ``masks_lung_v7labs``
  (both lungs in one mask, no heart); the patient id comes from ``metadata.csv``.

"left"/"right" in mask names are the patient's sides; the patient's right lung is on
the image's left.

Split rule (ours, fixed): a patient is in the held-out ``test`` part when
``sha256("<source>:<patient_id>")`` read as an integer, modulo 100, is below
:data:`TEST_PERCENT`; otherwise ``train``. Training never reads ``test`` patients.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

#: Percentage of patients held out for testing (ours).
TEST_PERCENT = 20


@dataclass(frozen=True)
class Sample:
    """One training or test image with its reference masks.

    ``heart`` is None where the source has no heart mask (COVID-19 v7labs).
    Arrays are bool (H, W) at the image's stored size.
    """

    source: str
    image_id: str
    patient_id: str
    image_path: Path
    right_lung: np.ndarray
    left_lung: np.ndarray
    heart: np.ndarray | None


def split_of(source: str, patient_id: str) -> str:
    """``"test"`` or ``"train"`` for a patient, by the fixed hash rule of this module."""
    digest = hashlib.sha256(f"{source}:{patient_id}".encode("utf-8")).hexdigest()
    return "test" if int(digest, 16) % 100 < TEST_PERCENT else "train"


def read_gray(path: str | Path) -> np.ndarray:
    """Read an image file as uint8 (H, W) with Pillow (8-bit PNG/JPEG).

    Raises
    ------
    ValueError
        If the file cannot be read as an image (the message names the file).
    """
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("L"), dtype=np.uint8).copy()
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read image: {err}") from err


def _read_mask(path: Path) -> np.ndarray:
    return read_gray(path) > 127


def split_both_lungs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a mask holding both lungs into (right lung, left lung), patient sides.

    The cut is the column with the fewest mask pixels in the middle third of the
    mask's horizontal extent (the mediastinum). Image-left of the cut is the patient's
    right lung.

    Parameters
    ----------
    mask : numpy.ndarray, bool, shape (H, W)

    Returns
    -------
    right, left : numpy.ndarray, bool, shape (H, W)
    """
    cols = np.flatnonzero(mask.any(axis=0))
    right = np.zeros_like(mask)
    left = np.zeros_like(mask)
    if cols.size == 0:
        return right, left
    c0, c1 = int(cols[0]), int(cols[-1]) + 1
    third = max(1, (c1 - c0) // 3)
    counts = mask[:, c0 + third:c1 - third].sum(axis=0)
    cut = c0 + third + int(np.argmin(counts)) if counts.size else (c0 + c1) // 2
    right[:, :cut] = mask[:, :cut]
    left[:, cut:] = mask[:, cut:]
    return right, left


def jsrt_samples(data_root: Path) -> list[Sample]:
    """All JSRT images with SCR lung and heart masks (patient = image)."""
    root = Path(data_root) / "jsrt_scr"
    out = []
    for path in sorted((root / "images").glob("*.png")):
        iid = path.stem
        masks = {n: root / "masks" / n / f"{iid}.png" for n in ("right_lung", "left_lung", "heart")}
        if not all(p.is_file() for p in masks.values()):
            continue
        out.append(Sample("jsrt_scr", iid, iid, path, _read_mask(masks["right_lung"]),
                          _read_mask(masks["left_lung"]), _read_mask(masks["heart"])))
    return out


def covid_samples(data_root: Path) -> list[Sample]:
    """COVID-19 collection images with a v7labs lung mask, split into the two lungs."""
    root = Path(data_root) / "covid_ieee8023"
    with open(root / "metadata.csv", newline="", encoding="utf-8", errors="replace") as fh:
        patient = {row["image_id"]: row["patientid"] for row in csv.DictReader(fh)}
    out = []
    for mpath in sorted((root / "masks_lung_v7labs").glob("*.png")):
        iid = mpath.stem
        ipath = root / "images" / f"{iid}.png"
        if not ipath.is_file() or iid not in patient:
            continue
        both = _read_mask(mpath)
        if both.sum() == 0:
            continue
        right, left = split_both_lungs(both)
        out.append(Sample("covid_ieee8023", iid, patient[iid], ipath, right, left, None))
    return out


def load_samples(data_root: str | Path, split: str) -> list[Sample]:
    """Samples of one split (``"train"`` or ``"test"``) from both sources.

    Raises
    ------
    FileNotFoundError
        If ``data_root`` lacks ``jsrt_scr`` or ``covid_ieee8023``.
    """
    root = Path(data_root)
    for name in ("jsrt_scr", "covid_ieee8023"):
        if not (root / name).is_dir():
            raise FileNotFoundError(f"{root / name}: public data folder not found")
    samples = jsrt_samples(root) + covid_samples(root)
    return [s for s in samples if split_of(s.source, s.patient_id) == split]
