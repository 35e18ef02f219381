"""Fixtures of the review tests: a small finalized dataset with grounding files."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from review_data import build_dataset  # noqa: E402


@pytest.fixture(scope="session")
def _built(tmp_path_factory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("review-src") / "ds")


@pytest.fixture
def dataset(_built, tmp_path) -> Path:
    """A fresh copy of the fixture dataset (8 studies), no review yet."""
    out = tmp_path / "ds"
    shutil.copytree(_built, out, ignore=shutil.ignore_patterns(".cxrils-writer.lock"))
    return out
