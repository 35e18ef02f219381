"""Public training data of the builtin anatomy model and its fixed patient-level split.

Sources (read from ``../shared/data`` by the readers of :mod:`cxrils.sources`; never
copied into the project), :data:`SOURCES`:

- ``jsrt_scr``: JSRT PA images with SCR masks of right lung, left lung and heart
  (one image per patient, so the image id is the patient id).
- ``covid_ieee8023``: the COVID-19 image collection's hand-drawn ``masks_lung_v7labs``
  (both lungs in one mask, no heart); the patient id comes from ``metadata.csv``.
- ``covid_qu_ex``: the COVID-QU-Ex infection-segmentation train split (256 x 256
  images, ``lung_masks/ID.png`` holds both lungs in one mask, no heart). COVID-QU-Ex
  gives no patient ids, so the image id stands in for the patient: two images of one
  patient can fall on both sides of the split unless the near-duplicate rule below
  catches them.

"left"/"right" in mask names are the patient's sides; the patient's right lung is on
the image's left. Both-lungs masks are cut into the two lungs by :func:`split_both_lungs`.

Split rule (ours, fixed): a patient is in the held-out ``test`` part when
``sha256("<source>:<patient_id>")`` read as an integer, modulo 100, is below
:attr:`~cxrils.config.AnatomyDataConfig.test_percent`; otherwise ``train``. Training never reads ``test`` patients.

Near-duplicates across and within sources (COVID-QU-Ex is assembled from public
collections and holds many images of ``covid_ieee8023``): a ``train`` image whose
:func:`fingerprint` correlates at :attr:`~cxrils.config.AnatomyDataConfig.dup_min_correlation` or more with any
``test`` image of any source is left out of training (:func:`load_split`), so no
held-back image is trained on through another source (not applied between two JSRT
images: :data:`DISTINCT_PATIENT_SOURCES`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from cxrils.config import AnatomyDataConfig
from cxrils.sources.covid19 import read_covid19_images
from cxrils.sources.covid_qu_ex import read_covid_qu_ex
from cxrils.sources.jsrt import read_jsrt_images

#: The data sources, folder names under the data root.
SOURCES: tuple[str, ...] = ("jsrt_scr", "covid_ieee8023", "covid_qu_ex")
#: Sources whose lung masks are whole lungs, reaching medially to the mediastinum and
#: including the lung behind the heart (the v7labs masks, checked by eye; the CXAS
#: convention). The others (SCR, COVID-QU-Ex) follow the visible lung border along the
#: heart (the HybridGNet convention); docs/anatomy.md.
FULL_LUNG_SOURCES: tuple[str, ...] = ("covid_ieee8023",)

#: The held-back split and the near-duplicate rule: :class:`cxrils.config.AnatomyDataConfig`
#: (``test_percent``, ``dup_size``, ``dup_min_correlation``; reasons there).
SPLIT = AnatomyDataConfig()

#: Sources of one curated image per patient, within which the near-duplicate rule is
#: not applied: JSRT's standardised PA technique makes images of different patients
#: correlate above :attr:`~cxrils.config.AnatomyDataConfig.dup_min_correlation` (checked by eye), while its
#: patients are known to be distinct.
DISTINCT_PATIENT_SOURCES: tuple[str, ...] = ("jsrt_scr",)


@dataclass(frozen=True)
class Sample:
    """One training or test image with its reference masks.

    ``heart`` is None where the source has no heart mask (COVID-19 v7labs, COVID-QU-Ex).
    Arrays are bool (H, W) at the image's stored size.
    """

    source: str
    image_id: str
    patient_id: str
    image_path: Path
    right_lung: np.ndarray
    left_lung: np.ndarray
    heart: np.ndarray | None

    def reference_masks(self) -> dict[str, np.ndarray]:
        """The reference masks by CXAS label ("right lung", "left lung", "heart": patient
        sides, bool (H, W)), e.g. for an :class:`~cxrils.types.AnatomyMasks` whose
        cardiothoracic ratio is the radiologists'.

        Raises
        ------
        ValueError
            If the source has no heart mask.
        """
        if self.heart is None:
            raise ValueError(f"{self.source} image {self.image_id} has no reference heart mask")
        return {"right lung": self.right_lung, "left lung": self.left_lung, "heart": self.heart}


def split_of(source: str, patient_id: str) -> str:
    """``"test"`` or ``"train"`` for a patient, by the fixed hash rule of this module."""
    digest = hashlib.sha256(f"{source}:{patient_id}".encode()).hexdigest()
    return "test" if int(digest, 16) % 100 < SPLIT.test_percent else "train"


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
    counts = mask[:, c0 + third : c1 - third].sum(axis=0)
    cut = c0 + third + int(np.argmin(counts)) if counts.size else (c0 + c1) // 2
    right[:, :cut] = mask[:, :cut]
    left[:, cut:] = mask[:, cut:]
    return right, left


def jsrt_samples(data_root: Path) -> list[Sample]:
    """All JSRT images with SCR lung and heart masks (patient = image), sorted by image id
    (:func:`cxrils.sources.jsrt.read_jsrt_images`).

    Raises
    ------
    FileNotFoundError
        If ``jsrt_scr/images`` is not a folder.
    """
    out = []
    for r in read_jsrt_images(data_root):
        if r.right_lung is None or r.left_lung is None or r.heart is None:
            continue
        out.append(
            Sample(
                "jsrt_scr",
                r.image_id,
                r.image_id,
                r.image_path,
                _read_mask(r.right_lung),
                _read_mask(r.left_lung),
                _read_mask(r.heart),
            )
        )
    return out


def covid_samples(data_root: Path) -> list[Sample]:
    """COVID-19 collection images with a v7labs lung mask, split into the two lungs, in the
    order of the mask file names (:func:`cxrils.sources.covid19.read_covid19_images`; the
    patient id is ``patientid``). Images without a PNG and empty masks are left out.

    Raises
    ------
    FileNotFoundError
        If ``covid_ieee8023/metadata.csv`` is missing.
    cxrils.sources.InputError
        If it is malformed.
    ValueError
        If an image with a mask has no ``patientid`` (the split is by patient).
    """
    listed = [r for r in read_covid19_images(data_root) if r.v7labs_mask_path is not None and r.image_path.is_file()]
    out = []
    for r in sorted(listed, key=lambda r: str(r.v7labs_mask_path)):
        if not r.patient_id:
            raise ValueError(
                f"covid_ieee8023 image {r.image_id}: metadata.csv gives no patientid (the anatomy split is by patient)"
            )
        assert r.v7labs_mask_path is not None
        both = _read_mask(r.v7labs_mask_path)
        if both.sum() == 0:
            continue
        right, left = split_both_lungs(both)
        out.append(Sample("covid_ieee8023", r.image_id, r.patient_id, r.image_path, right, left, None))
    return out


def covid_qu_ex_samples(data_root: Path) -> list[Sample]:
    """COVID-QU-Ex images (``images.csv`` order, :func:`cxrils.sources.covid_qu_ex.read_covid_qu_ex`)
    with their both-lungs mask split into the two lungs; the image id is the patient id
    (the dataset gives none). Images without a PNG or lung mask, and empty masks, are left out.

    Raises
    ------
    FileNotFoundError
        If ``covid_qu_ex/images.csv`` is missing.
    """
    out = []
    for r in read_covid_qu_ex(data_root):
        if not r.image_path.is_file() or not r.lung_mask_path.is_file():
            continue
        both = _read_mask(r.lung_mask_path)
        if both.sum() == 0:
            continue
        right, left = split_both_lungs(both)
        out.append(Sample("covid_qu_ex", r.image_id, r.image_id, r.image_path, right, left, None))
    return out


def held_back_images(data_root: str | Path) -> list[tuple[str, str, Path]]:
    """``(source, image_id, path)`` of every image of a ``test``-split patient in the
    source folders, with or without reference masks (a COVID-19 image without a v7labs
    mask is held back too: other stages report on it).

    Raises
    ------
    FileNotFoundError
        If a source's image list (``metadata.csv``, ``images.csv``, ``jsrt_scr/images``) is missing.
    """
    out = [
        ("jsrt_scr", r.image_id, r.image_path)
        for r in read_jsrt_images(data_root)
        if split_of("jsrt_scr", r.image_id) == "test"
    ]
    out += [
        ("covid_ieee8023", r.image_id, r.image_path)
        for r in read_covid19_images(data_root)
        if split_of("covid_ieee8023", r.patient_id) == "test" and r.image_path.is_file()
    ]
    out += [
        ("covid_qu_ex", r.image_id, r.image_path)
        for r in read_covid_qu_ex(data_root)
        if split_of("covid_qu_ex", r.image_id) == "test" and r.image_path.is_file()
    ]
    return out


@lru_cache(maxsize=8192)
def _fingerprint_of_file(path: Path) -> np.ndarray:
    return fingerprint(read_gray(path))


def fingerprint(x: np.ndarray) -> np.ndarray:
    """Thumbnail compared by the near-duplicate rule.

    Parameters
    ----------
    x : numpy.ndarray, uint8, shape (H, W)

    Returns
    -------
    numpy.ndarray, float32, shape (S ** 2,), S = ``AnatomyDataConfig.dup_size``
        The image resized to S squared (area averaging, aspect
        ratio NOT kept, so a copy squashed to a square still matches), minus its mean,
        divided by its norm: the dot product of two fingerprints is the Pearson
        correlation of the thumbnails (0 for a constant image).
    """
    small = cv2.resize(x.astype(np.float32), (SPLIT.dup_size, SPLIT.dup_size), interpolation=cv2.INTER_AREA).ravel()
    small -= small.mean()
    norm = float(np.linalg.norm(small))
    return small / norm if norm > 0 else small


def near_duplicates(
    a: list[Path], b: list[Path], min_correlation: float = SPLIT.dup_min_correlation
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, correlation)`` of image files ``a[i]`` and ``b[j]`` whose
    :func:`fingerprint` s correlate at ``min_correlation`` or more (a file listed in both
    pairs with itself).

    Raises
    ------
    ValueError
        If a file cannot be read as an image.
    """
    if not a or not b:
        return []
    fa = np.stack([_fingerprint_of_file(Path(p)) for p in a])
    fb = np.stack([_fingerprint_of_file(Path(p)) for p in b])
    out = []
    for start in range(0, len(a), 512):
        corr = fa[start : start + 512] @ fb.T
        for i, j in zip(*np.nonzero(corr >= min_correlation)):
            out.append((start + int(i), int(j), float(corr[i, j])))
    return out


