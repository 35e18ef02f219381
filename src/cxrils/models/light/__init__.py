"""The light ILS model: a FiLM-conditioned MONAI U-Net with a presence head and
template answers, trainable on a CPU (see docs/models.md)."""

from cxrils.models.light.config import LightConfig
from cxrils.models.light.segmenter import LightSegmenter

__all__ = ["LightConfig", "LightSegmenter"]
