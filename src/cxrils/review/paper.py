"""The paper's expert evaluation, as reported, for side-by-side comparison.

Section 3.3 / Table 3 and Appendix E.4 / Table 13 of arXiv 2511.15186 (MIMIC-ILS),
restated from the paper description in ``/work/shared/reference`` (the lines quoted
below). Four radiation oncologists (experts A-D) each judged test-set samples
"acceptable" or "not acceptable" from the image, the lesion type, the mapped location
text and the report; a sample any of them rejected left the test set.

How the authors counted (``check_rejection.py`` of KAIST-Edlab/ROSALIA): a rate is
``1 - rejected / reviewed``, per expert and for positives ("presence"), negatives
("absence") and both; a positive sample is one grounded lesion (its target and
locations), a negative one question.

Only the numbers the reference states are here; Table 13's other cells are not.
"""

from __future__ import annotations

#: Table 3, all experts: acceptance as a fraction. "across 10,701 initially reviewed
#: samples, the overall acceptance rate was 96.4% ... Positive samples ... (90.1%
#: overall) than negative samples (97.7%)".
TABLE3_ACCEPTANCE: dict[str, float] = {"all": 0.964, "positive": 0.901, "negative": 0.977}
#: Table 3: samples reviewed, all experts together.
TABLE3_REVIEWED = 10_701
#: Table 3: "individual expert rates ranging from 96.1% to 98.7%" (all samples).
TABLE3_EXPERT_RANGE: tuple[float, float] = (0.961, 0.987)

#: Table 13 (Appendix E.4), positive acceptance per lesion type and expert, where the
#: reference gives it: "For atelectasis, Expert B's positive acceptance rate (79.9%) is
#: far below the other experts (97.2%, 100.0%, 99.3%). For effusion, Expert A (89.8%)
#: and Expert B (89.3%) are markedly more stringent than Expert C (99.5%). For edema,
#: Expert D (89.8%) differs from Expert C (100.0%)". Atelectasis' other three experts
#: are not named there, so they are listed without letters.
TABLE13_POSITIVE: dict[str, dict[str, float | tuple[float, ...]]] = {
    "atelectasis": {"B": 0.799, "other experts": (0.972, 1.000, 0.993)},
    "effusion": {"A": 0.898, "B": 0.893, "C": 0.995},
    "edema": {"C": 1.000, "D": 0.898},
}
#: Table 13 in words, for the types the reference gives no per-expert number: "effusion
#: and pneumonia had the lowest positive acceptance rates (roughly 89-90% for some
#: experts), while cardiomegaly and consolidation were most consistently accepted
#: (97-100%)".
TABLE13_NOTES: dict[str, str] = {
    "pneumonia": "among the lowest: roughly 89-90% for some experts",
    "cardiomegaly": "most consistently accepted: 97-100%",
    "consolidation": "most consistently accepted: 97-100%",
}
#: Where the numbers come from, printed under every comparison.
SOURCE = (
    "paper (arXiv 2511.15186) Section 3.3 / Table 3 and Appendix E.4 / Table 13, as restated in the "
    "reference description; four radiation oncologists, MIMIC-ILS test set"
)


def table13_text(lesion_type: str) -> str:
    """The paper's positive acceptance of one lesion type in words ("A 89.8%, B 89.3%,
    C 99.5%"), or "" when the reference gives nothing for it."""
    if lesion_type in TABLE13_POSITIVE:
        parts = []
        for who, value in TABLE13_POSITIVE[lesion_type].items():
            if isinstance(value, tuple):
                parts.append(f"{who} " + ", ".join(f"{100 * v:.1f}%" for v in value))
            else:
                parts.append(f"{who} {100 * value:.1f}%")
        return "; ".join(parts)
    return TABLE13_NOTES.get(lesion_type, "")
