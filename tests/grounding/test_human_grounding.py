"""Reports and groundings written from human labels (cxrils.training.human_grounding)."""

from __future__ import annotations

import numpy as np
import pytest
from grounding_helpers import H, W, anatomy, rect

from cxrils.config import Config
from cxrils.instructions import generate_records
from cxrils.report import structure_reports
from cxrils.training.human_grounding import (
    NORMAL_REPORT,
    human_grounding,
    report_from_label,
    report_from_zones,
    sides_of_box,
    sides_of_mask,
    zones_of_mask,
)


def _structure(text: str):
    return next(iter(structure_reports([("s", text)], Config())))


@pytest.mark.parametrize(
    "lesion_type,sides,labels",
    [
        ("opacity", ("right lung", "left lung"), ["right lung", "left lung"]),
        ("opacity", ("left lung",), ["left lung"]),
        ("pneumonia", ("right lung",), ["right lung"]),
        ("atelectasis", ("right lung", "left lung"), ["right lung", "left lung"]),
    ],
)
def test_reports_from_labels_read_back_as_the_label(lesion_type, sides, labels):
    (f,) = _structure(report_from_label(lesion_type, sides)).findings
    assert f.presence == "positive" and f.target_type == lesion_type and sorted(f.labels) == sorted(labels)


def test_cardiomegaly_and_normal_reports():
    r = _structure(report_from_label("cardiomegaly", ()))
    assert r.findings and all(f.target_type == "cardiomegaly" and f.presence == "positive" for f in r.findings)
    assert not [f for f in _structure(NORMAL_REPORT).findings if f.presence == "positive"]


def test_sides_of_masks_and_boxes_are_the_patients():
    right, left = rect(0, H, 0, 50), rect(0, H, 50, W)
    assert sides_of_mask(rect(10, 40, 5, 30), right, left) == ("right lung",)  # image left = patient right
    assert sides_of_mask(rect(10, 40, 5, 95), right, left) == ("right lung", "left lung")
    assert sides_of_mask(rect(10, 40, 46, 95), right, left) == ("left lung",)  # 4 of 49 columns: under 10%
    assert sides_of_box((300, 10, 400, 60), 512) == ("left lung",)
    assert sides_of_box((100, 10, 400, 60), 512) == ("right lung", "left lung")


def test_zones_of_a_mask_and_their_report_read_back_as_those_zones():
    anat = anatomy()
    # rows 60-95 of the patient's right lung (image columns 0-50): 500 px in the mid
    # zone (rows 40-70), 1,250 in the base (70-100); 45 px in the left base (image
    # columns 50-53): 2.5 % of the lesion, under the 10 % share
    lesion = rect(60, 95, 0, 50) | rect(70, 85, 50, 53)
    assert zones_of_mask(lesion, anat) == ("right mid zone lung", "right lung base")
    assert zones_of_mask(np.zeros((H, W), bool), anat) == ()
    findings = _structure(report_from_zones("opacity", zones_of_mask(lesion, anat))).findings
    assert [(f.presence, f.target_type, list(f.labels)) for f in findings] == [
        ("positive", "opacity", ["right mid zone lung"]),
        ("positive", "opacity", ["right lung base"]),
    ]
    with pytest.raises(ValueError, match="shape"):
        zones_of_mask(lesion[:50], anat)


def test_human_grounding_cuts_the_mask_by_the_reported_locations():
    anat = anatomy()
    lesion = rect(70, 95, 30, 60)  # 20 columns in the patient's right lung, 10 in the left
    g = human_grounding(
        study_id="s",
        image_id="i",
        report=_structure("There is an opacity in the right lung."),
        anatomy=anat,
        lesion=lesion,
        cfg=Config(),
    )
    (f,) = g.findings
    assert f.grounded == ["right lung"] and np.array_equal(f.mask, rect(70, 95, 30, 50))


def test_no_empty_location_holds_part_of_the_human_mask():
    anat = anatomy()
    # 40 columns in the patient's right lung base, 3 in the left base (45 px, 7 % of the
    # mask: under the 10 % share, so the report names the right lung only)
    lesion = rect(70, 85, 10, 50) | rect(70, 85, 50, 53)
    assert sides_of_mask(lesion, anat["right lung"], anat["left lung"]) == ("right lung",)
    g = human_grounding(
        study_id="s",
        image_id="i",
        report=_structure("There is an opacity in the right lung."),
        anatomy=anat,
        lesion=lesion,
        cfg=Config(),
    )
    # the left lung and its base hold lesion pixels: not empty; the left upper zone does not
    assert "left lung" not in g.empty_locations and "left lung base" not in g.empty_locations
    assert "left upper zone lung" in g.empty_locations
    assert all(not (anat[lb] & lesion).any() for lb in g.empty_locations)


def test_human_grounding_puts_the_expert_mask_in_the_reported_lungs():
    anat = anatomy()
    lesion = rect(70, 95, 5, 45)  # patient right lung base
    report = _structure("There is an opacity in the right lung.")
    g = human_grounding(study_id="s", image_id="i", report=report, anatomy=anat, lesion=lesion, cfg=Config())
    (f,) = g.findings
    assert np.array_equal(f.mask, lesion) and f.grounded == ["right lung"]
    assert "left lung" in g.empty_locations and "right lung" not in g.empty_locations
    assert g.ctr is not None and np.array_equal(g.heart_mask, anat["heart"])
    rows = generate_records(g, split="train", patient_id="p", image_path="images/i.png", cfg=Config())
    pos = [r for r in rows if r["polarity"] == "positive"]
    assert pos and all(r["mask_area"] == lesion.sum() for r in pos)
    assert any(r["polarity"] == "negative" and r["locations"] and r["locations"][0].startswith("left") for r in rows)
    # a mask in the other lung than the report says grounds nothing
    g2 = human_grounding(
        study_id="s", image_id="i", report=report, anatomy=anat, lesion=rect(70, 95, 55, 95), cfg=Config()
    )
    assert g2.findings[0].mask is None and "reaches no reported location" in g2.findings[0].drop_reason
    with pytest.raises(ValueError, match="shape"):
        human_grounding(study_id="s", image_id="i", report=report, anatomy=anat, lesion=lesion[:50], cfg=Config())
