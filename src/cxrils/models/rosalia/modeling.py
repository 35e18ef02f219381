"""ROSALIA: the LISA architecture (LLaVA + SAM with a ``[SEG]`` token) on transformers.

Paper section 5 ("Model Training on MIMIC-ILS"); LISA (Lai et al. 2024). The VLM
(``LlavaForConditionalGeneration``) reads the image and the instruction and writes the
answer; the last-layer hidden state that predicts the ``[SEG]`` token goes through an
MLP (hidden -> hidden -> 256) and becomes the sparse prompt of SAM's mask decoder
(``SamModel``), whose image encoder is frozen. LoRA (peft) adapts the language model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cxrils.models.rosalia.configuration import RosaliaConfig
from cxrils.models.rosalia.losses import mask_bce, mask_dice


class LinearProjector(nn.Module):
    """LLaVA-v1's single linear vision-to-text projector (LISA-7B-v1 uses it).

    Replaces transformers' two-layer ``LlavaMultiModalProjector`` when
    ``RosaliaConfig.projector_type == "linear"``.
    """

    def __init__(self, vision_hidden: int, text_hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(vision_hidden, text_hidden)

    def forward(self, image_features: torch.Tensor) -> torch.Tensor:
        return self.linear(image_features)


def build_llava(cfg: RosaliaConfig, image_token_id: int):
    """Build or load the LLaVA backbone (transformers ``LlavaForConditionalGeneration``).

    Loads from ``cfg.llava_path`` when given (local folder; never downloads), else builds
    a randomly initialised model from ``cfg.llava_config``.
    """
    from transformers import LlavaConfig, LlavaForConditionalGeneration

    if cfg.llava_path:
        model = LlavaForConditionalGeneration.from_pretrained(cfg.llava_path, local_files_only=True)
    else:
        conf = LlavaConfig(**cfg.llava_config, image_token_index=image_token_id)
        model = LlavaForConditionalGeneration(conf)
    if cfg.projector_type == "linear" and not isinstance(model.model.multi_modal_projector, LinearProjector):
        model.model.multi_modal_projector = LinearProjector(
            model.config.vision_config.hidden_size, model.config.text_config.hidden_size
        )
    model.config.image_token_index = image_token_id
    model.model.config.image_token_id = image_token_id
    return model


def build_sam(cfg: RosaliaConfig):
    """Build or load SAM (transformers ``SamModel``) from ``cfg.sam_path`` or ``cfg.sam_config``."""
    from transformers import SamConfig, SamModel

    if cfg.sam_path:
        return SamModel.from_pretrained(cfg.sam_path, local_files_only=True)
    return SamModel(SamConfig(**cfg.sam_config))


@dataclass
class RosaliaOutput:
    """Loss terms (scalars) and mask logits (list of (H_i, W_i) tensors at each
    sample's original image size)."""

    loss: torch.Tensor
    loss_txt: torch.Tensor
    loss_bce: torch.Tensor
    loss_dice: torch.Tensor
    mask_logits: list[torch.Tensor]


class RosaliaForSegmentation(nn.Module):
    """LLaVA + SAM + the [SEG] projection MLP.

    Parameters
    ----------
    cfg : RosaliaConfig
    llava : LlavaForConditionalGeneration
    sam : SamModel
    seg_token_id : int
        Token id of ``[SEG]`` in the tokenizer.
    """

    def __init__(self, cfg: RosaliaConfig, llava, sam, seg_token_id: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.llava = llava
        self.sam = sam
        self.seg_token_id = seg_token_id
        hidden = llava.config.text_config.hidden_size
        # LISA's text_hidden_fcs: Linear(h, h) -> ReLU -> Linear(h, 256) -> Dropout(0).
        self.text_hidden_fcs = nn.Sequential(
            nn.Linear(hidden, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, cfg.seg_out_dim), nn.Dropout(0.0)
        )
        self.lora_applied = False

    # ----------------------------------------------------------------- set-up
    def apply_lora(self) -> None:
        """Inject LoRA (rank ``cfg.lora_r``, alpha ``cfg.lora_alpha``) into the language
        model's ``cfg.lora_target_modules`` and set which parameters train: LoRA, SAM's
        mask decoder, the [SEG] MLP, ``lm_head`` and the token embeddings (as LISA);
        SAM's image encoder, the vision tower and the projector stay frozen."""
        from peft import LoraConfig, inject_adapter_in_model

        targets = "|".join(self.cfg.lora_target_modules)
        lora = LoraConfig(
            r=self.cfg.lora_r, lora_alpha=self.cfg.lora_alpha, lora_dropout=self.cfg.lora_dropout,
            target_modules=rf".*language_model.*\.({targets})", bias="none",
        )
        inject_adapter_in_model(lora, self.llava)
        self.lora_applied = True
        self.set_trainable()

    def set_trainable(self) -> None:
        """Freeze everything but LoRA, mask decoder, [SEG] MLP, lm_head, embeddings."""
        for name, p in self.named_parameters():
            p.requires_grad = (
                "lora_" in name
                or name.startswith("sam.mask_decoder.")
                or name.startswith("text_hidden_fcs.")
                or name.startswith("llava.lm_head.")
                or "embed_tokens" in name
            )

    # ----------------------------------------------------------------- pieces
    def seg_hidden_positions(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool (B, L) mask of the positions whose hidden state embeds each [SEG].

        As LISA: the position **before** each [SEG] token, i.e. the hidden state whose
        next-token prediction is [SEG] (``input_ids[:, 1:] == seg`` shifted left).
        """
        nxt = input_ids[:, 1:] == self.seg_token_id
        return torch.cat([nxt, torch.zeros_like(nxt[:, :1])], dim=1)

    def seg_prompts(self, input_ids: torch.Tensor, last_hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt embeddings of the first [SEG] of each sample.

        Returns
        -------
        prompts : tensor (B, seg_out_dim)
        has_seg : bool tensor (B,)
        """
        pos = self.seg_hidden_positions(input_ids)
        has_seg = pos.any(dim=1)
        first = pos.float().argmax(dim=1)
        h = last_hidden[torch.arange(input_ids.shape[0]), first]
        return self.text_hidden_fcs(h), has_seg

    def decode_masks(
        self,
        sam_pixel_values: torch.Tensor,
        prompts: torch.Tensor,
        reshaped_sizes: torch.Tensor,
        original_sizes: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Run SAM (frozen encoder) with one sparse prompt per image.

        Parameters
        ----------
        sam_pixel_values : (B, 3, S, S) float, SAM-normalised, padded to S = sam_image_size
        prompts : (B, C) prompt embeddings
        reshaped_sizes, original_sizes : (B, 2) int, (h, w) after SAM resize / of the image

        Returns
        -------
        list of (H_i, W_i) mask logits at each original image size.
        """
        with torch.no_grad():
            emb = self.sam.get_image_embeddings(sam_pixel_values)
        b = emb.shape[0]
        pos = self.sam.get_image_wide_positional_embeddings().repeat(b, 1, 1, 1).to(emb.dtype)
        dense = self.sam.prompt_encoder.no_mask_embed.weight.reshape(1, -1, 1, 1).expand(b, -1, emb.shape[-2], emb.shape[-1])
        low_res, _ = self.sam.mask_decoder(
            image_embeddings=emb, image_positional_embeddings=pos,
            sparse_prompt_embeddings=prompts[:, None, None, :].to(emb.dtype),
            dense_prompt_embeddings=dense, multimask_output=False,
        )[:2]
        low_res = low_res[:, 0, 0]  # (B, h, w)
        s = self.cfg.sam_image_size
        up = F.interpolate(low_res[:, None], size=(s, s), mode="bilinear", align_corners=False)[:, 0]
        out = []
        for i in range(b):
            rh, rw = (int(v) for v in reshaped_sizes[i])
            oh, ow = (int(v) for v in original_sizes[i])
            crop = up[i, :rh, :rw][None, None]
            out.append(F.interpolate(crop, size=(oh, ow), mode="bilinear", align_corners=False)[0, 0])
        return out

    # ----------------------------------------------------------------- forward
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        sam_pixel_values: torch.Tensor,
        reshaped_sizes: torch.Tensor,
        original_sizes: torch.Tensor,
        labels: torch.Tensor,
        gt_masks: list[torch.Tensor],
    ) -> RosaliaOutput:
        """Teacher-forced forward pass and loss.

        ``input_ids`` (B, L) hold the prompt and the answer (with exactly one [SEG]);
        ``labels`` (B, L) are -100 on the prompt. ``gt_masks`` are (H_i, W_i) {0, 1}
        tensors at each image's original size (all zero for negatives).

        Raises
        ------
        ValueError
            If a sample has no [SEG] token.
        """
        out = self.llava(
            input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixel_values,
            labels=labels, output_hidden_states=True, return_dict=True,
        )
        prompts, has_seg = self.seg_prompts(input_ids, out.hidden_states[-1])
        if not bool(has_seg.all()):
            raise ValueError("every training answer must contain one [SEG] token")
        logits = self.decode_masks(sam_pixel_values, prompts, reshaped_sizes, original_sizes)
        l_bce = mask_bce(logits, gt_masks)
        l_dice = mask_dice(logits, gt_masks)
        loss = self.cfg.lambda_txt * out.loss + self.cfg.lambda_bce * l_bce + self.cfg.lambda_dice * l_dice
        return RosaliaOutput(loss, out.loss.detach(), l_bce.detach(), l_dice.detach(), logits)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        sam_pixel_values: torch.Tensor,
        reshaped_sizes: torch.Tensor,
        original_sizes: torch.Tensor,
        eos_token_id: int | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        """Greedy answer generation, then a mask for each answer that contains [SEG].

        Returns
        -------
        new_tokens : (B, T) generated token ids (prompt excluded)
        mask_logits : list of (H_i, W_i) tensors, or None where no [SEG] was generated
        """
        gen = self.llava.generate(
            input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixel_values,
            max_new_tokens=self.cfg.max_new_tokens, do_sample=False, eos_token_id=eos_token_id,
            pad_token_id=eos_token_id,
        )
        new_tokens = gen[:, input_ids.shape[1]:]
        full_mask = torch.cat([attention_mask, torch.ones_like(new_tokens)], dim=1)
        out = self.llava(input_ids=gen, attention_mask=full_mask, pixel_values=pixel_values,
                         output_hidden_states=True, return_dict=True)
        # Only a [SEG] in the generated part counts; positions before it are the prompt.
        ids = gen.clone()
        ids[:, : input_ids.shape[1]] = -1
        prompts, has_seg = self.seg_prompts(ids, out.hidden_states[-1])
        logits = self.decode_masks(sam_pixel_values, prompts, reshaped_sizes, original_sizes)
        return new_tokens, [lg if bool(h) else None for lg, h in zip(logits, has_seg)]
