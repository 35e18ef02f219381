"""Reading ``LISAForCausalLM`` checkpoints (xinlai/LISA-7B-v1, checkone/ROSALIA-7B-v1).

The released folders (merged Hugging Face format, written by LISA's
``merge_lora_weights_and_save_hf_model.py``) hold ``config.json`` (``model_type: llava``,
``architectures: ["LISAForCausalLM"]``, LLaMA sizes, ``vocab_size`` 32004,
``mm_vision_tower: openai/clip-vit-large-patch14``, ``mm_hidden_size``,
``mm_vision_select_layer``, ``mm_use_im_start_end``, ``out_dim``), the LLaMA tokenizer with 4
added tokens (:mod:`cxrils.models.rosalia.tokenizer`) and the weights under
``LISAForCausalLM`` names, **without** the CLIP tower (the merge script drops every
``vision_tower`` key; LISA rebuilds the tower from ``mm_vision_tower``, a separate folder).

Key mapping (LISA -> :class:`~cxrils.models.rosalia.modeling.RosaliaForSegmentation`)::

    model.embed_tokens.* / model.layers.* / model.norm.*  -> language_model.model.*
    lm_head.weight                                        -> language_model.lm_head.weight
    model.mm_projector.{weight,bias} | .{0,2}.*           -> mm_projector.*  (linear | mlp2x_gelu)
    model.text_hidden_fcs.0.{0,2}.*                       -> text_hidden_fcs.0.{0,2}.*
    model.visual_model.*                                  -> sam.* (segment-anything -> SamModel names,
                                                             the renames of transformers' convert_sam_to_hf.py)

Ignored (documented, counted): ``model.vision_tower.*`` (the CLIP tower comes from its own
folder, as LISA's ``initialize_vision_modules`` reloads it), ``*.rotary_emb.inv_freq``
(recomputed from the config) and SAM's ``pixel_mean``/``pixel_std`` buffers (constants).
Any other key that has no place, and any model weight the checkpoint lacks, is an error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

LISA_ARCHITECTURE = "LISAForCausalLM"
#: Environment variable naming the local CLIP folder (openai/clip-vit-large-patch14).
CLIP_ENV = "CXRILS_CLIP_PATH"
#: SAM's two-way transformer has 8 heads (segment-anything build_sam.py ``TwoWayTransformer(num_heads=8)``);
#: the only SAM size the weights' shapes do not reveal.
SAM_DECODER_HEADS = 8

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
_IGNORED = (
    re.compile(r"^model\.vision_tower\."),
    re.compile(r"rotary_emb\.inv_freq$"),
    re.compile(r"^model\.visual_model\.pixel_(mean|std)$"),
)
_LLAMA_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "max_position_embeddings",
    "rms_norm_eps",
    "hidden_act",
    "rope_theta",
    "rope_scaling",
    "initializer_range",
    "pretraining_tp",
    "tie_word_embeddings",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "attention_bias",
)


class LisaCheckpointError(ValueError):
    """Raised when a LISA checkpoint folder is missing, incomplete or does not fit."""


def is_lisa_config(config: Mapping[str, Any]) -> bool:
    """True for the ``config.json`` of a ``LISAForCausalLM`` checkpoint."""
    return LISA_ARCHITECTURE in (config.get("architectures") or [])


def read_lisa_config(folder: str | Path) -> dict[str, Any]:
    """``config.json`` of a LISA checkpoint folder.

    Raises
    ------
    LisaCheckpointError
        If the folder or file is missing or is not a ``LISAForCausalLM`` config.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise LisaCheckpointError(
            f"{path}: missing; download checkone/ROSALIA-7B-v1 (or xinlai/LISA-7B-v1) from "
            f"the Hugging Face hub into {Path(folder)} (config.json, tokenizer files, weights)"
        )
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise LisaCheckpointError(f"{path}: not JSON: {err}") from err
    if not is_lisa_config(cfg):
        raise LisaCheckpointError(f"{path}: architectures {cfg.get('architectures')} is not [{LISA_ARCHITECTURE!r}]")
    return cfg


