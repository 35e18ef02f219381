"""ROSALIA: the LISA architecture (LLaVA-v1 + SAM with a ``[SEG]`` token) on transformers.

Paper section 5; restated from KAIST-Edlab/ROSALIA ``model/LISA.py`` and
``model/llava/model/llava_arch.py``:

* the CLIP tower's hidden state ``mm_vision_select_layer`` (-2), patch tokens only (CLS
  dropped), goes through ``mm_projector`` (one Linear for LISA-7B-v1) and replaces the
  single -200 placeholder of ``input_ids`` (``prepare_inputs_labels_for_multimodal``;
  labels there are -100);
* the language model (LLaMA) runs on these embeddings; the final (normalised) hidden
  state at the position **before** each ``[SEG]`` (``seg_token_mask = input_ids[:, 1:] ==
  seg``, i.e. the state that predicts ``[SEG]``) goes through ``text_hidden_fcs[0]`` =
  Linear(h, h) -> ReLU -> Linear(h, 256) -> Dropout(0);
* that embedding is SAM's only sparse prompt (``text_embeds``), with SAM's "no mask"
  dense embedding and positional encoding; the frozen image encoder reads the
  1024 x 1024 SAM input; one mask (``multimask_output=False``) per ``[SEG]``;
* ``postprocess_masks``: bilinear to 1024 x 1024, crop to the resized image, bilinear
  to the output size (float32); a pixel is foreground where the logit is > 0. In
  training (LISA.py ``model_forward``) the output size is the label's, 1024 x 1024:
  the crop is stretched over the padded frame and compared there with the padded
  target (:func:`~cxrils.models.rosalia.processing.padded_target`). That frame is what
  the released weights learned; :meth:`RosaliaForSegmentation.decode_masks` maps it
  back to the image (``mask_geometry="padded"``, the default);
* losses (LISA.py ``model_forward``), on that padded frame: ``ce_loss_weight * CE``
  (next-token, mean over answer tokens) + ``bce_loss_weight * mean_i BCE_i`` (mean over
  the 1024 x 1024 pixels) + ``dice_loss_weight * mean over positives of Dice_i``
  (ROSALIA skips Dice for empty targets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cxrils.models.rosalia.configuration import ALL_LINEAR, RosaliaConfig
from cxrils.models.rosalia.losses import mask_bce, mask_dice
from cxrils.models.rosalia.tokenizer import IGNORE_INDEX, IMAGE_TOKEN_INDEX


def build_projector(kind: str, vision_hidden: int, text_hidden: int) -> nn.Module:
    """LLaVA's ``mm_projector``: one Linear (LISA-7B-v1), or Linear-GELU-Linear (LLaVA-1.5)."""
    if kind == "linear":
        return nn.Linear(vision_hidden, text_hidden)
    if kind == "mlp2x_gelu":
        return nn.Sequential(nn.Linear(vision_hidden, text_hidden), nn.GELU(), nn.Linear(text_hidden, text_hidden))
    raise ValueError(f"unknown projector_type {kind!r}; expected 'linear' or 'mlp2x_gelu'")


@dataclass
class RosaliaOutput:
    """Loss terms (scalars) and mask logits (list of (H_i, W_i) float32 tensors at each
    sample's original image size)."""

    loss: torch.Tensor
    loss_txt: torch.Tensor
    loss_bce: torch.Tensor
    loss_dice: torch.Tensor
    mask_logits: list[torch.Tensor]


