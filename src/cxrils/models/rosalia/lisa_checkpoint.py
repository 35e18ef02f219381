"""Loading LISA checkpoints (``xinlai/LISA-7B-v1`` layout) into ROSALIA.

The paper fine-tunes from LISA-7B (section 5). LISA's checkpoint is a LLaVA-v1 model
(Llama-2-7B language model, CLIP ViT-L/14 vision tower, single-linear projector) with
SAM ViT-H inside (``model.visual_model.*``, original segment-anything names) and the
[SEG] MLP (``model.text_hidden_fcs.0.*``). This module maps those names onto the
transformers modules of :class:`~cxrils.models.rosalia.modeling.RosaliaForSegmentation`.

Key mapping (LISA -> ROSALIA)::

    model.embed_tokens.* / model.layers.* / model.norm.*  -> llava.model.language_model.*
    lm_head.*                                             -> llava.lm_head.*
    model.mm_projector.{weight,bias}                      -> llava.model.multi_modal_projector.linear.*
    model.mm_projector.{0,2}.*   (mlp2x_gelu)             -> llava.model.multi_modal_projector.linear_{1,2}.*
    model.vision_tower.vision_tower.vision_model.*        -> llava.model.vision_tower[.vision_model].*
    model.text_hidden_fcs.0.{0,2}.*                       -> text_hidden_fcs.{0,2}.*
    model.visual_model.*                                  -> sam.* with transformers' SAM renames
                                                             (convert_sam_to_hf.py's table, below)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import torch

#: Renames of transformers' ``convert_sam_to_hf.py`` (original segment-anything -> SamModel),
#: applied in this order.
SAM_KEY_RENAMES: tuple[tuple[str, str], ...] = (
    ("iou_prediction_head.layers.0", "iou_prediction_head.proj_in"),
    ("iou_prediction_head.layers.1", "iou_prediction_head.layers.0"),
    ("iou_prediction_head.layers.2", "iou_prediction_head.proj_out"),
    ("mask_decoder.output_upscaling.0", "mask_decoder.upscale_conv1"),
    ("mask_decoder.output_upscaling.1", "mask_decoder.upscale_layer_norm"),
    ("mask_decoder.output_upscaling.3", "mask_decoder.upscale_conv2"),
    ("mask_downscaling.0", "mask_embed.conv1"),
    ("mask_downscaling.1", "mask_embed.layer_norm1"),
    ("mask_downscaling.3", "mask_embed.conv2"),
    ("mask_downscaling.4", "mask_embed.layer_norm2"),
    ("mask_downscaling.6", "mask_embed.conv3"),
    ("point_embeddings", "point_embed"),
    ("pe_layer.positional_encoding_gaussian_matrix", "shared_embedding.positional_embedding"),
    ("image_encoder", "vision_encoder"),
    ("neck.0", "neck.conv1"),
    ("neck.1", "neck.layer_norm1"),
    ("neck.2", "neck.conv2"),
    ("neck.3", "neck.layer_norm2"),
    ("patch_embed.proj", "patch_embed.projection"),
    (".norm", ".layer_norm"),
    ("blocks", "layers"),
)
_HYPER = re.compile(r".*output_hypernetworks_mlps\.(\d+)\.layers\.(\d+).*")


class LisaCheckpointError(ValueError):
    """Raised when a LISA checkpoint cannot be read or does not fit the model."""


def map_sam_key(key: str) -> str:
    """Original segment-anything key (without prefix) -> transformers ``SamModel`` key."""
    for old, new in SAM_KEY_RENAMES:
        if old in key:
            key = key.replace(old, new)
    m = _HYPER.match(key)
    if m:
        layer = int(m.group(2))
        key = key.replace(f"layers.{layer}", {0: "proj_in", 1: "layers.0", 2: "proj_out"}[layer])
    return key


def map_lisa_key(key: str, vision_prefix: str, projector_type: str) -> str | None:
    """Map one LISA key to a ROSALIA key; None for keys with no counterpart.

    ``vision_prefix`` is ``"llava.model.vision_tower."`` or
    ``"llava.model.vision_tower.vision_model."`` depending on the transformers version.
    """
    if key.startswith("model.visual_model."):
        sub = key[len("model.visual_model."):]
        if sub in ("pixel_mean", "pixel_std"):
            return None
        return "sam." + map_sam_key(sub)
    if key.startswith("model.text_hidden_fcs.0."):
        return "text_hidden_fcs." + key[len("model.text_hidden_fcs.0."):]
    if key.startswith("model.mm_projector."):
        rest = key[len("model.mm_projector."):]
        if projector_type == "linear":
            return "llava.model.multi_modal_projector.linear." + rest
        layer, _, param = rest.partition(".")
        return f"llava.model.multi_modal_projector.linear_{ {'0': 1, '2': 2}[layer] }.{param}"
    if key.startswith("model.vision_tower.vision_tower.vision_model."):
        return vision_prefix + key[len("model.vision_tower.vision_tower.vision_model."):]
    if key.startswith(("model.embed_tokens.", "model.layers.", "model.norm.")):
        return "llava.model.language_model." + key[len("model."):]
    if key.startswith("lm_head."):
        return "llava." + key
    return None


def convert_lisa_state_dict(state: Mapping[str, torch.Tensor], model_keys: set[str],
                            projector_type: str = "linear") -> dict[str, torch.Tensor]:
    """Rename a LISA state dict for a ROSALIA model whose keys are ``model_keys``.

    Also fills SAM's ``shared_image_embedding.positional_embedding`` from the prompt
    encoder's matrix (SAM shares it, transformers stores it twice).

    Raises
    ------
    LisaCheckpointError
        If a LISA key maps to a name the model does not have.
    """
    vision_prefix = "llava.model.vision_tower.vision_model."
    if not any(k.startswith(vision_prefix) for k in model_keys):
        vision_prefix = "llava.model.vision_tower."
    out: dict[str, torch.Tensor] = {}
    unknown = []
    for key, value in state.items():
        new = map_lisa_key(key, vision_prefix, projector_type)
        if new is None:
            continue
        if new not in model_keys:
            unknown.append(f"{key} -> {new}")
            continue
        out[new] = value
    if unknown:
        raise LisaCheckpointError(f"{len(unknown)} LISA keys have no place in the model, e.g. {unknown[:5]}")
    shared = "sam.prompt_encoder.shared_embedding.positional_embedding"
    if shared in out:
        out["sam.shared_image_embedding.positional_embedding"] = out[shared]
    return out


def read_checkpoint(folder: str | Path) -> dict[str, torch.Tensor]:
    """Read every ``*.safetensors`` or ``pytorch_model*.bin`` shard of a local folder.

    Raises
    ------
    LisaCheckpointError
        If the folder has no weight files.
    """
    folder = Path(folder)
    state: dict[str, torch.Tensor] = {}
    shards = sorted(folder.glob("*.safetensors"))
    if shards:
        from safetensors.torch import load_file

        for s in shards:
            state.update(load_file(str(s)))
        return state
    bins = sorted(folder.glob("pytorch_model*.bin"))
    if not bins:
        raise LisaCheckpointError(
            f"{folder}: no *.safetensors or pytorch_model*.bin; download xinlai/LISA-7B-v1 to this folder first"
        )
    for b in bins:
        state.update(torch.load(b, map_location="cpu", weights_only=True))
    return state


def load_lisa_into(model, state: Mapping[str, torch.Tensor]) -> list[str]:
    """Load a LISA state dict into ``model`` (before LoRA is applied).

    Returns
    -------
    list of str
        Model keys the checkpoint did not provide (e.g. the CLIP tower when LISA's
        folder omits it); the caller decides whether that is acceptable.
    """
    if getattr(model, "lora_applied", False):
        raise LisaCheckpointError("load LISA weights before apply_lora()")
    keys = set(model.state_dict().keys())
    converted = convert_lisa_state_dict(state, keys, model.cfg.projector_type)
    missing, _ = model.load_state_dict(converted, strict=False)
    return sorted(missing)
