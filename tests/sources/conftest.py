"""Fixtures of the corpus reader tests: the folder of one corpus of ``../shared/data``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def corpus(shared_data):
    """``name -> shared_data``, skipping the test with a reason when ``shared_data/name``
    is absent (the readers take the data root)."""

    def need(name: str) -> Path:
        if not (shared_data / name).is_dir():
            pytest.skip(f"../shared/data/{name} not found (public sample data, see its README)")
        return shared_data

    return need
