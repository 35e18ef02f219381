"""Algorithm 1: each condition at, just below and just above its threshold (Table 7),
edema thresholds, components touching vs missing a box, the refinement."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from grounding_helpers import H, W, rect

from cxrils.config import GroundingConfig
from cxrils.grounding import algorithm1, check_box, refine
from cxrils.grounding.algorithm import hidden_base
from cxrils.types import LesionBox

CFG = GroundingConfig()
RIGHT, LEFT = rect(0, H, 0, 50), rect(0, H, 50, W)  # patient right = image left
EMPTY = np.zeros((H, W), dtype=bool)


def box(r0, r1, c0, c1, conf=0.9, cls="Lung Opacity") -> LesionBox:
    """Box covering rows r0..r1-1 and columns c0..c1-1 exactly."""
    return LesionBox(float(c0), float(r0), float(c1), float(r1), conf, cls)


def check(b, anomaly_set=EMPTY, m_union=EMPTY, lesion_type="pneumonia", cfg=CFG):
    return check_box(b, anomaly_set, m_union, RIGHT, LEFT, lesion_type, cfg)


def test_paper_thresholds():
    # Table 7; the constructions below rely on these values.
    assert (
        CFG.tau_anatomy,
        CFG.tau_conf,
        CFG.tau_conf_edema,
        CFG.tau_signal,
        CFG.tau_size,
        CFG.tau_ano,
        CFG.tau_ano_edema,
    ) == (0.25, 0.20, 0.01, 0.20, 0.10, 0.10, 0.01)


def test_box_mask_is_exact():
    assert box(0, 10, 0, 50).to_mask((H, W)).sum() == 500


# c1: M_union has 2000 px; a box inside it with 500 px has IoU 0.25.
@pytest.mark.parametrize(
    "b, iou, ok",
    [
        (box(0, 10, 0, 50), 500 / 2000, True),  # at tau_anatomy
        (box(0, 10, 0, 49), 490 / 2000, False),  # just below
        (box(0, 11, 0, 50), 550 / 2000, True),  # just above
        (box(0, 10, 1, 51), 490 / 2010, False),  # sticks out of M_union
    ],
)
def test_c1_anatomy_iou(b, iou, ok):
    c = check(b, m_union=rect(0, 40, 0, 50))
    assert c.iou_anatomy == pytest.approx(iou)
    assert c.c1 is ok


@pytest.mark.parametrize(
    "conf, lesion_type, ok",
    [
        (0.20, "pneumonia", True),
        (0.1999, "pneumonia", False),
        (0.2001, "pneumonia", True),
        (0.01, "pneumonia", False),
        (0.01, "edema", True),
        (0.0099, "edema", False),
        (0.0101, "edema", True),
    ],
)
def test_c2_confidence_and_edema(conf, lesion_type, ok):
    c = check(box(0, 10, 0, 10, conf=conf), lesion_type=lesion_type)
    assert c.confidence == conf
    assert c.c2 is ok


# c3: a 10 x 10 box with k anomalous pixels has signal k / 100.
@pytest.mark.parametrize("k, ok", [(20, True), (19, False), (21, True), (0, False)])
def test_c3_signal(k, ok):
    a = EMPTY.copy()
    a.reshape(-1)[np.flatnonzero(box(0, 10, 0, 10).to_mask((H, W)))[:k]] = True
    a[50:60, 50:60] = True  # anomaly outside the box does not count
    c = check(box(0, 10, 0, 10), anomaly_set=a)
    assert c.signal == pytest.approx(k / 100)
    assert c.c3 is ok


# c4: each lung has 5000 px; a box inside one lung with 500 px has IoU 0.10.
@pytest.mark.parametrize(
    "b, ok",
    [
        (box(0, 10, 0, 50), True),  # right lung, at tau_size
        (box(0, 10, 0, 49), False),  # just below
        (box(0, 11, 0, 50), True),  # just above
        (box(0, 10, 50, 100), True),  # left lung, at tau_size (the OR)
        (box(0, 10, 25, 75), False),  # straddles: 250 / 5250 in each lung
    ],
)
def test_c4_size(b, ok):
    c = check(b)
    assert c.c4 is ok
    assert max(c.iou_right_lung, c.iou_left_lung) == pytest.approx(
        max(
            (b.to_mask((H, W)) & RIGHT).sum() / (b.to_mask((H, W)) | RIGHT).sum(),
            (b.to_mask((H, W)) & LEFT).sum() / (b.to_mask((H, W)) | LEFT).sum(),
        )
    )


def test_box_outside_both_lungs_fails_c1_and_c4():
    right, left = rect(0, H, 0, 40), rect(0, H, 60, W)
    b = box(10, 90, 40, 60)  # the gap between the lungs
    c = check_box(b, np.ones((H, W), bool), right | left, right, left, "pneumonia", CFG)
    assert (c.iou_right_lung, c.iou_left_lung) == (0.0, 0.0)
    assert c.failed == ["c1", "c4"]
    assert not c.kept


def _blobs():
    a = EMPTY.copy()
    a[20:40, 10:30] = True  # blob touching the box below (right lung)
    a[60:80, 10:30] = True  # blob in the right lung the box misses
    a[20:40, 70:90] = True  # blob in the left lung
    return a


def test_components_touching_vs_missing_the_box():
    a = _blobs()
    x = np.where(a, 200, 60).astype(np.uint8)
    b = box(0, 30, 0, 50)  # 1500 px holding 200 anomalous px: signal 0.133
    cfg = dataclasses.replace(CFG, tau_signal=0.1)
    out = algorithm1(x, a, RIGHT, RIGHT, LEFT, [b], "pneumonia", cfg)
    assert out.checks[0].kept and out.checks[0].n_components == 1
    # the whole touched component (also its rows 30-39 outside the box), nothing else
    assert out.mask[20:40, 10:30].all()
    assert not out.mask[60:80].any() and not out.mask[:, 50:].any()


def test_failed_box_gives_empty_mask_and_records_conditions():
    a = _blobs()
    x = np.where(a, 200, 60).astype(np.uint8)
    out = algorithm1(x, a, RIGHT, RIGHT, LEFT, [box(0, 30, 0, 50, conf=0.1)], "pneumonia", CFG)
    assert not out.mask.any()
    assert out.checks[0].failed == ["c2", "c3"]
    assert out.kept_boxes == []


def test_empty_anomaly_map_grounds_nothing():
    out = algorithm1(np.full((H, W), 60, np.uint8), EMPTY, RIGHT, RIGHT, LEFT, [box(0, 30, 0, 50)], "pneumonia", CFG)
    assert out.checks[0].signal == 0.0 and out.checks[0].failed == ["c3"]
    assert not out.mask.any()


def test_refine_opening_drops_specks():
    c = EMPTY.copy()
    c[20:40, 10:30] = True
    c[5, 5] = True  # a speck
    x = np.full((H, W), 60, np.uint8)
    x[c] = 200
    out = refine(c, x, RIGHT, LEFT, "pneumonia", dataclasses.replace(CFG, grow_iterations=0))
    assert not out[5, 5]
    assert out[25:35, 15:25].all()
    speck_only = refine(np.pad(np.ones((1, 1), bool), ((5, 94), (5, 94))), x, RIGHT, LEFT, "pneumonia", CFG)
    assert not speck_only.any()


def test_refine_expands_into_similar_adjacent_pixels_only():
    c = EMPTY.copy()
    c[20:30, 10:20] = True
    x = np.full((H, W), 60, np.uint8)
    x[20:30, 10:20] = 200
    x[20:30, 20:40] = 205  # similar and adjacent: grows into it (up to grow_iterations px)
    x[30:40, 10:20] = 120  # adjacent but dissimilar: not added
    x[20:30, 60:70] = 200  # similar but far away: not added
    # pixel sizes are given at 512 px: 15 steps -> round(15 * 100 / 512) = 3 steps here
    cfg = dataclasses.replace(CFG, open_radius_px=0, grow_iterations=15)
    out = refine(c, x, RIGHT, LEFT, "pneumonia", cfg)
    assert out[20:30, 20:23].all() and not out[20:30, 23:].any()
    assert not out[30:40].any()


def test_refine_effusion_fills_lung_base_down_to_costophrenic_angle():
    c = EMPTY.copy()
    c[80:88, 10:40] = True  # in the lowest quarter of the right lung
    x = np.full((H, W), 60, np.uint8)
    x[c] = 200
    cfg = dataclasses.replace(CFG, grow_iterations=0)
    eff = refine(c, x, RIGHT, LEFT, "effusion", cfg)
    assert eff[80:100, 0:50].all()  # down to the lung's lowest row
    assert not eff[:80].any() and not eff[:, 50:].any()
    other = refine(c, x, RIGHT, LEFT, "atelectasis", cfg)
    assert not other[90:].any()  # only effusion gets the base
    high = EMPTY.copy()
    high[30:38, 10:40] = True  # not at a lung base: no fill
    x2 = np.where(high, 200, 60).astype(np.uint8)
    assert np.array_equal(
        refine(high, x2, RIGHT, LEFT, "effusion", cfg), refine(high, x2, RIGHT, LEFT, "atelectasis", cfg)
    )


def test_refine_effusion_takes_the_base_of_the_whole_lungs():
    # visible right lung ends at row 80 (fluid below); the whole lung reaches row 99
    seen_right = rect(0, 80, 0, 50)
    c = EMPTY.copy()
    c[62:80, 10:40] = True  # the anomaly at the visible base
    x = np.where(c, 200, 60).astype(np.uint8)
    cfg = dataclasses.replace(CFG, grow_iterations=0)
    whole = algorithm1(
        x, c, RIGHT, seen_right, LEFT, [box(60, 100, 0, 50)], "effusion", cfg, whole_lungs=(RIGHT, LEFT)
    ).mask
    # from the component's top row inside the lowest quarter (row 75) down to the whole lung's lowest row
    assert whole[75:100, 0:50].all() and whole[63:79, 11:39].all()  # (the opening rounds corners)
    visible_only = algorithm1(x, c, RIGHT, seen_right, LEFT, [box(60, 100, 0, 50)], "effusion", cfg).mask
    assert not visible_only[80:].any()  # the paper's rule with the visible lung stops above the fluid


def test_hidden_base_is_the_lung_under_fluid_away_from_the_heart():
    seen = (rect(0, 80, 0, 50), rect(0, 100, 50, W))
    heart = rect(60, 90, 40, 60)
    out = hidden_base((RIGHT, LEFT), seen, heart, CFG)
    # rows 80-99 of the right lung, minus the heart grown by the opening radius (2 px at 512 -> 1 px here)
    assert out[80:100, 0:38].all() and not out[:78].any() and not out[:, 50:].any()
    assert not out[80:90, 39:50].any()  # next to the heart: the retrocardiac lung is no effusion
    # the whole lung's lowest quarter only: fluid seen higher is not added
    high = (rect(0, 40, 0, 50), rect(0, 100, 50, W))
    assert not hidden_base((RIGHT, LEFT), high, EMPTY, CFG)[:74].any()  # band: rows >= 99 - 0.25 * 100
    # a sliver under effusion_hidden_min_fraction of the lung is dropped
    sliver = (rect(0, 99, 0, 50), rect(0, 100, 50, W))
    assert not hidden_base((RIGHT, LEFT), sliver, EMPTY, CFG).any()
