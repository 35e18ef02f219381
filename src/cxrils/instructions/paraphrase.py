"""Optional paraphrasing of instructions for three personas (paper Appendix C.3).

The paper rewrote each template instruction with an LLM (Qwen3-Next-80B-A3B-Instruct)
into nine variants, three for each of three personas (medical expert, layperson, AI
developer), and trained on the enriched set. Here the LLM is injected as a callable
``complete(prompt) -> str`` (the ``llm`` report backend's client, or any function),
so this module has no model dependency. It is off by default
(``cfg.instructions.paraphrase``); answers are never paraphrased, because the
evaluation parses them against the templates (Table 2).

A paraphrase is a new row that copies its original, replaces ``instruction``, and
links back through ``paraphrase_of`` (the original's ``record_id``) and ``persona``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable

from cxrils.config import Config, InstructionConfig

log = logging.getLogger(__name__)

#: The three personas of Appendix C.3, with the voice asked of the LLM.
PERSONAS: dict[str, str] = {
    "medical_expert": "a radiologist or physician who uses precise clinical terminology",
    "layperson": "a patient or non-expert with no medical training who uses everyday words",
    "ai_developer": "an AI developer who phrases requests as concise, technical commands",
}

PROMPT = """Rewrite the following instruction for a chest X-ray segmentation model as {persona_voice} would write it.
Keep exactly the same meaning: the same finding, the same anatomical location (the patient's right or left side), and the same request (segment it{infer}).
Do not add findings, locations or details. Write {n} different versions, one per line, with no numbering and no other text.

Instruction: {instruction}"""

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|\(\d+\))\s*")


class ParaphraseError(ValueError):
    """Raised for an unknown persona or a completion that is not text."""


def paraphrase_instruction(
    instruction: str,
    persona: str,
    complete: Callable[[str], str],
    n: int = 3,
    max_chars: int = InstructionConfig.paraphrase_max_chars,
) -> list[str]:
    """Up to ``n`` distinct paraphrases of one instruction in a persona's voice.

    Parameters
    ----------
    instruction : str
        A template instruction (:func:`cxrils.templates.render_instruction`).
    persona : str
        A key of :data:`PERSONAS`.
    complete : callable
        ``complete(prompt: str) -> str``; the reply holds one paraphrase per line.
    n : int
        Variants wanted (Appendix C.3: 3 per persona, 9 in all).

    Returns
    -------
    list of str
        Cleaned lines (bullets/numbers stripped), without blanks, duplicates, the
        original text, or lines longer than ``max_chars`` (default
        ``cxrils.config.InstructionConfig.paraphrase_max_chars``); at most ``n``.

    Raises
    ------
    ParaphraseError
        On an unknown persona or a non-string reply.
    """
    if persona not in PERSONAS:
        raise ParaphraseError(f"unknown persona {persona!r}; expected one of {sorted(PERSONAS)}")
    infer = " and predict its type" if "predict its type" in instruction else ""
    prompt = PROMPT.format(persona_voice=PERSONAS[persona], n=n, instruction=instruction, infer=infer)
    reply = complete(prompt)
    if not isinstance(reply, str):
        raise ParaphraseError(f"complete() must return str, got {type(reply).__name__}")
    out: list[str] = []
    for line in reply.splitlines():
        text = _BULLET.sub("", line).strip().strip('"').strip()
        if not text or len(text) > max_chars or text == instruction or text in out:
            continue
        out.append(text)
    if len(out) < n:
        log.warning("persona %s: %d of %d paraphrases usable for %r", persona, len(out), n, instruction)
    return out[:n]


def paraphrase_records(records: Iterable[dict], complete: Callable[[str], str], cfg: Config) -> list[dict]:
    """Paraphrased copies of records (the originals are not included nor changed).

    Each new row copies its original, with ``instruction`` replaced, ``persona`` set,
    ``paraphrase_of`` = the original ``record_id`` and a new ``record_id``
    ``f"{image_id}:{index}"`` continuing after the highest index of that image.
    Returns [] when ``cfg.instructions.paraphrase`` is False.
    """
    records = list(records)
    if not cfg.instructions.paraphrase:
        return []
    n = cfg.instructions.paraphrase_variants_per_persona
    next_index: dict[str, int] = {}
    for r in records:
        idx = int(str(r["record_id"]).rsplit(":", 1)[1])
        next_index[r["image_id"]] = max(next_index.get(r["image_id"], 0), idx + 1)
    out: list[dict] = []
    for r in records:
        if r.get("paraphrase_of"):
            continue  # never paraphrase a paraphrase
        for persona in PERSONAS:
            for text in paraphrase_instruction(
                r["instruction"], persona, complete, n, cfg.instructions.paraphrase_max_chars
            ):
                new = dict(
                    r,
                    instruction=text,
                    persona=persona,
                    paraphrase_of=r["record_id"],
                    record_id=f"{r['image_id']}:{next_index[r['image_id']]}",
                )
                next_index[r["image_id"]] += 1
                out.append(new)
    return out
