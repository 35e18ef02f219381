"""The numbers embedded in README, docs and model cards are the last benchmark runs'."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

# Not "from conftest import REPO_ROOT": in a whole-suite run "conftest" may be another folder's.
REPO_ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sync_results = _load(REPO_ROOT / "scripts" / "sync_results.py")


def test_embedded_results_match_their_files():
    problems = sync_results.sync(check=True)
    assert problems == [], "\n".join(problems)


def test_check_reports_a_stale_and_a_missing_block(tmp_path, monkeypatch):
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    (results / "bench.md").write_text("Printed by `x`.\n\n| a |\n|---|\n| 2 |\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results: bench -->\n| a |\n|---|\n| 1 |\n<!-- /results -->\n"
                      "<!-- results: gone -->\nold\n<!-- /results -->\n", encoding="utf-8")
    monkeypatch.setattr(sync_results, "ROOT", tmp_path)
    monkeypatch.setattr(sync_results, "RESULTS", results)
    problems = sync_results.sync(check=True)
    assert any("'bench' differs" in p for p in problems)
    assert any("'gone' names missing" in p for p in problems)
    assert "| 1 |" in readme.read_text()  # --check changes nothing
    sync_results.sync(check=False)
    text = readme.read_text()
    assert "| 2 |" in text and "| 1 |" not in text
    assert sync_results.sync(check=True) == [next(p for p in problems if "gone" in p)]


def test_publish_writes_header_and_body(tmp_path, monkeypatch):
    results = _load(REPO_ROOT / "benchmarks" / "results.py")
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "docs" / "results")
    monkeypatch.setattr(results, "uncommitted_code", lambda root: [])
    path = results.publish("demo_x", "| n |\n|---|\n| 3 |\n", command="python benchmarks/demo.py --n 3")
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("Printed by `python benchmarks/demo.py --n 3` on 20")
    assert "CPUs" in first and "cxrils" in first
    # only code makes a header say "+changes", not a results page an earlier benchmark wrote
    assert "+changes" not in first
    assert text.rstrip().endswith("| 3 |")


def test_publish_refuses_uncommitted_code_and_keeps_machine_paths_out(tmp_path, monkeypatch):
    results = _load(REPO_ROOT / "benchmarks" / "results.py")
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "docs" / "results")
    monkeypatch.setattr(results, "uncommitted_code", lambda root: ["src/cxrils/config.py"])
    with pytest.raises(SystemExit, match="code differs from its commit .src/cxrils/config.py."):
        results.publish("demo_y", "| 1 |", command="python benchmarks/demo.py")
    assert not (tmp_path / "docs" / "results" / "demo_y.md").exists()
    root = Path("/srv/checkout/cxrils")
    assert results.portable_command(
        ["benchmarks/x.py", "--data", "/srv/checkout/shared/data", "--candidate", "old=/srv/runs/a.safetensors",
         "--out=/srv/checkout/cxrils/runs/o"], root) == (
        "python benchmarks/x.py --data ../shared/data --candidate old=../../runs/a.safetensors --out=runs/o")
    assert results.RESULT_PAGES.match("docs/results/x.md") and results.RESULT_PAGES.match("README.md")
    assert not results.RESULT_PAGES.match("src/cxrils/config.py") and not results.RESULT_PAGES.match("README.md.bak")


def test_no_results_file_names_a_machine_path():
    for path in sorted((REPO_ROOT / "docs" / "results").glob("*.md")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert not re.search(r"(?<![\w.])/(work|tmp|root|home|srv|mnt)/", first), f"{path.name}: {first}"
