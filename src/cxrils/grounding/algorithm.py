"""Algorithm 1 of the paper: lesion mask generation from anatomy masks, an anomaly
map and detector boxes (section 3.1 step 3, Table 7, Appendix A.4-A.5).

Masks are bool (H, W); boxes are :class:`cxrils.types.LesionBox` rasterised with
:meth:`~cxrils.types.LesionBox.to_mask` (pixels whose centres lie inside). "Right"
and "left" are the patient's sides (the patient's right lung is on the image's left).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
from scipy import ndimage as ndi

from cxrils.config import GroundingConfig
from cxrils.types import AnatomyMasks, LesionBox
from cxrils.vocab import LABEL_SIDE


def neighbourhood(cfg: GroundingConfig) -> np.ndarray:
    """Structuring element of ``cfg.connectivity``: bool (3, 3), all True for 8-connectivity,
    a cross for 4-connectivity (components of A and the expansion's steps)."""
    if cfg.connectivity == 8:
        return np.ones((3, 3), dtype=bool)
    if cfg.connectivity == 4:
        return np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=bool)
    raise ValueError(f"grounding.connectivity must be 4 or 8, got {cfg.connectivity}")


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two bool masks (0.0 when both are empty)."""
    union = int(np.count_nonzero(a | b))
    return int(np.count_nonzero(a & b)) / union if union else 0.0


@dataclass
class BoxCheck:
    """Algorithm 1's four conditions for one box (paper section 3.1, Table 7).

    Attributes
    ----------
    box : LesionBox
    iou_anatomy : float
        c1 value, IoU(B, M_union).
    confidence : float
        c2 value, the detector confidence.
    signal : float
        c3 value, |B ∩ A| / |B| (0 for a box with no pixel in the image).
    iou_right_lung, iou_left_lung : float
        c4 values, IoU(B, L_r) and IoU(B, L_l) (patient sides).
    c1, c2, c3, c4 : bool
        Verdicts against tau_anatomy, tau_conf (edema: tau_conf_edema), tau_signal,
        tau_size.
    n_components : int
        Connected components of A touching the box (0 unless kept).
    iou_anatomy_sides : tuple of float, optional
        ``grounding.c1_bilateral = "per_lung"`` only, for reported locations in both
        lungs: (IoU(B, M_right), IoU(B, M_left)) with the right-side and left-side parts
        of the reported locations (:func:`c1_sides`); None otherwise.
    """

    box: LesionBox
    iou_anatomy: float
    confidence: float
    signal: float
    iou_right_lung: float
    iou_left_lung: float
    c1: bool
    c2: bool
    c3: bool
    c4: bool
    n_components: int = 0
    iou_anatomy_sides: tuple[float, float] | None = None

    @property
    def kept(self) -> bool:
        """True when all four conditions hold."""
        return self.c1 and self.c2 and self.c3 and self.c4

    @property
    def failed(self) -> list[str]:
        """Names of the failed conditions, e.g. ``["c1", "c3"]``."""
        return [n for n, ok in (("c1", self.c1), ("c2", self.c2), ("c3", self.c3), ("c4", self.c4)) if not ok]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``c1_iou_right_part`` / ``c1_iou_left_part`` only when
        :attr:`iou_anatomy_sides` was evaluated."""
        sides = (
            {}
            if self.iou_anatomy_sides is None
            else {"c1_iou_right_part": self.iou_anatomy_sides[0], "c1_iou_left_part": self.iou_anatomy_sides[1]}
        )
        return {
            **self.box.to_dict(),
            "c1_iou_anatomy": self.iou_anatomy,
            **sides,
            "c1": self.c1,
            "c2_confidence": self.confidence,
            "c2": self.c2,
            "c3_signal": self.signal,
            "c3": self.c3,
            "c4_iou_right_lung": self.iou_right_lung,
            "c4_iou_left_lung": self.iou_left_lung,
            "c4": self.c4,
            "kept": self.kept,
            "failed": self.failed,
            "n_components": self.n_components,
        }


@dataclass
class Algorithm1Result:
    """Output of :func:`algorithm1`: the lesion mask (bool (H, W), possibly empty),
    the record of every box, and the kept boxes."""

    mask: np.ndarray
    checks: list[BoxCheck] = field(default_factory=list)

    @property
    def kept_boxes(self) -> list[LesionBox]:
        """The boxes that passed every check, in input order."""
        return [c.box for c in self.checks if c.kept]


