"""Human lesion labels of the shared public data, their fixed split and near-duplicates.

The built-in lesion models (the learned detector, :mod:`cxrils.vision.detection`, and
the learned anomaly map, :mod:`cxrils.vision.anomaly`) train on expert-verified
COVID-19 infection masks of COVID-QU-Ex (``covid_qu_ex/``, Tahir et al. 2021; masks
proposed by a network and corrected by medical doctors), and ``benchmarks/human_masks.py``
scores the pipeline against them. Read from ``../shared/data``; never copied into the
project.

Split (fixed, shared with the anatomy model): an image is in the held-back **report
part** when :func:`cxrils.training.anatomy_data.split_of` ``("covid_qu_ex", image_id)``
is ``"test"`` (COVID-QU-Ex has no patient ids, so the image id stands in for the
patient); the rest is the **tuning part**, the only part any model here trains or is
tuned on. The tuning part is cut once more, by :func:`tuning_role`, into two disjoint
halves: one trains the detector, the other the anomaly map, so that the two models of
Algorithm 1's c2 and c3 never learn from the same image (docs/grounding.md).

Near-duplicates: COVID-QU-Ex is assembled from public collections and holds copies of
images of ``covid_ieee8023`` (and possibly of the other shared sources), some of
which are held back for reporting (the 93 severity-scored images, NIH, JSRT,
xrv_tests). :func:`near_duplicate_pairs` finds copies by thumbnails (resized,
re-cropped or re-exposed copies included); :func:`excluded_from_training` lists the
tuning-part images that copy an image of another shared source or of the report part:
no model trains on them.

Sides: "right"/"left" are the patient's; on these frontal images the patient's right
lung is on the image's left.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from cxrils.config import LesionDataConfig
from cxrils.grounding.expert import lesion_boxes  # noqa: F401 - the detector's targets, kept importable from here
from cxrils.sources.covid_qu_ex import read_covid_qu_ex
from cxrils.sources.jsrt import read_jsrt_images, read_jsrt_nodules
from cxrils.training.anatomy_data import read_gray, split_both_lungs, split_of

#: Name of COVID-QU-Ex in the split and role hashes (also its folder under the data root,
#: read by :mod:`cxrils.sources.covid_qu_ex`).
COVID_QU_EX = "covid_qu_ex"
#: Other shared sources whose images a COVID-QU-Ex image may copy (folder, image glob).
OTHER_SOURCES: tuple[tuple[str, str], ...] = (
    ("covid_ieee8023", "images/*.png"),
    ("nih_bbox", "images/*.png"),
    ("xrv_tests", "images/*.png"),
    ("jsrt_scr", "images/*.png"),
    ("iu_xray", "images/*.png"),
    ("pip_packaged", "images/*.png"),
)
#: The two halves of the tuning part (:func:`tuning_role`).
ROLES: tuple[str, ...] = ("detector", "anomaly")


@dataclass(frozen=True)
class LesionSample:
    """One COVID-QU-Ex image with its human labels.

    Attributes
    ----------
    image_id : str
    image_path : Path
    cls : {"COVID-19", "Normal"}
    part : {"tuning", "report"}
        The fixed split (module docstring).
    lesion_path : Path or None
        0/255 PNG of the expert-verified infection mask (None for Normal images).
    lung_path : Path
        0/255 PNG of both lungs (one mask).
    """

    image_id: str
    image_path: Path
    cls: str
    part: str
    lesion_path: Path | None
    lung_path: Path

    @property
    def positive(self) -> bool:
        """True for a COVID-19 image (an infection mask exists)."""
        return self.lesion_path is not None

    def image(self) -> np.ndarray:
        """The image, uint8 (H, W) (256 x 256 as distributed)."""
        return read_gray(self.image_path)

    def lesion(self, shape: tuple[int, int] | None = None) -> np.ndarray:
        """Infection mask, bool (H, W); all False for a Normal image (of ``shape`` when
        given, which saves reading the lung mask for its size)."""
        if self.lesion_path is None:
            return np.zeros(shape if shape is not None else read_gray(self.lung_path).shape, dtype=bool)
        return read_gray(self.lesion_path) > 127

    def lungs(self) -> tuple[np.ndarray, np.ndarray]:
        """(right lung, left lung), bool (H, W), patient sides, cut from the one
        both-lungs mask by :func:`cxrils.training.anatomy_data.split_both_lungs`."""
        return split_both_lungs(read_gray(self.lung_path) > 127)


def part_of(image_id: str) -> str:
    """``"report"`` (held back) or ``"tuning"`` for a COVID-QU-Ex image id (module docstring)."""
    return "report" if split_of(COVID_QU_EX, image_id) == "test" else "tuning"


def tuning_role(image_id: str) -> str:
    """``"detector"`` or ``"anomaly"``: which built-in model may train on this
    tuning-part image (``sha256("covid_qu_ex-role:<id>")`` even/odd; ours, fixed)."""
    digest = hashlib.sha256(f"{COVID_QU_EX}-role:{image_id}".encode()).hexdigest()
    return ROLES[int(digest, 16) % 2]


def covid_qu_ex_samples(data_root: str | Path, part: str | None = None) -> list[LesionSample]:
    """COVID-QU-Ex images listed in ``images.csv``
    (:func:`cxrils.sources.covid_qu_ex.read_covid_qu_ex`), sorted by image id.

    Parameters
    ----------
    data_root : path
        The shared data folder (``../shared/data``).
    part : {"tuning", "report"}, optional
        Only this part of the fixed split (default: both).

    Raises
    ------
    FileNotFoundError
        If ``<data_root>/covid_qu_ex/images.csv`` does not exist.
    ValueError
        On an unknown ``part``.
    """
    if part not in (None, "tuning", "report"):
        raise ValueError(f"part must be 'tuning' or 'report', got {part!r}")
    out = []
    for r in read_covid_qu_ex(data_root):
        p = part_of(r.image_id)
        if part is None or p == part:
            out.append(LesionSample(r.image_id, r.image_path, r.cls, p, r.infection_mask_path, r.lung_mask_path))
    return sorted(out, key=lambda s: s.image_id)


def _thumb(x: np.ndarray, side: int, highpass_sigma: float) -> np.ndarray:
    t = cv2.resize(x, (side, side), interpolation=cv2.INTER_AREA).astype(np.float32)
    if highpass_sigma > 0:
        t = t - cv2.GaussianBlur(t, (0, 0), highpass_sigma)
    t = t.ravel() - t.mean()
    norm = float(np.linalg.norm(t))
    return t / norm if norm > 0 else t


@lru_cache(maxsize=8192)
def fingerprints(path: Path, cfg: LesionDataConfig = LesionDataConfig()) -> tuple[np.ndarray, np.ndarray]:
    """The two thumbnails compared by :func:`near_duplicate_pairs`, each a unit
    vector (their dot product is a Pearson correlation).

    ``coarse``: the image squashed (aspect NOT kept, as COVID-QU-Ex squashed its
    sources to 256 x 256) to ``dup_coarse_side`` squared; ``fine``: squashed to
    ``dup_fine_side`` squared minus its Gaussian blur (sigma ``dup_fine_sigma``), i.e.
    the image's own edges and texture, which tell a copy from a look-alike.
    """
    x = read_gray(path)
    return _thumb(x, cfg.dup_coarse_side, 0.0), _thumb(x, cfg.dup_fine_side, cfg.dup_fine_sigma)


def near_duplicate_pairs(
    a: list[Path], b: list[Path], cfg: LesionDataConfig = LesionDataConfig(), *, same_list: bool = False
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, fine correlation)`` of images ``a[i]``, ``b[j]`` that are copies.

    A pair is a copy when the coarse thumbnails correlate at ``dup_coarse_min`` or
    more and the fine (high-pass) thumbnails at ``dup_fine_min`` or more
    (:func:`fingerprints`). With ``same_list`` (``a is b``), only ``i < j``.
    """
    if not a or not b:
        return []
    ca, fa = map(np.stack, zip(*(fingerprints(Path(p), cfg) for p in a)))
    cb, fb = map(np.stack, zip(*(fingerprints(Path(p), cfg) for p in b)))
    out = []
    for start in range(0, len(a), 512):
        coarse = ca[start : start + 512] @ cb.T
        for i, j in zip(*np.nonzero(coarse >= cfg.dup_coarse_min)):
            i, j = start + int(i), int(j)
            if same_list and j <= i:
                continue
            fine = float(fa[i] @ fb[j])
            if fine >= cfg.dup_fine_min:
                out.append((i, j, fine))
    return out


