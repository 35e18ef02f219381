"""Hand-built groundings shared by the instruction and dataset tests."""

from __future__ import annotations

import numpy as np

from cxrils.types import Finding, GroundedFinding, StudyGrounding

SHAPE = (64, 64)


def box(r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """bool (64, 64) mask with rows r0:r1, cols c0:c1 set (patient right = image left)."""
    m = np.zeros(SHAPE, dtype=bool)
    m[r0:r1, c0:c1] = True
    return m


def finding(
    entity,
    presence="positive",
    certainty="definitive",
    labels=(),
    lesion_type=None,
    predicted=None,
    sentence_index=1,
    sentence="",
) -> Finding:
    return Finding(
        entity=entity,
        sentence_index=sentence_index,
        presence=presence,
        certainty=certainty,
        locations=list(labels),
        labels=list(labels),
        lesion_type=lesion_type,
        predicted_lesion_type=predicted,
        sentence=sentence or f"{entity} sentence",
    )


def grounded(f: Finding, reported=(), grounded_=(), mask=None, empty=()) -> GroundedFinding:
    return GroundedFinding(
        finding=f,
        lesion_type=f.target_type,
        reported=list(reported),
        grounded=list(grounded_),
        empty=list(empty),
        mask=mask,
        drop_reason=None if mask is not None else "not grounded",
    )


PNEUMONIA_MASK = box(12, 22, 8, 20)  # patient's right upper zone
ATELECTASIS_MASK = box(44, 54, 6, 22)  # patient's right lung base
HEART_MASK = box(30, 50, 24, 44)


def multi_lesion_study(empty=("left apical zone lung", "lung upper lobe left"), ctr=0.55) -> StudyGrounding:
    """A tentative pneumonia (right upper zone), bibasilar atelectasis grounded on the
    right base only, a negated effusion and reported cardiomegaly."""
    f_pna = finding(
        "pneumonia",
        certainty="tentative",
        labels=["right upper zone lung"],
        lesion_type="pneumonia",
        sentence_index=1,
        sentence="Possible right upper zone pneumonia.",
    )
    f_atel = finding(
        "atelectasis",
        labels=["right lung base", "left lung base"],
        lesion_type="atelectasis",
        sentence_index=2,
        sentence="Bibasilar atelectasis.",
    )
    f_eff = finding(
        "effusion", presence="negative", lesion_type="effusion", sentence_index=3, sentence="No pleural effusion."
    )
    f_cm = finding(
        "cardiomegaly",
        lesion_type="cardiomegaly",
        labels=["heart"],
        sentence_index=4,
        sentence="Moderate cardiomegaly.",
    )
    findings = [
        grounded(f_pna, ["right upper zone lung"], ["right upper zone lung"], PNEUMONIA_MASK),
        grounded(f_atel, ["right lung base", "left lung base"], ["right lung base"], ATELECTASIS_MASK),
        grounded(f_eff),
        grounded(f_cm, ["heart"], ["heart"], HEART_MASK),
    ]
    return StudyGrounding(
        study_id="s1",
        image_id="img1",
        shape=SHAPE,
        findings=findings,
        empty_locations=list(empty),
        ctr=ctr,
        heart_mask=HEART_MASK,
        provenance={"anatomy": "test"},
    )


def no_cardiomegaly_study(ctr: float | None, image_id: str = "img2") -> StudyGrounding:
    """A study with one definitive right-lung-base effusion and no cardiomegaly mention."""
    f_eff = finding(
        "effusion", labels=["right lung base"], lesion_type="effusion", sentence="Small right pleural effusion."
    )
    gf = grounded(f_eff, ["right lung base"], ["right lung base"], box(46, 56, 4, 20))
    return StudyGrounding(
        study_id="s2",
        image_id=image_id,
        shape=SHAPE,
        findings=[gf],
        empty_locations=["left lung"],
        ctr=ctr,
        heart_mask=HEART_MASK,
    )
