"""``cxrils ground`` end to end on a synthetic case. The anatomy backend is replaced by
a hand-built geometric segmenter and the detector by a box on the synthetic lesion (the
learned builtin models are trained on radiographs and do not respond to a flat
synthetic rectangle; they are scored on human labels in tests/vision and
benchmarks/human_masks.py). The report, anomaly (the brightness atlas, which does) and
grounding stages run for real."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.types import AnatomyMasks, LesionBox
from cxrils.vocab import ANATOMY_LABELS, LABEL_SIDE, LEFT_ZONES, RIGHT_ZONES

N = 128
ROWS = {"apical": (16, 30), "upper": (30, 52), "mid": (52, 76), "base": (76, 112)}
COLS = {"right": (10, 58), "left": (70, 118)}  # patient right = image left


def rect(r, c):
    m = np.zeros((N, N), bool)
    m[r[0] : r[1], c[0] : c[1]] = True
    return m


class GeometricSegmenter:
    name, version = "geometric-test", "0"

    def segment(self, x):
        masks = {f"{s} lung": rect((16, 112), COLS[s]) for s in COLS}
        for zones, side in ((RIGHT_ZONES, "right"), (LEFT_ZONES, "left")):
            for zone, rows in zip(zones, ROWS.values()):
                masks[zone] = rect(rows, COLS[side])
        upper, lower = (16, 52), (76, 112)
        masks["lung upper lobe right"] = rect(upper, COLS["right"])
        masks["lung middle lobe right"] = rect((52, 76), COLS["right"])
        masks["lung lower lobe right"] = rect(lower, COLS["right"])
        masks["lung upper lobe left"] = rect((16, 70), COLS["left"])
        masks["lung lower lobe left"] = rect((70, 112), COLS["left"])
        masks["heart"] = rect((70, 105), (46, 82))  # CTR 36/108 = 0.33: a plausible frontal view
        assert set(masks) == set(ANATOMY_LABELS) and all(name in masks for name in LABEL_SIDE)
        return AnatomyMasks(masks=masks, shape=x.shape, backend=self.name, version=self.version)


LESION_BOX = LesionBox(14, 82, 56, 110, 0.9, "Consolidation")  # x0, y0, x1, y1 of the synthetic lesion


class LesionBoxDetector:
    name, version = "box-test", "0"

    def detect(self, x, **kwargs):
        return [LESION_BOX]

    def detect_batch(self, xs, **kwargs):
        return [self.detect(x) for x in xs]


@pytest.fixture()
def case(tmp_path, monkeypatch):
    import cxrils.vision.anatomy as anatomy
    import cxrils.vision.detection as detection

    monkeypatch.setattr(anatomy, "get_segmenter", lambda name, cfg: GeometricSegmenter())
    monkeypatch.setattr(detection, "get_detector", lambda name, cfg: LesionBoxDetector())
    x = np.full((N, N), 175, np.uint8)
    seg = GeometricSegmenter().segment(x)
    x[seg.union(("right lung", "left lung"))] = 55
    x[82:110, 14:56] = 205  # dense consolidation in the patient-right lower lobe (image left)
    path = tmp_path / "case.png"
    Image.fromarray(x).save(path)
    return path


@pytest.mark.slow
def test_ground_writes_all_outputs(case, tmp_path):
    out = tmp_path / "out"
    report = "FINDINGS: Right lower lobe consolidation. No pleural effusion."
    res = CliRunner().invoke(app, ["ground", str(case), report, "-o", str(out), "--set", "backends.anomaly=atlas"])
    assert res.exit_code == 0, res.output
    for name in (
        "x_hat.png",
        "x_ano.png",
        "overlay_anatomy.png",
        "overlay_anomaly.png",
        "overlay_boxes.png",
        "overlay_masks.png",
        "grounding.json",
    ):
        assert (out / name).is_file(), name
    d = json.loads((out / "grounding.json").read_text())
    # the image's metadata say their frame (pixel spacing of the loaded, display-frame image)
    assert d["image"]["pixel_spacing_frame"] == "display" and "display_ops" not in d["image"]
    assert d["frame"] == "source" and isinstance(d["display_ops"], list)
    cons = [f for f in d["findings"] if f["lesion_type"] == "consolidation"]
    assert len(cons) == 1 and cons[0]["mask_file"], d["findings"]
    assert cons[0]["grounded"] and set(cons[0]["grounded"]) <= set(cons[0]["reported"])
    assert all(LABEL_SIDE[label] == "right" for label in cons[0]["grounded"])
    kept = [b for b in cons[0]["boxes"] if b["kept"]]
    assert kept and {"c1_iou_anatomy", "c2_confidence", "c3_signal", "c4_iou_right_lung"} <= set(kept[0])
    mask = np.asarray(Image.open(out / cons[0]["mask_file"]))
    assert set(np.unique(mask)) == {0, 255} and mask[90:100, 25:45].all()
    assert not mask[:, 64:].any()
    eff = [f for f in d["findings"] if f["lesion_type"] == "effusion"]
    assert eff and eff[0]["mask_file"] is None and eff[0]["finding"]["presence"] == "negative"
    # the effusion is absent: only the consolidation's locations are occupied
    assert "left lung" in d["empty_locations"] and "right lung" not in d["empty_locations"]
    x_ano = np.asarray(Image.open(out / "x_ano.png"))
    assert x_ano.shape == (N, N) and x_ano[95, 35] > 0 and x_ano[30, 90] == 0
    assert np.asarray(Image.open(out / "overlay_boxes.png")).shape == (N, N, 3)
    # a reported lesion with no mask: the reason is printed, not only written to grounding.json
    res = CliRunner().invoke(
        app,
        ["ground", str(case), "FINDINGS: Left upper lobe atelectasis.", "-o", str(tmp_path / "o2")]
        + ["--set", "backends.anomaly=atlas"],
    )
    assert res.exit_code == 0, res.output
    reason = json.loads((tmp_path / "o2" / "grounding.json").read_text())["findings"][0]["drop_reason"]
    assert reason and f"F1 atelectasis: not grounded: {reason}" in res.output
    # rerun into the first folder with a report grounding nothing: the old lesion mask goes,
    # a file of the user's named like one stays
    (out / "lesion_notes.png").write_bytes(b"the user's")
    res = CliRunner().invoke(
        app, ["ground", str(case), "FINDINGS: No effusion.", "-o", str(out), "--set", "backends.anomaly=atlas"]
    )
    assert res.exit_code == 0, res.output
    assert not (out / cons[0]["mask_file"]).exists() and (out / "lesion_notes.png").is_file()


def test_ground_reports_user_errors(case, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["ground", str(tmp_path / "missing.png"), "text", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "missing.png" in res.output
    res = runner.invoke(app, ["ground", str(case), "  ", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "empty" in res.output
    # a mistyped report path is not taken for the report's text
    res = runner.invoke(app, ["ground", str(case), str(tmp_path / "nope.txt"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no such report file" in res.output
    res = runner.invoke(app, ["ground", str(case), str(tmp_path / "r1"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no such report file" in res.output  # its folder exists
    res = runner.invoke(app, ["ground", str(case), "text", "-o", str(tmp_path / "o"), "--set", "grounding.nope=1"])
    assert res.exit_code == 2 and "grounding.nope" in res.output
    res = runner.invoke(
        app, ["ground", str(case), "Small left effusion.", "-o", str(tmp_path / "o"), "--view", "lateral"]
    )
    assert res.exit_code == 1 and "view_not_frontal: LATERAL" in res.output
    assert not (tmp_path / "o" / "grounding.json").exists()
    long_report = "Small left pleural effusion without pneumothorax; " * 8  # longer than a file name may be
    res = runner.invoke(app, ["ground", str(case), long_report, "-o", str(tmp_path / "long")])
    assert res.exit_code == 0 and res.exception is None, res.output


def test_ground_takes_short_and_long_report_text_as_text():
    from cxrils.cli.ground import _missing_report_path

    assert not _missing_report_path("N/A") and not _missing_report_path("Normal.")
    assert not _missing_report_path("Small left effusion.")
    assert _missing_report_path("report.txt")
    long_report = "No acute cardiopulmonary process; " * 12  # longer than a file name may be
    assert not _missing_report_path(long_report)


@pytest.mark.slow
@pytest.mark.needs_data
def test_ground_real_image_with_builtin_backends(shared_data, tmp_path):
    """Every real backend (io, rules report, builtin anatomy/anomaly/detector) on a
    COVID-19 image with bilateral opacity (expert extent score 6.0 of 8). (The image of
    extent 7.7 used before, a whited-out chest, is now excluded by the frontal
    plausibility QC: its heart is hidden, the measured CTR falls below 0.3.)"""
    image = shared_data / "covid_ieee8023" / "images" / "01E392EE-69F9-4E33-BFCE-E5C968654078.png"
    if not image.is_file():
        pytest.skip(f"{image} not found")
    report = "FINDINGS: Bilateral consolidation in both lower lobes. Heart size is enlarged."
    res = CliRunner().invoke(app, ["ground", str(image), report, "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    d = json.loads((tmp_path / "grounding.json").read_text())
    assert d["excluded"] is None and d["ctr"] is not None and 0.2 < d["ctr"] < 0.8
    types = {f["lesion_type"]: f for f in d["findings"]}
    assert {"consolidation", "cardiomegaly"} <= set(types)
    assert types["cardiomegaly"]["mask_file"]
    for f in d["findings"]:
        assert set(f["grounded"]) <= set(f["reported"]) | {"heart"}
        for b in f["boxes"]:
            assert {"c1", "c2", "c3", "c4", "kept", "failed"} <= set(b)
            assert b["kept"] == (b["c1"] and b["c2"] and b["c3"] and b["c4"])
        if f["mask_file"]:
            assert np.asarray(Image.open(tmp_path / f["mask_file"])).max() == 255
