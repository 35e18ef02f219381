"""Instruction-answer generation rules (paper section 3.2, Table 2, Appendix C)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib

import numpy as np
import pytest
from ils_studies import (
    ATELECTASIS_MASK,
    HEART_MASK,
    PNEUMONIA_MASK,
    SHAPE,
    box,
    finding,
    grounded,
    multi_lesion_study,
    no_cardiomegaly_study,
)

from cxrils import templates, vocab
from cxrils.config import Config
from cxrils.dataset.schema import COLUMNS
from cxrils.instructions import InstructionError, generate_records, record_seed
from cxrils.masks import decode_rle
from cxrils.types import Finding, StudyGrounding

TYPES_WITHOUT_CM = [t for t in vocab.LESION_TYPES if t != "cardiomegaly"]


def gen(g: StudyGrounding, cfg: Config | None = None) -> list[dict]:
    return generate_records(
        g, split="train", patient_id="p1", image_path=f"images/{g.image_id}.png", cfg=cfg or Config()
    )


def key(r: dict) -> tuple:
    return (
        r["lesion_type"],
        r["instruction_type"],
        r["polarity"],
        r["instruction"],
        r["answer"],
        r["certainty"],
        tuple(r["locations"]),
    )


def only_global_absent() -> Config:
    """Absent types asked globally, opacity negatives in the basic form: no random form."""
    cfg = Config()
    cfg.instructions.absent_negative_global_prob = 1.0
    cfg.instructions.lesion_inference_negative_prob = 0.0
    return cfg


def check_consistent(records: list[dict]) -> None:
    """Every record has the schema columns and texts that parse back to its fields."""
    for r in records:
        assert set(r) == set(COLUMNS)
        ins, ans = templates.parse_instruction(r["instruction"]), templates.parse_answer(r["answer"])
        assert ins.instruction_type == r["instruction_type"]
        # Table 2 makes "[SEG] There is no opacity in the X." both the basic negative of
        # target opacity and the lesion-inference negative; the parser reads the latter.
        opacity_basic_negative = (
            r["target"] == "opacity" and r["instruction_type"] == "basic" and r["polarity"] == "negative"
        )
        assert ans.instruction_type == ("lesion_inference" if opacity_basic_negative else r["instruction_type"])
        assert ans.polarity == r["polarity"]
        assert ins.target == r["target"]
        mask = decode_rle(r["mask"])
        assert mask.shape == SHAPE and int(mask.sum()) == r["mask_area"]
        assert (r["mask_area"] > 0) == (r["polarity"] == "positive")
        if r["instruction_type"] != "global":
            assert tuple(r["locations"]) == ins.locations
        elif r["polarity"] == "positive":
            assert tuple(r["locations"]) == ans.locations


@pytest.mark.parametrize("li_prob", [0.0, 1.0])
def test_multi_lesion_study_exact_records(li_prob):
    cfg = only_global_absent()
    cfg.instructions.lesion_inference_negative_prob = li_prob
    records = gen(multi_lesion_study(), cfg)
    check_consistent(records)
    L = "left apical zone lung"  # the only empty location an instruction can name
    expected = {
        # tentative pneumonia: "opacity" in basic, certainty carried by the inference answer
        (
            "pneumonia",
            "basic",
            "positive",
            "Segment the opacity in the right upper zone lung.",
            "[SEG]",
            "tentative",
            ("right upper zone lung",),
        ),
        (
            "pneumonia",
            "lesion_inference",
            "positive",
            "Segment the opacity in the right upper zone lung and predict its type.",
            "[SEG] It possibly reflects pneumonia.",
            "tentative",
            ("right upper zone lung",),
        ),
        # bibasilar atelectasis grounded on the right only: basic there, no global
        (
            "atelectasis",
            "basic",
            "positive",
            "Segment the atelectasis in the right lung base.",
            "[SEG]",
            "definitive",
            ("right lung base",),
        ),
        (
            "atelectasis",
            "lesion_inference",
            "positive",
            "Segment the opacity in the right lung base and predict its type.",
            "[SEG] It is highly suggestive of atelectasis.",
            "definitive",
            ("right lung base",),
        ),
        # reported cardiomegaly: global only, heart mask
        (
            "cardiomegaly",
            "global",
            "positive",
            "Segment the cardiomegaly.",
            "[SEG] It is located in the heart.",
            "definitive",
            ("heart",),
        ),
        # present types: negatives at the empty location (one per type)
        (
            "pneumonia",
            "basic",
            "negative",
            f"Segment the pneumonia in the {L}.",
            f"[SEG] There is no pneumonia in the {L}.",
            "",
            (L,),
        ),
        (
            "atelectasis",
            "basic",
            "negative",
            f"Segment the atelectasis in the {L}.",
            f"[SEG] There is no atelectasis in the {L}.",
            "",
            (L,),
        ),
        # opacity's one negative: basic, or lesion inference (the released sheet's two forms)
        (
            "opacity",
            "basic",
            "negative",
            f"Segment the opacity in the {L}.",
            f"[SEG] There is no opacity in the {L}.",
            "",
            (L,),
        )
        if li_prob == 0.0
        else (
            "opacity",
            "lesion_inference",
            "negative",
            f"Segment the opacity in the {L} and predict its type.",
            f"[SEG] There is no opacity in the {L}.",
            "",
            (L,),
        ),
        # absent (never mentioned) and negated types: one global negative each
        (
            "consolidation",
            "global",
            "negative",
            "Segment the consolidation.",
            "[SEG] There is no consolidation.",
            "",
            (),
        ),
        ("edema", "global", "negative", "Segment the edema.", "[SEG] There is no edema.", "", ()),
        ("effusion", "global", "negative", "Segment the effusion.", "[SEG] There is no effusion.", "", ()),
    }
    assert {key(r) for r in records} == expected
    assert len(records) == len(expected)
    assert [r["record_id"] for r in records] == [f"img1:{i}" for i in range(len(records))]
    by_key = {key(r)[:4]: r for r in records}
    pna = by_key[("pneumonia", "basic", "positive", "Segment the opacity in the right upper zone lung.")]
    assert np.array_equal(decode_rle(pna["mask"]), PNEUMONIA_MASK)
    assert pna["sentence"] == "Possible right upper zone pneumonia." and pna["sentence_index"] == 1
    atel = by_key[("atelectasis", "basic", "positive", "Segment the atelectasis in the right lung base.")]
    assert np.array_equal(decode_rle(atel["mask"]), ATELECTASIS_MASK)
    cm = by_key[("cardiomegaly", "global", "positive", "Segment the cardiomegaly.")]
    assert np.array_equal(decode_rle(cm["mask"]), HEART_MASK) and cm["finding_entity"] == "cardiomegaly"
    eff = by_key[("effusion", "global", "negative", "Segment the effusion.")]
    assert eff["sentence"] == "No pleural effusion." and eff["finding_entity"] == "effusion"
    cons = by_key[("consolidation", "global", "negative", "Segment the consolidation.")]
    assert cons["sentence"] == "" and cons["sentence_index"] == 0


def test_multi_lesion_study_forbidden_records_never_appear():
    for seed in range(20):
        cfg = Config()
        cfg.instructions.seed = seed
        records = gen(
            multi_lesion_study(empty=("left apical zone lung", "left mid zone lung", "lung upper lobe left")), cfg
        )
        check_consistent(records)
        texts = [r["instruction"] for r in records]
        assert len(texts) == len(set(texts))
        for r in records:
            # no global for the partially grounded atelectasis, nor for tentative pneumonia
            assert not (r["instruction_type"] == "global" and r["lesion_type"] in ("atelectasis", "pneumonia"))
            # the tentative pneumonia is never named as pneumonia in a positive
            assert not (r["polarity"] == "positive" and "Segment the pneumonia" in r["instruction"])
            # nothing claims the ungrounded left base
            assert not (r["polarity"] == "positive" and "left" in r["instruction"])
            # cardiomegaly is reported: no negative; global instructions only
            assert not (r["lesion_type"] == "cardiomegaly" and r["polarity"] == "negative")
            assert not (r["lesion_type"] == "cardiomegaly" and r["instruction_type"] != "global")
            # negatives of present types only at eligible empty zones (an empty lobe
            # does not make "left lung" empty)
            if r["polarity"] == "negative" and r["lesion_type"] in ("pneumonia", "atelectasis", "opacity"):
                assert r["locations"] and set(r["locations"]) <= {"left apical zone lung", "left mid zone lung"}
            # lesion inference for pneumonia, atelectasis, edema only; its negative is
            # one form of opacity's negative
            if r["instruction_type"] == "lesion_inference":
                want = vocab.INFERENCE_LESION_TYPES if r["polarity"] == "positive" else ("opacity",)
                assert r["lesion_type"] in want
        # at most one negative per type (the released sheet: one opacity negative per
        # study, basic or lesion inference)
        negs = [r["lesion_type"] for r in records if r["polarity"] == "negative"]
        assert len(negs) == len(set(negs))
        assert set(negs) == {"pneumonia", "atelectasis", "opacity", "consolidation", "edema", "effusion"}


def test_cardiomegaly_negative_depends_on_ctr():
    def cm_negatives(ctr):
        return [r for r in gen(no_cardiomegaly_study(ctr), only_global_absent()) if r["lesion_type"] == "cardiomegaly"]

    allowed = cm_negatives(0.40)
    assert [key(r) for r in allowed] == [
        ("cardiomegaly", "global", "negative", "Segment the cardiomegaly.", "[SEG] There is no cardiomegaly.", "", ())
    ]
    assert len(cm_negatives(0.45)) == 1  # Appendix D.3: CTR <= 0.45
    assert cm_negatives(0.50) == []
    assert cm_negatives(None) == []  # unknown CTR: never


def test_effusion_study_exact_records():
    records = gen(no_cardiomegaly_study(0.40), only_global_absent())
    check_consistent(records)
    expected = {
        (
            "effusion",
            "basic",
            "positive",
            "Segment the effusion in the right lung base.",
            "[SEG]",
            "definitive",
            ("right lung base",),
        ),
        (
            "effusion",
            "global",
            "positive",
            "Segment the effusion.",
            "[SEG] It is located in the right lung base.",
            "definitive",
            ("right lung base",),
        ),
        (
            "effusion",
            "basic",
            "negative",
            "Segment the effusion in the left lung.",
            "[SEG] There is no effusion in the left lung.",
            "",
            ("left lung",),
        ),
        # an effusion is an opacity on the image: opacity is present, negative at the empty lung
        (
            "opacity",
            "basic",
            "negative",
            "Segment the opacity in the left lung.",
            "[SEG] There is no opacity in the left lung.",
            "",
            ("left lung",),
        ),
        ("cardiomegaly", "global", "negative", "Segment the cardiomegaly.", "[SEG] There is no cardiomegaly.", "", ()),
    } | {
        (t, "global", "negative", f"Segment the {t}.", f"[SEG] There is no {t}.", "", ())
        for t in ("pneumonia", "atelectasis", "consolidation", "edema")
    }
    assert {key(r) for r in records} == expected and len(records) == len(expected)


def test_absent_negatives_random_but_deterministic():
    forms = collections.Counter()
    outputs = {}
    for i in range(150):
        g = no_cardiomegaly_study(0.5, image_id=f"im{i}")
        a, b = gen(g), gen(g)
        assert a == b  # same image id and seed -> same records
        outputs[i] = [key(r) for r in a]
        for t in ("pneumonia", "atelectasis", "consolidation", "edema"):
            negs = [r for r in a if r["lesion_type"] == t]
            assert len(negs) == 1 and negs[0]["polarity"] == "negative"
            r = negs[0]
            if r["instruction_type"] == "basic":
                locs = tuple(r["locations"])
                assert locs == ("right lung", "left lung") or len(locs) == 1 and locs[0] in vocab.INSTRUCTION_LOCATIONS
                forms["both lungs" if len(locs) == 2 else "one place"] += 1
            else:
                assert r["instruction_type"] == "global" and r["locations"] == []
                forms["global"] += 1
    # the released sheet's draw: global, both lungs and each of the ten places 1/12 each
    # (600 draws: 50 expected for global and for both lungs, 500 for the ten places)
    assert set(forms) == {"global", "both lungs", "one place"}
    assert 25 <= forms["global"] <= 80 and 25 <= forms["both lungs"] <= 80 and forms["one place"] >= 420
    assert len({tuple(v) for v in outputs.values()}) > 10  # the seed depends on the image id
    cfg = Config()
    cfg.instructions.seed = 7  # another base seed changes the draws
    assert any(
        [key(r) for r in gen(no_cardiomegaly_study(0.5, image_id=f"im{i}"), cfg)] != outputs[i] for i in range(150)
    )


def test_record_seed_is_sha256_not_hash():
    expected = int.from_bytes(hashlib.sha256(b"3:img9").digest()[:8], "little")
    assert record_seed(3, "img9") == expected


def _single(findings, empty=(), ctr=None, image_id="m1"):
    return StudyGrounding(
        study_id="s",
        image_id=image_id,
        shape=SHAPE,
        findings=findings,
        empty_locations=list(empty),
        ctr=ctr,
        heart_mask=HEART_MASK,
    )


def test_two_disjoint_findings_of_one_type_give_one_positive_each_and_a_union_global():
    m1, m2 = box(44, 54, 6, 22), box(14, 24, 40, 56)
    f1 = finding("atelectasis", labels=["right lung base"], lesion_type="atelectasis", sentence_index=1)
    f2 = finding("atelectasis", labels=["left upper zone lung"], lesion_type="atelectasis", sentence_index=3)
    g = _single(
        [
            grounded(f1, ["right lung base"], ["right lung base"], m1),
            grounded(f2, ["left upper zone lung"], ["left upper zone lung"], m2),
        ]
    )
    records = gen(g, only_global_absent())
    check_consistent(records)
    pos = {r["instruction"]: r for r in records if r["polarity"] == "positive" and r["lesion_type"] == "atelectasis"}
    assert np.array_equal(decode_rle(pos["Segment the atelectasis in the right lung base."]["mask"]), m1)
    assert np.array_equal(decode_rle(pos["Segment the atelectasis in the left upper zone lung."]["mask"]), m2)
    glob = pos["Segment the atelectasis."]
    assert glob["answer"] == "[SEG] It is located in the right lung base and left upper zone lung."
    assert np.array_equal(decode_rle(glob["mask"]), m1 | m2)
    assert len(pos) == 5  # 2 basic + 1 global + 2 lesion inference


def test_overlapping_findings_of_one_type_merge_into_one_mask():
    m1, m2 = box(44, 50, 6, 14), box(48, 54, 12, 22)
    f1 = finding("atelectasis", labels=["right lung base"], lesion_type="atelectasis", sentence_index=1)
    f2 = finding(
        "atelectasis", labels=["right lung base", "right mid zone lung"], lesion_type="atelectasis", sentence_index=2
    )
    g = _single(
        [
            grounded(f1, ["right lung base"], ["right lung base"], m1),
            grounded(f2, ["right lung base", "right mid zone lung"], ["right lung base", "right mid zone lung"], m2),
        ]
    )
    basic = [r for r in gen(g) if r["instruction_type"] == "basic" and r["polarity"] == "positive"]
    assert len(basic) == 1
    assert basic[0]["instruction"] == "Segment the atelectasis in the right mid zone lung and right lung base."
    assert np.array_equal(decode_rle(basic[0]["mask"]), m1 | m2)
    assert len(eval(basic[0]["source_findings"].replace("null", "None"))) == 2


def test_incomplete_merge_is_dropped():
    """A second finding reported (not grounded) at the named location would be
    missing from the mask: no positive names that location."""
    m1 = box(44, 54, 6, 22)
    f1 = finding("atelectasis", labels=["right lung base"], lesion_type="atelectasis")
    f2 = finding("atelectasis", labels=["right lung base"], lesion_type="atelectasis", sentence_index=2)
    g = _single([grounded(f1, ["right lung base"], ["right lung base"], m1), grounded(f2, ["right lung base"])])
    records = gen(g)
    assert [r for r in records if r["polarity"] == "positive"] == []


def test_lobes_and_whole_lungs_become_instruction_locations():
    m = box(40, 56, 4, 24)
    f1 = finding("consolidation", labels=["lung lower lobe right"], lesion_type="consolidation")
    g = _single([grounded(f1, ["lung lower lobe right"], ["lung lower lobe right"], m)])
    basic = [r for r in gen(g) if r["polarity"] == "positive" and r["instruction_type"] == "basic"]
    assert basic[0]["instruction"] == "Segment the consolidation in the right lung."
    f2 = finding("edema", labels=["right lung", "right lung base"], lesion_type="edema")
    g = _single([grounded(f2, ["right lung", "right lung base"], ["right lung", "right lung base"], m)])
    pos = {r["instruction_type"]: r for r in gen(g) if r["polarity"] == "positive"}
    assert pos["basic"]["instruction"] == "Segment the edema in the right lung."
    assert pos["global"]["answer"] == "[SEG] It is located in the right lung."
    assert pos["lesion_inference"]["answer"] == "[SEG] It is highly suggestive of edema."


def test_predicted_lesion_type_wins_and_both_types_count_as_mentioned():
    m = box(44, 54, 6, 22)
    f = finding("opacity", labels=["right lung base"], lesion_type="opacity", predicted="pneumonia")
    g = _single([grounded(f, ["right lung base"], ["right lung base"], m)], empty=["left lung"])
    records = gen(g, only_global_absent())
    pos = {(r["instruction_type"], r["instruction"]) for r in records if r["polarity"] == "positive"}
    assert pos == {
        ("basic", "Segment the pneumonia in the right lung base."),
        ("global", "Segment the pneumonia."),
        ("lesion_inference", "Segment the opacity in the right lung base and predict its type."),
    }
    globals_neg = {
        r["lesion_type"] for r in records if r["polarity"] == "negative" and r["instruction_type"] == "global"
    }
    assert "opacity" not in globals_neg and "pneumonia" not in globals_neg


def test_every_type_of_a_differential_counts_as_mentioned():
    # "Right basilar opacity may represent atelectasis or pneumonia.": the structurer
    # predicts the first type; the second is in the report's words only, and the report
    # does not say pneumonia is absent, so no pneumonia negative may be made.
    m = box(44, 54, 6, 22)
    f = finding("opacity", labels=["right lung base"], lesion_type="opacity", predicted="atelectasis")
    f = dataclasses.replace(f, predicted_lesion_text="atelectasis or pneumonia", inference_certainty="tentative")
    g = _single([grounded(f, ["right lung base"], ["right lung base"], m)], empty=["left lung"])
    records = gen(g, only_global_absent())
    absent = {r["lesion_type"] for r in records if r["polarity"] == "negative" and r["instruction_type"] == "global"}
    assert "pneumonia" not in absent and "atelectasis" not in absent
    assert "edema" in absent  # a type the report never names is still asked as absent


def test_split_certainty_observation_for_basic_inference_for_lesion_inference():
    """ "Right basilar opacity, may represent pneumonia": a definitive opacity with a
    tentative inference. The basic and global records keep the observation's certainty
    and name the opacity (the type is tentative, section 3.2); the lesion-inference
    answer carries the inference's certainty ("It possibly reflects pneumonia")."""
    m = box(44, 54, 6, 22)
    f = finding("opacity", labels=["right lung base"], lesion_type="opacity", predicted="pneumonia")
    f.inference_certainty = "tentative"
    g = _single([grounded(f, ["right lung base"], ["right lung base"], m)], empty=["left lung"])
    pos = {r["instruction_type"]: r for r in gen(g, only_global_absent()) if r["polarity"] == "positive"}
    assert pos["basic"]["instruction"] == "Segment the opacity in the right lung base."
    assert pos["basic"]["certainty"] == "definitive"
    assert pos["global"]["instruction"] == "Segment the opacity."
    assert pos["global"]["certainty"] == "definitive"
    inf = pos["lesion_inference"]
    assert (inf["certainty"], inf["lesion_type"]) == ("tentative", "pneumonia")
    assert inf["answer"] == templates.render_answer(
        "lesion_inference", "positive", lesion="pneumonia", certainty="tentative"
    )
    # the same finding with a definitive inference ("highly suggestive of pneumonia")
    f.inference_certainty = "definitive"
    pos = {r["instruction_type"]: r for r in gen(g, only_global_absent()) if r["polarity"] == "positive"}
    assert pos["basic"]["instruction"] == "Segment the pneumonia in the right lung base."
    assert pos["lesion_inference"]["certainty"] == "definitive"