@dataclass(frozen=True)
class Split:
    """The fixed split of all sources.

    ``train``: train-split images that may be trained on; ``test``: the held-back
    images with reference masks; ``excluded``: train-split images left out because they
    are near-duplicates of a held-back image (:func:`held_back_images`), each with the
    held-back images it matches as ``(source, image_id, correlation)``.
    """

    train: list[Sample]
    test: list[Sample]
    excluded: list[tuple[Sample, list[tuple[str, str, float]]]] = field(default_factory=list)


def load_split(data_root: str | Path) -> Split:
    """All sources of :data:`SOURCES`, split by :func:`split_of`, with the train-split
    near-duplicates of held-back images (:func:`near_duplicates` against
    :func:`held_back_images`; pairs within one source of
    :data:`DISTINCT_PATIENT_SOURCES` excepted) removed from ``train``.

    Reads every image once for its fingerprint (about 20 s for the shared data).

    Raises
    ------
    FileNotFoundError
        If ``data_root`` lacks one of the source folders.
    """
    root = Path(data_root)
    for name in SOURCES:
        if not (root / name).is_dir():
            raise FileNotFoundError(f"{root / name}: public data folder not found")
    samples = jsrt_samples(root) + covid_samples(root) + covid_qu_ex_samples(root)
    test = [s for s in samples if split_of(s.source, s.patient_id) == "test"]
    train = [s for s in samples if split_of(s.source, s.patient_id) == "train"]
    held = held_back_images(root)
    matches: dict[int, list[tuple[str, str, float]]] = {}
    for i, j, corr in near_duplicates([s.image_path for s in train], [h[2] for h in held]):
        source, image_id, _ = held[j]
        if train[i].source == source and source in DISTINCT_PATIENT_SOURCES:
            continue
        matches.setdefault(i, []).append((source, image_id, round(corr, 4)))
    return Split(
        [s for i, s in enumerate(train) if i not in matches], test, [(train[i], m) for i, m in sorted(matches.items())]
    )


def load_samples(data_root: str | Path, split: str) -> list[Sample]:
    """Samples of one split (``"train"`` or ``"test"``) from all sources; ``"train"``
    without the near-duplicates of held-back images (:func:`load_split`).

    Raises
    ------
    FileNotFoundError
        If ``data_root`` lacks one of the source folders.
    ValueError
        If ``split`` is neither ``"train"`` nor ``"test"``.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    parts = load_split(data_root)
    return parts.train if split == "train" else parts.test
