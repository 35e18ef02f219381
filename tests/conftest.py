"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/../shared/data`` (the public data, never copied into the repo), or skip."""
    path = REPO.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"../shared/data not found: {path} (see README: public data for tests)")
    return path
