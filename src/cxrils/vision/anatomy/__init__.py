"""Anatomy stage: lungs, heart, lung zones and lobes, cardiothoracic ratio.

``get_segmenter(name, cfg)`` builds a backend (``builtin``, ``cxas``, ``hybridgnet``)
whose ``.segment(x)`` returns :class:`cxrils.types.AnatomyMasks` with every label of
:data:`cxrils.vocab.ANATOMY_LABELS` at the input's resolution. "right"/"left" are the
patient's sides: the patient's right lung is on the image's left on a frontal image.
Paper sources: section 3.1 step 2 (HybridGNet lungs/heart, CXAS zones/lobes),
Appendix D.2 (cross-check), Appendix D.3 (CTR rule); the frontal-view plausibility
check is ours.
"""

from cxrils.vision.anatomy.base import AnatomyBackendError, AnatomySegmenter, get_segmenter
from cxrils.vision.anatomy.measures import cardiothoracic_ratio, cross_check, frontal_plausibility, implausible_ctr
from cxrils.vision.anatomy.regions import lung_regions

__all__ = [
    "AnatomyBackendError",
    "AnatomySegmenter",
    "get_segmenter",
    "cardiothoracic_ratio",
    "cross_check",
    "frontal_plausibility",
    "implausible_ctr",
    "lung_regions",
]
