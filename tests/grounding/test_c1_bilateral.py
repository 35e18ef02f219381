"""The per-lung variant of Algorithm 1's c1 (``grounding.c1_bilateral``, the default; ours,
docs/grounding.md) against the paper's c1 (``union``, an option). Expected values are counted by
hand on the 100 x 100 anatomy of grounding_helpers: each lung 5000 px (right = columns
0-49, the image's left), each lung base rows 70-99 = 1500 px, each upper zone rows 15-39
= 1250 px; tau_anatomy = 0.25 (Table 7)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from grounding_helpers import H, W, anatomy, anomaly, finding, rect

from cxrils.config import Config, ConfigError, GroundingConfig, load_config
from cxrils.grounding import c1_sides, check_box, ground_study, grounding_to_dict
from cxrils.types import LesionBox, StructuredReport

PER_LUNG = GroundingConfig()
UNION = dataclasses.replace(PER_LUNG, c1_bilateral="union")
A = anatomy()
BOTH_LUNGS = ("right lung", "left lung")
BOTH_BASES = ("right lung base", "left lung base")
EMPTY = np.zeros((H, W), dtype=bool)


def box(r0, r1, c0, c1, conf=0.9) -> LesionBox:
    """Box covering rows r0..r1-1 and columns c0..c1-1 exactly."""
    return LesionBox(float(c0), float(r0), float(c1), float(r1), conf, "Lung Opacity")


def c1(b: LesionBox, labels: tuple[str, ...], cfg: GroundingConfig) -> tuple[bool, float, tuple | None]:
    sides = c1_sides(labels, A) if cfg.c1_bilateral == "per_lung" else None
    check = check_box(b, EMPTY, A.union(labels), A["right lung"], A["left lung"], "opacity", cfg, sides)
    return check.c1, check.iou_anatomy, check.iou_anatomy_sides


def test_default_is_per_lung_and_the_papers_union_is_an_option():
    assert PER_LUNG.c1_bilateral == "per_lung" and Config().grounding.c1_bilateral == "per_lung"
    assert load_config(None, ["grounding.c1_bilateral=union"]).grounding.c1_bilateral == "union"


@pytest.mark.parametrize(
    "b, union_iou, side_ious, union_ok, per_lung_ok",
    [
        # Left lung only, rows 0-39: 2000 px; against both lungs 2000/10000 = 0.20 (fails the
        # paper's c1), against the left lung 2000/5000 = 0.40 (passes per_lung).
        (box(0, 40, 50, 100), 0.20, (0.0, 0.40), False, True),
        # Left lung rows 0-24: 1250 px; 1250/5000 = 0.25, exactly tau_anatomy: passes per_lung.
        (box(0, 25, 50, 100), 0.125, (0.0, 0.25), False, True),
        # Left lung rows 0-23: 1200 px; 1200/5000 = 0.24 just below: fails both.
        (box(0, 24, 50, 100), 0.12, (0.0, 0.24), False, False),
        # Right lung mirror image of the first box: 0.20 / 0.40.
        (box(0, 40, 0, 50), 0.20, (0.40, 0.0), False, True),
        # Straddling both lungs, rows 0-59, columns 25-74: 3000 px, 1500 per lung. Union:
        # 3000/10000 = 0.30 (passes). Each side: 1500/(5000 + 1500) = 0.2308 (would fail);
        # per_lung still passes it, by the union.
        (box(0, 60, 25, 75), 0.30, (1500 / 6500, 1500 / 6500), True, True),
        # Straddling, rows 0-39: 2000 px, 1000 per lung. Union 0.20; sides 1000/6000 = 0.1667:
        # fails both variants.
        (box(0, 40, 25, 75), 0.20, (1000 / 6000, 1000 / 6000), False, False),
    ],
)
def test_bilateral_whole_lungs(b, union_iou, side_ious, union_ok, per_lung_ok):
    ok, iou_union, sides = c1(b, BOTH_LUNGS, UNION)
    assert ok is union_ok and iou_union == pytest.approx(union_iou) and sides is None
    ok, iou_union, sides = c1(b, BOTH_LUNGS, PER_LUNG)
    assert ok is per_lung_ok and iou_union == pytest.approx(union_iou)
    assert sides == pytest.approx(side_ious)


def test_sided_sub_locations_use_the_reported_zones_not_the_whole_lungs():
    # "both lower zones": M_union = both bases, 3000 px. A box in the left base, rows
    # 85-99, columns 60-99: 600 px. Union 600/3000 = 0.20 (fails); left base 600/1500 =
    # 0.40 (passes per_lung); against the whole left lung it would be 600/5000 = 0.12,
    # which would fail: the side part is the reported zone.
    m_right, m_left = c1_sides(BOTH_BASES, A)
    assert np.array_equal(m_right, A["right lung base"]) and np.array_equal(m_left, A["left lung base"])
    b = box(85, 100, 60, 100)
    assert c1(b, BOTH_BASES, UNION)[:2] == (False, pytest.approx(0.20))
    ok, _, sides = c1(b, BOTH_BASES, PER_LUNG)
    assert ok and sides == pytest.approx((0.0, 0.40))


def test_several_labels_on_one_side_are_one_part():
    labels = ("right upper zone lung", "right lung base", "left lung")
    m_right, m_left = c1_sides(labels, A)
    assert np.array_equal(m_right, rect(15, 40, 0, 50) | rect(70, 100, 0, 50))  # 1250 + 1500 px
    assert m_right.sum() == 2750 and np.array_equal(m_left, A["left lung"])
    # A box on the right base, rows 70-99 columns 0-49 = 1500 px: union 1500/(2750 + 5000)
    # = 0.1935 fails; right part 1500/2750 = 0.5455 passes.
    ok, iou_union, sides = c1(box(70, 100, 0, 50), labels, PER_LUNG)
    assert ok and iou_union == pytest.approx(1500 / 7750) and sides == pytest.approx((1500 / 2750, 0.0))
    assert not c1(box(70, 100, 0, 50), labels, UNION)[0]


@pytest.mark.parametrize(
    "labels", [("left lung",), ("left upper zone lung", "left lung base"), ("lung upper lobe left", "left lung base")]
)
def test_one_sided_reports_are_unchanged(labels):
    assert c1_sides(labels, A) is None
    # Left base, rows 85-99 columns 60-99: 600 px. ("left lung",): 600/5000 = 0.12;
    # (upper zone + base, 2750 px): 600/2750 = 0.218; (upper lobe rows 0-59 + base,
    # 4500 px): 600/4500 = 0.133. All below 0.25 under both variants, although the box
    # is 0.40 of the left base alone: per_lung does not split one side's locations.
    b = box(85, 100, 60, 100)
    for cfg in (UNION, PER_LUNG):
        ok, iou_union, sides = c1(b, labels, cfg)
        assert not ok and sides is None
    assert c1(b, labels, UNION)[1] == c1(b, labels, PER_LUNG)[1]


def test_sides_are_ignored_under_the_papers_c1():
    # A caller passing (M_right, M_left) with the default config still gets the paper's c1.
    sides = c1_sides(BOTH_LUNGS, A)
    check = check_box(
        box(0, 40, 50, 100), EMPTY, A.union(BOTH_LUNGS), A["right lung"], A["left lung"], "opacity", UNION, sides
    )
    assert not check.c1 and check.iou_anatomy_sides is None


def test_bad_value_is_a_config_error():
    with pytest.raises(ConfigError, match="grounding.c1_bilateral: must be one of"):
        load_config(None, ["grounding.c1_bilateral=lungs"])
    assert load_config(None, ["grounding.c1_bilateral=per_lung"]).grounding.c1_bilateral == "per_lung"


def _study(cfg: Config):
    """A bilateral report ("opacities in both lungs") and one box on the upper left lung
    (rows 0-39, columns 50-99: c1 0.20 vs both lungs, 0.40 vs the left lung) that holds
    an anomaly (c3 = 1, c4 = IoU with the left lung 0.40, conf 0.9)."""
    x_ano = np.zeros((H, W), np.float32)
    x_ano[5:35, 55:95] = 0.5
    x = np.full((H, W), 60, np.uint8)
    x[x_ano > 0] = 190
    rep = StructuredReport(
        study_id="s",
        section_used="impression",
        section_text="...",
        findings=[finding("opacity", "opacity", list(BOTH_LUNGS))],
    )
    return ground_study(
        study_id="s",
        image_id="i",
        x=x,
        report=rep,
        anatomy=A,
        anomaly=anomaly(x_ano, x),
        boxes=[box(0, 40, 50, 100)],
        cfg=cfg,
        ctr=0.4,
    )


def _paper_config() -> Config:
    cfg = Config()
    cfg.grounding.c1_bilateral = "union"
    return cfg


def test_ground_study_grounds_the_left_lung_only_under_per_lung():
    paper = _study(_paper_config()).findings[0]
    assert paper.mask is None and "c1 x1" in paper.drop_reason
    assert "c1_iou_left_part" not in paper.box_checks[0]
    sg = _study(Config())
    gf = sg.findings[0]
    assert gf.mask is not None and gf.grounded == ["left lung"]
    assert not gf.mask[:, :50].any()  # nothing in the right lung
    rec = gf.box_checks[0]
    assert rec["c1"] and rec["c1_iou_anatomy"] == pytest.approx(0.20)
    assert rec["c1_iou_left_part"] == pytest.approx(0.40) and rec["c1_iou_right_part"] == 0.0


def test_the_rule_is_in_the_provenance():
    cfg = _paper_config()
    # per study (grounding JSON) and per run (what a resume compares, the dataset's provenance)
    assert grounding_to_dict(_study(Config()))["provenance"]["grounding"]["c1_bilateral"] == "per_lung"
    assert grounding_to_dict(_study(cfg))["provenance"]["grounding"]["c1_bilateral"] == "union"
    assert cfg.dataset_settings()["grounding"]["c1_bilateral"] == "union"
    assert cfg.to_json() != Config().to_json()
