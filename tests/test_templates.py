"""cxrils.templates: Table 2 render/parse round trips and location phrases."""

from __future__ import annotations

import itertools

import pytest

from cxrils import vocab
from cxrils.templates import (
    TemplateError,
    location_phrase,
    parse_answer,
    parse_instruction,
    parse_location_phrase,
    render_answer,
    render_instruction,
)

LOCATION_SETS = [
    ("right lung",),
    ("left lung base",),
    ("left lung base", "right lung base"),
    ("left mid zone lung", "right upper zone lung", "right mid zone lung"),
    vocab.INSTRUCTION_LOCATIONS,
]


def test_location_phrase_canonical_order() -> None:
    assert location_phrase(["right lung base"]) == "right lung base"
    assert location_phrase(["left lung base", "right lung base"]) == "right lung base and left lung base"
    assert location_phrase(["left lung base", "right mid zone lung", "right upper zone lung"]) == (
        "right upper zone lung, right mid zone lung and left lung base"
    )
    # Order and duplicates do not matter.
    for locs in LOCATION_SETS:
        phrases = {location_phrase(p) for p in itertools.islice(itertools.permutations(locs), 6)}
        assert len(phrases) == 1
        assert location_phrase(list(locs) + list(locs)) == phrases.pop()
        assert set(parse_location_phrase(location_phrase(locs))) == set(locs)


def test_location_phrase_errors() -> None:
    with pytest.raises(TemplateError, match="at least one"):
        location_phrase([])
    with pytest.raises(TemplateError, match="not instruction locations"):
        location_phrase(["right lower lobe"])
    for bad in (
        "lung lower lobe left",  # a lobe is written as a radiologist writes it
        "right lung base, left lung base",  # missing "and"
        "right lung base and right lung base",  # duplicate
        "right lung base, and left lung base",  # ", and" needs three items
        "right lung, left lung base, and",  # nothing after the joiner
        "right lung base and left lung base and left mid zone lung",  # "and" only before the last
        "middle of nowhere",
    ):
        with pytest.raises(TemplateError):
            parse_location_phrase(bad)


def test_location_lists_in_any_order_and_the_papers_joiners() -> None:
    # The authors' released test sheets (KAIST-Edlab/ROSALIA final_sheet/*.csv at
    # e38fdb2, removed in cb20db5) write lists in the grounded order, e.g.
    # "left lung base and left mid zone lung", "left lung and right lung",
    # "left upper zone lung, right lung base and left mid zone lung".
    assert parse_location_phrase("left lung and right lung") == ("right lung", "left lung")
    assert parse_location_phrase("left lung base and left mid zone lung") == ("left mid zone lung", "left lung base")
    three = ("right lung base", "left upper zone lung", "left mid zone lung")
    assert parse_location_phrase("left upper zone lung, right lung base and left mid zone lung") == three
    assert parse_location_phrase("left upper zone lung, right lung base, and left mid zone lung") == three
    assert parse_location_phrase("right lower lobe and left lung base") == ("left lung base", "lung lower lobe right")
    p = parse_answer("[SEG] It is located in the left lung and right lung.")
    assert (
        p.locations
        == ("right lung", "left lung")
        == parse_answer("[SEG] It is located in the right lung and left lung.").locations
    )
    ins = parse_instruction("Segment the opacity in the left lung base and left mid zone lung and predict its type.")
    assert (ins.instruction_type, ins.locations) == ("lesion_inference", ("left mid zone lung", "left lung base"))


def test_lobes_are_phrased_as_radiologists_write_them() -> None:
    # CXAS lobe labels (vocab.LOBES) <-> "right lower lobe"; after the Table 9 locations.
    assert location_phrase(["lung lower lobe left"]) == "left lower lobe"
    assert location_phrase(["lung upper lobe right", "lung middle lobe right"]) == (
        "right upper lobe and right middle lobe"
    )
    assert location_phrase(["lung lower lobe right", "left lung base"]) == "left lung base and right lower lobe"
    assert parse_location_phrase("left lung base and right lower lobe") == ("left lung base", "lung lower lobe right")
    text = render_instruction("basic", "pneumonia", ["lung lower lobe left"])
    assert text == "Segment the pneumonia in the left lower lobe."
    parsed = parse_instruction(text)
    assert (parsed.instruction_type, parsed.target, parsed.locations) == (
        "basic",
        "pneumonia",
        ("lung lower lobe left",),
    )
    assert render_answer("basic", "negative", "pneumonia", ["lung lower lobe left"]) == (
        "[SEG] There is no pneumonia in the left lower lobe."
    )
    assert parse_answer("[SEG] There is no opacity in the right middle lobe.").locations == ("lung middle lobe right",)
    for label in vocab.LOBES:
        assert parse_location_phrase(location_phrase([label])) == (label,)


def test_instruction_texts_are_table_2() -> None:
    assert render_instruction("basic", "edema", ["left lung"]) == "Segment the edema in the left lung."
    assert render_instruction("global", "effusion") == "Segment the effusion."
    assert render_instruction("lesion_inference", None, ["right lung base"]) == (
        "Segment the opacity in the right lung base and predict its type."
    )


