"""Exact-match text accuracy (paper section 5, Table 6): template and every variable."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.evaluation import EvalSample, answer_correct, evaluate
from cxrils.templates import TemplateError, render_answer

REF_ANSWERS = {
    "basic_positive": render_answer("basic", "positive"),
    "basic_negative": render_answer("basic", "negative", target="edema", locations=["right lung base"]),
    "global_positive": render_answer("global", "positive", locations=["right lung base", "left lung base"]),
    "global_negative": render_answer("global", "negative", target="effusion"),
    "inference_positive": render_answer("lesion_inference", "positive", lesion="pneumonia", certainty="definitive"),
    "inference_negative": render_answer("lesion_inference", "negative", locations=["left mid zone lung"]),
}

# Each differs from the reference of the same key in exactly one variable (or the template).
ONE_OFF = {
    "basic_positive": [render_answer("basic", "negative", target="edema", locations=["right lung base"])],
    "basic_negative": [
        render_answer("basic", "negative", target="effusion", locations=["right lung base"]),
        render_answer("basic", "negative", target="edema", locations=["left lung base"]),
        render_answer("basic", "negative", target="edema", locations=["right lung base", "left lung base"]),
    ],
    "global_positive": [
        render_answer("global", "positive", locations=["right lung base"]),
        render_answer("global", "negative", target="effusion"),
    ],
    "global_negative": [render_answer("global", "negative", target="edema"), render_answer("basic", "positive")],
    "inference_positive": [
        render_answer("lesion_inference", "positive", lesion="atelectasis", certainty="definitive"),
        render_answer("lesion_inference", "positive", lesion="pneumonia", certainty="tentative"),
    ],
    "inference_negative": [
        render_answer("lesion_inference", "negative", locations=["right mid zone lung"]),
        render_answer("lesion_inference", "positive", lesion="edema", certainty="tentative"),
    ],
}


@pytest.mark.parametrize("key", sorted(REF_ANSWERS))
def test_identical_answer_is_correct(key: str) -> None:
    ref = REF_ANSWERS[key]
    assert answer_correct(ref, ref)
    assert answer_correct(f"  {ref} ", ref)  # surrounding whitespace is trimmed by the parser


@pytest.mark.parametrize("key", sorted(ONE_OFF))
def test_answer_differing_in_one_variable_is_wrong(key: str) -> None:
    for wrong in ONE_OFF[key]:
        assert wrong != REF_ANSWERS[key]
        assert not answer_correct(wrong, REF_ANSWERS[key]), wrong


def test_unparseable_or_missing_prediction_is_wrong() -> None:
    ref = REF_ANSWERS["basic_negative"]
    for bad in (
        None,
        "",
        "There is no edema in the right lung base.",
        ref.lower(),
        ref + " Also effusion.",
        "[SEG] There is no edema in the right lower lung.",
    ):
        assert not answer_correct(bad, ref), bad


def test_identical_text_of_two_templates_scores_as_the_same_answer() -> None:
    # "Segment the opacity in X" (basic) and lesion inference share the negative answer
    # text; both sides parse the same way, so an identical string is correct.
    ref = render_answer("basic", "negative", target="opacity", locations=["left mid zone lung"])
    assert ref == REF_ANSWERS["inference_negative"]
    assert answer_correct(REF_ANSWERS["inference_negative"], ref)


def test_unparseable_reference_is_an_error() -> None:
    with pytest.raises(TemplateError):
        answer_correct("[SEG]", "a free-text answer")


def test_text_accuracy_grouped_by_instruction_type_and_polarity() -> None:
    empty = np.zeros((4, 4), bool)
    full = np.ones((4, 4), bool)
    samples = []
    for key, ref in REF_ANSWERS.items():
        itype = "lesion_inference" if key.startswith("inference") else key.split("_")[0]
        pol = key.split("_")[1]
        ref_mask = full if pol == "positive" else empty
        samples.append(EvalSample(ref_mask, ref_mask, ref, ref, "pneumonia", itype, pol))
        samples.append(EvalSample(ref_mask, ref_mask, ONE_OFF[key][0], ref, "pneumonia", itype, pol))
    samples.append(EvalSample(full, full, None, REF_ANSWERS["basic_positive"], "edema", "basic", "positive"))
    report = evaluate(samples)
    t6 = report.table6()
    assert t6["basic"]["positive"] == {"accuracy": 1 / 3, "n_correct": 1, "n": 3}
    assert t6["global"]["negative"] == {"accuracy": 0.5, "n_correct": 1, "n": 2}
    assert t6["all"]["all"] == {"accuracy": 6 / 13, "n_correct": 6, "n": 13}
    t14 = report.table14()
    assert t14["edema"]["basic"]["positive"] == {"accuracy": 0.0, "n_correct": 0, "n": 1}
    assert t14["pneumonia"]["lesion_inference"]["all"] == {"accuracy": 0.5, "n_correct": 2, "n": 4}
    assert t14["cardiomegaly"]["global"]["all"]["accuracy"] is None
    assert report.table4()["text_accuracy"] == 6 / 13
    # segmentation metrics are unaffected by answers
    assert report.table4()["gIoU"] == 1.0 and report.table4()["n_acc"] == 1.0