def c1_sides(labels: tuple[str, ...] | list[str], anatomy: AnatomyMasks) -> tuple[np.ndarray, np.ndarray] | None:
    """The right-side and left-side parts of the reported locations, for the
    ``per_lung`` variant of c1 (``grounding.c1_bilateral``; ours, not the paper's).

    ``M_right`` is the union of the anatomy masks of the reported labels on the
    patient's right (:data:`cxrils.vocab.LABEL_SIDE`), ``M_left`` likewise; e.g.
    "both lower zones" -> ("right lung base", "left lung base") -> M_right = right lung
    base, M_left = left lung base; ("right upper zone lung", "right lung base", "left
    lung") -> M_right = right upper zone | right lung base, M_left = left lung. Labels
    without a side (none of the lung-region labels) count in M_union only.

    Parameters
    ----------
    labels : sequence of str
        The reported lung-region labels (CXAS spellings).
    anatomy : AnatomyMasks
        Holds every label of ``labels``.

    Returns
    -------
    tuple of numpy.ndarray (bool, shape (H, W)) or None
        (M_right, M_left) when the labels name both sides, else None (one-sided
        reports: c1 is the paper's).
    """
    right = [label for label in labels if LABEL_SIDE.get(label) == "right"]
    left = [label for label in labels if LABEL_SIDE.get(label) == "left"]
    if not right or not left:
        return None
    return anatomy.union(right), anatomy.union(left)


def check_box(
    box: LesionBox,
    anomaly_set: np.ndarray,
    m_union: np.ndarray,
    right_lung: np.ndarray,
    left_lung: np.ndarray,
    lesion_type: str,
    cfg: GroundingConfig,
    m_sides: tuple[np.ndarray, np.ndarray] | None = None,
) -> BoxCheck:
    """Evaluate conditions c1-c4 of Algorithm 1 for one box.

    c1 is the paper's ``IoU(B, M_union) >= tau_anatomy``. With
    ``cfg.c1_bilateral == "per_lung"`` and ``m_sides`` given (reported locations in
    both lungs), c1 also holds when ``IoU(B, M_right) >= tau_anatomy`` or
    ``IoU(B, M_left) >= tau_anatomy`` (ours, docs/grounding.md); so a box passing the
    paper's c1 always passes, and a box straddling both lungs is still measured against
    M_union. Under ``"union"`` ``m_sides`` is ignored.

    Parameters
    ----------
    box : LesionBox
    anomaly_set : numpy.ndarray, bool, shape (H, W)
        A = x_ano >= tau_ano.
    m_union : numpy.ndarray, bool, shape (H, W)
        Union of the anatomy masks of the reported locations.
    right_lung, left_lung : numpy.ndarray, bool, shape (H, W)
        L_r and L_l (patient sides).
    lesion_type : str
        Selects tau_conf (edema: 0.01, Table 7).
    cfg : GroundingConfig
        tau_anatomy 0.25, tau_conf 0.20, tau_signal 0.20, tau_size 0.10 (Table 7);
        ``c1_bilateral``.
    m_sides : tuple of numpy.ndarray (bool, shape (H, W)), optional
        (M_right, M_left), the reported locations' right-side and left-side parts
        (:func:`c1_sides`); None for a one-sided report.
    """
    b = box.to_mask(anomaly_set.shape)
    area = int(np.count_nonzero(b))
    iou_anatomy = iou(b, m_union)
    sides = (iou(b, m_sides[0]), iou(b, m_sides[1])) if m_sides is not None and cfg.c1_bilateral == "per_lung" else None
    signal = int(np.count_nonzero(b & anomaly_set)) / area if area else 0.0
    iou_r, iou_l = iou(b, right_lung), iou(b, left_lung)
    return BoxCheck(
        box=box,
        iou_anatomy=iou_anatomy,
        confidence=float(box.confidence),
        signal=signal,
        iou_right_lung=iou_r,
        iou_left_lung=iou_l,
        c1=bool(iou_anatomy >= cfg.tau_anatomy or (sides is not None and max(sides) >= cfg.tau_anatomy)),
        c2=bool(box.confidence >= cfg.tau_conf_for(lesion_type)),
        c3=bool(signal >= cfg.tau_signal),
        c4=bool(iou_r >= cfg.tau_size or iou_l >= cfg.tau_size),
        iou_anatomy_sides=sides,
    )


