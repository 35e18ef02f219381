"""Cardiothoracic ratio, the frontal-view plausibility of the anatomy, and the
cross-check of two anatomy sources.

Sources: paper Appendix D.3 (CTR <= 0.45 for cardiomegaly negatives,
:attr:`cxrils.config.QCConfig.ctr_max_cardiomegaly_negative`) and Appendix D.2 (images
whose lung masks' outermost x-coordinates or heart masks' lowest y-coordinate differ a
lot between HybridGNet and CXAS are excluded; tolerances are ours, in
:class:`cxrils.config.QCConfig`). The plausibility bounds are ours (the paper has
none), from the JSRT SCR human masks (:class:`cxrils.config.QCConfig`).
"""

from __future__ import annotations

import numpy as np

from cxrils.config import QCConfig
from cxrils.types import AnatomyMasks


def _cols(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.asarray(mask, dtype=bool).any(axis=0))


def cardiothoracic_ratio(masks: AnatomyMasks) -> float:
    """Cardiothoracic ratio: maximal transverse heart width / maximal thoracic width.

    The heart width is the horizontal extent of the heart mask (rightmost minus
    leftmost column + 1, pixels); the thoracic width is the horizontal extent of the
    union of both lungs (outer edge of the patient's right lung, on the image's left,
    to the outer edge of the left lung). Widths may be taken on different rows, as in
    the radiological definition.

    Parameters
    ----------
    masks : AnatomyMasks
        Needs ``"heart"``, ``"right lung"`` and ``"left lung"`` (bool (H, W)); the
        visible lungs are used where the backend gives them
        (:meth:`~cxrils.types.AnatomyMasks.organs`).

    Returns
    -------
    float
        CTR, usually in [0.3, 0.7]. The paper uses only images with CTR <= 0.45 as
        cardiomegaly negatives (Appendix D.3).

    Raises
    ------
    ValueError
        If the heart mask or both lung masks are empty.
    KeyError
        If a needed mask is missing.
    """
    masks = masks.organs()
    heart = _cols(masks["heart"])
    thorax = _cols(masks.union(("right lung", "left lung")))
    if heart.size == 0:
        raise ValueError(f"cannot compute CTR: the heart mask of backend {masks.backend!r} is empty")
    if thorax.size == 0:
        raise ValueError(f"cannot compute CTR: the lung masks of backend {masks.backend!r} are empty")
    return float(heart[-1] - heart[0] + 1) / float(thorax[-1] - thorax[0] + 1)


def implausible_ctr(ctr: float, cfg: QCConfig) -> str | None:
    """Why a cardiothoracic ratio (heart width / thoracic width, unitless) cannot be a
    heart size, or None: outside ``cfg.ctr_plausible_min..ctr_plausible_max`` (the QC
    bounds of :class:`~cxrils.config.QCConfig`) it measures a failed heart or lung mask
    or an image that is not a frontal chest view."""
    if cfg.ctr_plausible_min <= ctr <= cfg.ctr_plausible_max:
        return None
    return f"cardiothoracic ratio {ctr:.3f} outside {cfg.ctr_plausible_min}..{cfg.ctr_plausible_max}"


