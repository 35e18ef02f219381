"""Tiny checkpoints in exactly the layout of the released LISA / ROSALIA ones.

Written here from outside descriptions, never from cxrils' own mapping:

* ``config.json`` with the fields of xinlai/LISA-7B-v1's (``architectures:
  ["LISAForCausalLM"]``, ``model_type: llava``, LLaMA sizes, ``mm_*`` fields, ``out_dim``,
  ``train_mask_decoder``), at a tiny size;
* a LLaMA-style sentencepiece tokenizer (``<unk>``, ``<s>``, ``</s>`` = 0, 1, 2, LLaMA's
  normaliser: dummy prefix, extra whitespace kept) plus ``added_tokens.json`` with exactly
  ``<im_patch>``, ``<im_start>``, ``<im_end>``, ``[SEG]`` and no ``<image>``;
* weights under ``LISAForCausalLM`` names: LLaMA's (``model.embed_tokens``,
  ``model.layers.*``, ``model.norm``, ``lm_head``), ``model.mm_projector`` (one Linear),
  ``model.text_hidden_fcs.0.{0,2}``, and SAM under the original segment-anything module
  names (:func:`sam_original_shapes`, restated from segment-anything's ImageEncoderViT,
  PromptEncoder, MaskDecoder and TwoWayTransformer), with no ``vision_tower`` key (the
  merge script drops them);
* a separate CLIP folder (a full CLIPModel checkpoint, as openai/clip-vit-large-patch14,
  with its preprocessor_config.json).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch

from cxrils import templates, vocab

HIDDEN, LAYERS, HEADS, INTER = 64, 2, 4, 128
CLIP_HIDDEN, CLIP_IMAGE, CLIP_PATCH = 32, 32, 8
SAM = {
    "embed": 32,
    "depth": 2,
    "heads": 2,
    "window": 4,
    "global": [1],
    "image": 64,
    "patch": 8,
    "out": 32,
    "mask_in": 4,
    "dec_mlp": 64,
    "iou_hidden": 32,
}
SAM_VIT_H = {
    "embed": 1280,
    "depth": 32,
    "heads": 16,
    "window": 14,
    "global": [7, 15, 23, 31],
    "image": 1024,
    "patch": 16,
    "out": 256,
    "mask_in": 16,
    "dec_mlp": 2048,
    "iou_hidden": 256,
}


def sam_original_shapes(s: dict) -> dict[str, tuple[int, ...]]:
    """Key -> shape of segment-anything's ``Sam`` state dict (no buffers but
    ``pe_layer.positional_encoding_gaussian_matrix``), for sizes ``s``."""
    e, c, g = s["embed"], s["out"], s["image"] // s["patch"]
    hd = e // s["heads"]
    out: dict[str, tuple[int, ...]] = {
        "image_encoder.patch_embed.proj.weight": (e, 3, s["patch"], s["patch"]),
        "image_encoder.patch_embed.proj.bias": (e,),
        "image_encoder.pos_embed": (1, g, g, e),
        "image_encoder.neck.0.weight": (c, e, 1, 1),
        "image_encoder.neck.1.weight": (c,),
        "image_encoder.neck.1.bias": (c,),
        "image_encoder.neck.2.weight": (c, c, 3, 3),
        "image_encoder.neck.3.weight": (c,),
        "image_encoder.neck.3.bias": (c,),
    }
    for i in range(s["depth"]):
        b = f"image_encoder.blocks.{i}."
        size = g if i in s["global"] else s["window"]
        out.update(
            {
                b + "norm1.weight": (e,),
                b + "norm1.bias": (e,),
                b + "attn.qkv.weight": (3 * e, e),
                b + "attn.qkv.bias": (3 * e,),
                b + "attn.proj.weight": (e, e),
                b + "attn.proj.bias": (e,),
                b + "attn.rel_pos_h": (2 * size - 1, hd),
                b + "attn.rel_pos_w": (2 * size - 1, hd),
                b + "norm2.weight": (e,),
                b + "norm2.bias": (e,),
                b + "mlp.lin1.weight": (4 * e, e),
                b + "mlp.lin1.bias": (4 * e,),
                b + "mlp.lin2.weight": (e, 4 * e),
                b + "mlp.lin2.bias": (e,),
            }
        )
    k = s["mask_in"]
    p = "prompt_encoder."
    out.update(
        {
            p + "pe_layer.positional_encoding_gaussian_matrix": (2, c // 2),
            p + "not_a_point_embed.weight": (1, c),
            p + "no_mask_embed.weight": (1, c),
            p + "mask_downscaling.0.weight": (k // 4, 1, 2, 2),
            p + "mask_downscaling.0.bias": (k // 4,),
            p + "mask_downscaling.1.weight": (k // 4,),
            p + "mask_downscaling.1.bias": (k // 4,),
            p + "mask_downscaling.3.weight": (k, k // 4, 2, 2),
            p + "mask_downscaling.3.bias": (k,),
            p + "mask_downscaling.4.weight": (k,),
            p + "mask_downscaling.4.bias": (k,),
            p + "mask_downscaling.6.weight": (c, k, 1, 1),
            p + "mask_downscaling.6.bias": (c,),
        }
    )
    out.update({p + f"point_embeddings.{j}.weight": (1, c) for j in range(4)})
    d = "mask_decoder."

    def attn(prefix: str, inner: int) -> None:
        for q in ("q_proj", "k_proj", "v_proj"):
            out[prefix + q + ".weight"], out[prefix + q + ".bias"] = (inner, c), (inner,)
        out[prefix + "out_proj.weight"], out[prefix + "out_proj.bias"] = (c, inner), (c,)

    for i in range(2):  # TwoWayTransformer(depth=2, num_heads=8, mlp_dim, attention_downsample_rate=2)
        t = f"{d}transformer.layers.{i}."
        attn(t + "self_attn.", c)
        attn(t + "cross_attn_token_to_image.", c // 2)
        attn(t + "cross_attn_image_to_token.", c // 2)
        for n in ("norm1", "norm2", "norm3", "norm4"):
            out[t + n + ".weight"], out[t + n + ".bias"] = (c,), (c,)
        out.update(
            {
                t + "mlp.lin1.weight": (s["dec_mlp"], c),
                t + "mlp.lin1.bias": (s["dec_mlp"],),
                t + "mlp.lin2.weight": (c, s["dec_mlp"]),
                t + "mlp.lin2.bias": (c,),
            }
        )
    attn(d + "transformer.final_attn_token_to_image.", c // 2)
    out.update(
        {
            d + "transformer.norm_final_attn.weight": (c,),
            d + "transformer.norm_final_attn.bias": (c,),
            d + "iou_token.weight": (1, c),
            d + "mask_tokens.weight": (4, c),
            d + "output_upscaling.0.weight": (c, c // 4, 2, 2),
            d + "output_upscaling.0.bias": (c // 4,),
            d + "output_upscaling.1.weight": (c // 4,),
            d + "output_upscaling.1.bias": (c // 4,),
            d + "output_upscaling.3.weight": (c // 4, c // 8, 2, 2),
            d + "output_upscaling.3.bias": (c // 8,),
        }
    )
    for j in range(4):
        h = f"{d}output_hypernetworks_mlps.{j}.layers."
        out.update(
            {
                h + "0.weight": (c, c),
                h + "0.bias": (c,),
                h + "1.weight": (c, c),
                h + "1.bias": (c,),
                h + "2.weight": (c // 8, c),
                h + "2.bias": (c // 8,),
            }
        )
    ih = s["iou_hidden"]
    i_ = d + "iou_prediction_head.layers."
    out.update(
        {
            i_ + "0.weight": (ih, c),
            i_ + "0.bias": (ih,),
            i_ + "1.weight": (ih, ih),
            i_ + "1.bias": (ih,),
            i_ + "2.weight": (4, ih),
            i_ + "2.bias": (4,),
        }
    )
    return out


def lisa_llm_keys(layers: int) -> list[str]:
    """LISAForCausalLM's language-model keys (LlavaLlamaForCausalLM = LLaMA naming)."""
    keys = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    for i in range(layers):
        keys += [f"model.layers.{i}.self_attn.{p}.weight" for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
        keys += [f"model.layers.{i}.mlp.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")]
        keys += [f"model.layers.{i}.{p}.weight" for p in ("input_layernorm", "post_attention_layernorm")]
    return keys