def test_inference_needs_one_unambiguous_type():
    m1, m2 = box(44, 50, 6, 14), box(48, 54, 12, 22)
    f1 = finding("pneumonia", labels=["right lung base"], lesion_type="pneumonia")
    f2 = finding("effusion", labels=["right lung base"], lesion_type="effusion", sentence_index=2)
    g = _single(
        [
            grounded(f1, ["right lung base"], ["right lung base"], m1),
            grounded(f2, ["right lung base"], ["right lung base"], m2),
        ]
    )
    records = gen(g)
    assert not [r for r in records if r["instruction_type"] == "lesion_inference" and r["polarity"] == "positive"]
    # each type still has its own basic positive with its own mask
    basic = {r["lesion_type"]: r for r in records if r["instruction_type"] == "basic" and r["polarity"] == "positive"}
    assert np.array_equal(decode_rle(basic["pneumonia"]["mask"]), m1)
    assert np.array_equal(decode_rle(basic["effusion"]["mask"]), m2)


def test_unlocalized_positive_blocks_location_negatives_of_its_type():
    f = finding("pneumonia", lesion_type="pneumonia")  # no location: could be anywhere
    g = _single([grounded(f)], empty=list(vocab.INSTRUCTION_LOCATIONS))
    records = gen(g)
    assert not [r for r in records if r["lesion_type"] == "pneumonia"]
    assert not [r for r in records if r["lesion_type"] == "opacity"]