def frontal_plausibility(masks: AnatomyMasks, cfg: QCConfig) -> str | None:
    """Whether the organs look like those of a frontal chest radiograph.

    Checks, in order (bounds in ``cfg``, ours): both lungs present, each covering
    ``plausible_lung_area_min/max_fraction`` of the image, the smaller at least
    ``plausible_lung_balance_min_fraction`` of the larger, side by side (their rows
    overlap by ``plausible_lung_overlap_min_fraction`` of the shorter one, and at most
    ``plausible_lung_column_overlap_max_fraction`` of the narrower one's columns are
    shared, as on a lateral view where the two lung fields lie behind each other) with
    the patient's right lung on the image's left (its centroid column left of the left
    lung's); a heart of at least ``plausible_heart_area_min_fraction`` whose centroid
    lies between the lungs' centroids; a cardiothoracic ratio in
    [``ctr_plausible_min``, ``ctr_plausible_max``].

    Parameters
    ----------
    masks : AnatomyMasks
        ``"right lung"``, ``"left lung"``, ``"heart"`` bool (H, W) (patient sides); the
        visible lungs where the backend gives them (the bounds come from SCR's visible
        lungs; :meth:`~cxrils.types.AnatomyMasks.organs`).
    cfg : QCConfig

    Returns
    -------
    str or None
        None when plausible (or ``cfg.frontal_plausibility`` is off); else the reason,
        e.g. ``"heart covers 0.001 of the image (< 0.02): not a frontal chest view, or a
        failed segmentation"``.
    """
    if not cfg.frontal_plausibility:
        return None
    masks = masks.organs()
    h, w = masks.shape
    right = np.asarray(masks["right lung"], dtype=bool)
    left = np.asarray(masks["left lung"], dtype=bool)
    heart = np.asarray(masks["heart"], dtype=bool)
    hint = ": not a frontal chest view, or a failed segmentation"
    areas = {}
    for side, lung in (("right", right), ("left", left)):
        if not lung.any():
            return f"no {side} lung found{hint}"
        areas[side] = float(lung.mean())
        if not (cfg.plausible_lung_area_min_fraction <= areas[side] <= cfg.plausible_lung_area_max_fraction):
            return (
                f"{side} lung covers {areas[side]:.3f} of the image (outside "
                f"{cfg.plausible_lung_area_min_fraction}..{cfg.plausible_lung_area_max_fraction}){hint}"
            )
    balance = min(areas.values()) / max(areas.values())
    if balance < cfg.plausible_lung_balance_min_fraction:
        return f"the smaller lung is {balance:.2f} of the larger (< {cfg.plausible_lung_balance_min_fraction}){hint}"
    r_rows, l_rows = (np.flatnonzero(m.any(axis=1)) for m in (right, left))
    shared = min(r_rows[-1], l_rows[-1]) - max(r_rows[0], l_rows[0]) + 1
    overlap = max(0, shared) / min(r_rows[-1] - r_rows[0] + 1, l_rows[-1] - l_rows[0] + 1)
    if overlap < cfg.plausible_lung_overlap_min_fraction:
        return f"the lungs share {overlap:.2f} of their rows (< {cfg.plausible_lung_overlap_min_fraction}){hint}"
    r_cols, l_cols = (np.flatnonzero(m.any(axis=0)) for m in (right, left))
    column_overlap = np.intersect1d(r_cols, l_cols).size / min(r_cols.size, l_cols.size)
    if column_overlap > cfg.plausible_lung_column_overlap_max_fraction:
        return (
            f"the lungs overlap in {column_overlap:.2f} of their columns "
            f"(> {cfg.plausible_lung_column_overlap_max_fraction}): lungs behind each other{hint}"
        )
    cx_right, cx_left = np.nonzero(right)[1].mean() / w, np.nonzero(left)[1].mean() / w
    if not cx_right < cx_left:
        return (
            f"the right lung (centroid at {cx_right:.2f} of the width) is not on the image's left of the "
            f"left lung ({cx_left:.2f}): mirrored image or lungs swapped"
        )
    heart_area = float(heart.mean())
    if not heart.any() or heart_area < cfg.plausible_heart_area_min_fraction:
        return f"heart covers {heart_area:.3f} of the image (< {cfg.plausible_heart_area_min_fraction}){hint}"
    cx_heart = np.nonzero(heart)[1].mean() / w
    if not cx_right < cx_heart < cx_left:
        return f"heart centroid ({cx_heart:.2f} of the width) is not between the lungs ({cx_right:.2f}, {cx_left:.2f})"
    ctr = cardiothoracic_ratio(masks)
    bad_ctr = implausible_ctr(ctr, cfg)
    if bad_ctr is not None:
        return bad_ctr + hint
    return None


def _landmarks(masks: AnatomyMasks) -> dict[str, float | None]:
    """Outermost lung x and lowest heart y, as fractions of width / height."""
    h, w = masks.shape
    right = _cols(masks["right lung"])
    left = _cols(masks["left lung"])
    heart_rows = np.flatnonzero(np.asarray(masks["heart"], dtype=bool).any(axis=1))
    return {
        # patient's right lung is on the image's left: its outer edge is its first column
        "right lung outermost x": (right[0] + 0.5) / w if right.size else None,
        "left lung outermost x": (left[-1] + 0.5) / w if left.size else None,
        "heart lowest y": (heart_rows[-1] + 0.5) / h if heart_rows.size else None,
    }


def cross_check(a: AnatomyMasks, b: AnatomyMasks, cfg: QCConfig) -> str | None:
    """Compare two anatomy sources of the same image (paper Appendix D.2).

    Compares the outermost x-coordinate of each lung (as a fraction of the image
    width) and the lowest y-coordinate of the heart (as a fraction of the height), so
    the two sources may have different resolutions.

    Parameters
    ----------
    a, b : AnatomyMasks
        Two segmentations of one image (e.g. HybridGNet and CXAS).
    cfg : QCConfig
        ``crosscheck_lung_x_tol`` and ``crosscheck_heart_y_tol`` (fractions, ours).

    Returns
    -------
    str or None
        None when consistent; otherwise the reason to exclude the image.
    """
    la, lb = _landmarks(a), _landmarks(b)
    for structure, key, tol in (
        ("right lung", "right lung outermost x", cfg.crosscheck_lung_x_tol),
        ("left lung", "left lung outermost x", cfg.crosscheck_lung_x_tol),
        ("heart", "heart lowest y", cfg.crosscheck_heart_y_tol),
    ):
        va, vb = la[key], lb[key]
        if va is None or vb is None:
            empty = a.backend if va is None else b.backend
            return f"anatomy cross-check: {structure} mask empty in {empty!r}"
        if abs(va - vb) > tol:
            return (
                f"anatomy cross-check: {key} differs by {abs(va - vb):.3f} (> {tol}) "
                f"between {a.backend!r} and {b.backend!r}"
            )
    return None