def write_tokenizer(folder: Path) -> int:
    """LLaMA-layout tokenizer with LISA's 4 added tokens; returns the vocabulary size."""
    import sentencepiece as spm

    corpus = [
        "A chat between a curious human and an artificial intelligence assistant. The assistant gives "
        "helpful, detailed, and polite answers to the human's questions. USER: ASSISTANT:"
    ]
    for t in vocab.LESION_TYPES:
        for loc in vocab.INSTRUCTION_LOCATIONS:
            corpus.append(
                templates.render_instruction("basic", t, [loc]) + " There is no " + t + " in the " + loc + "."
            )
        corpus.append(templates.render_instruction("global", t) + " It is located in the heart.")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=buf,
        vocab_size=350,
        model_type="bpe",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        byte_fallback=True,
        character_coverage=1.0,
        add_dummy_prefix=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        minloglevel=2,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.model").write_bytes(buf.getvalue())
    n = spm.SentencePieceProcessor(model_proto=buf.getvalue()).get_piece_size()
    added = {"<im_patch>": n, "<im_start>": n + 1, "<im_end>": n + 2, "[SEG]": n + 3}
    (folder / "added_tokens.json").write_text(json.dumps(added))
    tok = {
        k: {
            "__type": "AddedToken",
            "content": v,
            "lstrip": False,
            "normalized": True,
            "rstrip": False,
            "single_word": False,
        }
        for k, v in (("bos_token", "<s>"), ("eos_token", "</s>"), ("unk_token", "<unk>"))
    }
    (folder / "special_tokens_map.json").write_text(
        json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "__type"} for k, v in tok.items()})
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "add_bos_token": True,
                "add_eos_token": False,
                "clean_up_tokenization_spaces": False,
                "model_max_length": 512,
                "pad_token": None,
                "padding_side": "right",
                "sp_model_kwargs": {},
                "tokenizer_class": "LlamaTokenizer",
                **tok,
            }
        )
    )
    return n + 4


