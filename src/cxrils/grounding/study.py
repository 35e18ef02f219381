"""Grounding of one study: Algorithm 1 per finding, location verification and
quality control (paper section 3.1 steps 3-4, Appendix D)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from scipy import ndimage as ndi

from cxrils.config import Config
from cxrils.grounding.algorithm import algorithm1, c1_sides, hidden_base, neighbourhood
from cxrils.grounding.locations import empty_locations, grounded_locations, reported_locations
from cxrils.types import (
    AnatomyMasks,
    AnomalyResult,
    Finding,
    GroundedFinding,
    LesionBox,
    StructuredReport,
    StudyGrounding,
)
from cxrils.vocab import ANATOMY_LABELS, FRONTAL_VIEWS, LESION_TYPES, ORGAN_LESION_TYPES


def frontal_view_problem(view_position: str | None, cfg: Config) -> str | None:
    """QC of the view (Appendix D.1: PA and AP only).

    Returns None when the view is frontal, unknown (None or empty: metadata often
    lacks it) or the check is off (``qc.frontal_only``); else the exclusion reason.
    """
    if not cfg.qc.frontal_only or not view_position:
        return None
    if view_position.strip().upper() in FRONTAL_VIEWS:
        return None
    return f"not a frontal view: view position {view_position!r} (Appendix D.1 keeps PA and AP only)"


#: What each object argument of :func:`ground_study` must be, and where one comes from.
_MAKERS = {
    "report": (StructuredReport, "cxrils.report.structure_report(study_id, text)"),
    "anatomy": (AnatomyMasks, "an anatomy backend's segment(x)"),
    "anomaly": (AnomalyResult, "an anomaly backend's map(x, edit_region)"),
}


def _check_inputs(x: np.ndarray, anatomy: AnatomyMasks, anomaly: AnomalyResult, report: Any, boxes: Any) -> None:
    given = {"report": report, "anatomy": anatomy, "anomaly": anomaly}
    for name, (kind, maker) in _MAKERS.items():
        if not isinstance(given[name], kind):
            article = "an" if kind.__name__[0] in "AEIOU" else "a"
            raise TypeError(f"{name} must be {article} {kind.__name__} ({maker}), got {type(given[name]).__name__}")
    if not isinstance(boxes, (list, tuple)) or not all(isinstance(b, LesionBox) for b in boxes):
        raise TypeError(f"boxes must be a list of LesionBox (a detector's detect(x); [] for none), got {boxes!r:.80}")
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype != np.uint8:
        raise ValueError(f"x must be a uint8 (H, W) image, got {x.dtype} {x.shape}")
    if tuple(anatomy.shape) != x.shape:
        raise ValueError(f"anatomy masks ({anatomy.backend}) have shape {tuple(anatomy.shape)}, image {x.shape}")
    missing = [label for label in ANATOMY_LABELS if label not in anatomy]
    if missing:
        raise ValueError(f"anatomy backend {anatomy.backend!r} lacks masks {missing}")
    not_bool = [label for label in ANATOMY_LABELS if np.asarray(anatomy[label]).dtype != bool]
    if not_bool:
        raise ValueError(f"anatomy backend {anatomy.backend!r}: masks {not_bool} are not bool arrays")
    if anomaly.x_ano.shape != x.shape:
        raise ValueError(f"anomaly map ({anomaly.backend}) has shape {anomaly.x_ano.shape}, image {x.shape}")


def _ground_finding(
    finding: Finding,
    x: np.ndarray,
    anatomy: AnatomyMasks,
    organs: AnatomyMasks,
    anomaly_components: Callable[[str], tuple[np.ndarray, np.ndarray]],
    boxes: list[LesionBox],
    cfg: Config,
    ctr: float | None,
) -> GroundedFinding:
    """Ground one finding; its ``empty`` locations are the study's, set by the caller."""
    loc = reported_locations(finding)
    lesion_type = finding.target_type if finding.target_type in LESION_TYPES else None
    result = GroundedFinding(finding=finding, lesion_type=lesion_type, reported=list(loc.labels), grounded=[], empty=[])
    if finding.presence != "positive":
        result.drop_reason = "negative finding: nothing to ground"
    elif lesion_type is None:
        result.drop_reason = f"not one of the seven lesion types (entity {finding.entity!r})"
    elif lesion_type == "cardiomegaly":
        heart = organs["heart"]
        if not heart.any():
            result.drop_reason = "cardiomegaly: the heart mask is empty"
        elif ctr is not None and ctr <= cfg.qc.ctr_min_cardiomegaly_positive:
            result.drop_reason = (
                f"cardiomegaly: CTR {ctr:.2f} <= {cfg.qc.ctr_min_cardiomegaly_positive} "
                "(qc.ctr_min_cardiomegaly_positive): the heart mask shows no enlargement"
            )
        else:  # section 3.2: cardiomegaly's mask is the (HybridGNet) heart mask
            result.mask, result.grounded = heart.copy(), ["heart"]
    elif not loc.labels:
        result.drop_reason = f"reported location {list(loc.outside)} has no lung anatomy mask"
    elif not boxes:
        result.drop_reason = "no candidate boxes from the detector"
    else:
        g = cfg.grounding
        right, left = organs["right lung"], organs["left lung"]  # L_r, L_l of c4 (HybridGNet)
        anomaly_set, labels = anomaly_components(lesion_type)
        m_sides = c1_sides(loc.labels, anatomy) if g.c1_bilateral == "per_lung" else None
        out = algorithm1(
            x,
            anomaly_set,
            anatomy.union(loc.labels),
            right,
            left,
            boxes,
            lesion_type,
            g,
            labels=labels,
            m_sides=m_sides,
            whole_lungs=(anatomy["right lung"], anatomy["left lung"]),
        )
        result.box_checks = [c.to_dict() for c in out.checks]
        result.kept_boxes = out.kept_boxes
        if not result.kept_boxes:
            failed = Counter(name for c in out.checks for name in c.failed)
            detail = ", ".join(f"{name} x{failed[name]}" for name in sorted(failed))
            result.drop_reason = f"no box passed c1-c4 ({len(out.checks)} boxes; failed: {detail})"
        elif not out.mask.any():
            result.drop_reason = "kept boxes touch no anomaly component that survives refinement"
        else:
            result.grounded = grounded_locations(loc.labels, anatomy, result.kept_boxes, out.mask)
            if result.grounded:
                result.mask = out.mask
            else:
                result.drop_reason = "lesion mask reaches no reported location"
    return result


