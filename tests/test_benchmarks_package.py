"""The benchmarks are one package (docs/architecture.md, issue 30): every module runs as
``python -m benchmarks.NAME``, imports its peers as ``benchmarks.X`` (no ``sys.path``
edits, no bare ``import results``), takes the harness's ``--publish`` option, and nothing
in ``src/cxrils`` imports them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import cxrils

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO_ROOT / "benchmarks"
SRC = Path(cxrils.__file__).resolve().parent
#: Modules of the package that are helpers of a benchmark, not benchmarks themselves.
HELPERS = {"__init__", "results", "mesh_scoring", "light_validate"}


def _modules() -> list[Path]:
    return sorted(BENCHMARKS.glob("*.py"))


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.append(node.module or "")
    return out


def test_the_package_has_its_benchmarks() -> None:
    names = {p.stem for p in _modules()}
    assert {"__init__", "results", "human_masks", "anatomy", "generate"} <= names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.stem)
def test_a_benchmark_imports_its_peers_through_the_package(path: Path) -> None:
    peers = {p.stem for p in _modules()} - {"__init__"}
    text = path.read_text(encoding="utf-8")
    bare = [m for m in _imports(path) if m.split(".")[0] in peers]
    assert bare == [], f"{path.name}: import these as benchmarks.X: {bare}"
    assert "sys.path" not in text or path.stem == "__init__", f"{path.name} edits sys.path"


@pytest.mark.parametrize("path", [p for p in _modules() if p.stem not in HELPERS], ids=lambda p: p.stem)
def test_every_benchmark_uses_the_harness_parser(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "benchmark_parser(" in text, f"{path.name}: build its options with benchmarks.results.benchmark_parser"
    assert "argparse.ArgumentParser(" not in text, f"{path.name}: a second argument convention"


def test_no_module_of_cxrils_imports_the_benchmarks() -> None:
    found = [
        (p.relative_to(SRC).as_posix(), m)
        for p in SRC.rglob("*.py")
        for m in _imports(p)
        if m == "benchmarks" or m.startswith("benchmarks.")
    ]
    assert found == []


def test_a_benchmark_runs_as_a_module_from_the_repository_root() -> None:
    """``--help`` of one benchmark, in a fresh interpreter, names ``python -m`` and ``--publish``
    (pysbd installs its own top-level ``benchmarks``: the repository's must win from the root)."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.io_bench", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "python -m benchmarks.io_bench" in out.stdout and "--publish NAME" in out.stdout
