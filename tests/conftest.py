"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/../shared/data`` (the public data of the project), or skip."""
    p = REPO.parent / "shared" / "data"
    if not p.is_dir():
        pytest.skip(f"../shared/data not found: {p}")
    return p