def intersecting_components(box_mask: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, int]:
    """FindIntersectingComponent(B, A): union of the connected components of A that
    share at least one pixel with the box.

    Parameters
    ----------
    box_mask : numpy.ndarray, bool, shape (H, W)
    labels : numpy.ndarray, int, shape (H, W)
        Connected-component labels of A (0 = background), e.g. from
        ``scipy.ndimage.label(A, structure=neighbourhood(cfg))``.

    Returns
    -------
    mask : numpy.ndarray, bool, shape (H, W)
    count : int
        Number of components.
    """
    ids = np.unique(labels[box_mask])
    ids = ids[ids != 0]
    return np.isin(labels, ids), int(ids.size)


def hidden_base(
    whole: tuple[np.ndarray, np.ndarray],
    visible: tuple[np.ndarray, np.ndarray],
    heart: np.ndarray,
    cfg: GroundingConfig,
) -> np.ndarray:
    """Lung base that the whole-lung masks hold and the visible lungs do not (ours).

    Per lung: ``whole & ~visible`` outside the heart (grown by ``open_radius_px``) within
    the lowest ``effusion_base_fraction`` of the whole lung's height, opened with a disk
    of ``open_radius_px`` (both scaled as in :func:`refine`); kept when it holds at least
    ``effusion_hidden_min_fraction`` of the whole lung. On an upright film this is lung
    hidden by pleural fluid, which a healthy counterfactual (RadEdit) would restore.

    Parameters
    ----------
    whole, visible : tuple of numpy.ndarray (bool, shape (H, W))
        (right, left) lungs in the two conventions (:class:`cxrils.types.AnatomyMasks`),
        patient sides.
    heart : numpy.ndarray, bool, shape (H, W)
    cfg : GroundingConfig

    Returns
    -------
    numpy.ndarray, bool, shape (H, W)
    """
    scale = max(heart.shape) / cfg.reference_size_px
    radius = max(1, int(round(cfg.open_radius_px * scale)))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    not_heart = cv2.dilate(heart.astype(np.uint8), kernel) == 0
    rows = np.arange(heart.shape[0])[:, None]
    out = np.zeros(heart.shape, dtype=bool)
    for full, seen in zip(whole, visible):
        lung_rows = np.flatnonzero(full.any(axis=1))
        if lung_rows.size == 0:
            continue
        top, bottom = lung_rows[0], lung_rows[-1]
        band = rows >= bottom - cfg.effusion_base_fraction * (bottom - top + 1)
        part = full & ~seen & not_heart & band
        part = cv2.morphologyEx(part.astype(np.uint8), cv2.MORPH_OPEN, kernel) > 0
        if part.sum() >= cfg.effusion_hidden_min_fraction * full.sum():
            out |= part
    return out


def refine(
    component: np.ndarray,
    x: np.ndarray,
    right_lung: np.ndarray,
    left_lung: np.ndarray,
    lesion_type: str,
    cfg: GroundingConfig,
) -> np.ndarray:
    """Refine(C) of Algorithm 1 (paper Appendix A.5).

    1. Opening (erosion then dilation) with a disk of radius ``open_radius_px``
       (scaled from ``reference_size_px`` (512) to the image's longest side, at least 1
       unless 0) removes specks.
    2. Expansion into adjacent pixels of similar intensity: ``grow_iterations``
       (scaled likewise, at least 1 unless 0) dilation steps (8- or 4-connected,
       ``connectivity``), each only into lung pixels with
       ``|x - mean(x[C])| / 255 <= grow_intensity_tol``.
    3. Effusion only: for each lung the component reaches within its lowest
       ``effusion_base_fraction`` of height (a lung base), the lung mask is added from
       the component's top row in that band down to the lung's lowest row, i.e. to the
       costophrenic angle.

    Parameters
    ----------
    component : numpy.ndarray, bool, shape (H, W)
    x : numpy.ndarray, uint8, shape (H, W)
    right_lung, left_lung : numpy.ndarray, bool, shape (H, W)
        The lungs the expansion may enter and whose base an effusion takes: the whole
        lungs, which reach behind the heart and under fluid, where the backend gives
        them (the paper takes the lower lung from HybridGNet, whose shape prior carries
        the lung outline to the costophrenic angle).
    lesion_type : str
    cfg : GroundingConfig

    Returns
    -------
    numpy.ndarray, bool, shape (H, W)
        Possibly empty when the opening removed everything.
    """
    scale = max(x.shape) / cfg.reference_size_px
    radius = max(1, int(round(cfg.open_radius_px * scale))) if cfg.open_radius_px > 0 else 0
    mask: np.ndarray = component.copy()
    if radius > 0:  # OpenCV: much faster than scipy.ndimage on large masks
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
        mask = cv2.morphologyEx(component.astype(np.uint8), cv2.MORPH_OPEN, kernel) > 0
    if not mask.any():
        return mask
    lungs = right_lung | left_lung
    steps = max(1, int(round(cfg.grow_iterations * scale))) if cfg.grow_iterations > 0 else 0
    if steps > 0:
        mean = float(x[mask].mean())
        similar = np.abs(x.astype(np.float32) - mean) / 255.0 <= cfg.grow_intensity_tol
        allowed = (similar & lungs) | mask
        step = neighbourhood(cfg).astype(np.uint8)
        for _ in range(steps):  # geodesic dilation: one 8-connected step at a time
            grown = (cv2.dilate(mask.astype(np.uint8), step) > 0) & allowed
            if np.array_equal(grown, mask):
                break
            mask = grown
    if lesion_type == "effusion":
        rows = np.arange(x.shape[0])[:, None]
        for lung in (right_lung, left_lung):
            lung_rows = np.flatnonzero(lung.any(axis=1))
            if lung_rows.size == 0:
                continue
            top, bottom = lung_rows[0], lung_rows[-1]
            band_top = bottom - cfg.effusion_base_fraction * (bottom - top + 1)
            in_band = mask & lung & (rows >= band_top)
            if in_band.any():
                start = np.flatnonzero(in_band.any(axis=1))[0]
                mask |= lung & (rows >= start)
    return mask