def test_instruction_round_trips() -> None:
    for target in vocab.LESION_TYPES:
        for locs in LOCATION_SETS:
            p = parse_instruction(render_instruction("basic", target, locs))
            assert (p.instruction_type, p.target, set(p.locations)) == ("basic", target, set(locs))
        p = parse_instruction(render_instruction("global", target))
        assert (p.instruction_type, p.target, p.locations) == ("global", target, ())
    for locs in LOCATION_SETS:
        p = parse_instruction(render_instruction("lesion_inference", None, locs))
        assert (p.instruction_type, p.target, set(p.locations)) == ("lesion_inference", "opacity", set(locs))


def test_answer_texts_are_table_2() -> None:
    assert render_answer("basic", "positive") == "[SEG]"
    assert render_answer("basic", "negative", "edema", ["left lung"]) == "[SEG] There is no edema in the left lung."
    assert render_answer("global", "positive", "edema", ["left lung", "right lung"]) == (
        "[SEG] It is located in the right lung and left lung."
    )
    assert render_answer("global", "negative", "effusion") == "[SEG] There is no effusion."
    assert render_answer("lesion_inference", "positive", lesion="edema", certainty="definitive") == (
        "[SEG] It is highly suggestive of edema."
    )
    assert render_answer("lesion_inference", "positive", lesion="atelectasis", certainty="tentative") == (
        "[SEG] It possibly reflects atelectasis."
    )
    assert render_answer("lesion_inference", "negative", locations=["right lung"]) == (
        "[SEG] There is no opacity in the right lung."
    )


def test_answer_round_trips() -> None:
    for target in vocab.LESION_TYPES:
        for locs in LOCATION_SETS:
            p = parse_answer(render_answer("basic", "negative", target, locs), "basic")
            assert (p.instruction_type, p.polarity, p.target, set(p.locations)) == (
                "basic",
                "negative",
                target,
                set(locs),
            )
            p = parse_answer(render_answer("global", "positive", target, locs))
            assert (p.instruction_type, p.polarity, set(p.locations)) == ("global", "positive", set(locs))
        p = parse_answer(render_answer("global", "negative", target))
        assert (p.instruction_type, p.polarity, p.target) == ("global", "negative", target)
    assert parse_answer("[SEG]").polarity == "positive"
    for lesion in vocab.INFERENCE_LESION_TYPES:
        for certainty in vocab.CERTAINTIES:
            p = parse_answer(render_answer("lesion_inference", "positive", lesion=lesion, certainty=certainty))
            assert (p.instruction_type, p.polarity, p.lesion, p.certainty) == (
                "lesion_inference",
                "positive",
                lesion,
                certainty,
            )
    for locs in LOCATION_SETS:
        p = parse_answer(render_answer("lesion_inference", "negative", locations=locs))
        assert (p.instruction_type, p.polarity, set(p.locations)) == ("lesion_inference", "negative", set(locs))


def test_opacity_negative_is_ambiguous_without_hint() -> None:
    text = render_answer("basic", "negative", "opacity", ["right lung"])
    assert text == render_answer("lesion_inference", "negative", locations=["right lung"])  # Table 2
    assert parse_answer(text).instruction_type == "lesion_inference"
    assert parse_answer(text, "basic").instruction_type == "basic"
    with pytest.raises(TemplateError, match="no template"):
        parse_answer("[SEG] There is no effusion in the right lung.", "global")
    with pytest.raises(TemplateError, match="unknown instruction type"):
        parse_answer("[SEG]", "segment")


@pytest.mark.parametrize(
    "call",
    [
        lambda: render_instruction("basic", "tumour", ["right lung"]),
        lambda: render_instruction("basic", "edema", []),
        lambda: render_instruction("global", None),
        lambda: render_instruction("describe", "edema"),
        lambda: render_answer("basic", "maybe", "edema", ["right lung"]),
        lambda: render_answer("lesion_inference", "positive", lesion="effusion", certainty="definitive"),
        lambda: render_answer("lesion_inference", "positive", lesion="edema", certainty="likely"),
        lambda: render_answer("global", "positive", "edema", []),
    ],
)
def test_render_errors(call) -> None:
    with pytest.raises(TemplateError):
        call()


@pytest.mark.parametrize(
    "text",
    [
        "Segment the tumour in the right lung.",
        "Segment the edema in the right lower lobes.",
        "segment the edema.",
        "Segment the edema",
        "Please segment the edema.",
    ],
)
def test_parse_instruction_errors(text: str) -> None:
    with pytest.raises(TemplateError):
        parse_instruction(text)


@pytest.mark.parametrize(
    "text",
    [
        "[SEG] There is no tumour.",
        "[SEG] It is highly suggestive of effusion.",
        "There is no edema.",
        "[SEG] [SEG]",
    ],
)
def test_parse_answer_errors(text: str) -> None:
    with pytest.raises(TemplateError):
        parse_answer(text)