def test_tentative_cardiomegaly_gives_neither_positive_nor_negative():
    f = finding("cardiomegaly", certainty="tentative", lesion_type="cardiomegaly", labels=["heart"])
    g = _single([grounded(f, ["heart"], ["heart"], HEART_MASK)], ctr=0.3)
    assert not [r for r in gen(g) if r["lesion_type"] == "cardiomegaly"]


def test_excluded_grounding_gives_no_records():
    g = multi_lesion_study()
    g.excluded = "crosscheck"
    assert gen(g) == []


def test_bad_inputs_raise_clear_errors():
    g = multi_lesion_study()
    g.findings[0].mask = np.ones((10, 10), dtype=bool)
    with pytest.raises(InstructionError, match="img1.*shape"):
        gen(g)
    with pytest.raises(InstructionError, match="split"):
        generate_records(multi_lesion_study(), split="dev", patient_id="", image_path="", cfg=Config())
    val = generate_records(multi_lesion_study(), split="val", patient_id="", image_path="", cfg=Config())
    assert {r["split"] for r in val} == {"validate"}


def test_tentative_opacity_record_contains_overlapping_lesions_of_other_types():
    """'Segment the opacity in the right lung base.' must cover every opacity there:
    the tentative pneumonia and the definitive atelectasis reported at the same base."""
    m1, m2 = box(44, 50, 6, 14), box(48, 56, 10, 22)
    f1 = finding(
        "pneumonia",
        certainty="tentative",
        labels=["right lung base"],
        lesion_type="pneumonia",
        sentence="Possible pneumonia at the right base.",
    )
    f2 = finding("atelectasis", labels=["right lung base"], lesion_type="atelectasis", sentence_index=2)
    g = _single(
        [
            grounded(f2, ["right lung base"], ["right lung base"], m2),
            grounded(f1, ["right lung base"], ["right lung base"], m1),
        ],
        empty=["left lung"],
    )
    records = gen(g, only_global_absent())
    check_consistent(records)
    opacity = [r for r in records if r["target"] == "opacity" and r["polarity"] == "positive"]
    by_type = {r["instruction_type"]: r for r in opacity}
    assert set(by_type) == {"basic", "global"}  # no lesion inference: two types overlap
    assert by_type["basic"]["instruction"] == "Segment the opacity in the right lung base."
    assert np.array_equal(decode_rle(by_type["basic"]["mask"]), m1 | m2)
    assert by_type["basic"]["lesion_type"] == "pneumonia"
    assert by_type["basic"]["sentence"] == "Possible pneumonia at the right base."
    assert by_type["global"]["answer"] == "[SEG] It is located in the right lung base."
    atel = [r for r in records if r["lesion_type"] == "atelectasis" and r["polarity"] == "positive"]
    assert {r["instruction_type"] for r in atel} == {"basic", "global"}
    assert all(np.array_equal(decode_rle(r["mask"]), m2) for r in atel)


