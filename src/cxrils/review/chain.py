"""The chain that produced a record, for the reviewer: report sentence -> structured
finding -> location labels -> lesion boxes and Algorithm 1's verdicts -> grounded and
empty locations.

It is read from the study's grounding file (``grounding/{image_id}.json``,
:func:`cxrils.dataset.read_grounding`): the record's ``source_findings`` (entity,
sentence index, sentence) name the findings it came from. Identical duplicates (the
same entity named twice in one sentence) are shown once. Sides are the patient's: the
"right lung" is on the image's left; boxes are ``(x0, y0, x1, y1)`` pixels of the
stored image (x = column).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Algorithm 1's conditions (paper section 3.1, Table 7), as the page names them.
CONDITIONS: dict[str, str] = {
    "c1": "box on the reported location: IoU with its anatomy mask >= tau_anatomy",
    "c2": "detector confidence >= tau_conf",
    "c3": "anomaly inside the box: |B ∩ A| / |B| >= tau_signal",
    "c4": "box large enough: IoU with the right or the left lung >= tau_size",
}
#: Grounding thresholds shown beside the conditions (``GroundingConfig`` names).
THRESHOLDS: tuple[str, ...] = (
    "tau_anatomy",
    "tau_conf",
    "tau_conf_edema",
    "tau_signal",
    "tau_size",
    "tau_ano",
    "tau_ano_edema",
    "c1_bilateral",
)


def _sources(record: Mapping[str, Any]) -> list[dict]:
    try:
        sources = json.loads(record.get("source_findings") or "[]")
    except (TypeError, json.JSONDecodeError):
        return []
    return [s for s in sources if isinstance(s, dict)]


def _box(check: dict) -> dict:
    """One candidate box of Algorithm 1: coordinates, class, values and verdicts."""
    out = {
        "box": [round(float(v), 1) for v in check.get("box", [])],
        "class_name": check.get("class_name", ""),
        "kept": bool(check.get("kept")),
        "failed": list(check.get("failed", [])),
    }
    for key in (
        "c1_iou_anatomy",
        "c1_iou_right_part",
        "c1_iou_left_part",
        "c2_confidence",
        "c3_signal",
        "c4_iou_right_lung",
        "c4_iou_left_lung",
    ):
        if key in check:
            out[key] = round(float(check[key]), 3)
    out.update({c: bool(check.get(c)) for c in CONDITIONS})
    return out


def _finding(f: dict) -> dict:
    s = f.get("finding", {})
    return {
        "entity": s.get("entity", ""),
        "sentence_index": s.get("sentence_index", 0),
        "sentence": s.get("sentence", ""),
        "presence": s.get("presence", ""),
        "certainty": s.get("certainty", ""),
        "lesion_type": f.get("lesion_type"),
        "entity_lesion_type": s.get("lesion_type"),
        "predicted_lesion_type": s.get("predicted_lesion_type"),
        "inference_certainty": s.get("inference_certainty"),
        "report_locations": list(s.get("locations", [])),
        "labels": list(s.get("labels", [])),
        "reported": list(f.get("reported", [])),
        "reported_implied": bool(f.get("reported_implied")),
        "boxes": [_box(b) for b in f.get("boxes", [])],
        "grounded": list(f.get("grounded", [])),
        "mask_area": int(f.get("mask_area", 0)),
        "drop_reason": f.get("drop_reason"),
    }


def record_chain(record: Mapping[str, Any], grounding: dict | None) -> dict:
    """The chain of one record (module docstring).

    Parameters
    ----------
    record : mapping
        A dataset record (columns of :data:`cxrils.dataset.schema.COLUMNS`).
    grounding : dict or None
        The study's grounding file, None when the dataset has none.

    Returns
    -------
    dict
        ``recorded`` (whether a grounding file exists), ``note`` (what the chain is, in
        words), ``findings`` (per source finding: the structured finding, its location
        labels, reported / grounded labels, every candidate box with c1-c4 values and
        verdicts, the drop reason), ``empty_locations`` (the study's, lung-region
        labels), ``ctr``, ``report`` (section used and its text), ``thresholds`` and
        ``conditions`` (what c1-c4 test).
    """
    sources = _sources(record)
    lesion = str(record.get("lesion_type", ""))
    out: dict[str, Any] = {
        "recorded": grounding is not None,
        "findings": [],
        "empty_locations": [],
        "ctr": None,
        "report": None,
        "thresholds": {},
        "conditions": CONDITIONS,
    }
    if grounding is None:
        out["note"] = (
            "this dataset holds no grounding file for the image (written before cxrils stored them, "
            "imported, or built by hand): only the record's own fields are shown"
        )
        return out
    seen: set[str] = set()
    for src in sources:
        for f in grounding.get("findings", []):
            s = f.get("finding", {})
            if (s.get("entity"), s.get("sentence_index"), s.get("sentence")) != (
                src.get("entity"),
                src.get("sentence_index"),
                src.get("sentence"),
            ):
                continue
            item = _finding(f)
            key = json.dumps(item, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out["findings"].append(item)
    out["empty_locations"] = list(grounding.get("empty_locations", []))
    out["ctr"] = grounding.get("ctr")
    out["report"] = grounding.get("report")
    settings = (grounding.get("provenance") or {}).get("grounding") or {}
    out["thresholds"] = {k: settings[k] for k in THRESHOLDS if k in settings}
    polarity = str(record.get("polarity", ""))
    if polarity == "positive":
        out["note"] = "the mask is the union of the kept boxes' anomaly components, refined (Algorithm 1)"
    elif not sources:
        out["note"] = (
            f"no {lesion} finding in the report: a negative of an absent lesion type, asked globally "
            "or at a drawn location (Appendix C.2)"
        )
    elif any(f["presence"] == "negative" for f in out["findings"]) and not any(
        f["presence"] == "positive" for f in out["findings"]
    ):
        out["note"] = f"the report states {lesion} absent (a negated finding)"
    else:
        locs = ", ".join(record.get("locations", [])) or "-"
        out["note"] = (
            f"{lesion} is reported elsewhere; the asked location ({locs}) is empty: no positive "
            "finding's reported or grounded region touches it (section 3.1)"
        )
    return out
