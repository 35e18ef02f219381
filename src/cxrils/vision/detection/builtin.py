"""Builtin lesion detector: boxes around hyperintense regions of the anomaly map.

Not a learned detector (the paper uses a VinDr-CXR YOLO, section 3.1 step 2): it
proposes one box per connected region of ``x_ano >= builtin_tau_ano`` inside the
lungs, after a Gaussian smoothing of ``x_ano`` within the lungs only (sigma 1% of the
image's longest side, to merge speckle into regions; anomalies outside the lungs do
not leak in). Regions smaller than ``builtin_min_area_frac`` of
the lung area are skipped. The confidence is ``min(1, mean x_ano over the region /
builtin_conf_ref)`` scaled by ``min(1, sqrt(area / (4 * min_area)))``: brighter and
larger regions score higher. Class name "Lung Opacity" (a VinDr-CXR kept class).

Because the boxes come from the same anomaly map that Algorithm 1's c3 reads, c3
is weaker evidence with this backend than with an independent detector.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage as ndi

from cxrils.config import Config, DetectionConfig
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox
from cxrils.vision.anomaly.builtin import masked_blur
from cxrils.vision.detection.base import check_image, keep_lesion_classes

#: Smoothing of x_ano, fraction of the longest image side (ours).
SMOOTH_FRAC = 0.01
CLASS_NAME = "Lung Opacity"


class BuiltinDetector:
    """Anomaly-region box proposals (see module docstring).

    Parameters
    ----------
    cfg : DetectionConfig
        ``builtin_tau_ano``, ``builtin_min_area_frac``, ``builtin_conf_ref``.
    """

    name = "builtin"
    version = "anomaly-regions-1"

    def __init__(self, cfg: DetectionConfig | None = None) -> None:
        self.cfg = cfg or DetectionConfig()

    @classmethod
    def from_config(cls, cfg: Config) -> "BuiltinDetector":
        """Build from the ``detection`` section of a :class:`~cxrils.config.Config`."""
        return cls(cfg.detection)

    def detect(self, x: np.ndarray, *, anomaly: AnomalyResult | None = None,
               anatomy: AnatomyMasks | None = None) -> list[LesionBox]:
        """See :meth:`cxrils.vision.detection.LesionDetector.detect`.

        The lungs are ``anatomy["right lung"] | anatomy["left lung"]`` when given,
        else the anomaly's edit region.

        Raises
        ------
        ValueError
            If ``anomaly`` is missing or its shape differs from ``x``.
        """
        check_image(x)
        if anomaly is None:
            raise ValueError("the builtin detector needs the anomaly map (anomaly=...)")
        if anomaly.x_ano.shape != x.shape:
            raise ValueError(f"anomaly map shape {anomaly.x_ano.shape} differs from image shape {x.shape}")
        if anatomy is not None:
            if tuple(anatomy.shape) != x.shape:
                raise ValueError(f"anatomy shape {anatomy.shape} differs from image shape {x.shape}")
            lungs = anatomy.union(("right lung", "left lung"))
        else:
            lungs = anomaly.edit_region.astype(bool)
        lung_area = int(lungs.sum())
        if lung_area == 0:
            return []
        smooth = masked_blur(anomaly.x_ano, lungs, SMOOTH_FRAC * max(x.shape))
        regions, n = ndi.label((smooth >= self.cfg.builtin_tau_ano) & lungs, structure=np.ones((3, 3)))
        min_area = max(1.0, self.cfg.builtin_min_area_frac * lung_area)
        boxes = []
        for index, sl in enumerate(ndi.find_objects(regions), start=1):
            region = regions[sl] == index
            area = int(region.sum())
            if area < min_area:
                continue
            strength = float(smooth[sl][region].mean()) / self.cfg.builtin_conf_ref
            extent = float(np.sqrt(area / (4.0 * min_area)))
            conf = min(1.0, strength) * min(1.0, extent)
            boxes.append(LesionBox(float(sl[1].start), float(sl[0].start), float(sl[1].stop),
                                   float(sl[0].stop), conf, CLASS_NAME))
        return keep_lesion_classes(boxes)