def test_no_global_for_a_type_with_a_tentative_instance():
    m1, m2 = box(44, 54, 6, 22), box(14, 24, 40, 56)
    f1 = finding("pneumonia", labels=["right lung base"], lesion_type="pneumonia")
    f2 = finding(
        "pneumonia", certainty="tentative", labels=["left upper zone lung"], lesion_type="pneumonia", sentence_index=2
    )
    g = _single(
        [
            grounded(f1, ["right lung base"], ["right lung base"], m1),
            grounded(f2, ["left upper zone lung"], ["left upper zone lung"], m2),
        ]
    )
    pos = {r["instruction"]: r for r in gen(g) if r["polarity"] == "positive"}
    assert "Segment the pneumonia." not in pos  # would claim the suspected one too
    assert {
        "Segment the pneumonia in the right lung base.",
        "Segment the opacity in the left upper zone lung.",
        "Segment the opacity.",
    } <= set(pos)
    assert (
        pos["Segment the opacity."]["answer"] == "[SEG] It is located in the right lung base and left upper zone lung."
    )
    assert np.array_equal(decode_rle(pos["Segment the opacity."]["mask"]), m1 | m2)
    li = {r["answer"] for r in gen(g) if r["instruction_type"] == "lesion_inference" and r["polarity"] == "positive"}
    assert li == {"[SEG] It is highly suggestive of pneumonia.", "[SEG] It possibly reflects pneumonia."}


