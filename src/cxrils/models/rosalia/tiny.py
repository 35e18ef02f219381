"""A tiny, offline LLaMA-style tokenizer for ROSALIA's CPU smoke runs (``--set tiny=true``).

Real use reads the LLaMA tokenizer of the LISA checkpoint. This one has the same layout
(sentencepiece ``tokenizer.model`` with ``<unk>``, ``<s>``, ``</s>`` at 0, 1, 2, then
``added_tokens.json`` with LISA's 4 tokens, no ``<image>``) but a byte-fallback BPE of
a few hundred pieces trained in well under a second on the instruction and answer
templates (:mod:`cxrils.templates`), so the tiny model's whole path runs without any
download.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from cxrils import templates, vocab
from cxrils.models.rosalia.configuration import SYSTEM_PROMPT
from cxrils.models.rosalia.tokenizer import LISA_ADDED_TOKENS, LisaTokenizer


def template_corpus() -> list[str]:
    """Every instruction and answer wording of Table 2 over all targets and locations."""
    lines = [SYSTEM_PROMPT, "USER: ASSISTANT:"]
    for target in vocab.LESION_TYPES:
        for loc in vocab.INSTRUCTION_LOCATIONS:
            lines += [
                templates.render_instruction("basic", target, [loc]),
                templates.render_answer("basic", "negative", target, [loc]),
                templates.render_answer("global", "positive", locations=[loc]),
                templates.render_instruction("lesion_inference", None, [loc]),
                templates.render_answer("lesion_inference", "negative", locations=[loc]),
            ]
        lines += [templates.render_instruction("global", target), templates.render_answer("global", "negative", target)]
    for lesion in vocab.INFERENCE_LESION_TYPES:
        for certainty in vocab.CERTAINTIES:
            lines.append(templates.render_answer("lesion_inference", "positive", lesion=lesion, certainty=certainty))
    return [line.replace(templates.SEG_TOKEN, "") for line in lines]


def build_tiny_tokenizer(folder: str | Path, vocab_size: int = 400) -> LisaTokenizer:
    """Train the tiny sentencepiece model, write a LISA-layout tokenizer folder, load it."""
    import sentencepiece as spm

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(template_corpus()),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type="bpe",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        add_dummy_prefix=True,
        remove_extra_whitespaces=False,
        minloglevel=2,
    )
    (out / "tokenizer.model").write_bytes(buf.getvalue())
    n = spm.SentencePieceProcessor(model_proto=buf.getvalue()).get_piece_size()
    (out / "added_tokens.json").write_text(json.dumps({t: n + i for i, t in enumerate(LISA_ADDED_TOKENS)}))
    special = {
        k: {"content": c, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}
        for k, c in (("bos_token", "<s>"), ("eos_token", "</s>"), ("unk_token", "<unk>"))
    }
    (out / "special_tokens_map.json").write_text(json.dumps(special))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "LlamaTokenizer",
                "add_bos_token": True,
                "add_eos_token": False,
                "model_max_length": 512,
                "padding_side": "right",
                **special,
            }
        )
    )
    return LisaTokenizer(out)
