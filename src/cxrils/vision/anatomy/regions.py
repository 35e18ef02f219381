"""Lung zones and lobes from the two lung masks: a geometric rule (ours).

CXAS (paper section 3.1 step 2) segments zones and lobes with a learned network. The
builtin and HybridGNet backends only give whole lungs, so these functions derive the
regions geometrically. They APPROXIMATE CXAS's learned regions; they are not
anatomical truths (see docs/anatomy.md).

The rule works per lung on its own vertical extent. For a lung whose topmost row
(apex) is ``r_apex`` and lowest row (base) is ``r_base``, a row ``r`` has the level
``f = (r - r_apex + 0.5) / (r_base - r_apex + 1)`` in (0, 1).

Zones (bands by level; fractions from :class:`cxrils.config.AnatomyConfig`):
apical ``f < zone_apical_end``; upper ``< zone_upper_end``; mid ``< zone_mid_end``;
lung base the rest.

Lobes (frontal projections, approximated):

- right upper lobe: above the horizontal fissure, ``f < right_horizontal_fissure``;
- right middle lobe: between the fissure and ``lower_lobe_start``, medial part of
  each row (the ``medial_fraction`` of the row's lung extent nearest the midline);
- right lower lobe: the lateral part of those rows, and everything below
  ``lower_lobe_start``;
- left upper lobe: ``f < left_upper_lobe_end``, plus the lingula: the medial part of
  rows between ``left_upper_lobe_end`` and ``lower_lobe_start``;
- left lower lobe: the rest of the left lung.

Zones partition each lung, and so do the lobes (disjoint, union = the lung).
Sides are the patient's: the right lung lies on the image's left on a frontal image,
so its medial side is towards larger column numbers.
"""

from __future__ import annotations

import numpy as np

from cxrils.config import AnatomyConfig
from cxrils.vocab import LEFT_ZONES, RIGHT_ZONES


def _levels(lung: np.ndarray) -> np.ndarray:
    """Level ``f`` of every row of an (H, W) mask (NaN for rows outside the lung)."""
    rows = np.flatnonzero(lung.any(axis=1))
    levels = np.full(lung.shape[0], np.nan)
    if rows.size:
        top, bottom = rows[0], rows[-1]
        r = np.arange(top, bottom + 1)
        levels[top : bottom + 1] = (r - top + 0.5) / (bottom - top + 1)
    return levels


def _medial(lung: np.ndarray, side: str, fraction: float) -> np.ndarray:
    """Bool (H, W): per row, the ``fraction`` of the row's lung extent nearest the
    midline (image right for the patient's right lung, image left for the left)."""
    h, w = lung.shape
    has = lung.any(axis=1)
    first = np.where(has, lung.argmax(axis=1), 0)
    last = np.where(has, w - 1 - lung[:, ::-1].argmax(axis=1), -1)
    extent = last - first + 1
    cols = np.arange(w)[None, :]
    if side == "right":
        cut = last - fraction * extent
        return (cols > cut[:, None]) & has[:, None]
    cut = first + fraction * extent
    return (cols < cut[:, None]) & has[:, None]


def lung_zones(lung: np.ndarray, side: str, cfg: AnatomyConfig) -> dict[str, np.ndarray]:
    """The four zones of one lung (CXAS spelling), bool (H, W) each.

    Parameters
    ----------
    lung : numpy.ndarray, bool, shape (H, W)
        Mask of the patient's ``side`` lung.
    side : {"right", "left"}
        Patient side.
    cfg : AnatomyConfig
        Zone boundaries as fractions of the lung's height.
    """
    names = RIGHT_ZONES if side == "right" else LEFT_ZONES
    f = _levels(lung)[:, None]
    bounds = (0.0, cfg.zone_apical_end, cfg.zone_upper_end, cfg.zone_mid_end, np.inf)
    return {name: lung & (f >= lo) & (f < hi) for name, lo, hi in zip(names, bounds[:-1], bounds[1:])}


def lung_lobes(lung: np.ndarray, side: str, cfg: AnatomyConfig) -> dict[str, np.ndarray]:
    """The lobes of one lung (CXAS spelling) as frontal-projection approximations.

    Parameters
    ----------
    lung : numpy.ndarray, bool, shape (H, W)
        Mask of the patient's ``side`` lung.
    side : {"right", "left"}
        Patient side.
    cfg : AnatomyConfig

    Returns
    -------
    dict
        Right: upper, middle and lower lobe; left: upper and lower lobe. Bool (H, W).
    """
    f = np.nan_to_num(_levels(lung), nan=-1.0)[:, None]
    medial = _medial(lung, side, cfg.medial_fraction)
    above_lower = f < cfg.lower_lobe_start
    if side == "right":
        upper = lung & (f < cfg.right_horizontal_fissure)
        middle = lung & ~upper & above_lower & medial
        return {
            "lung upper lobe right": upper,
            "lung middle lobe right": middle,
            "lung lower lobe right": lung & ~upper & ~middle,
        }
    upper = lung & ((f < cfg.left_upper_lobe_end) | (above_lower & medial))
    return {"lung upper lobe left": upper, "lung lower lobe left": lung & ~upper}


def lung_regions(right: np.ndarray, left: np.ndarray, cfg: AnatomyConfig) -> dict[str, np.ndarray]:
    """Every label of :data:`cxrils.vocab.LUNG_REGION_LABELS` from the two lungs.

    Parameters
    ----------
    right, left : numpy.ndarray, bool, shape (H, W)
        The patient's right lung (image left) and left lung (image right).
    cfg : AnatomyConfig

    Returns
    -------
    dict of str to numpy.ndarray
        Bool (H, W) masks: eight zones, five lobes, "right lung", "left lung".

    Raises
    ------
    ValueError
        If the two masks are not 2-D arrays of the same shape.
    """
    right = np.asarray(right, dtype=bool)
    left = np.asarray(left, dtype=bool)
    if right.ndim != 2 or right.shape != left.shape:
        raise ValueError(f"lung masks must be 2-D of one shape, got {right.shape} and {left.shape}")
    out: dict[str, np.ndarray] = {}
    for side, lung in (("right", right), ("left", left)):
        out.update(lung_zones(lung, side, cfg))
        out.update(lung_lobes(lung, side, cfg))
    out["right lung"] = right
    out["left lung"] = left
    return out