def test_absent_negatives_only_for_the_studys_chosen_image():
    """Appendix C.2: at most one absent-type negative per type per *study*; a second
    image of the same study gets none, but keeps its positives and location negatives."""
    from cxrils.instructions import generate_records

    g = no_cardiomegaly_study(0.40, image_id="im-second")
    kw = dict(split="train", patient_id="p", image_path="images/im-second.png", cfg=Config())
    first = generate_records(g, **kw)
    second = generate_records(g, absent_negatives=False, **kw)
    absent_types = {"pneumonia", "atelectasis", "consolidation", "edema", "cardiomegaly"}
    assert any(r["lesion_type"] in absent_types for r in first)
    assert not any(r["lesion_type"] in absent_types for r in second)

    def kept(records):
        return [
            (r["lesion_type"], r["instruction_type"], r["polarity"], r["instruction"], r["answer"])
            for r in records
            if r["lesion_type"] not in absent_types
        ]

    assert kept(second) == kept(first) and kept(first)


def test_a_reported_nodule_blocks_the_absent_opacity_negative():
    """ "There is no opacity." would be false when the report has a nodule or mass."""
    from cxrils.types import StudyGrounding

    nodule = grounded(
        finding("nodule", labels=["right upper zone lung"], sentence="Right upper lobe nodule."),
        ["right upper zone lung"],
    )
    g = StudyGrounding(
        study_id="s9",
        image_id="im9",
        shape=SHAPE,
        findings=[nodule],
        empty_locations=["left lung"],
        ctr=0.40,
        heart_mask=HEART_MASK,
    )
    records = gen(g)
    opacity = [r for r in records if r["lesion_type"] == "opacity"]
    assert all(r["instruction_type"] == "basic" and r["locations"] == ["left lung"] for r in opacity)
    assert not any(r["answer"] == "[SEG] There is no opacity." for r in records)
    # without the nodule the absent-type opacity negative is there (global or basic)
    plain = StudyGrounding(
        study_id="s9",
        image_id="im9",
        shape=SHAPE,
        findings=[],
        empty_locations=["left lung"],
        ctr=0.40,
        heart_mask=HEART_MASK,
    )
    assert [r for r in gen(plain) if r["lesion_type"] == "opacity"]


