"""The LLaMA tokenizer of LISA-7B-v1 / ROSALIA-7B-v1 as their training saw it.

The checkpoints ship a sentencepiece ``tokenizer.model`` (LLaMA's 32,000 pieces) and
``added_tokens.json`` with 4 tokens: ``<im_patch>``, ``<im_start>``, ``<im_end>``,
``[SEG]`` (32,000-32,003); there is no ``<image>`` token: LLaVA's ``tokenizer_image_token``
(``model/llava/mm_utils.py``) splits the prompt at ``<image>`` and puts
:data:`IMAGE_TOKEN_INDEX` (-200) between the chunks.

The authors trained with transformers 4.31's slow ``LlamaTokenizer`` in its default
"legacy" mode (requirements.txt pins 4.31.0; the legacy warning is printed by their
scripts). transformers 5 has no slow tokenizer, and its fast one keeps the whitespace
around added tokens. This class restates 4.31's slow behaviour on top of sentencepiece:

1. the text is split at every added or special token (leftmost, longest first);
2. next to an added token that is not a special token with its own ``lstrip``/``rstrip``
   flags, the neighbouring text chunks lose their whitespace on that side
   ("We strip left and right by default", ``PreTrainedTokenizer.tokenize``); ``<s>``,
   ``</s>``, ``<unk>`` keep it (their flags in ``special_tokens_map.json`` are false);
3. each remaining chunk is ``sp.encode(chunk)`` (sentencepiece's dummy prefix included);
4. ``<s>`` is prepended (``add_bos_token``), no ``</s>`` appended.

So ``"USER: <im_start><image><im_end>\\nSegment ..."`` becomes ``... "USER:" <im_start>``,
-200, ``<im_end> "Segment ..."`` (the space and the newline next to the added tokens go).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from cxrils.templates import SEG_TOKEN

#: LLaVA's image placeholder id in ``input_ids`` (``utils/utils.py`` IMAGE_TOKEN_INDEX).
IMAGE_TOKEN_INDEX = -200
IGNORE_INDEX = -100  # label id the loss skips (LISA utils/utils.py, as transformers' CrossEntropyLoss default)
IMAGE_TOKEN = "<image>"
IM_PATCH_TOKEN, IM_START_TOKEN, IM_END_TOKEN = "<im_patch>", "<im_start>", "<im_end>"
#: Added tokens of LISA-7B-v1 / ROSALIA-7B-v1, in id order after LLaMA's 32,000.
LISA_ADDED_TOKENS = (IM_PATCH_TOKEN, IM_START_TOKEN, IM_END_TOKEN, SEG_TOKEN)
TOKENIZER_FILES = ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


class TokenizerError(ValueError):
    """Raised when a tokenizer folder is missing or does not have LISA's layout."""


def _content(value: Any) -> tuple[str | None, bool, bool, bool]:
    """(content, lstrip, rstrip, has_flags) of a special-token entry (str or AddedToken dict)."""
    if isinstance(value, dict):
        return value.get("content"), bool(value.get("lstrip", False)), bool(value.get("rstrip", False)), True
    if isinstance(value, str):
        return value, False, False, False
    return None, False, False, False