def lisa_config(vocab_size: int) -> dict:
    """config.json with LISA-7B-v1's fields at the tiny size."""
    return {
        "_name_or_path": "xinlai/LISA-7B-v1",
        "architectures": ["LISAForCausalLM"],
        "model_type": "llava",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTER,
        "max_position_embeddings": 512,
        "max_sequence_length": 512,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": HEADS,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.31.0",
        "use_cache": False,
        "vocab_size": vocab_size,
        "freeze_mm_mlp_adapter": True,
        "image_aspect_ratio": "square",
        "image_grid_pinpoints": None,
        "mm_hidden_size": CLIP_HIDDEN,
        "mm_use_im_patch_token": False,
        "mm_use_im_start_end": True,
        "mm_vision_select_feature": "patch",
        "mm_vision_select_layer": -2,
        "mm_vision_tower": "openai/clip-vit-large-patch14",
        "vision_tower": "openai/clip-vit-large-patch14",
        "out_dim": SAM["out"],
        "pretrain_mm_mlp_adapter": None,
        "train_mask_decoder": True,
        "tune_mm_mlp_adapter": False,
        "use_mm_proj": True,
    }


def write_clip(folder: Path) -> None:
    """A tiny full CLIPModel checkpoint + OpenAI's preprocessor_config.json fields (224 -> 32 px)."""
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(3)
    cfg = CLIPConfig(
        text_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "vocab_size": 99,
            "max_position_embeddings": 16,
        },
        vision_config={
            "hidden_size": CLIP_HIDDEN,
            "intermediate_size": 64,
            "num_hidden_layers": 3,
            "num_attention_heads": 2,
            "image_size": CLIP_IMAGE,
            "patch_size": CLIP_PATCH,
        },
        projection_dim=8,
    )
    CLIPModel(cfg).save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "crop_size": CLIP_IMAGE,
                "do_center_crop": True,
                "do_normalize": True,
                "do_resize": True,
                "feature_extractor_type": "CLIPFeatureExtractor",
                "image_mean": [0.48145466, 0.4578275, 0.40821073],
                "image_std": [0.26862954, 0.26130258, 0.27577711],
                "resample": 3,
                "size": CLIP_IMAGE,
            }
        )
    )


