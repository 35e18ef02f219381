"""``cxrils generate`` and ``cxrils demo`` on the command line."""

from __future__ import annotations

import json

from pipeline_helpers import FAKE, X_HAT, make_input
from typer.testing import CliRunner

from cxrils.cli import app

runner = CliRunner()


def test_generate_prints_and_writes_summary(tmp_path):
    pairs = make_input(tmp_path / "in", n=5)
    out = tmp_path / "ds"
    res = runner.invoke(
        app,
        ["generate", str(pairs), "-o", str(out), "--stages", FAKE, "--limit", "7", "--no-progress", "--set", X_HAT[0]],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "generate_summary.json").read_text())
    assert summary["studies"]["total"] == 7
    assert f"images: 7  done: {summary['studies']['done']}" in res.output
    assert "excluded error:image: 1" in res.output
    assert str(out / "generate_summary.json") in res.output


def test_generate_warns_when_no_image_is_processed(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("image_path,report\n")
    res = runner.invoke(app, ["generate", str(empty), "-o", str(tmp_path / "ds"), "--stages", FAKE, "--no-progress"])
    assert res.exit_code == 0, res.output
    assert f"warning: no image was processed ({empty} lists none)" in res.output
    pairs = make_input(tmp_path / "in", n=2, bad=False)
    res = runner.invoke(
        app, ["generate", str(pairs), "-o", str(tmp_path / "ds2"), "--stages", FAKE, "--no-progress", "--limit", "0"]
    )
    assert res.exit_code == 0 and "warning: no image was processed (--limit 0 takes none)" in res.output
    res = runner.invoke(
        app, ["generate", str(pairs), "-o", str(tmp_path / "ds3"), "--stages", FAKE, "--no-progress", "--limit", "1"]
    )
    assert res.exit_code == 0 and "warning" not in res.output


def test_generate_user_errors_exit_2_without_traceback(tmp_path):
    res = runner.invoke(app, ["generate", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 2 and "missing.csv: input not found" in res.output
    bad = tmp_path / "bad.csv"
    bad.write_text("path,text\na.png,hello\n")
    res = runner.invoke(app, ["generate", str(bad), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 2 and "needs 'image_path' and 'report'" in res.output
    pairs = make_input(tmp_path / "in", n=2, bad=False)
    res = runner.invoke(app, ["generate", str(pairs), "-o", str(tmp_path / "ds"), "--set", "grounding.nope=1"])
    assert res.exit_code == 2 and "unknown config key grounding.nope" in res.output
    res = runner.invoke(
        app, ["generate", str(pairs), "-o", str(tmp_path / "ds"), "--runner", "spark", "--stages", FAKE]
    )
    assert res.exit_code == 2 and "unknown runner 'spark'" in res.output
    for r in (res,):
        assert "Traceback" not in r.output


def test_demo_without_data_says_what_to_get(tmp_path):
    res = runner.invoke(app, ["demo", "--data", str(tmp_path / "nodata"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert f"{tmp_path / 'nodata' / 'pairs' / 'all_pairs.csv'} not found" in res.output
    for needed in (
        "iu_xray/images",
        "covid_ieee8023/images",
        "torchxrayvision==1.5.7",
        "covid-chestxray-dataset",
        "image_path, report",
    ):
        assert needed in res.output
    assert not (tmp_path / "out").exists()