def other_source_images(data_root: str | Path) -> list[Path]:
    """Images of the other shared sources (:data:`OTHER_SOURCES`) that exist, sorted."""
    root = Path(data_root)
    return [p for name, pattern in OTHER_SOURCES for p in sorted((root / name).glob(pattern))]


@dataclass(frozen=True)
class DuplicateReport:
    """What :func:`find_duplicates` found.

    ``cross``: (COVID-QU-Ex image id, other source's image path relative to the data
    root, fine correlation); ``within``: (tuning-part id, report-part id, correlation)
    copies across the fixed split; ``excluded``: the tuning-part ids no model trains on.
    """

    cross: list[tuple[str, str, float]]
    within: list[tuple[str, str, float]]
    excluded: frozenset[str]


def find_duplicates(data_root: str | Path, cfg: LesionDataConfig = LesionDataConfig()) -> DuplicateReport:
    """Copies between COVID-QU-Ex and the other shared sources, and across its split.

    Reads every image once (a few seconds for the shared data). A tuning-part image is
    excluded from training when it copies any image of another source (some are held
    back: severity scores, NIH, JSRT, xrv_tests; the rest feed the demo dataset whose
    test split must stay unseen too) or a report-part image.

    Raises
    ------
    FileNotFoundError
        If the COVID-QU-Ex table is missing.
    """
    root = Path(data_root)
    samples = covid_qu_ex_samples(root)
    others = other_source_images(root)
    paths = [s.image_path for s in samples]
    cross = [
        (samples[i].image_id, str(others[j].relative_to(root)), round(c, 4))
        for i, j, c in near_duplicate_pairs(paths, others, cfg)
    ]
    within = []
    for i, j, c in near_duplicate_pairs(paths, paths, cfg, same_list=True):
        a, b = samples[i], samples[j]
        if a.part != b.part:
            tune, rep = (a, b) if a.part == "tuning" else (b, a)
            within.append((tune.image_id, rep.image_id, round(c, 4)))
    part = {s.image_id: s.part for s in samples}
    excluded = {iid for iid, _, _ in cross if part[iid] == "tuning"} | {t for t, _, _ in within}
    return DuplicateReport(cross, within, frozenset(excluded))


