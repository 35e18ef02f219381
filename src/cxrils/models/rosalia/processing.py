"""Turning (image, instruction, answer) into ROSALIA's tensors, and back.

Restated from KAIST-Edlab/ROSALIA (``inference_rosalia_example.py``, ``utils/dataset.py``
``collate_fn``, ``utils/reason_seg_dataset.py``):

* prompt: LLaVA's ``llava_v1`` conversation
  ``"{system} USER: <im_start><image><im_end>\\n{instruction} ASSISTANT:"`` (with
  ``mm_use_im_start_end``; ``"<image>\\n"`` without), training appends
  ``" {answer}</s>"``; tokenised by :func:`~cxrils.models.rosalia.tokenizer.tokenizer_image_token`
  (``<image>`` becomes -200, replaced by the CLIP patch features in the model);
* labels (``collate_fn``): ``target[:1]`` and the instruction part
  ``len(tokenizer_image_token("...ASSISTANT: ")) - 2`` tokens after it are ignored, and
  everything after ``1 + len(tokenizer_image_token(conversation without "</s>"))``;
  sequences are cut to ``model_max_length - 255`` tokens in training;
* CLIP input: the checkpoint's CLIP image processor on the RGB image (LISA: resize the
  shortest side to 224, centre crop 224, OpenAI mean/std);
* SAM input: ``ResizeLongestSide(1024)`` (bilinear, new side ``int(side * 1024 / longest
  + 0.5)``), ``(x - mean) / std`` with SAM's pixel mean/std, zero padding at the bottom
  and right to 1024 x 1024;
* training target (``reason_seg_dataset.py`` ``__getitem__``): the mask through
  ``ResizeLongestSide.apply_mask`` (nearest, ROSALIA's ``transforms.py``), ``== 255``,
  zero-padded at the bottom and right to 1024 x 1024 like the image: the frame the
  loss compares with the prediction (:func:`padded_target`).

The 8-bit CXR ``x`` (uint8 (H, W)) is replicated to RGB, as ``cv2.imread`` of a gray
image gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from cxrils.dataset.mimic_ils.format import preprocess_shape
from cxrils.models.rosalia.configuration import SYSTEM_PROMPT, RosaliaConfig
from cxrils.models.rosalia.tokenizer import (
    IGNORE_INDEX,
    IM_END_TOKEN,
    IM_START_TOKEN,
    IMAGE_TOKEN,
    SEG_TOKEN,
    LisaTokenizer,
    tokenizer_image_token,
)

#: SAM's pixel mean and std (RGB, 0-255), segment-anything ``Sam.pixel_mean/pixel_std``.
SAM_PIXEL_MEAN = (123.675, 116.28, 103.53)
SAM_PIXEL_STD = (58.395, 57.12, 57.375)
#: LLaVA-v1's "ASSISTANT: " separator (conv.sep + roles[1] + ": ").
ASSISTANT_SEP = " ASSISTANT: "


def padded_target(mask: np.ndarray, side: int) -> torch.Tensor:
    """A training mask in SAM's padded frame, as ROSALIA's dataset builds it.

    Parameters
    ----------
    mask : ndarray of bool, shape (H, W)
        At the image's grid.
    side : int
        SAM's input side S (1024).

    Returns
    -------
    torch.Tensor, float32 {0, 1}, shape (S, S)
        The mask resized (PIL nearest, ``ResizeLongestSide.apply_mask``) to
        :func:`~cxrils.dataset.mimic_ils.format.preprocess_shape` ``(h, w)`` at the top left, zeros elsewhere.
    """
    from PIL import Image

    m = np.asarray(mask, dtype=bool)
    h, w = preprocess_shape(*m.shape, side)
    resized = np.asarray(Image.fromarray(m.astype(np.uint8) * 255).resize((w, h), Image.NEAREST)) == 255
    frame = np.zeros((side, side), np.float32)
    frame[:h, :w] = resized
    return torch.from_numpy(frame)


@dataclass
class Encoded:
    """One encoded sample (tensors without batch dimension)."""

    input_ids: torch.Tensor  # (L,) long, one IMAGE_TOKEN_INDEX
    labels: torch.Tensor  # (L,) long, IGNORE_INDEX outside the answer
    pixel_values: torch.Tensor  # (3, clip, clip) float32
    sam_pixel_values: torch.Tensor  # (3, S, S) float32
    reshaped_size: torch.Tensor  # (2,) long (h, w) after SAM's resize
    original_size: torch.Tensor  # (2,) long (H, W)
    gt_frame: torch.Tensor | None  # (S, S) float {0, 1}: the mask in SAM's padded frame


class RosaliaProcessor:
    """Tokenisation and image pre-processing for :class:`RosaliaForSegmentation`.

    Parameters
    ----------
    tokenizer : LisaTokenizer
        Must hold ``[SEG]`` (and ``<im_start>``/``<im_end>`` when ``cfg.mm_use_im_start_end``).
    cfg : RosaliaConfig
    clip_processor : callable
        The CLIP image processor (``images=..., return_tensors="pt"``) of the vision tower.

    Raises
    ------
    ValueError
        If a needed token is missing from the tokenizer.
    """

    def __init__(self, tokenizer: LisaTokenizer, cfg: RosaliaConfig, clip_processor: Any) -> None:
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.clip = clip_processor
        needed = [SEG_TOKEN] + ([IM_START_TOKEN, IM_END_TOKEN] if cfg.mm_use_im_start_end else [])
        missing = [t for t in needed if tokenizer.convert_tokens_to_ids(t) is None]
        if missing:
            raise ValueError(
                f"tokenizer {tokenizer.folder} lacks {missing}; LISA checkpoints add "
                "<im_patch>, <im_start>, <im_end>, [SEG] (added_tokens.json)"
            )
        self.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)

    # ----------------------------------------------------------------- text
    def prompt(self, instruction: str) -> str:
        """The llava_v1 conversation up to the assistant's turn (inference_rosalia_example.py)."""
        image = IM_START_TOKEN + IMAGE_TOKEN + IM_END_TOKEN if self.cfg.mm_use_im_start_end else IMAGE_TOKEN
        return f"{SYSTEM_PROMPT} USER: {image}\n{instruction} ASSISTANT:"

    def conversation(self, instruction: str, answer: str) -> str:
        """The training conversation: prompt, answer and ``</s>`` (llava_v1 ``get_prompt``)."""
        return f"{self.prompt(instruction)} {answer}</s>"

    def _labels(self, conversation: str, ids: list[int]) -> list[int]:
        target = list(ids)
        target[:1] = [IGNORE_INDEX]
        cur = 1
        for rou in conversation.split("</s>"):
            if rou == "":
                break
            parts = rou.split(ASSISTANT_SEP)
            if len(parts) != 2:
                raise ValueError(f"conversation round needs exactly one {ASSISTANT_SEP.strip()!r}: {rou!r}")
            round_len = len(tokenizer_image_token(rou, self.tokenizer))
            instruction_len = len(tokenizer_image_token(parts[0] + ASSISTANT_SEP, self.tokenizer)) - 2
            target[cur : cur + instruction_len] = [IGNORE_INDEX] * len(target[cur : cur + instruction_len])
            cur += round_len
        target[cur:] = [IGNORE_INDEX] * len(target[cur:])
        return target

    # ----------------------------------------------------------------- images
    def images(self, image: np.ndarray) -> dict[str, torch.Tensor]:
        """CLIP and SAM inputs of one uint8 (H, W) image (module docstring).

        Raises
        ------
        ValueError
            If ``image`` is not a 2-D uint8 array.
        """
        from PIL import Image

        if image.ndim != 2 or image.dtype != np.uint8:
            raise ValueError(f"expected a uint8 (H, W) image, got {image.dtype} {image.shape}")
        rgb = np.repeat(image[:, :, None], 3, axis=2)
        clip = self.clip(images=rgb, return_tensors="pt")["pixel_values"][0].float()
        s = self.cfg.sam_image_size
        h, w = preprocess_shape(*image.shape, s)
        resized = np.asarray(Image.fromarray(rgb).resize((w, h), Image.BILINEAR), dtype=np.float32)
        norm = (resized - np.asarray(SAM_PIXEL_MEAN, np.float32)) / np.asarray(SAM_PIXEL_STD, np.float32)
        sam = np.zeros((s, s, 3), np.float32)
        sam[:h, :w] = norm
        return {
            "pixel_values": clip,
            "sam_pixel_values": torch.from_numpy(sam).permute(2, 0, 1).contiguous(),
            "reshaped_size": torch.tensor([h, w], dtype=torch.long),
            "original_size": torch.tensor(image.shape, dtype=torch.long),
        }

    # ----------------------------------------------------------------- samples
    def encode(
        self, image: np.ndarray, instruction: str, answer: str | None = None, mask: np.ndarray | None = None
    ) -> Encoded:
        """Encode one sample; with ``answer`` the labels cover the answer and ``</s>``;
        ``mask`` (bool (H, W), the image's grid) becomes the padded-frame training target
        (:func:`padded_target`)."""
        if answer is None:
            ids = tokenizer_image_token(self.prompt(instruction), self.tokenizer)
            labels = [IGNORE_INDEX] * len(ids)
        else:
            conv = self.conversation(instruction, answer)
            ids = tokenizer_image_token(conv, self.tokenizer)
            labels = self._labels(conv, ids)
            limit = self.tokenizer.model_max_length - 255  # collate_fn's training truncation
            ids, labels = ids[:limit], labels[:limit]
        im = self.images(image)
        gt = None if mask is None else padded_target(mask, self.cfg.sam_image_size)
        return Encoded(
            torch.tensor(ids),
            torch.tensor(labels),
            im["pixel_values"],
            im["sam_pixel_values"],
            im["reshaped_size"],
            im["original_size"],
            gt,
        )

    def collate(self, items: Sequence[Encoded]) -> dict[str, Any]:
        """Pad a list of :class:`Encoded` (right padding with ``pad = unk``, as collate_fn)."""
        pad = self.tokenizer.pad_token_id
        n = max(len(e.input_ids) for e in items)
        ids = torch.full((len(items), n), pad, dtype=torch.long)
        labels = torch.full((len(items), n), IGNORE_INDEX, dtype=torch.long)
        att = torch.zeros((len(items), n), dtype=torch.long)
        for i, e in enumerate(items):
            k = len(e.input_ids)
            ids[i, :k], labels[i, :k], att[i, :k] = e.input_ids, e.labels, 1
        batch: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": att,
            "pixel_values": torch.stack([e.pixel_values for e in items]),
            "sam_pixel_values": torch.stack([e.sam_pixel_values for e in items]),
            "reshaped_sizes": torch.stack([e.reshaped_size for e in items]),
            "original_sizes": torch.stack([e.original_size for e in items]),
        }
        if all(e.gt_frame is not None for e in items):
            batch["labels"] = labels
            batch["gt_frames"] = [e.gt_frame for e in items]
        return batch

    def decode_answer(self, tokens: torch.Tensor) -> str:
        """Answer text from generated ids, as inference_rosalia_example.py: decoded with the
        added tokens, cut at ``</s>``, newlines removed, spaces collapsed, ``[SEG]`` kept."""
        ids = [int(t) for t in tokens.tolist()]
        eos = self.tokenizer.eos_token_id
        if eos in ids:
            ids = ids[: ids.index(eos)]
        ids = [t for t in ids if t not in (self.tokenizer.pad_token_id, self.tokenizer.bos_token_id) and t >= 0]
        text = self.tokenizer.decode(ids).replace("\n", "")
        return " ".join(text.replace(SEG_TOKEN, f" {SEG_TOKEN} ").split())