@pytest.mark.parametrize(
    "entity",
    ["nodular densities", "calcification", "interstitial markings", "pleural thickening", "granulomatous disease"],
)
def test_an_untyped_opacity_on_the_film_blocks_the_absent_opacity_negative(entity):
    # review: "Nodular densities in the right lung." gave "There is no opacity in the right lung."

    f = grounded(finding(entity, labels=["right lung"], sentence=f"{entity} in the right lung."), ["right lung"])
    for opacity in _opacity_records_over_draws(f, ["left lung"]):
        assert all(r["locations"] == ["left lung"] for r in opacity), [r["answer"] for r in opacity]


def _opacity_records_over_draws(f, empty_locations):
    """The opacity records of a study with the one finding ``f``, for 12 instruction seeds
    (the negatives' places are drawn: several draws)."""
    from cxrils.types import StudyGrounding

    for seed in range(12):
        cfg = Config()
        cfg.instructions.seed = seed
        g = StudyGrounding(
            study_id=f"s{seed}",
            image_id=f"im{seed}",
            shape=SHAPE,
            findings=[f],
            empty_locations=empty_locations,
            ctr=0.40,
            heart_mask=HEART_MASK,
        )
        yield [r for r in gen(g, cfg=cfg) if r["lesion_type"] == "opacity"]


@pytest.mark.parametrize("labels", [["mediastinum"], []])
def test_an_untyped_opacity_outside_every_lung_zone_blocks_the_opacity_location_negatives(labels):
    # review (stop 62): "Right hilar mass." (the hilum maps to the mediastinum) was given
    # "There is no opacity in the right lung."; an unlocated "Mass." could lie anywhere too

    f = grounded(finding("mass", labels=labels, sentence="Right hilar mass."), labels)
    every = ["right lung", "right mid zone lung", "left lung", "left lung base"]
    for opacity in _opacity_records_over_draws(f, every):
        assert [r["answer"] for r in opacity] == []


#: OTHER_FINDINGS that are no opacity in the lung on a radiograph: lucencies, bones,
#: mediastinal or extrapulmonary findings, clinical states (reviewed one by one).
NOT_OPACITY = {
    "pneumothorax", "pneumothoraces", "hydropneumothorax", "pneumomediastinum", "emphysema",
    "emphysematous changes", "copd", "hyperinflation", "hyperexpansion", "fracture", "fractures", "hernia",
    "hiatal hernia", "adenopathy", "lymphadenopathy", "bronchiectasis", "pulmonary hypertension", "tortuosity",
    "degenerative changes", "scoliosis", "kyphosis", "osteopenia", "effusion-related", "bullae", "bulla", "blebs",
    "eventration", "pericardial effusion", "pericardial effusions", "joint effusion", "joint effusions",
    "hiv infection", "urinary tract infection", "upper airway infection", "upper respiratory infection",
    "upper respiratory tract infection", "wound infection", "soft tissue infection", "line infection",
    "infection isolation", "vascular congestion", "pulmonary congestion", "pulmonary vascular congestion",
    "fluid overload", "volume overload", "congestive heart failure", "chf", "heart failure", "volume loss",
    # normal structures or overlying soft tissue, and an ultrasound sign
    "breast shadowing", "nipple shadowing", "soft tissue shadowing", "hilar shadowing", "cardiac shadowing",
    "vascular shadowing", "rib shadowing", "acoustic shadowing",
    # an airways flare of COPD or asthma, a heart valve, a denial in the word, old disease
    "infective exacerbation", "infective exacerbations", "infective endocarditis", "non-infective",
    "noninfective", "old infective", "prior infective", "previous infective",
}  # fmt: skip


