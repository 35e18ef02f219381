"""Instruction-answer generation (paper section 3.2, Table 2, Appendix C).

``generate_records(grounding, split=..., patient_id=..., image_path=..., cfg=...)``
turns one grounded image into dataset rows; ``paraphrase_records`` is the optional
persona paraphrasing of Appendix C.3. See ``docs/instructions.md``.
"""

from cxrils.instructions.generate import (
    OPACITY_FAMILY,
    InstructionError,
    generate_records,
    lesion_type_of,
    mentioned_types,
    record_seed,
)
from cxrils.instructions.paraphrase import PERSONAS, ParaphraseError, paraphrase_instruction, paraphrase_records

__all__ = [
    "OPACITY_FAMILY",
    "InstructionError",
    "generate_records",
    "lesion_type_of",
    "mentioned_types",
    "record_seed",
    "PERSONAS",
    "ParaphraseError",
    "paraphrase_instruction",
    "paraphrase_records",
]