def training_samples(
    data_root: str | Path, role: str, cfg: LesionDataConfig = LesionDataConfig()
) -> list[LesionSample]:
    """Tuning-part samples of one role (:func:`tuning_role`) that are no copies of
    another source's or the report part's images (:func:`find_duplicates`).

    Raises
    ------
    ValueError
        On an unknown role.
    FileNotFoundError
        If the COVID-QU-Ex table is missing.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    excluded = find_duplicates(data_root, cfg).excluded
    return [
        s
        for s in covid_qu_ex_samples(data_root, "tuning")
        if tuning_role(s.image_id) == role and s.image_id not in excluded
    ]


@dataclass(frozen=True)
class JsrtBackground:
    """A JSRT radiograph with a lung nodule, as a background for synthetic lesions
    (:func:`cxrils.training.synthetic.draw_lesions`) in the built-in lesion networks'
    training: adult PA films, which COVID-QU-Ex lacks. The nodule is not labelled (it is
    none of the seven lesion types). The same methods as :class:`LesionSample`.

    Attributes
    ----------
    image_id : str
    image_path, right_path, left_path : Path
        The image and its SCR lung masks (0/255 PNG, patient sides).
    """

    image_id: str
    image_path: Path
    right_path: Path
    left_path: Path
    positive: bool = False

    def image(self) -> np.ndarray:
        """The image, uint8 (H, W)."""
        return read_gray(self.image_path)

    def lesion(self, shape: tuple[int, int]) -> np.ndarray:
        """All False: no lesion of the seven types is labelled."""
        return np.zeros(shape, dtype=bool)

    def lungs(self) -> tuple[np.ndarray, np.ndarray]:
        """(right lung, left lung), bool (H, W), patient sides (SCR masks)."""
        return read_gray(self.right_path) > 127, read_gray(self.left_path) > 127


def jsrt_role(image_id: str) -> str:
    """The lesion model (:data:`ROLES`) a JSRT nodule image is a synthetic-lesion
    background of (``sha256("jsrt_scr-role:<id>")`` even/odd, as :func:`tuning_role`; ours,
    fixed)."""
    digest = hashlib.sha256(f"jsrt_scr-role:{image_id}".encode()).hexdigest()
    return ROLES[int(digest, 16) % 2]


def jsrt_backgrounds(data_root: str | Path, role: str) -> list[JsrtBackground]:
    """The JSRT nodule images of one role (:func:`jsrt_role`), sorted by image id. The 93 images without a nodule are left to
    the benchmarks as normal adult films (``benchmarks/human_masks.py``). A data folder
    without ``jsrt_scr/nodules.csv`` or ``jsrt_scr/images`` gives none (the training
    summary records the count). Read by :mod:`cxrils.sources.jsrt`.

    Raises
    ------
    ValueError
        On an unknown role.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    try:
        ids = sorted(n.image_id for n in read_jsrt_nodules(data_root))
        images = {r.image_id: r for r in read_jsrt_images(data_root)}
    except FileNotFoundError:
        return []
    out = []
    for iid in ids:
        r = images.get(iid)
        if jsrt_role(iid) == role and r is not None and r.right_lung and r.left_lung:
            out.append(JsrtBackground(iid, r.image_path, r.right_lung, r.left_lung))
    return out


def random_affine(rng: np.random.Generator, size: int, scale: float, rotate_deg: float, shift: float) -> np.ndarray:
    """A random 2 x 3 affine matrix on a ``size`` x ``size`` grid (training
    augmentation): zoom in [1 - scale, 1 + scale], rotation in +-``rotate_deg`` degrees
    about the centre, shift in +-``shift`` x size pixels. No flip: it would swap the
    patient's sides and put the heart on the wrong side."""
    c = (size - 1) / 2.0
    m = cv2.getRotationMatrix2D(
        (c, c), float(rng.uniform(-rotate_deg, rotate_deg)), float(rng.uniform(1 - scale, 1 + scale))
    )
    m[:, 2] += rng.uniform(-shift, shift, 2) * size
    return m


def warp(a: np.ndarray, m: np.ndarray, size: int, *, nearest: bool = False) -> np.ndarray:
    """``a`` (size, size) float32 moved by the affine ``m``; zeros enter at the borders."""
    flags = cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR
    return cv2.warpAffine(a, m, (size, size), flags=flags, borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
