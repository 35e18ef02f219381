"""Fixtures of the evaluation tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_data import standard_records, write_dataset


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A small dataset folder with :func:`standard_records`."""
    return write_dataset(tmp_path / "ds", standard_records())
