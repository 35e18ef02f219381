"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo root>/../shared/data``: the public sample data (never committed here).

    Skips the test with a reason when the folder is absent.
    """
    path = (REPO_ROOT / ".." / "shared" / "data").resolve()
    if not path.is_dir():
        pytest.skip(f"../shared/data not found: {path} (public sample data, see its README)")
    return path