def test_every_other_finding_is_classified_as_opacity_or_not():
    from cxrils.instructions.generate import OPACITY_LIKE_ENTITIES
    from cxrils.report.lexicon import OTHER_FINDINGS

    assert not OPACITY_LIKE_ENTITIES & NOT_OPACITY
    unclassified = set(OTHER_FINDINGS) - OPACITY_LIKE_ENTITIES - NOT_OPACITY
    assert not unclassified, f"decide whether these are opacities on the film: {sorted(unclassified)}"


def test_absent_forms_replace_the_random_draws():
    """``absent_forms`` asks every absent lung type exactly the given negatives (the light
    model's normal images); cardiomegaly keeps the CTR rule; () asks no lung type."""
    g = no_cardiomegaly_study(0.40)
    forms = [("global", None), ("basic", "right lung"), ("basic", "left lung")]
    records = generate_records(
        g, split="train", patient_id="p1", image_path="images/x.png", cfg=Config(), absent_forms=forms
    )
    check_consistent(records)
    for t in ("pneumonia", "atelectasis", "consolidation", "edema"):  # absent from the report
        got = sorted(r["instruction"] for r in records if r["lesion_type"] == t)
        assert got == sorted(
            [f"Segment the {t}.", f"Segment the {t} in the right lung.", f"Segment the {t} in the left lung."]
        )
    assert [r["instruction"] for r in records if r["lesion_type"] == "cardiomegaly"] == ["Segment the cardiomegaly."]
    none = generate_records(g, split="train", patient_id="p1", image_path="images/x.png", cfg=Config(), absent_forms=())
    assert not {r["lesion_type"] for r in none} & {"pneumonia", "atelectasis", "consolidation", "edema"}
    assert any(r["lesion_type"] == "cardiomegaly" for r in none)  # CTR 0.40 <= 0.45
    with pytest.raises(InstructionError, match="absent negative"):
        generate_records(
            g,
            split="train",
            patient_id="p1",
            image_path="images/x.png",
            cfg=Config(),
            absent_forms=[("basic", "the spleen")],
        )


def test_a_cardiomegaly_grounding_dropped_makes_no_positive_even_with_a_heart_mask():
    # grounding's CTR rule dropped the finding (CTR 0.43 <= 0.45): the study still carries
    # the anatomy's heart mask, which must not become a positive record
    f_cm = finding("cardiomegaly", lesion_type="cardiomegaly", labels=["heart"], sentence="Heart is enlarged.")
    dropped = grounded(f_cm, ["heart"])
    dropped.drop_reason = "cardiomegaly: CTR 0.43 <= 0.45 (qc.ctr_min_cardiomegaly_positive)"
    records = gen(_single([dropped], ctr=0.43))
    assert not [r for r in records if r["lesion_type"] == "cardiomegaly" and r["polarity"] == "positive"]
    # the same finding grounded (its mask: the heart) gives the global positive with that mask
    kept = gen(_single([grounded(f_cm, ["heart"], ["heart"], HEART_MASK)], ctr=0.55))
    pos = [r for r in kept if r["lesion_type"] == "cardiomegaly" and r["polarity"] == "positive"]
    assert len(pos) == 1 and np.array_equal(decode_rle(pos[0]["mask"]), HEART_MASK)


def test_a_type_the_report_asks_about_gets_no_absent_negative_one_it_denies_does():
    # Section 3.2 / Appendix C.2: absent types are those never mentioned or explicitly
    # negated; "rule out pneumonia" (a tentative negative) is neither
    asked = finding("pneumonia", presence="negative", certainty="tentative", lesion_type="pneumonia")
    denied = finding("edema", presence="negative", lesion_type="edema")
    cfg = Config()
    cfg.instructions.max_absent_negatives_per_type = 2
    records = gen(_single([grounded(asked), grounded(denied)], ctr=0.4), cfg)
    types = {r["lesion_type"] for r in records}
    assert "pneumonia" not in types
    assert {"edema", "atelectasis", "consolidation", "effusion"} <= types
    both = finding("pneumonia", presence="negative", lesion_type="pneumonia", sentence_index=2)
    assert "pneumonia" in {r["lesion_type"] for r in gen(_single([grounded(asked), grounded(both)], ctr=0.4), cfg)}


# A review of this stage against the paper (stop 54) found these three wrong records.
def _consolidation_for_pneumonia(labels: list[str]) -> Finding:
    """ "Consolidation, concerning for pneumonia": a definitive consolidation whose lesion
    type is inferred, tentatively, as pneumonia (it is grounded as pneumonia)."""
    return Finding(
        entity="consolidation",
        sentence_index=1,
        presence="positive",
        certainty="definitive",
        labels=labels,
        locations=labels,
        lesion_type="consolidation",
        predicted_lesion_type="pneumonia",
        inference_certainty="tentative",
    )


def test_a_consolidation_of_inferred_type_is_in_the_consolidation_masks():
    """The paper's global rule: a mask covers every instance of the lesion the radiologist
    described; "consolidation concerning for pneumonia" is a consolidation too."""
    inferred = grounded(
        _consolidation_for_pneumonia(["right lung base"]), ["right lung base"], ["right lung base"], box(44, 54, 6, 22)
    )
    other = grounded(
        finding("consolidation", labels=["right lung base"], lesion_type="consolidation", sentence_index=2),
        ["right lung base"],
        ["right lung base"],
        box(46, 56, 10, 26),
    )
    records = gen(_single([inferred, other], ctr=0.4))
    basic = [r for r in records if r["target"] == "consolidation" and r["polarity"] == "positive"]
    union = int((inferred.mask | other.mask).sum())
    assert basic and all(r["mask_area"] == union for r in basic)
    # elsewhere: no global consolidation answer that names the other's place only
    far = grounded(
        finding("consolidation", labels=["left upper zone lung"], lesion_type="consolidation", sentence_index=2),
        ["left upper zone lung"],
        ["left upper zone lung"],
        box(14, 22, 40, 56),
    )
    for r in gen(_single([inferred, far], ctr=0.4)):
        if r["target"] == "consolidation" and r["instruction_type"] == "global" and r["polarity"] == "positive":
            assert "right lung base" in r["answer"]


