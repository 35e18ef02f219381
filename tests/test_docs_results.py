"""The numbers embedded in README, docs and model cards are the last benchmark runs'."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import benchmarks.results as results

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
    readme.write_text(
        "intro\n<!-- results: bench -->\n| a |\n|---|\n| 1 |\n<!-- /results -->\n"
        "<!-- results: gone -->\nold\n<!-- /results -->\n",
        encoding="utf-8",
    )
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
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "docs" / "results")
    monkeypatch.setattr(results, "uncommitted_code", lambda root: [])
    path = results.publish("demo_x", "| n |\n|---|\n| 3 |\n", command="python -m benchmarks.demo --n 3")
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("Printed by `python -m benchmarks.demo --n 3` on 20")
    assert "CPUs" in first and "cxrils" in first
    # only code makes a header say "+changes", not a results page an earlier benchmark wrote
    assert "+changes" not in first
    assert text.rstrip().endswith("| 3 |")


def test_publish_refuses_uncommitted_code_and_keeps_machine_paths_out(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "docs" / "results")
    monkeypatch.setattr(results, "uncommitted_code", lambda root: ["src/cxrils/config.py"])
    with pytest.raises(SystemExit, match="code differs from its commit .src/cxrils/config.py."):
        results.publish("demo_y", "| 1 |", command="python -m benchmarks.demo")
    assert not (tmp_path / "docs" / "results" / "demo_y.md").exists()
    root = Path("/srv/checkout/cxrils")
    assert results.portable_command(
        [
            "-m",
            "benchmarks.x",
            "--data",
            "/srv/checkout/shared/data",
            "--candidate",
            "old=/srv/runs/a.safetensors",
            "--out=/srv/checkout/cxrils/runs/o",
        ],
        root,
    ) == ("python -m benchmarks.x --data ../shared/data --candidate old=../../runs/a.safetensors --out=runs/o")
    assert results.RESULT_PAGES.match("docs/results/x.md") and results.RESULT_PAGES.match("README.md")
    assert not results.RESULT_PAGES.match("src/cxrils/config.py") and not results.RESULT_PAGES.match("README.md.bak")


def test_no_results_file_names_a_machine_path():
    for path in sorted((REPO_ROOT / "docs" / "results").glob("*.md")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert not re.search(r"(?<![\w.])/(work|tmp|root|home|srv|mnt)/", first), f"{path.name}: {first}"


def test_publish_refuses_a_text_naming_a_path_of_this_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "docs" / "results")
    monkeypatch.setattr(results, "uncommitted_code", lambda root: [])
    data = tmp_path / "shared" / "data"
    with pytest.raises(SystemExit, match="names absolute paths of this machine"):
        results.publish("demo_p", f"| images |\n|---|\n| {data}/x.png |", command="python -m benchmarks.demo")
    with pytest.raises(SystemExit, match=re.escape(str(data))):
        results.publish("demo_p", "x", command=f"python -m benchmarks.demo --data {data}")
    assert not (tmp_path / "docs" / "results" / "demo_p.md").exists()
    # a URL path, fractions, units and relative paths are not machine paths
    body = "`POST /v1/segment`, 3/4, 12 µs/char, 5 TFLOP/s, ../shared/data, runs/bench, https://x.org/a/b"
    assert results.machine_paths(body) == []
    assert results.publish("demo_q", body, command="python -m benchmarks.demo").read_text().endswith(body + "\n")
    assert results.machine_paths(f"in ({tmp_path}) and --data={data}") == [str(tmp_path), str(data)]


def test_every_published_page_is_free_of_machine_paths():
    for path in sorted((REPO_ROOT / "docs" / "results").glob("*.md")):
        assert results.machine_paths(path.read_text(encoding="utf-8")) == [], path.name


def test_the_publish_flag_writes_the_named_page_or_its_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(results, "uncommitted_code", lambda root: [])
    monkeypatch.setattr(results, "invocation", lambda argv=None: ["-m", "benchmarks.demo", "--publish", "demo"])
    parser = results.benchmark_parser("demo", data=True, threads=3, page="demo", parts=("speed", "summary"))
    args = parser.parse_args([])
    assert (args.publish, args.data, args.threads) == (None, results.DEFAULT_DATA, 3)
    assert results.DEFAULT_DATA == REPO_ROOT.parent / "shared" / "data"
    assert results.publish_if_asked(args, "| 1 |") == [] and list(tmp_path.iterdir()) == []
    args = parser.parse_args(["--publish", "demo", "--data", "elsewhere"])
    assert args.data == Path("elsewhere")
    assert results.publish_if_asked(args, "| 1 |") == [tmp_path / "demo.md"]
    written = results.publish_if_asked(args, {"speed": "| 2 |", "summary": "| 3 |"})
    assert written == [tmp_path / "demo_speed.md", tmp_path / "demo_summary.md"]
    assert (
        (tmp_path / "demo_summary.md").read_text().startswith("Printed by `python -m benchmarks.demo --publish demo`")
    )
    assert not hasattr(results.benchmark_parser().parse_args([]), "data")


def test_the_header_names_the_module_run_with_python_m(monkeypatch):
    import sys
    import types

    main = types.ModuleType("__main__")
    main.__spec__ = importlib.util.find_spec("benchmarks.results")
    monkeypatch.setitem(sys.modules, "__main__", main)
    argv = [str(REPO_ROOT / "benchmarks" / "results.py"), "--publish", "x"]
    assert results.invocation(argv) == ["-m", "benchmarks.results", "--publish", "x"]
    main.__spec__ = None  # run as a script
    assert results.invocation(argv) == argv


def test_no_results_file_comes_from_an_uncommitted_tree():
    """``publish`` refuses uncommitted code, so no header may name a commit "+changes"."""
    stale = [
        path.name
        for path in sorted((REPO_ROOT / "docs" / "results").glob("*.md"))
        if "+changes" in path.read_text(encoding="utf-8").splitlines()[0]
    ]
    assert stale == [], f"rerun these benchmarks on committed code: {stale}"
