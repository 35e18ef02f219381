"""Algorithm 1's condition c1 with an expert's own boxes and lungs (the c1 oracle).

The default ``grounding.c1_bilateral = "per_lung"`` departs from the paper's c1
(``"union"``, docs/grounding.md); it was chosen on what this module computes for the
bilateral images of the COVID-QU-Ex tuning part (``benchmarks/human_masks.py``, table
"c1 with the experts' own boxes and lungs"). No model runs: given an expert lesion mask
and the expert's right and left lungs,

* the boxes are those of the lesion's 8-connected components (:func:`lesion_boxes`, the
  learned detector's training targets), each with confidence 1;
* a bilateral report ("both lungs") makes M_union the two lungs, and, under
  ``per_lung``, (M_right, M_left) the right and the left lung;
* :func:`c1_oracle` says for each box the side holding most of it and whether it passes
  c1 (:func:`cxrils.grounding.algorithm.check_box`) under ``cfg.c1_bilateral``, and
  :func:`c1_passing_sides` on which sides at least one box passes: what a rule lets
  through when the boxes are as good as the expert's (a left-lung lesion whose own box
  fails c1 is hard for Algorithm 1 to ground).

Masks are bool (H, W) arrays of one image. Sides are the patient's: the patient's right
lung is on the image's LEFT (smaller column indices in a PA film).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

from cxrils.config import GroundingConfig
from cxrils.grounding.algorithm import BoxCheck, check_box
from cxrils.types import LesionBox
from cxrils.vocab import WHOLE_LUNGS

#: The lesion type the oracle's boxes are checked as: c1 does not depend on it (only c2's
#: tau_conf does, and the oracle's boxes have confidence 1).
ORACLE_LESION_TYPE = "opacity"


def lesion_boxes(
    lesion: np.ndarray, min_area_frac: float, lungs: np.ndarray | None = None
) -> list[tuple[float, float, float, float]]:
    """Boxes ``(x0, y0, x1, y1)`` (pixels, x = column, x1/y1 exclusive) of the
    8-connected components of a lesion mask, the detector's training targets.

    Components smaller than ``min_area_frac`` of the lung area (of the whole image
    when ``lungs`` is None or empty) are dropped as specks. Boxes come in the order of
    the components' first pixel in row-major order.

    Parameters
    ----------
    lesion : numpy.ndarray, bool, shape (H, W)
    min_area_frac : float
        In [0, 1] (``cxrils.config.LesionDataConfig.box_min_area_frac`` for the
        detector's targets).
    lungs : numpy.ndarray, bool, shape (H, W), optional

    Returns
    -------
    list of tuple of float
        One ``(x0, y0, x1, y1)`` per kept component; a box read by
        :meth:`cxrils.types.LesionBox.to_mask` covers exactly the component's bounding
        rectangle.
    """
    ref = int(lungs.sum()) if lungs is not None and lungs.any() else lesion.size
    labels, _ = ndi.label(lesion, structure=np.ones((3, 3), bool))
    boxes = []
    for index, sl in enumerate(ndi.find_objects(labels), start=1):
        if sl is None or int((labels[sl] == index).sum()) < min_area_frac * ref:
            continue
        boxes.append((float(sl[1].start), float(sl[0].start), float(sl[1].stop), float(sl[0].stop)))
    return boxes


def box_side(box_mask: np.ndarray, right_lung: np.ndarray, left_lung: np.ndarray) -> str:
    """The patient side a box lies on: ``"right lung"`` when it holds at least as many
    pixels of the right lung as of the left lung (a tie counts as right), else
    ``"left lung"``.

    Parameters
    ----------
    box_mask, right_lung, left_lung : numpy.ndarray, bool, shape (H, W)
        The box rasterised (:meth:`~cxrils.types.LesionBox.to_mask`) and the two lungs
        (patient sides: the right lung is on the image's left).
    """
    right = int(np.count_nonzero(box_mask & right_lung))
    left = int(np.count_nonzero(box_mask & left_lung))
    return WHOLE_LUNGS[0] if right >= left else WHOLE_LUNGS[1]


@dataclass(frozen=True)
class OracleBox:
    """One expert box of :func:`c1_oracle`.

    Attributes
    ----------
    box : LesionBox
        The component's bounding box, confidence 1.0, class name ``""``.
    side : str
        ``"right lung"`` or ``"left lung"`` (:func:`box_side`, patient sides).
    check : BoxCheck
        Algorithm 1's conditions for the box (only c1 is meaningful here: the anomaly
        set given is the lungs).
    """

    box: LesionBox
    side: str
    check: BoxCheck

    @property
    def c1(self) -> bool:
        """Whether the box passes c1 under the rule it was checked with."""
        return self.check.c1


def c1_oracle(
    lesion: np.ndarray, right_lung: np.ndarray, left_lung: np.ndarray, cfg: GroundingConfig, *, min_area_frac: float
) -> list[OracleBox]:
    """c1 of Algorithm 1 for the boxes of an expert lesion, reported in both lungs.

    Each box of :func:`lesion_boxes` (components of at least ``min_area_frac`` of the
    two lungs' area) is checked by :func:`~cxrils.grounding.algorithm.check_box` with
    M_union = right lung | left lung and, under ``cfg.c1_bilateral == "per_lung"``,
    (M_right, M_left) = (right lung, left lung): under ``"union"`` c1 is
    ``IoU(B, both lungs) >= tau_anatomy``, under ``"per_lung"`` also
    ``IoU(B, right lung) >= tau_anatomy`` or ``IoU(B, left lung) >= tau_anatomy``.

    Parameters
    ----------
    lesion, right_lung, left_lung : numpy.ndarray, bool, shape (H, W)
        The expert lesion mask and the expert lungs (patient sides: the right lung is
        on the image's left).
    cfg : GroundingConfig
        ``tau_anatomy`` and ``c1_bilateral`` (the rule).
    min_area_frac : float
        Specks below this share of the lungs' area get no box
        (``cxrils.config.LesionDataConfig.box_min_area_frac``, the detector's targets).

    Returns
    -------
    list of OracleBox
        In the order of :func:`lesion_boxes`; empty when the lesion is.
    """
    lungs = right_lung | left_lung
    out = []
    for coords in lesion_boxes(lesion, min_area_frac, lungs):
        box = LesionBox(*coords, 1.0, "")
        check = check_box(box, lungs, lungs, right_lung, left_lung, ORACLE_LESION_TYPE, cfg, (right_lung, left_lung))
        out.append(OracleBox(box, box_side(box.to_mask(lesion.shape), right_lung, left_lung), check))
    return out


def c1_passing_sides(
    lesion: np.ndarray, right_lung: np.ndarray, left_lung: np.ndarray, cfg: GroundingConfig, *, min_area_frac: float
) -> frozenset[str]:
    """The patient sides (of ``"right lung"``, ``"left lung"``) on which at least one box
    of :func:`c1_oracle` passes c1 under ``cfg.c1_bilateral``; arguments as there.

    Empty when no box passes, e.g. under ``"union"`` for a bilateral lesion whose
    components each cover less than ``tau_anatomy`` of both lungs.
    """
    return frozenset(b.side for b in c1_oracle(lesion, right_lung, left_lung, cfg, min_area_frac=min_area_frac) if b.c1)