def ground_study(
    *,
    study_id: str,
    image_id: str,
    x: np.ndarray,
    report: StructuredReport,
    anatomy: AnatomyMasks,
    anomaly: AnomalyResult,
    boxes: list[LesionBox],
    cfg: Config,
    view_position: str | None = None,
    crosscheck: str | None = None,
    ctr: float | None = None,
    organs: AnatomyMasks | None = None,
) -> StudyGrounding:
    """Ground every finding of a study's report in one frontal image.

    Runs quality control, Algorithm 1 for each positive finding of the seven lesion
    types (cardiomegaly: the heart mask), and location verification
    (:mod:`cxrils.grounding.locations`).

    Parameters
    ----------
    study_id, image_id : str
    x : numpy.ndarray, uint8, shape (H, W)
    report : StructuredReport
    anatomy : AnatomyMasks
        All of :data:`cxrils.vocab.ANATOMY_LABELS` at the image's resolution: the
        location masks M_i (the paper's CXAS on ``x_hat``).
    anomaly : AnomalyResult
        x_ano at the image's resolution.
    boxes : list of LesionBox
        Detector boxes (kept classes only).
    cfg : Config
        ``grounding`` thresholds (Table 7) and ``qc``.
    view_position : str, optional
        DICOM-style view ("PA", "AP", "LATERAL"...); a non-frontal view excludes the
        study (Appendix D.1). None = unknown, not excluded.
    crosscheck : str, optional
        The reason returned by ``cxrils.vision.anatomy.cross_check`` of two anatomy
        sources (Appendix D.2); a non-None value excludes the study.
    ctr : float, optional
        Cardiothoracic ratio; computed from ``anatomy`` with
        ``cxrils.vision.anatomy.cardiothoracic_ratio`` when None (None again when the
        heart or lungs are empty). The instruction stage uses it for cardiomegaly
        negatives (CTR <= 0.45, Appendix D.3).
    organs : AnatomyMasks, optional
        Right lung, left lung and heart of ``x`` (the paper's HybridGNet, section 3.1):
        L_r and L_l of condition c4 and the effusion refinement, the cardiomegaly mask
        and the CTR. Defaults to ``anatomy`` (one segmentation for everything).

    Returns
    -------
    StudyGrounding
        ``excluded`` holds the QC reason (then ``findings`` is empty). Otherwise one
        :class:`~cxrils.types.GroundedFinding` per report finding, in report order;
        those with ``mask is None`` carry ``drop_reason``. ``empty_locations`` are the
        regions no positive finding names (paper section 3.1, step 4) less, with
        ``grounding.empty_excludes_lesion_masks`` (on; ours), those a generated lesion
        mask covers (:func:`~cxrils.grounding.locations.empty_locations`).

    Raises
    ------
    TypeError
        If ``report``, ``anatomy``, ``anomaly`` or ``boxes`` is not of its type (a
        report's text for ``report``, say; the message names where one comes from).
    ValueError
        If shapes disagree, ``x`` is not uint8 (H, W), or anatomy labels are missing.
    """
    _check_inputs(x, anatomy, anomaly, report, boxes)
    organs = anatomy if organs is None else organs
    if tuple(organs.shape) != x.shape:
        raise ValueError(f"organ masks ({organs.backend}) have shape {tuple(organs.shape)}, image {x.shape}")
    provenance = {
        "anatomy": f"{anatomy.backend} {anatomy.version}".strip(),
        "anomaly": f"{anomaly.backend} {anomaly.version}".strip(),
        "grounding": dataclasses.asdict(cfg.grounding),
    }
    heart = organs["heart"]
    if ctr is None and heart.any() and organs.union(("right lung", "left lung")).any():
        from cxrils.vision.anatomy import cardiothoracic_ratio

        ctr = cardiothoracic_ratio(organs)
    base: dict[str, Any] = dict(
        study_id=study_id, image_id=image_id, shape=tuple(x.shape), ctr=ctr, heart_mask=heart, provenance=provenance
    )
    reason = (
        (f"report: {report.excluded}" if report.excluded else None)
        or frontal_view_problem(view_position, cfg)
        or crosscheck
    )
    if reason:
        return StudyGrounding(findings=[], empty_locations=[], excluded=reason, **base)
    positives = [f for f in report.findings if f.presence == "positive"]
    components: dict[tuple[float, bool], tuple[np.ndarray, np.ndarray]] = {}
    g = cfg.grounding
    hidden = None  # the effusion's hidden lung base (hidden_base), once per study

    def anomaly_components(lesion_type: str) -> tuple[np.ndarray, np.ndarray]:
        """A = x_ano >= tau_ano (joined, for an effusion, by the hidden lung base) and its
        connected-component labels, once per threshold."""
        nonlocal hidden
        key = (g.tau_ano_for(lesion_type), lesion_type == "effusion" and g.effusion_hidden_base)
        if key not in components:
            anomaly_set = anomaly.anomaly_set(key[0])
            if key[1]:
                if hidden is None:
                    hidden = hidden_base(
                        (anatomy["right lung"], anatomy["left lung"]),
                        (organs["right lung"], organs["left lung"]),
                        organs["heart"],
                        g,
                    )
                anomaly_set = anomaly_set | hidden
            components[key] = (anomaly_set, ndi.label(anomaly_set, structure=neighbourhood(g))[0])
        return components[key]

    findings = [_ground_finding(f, x, anatomy, organs, anomaly_components, boxes, cfg, ctr) for f in report.findings]
    masks = [
        gf.mask
        for gf in findings
        if gf.mask is not None and gf.finding.presence == "positive" and gf.lesion_type not in ORGAN_LESION_TYPES
    ]
    empty = empty_locations(positives, anatomy, g.empty_overlap_tol_px, masks if g.empty_excludes_lesion_masks else ())
    for gf in findings:
        gf.empty = list(empty)
    return StudyGrounding(findings=findings, empty_locations=empty, **base)