class LisaTokenizer:
    """LLaMA sentencepiece + LISA's added tokens, with transformers 4.31's slow-legacy rules.

    Parameters
    ----------
    folder : path
        A checkpoint or tokenizer folder with ``tokenizer.model`` and ``added_tokens.json``
        (``tokenizer_config.json`` / ``special_tokens_map.json`` optional).

    Attributes
    ----------
    bos_token_id, eos_token_id, unk_token_id, pad_token_id : int
        ``pad`` is ``unk``, as the authors set (``tokenizer.pad_token = tokenizer.unk_token``).
    model_max_length : int
        From ``tokenizer_config.json``; 512 when absent (train_ds.py ``--model_max_length``).

    Raises
    ------
    TokenizerError
        On a missing file, or added-token ids that do not follow the sentencepiece pieces.
    """

    def __init__(self, folder: str | Path) -> None:
        import sentencepiece as spm

        self.folder = Path(folder)
        model = self.folder / "tokenizer.model"
        if not model.is_file():
            raise TokenizerError(
                f"{model}: missing; LISA/ROSALIA checkpoints ship LLaMA's sentencepiece "
                "tokenizer.model: download the whole hub folder (checkone/ROSALIA-7B-v1 or "
                f"xinlai/LISA-7B-v1) into {self.folder}"
            )
        self.sp = spm.SentencePieceProcessor(model_file=str(model))
        n = self.sp.get_piece_size()
        added_path = self.folder / "added_tokens.json"
        added = json.loads(added_path.read_text(encoding="utf-8")) if added_path.is_file() else {}
        if sorted(added.values()) != list(range(n, n + len(added))):
            raise TokenizerError(
                f"{added_path}: added token ids {sorted(added.values())} do not follow the {n} sentencepiece pieces"
            )
        self.added: dict[str, int] = dict(added)
        cfg = self._json("tokenizer_config.json")
        smap = self._json("special_tokens_map.json")
        self.model_max_length = int(cfg.get("model_max_length") or 512)
        if self.model_max_length > 10**6:  # transformers' "very large" placeholder
            self.model_max_length = 512
        self._flags: dict[str, tuple[bool, bool, bool]] = {}
        names = {}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            content, lstrip, rstrip, has_flags = _content(smap.get(key, cfg.get(key)))
            if content is not None:
                names[key] = content
                self._flags[content] = (lstrip, rstrip, has_flags)
        for value in smap.get("additional_special_tokens", []) or []:
            content, lstrip, rstrip, has_flags = _content(value)
            if content is not None:
                self._flags[content] = (lstrip, rstrip, has_flags)
        self.bos_token_id = self._id(names.get("bos_token", "<s>"))
        self.eos_token_id = self._id(names.get("eos_token", "</s>"))
        self.unk_token_id = self._id(names.get("unk_token", "<unk>"))
        self.pad_token_id = self.unk_token_id
        self.add_bos_token = bool(cfg.get("add_bos_token", True))
        specials = [t for t in self._flags if t] + list(self.added)
        self._split = re.compile(
            "(" + "|".join(re.escape(t) for t in sorted(set(specials), key=len, reverse=True)) + ")"
        )

    def _json(self, name: str) -> dict:
        path = self.folder / name
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise TokenizerError(f"{path}: not JSON: {err}") from err
        return data if isinstance(data, dict) else {}

    def _id(self, token: str) -> int:
        if token in self.added:
            return self.added[token]
        i = self.sp.piece_to_id(token)
        if self.sp.id_to_piece(i) != token:
            raise TokenizerError(f"{self.folder}: token {token!r} is neither a piece nor an added token")
        return i

    def __len__(self) -> int:
        return self.sp.get_piece_size() + len(self.added)

    def convert_tokens_to_ids(self, token: str) -> int | None:
        """Id of a piece or added token; None when the vocabulary has no such token
        (LISA's has no ``<image>``)."""
        try:
            return self._id(token)
        except TokenizerError:
            return None

    def tokenize_ids(self, text: str, add_bos: bool = True) -> list[int]:
        """Ids of ``text`` by the rules in the module docstring (``tokenizer(text).input_ids``
        of the authors' 4.31 slow tokenizer)."""
        parts = [p for p in self._split.split(text) if p != ""]
        for i, part in enumerate(parts):
            if part not in self.added and part not in self._flags:
                continue
            lstrip, rstrip, has_flags = self._flags.get(part, (False, False, False))
            if not has_flags:
                lstrip = rstrip = True  # 4.31: "We strip left and right by default"
            if rstrip and i + 1 < len(parts):
                parts[i + 1] = parts[i + 1].lstrip()
            if lstrip and i > 0:
                parts[i - 1] = parts[i - 1].rstrip()
        ids = [self.bos_token_id] if add_bos and self.add_bos_token else []
        for part in parts:
            if not part:
                continue
            if part in self.added or part in self._flags:
                ids.append(self._id(part))
            else:
                ids.extend(self.sp.encode(part))
        return ids

    def decode(self, ids: list[int]) -> str:
        """Text of ids: runs of pieces through sentencepiece, added tokens as themselves,
        joined by spaces (the slow tokenizer's ``spaces_between_special_tokens``)."""
        out: list[str] = []
        run: list[int] = []
        inverse = {v: k for k, v in self.added.items()}
        for i in ids:
            if i in inverse:
                if run:
                    out.append(self.sp.decode(run))
                    run = []
                out.append(inverse[i])
            elif 0 <= i < self.sp.get_piece_size():
                run.append(i)
        if run:
            out.append(self.sp.decode(run))
        return " ".join(s for s in out if s)

    def save_pretrained(self, folder: str | Path) -> None:
        """Copy the tokenizer files into ``folder``."""
        dest = Path(folder)
        dest.mkdir(parents=True, exist_ok=True)
        for name in TOKENIZER_FILES:
            src = self.folder / name
            if src.is_file() and src.resolve() != (dest / name).resolve():
                shutil.copyfile(src, dest / name)


def tokenizer_image_token(prompt: str, tokenizer: LisaTokenizer) -> list[int]:
    """LLaVA's ``tokenizer_image_token``: each ``<image>``-separated chunk tokenised with
    ``<s>``, the first chunk keeps it, the others drop it, chunks joined by -200."""
    chunks = [tokenizer.tokenize_ids(c) for c in prompt.split(IMAGE_TOKEN)]
    offset = 1 if chunks and chunks[0] and chunks[0][0] == tokenizer.bos_token_id else 0
    ids = chunks[0][:1] if offset else []
    for k, chunk in enumerate(chunks):
        if k:
            ids.append(IMAGE_TOKEN_INDEX)
        ids.extend(chunk[offset:])
    return ids
