"""The rules structurer against readings written before it ran: 329 report sentences.

``benchmarks/report_audit_sentences.jsonl`` holds 329 single sentences in the style of
MIMIC-CXR findings and impressions, each naming one or more of the seven lesion types,
with the reading a radiologist would give each type: presence (positive / negative),
certainty (definitive / tentative) and side (right / left / both / none; patient
sides). A helper agent of this project wrote them on 2026-12-07 from its knowledge of
report language, before running the structurer, with hard cases on purpose (negation
scope across commas and lists, resolution, change words, hedges, requests, sides); a
type that is only asked about ("evaluate for pneumonia") is listed under
``hypothetical`` instead. It is not an expert annotation, and it is **in-sample** for
the rules of stop 52, which were changed by reading its disagreements: the counts say
how far the rules follow those readings, not how they do on new text
(``benchmarks/report_mesh.py`` scores unseen IU reports against NLM's MeSH indexing).

A type's reading is compared with every finding of that type, and with a finding whose
predicted lesion type it is (an opacity "likely representing atelectasis"), at that
prediction's certainty. Side: the finding's labels and location phrases name the right,
the left or both lungs ("bilateral", "bibasilar", "both"), else none. A sentence
disagrees when a type is missing, a reading differs, or a type it does not name is
found, or one only asked about is read as present (the structurer keeps a request as a
tentative negative, which agrees).

Usage::

    PYTHONPATH=src python -m benchmarks.report_audit [--publish report_audit]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from benchmarks.results import benchmark_parser, publish_if_asked

SENTENCES = Path(__file__).with_name("report_audit_sentences.jsonl")


def side(labels: list[str], locations: list[str]) -> str:
    """ "right", "left", "both" or "none": the patient sides a finding's labels and
    location phrases name ("bilateral", "bibasilar" and "both" name both)."""
    s = " ".join(labels + locations).lower()
    right, left = "right" in s, "left" in s or "lingula" in s
    if "bibasilar" in s or "bilateral" in s or "both" in s:
        right = left = True
    return "both" if right and left else "right" if right else "left" if left else "none"


def readings(structurer, text: str) -> dict[str, list[tuple[str, str, str]]]:
    """Per lesion type, the (presence, certainty, side) of each finding of that type or
    predicting it."""
    from cxrils.report import structure_report

    out: dict[str, list[tuple[str, str, str]]] = {}
    for f in structure_report("audit", "FINDINGS: " + text, structurer=structurer).findings:
        where = side(list(f.labels), list(f.locations))
        if f.lesion_type:
            out.setdefault(f.lesion_type, []).append((f.presence, f.certainty, where))
        if f.predicted_lesion_type and f.predicted_lesion_type != f.lesion_type:
            certainty = f.inference_certainty or f.certainty
            out.setdefault(f.predicted_lesion_type, []).append((f.presence, certainty, where))
    return out


def score(items: list[dict], structurer) -> Counter:
    """Counts of disagreements by kind, and of sentences with any."""
    n: Counter = Counter(sentences=len(items))
    for item in items:
        got = readings(structurer, item["text"])
        kinds = set()
        for t, want in item["expect"].items():
            found = got.pop(t, None)
            if not found:
                kinds.add("missing")
                continue
            for presence, certainty, where in found:
                if presence != want["presence"]:
                    kinds.add("presence")
                if certainty != want["certainty"]:
                    kinds.add("certainty")
                if where != want["side"]:
                    kinds.add("side")
        for t, found in got.items():
            if t not in item.get("hypothetical", []):
                kinds.add("extra")
            elif any(presence == "positive" for presence, _, _ in found):  # a request read as a finding
                kinds.add("hypothetical found")
        n.update(kinds)
        n["with any disagreement"] += bool(kinds)
    return n


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n")[0], page="report_audit")
    args = ap.parse_args()
    from cxrils.config import load_config
    from cxrils.report import get_structurer

    items = [json.loads(line) for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    n = score(items, get_structurer("rules", load_config()))
    rows = [
        ("sentences with any disagreement", "with any disagreement"),
        ("a named type not found", "missing"),
        ("presence differs", "presence"),
        ("certainty differs", "certainty"),
        ("side differs", "side"),
        ("a type the sentence does not name found", "extra"),
        ("a type only asked about read as present", "hypothetical found"),
    ]
    lines = [
        f"{n['sentences']} sentences written with their readings before the structurer ran "
        "(in-sample for the stop-52 rules; module docstring).",
        "",
        "| sentences where | count |",
        "|---|---|",
        *(f"| {label} | {n[key]} |" for label, key in rows),
    ]
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
