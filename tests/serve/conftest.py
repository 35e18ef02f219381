"""A small deterministic model for the service tests.

The service is under test here, not a model: ``BrightRegionSegmenter`` is a real
:class:`~cxrils.models.base.Segmenter` whose mask is the brightest 5% of pixels and
whose answer follows the templates, so every response can be checked exactly. It reads
instructions with the light model's reader (lobes, refusals).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cxrils import templates
from cxrils.models.base import Prediction, Segmenter, check_image
from cxrils.models.light.text import InstructionEncoder


class BrightRegionSegmenter(Segmenter):
    model_type = "test-bright"

    @classmethod
    def _load(cls, path: Path, config: dict, **kwargs) -> BrightRegionSegmenter:
        return cls()

    def read_instruction(self, instruction: str) -> str:
        # the light model's reader: Table 2 text, lobes, refusals that list what is accepted
        return InstructionEncoder("structured").read(instruction)

    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        x = check_image(image)
        parsed = templates.parse_instruction(self.read_instruction(instruction))
        mask = x >= np.percentile(x, 95)
        if parsed.instruction_type == "global":
            return Prediction(np.zeros_like(mask), templates.render_answer("global", "negative", parsed.target), 0.1)
        return Prediction(mask, templates.render_answer("basic", "positive"), 0.9)


@pytest.fixture
def segmenter() -> BrightRegionSegmenter:
    return BrightRegionSegmenter()
