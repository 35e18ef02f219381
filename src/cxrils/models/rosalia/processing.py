"""Turning (image, instruction, answer) into ROSALIA's tensors, and back.

The prompt follows LLaVA-v1's conversation template used by LISA-7B-v1:
``"{system} USER: <image>\\n{instruction} ASSISTANT: {answer}</s>"``. The single
``<image>`` token is expanded to one token per CLIP patch (transformers' LLaVA
convention). Images: the 8-bit CXR ``x`` (uint8 (H, W)) is replicated to RGB, then
CLIP's and SAM's own processors (the PIL/numpy ones of transformers, which need no
torchvision) resize and normalise it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from cxrils.models.rosalia.configuration import IMAGE_TOKEN, SEG_TOKEN, SYSTEM_PROMPT, RosaliaConfig


def _image_processors(cfg: RosaliaConfig):
    try:  # transformers >= 5 names the PIL backends explicitly
        from transformers import CLIPImageProcessorPil as ClipProc
        from transformers import SamImageProcessorPil as SamProc
    except ImportError:  # pragma: no cover - transformers 4.x
        from transformers import CLIPImageProcessor as ClipProc
        from transformers import SamImageProcessor as SamProc
    s = cfg.clip_image_size
    clip = ClipProc(size={"shortest_edge": s}, crop_size={"height": s, "width": s})
    sam = SamProc(size={"longest_edge": cfg.sam_image_size},
                  pad_size={"height": cfg.sam_image_size, "width": cfg.sam_image_size})
    return clip, sam


@dataclass
class Encoded:
    """One encoded sample (tensors without batch dimension)."""

    input_ids: torch.Tensor  # (L,) long
    labels: torch.Tensor  # (L,) long, -100 on the prompt
    pixel_values: torch.Tensor  # (3, clip, clip) float
    sam_pixel_values: torch.Tensor  # (3, S, S) float
    reshaped_size: torch.Tensor  # (2,) long (h, w) after SAM's resize
    original_size: torch.Tensor  # (2,) long (H, W)
    gt_mask: torch.Tensor | None  # (H, W) float {0, 1}


class RosaliaProcessor:
    """Tokenisation and image pre-processing for :class:`RosaliaForSegmentation`.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        Must contain ``<image>`` and ``[SEG]`` (added by :meth:`prepare_tokenizer`).
    cfg : RosaliaConfig
    num_image_tokens : int
        Tokens per image after LLaVA's feature selection: (clip_size / patch)^2.
    """

    def __init__(self, tokenizer: Any, cfg: RosaliaConfig, num_image_tokens: int) -> None:
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.num_image_tokens = num_image_tokens
        self.image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        self.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
        self.clip, self.sam = _image_processors(cfg)

    @staticmethod
    def prepare_tokenizer(tokenizer: Any) -> Any:
        """Add ``<image>`` and ``[SEG]`` as special tokens (idempotent) and a pad token."""
        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN, SEG_TOKEN]})
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
        return tokenizer

    def prompt(self, instruction: str) -> str:
        """The LLaVA-v1 conversation up to the assistant's turn."""
        return f"{SYSTEM_PROMPT} USER: {IMAGE_TOKEN}\n{instruction} ASSISTANT:"

    def _ids(self, text: str, add_bos: bool) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if add_bos and self.tokenizer.bos_token_id is not None:
            ids = [self.tokenizer.bos_token_id] + ids
        return ids

    def _expand_image(self, ids: list[int]) -> list[int]:
        out: list[int] = []
        for t in ids:
            out.extend([t] * self.num_image_tokens if t == self.image_token_id else [t])
        return out

    def images(self, image: np.ndarray) -> dict[str, torch.Tensor]:
        """CLIP and SAM inputs of one uint8 (H, W) image.

        Raises
        ------
        ValueError
            If ``image`` is not a 2-D uint8 array.
        """
        if image.ndim != 2 or image.dtype != np.uint8:
            raise ValueError(f"expected a uint8 (H, W) image, got {image.dtype} {image.shape}")
        rgb = np.repeat(image[:, :, None], 3, axis=2)
        clip = self.clip(images=rgb, return_tensors="pt")["pixel_values"][0]
        sam = self.sam(images=rgb, return_tensors="pt")
        return {
            "pixel_values": clip, "sam_pixel_values": sam["pixel_values"][0],
            "reshaped_size": sam["reshaped_input_sizes"][0].long(),
            "original_size": torch.tensor(image.shape, dtype=torch.long),
        }

    def encode(self, image: np.ndarray, instruction: str, answer: str | None = None,
               mask: np.ndarray | None = None) -> Encoded:
        """Encode one sample; with ``answer`` the labels cover the answer and ``</s>``."""
        prompt_ids = self._expand_image(self._ids(self.prompt(instruction), add_bos=True))
        labels = [-100] * len(prompt_ids)
        ids = list(prompt_ids)
        if answer is not None:
            ans = self._ids(" " + answer, add_bos=False)
            if self.tokenizer.eos_token_id is not None:
                ans = ans + [self.tokenizer.eos_token_id]
            ids += ans
            labels += ans
        im = self.images(image)
        gt = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=np.float32))
        return Encoded(torch.tensor(ids), torch.tensor(labels), im["pixel_values"], im["sam_pixel_values"],
                       im["reshaped_size"], im["original_size"], gt)

    def collate(self, items: Sequence[Encoded], left_pad: bool = False) -> dict[str, Any]:
        """Pad a list of :class:`Encoded` into a batch dict for the model.

        Right padding for training; ``left_pad=True`` for generation.
        """
        pad = self.tokenizer.pad_token_id
        n = max(len(e.input_ids) for e in items)
        ids = torch.full((len(items), n), pad, dtype=torch.long)
        labels = torch.full((len(items), n), -100, dtype=torch.long)
        att = torch.zeros((len(items), n), dtype=torch.long)
        for i, e in enumerate(items):
            k = len(e.input_ids)
            sl = slice(n - k, n) if left_pad else slice(0, k)
            ids[i, sl], labels[i, sl], att[i, sl] = e.input_ids, e.labels, 1
        batch: dict[str, Any] = {
            "input_ids": ids, "attention_mask": att,
            "pixel_values": torch.stack([e.pixel_values for e in items]),
            "sam_pixel_values": torch.stack([e.sam_pixel_values for e in items]),
            "reshaped_sizes": torch.stack([e.reshaped_size for e in items]),
            "original_sizes": torch.stack([e.original_size for e in items]),
        }
        if all(e.gt_mask is not None for e in items):
            batch["labels"] = labels
            batch["gt_masks"] = [e.gt_mask for e in items]
        return batch

    def decode_answer(self, tokens: torch.Tensor) -> str:
        """Answer text from generated ids: stops at ``</s>``, keeps ``[SEG]``, trims spaces."""
        ids = tokens.tolist()
        eos = self.tokenizer.eos_token_id
        if eos is not None and eos in ids:
            ids = ids[: ids.index(eos)]
        specials = {t for t in (self.tokenizer.pad_token_id, self.tokenizer.bos_token_id) if t is not None}
        ids = [t for t in ids if t not in specials]
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return " ".join(text.replace(SEG_TOKEN, f" {SEG_TOKEN} ").split())
