"""Every feature whose optional dependency is missing fails with ONE line naming the
extra and the exact command that installs it (cxrils.extras); the installer's default
extras are the ones the code declares."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cxrils import extras
from cxrils.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def _one_line_error(res, extra: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output
    assert f"'{extra}' extra" in lines[0]
    assert f"{sys.executable} -m pip install 'cxrils[{extra}]'" in lines[0]
    return lines[0]


def test_serve_without_the_serve_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    line = _one_line_error(CliRunner().invoke(app, ["serve"]), "serve")
    assert line.startswith("error: cxrils serve needs")


def test_ray_runner_without_ray(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    csv = tmp_path / "pairs.csv"
    csv.write_text("image_path,report\nx.png,FINDINGS: normal.\n")
    res = CliRunner().invoke(
        app, ["generate", str(csv), "-o", str(tmp_path / "ds"), "--runner", "ray", "--no-progress"]
    )
    _one_line_error(res, "ray")
    assert not (tmp_path / "ds").exists()  # refused before anything is written


def test_rosalia_training_without_the_models_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "peft", None)
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "manifest.json").write_text("{}")
    res = CliRunner().invoke(
        app, ["train", "--model", "rosalia", "--dataset", str(tmp_path / "ds"), "-o", str(tmp_path / "run")]
    )
    _one_line_error(res, "models")


def test_a_lisa_checkpoint_without_the_models_extra(monkeypatch, tmp_path):
    # docs audit (stop 59): predict and serve with a LISA-format folder printed a traceback
    monkeypatch.setitem(sys.modules, "transformers", None)
    folder = tmp_path / "lisa"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": ["LISAForCausalLM"], "model_type": "llava"}')
    image = tmp_path / "x.png"
    from PIL import Image

    Image.new("L", (256, 256), 128).save(image)
    res = CliRunner().invoke(app, ["predict", "--model", str(folder), str(image), "Segment the opacity.", "-o", "p"])
    line = _one_line_error(res, "models")
    assert "ROSALIA / LISA checkpoints" in line


def test_a_local_llm_without_the_llm_extra(monkeypatch, tmp_path):
    # docs audit (stop 59): "error: No module named 'transformers'" named no extra
    monkeypatch.setitem(sys.modules, "transformers", None)
    (tmp_path / "llm").mkdir()
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "s1.txt").write_text("FINDINGS: Small left effusion.")
    res = CliRunner().invoke(
        app,
        ["structure", str(tmp_path / "r"), "-o", str(tmp_path / "out.jsonl"), "--structurer", "llm"]
        + ["--set", f"backends.llm_model_path={tmp_path / 'llm'}"],
    )
    _one_line_error(res, "llm")


def test_minilm_encoder_without_the_models_extra(monkeypatch):
    from cxrils.models.light.text import InstructionEncoder, InstructionError

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(InstructionError, match=r"'models' extra .* pip install 'cxrils\[models\]'"):
        InstructionEncoder("minilm").encode(["Segment the edema."])


def test_require_names_the_first_missing_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "multipart", None)
    with pytest.raises(extras.MissingExtraError) as err:
        extras.require_extra("serve", "the page")
    assert err.value.module == "multipart" and err.value.extra == "serve"
    assert str(err.value).count("\n") == 0
    assert extras.missing_module(["json", "no_such_module_xyz"]) == "no_such_module_xyz"
    assert extras.missing_module(["json"]) is None


def test_extras_match_pyproject_and_the_installer():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    for extra in extras.EXTRA_MODULES:
        assert extra in declared, f"cxrils.extras names an extra {extra!r} that pyproject.toml lacks"
    deps = " ".join(declared["dicom"])
    assert "highdicom" in deps and "pylibjpeg" in deps
    for name in ("fastapi", "uvicorn", "python-multipart"):
        assert name in " ".join(declared["serve"])
    script = (REPO_ROOT / "scripts" / "install.sh").read_text()
    m = re.search(r'^default_extras="([^"]+)"', script, re.M)
    assert m and tuple(m.group(1).split(",")) == extras.DEFAULT_EXTRAS
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    ci_extras = re.search(r'install\.sh \.venv "([^"]+)"', ci).group(1).split(",")
    assert set(declared) <= set(ci_extras), "CI must install every extra"


def test_missing_upstream_package_skips_locally_and_fails_in_ci(monkeypatch):
    """The test_upstream_* tests skip where the upstream extra is absent, but .ci/run sets
    CXRILS_REQUIRE_UPSTREAM=1, under which a missing package fails them instead."""
    from upstream_code import require

    monkeypatch.delenv("CXRILS_REQUIRE_UPSTREAM", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_upstream_package not installed"):
        require("no_such_upstream_package", "no_such_upstream_package")
    monkeypatch.setenv("CXRILS_REQUIRE_UPSTREAM", "1")
    with pytest.raises(pytest.fail.Exception, match="bash scripts/install.sh .venv upstream"):
        require("no_such_upstream_package", "no_such_upstream_package")
    assert "CXRILS_REQUIRE_UPSTREAM=1" in (REPO_ROOT / ".ci" / "run").read_text()


def test_missing_browser_skips_locally_and_fails_in_ci(monkeypatch):
    """The browser tests skip where chromium is absent, but .ci/run sets
    CXRILS_REQUIRE_BROWSER=1, under which a missing browser fails them instead."""
    import shutil

    from browser import chromium_executable

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CXRILS_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium not installed"):
        chromium_executable()
    monkeypatch.setenv("CXRILS_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="chromium not installed"):
        chromium_executable()
    assert "CXRILS_REQUIRE_BROWSER=1" in (REPO_ROOT / ".ci" / "run").read_text()


def test_ci_runs_the_readme_test_command_verbatim():
    """.ci/run's last line is the README's second first-line command (install the test
    extras, run scripts/test.sh), so what CI checks is what a new user runs."""
    readme_lines = (REPO_ROOT / "README.md").read_text().split("```bash\n", 1)[1].splitlines()
    test_command = readme_lines[1].split("    #")[0].strip()
    assert test_command.endswith("bash scripts/test.sh")
    ci_lines = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert ci_lines[-1] == test_command
