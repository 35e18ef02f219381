"""ROSALIA: the LISA architecture (LLaVA-v1 + SAM + [SEG], LoRA) for ILS (paper section 5).

Loads the released ``LISAForCausalLM`` checkpoints (checkone/ROSALIA-7B-v1,
xinlai/LISA-7B-v1) from local folders, with the CLIP tower from its own folder
(docs/rosalia.md). Full-scale use needs GPUs; the tests run the same code path on tiny
models written in the released layout, on a CPU.
"""

from cxrils.models.rosalia.configuration import RosaliaConfig

__all__ = ["RosaliaConfig"]