def llama_config(lisa: Mapping[str, Any]):
    """transformers ``LlamaConfig`` of the checkpoint's language model (its LLaMA fields)."""
    from transformers import LlamaConfig

    kwargs = {k: lisa[k] for k in _LLAMA_KEYS if k in lisa and lisa[k] is not None}
    return LlamaConfig(**kwargs)


def weight_files(folder: str | Path) -> list[Path]:
    """``*.safetensors`` shards, else ``pytorch_model*.bin`` shards, of a folder.

    Raises
    ------
    LisaCheckpointError
        If there are none.
    """
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))
    if not files:
        raise LisaCheckpointError(
            f"{folder}: no *.safetensors or pytorch_model*.bin; the hub folder "
            "checkone/ROSALIA-7B-v1 (or xinlai/LISA-7B-v1) must be downloaded completely"
        )
    return files


def iter_tensors(folder: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) of every weight, one shard at a time (a 7B checkpoint never sits in
    memory twice: each tensor is copied into the model and released)."""
    for f in weight_files(folder):
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as fh:
                for key in fh.keys():
                    yield key, fh.get_tensor(key)
        else:
            state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            yield from state.items()
            del state


def tensor_shapes(folder: str | Path) -> dict[str, tuple[int, ...]]:
    """Key -> shape of every weight, read from the headers (safetensors) or a memory map."""
    shapes: dict[str, tuple[int, ...]] = {}
    for f in weight_files(folder):
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as fh:
                for key in fh.keys():
                    shapes[key] = tuple(fh.get_slice(key).get_shape())
        else:
            state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            shapes.update({k: tuple(v.shape) for k, v in state.items()})
            del state
    return shapes


def sam_config_from_shapes(shapes: Mapping[str, tuple[int, ...]], prefix: str = "model.visual_model."):
    """transformers ``SamConfig`` of the SAM inside a LISA checkpoint, from its weight shapes.

    ViT width and patch from ``patch_embed.proj``, input size from ``pos_embed``, depth from
    the blocks, head width from ``rel_pos_h`` (its second axis), windowed vs global blocks
    from ``rel_pos_h``'s length (2 * window - 1 vs 2 * grid - 1), MLP and neck widths from
    their layers; prompt encoder and mask decoder likewise; decoder heads
    :data:`SAM_DECODER_HEADS`. SAM ViT-H gives 1280 wide, 32 blocks, 16 heads, global
    blocks 7, 15, 23, 31, window 14 (segment-anything ``build_sam_vit_h``).

    Raises
    ------
    LisaCheckpointError
        If the SAM weights are missing.
    """
    from transformers import SamConfig

    def shape(name: str) -> tuple[int, ...]:
        try:
            return shapes[prefix + name]
        except KeyError:
            raise LisaCheckpointError(f"checkpoint has no {prefix + name}: not a LISA checkpoint with SAM") from None

    def count(pattern: str) -> int:
        rx = re.compile(re.escape(prefix) + pattern)
        return len({m.group(1) for k in shapes for m in [rx.match(k)] if m})

    hidden, _, patch, _ = shape("image_encoder.patch_embed.proj.weight")
    grid = shape("image_encoder.pos_embed")[1]
    depth = count(r"image_encoder\.blocks\.(\d+)\.")
    rel = [shape(f"image_encoder.blocks.{i}.attn.rel_pos_h") for i in range(depth)]
    head_dim = rel[0][1]
    global_idx = [i for i, r in enumerate(rel) if r[0] == 2 * grid - 1]
    windows = {(r[0] + 1) // 2 for i, r in enumerate(rel) if i not in global_idx}
    dec_hidden = shape("mask_decoder.iou_token.weight")[1]
    vision = {
        "hidden_size": hidden,
        "num_hidden_layers": depth,
        "num_attention_heads": hidden // head_dim,
        "mlp_dim": shape("image_encoder.blocks.0.mlp.lin1.weight")[0],
        "image_size": grid * patch,
        "patch_size": patch,
        "output_channels": shape("image_encoder.neck.0.weight")[0],
        "global_attn_indexes": global_idx,
        "window_size": windows.pop() if windows else 0,
        "num_pos_feats": shape("prompt_encoder.pe_layer.positional_encoding_gaussian_matrix")[1],
    }
    prompt = {
        "hidden_size": shape("prompt_encoder.no_mask_embed.weight")[1],
        "image_size": grid * patch,
        "patch_size": patch,
        "mask_input_channels": shape("prompt_encoder.mask_downscaling.3.weight")[0],
    }
    q = shape("mask_decoder.transformer.layers.0.cross_attn_token_to_image.q_proj.weight")
    decoder = {
        "hidden_size": dec_hidden,
        "num_hidden_layers": count(r"mask_decoder\.transformer\.layers\.(\d+)\."),
        "num_attention_heads": SAM_DECODER_HEADS,
        "attention_downsample_rate": dec_hidden // q[0],
        "mlp_dim": shape("mask_decoder.transformer.layers.0.mlp.lin1.weight")[0],
        "num_multimask_outputs": shape("mask_decoder.mask_tokens.weight")[0] - 1,
        "iou_head_depth": count(r"mask_decoder\.iou_prediction_head\.layers\.(\d+)\."),
        "iou_head_hidden_dim": shape("mask_decoder.iou_prediction_head.layers.0.weight")[0],
    }
    return SamConfig(vision_config=vision, prompt_encoder_config=prompt, mask_decoder_config=decoder)


def projector_type_from_shapes(shapes: Mapping[str, tuple[int, ...]]) -> str:
    """ "linear" (LISA-7B-v1: one ``nn.Linear``) or "mlp2x_gelu" (LLaVA-1.5: Sequential 0, 2)."""
    return "mlp2x_gelu" if "model.mm_projector.0.weight" in shapes else "linear"


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


def map_lisa_key(key: str) -> str | None:
    """Map one LISA key to a :class:`RosaliaForSegmentation` key; None for keys with no
    counterpart (the ignored ones among them are listed in the module docstring)."""
    if key.startswith("model.visual_model."):
        return "sam." + map_sam_key(key[len("model.visual_model.") :])
    if key.startswith("model.text_hidden_fcs."):
        return "text_hidden_fcs." + key[len("model.text_hidden_fcs.") :]
    if key.startswith("model.mm_projector."):
        return "mm_projector." + key[len("model.mm_projector.") :]
    if key.startswith(("model.embed_tokens.", "model.layers.", "model.norm.")):
        return "language_model." + key
    if key == "lm_head.weight":
        return "language_model.lm_head.weight"
    return None


def is_ignored(key: str) -> bool:
    """True for checkpoint keys that are dropped on purpose (module docstring)."""
    return any(rx.search(key) for rx in _IGNORED)


def expected_keys(model) -> set[str]:
    """Model keys a LISA checkpoint must provide: everything but the CLIP tower and SAM's
    duplicate ``shared_image_embedding`` (filled from the prompt encoder's matrix)."""
    return {
        k
        for k in model.state_dict()
        if not k.startswith("vision_tower.")
        and k != "sam.shared_image_embedding.positional_embedding"
        and "lora_" not in k
    }


def load_lisa_weights(model, folder: str | Path) -> dict[str, Any]:
    """Copy a LISA checkpoint's weights into ``model`` (before LoRA), streaming.

    Returns
    -------
    dict
        ``loaded`` (count), ``ignored`` (count by reason: vision_tower, inv_freq, sam_pixel_stats).

    Raises
    ------
    LisaCheckpointError
        On an unexpected key, a missing weight or a shape mismatch (listing up to 5).
    """
    if getattr(model, "lora_applied", False):
        raise LisaCheckpointError("load LISA weights before apply_lora()")
    state = model.state_dict()
    needed = expected_keys(model)
    loaded: set[str] = set()
    unexpected, mismatched = [], []
    ignored = {"vision_tower": 0, "inv_freq": 0, "sam_pixel_stats": 0}
    with torch.no_grad():
        for key, value in iter_tensors(folder):
            if is_ignored(key):
                reason = (
                    "vision_tower" if "vision_tower" in key else "inv_freq" if "inv_freq" in key else "sam_pixel_stats"
                )
                ignored[reason] += 1
                continue
            new = map_lisa_key(key)
            if new is None or new not in state:
                unexpected.append(f"{key} -> {new}")
                continue
            if tuple(state[new].shape) != tuple(value.shape):
                mismatched.append(f"{key} {tuple(value.shape)} vs model {tuple(state[new].shape)}")
                continue
            state[new].copy_(value.to(state[new].dtype))
            loaded.add(new)
        shared = "sam.prompt_encoder.shared_embedding.positional_embedding"
        if shared in loaded:
            state["sam.shared_image_embedding.positional_embedding"].copy_(state[shared])
    missing = sorted(needed - loaded)
    if unexpected or mismatched or missing:
        raise LisaCheckpointError(
            f"{folder}: does not fit the LISA architecture: {len(unexpected)} unexpected keys {unexpected[:5]}, "
            f"{len(mismatched)} shape mismatches {mismatched[:5]}, {len(missing)} missing weights {missing[:5]}"
        )
    return {"loaded": len(loaded), "ignored": ignored}


def find_clip_folder(clip_path: str, lisa: Mapping[str, Any], checkpoint: str | Path) -> Path:
    """The local CLIP folder: ``clip_path``, else ``$CXRILS_CLIP_PATH``, else
    ``mm_vision_tower`` when it is a local folder, else a folder named after its last part
    (``clip-vit-large-patch14``) inside or beside the checkpoint.

    Raises
    ------
    LisaCheckpointError
        Naming what to download and where to put it.
    """
    tower = str(lisa.get("mm_vision_tower") or lisa.get("vision_tower") or "openai/clip-vit-large-patch14")
    ckpt = Path(checkpoint)
    candidates = [c for c in (clip_path, os.environ.get(CLIP_ENV, "")) if c]
    candidates += [tower, str(ckpt / Path(tower).name), str(ckpt.parent / Path(tower).name)]
    for c in candidates:
        if (Path(c) / "config.json").is_file():
            return Path(c)
    raise LisaCheckpointError(
        f"CLIP vision tower not found: LISA checkpoints omit it ({tower} is loaded separately). Download {tower} "
        f"from the Hugging Face hub into {ckpt.parent / Path(tower).name}, or point ${CLIP_ENV} at it "
        f"(cxrils train also takes --set clip_path=DIR) (looked in: {', '.join(candidates)})"
    )


def load_clip(folder: str | Path):
    """(``CLIPVisionModel``, CLIP image processor) from a local CLIP folder (a full
    ``CLIPModel`` checkpoint such as openai/clip-vit-large-patch14, or a vision-only one).

    Only ``vision_model.*`` weights are read; missing ones are an error.

    Raises
    ------
    LisaCheckpointError
        If the folder lacks weights, the image processor or a vision weight.
    """
    from transformers import CLIPVisionConfig, CLIPVisionModel

    folder = Path(folder)
    model = CLIPVisionModel(CLIPVisionConfig.from_pretrained(str(folder), local_files_only=True))
    state = model.state_dict()
    got = set()
    with torch.no_grad():
        for key, value in iter_tensors(folder):
            if key.endswith("position_ids"):
                continue
            # a CLIPModel checkpoint names them vision_model.*; transformers 5's CLIPVisionModel has no prefix
            name = key if key in state else key[len("vision_model.") :] if key.startswith("vision_model.") else None
            if name in state:
                state[name].copy_(value.to(state[name].dtype))
                got.add(name)
    missing = sorted(k for k in state if k not in got and not k.endswith("position_ids"))
    if missing:
        raise LisaCheckpointError(f"{folder}: CLIP vision weights missing, e.g. {missing[:3]}")
    if not (folder / "preprocessor_config.json").is_file():
        raise LisaCheckpointError(f"{folder}/preprocessor_config.json: missing; copy the whole CLIP hub folder")
    return model, clip_image_processor(folder)


def clip_image_processor(folder: str | Path | None = None, size: int = 224):
    """The CLIP image processor: from ``folder``'s ``preprocessor_config.json``, or a default
    one resizing the shortest side to ``size`` and centre cropping (tiny models)."""
    try:  # transformers >= 5 names the PIL backend explicitly (no torchvision needed)
        from transformers import CLIPImageProcessorPil as Proc
    except ImportError:  # pragma: no cover - transformers 4.x
        from transformers import CLIPImageProcessor as Proc
    if folder is not None:
        return Proc.from_pretrained(str(folder), local_files_only=True)
    return Proc(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
