"""The generation pipeline: inputs, one study through the stages, local and Ray runners.

``cxrils generate`` (:func:`cxrils.pipeline.runner.generate`) turns image-report
pairs into a dataset; see ``docs/pipeline.md``.
"""

from cxrils.pipeline.runner import RunError, generate
from cxrils.pipeline.study import Pipeline, StudyResult
from cxrils.sources import InputError, StudyInput, detect_input_kind, read_inputs

__all__ = [
    "InputError",
    "Pipeline",
    "RunError",
    "StudyInput",
    "StudyResult",
    "detect_input_kind",
    "generate",
    "read_inputs",
]