def lisa_state(vocab_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under LISAForCausalLM's names (module docstring), scaled small."""
    g = torch.Generator().manual_seed(seed)
    shapes = {k: None for k in lisa_llm_keys(LAYERS)}
    state: dict[str, torch.Tensor] = {}

    def rnd(shape, scale=0.05):
        return torch.randn(shape, generator=g) * scale

    for k in shapes:
        if k.endswith("layernorm.weight") or k == "model.norm.weight":
            state[k] = torch.ones(HIDDEN)
        elif "embed_tokens" in k or k == "lm_head.weight":
            state[k] = rnd((vocab_size, HIDDEN))
        elif "mlp.down_proj" in k:
            state[k] = rnd((HIDDEN, INTER))
        elif "mlp." in k:
            state[k] = rnd((INTER, HIDDEN))
        else:
            state[k] = rnd((HIDDEN, HIDDEN))
    state["model.mm_projector.weight"] = rnd((HIDDEN, CLIP_HIDDEN))
    state["model.mm_projector.bias"] = rnd((HIDDEN,))
    state["model.text_hidden_fcs.0.0.weight"] = rnd((HIDDEN, HIDDEN))
    state["model.text_hidden_fcs.0.0.bias"] = rnd((HIDDEN,))
    state["model.text_hidden_fcs.0.2.weight"] = rnd((SAM["out"], HIDDEN))
    state["model.text_hidden_fcs.0.2.bias"] = rnd((SAM["out"],))
    for k, shape in sam_original_shapes(SAM).items():
        key = "model.visual_model." + k
        state[key] = (
            torch.ones(shape)
            if (
                k.endswith(
                    (
                        "norm1.weight",
                        "norm2.weight",
                        "norm3.weight",
                        "norm4.weight",
                        ".1.weight",
                        ".4.weight",
                        "neck.3.weight",
                    )
                )
                or k.endswith("norm_final_attn.weight")
            )
            else rnd(shape, 0.2)
        )
    return state


def write_lisa_checkpoint(folder: Path, *, seed: int = 0, extra: dict | None = None, drop: tuple = ()) -> dict:
    """Write the tiny LISA-format checkpoint; return its state dict (LISA names)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    n = write_tokenizer(folder)
    (folder / "config.json").write_text(json.dumps(lisa_config(n), indent=2))
    state = lisa_state(n, seed)
    state.update(extra or {})
    for k in drop:
        state.pop(k)
    half = len(state) // 2
    keys = sorted(state)
    save_file(
        {k: state[k].to(torch.bfloat16).contiguous() for k in keys[:half]},
        str(folder / "model-00001-of-00002.safetensors"),
    )
    save_file(
        {k: state[k].to(torch.bfloat16).contiguous() for k in keys[half:]},
        str(folder / "model-00002-of-00002.safetensors"),
    )
    return {k: v.to(torch.bfloat16) for k, v in state.items()}