def test_an_unlocated_finding_that_mentions_a_type_blocks_its_location_negatives():
    unlocated = grounded(_consolidation_for_pneumonia([]))
    records = gen(_single([unlocated], empty=list(vocab.INSTRUCTION_LOCATIONS), ctr=0.4))
    assert not [r for r in records if r["polarity"] == "negative" and r["lesion_type"] == "consolidation"]


def test_a_place_the_report_asks_about_gets_no_location_negative():
    """ "Evaluate for left lower lobe pneumonia" beside a right basilar pneumonia: the left
    base is neither stated nor denied, so no "There is no pneumonia in the left ..."."""
    stated = grounded(
        finding("pneumonia", labels=["right lung base"], lesion_type="pneumonia"),
        ["right lung base"],
        ["right lung base"],
        box(44, 54, 6, 22),
    )
    asked = grounded(
        finding(
            "pneumonia",
            presence="negative",
            certainty="tentative",
            labels=["lung lower lobe left"],
            lesion_type="pneumonia",
            sentence_index=2,
        )
    )
    for image_id in ("i1", "i2", "i3", "i4", "i5", "i6"):
        g = _single(
            [stated, asked], empty=["left lung base", "left mid zone lung", "left lung"], ctr=0.4, image_id=image_id
        )
        assert not [
            r
            for r in gen(g)
            if r["polarity"] == "negative"
            and "left" in r["instruction"]
            and r["lesion_type"] in ("pneumonia", "opacity")
        ]


def test_an_opacity_negative_at_one_place_is_lesion_inference_about_half_the_time():
    """The authors' released test sheet asks one opacity negative per study, 784 of 1,593
    of those at one place as lesion inference; global and both-lungs ones never so."""

    def normal(i: int) -> StudyGrounding:
        return StudyGrounding(
            study_id="s",
            image_id=f"n{i}",
            shape=SHAPE,
            findings=[],
            empty_locations=list(vocab.INSTRUCTION_LOCATIONS),
            ctr=0.40,
            heart_mask=HEART_MASK,
        )

    forms: collections.Counter = collections.Counter()
    for i in range(400):
        negs = [r for r in gen(normal(i)) if r["polarity"] == "negative" and r["lesion_type"] == "opacity"]
        check_consistent(negs)
        assert len(negs) == 1
        forms[(negs[0]["instruction_type"], len(negs[0]["locations"]))] += 1
    assert set(forms) == {("global", 0), ("basic", 2), ("basic", 1), ("lesion_inference", 1)}
    share = forms[("lesion_inference", 1)] / (forms[("lesion_inference", 1)] + forms[("basic", 1)])
    assert 0.4 < share < 0.6
    never = Config()
    never.instructions.lesion_inference_negative_prob = 0.0
    assert not [r for i in range(50) for r in gen(normal(i), never) if r["instruction_type"] == "lesion_inference"]


def test_the_lesion_inference_form_moves_no_other_negative():
    """The form is drawn from a stream of its own: with the probability 0 or 1 every other
    negative is the same, and ``absent_forms`` (exact negatives) is never changed."""

    def negatives(p: float, **kw) -> dict:
        cfg = Config()
        cfg.instructions.lesion_inference_negative_prob = p
        out = {}
        for i in range(60):
            g = no_cardiomegaly_study(0.40, image_id=f"f{i}")
            rs = generate_records(g, split="train", patient_id="p1", image_path="images/x.png", cfg=cfg, **kw)
            out[i] = sorted((r["lesion_type"], r["instruction"]) for r in rs if r["polarity"] == "negative")
        return out

    never, always = negatives(0.0), negatives(1.0)
    for i in never:
        assert [x for x in never[i] if x[0] != "opacity"] == [x for x in always[i] if x[0] != "opacity"]
        assert all("predict its type" not in ins for _, ins in never[i])
        assert [ins for t, ins in always[i] if t == "opacity"] == [
            ins.replace(".", " and predict its type.") for t, ins in never[i] if t == "opacity"
        ]
    # an absent opacity asked through absent_forms keeps exactly the forms given
    always_cfg = Config()
    always_cfg.instructions.lesion_inference_negative_prob = 1.0
    normal = StudyGrounding(
        study_id="s",
        image_id="n0",
        shape=SHAPE,
        findings=[],
        empty_locations=list(vocab.INSTRUCTION_LOCATIONS),
        ctr=0.40,
        heart_mask=HEART_MASK,
    )
    rows = generate_records(
        normal,
        split="train",
        patient_id="p1",
        image_path="images/x.png",
        cfg=always_cfg,
        absent_forms=[("global", None), ("basic", "right lung")],
    )
    assert sorted(r["instruction"] for r in rows if r["lesion_type"] == "opacity") == [
        "Segment the opacity in the right lung.",
        "Segment the opacity.",
    ]