def recall_counts(groundings: Iterable[StudyGrounding]) -> dict[str, dict[str, float]]:
    """Pipeline recall per lesion type (the paper's Table 8: 28.3% on average on MIMIC).

    Counts positive findings of the seven types in non-excluded studies
    (``reported``) and those that got a mask (``grounded``).

    Returns
    -------
    dict
        ``{lesion_type: {"reported": n, "grounded": k, "recall": k / n (0 if n == 0)}}``
        for every type of :data:`cxrils.vocab.LESION_TYPES`.
    """
    reported: Counter[str] = Counter()
    grounded: Counter[str] = Counter()
    for sg in groundings:
        if sg.excluded:
            continue
        for gf in sg.findings:
            if gf.finding.presence == "positive" and gf.lesion_type:
                reported[gf.lesion_type] += 1
                grounded[gf.lesion_type] += gf.mask is not None
    return {
        t: {
            "reported": reported[t],
            "grounded": grounded[t],
            "recall": grounded[t] / reported[t] if reported[t] else 0.0,
        }
        for t in LESION_TYPES
    }


def grounding_to_dict(sg: StudyGrounding) -> dict[str, Any]:
    """JSON-ready summary of a :class:`~cxrils.types.StudyGrounding` (no mask pixels).

    Per finding: the structured finding, lesion type, reported locations (and whether
    they were implied: no lung region named), grounded and empty locations, drop
    reason, mask area in pixels, and every box with its four condition values and
    verdicts (:meth:`cxrils.grounding.BoxCheck.to_dict`).
    """
    return {
        "study_id": sg.study_id,
        "image_id": sg.image_id,
        "shape": list(sg.shape),
        "excluded": sg.excluded,
        "ctr": sg.ctr,
        "empty_locations": list(sg.empty_locations),
        "provenance": sg.provenance,
        "findings": [
            {
                "finding": gf.finding.to_dict(),
                "lesion_type": gf.lesion_type,
                "reported": list(gf.reported),
                "reported_implied": reported_locations(gf.finding).implied,
                "grounded": list(gf.grounded),
                "empty": list(gf.empty),
                "drop_reason": gf.drop_reason,
                "mask_area": int(gf.mask.sum()) if gf.mask is not None else 0,
                "kept_boxes": [b.to_dict() for b in gf.kept_boxes],
                "boxes": list(gf.box_checks),
            }
            for gf in sg.findings
        ],
    }
