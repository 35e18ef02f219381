"""A tiny, offline tokenizer for ROSALIA's CPU tests and smoke runs.

Real use loads the LLaVA / LISA tokenizer from a local folder. This byte-level BPE is
trained in well under a second on the instruction and answer templates
(:mod:`cxrils.templates`) so that the tiny model's whole path (tokenise, generate,
decode, [SEG] -> mask) runs without any download.
"""

from __future__ import annotations

from typing import Any

from cxrils import templates, vocab
from cxrils.models.rosalia.configuration import SYSTEM_PROMPT


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
    return lines


def build_tiny_tokenizer(vocab_size: int = 400) -> Any:
    """A ``PreTrainedTokenizerFast`` (byte-level BPE) with <s>, </s>, <unk>, <pad>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(template_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>")
