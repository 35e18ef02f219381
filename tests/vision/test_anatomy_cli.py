"""``cxrils anatomy``: per-image folders, label PNGs at the input size, overlay, JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.training.anatomy_data import split_of
from cxrils.vocab import ANATOMY_LABELS


@pytest.fixture()
def image_folder(shared_data, tmp_path):
    """Two held-out JSRT images and one COVID-19 image, linked (not copied) into a folder."""
    folder = tmp_path / "in"
    folder.mkdir()
    jsrt = [
        p for p in sorted((shared_data / "jsrt_scr" / "images").glob("*.png")) if split_of("jsrt_scr", p.stem) == "test"
    ][:2]
    covid = sorted((shared_data / "covid_ieee8023" / "images").glob("*.png"))[:1]
    for p in jsrt + covid:
        (folder / p.name).symlink_to(p)
    return folder, jsrt + covid


def test_anatomy_folder_outputs(image_folder, shared_data, tmp_path, monkeypatch):
    import cxrils.vision.anatomy.base as base

    calls = []
    real = base.get_segmenter
    monkeypatch.setattr(base, "get_segmenter", lambda *a: calls.append(a) or real(*a))
    folder, sources = image_folder
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["anatomy", str(folder), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(calls) == 1  # the model is built once for the whole folder
    for src in sources:
        sub = out / src.stem
        size = Image.open(src).size
        for label in ANATOMY_LABELS:
            png = sub / (label.replace(" ", "_") + ".png")
            arr = np.asarray(Image.open(png))
            assert Image.open(png).size == size
            assert set(np.unique(arr)) <= {0, 255}
        assert (sub / "right_lung.png").is_file() and (sub / "left_lung_base.png").is_file()
        ov = Image.open(sub / "overlay.png")
        assert ov.size == size and ov.mode == "RGB"
        info = json.loads((sub / "anatomy.json").read_text())
        assert info["provenance"]["backend"] == "builtin" and info["provenance"]["version"]
        assert info["shape"] == [size[1], size[0]]
        assert info["labels"]["heart"]["area_px"] > 0
        if info["ctr"] is not None:
            assert 0.2 < info["ctr"] < 0.8
            assert info["cardiomegaly_negative_allowed"] == (info["ctr"] <= 0.45)
        # both lung conventions (docs/anatomy.md): the visible lungs lie inside the whole ones
        for side in ("right", "left"):
            whole = np.asarray(Image.open(sub / f"{side}_lung.png")) > 0
            visible = np.asarray(Image.open(sub / info["visible"][f"{side} lung"]["file"])) > 0
            assert visible.any() and (visible & whole).sum() >= 0.97 * visible.sum()
            scr = shared_data / "jsrt_scr" / "masks" / f"{side}_lung" / (src.stem + ".png")
            if scr.is_file():  # the SCR radiologists drew the visible lung (JSRT convention)
                ref = np.asarray(Image.open(scr).convert("L").resize(size)) > 127
                dice = 2 * (visible & ref).sum() / (visible.sum() + ref.sum())
                assert dice > 0.9, (src.stem, side, dice)


def test_anatomy_single_file(image_folder, tmp_path):
    _, sources = image_folder
    out = tmp_path / "one"
    res = CliRunner().invoke(app, ["anatomy", str(sources[0]), "-o", str(out), "--backend", "builtin"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [sources[0].stem]


def test_anatomy_errors(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["anatomy", str(tmp_path / "missing.png"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "missing.png" in res.output and "Traceback" not in res.output
    img = tmp_path / "x.png"
    Image.fromarray(np.zeros((32, 32), dtype=np.uint8)).save(img)
    res = runner.invoke(app, ["anatomy", str(img), "-o", str(tmp_path / "o"), "--backend", "cxas"])
    assert res.exit_code == 2 and "backends.cxas_weights" in res.output
    res = runner.invoke(app, ["anatomy", str(img), "-o", str(tmp_path / "o"), "--backend", "nope"])
    assert res.exit_code == 2 and "unknown anatomy backend" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["anatomy", str(empty), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no .png" in res.output
    broken = tmp_path / "bad" / "b.png"
    broken.parent.mkdir()
    broken.write_bytes(b"not a png")
    res = runner.invoke(app, ["anatomy", str(broken.parent), "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "b.png" in res.output
    # one unreadable image among readable ones: the others are written, the exit status is still 1
    Image.fromarray(np.full((128, 128), 128, np.uint8)).save(broken.parent / "a.png")
    res = runner.invoke(app, ["anatomy", str(broken.parent), "-o", str(tmp_path / "o2")])
    assert res.exit_code == 1 and "b.png" in res.output and "1 of 2 images segmented" in res.output
    assert (tmp_path / "o2" / "a" / "anatomy.json").is_file() and not (tmp_path / "o2" / "b").exists()


def test_an_image_that_is_no_chest_radiograph_gets_no_ctr_verdict(tmp_path):
    # a uniform grey square: whatever the builtin network segments there is no frontal
    # chest anatomy, and a CTR outside the plausible range is a failed mask, not a heart size
    from cxrils.config import QCConfig

    img = tmp_path / "flat.png"
    Image.fromarray(np.full((256, 256), 128, np.uint8)).save(img)
    res = CliRunner().invoke(app, ["anatomy", str(img), "-o", str(tmp_path / "o"), "--backend", "builtin"])
    assert res.exit_code == 0, res.output
    info = json.loads((tmp_path / "o" / "flat" / "anatomy.json").read_text())
    assert info["frontal_plausibility"] is not None and "does not look like a frontal chest radiograph" in res.output
    assert info["cardiomegaly_negative_allowed"] is False
    # no plausible CTR there: either none (the note says which mask is empty) or an impossible one
    qc = QCConfig()
    assert info["ctr"] is None or not qc.ctr_plausible_min <= info["ctr"] <= qc.ctr_plausible_max
    assert info["ctr_note"] and (info["ctr"] is None or "not a heart size" in info["ctr_note"])
