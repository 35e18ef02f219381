"""Pipeline test fixtures: child processes (workers, Ray, the CLI) can import cxrils
and the fake stages of this folder."""

from __future__ import annotations

import pytest
from pipeline_helpers import subprocess_env


@pytest.fixture(autouse=True)
def _child_pythonpath(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
