"""The c1 oracle (``cxrils.grounding.expert``): Algorithm 1's c1 with an expert's own boxes
and lungs. Expected values are counted by hand on a 100 x 100 image whose patient-right lung
is columns 0-49 (the image's left) and patient-left lung columns 50-99, 5000 px each, 10,000
together; tau_anatomy = 0.25 (Table 7); specks below 2 % of the lungs (200 px) get no box."""

from __future__ import annotations

import dataclasses

import numpy as np
from grounding_helpers import H, W, rect

from cxrils.config import GroundingConfig
from cxrils.grounding import c1_oracle, c1_passing_sides, lesion_boxes
from cxrils.grounding.expert import box_side

PER_LUNG = GroundingConfig()
UNION = dataclasses.replace(PER_LUNG, c1_bilateral="union")
RIGHT, LEFT = rect(0, H, 0, 50), rect(0, H, 50, W)
MIN_FRAC = 0.02


def oracle(lesion: np.ndarray, cfg: GroundingConfig) -> list[tuple[tuple[float, ...], str, bool]]:
    return [
        ((b.box.x0, b.box.y0, b.box.x1, b.box.y1), b.side, b.c1)
        for b in c1_oracle(lesion, RIGHT, LEFT, cfg, min_area_frac=MIN_FRAC)
    ]


def test_a_box_per_lung_fails_the_papers_c1_and_passes_per_lung():
    # right component rows 0-59 x columns 0-39: 2400 px; IoU with both lungs 2400 / 10000 = 0.24 < 0.25,
    # with the right lung 2400 / 5000 = 0.48. Left component rows 0-49 x columns 60-99: 2000 px,
    # 0.20 with both lungs, 0.40 with the left lung.
    lesion = rect(0, 60, 0, 40) | rect(0, 50, 60, 100)
    assert oracle(lesion, UNION) == [
        ((0.0, 0.0, 40.0, 60.0), "right lung", False),
        ((60.0, 0.0, 100.0, 50.0), "left lung", False),
    ]
    assert oracle(lesion, PER_LUNG) == [
        ((0.0, 0.0, 40.0, 60.0), "right lung", True),
        ((60.0, 0.0, 100.0, 50.0), "left lung", True),
    ]
    first = c1_oracle(lesion, RIGHT, LEFT, PER_LUNG, min_area_frac=MIN_FRAC)[0].check
    # IoU with the left lung: no shared pixel over 2400 + 5000
    assert (first.iou_anatomy, first.iou_anatomy_sides) == (0.24, (0.48, 0.0))
    assert c1_passing_sides(lesion, RIGHT, LEFT, UNION, min_area_frac=MIN_FRAC) == frozenset()
    assert c1_passing_sides(lesion, RIGHT, LEFT, PER_LUNG, min_area_frac=MIN_FRAC) == {"right lung", "left lung"}


def test_a_large_box_passes_both_rules_and_a_speck_gets_no_box():
    # columns 0-29 of the right lung, all rows: 3000 px, IoU 0.30 with both lungs; the 3 x 3 = 9 px
    # speck in the left lung is below 200 px
    lesion = rect(0, H, 0, 30) | rect(10, 13, 70, 73)
    for cfg in (UNION, PER_LUNG):
        assert oracle(lesion, cfg) == [((0.0, 0.0, 30.0, 100.0), "right lung", True)]
        assert c1_passing_sides(lesion, RIGHT, LEFT, cfg, min_area_frac=MIN_FRAC) == {"right lung"}
    assert len(lesion_boxes(lesion, 0.0, RIGHT | LEFT)) == 2


def test_the_box_of_an_l_shaped_component_is_its_bounding_rectangle():
    # rows 0-9 x columns 50-99 and rows 0-59 x columns 90-99 form one component of
    # 500 + 600 - 100 = 1000 px; its box rows 0-59 x columns 50-99 = 3000 px: 0.30 with both lungs
    lesion = rect(0, 10, 50, 100) | rect(0, 60, 90, 100)
    assert oracle(lesion, UNION) == [((50.0, 0.0, 100.0, 60.0), "left lung", True)]


def test_a_straddling_box_counts_on_the_right_on_a_tie_and_fails_both_rules():
    # rows 40-59 x columns 30-69: 800 px, 400 in each lung. IoU 0.08 with both lungs and
    # 400 / (5000 + 800 - 400) = 0.074 with either lung
    lesion = rect(40, 60, 30, 70)
    assert oracle(lesion, PER_LUNG) == [((30.0, 40.0, 70.0, 60.0), "right lung", False)]
    assert box_side(rect(40, 60, 30, 70), RIGHT, LEFT) == "right lung"
    assert box_side(rect(40, 60, 30, 71), RIGHT, LEFT) == "left lung"  # 400 vs 420
    check = c1_oracle(lesion, RIGHT, LEFT, PER_LUNG, min_area_frac=MIN_FRAC)[0].check
    assert check.iou_anatomy == 0.08 and check.iou_anatomy_sides == (400 / 5400, 400 / 5400)


def test_diagonal_neighbours_are_one_component_and_an_empty_lesion_has_no_box():
    lesion = rect(0, 20, 0, 20) | rect(20, 40, 20, 40)  # touching at a corner: 8-connected
    assert lesion_boxes(lesion, MIN_FRAC, RIGHT | LEFT) == [(0.0, 0.0, 40.0, 40.0)]
    empty = np.zeros((H, W), bool)
    assert lesion_boxes(empty, MIN_FRAC, RIGHT | LEFT) == [] and oracle(empty, PER_LUNG) == []
    # without lungs, the speck threshold is a share of the whole image: 400 px < 5 % of 10,000
    assert lesion_boxes(rect(0, 20, 0, 20), 0.05) == [] and len(lesion_boxes(rect(0, 20, 0, 20), 0.04)) == 1


def test_per_lung_never_fails_a_box_that_union_passes_and_boxes_do_not_depend_on_the_rule():
    rng = np.random.default_rng(0)
    for _ in range(20):
        r0, c0 = (int(v) for v in rng.integers(0, 80, 2))
        lesion = rect(r0, r0 + int(rng.integers(5, 20)), c0, c0 + int(rng.integers(5, 60)))
        union, per_lung = oracle(lesion, UNION), oracle(lesion, PER_LUNG)
        assert [b[:2] for b in union] == [b[:2] for b in per_lung]
        assert all(p[2] or not u[2] for u, p in zip(union, per_lung))
