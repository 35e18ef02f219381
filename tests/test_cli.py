"""The `cxrils` command line shell."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import cxrils
from cxrils.cli import app

SRC = Path(__file__).resolve().parents[1] / "src"


def test_help_lists_commands() -> None:
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0, res.output
    for name in ("version", "config"):
        assert name in res.output
    for command in app.registered_commands:
        name = command.name or command.callback.__name__.replace("_", "-")
        assert name in res.output
        assert (command.callback.__doc__ or "").strip(), f"command {name} has no help"


def test_version() -> None:
    res = CliRunner().invoke(app, ["version"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == f"cxrils {cxrils.__version__}"
    assert any(line.strip().startswith("numpy ") for line in lines[1:])
    assert any(line.strip().startswith("pydicom ") for line in lines[1:])


def test_python_m_cxrils() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-m", "cxrils", "--help"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "version" in res.stdout and "config" in res.stdout
