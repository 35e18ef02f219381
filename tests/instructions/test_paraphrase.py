"""Optional persona paraphrasing (Appendix C.3) through an injected callable."""

from __future__ import annotations

import pytest
from ils_studies import multi_lesion_study

from cxrils.config import Config
from cxrils.instructions import PERSONAS, ParaphraseError, generate_records, paraphrase_instruction, paraphrase_records


def fake_llm(prompt: str) -> str:
    """Deterministic stand-in for an LLM: echoes the instruction with persona tags,
    plus the kind of noise a model adds (numbering, a duplicate, a blank line)."""
    instruction = prompt.rsplit("Instruction: ", 1)[1]
    voice = next(k for k, v in PERSONAS.items() if v in prompt)
    return "\n".join(
        [
            f"1. [{voice} a] {instruction}",
            f"2) [{voice} b] {instruction}",
            "",
            f"- [{voice} b] {instruction}",
            instruction,
            f'"[{voice} c] {instruction}"',
        ]
    )


def records():
    return generate_records(multi_lesion_study(), split="train", patient_id="p", image_path="", cfg=Config())


def test_off_by_default():
    calls = []
    assert paraphrase_records(records(), lambda p: calls.append(p) or "", Config()) == []
    assert calls == []


def test_nine_linked_paraphrases_per_record():
    cfg = Config()
    cfg.instructions.paraphrase = True
    originals = records()
    out = paraphrase_records(originals, fake_llm, cfg)
    assert len(out) == 9 * len(originals)
    ids = [r["record_id"] for r in originals + out]
    assert len(ids) == len(set(ids))
    assert [r["record_id"] for r in out[:2]] == [f"img1:{len(originals)}", f"img1:{len(originals) + 1}"]
    by_id = {r["record_id"]: r for r in originals}
    for r in out:
        orig = by_id[r["paraphrase_of"]]
        assert r["persona"] in PERSONAS
        assert r["instruction"].startswith(f"[{r['persona']} ") and r["instruction"].endswith(orig["instruction"])
        assert r["answer"] == orig["answer"] and r["mask"] == orig["mask"]  # answers are never paraphrased
    assert all(r["persona"] == "" and r["paraphrase_of"] == "" for r in originals)


def test_reply_cleaning_and_errors():
    got = paraphrase_instruction("Segment the edema.", "layperson", fake_llm, n=3)
    assert got == [f"[layperson {c}] Segment the edema." for c in "abc"]
    with pytest.raises(ParaphraseError, match="persona"):
        paraphrase_instruction("Segment the edema.", "poet", fake_llm)
    with pytest.raises(ParaphraseError, match="str"):
        paraphrase_instruction("Segment the edema.", "layperson", lambda p: None)
