"""The light model shipped in the package (cxrils/weights/light_ils) loads and answers."""

from __future__ import annotations

import json

import numpy as np

from cxrils import templates
from cxrils.models import Segmenter, default_model_dir
from cxrils.models.light.segmenter import WEIGHTS_NAME


def test_shipped_model_loads_and_predicts():
    path = default_model_dir()
    assert path is not None and (path / WEIGHTS_NAME).is_file()
    assert (path / WEIGHTS_NAME).stat().st_size < 8 * 1024 * 1024  # a few MB at most
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "light" and 0 < cfg["tau_presence"] < 1 and 0 < cfg["tau_mask"] < 1
    seg = Segmenter.from_pretrained(path, anatomy=lambda x: None)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(120, 100), dtype=np.uint8)
    pred = seg.predict(x, "Segment the effusion in the left lung base.")
    assert pred.mask.shape == x.shape and pred.mask.dtype == bool
    assert 0.0 <= pred.presence_score <= 1.0
    templates.parse_answer(pred.answer, "basic")