def algorithm1(
    x: np.ndarray,
    anomaly_set: np.ndarray,
    m_union: np.ndarray,
    right_lung: np.ndarray,
    left_lung: np.ndarray,
    boxes: list[LesionBox],
    lesion_type: str,
    cfg: GroundingConfig,
    labels: np.ndarray | None = None,
    m_sides: tuple[np.ndarray, np.ndarray] | None = None,
    whole_lungs: tuple[np.ndarray, np.ndarray] | None = None,
) -> Algorithm1Result:
    """Lesion mask of one finding (paper Algorithm 1).

    Keeps box B_j when c1 IoU(B_j, M_union) >= tau_anatomy (``per_lung`` variant:
    :func:`check_box`), c2 conf >= tau_conf,
    c3 |B_j ∩ A| / |B_j| >= tau_signal and c4 IoU(B_j, L_r) >= tau_size or
    IoU(B_j, L_l) >= tau_size all hold; for each kept box takes the connected
    components of A touching it, refines them (:func:`refine`) and unions the results.

    Parameters
    ----------
    x : numpy.ndarray, uint8, shape (H, W)
        The image (for the similar-intensity expansion).
    anomaly_set : numpy.ndarray, bool, shape (H, W)
        A = x_ano >= tau_ano (tau_ano_edema for edema).
    m_union : numpy.ndarray, bool, shape (H, W)
        Union of the reported locations' anatomy masks.
    right_lung, left_lung : numpy.ndarray, bool, shape (H, W)
        Patient sides.
    boxes : list of LesionBox
    lesion_type : str
        One of :data:`cxrils.vocab.LESION_TYPES` (selects edema thresholds and the
        effusion refinement).
    cfg : GroundingConfig
    labels : numpy.ndarray, int, shape (H, W), optional
        The connected component labels of ``anomaly_set``
        (``scipy.ndimage.label(A, structure=neighbourhood(cfg))``), when the caller already has
        them (several findings of a study share A); computed when None.
    m_sides : tuple of numpy.ndarray (bool, shape (H, W)), optional
        (M_right, M_left) of :func:`c1_sides`, used by c1 when ``cfg.c1_bilateral`` is
        ``"per_lung"``.
    whole_lungs : tuple of numpy.ndarray (bool, shape (H, W)), optional
        (right, left) whole lungs for :func:`refine` (default: ``right_lung``,
        ``left_lung``, which c4 always uses).

    Returns
    -------
    Algorithm1Result
        ``mask`` bool (H, W), empty when nothing was grounded; ``checks`` in the order
        of ``boxes``.
    """
    mask = np.zeros(x.shape, dtype=bool)
    if labels is None:
        labels, _ = ndi.label(anomaly_set, structure=neighbourhood(cfg))
    checks = []
    for box in boxes:
        check = check_box(box, anomaly_set, m_union, right_lung, left_lung, lesion_type, cfg, m_sides)
        if check.kept:
            component, check.n_components = intersecting_components(box.to_mask(x.shape), labels)
            if check.n_components:
                mask |= refine(component, x, *(whole_lungs or (right_lung, left_lung)), lesion_type, cfg)
        checks.append(check)
    return Algorithm1Result(mask=mask, checks=checks)