class RosaliaForSegmentation(nn.Module):
    """LLaMA + CLIP tower + projector + SAM + the [SEG] MLP.

    Parameters
    ----------
    cfg : RosaliaConfig
    language_model : transformers.LlamaForCausalLM
    vision_tower : transformers.CLIPVisionModel
    sam : transformers.SamModel
    seg_token_id : int
        Id of ``[SEG]`` in the tokenizer.
    """

    def __init__(self, cfg: RosaliaConfig, language_model, vision_tower, sam, seg_token_id: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.language_model = language_model
        self.vision_tower = vision_tower
        hidden = language_model.config.hidden_size
        self.mm_projector = build_projector(cfg.projector_type, vision_tower.config.hidden_size, hidden)
        self.sam = sam
        self.text_hidden_fcs = nn.ModuleList(
            [
                nn.Sequential(
                    nn.Linear(hidden, hidden),
                    nn.ReLU(inplace=True),
                    nn.Linear(hidden, cfg.seg_out_dim),
                    nn.Dropout(0.0),
                )
            ]
        )
        self.seg_token_id = seg_token_id
        self.lora_applied = False

    # ----------------------------------------------------------------- set-up
    def lora_target_names(self) -> list[str]:
        """Module names (inside ``language_model``) that get LoRA: every ``nn.Linear`` of
        the language model, ``lm_head`` included, as train_ds.py's ``find_linear_layers``
        (which excludes only visual_model, vision_tower, mm_projector, text_hidden_fcs,
        none of which is inside the language model); or those whose last name part is in
        ``cfg.lora_target_modules``."""
        names = [n for n, m in self.language_model.named_modules() if isinstance(m, nn.Linear)]
        targets = self.cfg.lora_target_modules
        if tuple(targets) != (ALL_LINEAR,):
            names = [n for n in names if n.rsplit(".", 1)[-1] in targets]
        if not names:
            raise ValueError(f"lora_target_modules {targets} match no linear layer of the language model")
        return sorted(names)

    def sam_encoder_lora_names(self) -> list[str]:
        """Every ``nn.Linear`` of SAM's image encoder (train_ds.py ``find_linear_layers``
        with ``--lora_sam_encoder``: names containing ``visual_model.image_encoder``), as
        names inside ``sam.vision_encoder``."""
        return sorted(n for n, m in self.sam.vision_encoder.named_modules() if isinstance(m, nn.Linear))

    def apply_lora(self) -> None:
        """Inject LoRA (rank ``cfg.lora_r``, alpha ``cfg.lora_alpha``) into
        :meth:`lora_target_names`, and with ``cfg.lora_sam_encoder`` into
        :meth:`sam_encoder_lora_names`, and set which parameters train (:meth:`set_trainable`)."""
        from peft import LoraConfig, inject_adapter_in_model

        if self.cfg.lora_r > 0:

            def lora(targets: list[str]) -> LoraConfig:
                return LoraConfig(
                    r=self.cfg.lora_r,
                    lora_alpha=self.cfg.lora_alpha,
                    lora_dropout=self.cfg.lora_dropout,
                    target_modules=targets,
                    bias="none",
                )

            inject_adapter_in_model(lora(self.lora_target_names()), self.language_model)
            if self.cfg.lora_sam_encoder:
                inject_adapter_in_model(lora(self.sam_encoder_lora_names()), self.sam.vision_encoder)
        self.lora_applied = True
        self.set_trainable()

    def set_trainable(self) -> None:
        """Train LoRA, ``lm_head``, ``embed_tokens``, SAM's mask decoder and the [SEG] MLP
        (train_ds.py: names containing lm_head, embed_tokens, mask_decoder,
        text_hidden_fcs, plus peft's LoRA weights); freeze the rest (SAM's image and prompt
        encoders, the CLIP tower, the projector, the LLaMA weights)."""
        for name, p in self.named_parameters():
            p.requires_grad = "lora_" in name or any(
                s in name for s in ("lm_head", "embed_tokens", "mask_decoder", "text_hidden_fcs")
            )

    # ----------------------------------------------------------------- pieces
    def encode_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """CLIP features -> projector: (B, 3, s, s) -> (B, N, hidden), N = patches."""
        tower_dtype = next(self.vision_tower.parameters()).dtype
        with torch.no_grad():
            out = self.vision_tower(pixel_values.to(tower_dtype), output_hidden_states=True)
            feats = out.hidden_states[self.cfg.mm_vision_select_layer][:, 1:]
        return self.mm_projector(feats.to(self.mm_projector_dtype))

    @property
    def mm_projector_dtype(self) -> torch.dtype:
        """The dtype of the projector's weights (CLIP features are cast to it)."""
        return next(self.mm_projector.parameters()).dtype

    def inputs_embeds(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        labels: torch.Tensor | None = None,
    ):
        """Replace each sample's single -200 by its N image features.

        Returns
        -------
        embeds : (B, L + N - 1, hidden)
        attention_mask : (B, L + N - 1) long
        labels : (B, L + N - 1) long or None (-100 on the image features)
        image_pos : (B,) long, position of the placeholder in ``input_ids``

        Raises
        ------
        ValueError
            If a sample has no or several image placeholders.
        """
        counts = (input_ids == IMAGE_TOKEN_INDEX).sum(dim=1)
        if not bool((counts == 1).all()):
            raise ValueError(
                f"every sample needs exactly one image placeholder ({IMAGE_TOKEN_INDEX}), got {counts.tolist()}"
            )
        feats = self.encode_images(pixel_values)
        emb_layer = self.language_model.get_input_embeddings()
        pos = (input_ids == IMAGE_TOKEN_INDEX).float().argmax(dim=1)
        safe = input_ids.clamp(min=0)
        text = emb_layer(safe)
        n = feats.shape[1]
        rows, masks, labs = [], [], []
        for i in range(input_ids.shape[0]):
            p = int(pos[i])
            rows.append(torch.cat([text[i, :p], feats[i].to(text.dtype), text[i, p + 1 :]], dim=0))
            ones = torch.ones(n, dtype=attention_mask.dtype, device=attention_mask.device)
            masks.append(torch.cat([attention_mask[i, :p], ones, attention_mask[i, p + 1 :]]))
            if labels is not None:
                ign = torch.full((n,), IGNORE_INDEX, dtype=labels.dtype, device=labels.device)
                labs.append(torch.cat([labels[i, :p], ign, labels[i, p + 1 :]]))
        return (torch.stack(rows), torch.stack(masks), torch.stack(labs) if labels is not None else None, pos)

    def seg_hidden_positions(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool (B, L) mask of the positions whose hidden state embeds each [SEG]:
        ``input_ids[:, 1:] == seg`` shifted left (the state that predicts [SEG])."""
        nxt = input_ids[:, 1:] == self.seg_token_id
        return torch.cat([nxt, torch.zeros_like(nxt[:, :1])], dim=1)

    def expand_positions(self, mask: torch.Tensor, image_pos: torch.Tensor, n_image: int) -> torch.Tensor:
        """A (B, L) mask over ``input_ids`` on the (B, L + N - 1) embedded sequence."""
        out = torch.zeros((mask.shape[0], mask.shape[1] + n_image - 1), dtype=mask.dtype, device=mask.device)
        for i in range(mask.shape[0]):
            p = int(image_pos[i])
            out[i, :p] = mask[i, :p]
            out[i, p + n_image :] = mask[i, p + 1 :]
        return out

    def low_res_masks(self, sam_pixel_values: torch.Tensor, prompts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """SAM (frozen encoder, under ``no_grad`` as LISA.py's ``get_visual_embs``) with
        each sample's [SEG] embeddings as its only sparse prompts.

        Parameters
        ----------
        sam_pixel_values : (B, 3, S, S) SAM-normalised, padded to S = sam_image_size
        prompts : list of (K_i, C) tensors, one row per [SEG] (K_i >= 1)

        Returns
        -------
        list of (K_i, 1, S/4, S/4) mask logits of SAM's mask decoder (``multimask_output=False``).
        """
        sam_dtype = next(self.sam.parameters()).dtype
        with torch.no_grad():
            emb = self.sam.get_image_embeddings(sam_pixel_values.to(sam_dtype))
        pe = self.sam.get_image_wide_positional_embeddings().to(emb.dtype)
        dense_w = self.sam.prompt_encoder.no_mask_embed.weight
        out = []
        for i, pr in enumerate(prompts):
            k = pr.shape[0]
            dense = dense_w.reshape(1, -1, 1, 1).expand(k, -1, emb.shape[-2], emb.shape[-1]).to(emb.dtype)
            low_res, _ = self.sam.mask_decoder(
                image_embeddings=emb[i : i + 1].expand(k, -1, -1, -1),
                image_positional_embeddings=pe.expand(k, -1, -1, -1),
                sparse_prompt_embeddings=pr[:, None, None, :].to(emb.dtype),
                dense_prompt_embeddings=dense,
                multimask_output=False,
            )[:2]
            out.append(low_res[:, 0])
        return out

    def padded_frame(self, low_res: torch.Tensor, reshaped_size) -> torch.Tensor:
        """SAM's ``postprocess_masks`` with ``original_size`` = the padded frame, as LISA.py
        ``model_forward`` calls it in training: (K, 1, s, s) low-res logits -> bilinear to
        S x S, crop to the resized image ``(h, w)``, bilinear back to S x S. Returns
        (K, S, S) float32: the frame the loss compares with the padded target."""
        s = self.cfg.sam_image_size
        rh, rw = (int(v) for v in reshaped_size)
        up = F.interpolate(low_res.float(), size=(s, s), mode="bilinear", align_corners=False)
        return F.interpolate(up[..., :rh, :rw], size=(s, s), mode="bilinear", align_corners=False)[:, 0]

    def decode_masks(
        self,
        sam_pixel_values: torch.Tensor,
        prompts: Sequence[torch.Tensor],
        reshaped_sizes: torch.Tensor,
        original_sizes: torch.Tensor,
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Mask logits of each sample's [SEG] prompts at its image's own size, and the
        foreground pixels each mask puts in the padding.

        ``cfg.mask_geometry`` "padded" (default): the frame of :meth:`padded_frame` (what
        the released weights learned), whose image part ``[:h, :w]`` is resized to the
        image; "image": ``postprocess_masks`` with the image size (the inference example's
        call), which reads the same logits in another frame for a non-square image.

        Parameters
        ----------
        sam_pixel_values : (B, 3, S, S)
        prompts : list of (K_i, C) tensors
        reshaped_sizes, original_sizes : (B, 2) int, (h, w) after SAM's resize / of the image

        Returns
        -------
        list of (logits, padding)
            ``logits``: (K_i, H_i, W_i) float32 mask logits (bilinear resizes,
            align_corners=False). ``padding``: (K_i,) int64, the pixels of the padded
            S x S frame outside ``[:h, :w]`` whose logit is > 0: the false positives the
            authors' ``validate()`` counts there (it compares this frame with the target
            zero-padded like the image, ``utils/reason_seg_dataset.py``). Zero with
            ``mask_geometry="image"`` (that frame has no padding).
        """
        s = self.cfg.sam_image_size
        out = []
        for i, low_res in enumerate(self.low_res_masks(sam_pixel_values, prompts)):
            rh, rw = (int(v) for v in reshaped_sizes[i])
            oh, ow = (int(v) for v in original_sizes[i])
            if self.cfg.mask_geometry == "padded":
                masks = self.padded_frame(low_res, reshaped_sizes[i])[:, None]
                fg = masks[:, 0] > 0
                padding = fg.flatten(1).sum(1) - fg[:, :rh, :rw].flatten(1).sum(1)
            else:
                masks = F.interpolate(low_res.float(), size=(s, s), mode="bilinear", align_corners=False)
                padding = torch.zeros(len(masks), dtype=torch.int64)
            masks = F.interpolate(masks[..., :rh, :rw], size=(oh, ow), mode="bilinear", align_corners=False)
            out.append((masks[:, 0], padding.to(torch.int64)))
        return out

    def _hidden(self, embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.language_model.model(inputs_embeds=embeds, attention_mask=attention_mask).last_hidden_state

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
        gt_frames: list[torch.Tensor],
    ) -> RosaliaOutput:
        """Teacher-forced forward pass and loss (LISA.py ``model_forward``, training branch).

        ``input_ids`` (B, L) hold prompt and answer (one -200, one [SEG]); ``labels`` (B, L)
        are -100 outside the answer; ``gt_frames`` are (S, S) {0, 1} targets in SAM's padded
        frame (:func:`~cxrils.models.rosalia.processing.padded_target`; all zero for
        negatives). The mask losses compare them with :meth:`padded_frame`, as upstream;
        ``RosaliaOutput.mask_logits`` are those (S, S) logits. ``original_sizes`` is not
        used here (it is at inference, :meth:`decode_masks`).

        Raises
        ------
        ValueError
            If a sample has no [SEG] token.
        """
        embeds, att, labs, image_pos = self.inputs_embeds(input_ids, attention_mask, pixel_values, labels)
        hidden = self._hidden(embeds, att)
        logits = self.language_model.lm_head(hidden).float()
        loss_txt = F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), labs[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX
        )
        seg = self.seg_hidden_positions(input_ids)
        if not bool(seg.any(dim=1).all()):
            raise ValueError("every training answer must contain a [SEG] token")
        seg_e = self.expand_positions(seg, image_pos, embeds.shape[1] - input_ids.shape[1] + 1)
        first = seg_e.float().argmax(dim=1)
        h = hidden[torch.arange(hidden.shape[0]), first]
        prompts = self.text_hidden_fcs[0](h)
        low_res = self.low_res_masks(sam_pixel_values, [p[None] for p in prompts])
        masks = [self.padded_frame(lr, size)[0] for lr, size in zip(low_res, reshaped_sizes)]
        l_bce = mask_bce(masks, [g.to(masks[0].device) for g in gt_frames])
        l_dice = mask_dice(masks, [g.to(masks[0].device) for g in gt_frames])
        loss = self.cfg.lambda_txt * loss_txt + self.cfg.lambda_bce * l_bce + self.cfg.lambda_dice * l_dice
        return RosaliaOutput(loss, loss_txt.detach(), l_bce.detach(), l_dice.detach(), masks)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        sam_pixel_values: torch.Tensor,
        reshaped_sizes: torch.Tensor,
        original_sizes: torch.Tensor,
        eos_token_id: int,
        pad_token_id: int,
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor] | None]]:
        """Greedy answer (LISA.py ``evaluate``: ``num_beams=1``, up to ``cfg.max_new_tokens``,
        stop at ``</s>``), then one mask per generated [SEG].

        Returns
        -------
        new_tokens : (B, T) generated token ids (prompt excluded, padded with ``pad_token_id``)
        masks : list of (logits, padding) as :meth:`decode_masks` gives them, or None where
            no [SEG] was generated
        """
        embeds, att, _, _ = self.inputs_embeds(input_ids, attention_mask, pixel_values)
        new = self.language_model.generate(
            inputs_embeds=embeds,
            attention_mask=att,
            max_new_tokens=self.cfg.max_new_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
        )
        emb_new = self.language_model.get_input_embeddings()(new)
        full = torch.cat([embeds, emb_new.to(embeds.dtype)], dim=1)
        full_att = torch.cat([att, torch.ones_like(new, dtype=att.dtype)], dim=1)
        hidden = self._hidden(full, full_att)
        start = embeds.shape[1]
        prompts, keep = [], []
        for i in range(new.shape[0]):
            at = (new[i] == self.seg_token_id).nonzero().flatten()
            keep.append(len(at) > 0)
            prompts.append(self.text_hidden_fcs[0](hidden[i, start + at - 1]) if len(at) else None)
        masks: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * new.shape[0]
        idx = [i for i, k in enumerate(keep) if k]
        if idx:
            dec = self.decode_masks(
                sam_pixel_values[idx], [prompts[i] for i in idx], reshaped_sizes[idx], original_sizes[idx]
            )
            for i, m in zip(idx, dec):
                masks[i] = m
        return new, masks
