"""ROSALIA: the LISA architecture (LLaVA + SAM + [SEG], LoRA) for ILS (paper section 5).

Full-scale use needs local weights (LISA-7B-v1, or LLaVA + SAM ViT-H) and GPUs; the
tests run the exact code path on a tiny randomly initialised configuration on a CPU.
"""

from cxrils.models.rosalia.configuration import RosaliaConfig

__all__ = ["RosaliaConfig"]
