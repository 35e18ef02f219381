"""Fixtures of the dataset tests: records from the hand-built groundings of
tests/instructions/ils_studies.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "instructions"))

from ils_studies import multi_lesion_study, no_cardiomegaly_study  # noqa: E402

from cxrils.config import Config  # noqa: E402
from cxrils.instructions import generate_records  # noqa: E402


def study_records(image_id: str, split: str, variant: int):
    """(x, records) of one synthetic study: a uint8 (64, 64) gradient image and its records."""
    g = multi_lesion_study() if variant % 2 == 0 else no_cardiomegaly_study(0.40)
    g.image_id, g.study_id = image_id, f"s-{image_id}"
    x = ((np.arange(64)[:, None] + np.arange(64)[None, :] * 2 + variant * 7) % 256).astype(np.uint8)
    return x, generate_records(g, split=split, patient_id=f"p-{image_id}", image_path="", cfg=Config())


@pytest.fixture
def studies():
    """Six studies over the three splits: image_id -> (x, records)."""
    splits = ["train", "train", "train", "validate", "test", "train"]
    return {f"im{i}": study_records(f"im{i}", s, i) for i, s in enumerate(splits)}
