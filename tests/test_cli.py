"""The `cxrils` command line shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
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
    res = subprocess.run(
        [sys.executable, "-m", "cxrils", "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "version" in res.stdout and "config" in res.stdout


def test_image_info_command(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    arr = np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000
    Image.fromarray(arr).save(tmp_path / "a.png")
    out = tmp_path / "sub" / "a8.png"
    res = CliRunner().invoke(app, ["image-info", str(tmp_path / "a.png"), "--save", str(out)])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["shape"] == [8, 8] and info["bits_stored"] == 16 and info["saved"] == str(out)
    saved = np.asarray(Image.open(out))
    # 16-bit gray is scaled by its container's range (docs/io.md): 63000 -> round(63000 * 255 / 65535)
    assert saved.dtype == np.uint8 and saved.min() == 0 and saved.max() == round(63000 * 255 / 65535)
    bad = tmp_path / "bad.png"
    bad.write_text("nope")
    res = CliRunner().invoke(app, ["image-info", str(bad)])
    assert res.exit_code == 2
    assert "bad.png" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["image-info", str(tmp_path / "a.png"), "--save", str(tmp_path / "a8.jpg")])
    assert res.exit_code == 2 and "ending in .png" in res.output and not (tmp_path / "a8.jpg").exists()


def test_train_help_lists_the_training_settings() -> None:
    import dataclasses

    from cxrils.models.light.config import LightConfig

    res = CliRunner().invoke(app, ["train", "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    for option in ("--steps", "--batch-size", "--lr", "--seed", "--threads", "--set"):
        assert option in res.output
    text = " ".join(res.output.split())
    for f in dataclasses.fields(LightConfig):
        if f.init:
            assert f"{f.name}=" in text, f.name
    assert "steps=600" in text and "text_encoder=structured" in text


def test_train_options_become_settings(tmp_path, monkeypatch) -> None:
    from cxrils.cli import models as models_cli

    seen = {}

    def fake_trainer(dataset, out, overrides, **kwargs):
        seen.update(overrides)
        return {"steps": int(overrides.get("steps", 0)), "train_seconds": 0.0}

    monkeypatch.setitem(models_cli.TRAINERS, "light", lambda: fake_trainer)
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "manifest.json").write_text("{}")
    args = ["train", "--dataset", str(tmp_path / "ds"), "-o", str(tmp_path / "run")]
    res = CliRunner().invoke(app, args + ["--steps", "7", "--batch-size", "8", "--lr", "0.01", "--set", "seed=3"])
    assert res.exit_code == 0, res.output
    assert seen == {"steps": "7", "batch_size": "8", "lr": "0.01", "seed": "3"}
    res = CliRunner().invoke(app, args + ["--steps", "7", "--set", "steps=9"])
    assert res.exit_code == 2 and "contradicts" in res.output
    # a new user's trial (stop 62): -o the dataset's own folder wrote the weights into it
    seen.clear()
    res = CliRunner().invoke(app, ["train", "--dataset", str(tmp_path / "ds"), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 2 and "is a cxrils dataset folder" in res.output and not seen


def test_an_interrupted_training_says_what_is_kept(tmp_path, monkeypatch) -> None:
    # a new user's trial (stop 62): Ctrl-C exited 130 without a word
    from cxrils.cli import models as models_cli

    def interrupted_trainer(dataset, out, overrides, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setitem(models_cli.TRAINERS, "light", lambda: interrupted_trainer)
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "manifest.json").write_text("{}")
    res = CliRunner().invoke(app, ["train", "--dataset", str(tmp_path / "ds"), "-o", str(tmp_path / "run")])
    assert res.exit_code == 130
    assert "interrupted: the last checkpoint is kept; rerun the same command to go on" in res.output


def test_log_lines_never_share_a_progress_bar_line(tmp_path):
    """A log line written while a tqdm bar is shown starts its own line (cxrils.cli sends
    logging through tqdm.write), in a real process with the real stderr."""
    import subprocess
    import sys

    code = (
        "import logging, sys, typer\n"
        "from tqdm import tqdm\n"
        "from cxrils.cli import app\n"
        "@app.command('bar-and-log')\n"
        "def bar_and_log():\n"
        "    bar = tqdm(total=2, desc='work', file=sys.stderr)\n"
        "    logging.getLogger('cxrils.test').info('HELLO from the log')\n"
        "    bar.update(2)\n"
        "    bar.close()\n"
        "app(['bar-and-log'])\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "HELLO from the log" in res.stderr, res.stderr
    segments = [seg for line in res.stderr.splitlines() for seg in line.split("\r")]
    hello = [seg for seg in segments if "HELLO" in seg]
    assert len(hello) == 1 and "work:" not in hello[0] and "it/s" not in hello[0], repr(res.stderr)


def test_next_step_hints_use_the_command_as_typed(monkeypatch):
    import sys

    from cxrils.cli.generate import invoked_as

    monkeypatch.setattr(sys, "argv", [".venv/bin/cxrils", "demo"])
    assert invoked_as() == ".venv/bin/cxrils"
    monkeypatch.setattr(sys, "argv", ["/x/cxrils/__main__.py", "demo"])
    assert invoked_as() == "python -m cxrils"


@pytest.mark.parametrize(
    "option,value", [("--port", "99999"), ("--port", "0"), ("--max-upload-mb", "-1"), ("--max-instruction-chars", "0")]
)
def test_serve_refuses_impossible_options_before_starting(option, value):
    res = CliRunner().invoke(app, ["serve", option, value])
    assert res.exit_code == 2 and option in res.output and "Traceback" not in res.output


def test_predict_refuses_an_image_too_small_to_be_a_radiograph(tmp_path, monkeypatch):
    # the service's rule (tests/serve/test_api.py): both sides need MIN_IMAGE_SIDE pixels
    from PIL import Image

    from cxrils.io.base import MIN_IMAGE_SIDE
    from cxrils.models.base import Segmenter

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the image was checked")

    monkeypatch.setattr(Segmenter, "from_pretrained", no_model)

    assert MIN_IMAGE_SIDE == 32
    for name, shape in (("dot.png", (1, 1)), ("strip.png", (31, 400))):
        path = tmp_path / name
        Image.fromarray(np.full(shape, 128, np.uint8)).save(path)
        out = tmp_path / f"out_{path.stem}"
        res = CliRunner().invoke(app, ["predict", str(path), "Segment the opacity.", "-o", str(out)])
        assert res.exit_code == 2, res.output
        assert str(path) in res.output and f"{shape[1]} x {shape[0]} pixels" in res.output
        assert "at least 32 on each side" in res.output and not out.exists()


def test_threads_below_one_are_refused_by_the_option_check(tmp_path):
    """``--threads 0`` reached ``torch.set_num_threads`` and ended in a traceback (a new user's trial)."""
    from typer.testing import CliRunner

    from cxrils.cli import app

    for args in (
        ["predict", str(tmp_path / "x.png"), "Segment the opacity.", "-o", str(tmp_path / "o"), "--threads", "0"],
        ["train-anatomy", "--threads", "0"],
        ["train-detector", "--threads", "-1"],
    ):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2 and "threads" in res.output and "Traceback" not in res.output, (args, res.output)


def test_wrong_kinds_of_paths_are_named(tmp_path):
    """A folder where a file goes, or a file where a folder goes, is named as such (a new
    user's trial: the messages said "not found", or printed every table first)."""
    from typer.testing import CliRunner

    from cxrils.cli import app
    from cxrils.evaluation.io import EvaluationError, dataset_shards
    from cxrils.models.base import check_instruction

    afile = tmp_path / "README.md"
    afile.write_text("x")
    with pytest.raises(EvaluationError, match="is a file, not a dataset folder"):
        dataset_shards(afile)
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "ds"), "--html", str(tmp_path)])
    assert res.exit_code == 2 and "is a folder; --html names the HTML file" in res.output
    common = ["import-mimic-ils", "--images", str(tmp_path), "--masks", str(tmp_path), "-o", str(tmp_path / "o")]
    res = CliRunner().invoke(app, [*common, "--json", str(tmp_path)])
    assert res.exit_code == 2 and "is a folder, not a file" in res.output
    res = CliRunner().invoke(app, [*common, "--json", str(afile), "--max-side", "10"])
    assert res.exit_code == 2 and "at least 32 px" in res.output
    with pytest.raises(ValueError, match="instruction must be a str, got NoneType"):
        check_instruction(None)
    assert check_instruction("Segment the opacity.") == "Segment the opacity."
