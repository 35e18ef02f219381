"""ground_study: location verification (reported / grounded / empty), multi-location
findings, cardiomegaly, drop reasons, QC exclusions and recall counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from grounding_helpers import H, W, anatomy, anomaly, finding

from cxrils.config import Config
from cxrils.grounding import empty_locations, ground_study, grounding_to_dict, recall_counts, reported_locations
from cxrils.types import LesionBox, StructuredReport
from cxrils.vocab import EMPTY_LOCATION_CANDIDATES, LEFT_ZONES

CFG = Config()


def report(*findings, excluded=None):
    return StructuredReport(
        study_id="s1", section_used="impression", section_text="...", findings=list(findings), excluded=excluded
    )


def bases_anomaly():
    """Anomalies in both lung bases (rows 72-97): right at columns 5-45, left 55-95."""
    x_ano = np.zeros((H, W), np.float32)
    x_ano[72:98, 5:45] = 0.5
    x_ano[72:98, 55:95] = 0.5
    x = np.full((H, W), 60, np.uint8)
    x[x_ano > 0] = 190
    return anomaly(x_ano, x), x


RIGHT_BASE_BOX = LesionBox(0.0, 70.0, 50.0, 100.0, 0.8, "Atelectasis")  # patient right = image left
LEFT_BASE_BOX = LesionBox(50.0, 70.0, 100.0, 100.0, 0.8, "Atelectasis")


def run(rep, boxes, **kw):
    ano, x = bases_anomaly()
    return ground_study(
        study_id="s1",
        image_id="i1",
        x=x,
        report=rep,
        anatomy=anatomy(),
        anomaly=ano,
        boxes=boxes,
        cfg=kw.pop("cfg", CFG),
        ctr=kw.pop("ctr", 0.4),
        **kw,
    )


def test_multi_location_finding_grounds_only_the_location_with_a_kept_box():
    f = finding("atelectasis", "atelectasis", ["right lung base", "left lung base"])
    sg = run(report(f), [RIGHT_BASE_BOX])
    gf = sg.findings[0]
    assert gf.reported == ["right lung base", "left lung base"]
    # c1: box 1500 px vs M_union 3000 px -> IoU 0.5; box reaches right base only
    assert gf.grounded == ["right lung base"]
    assert gf.mask is not None and gf.mask[72:98, 5:45].all() and not gf.mask[:, 50:].any()
    sg2 = run(report(f), [RIGHT_BASE_BOX, LEFT_BASE_BOX])
    assert sg2.findings[0].grounded == ["right lung base", "left lung base"]
    assert sg2.findings[0].mask[72:98, 55:95].all()


def test_empty_locations_across_all_findings():
    findings = [
        finding("atelectasis", "atelectasis", ["right lung base"]),
        finding("nodule", None, ["left upper zone lung"]),  # other finding counts too
        finding("effusion", "effusion", ["left lung base"], presence="negative"),  # absent: no
    ]
    sg = run(report(*findings), [RIGHT_BASE_BOX])
    assert sg.empty_locations == [
        "right apical zone lung",
        "right upper zone lung",
        "right mid zone lung",
        "left apical zone lung",
        "left mid zone lung",
        "left lung base",
    ]
    assert all(gf.empty == sg.empty_locations for gf in sg.findings)


def test_a_zone_a_lesion_mask_spreads_into_is_not_empty():
    # second new-user trial: a component reaching past the reported base made "There is no
    # opacity in <zone>" negatives for zones its own mask covered
    x_ano = np.zeros((H, W), np.float32)
    x_ano[50:98, 5:45] = 0.5  # the right base (rows 70-100) and the lower right mid zone (40-70)
    x = np.full((H, W), 60, np.uint8)
    x[x_ano > 0] = 190
    f = finding("atelectasis", "atelectasis", ["right lung base"])
    kw = dict(study_id="s1", image_id="i1", x=x, report=report(f), anatomy=anatomy(), anomaly=anomaly(x_ano, x))
    sg = ground_study(**kw, boxes=[RIGHT_BASE_BOX], cfg=CFG, ctr=0.4)
    mask = sg.findings[0].mask
    assert mask is not None and mask[50:70, 5:45].any()  # it reaches the mid zone
    assert "right mid zone lung" not in sg.empty_locations and "right upper zone lung" in sg.empty_locations
    assert all(not (anatomy()[z] & mask).any() for z in sg.empty_locations)
    assert all(gf.empty == sg.empty_locations for gf in sg.findings)
    # the paper's rule alone (reported locations only) calls the mid zone empty
    paper = Config()
    paper.grounding.empty_excludes_lesion_masks = False
    assert "right mid zone lung" in ground_study(**kw, boxes=[RIGHT_BASE_BOX], cfg=paper, ctr=0.4).empty_locations


def test_empty_locations_overlap_tolerance_and_whole_lung():
    a = anatomy()
    f = finding("opacity", "opacity", ["right lung"])
    assert empty_locations([f], a) == ["left lung", *LEFT_ZONES]
    # a zone touching the reported mask by one pixel is not empty, unless tolerated
    a.masks["left apical zone lung"] = a.masks["left apical zone lung"].copy()
    a.masks["left apical zone lung"][14, 49] = True
    assert "left apical zone lung" not in empty_locations([f], a)
    assert "left apical zone lung" in empty_locations([f], a, tol_px=1)


def test_finding_without_location_blocks_all_empty_locations():
    assert empty_locations([finding("edema", "edema", [])], anatomy()) == []
    # ... unless it lies outside the lungs (spine, bones, mediastinum)
    assert "right lung" in empty_locations([finding("scoliosis", None, [])], anatomy())
    assert reported_locations(finding("scoliosis", None, [])).labels == ()
    assert empty_locations([finding("granuloma", None, [])], anatomy()) == []
    assert reported_locations(finding("edema", "edema", ["lung"])).implied
    outside = reported_locations(finding("opacity", "opacity", ["mediastinum"]))
    assert outside.labels == () and outside.outside == ("mediastinum",)


def test_cardiomegaly_is_the_heart_mask_and_occupies_no_lung_region():
    sg = run(report(finding("cardiomegaly", "cardiomegaly", ["heart"])), [], ctr=0.55)
    gf = sg.findings[0]
    assert gf.mask is not None and np.array_equal(gf.mask, anatomy()["heart"]) and gf.drop_reason is None
    # the heart (rows 60-90, cols 40-60) overlaps both mid zones and bases, but it is
    # not a lung finding: every lung region stays empty
    assert sg.empty_locations == list(EMPTY_LOCATION_CANDIDATES)


@pytest.mark.parametrize("ctr, grounded", [(0.40, False), (0.45, False), (0.46, True)])
def test_reported_cardiomegaly_needs_a_ctr_above_the_negative_cut_off(ctr, grounded):
    # a heart at CTR <= 0.45 is one Appendix D.3 would take as a cardiomegaly negative:
    # the report and the image disagree, so no positive record
    gf = run(report(finding("cardiomegaly", "cardiomegaly", ["heart"])), [], ctr=ctr).findings[0]
    assert (gf.mask is not None) is grounded
    if not grounded:
        assert "CTR" in gf.drop_reason and "0.45" in gf.drop_reason


def _effusion_anatomy():
    """Whole lungs of the hand anatomy; visible lungs that stop 20 rows above the right
    base (fluid) and 2 rows above the left base (a sliver: under 2 % of the lung)."""
    whole = anatomy()
    visible = {"right lung": whole["right lung"].copy(), "left lung": whole["left lung"].copy()}
    visible["right lung"][80:] = False
    visible["left lung"][98:] = False
    return type(whole)(masks=whole.masks, shape=whole.shape, backend="hand", visible=visible)


def test_effusion_grounds_the_hidden_right_base_without_an_anomaly():
    anat = _effusion_anatomy()
    x = np.full((H, W), 60, np.uint8)
    x[80:, :50] = 200  # the fluid
    empty = anomaly(np.zeros((H, W), np.float32), x)
    rep = report(finding("effusion", "effusion", ["right lung base"]))
    sg = ground_study(
        study_id="s1",
        image_id="i1",
        x=x,
        report=rep,
        anatomy=anat,
        anomaly=empty,
        boxes=[RIGHT_BASE_BOX],
        cfg=CFG,
        ctr=0.4,
        organs=anat.organs(),
    )
    gf = sg.findings[0]
    assert gf.mask is not None and gf.grounded == ["right lung base"]
    hidden = np.zeros((H, W), bool)
    hidden[80:, :40] = True  # the fluid below the visible right lung, heart (cols 40-60) left out
    assert gf.mask[hidden].all() and not gf.mask[:, 50:].any()
    # the paper's rule alone (no hidden base) has no anomaly to ground
    off = Config()
    off.grounding.effusion_hidden_base = False
    gf = ground_study(
        study_id="s1",
        image_id="i1",
        x=x,
        report=rep,
        anatomy=anat,
        anomaly=empty,
        boxes=[RIGHT_BASE_BOX],
        cfg=off,
        ctr=0.4,
        organs=anat.organs(),
    ).findings[0]
    assert gf.mask is None
    # a left-base sliver (2 rows, 100 px of 5000) is no effusion
    rep = report(finding("effusion", "effusion", ["left lung base"]))
    gf = ground_study(
        study_id="s1",
        image_id="i1",
        x=x,
        report=rep,
        anatomy=anat,
        anomaly=empty,
        boxes=[LEFT_BASE_BOX],
        cfg=CFG,
        ctr=0.4,
        organs=anat.organs(),
    ).findings[0]
    assert gf.mask is None


def test_drop_reasons_and_box_records():
    findings = [
        finding("pneumonia", "pneumonia", ["right lung base"]),
        finding("effusion", "effusion", [], presence="negative"),
        finding("pneumothorax", None, ["left lung"]),
        finding("opacity", "opacity", ["mediastinum"]),
    ]
    weak = LesionBox(0.0, 70.0, 50.0, 100.0, 0.05, "Consolidation")
    sg = run(report(*findings), [weak])
    reasons = [gf.drop_reason for gf in sg.findings]
    assert all(gf.mask is None for gf in sg.findings)
    assert "c2 x1" in reasons[0]
    assert reasons[1].startswith("negative finding")
    assert reasons[2].startswith("not one of the seven")
    assert "mediastinum" in reasons[3]
    rec = sg.findings[0].box_checks[0]
    assert rec["c2"] is False and rec["c2_confidence"] == 0.05 and rec["kept"] is False
    assert rec["c1"] and rec["c3"] and rec["c4"]
    assert run(report(findings[0]), []).findings[0].drop_reason == "no candidate boxes from the detector"


def test_edema_uses_its_own_tau_ano_and_tau_conf():
    x_ano = np.zeros((H, W), np.float32)
    x_ano[:, 5:45] = 0.05  # faint, diffuse: below tau_ano 0.10, above edema's 0.01
    x = np.full((H, W), 60, np.uint8)
    box = LesionBox(0.0, 0.0, 50.0, 100.0, 0.015, "Infiltration")  # conf between 0.01 and 0.20
    rep = report(finding("edema", "edema", ["right lung"]), finding("opacity", "opacity", ["right lung"]))
    sg = ground_study(
        study_id="s",
        image_id="i",
        x=x,
        report=rep,
        anatomy=anatomy(),
        anomaly=anomaly(x_ano, x),
        boxes=[box],
        cfg=CFG,
        ctr=0.4,
    )
    edema, opacity = sg.findings
    assert edema.mask is not None and edema.grounded == ["right lung"]
    assert opacity.mask is None and "c2 x1, c3 x1" in opacity.drop_reason


def test_edema_tau_ano_at_threshold():
    x_ano = np.zeros((H, W), np.float32)
    x_ano[10, 10], x_ano[10, 11] = CFG.grounding.tau_ano_edema, np.nextafter(np.float32(0.01), np.float32(0))
    a = anomaly(x_ano).anomaly_set(CFG.grounding.tau_ano_for("edema"))
    assert a[10, 10] and not a[10, 11]


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({"view_position": "LATERAL"}, "not a frontal view"),
        ({"crosscheck": "anatomy cross-check: heart lowest y differs"}, "anatomy cross-check"),
    ],
)
def test_qc_exclusions(kwargs, reason):
    sg = run(report(finding("atelectasis", "atelectasis", ["right lung base"])), [RIGHT_BASE_BOX], **kwargs)
    assert sg.excluded.startswith(reason) and sg.findings == []
    assert run(report(), [], view_position="AP").excluded is None
    assert run(report(excluded="no findings, impression or last paragraph"), []).excluded.startswith("report:")


def test_shape_mismatch_is_a_clear_error():
    ano, x = bases_anomaly()
    with pytest.raises(ValueError, match="anatomy masks"):
        ground_study(
            study_id="s",
            image_id="i",
            x=x[:50],
            report=report(),
            anatomy=anatomy(),
            anomaly=ano,
            boxes=[],
            cfg=CFG,
            ctr=0.4,
        )


def test_missing_or_non_bool_anatomy_masks_are_clear_errors():
    ano, x = bases_anomaly()
    a = anatomy()
    del a.masks["left lung base"]
    with pytest.raises(ValueError, match="lacks masks"):
        ground_study(study_id="s", image_id="i", x=x, report=report(), anatomy=a, anomaly=ano, boxes=[], cfg=CFG)
    a = anatomy()
    a.masks["heart"] = a.masks["heart"].astype(np.uint8) * 255
    with pytest.raises(ValueError, match="not bool"):
        ground_study(study_id="s", image_id="i", x=x, report=report(), anatomy=a, anomaly=ano, boxes=[], cfg=CFG)


def test_recall_counts_and_json():
    f = finding("atelectasis", "atelectasis", ["right lung base", "left lung base"])
    g = finding("pneumonia", "pneumonia", ["left upper zone lung"])
    sg = run(report(f, g), [RIGHT_BASE_BOX])
    counts = recall_counts([sg, run(report(f), [], view_position="LL")])
    assert counts["atelectasis"] == {"reported": 1, "grounded": 1, "recall": 1.0}
    assert counts["pneumonia"] == {"reported": 1, "grounded": 0, "recall": 0.0}
    assert counts["edema"]["reported"] == 0
    d = json.loads(json.dumps(grounding_to_dict(sg)))
    assert d["findings"][0]["grounded"] == ["right lung base"]
    assert d["findings"][0]["mask_area"] == int(sg.findings[0].mask.sum())
    assert d["findings"][0]["boxes"][0]["kept"] is True
    assert set(d["empty_locations"]) <= set(EMPTY_LOCATION_CANDIDATES)
    assert d["ctr"] == 0.4 and d["excluded"] is None


def test_ctr_is_computed_from_the_anatomy_when_not_given():
    ano, x = bases_anomaly()
    sg = ground_study(
        study_id="s", image_id="i", x=x, report=report(), anatomy=anatomy(), anomaly=ano, boxes=[], cfg=CFG
    )
    # heart columns 40-59 (20 px) over both lungs' columns 0-99 (100 px)
    assert sg.ctr == pytest.approx(20 / 100)
    no_heart = ground_study(
        study_id="s", image_id="i", x=x, report=report(), anatomy=anatomy(heart=False), anomaly=ano, boxes=[], cfg=CFG
    )
    assert no_heart.ctr is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("report", "Small right effusion.", r"report must be a StructuredReport \(cxrils\.report\.structure_report"),
        ("anomaly", None, r"anomaly must be an AnomalyResult \(an anomaly backend's map"),
        ("anatomy", {"right lung": None}, r"anatomy must be an AnatomyMasks"),
        ("boxes", None, r"boxes must be a list of LesionBox"),
        ("boxes", [(0, 0, 5, 5)], r"boxes must be a list of LesionBox"),
    ],
)
def test_ground_study_names_an_argument_of_the_wrong_kind(field, value, message):
    # a new user's trial (stop 58): a report's text gave "'str' object has no attribute
    # 'excluded'", anomaly=None an AttributeError about x_ano, boxes=None passed
    ano, x = bases_anomaly()
    kw = dict(study_id="s1", image_id="i1", x=x, report=report(), anatomy=anatomy(), anomaly=ano, boxes=[], cfg=CFG)
    kw[field] = value
    with pytest.raises(TypeError, match=message):
        ground_study(**kw)
