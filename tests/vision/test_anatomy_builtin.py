"""The builtin backend with the shipped weights on real JSRT and COVID-QU-Ex images (held-out split)."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import Config
from cxrils.training.anatomy_data import read_gray, split_both_lungs, split_of
from cxrils.vision.anatomy import AnatomyBackendError, cardiothoracic_ratio, get_segmenter
from cxrils.vision.anatomy.builtin import BuiltinSegmenter
from cxrils.vocab import ANATOMY_LABELS


def _dice(a, b):
    return 2 * (a & b).sum() / (a.sum() + b.sum())


@pytest.fixture(scope="module")
def segmenter():
    return get_segmenter("builtin", Config())


@pytest.fixture(scope="module")
def jsrt_test_image(shared_data):
    root = shared_data / "jsrt_scr"
    iid = next(p.stem for p in sorted((root / "images").glob("*.png")) if split_of("jsrt_scr", p.stem) == "test")
    masks = {n: read_gray(root / "masks" / n / f"{iid}.png") > 127 for n in ("right_lung", "left_lung", "heart")}
    return read_gray(root / "images" / f"{iid}.png"), masks


def test_patient_right_lung_is_on_image_left(segmenter, jsrt_test_image):
    x, ref = jsrt_test_image
    whole = segmenter.segment(x)
    assert set(whole.masks) == set(ANATOMY_LABELS) and whole.shape == x.shape
    m = whole.organs()  # SCR draws the visible lungs
    w = x.shape[1]
    right_col = np.nonzero(m["right lung"])[1].mean()
    left_col = np.nonzero(m["left lung"])[1].mean()
    assert right_col < w / 2 < left_col
    # the reference agrees ("right" in SCR mask names is the patient's right)
    assert np.nonzero(ref["right_lung"])[1].mean() < w / 2
    # the heart lies mostly on the patient's left, i.e. right of the thoracic midline
    cols = np.flatnonzero((m["right lung"] | m["left lung"]).any(axis=0))
    assert np.nonzero(m["heart"])[1].mean() > (cols[0] + cols[-1]) / 2
    assert _dice(m["right lung"], ref["right_lung"]) > 0.9
    assert _dice(m["left lung"], ref["left_lung"]) > 0.9
    assert _dice(m["heart"], ref["heart"]) > 0.8
    assert 0.3 < cardiothoracic_ratio(m) < 0.7


def test_held_back_covid_qu_ex_lungs(segmenter, shared_data):
    """The first 10 held-back COVID-QU-Ex images (256 x 256, their own lung masks cut into
    the patient's sides): lungs on the right sides and a mean Dice above 0.9."""
    root = shared_data / "covid_qu_ex"
    if not root.is_dir():
        pytest.skip("../shared/data/covid_qu_ex not found")
    ids = sorted(p.stem for p in (root / "images").glob("*.png") if split_of("covid_qu_ex", p.stem) == "test")[:10]
    scores = []
    for iid in ids:
        m = segmenter.segment(read_gray(root / "images" / f"{iid}.png")).organs()  # visible lungs, as COVID-QU-Ex's
        right, left = split_both_lungs(read_gray(root / "lung_masks" / f"{iid}.png") > 127)
        assert np.nonzero(m["right lung"])[1].mean() < 128 < np.nonzero(m["left lung"])[1].mean()
        scores.append(_dice(m["right lung"] | m["left lung"], right | left))
        scores.append(_dice(m["left lung"], left))
    assert len(ids) == 10 and np.mean(scores) > 0.9


def test_output_at_input_size_for_non_square_image(segmenter, jsrt_test_image):
    x, ref = jsrt_test_image
    crop = np.ascontiguousarray(x[40:, 30:470])  # (472, 440)
    m = segmenter.segment(crop)
    assert m.shape == crop.shape
    assert all(v.shape == crop.shape and v.dtype == bool for v in m.masks.values())
    assert all(v.shape == crop.shape and v.dtype == bool for v in m.visible.values())
    assert _dice(m.organs()["right lung"], ref["right_lung"][40:, 30:470]) > 0.85


def test_whole_lungs_hold_the_visible_ones_and_reach_behind_the_heart(segmenter, jsrt_test_image):
    x, ref = jsrt_test_image
    whole = segmenter.segment(x)
    seen = whole.organs()
    for side in ("right lung", "left lung"):
        assert not (seen[side] & ~whole[side]).any()
    # the whole left lung reaches behind the heart (CXAS / v7labs convention), the visible one
    # stops at the heart border as the radiologists' SCR mask does
    behind = (whole["left lung"] & ref["heart"]).sum()
    assert behind > 3 * max(1, (seen["left lung"] & ref["heart"]).sum()) and behind > 0.05 * ref["heart"].sum()
    # zones and lobes are cut from the whole lungs
    assert not (whole["left lung base"] & ~whole["left lung"]).any()
    assert (whole["left lung base"] & ref["heart"]).any()


@pytest.mark.slow
def test_held_back_v7labs_whole_lungs(segmenter, shared_data):
    """Held-back COVID-19 images with the v7labs masks (whole lungs): the whole lungs match
    them better than the visible lungs do, above 0.85 each."""
    from cxrils.training.anatomy_data import covid_samples

    test = [s for s in covid_samples(shared_data) if split_of("covid_ieee8023", s.patient_id) == "test"][:8]
    whole_d, seen_d = [], []
    for s in test:
        m = segmenter.segment(read_gray(s.image_path))
        whole_d.append(_dice(m["left lung"], s.left_lung))
        seen_d.append(_dice(m.organs()["left lung"], s.left_lung))
    assert len(test) == 8 and np.mean(whole_d) > 0.85 and np.mean(whole_d) > np.mean(seen_d) + 0.02


def test_segmenter_rejects_bad_input(segmenter):
    with pytest.raises(ValueError, match="uint8"):
        segmenter.segment(np.zeros((64, 64), dtype=np.float32))


def test_bad_weights_file(tmp_path):
    bad = tmp_path / "w.safetensors"
    bad.write_bytes(b"not safetensors")
    with pytest.raises(AnatomyBackendError, match="w.safetensors"):
        BuiltinSegmenter(bad)
    with pytest.raises(AnatomyBackendError, match="not found"):
        BuiltinSegmenter(tmp_path / "absent.safetensors")


def test_largest_component_keeps_one_blob_with_holes_filled():
    from cxrils.vision.anatomy.builtin import largest_component

    m = np.zeros((50, 50), dtype=bool)
    m[5:30, 5:30] = True
    m[10:15, 10:15] = False  # a hole
    m[40:45, 40:45] = True  # a smaller blob (e.g. on a burned-in letter)
    out = largest_component(m)
    assert out.sum() == 25 * 25 and out[12, 12] and not out[42, 42]
    assert not largest_component(np.zeros((5, 5), dtype=bool)).any()


def test_heart_uses_its_own_threshold(monkeypatch):
    from dataclasses import replace

    cfg = replace(Config().anatomy, heart_threshold=0.85)
    probs = np.zeros((5, 64, 64), dtype=np.float32)  # channels of network.CHANNELS
    probs[[0, 3], 10:50, 5:25] = 0.9  # right lung (image left), visible and whole
    probs[[1, 4], 10:50, 40:60] = 0.9  # left lung
    probs[2, 30:50, 20:45] = (cfg.threshold + cfg.heart_threshold) / 2  # above the lung cut, below the heart's
    monkeypatch.setattr(BuiltinSegmenter, "probabilities", lambda self, x: probs)
    x = np.zeros((64, 64), dtype=np.uint8)
    assert not BuiltinSegmenter(cfg=cfg).segment(x)["heart"].any()
    low = replace(cfg, heart_threshold=cfg.threshold)
    heart = BuiltinSegmenter(cfg=low).segment(x)["heart"]
    assert heart.sum() == 20 * 25


def test_whole_lung_channels_and_visible_ones(monkeypatch):
    probs = np.zeros((5, 64, 64), dtype=np.float32)
    probs[0, 10:40, 5:25] = probs[1, 10:40, 40:60] = 0.9  # visible lungs stop at row 40
    probs[3, 10:50, 5:25] = 0.9  # the whole right lung reaches row 50 (under fluid)
    probs[4, 10:50, 30:60] = 0.9  # the whole left lung reaches medially (behind the heart)
    probs[2, 30:50, 20:45] = 0.9
    monkeypatch.setattr(BuiltinSegmenter, "probabilities", lambda self, x: probs)
    m = BuiltinSegmenter().segment(np.zeros((64, 64), dtype=np.uint8))
    assert m["right lung"].sum() == 40 * 20 and m["left lung"].sum() == 40 * 30
    seen = m.organs()
    assert seen["right lung"].sum() == 30 * 20 and seen["left lung"].sum() == 30 * 20
    assert np.array_equal(seen["heart"], m["heart"]) and seen["left lung base"] is m["left lung base"]
    assert m["left lung base"][45, 32]  # the zone is cut from the whole lung
