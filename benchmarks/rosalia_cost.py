"""ROSALIA at full size: parameters and memory from the architecture, and CPU timings of
the tiny model.

Derived (not measured on a GPU; none was available): parameter counts of LISA-7B-v1 /
ROSALIA-7B-v1's parts, counted on the meta device from the same constructors the adapter
uses (LLaMA-7B with 32,004 tokens from a LISA-7B-v1-shaped config.json, SAM ViT-H from
segment-anything's sizes, CLIP ViT-L/14 vision at 224 px), and the bytes they take:

* inference: every weight in bfloat16 (2 bytes), as the authors run it;
* fine-tuning (cxrils' loop): frozen weights bf16 (2 B), trained ones float32 weight,
  gradient and AdamW's two moments (16 B); activations are not included (they depend on
  the micro-batch and gradient checkpointing).

Measured here (CPU, tiny random model of ``RosaliaConfig.tiny()``): build time and one
``predict`` (generation of up to 12 tokens plus the mask).

Run: ``python -m benchmarks.rosalia_cost [--publish rosalia_cost]``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.results import benchmark_parser, publish_if_asked

SAM_VIT_H = {"embed": 1280, "depth": 32, "heads": 16, "global": [7, 15, 23, 31], "window": 14}


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def full_size() -> dict[str, int]:
    from transformers import CLIPVisionConfig, CLIPVisionModel, LlamaForCausalLM, SamConfig, SamModel

    from cxrils.models.rosalia.configuration import RosaliaConfig
    from cxrils.models.rosalia.lisa_checkpoint import llama_config
    from cxrils.models.rosalia.modeling import RosaliaForSegmentation

    lisa = {
        "architectures": ["LISAForCausalLM"],
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32004,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
    }
    sam_conf = SamConfig(
        vision_config={
            "hidden_size": 1280,
            "num_hidden_layers": 32,
            "num_attention_heads": 16,
            "global_attn_indexes": [7, 15, 23, 31],
            "mlp_dim": 5120,
        }
    )
    clip_conf = CLIPVisionConfig(
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=24,
        num_attention_heads=16,
        image_size=224,
        patch_size=14,
        projection_dim=768,
    )
    with torch.device("meta"):
        model = RosaliaForSegmentation(
            RosaliaConfig(),
            LlamaForCausalLM(llama_config(lisa)),
            CLIPVisionModel(clip_conf),
            SamModel(sam_conf),
            seg_token_id=32003,
        )
        lm = model.language_model
        lora_params = sum(
            model.cfg.lora_r * (m.in_features + m.out_features)
            for n, m in lm.named_modules()
            if n in set(model.lora_target_names())
        )
    parts = {
        "LLaMA-7B language model (32,004 tokens)": _count(lm),
        "  of which lm_head + embed_tokens": lm.lm_head.weight.numel() + lm.get_input_embeddings().weight.numel(),
        "CLIP ViT-L/14 vision tower (224 px)": _count(model.vision_tower),
        "mm_projector (Linear 1024 -> 4096)": _count(model.mm_projector),
        "SAM ViT-H image encoder": _count(model.sam.vision_encoder),
        "SAM prompt encoder": _count(model.sam.prompt_encoder) + _count(model.sam.shared_image_embedding),
        "SAM mask decoder": _count(model.sam.mask_decoder),
        "text_hidden_fcs ([SEG] MLP 4096 -> 4096 -> 256)": _count(model.text_hidden_fcs),
        f"LoRA r {model.cfg.lora_r} on {len(model.lora_target_names())} linears (all of the LLM, lm_head too)": lora_params,
    }
    total = sum(v for k, v in parts.items() if not k.startswith(("  ", "LoRA")))
    trained = (
        parts["  of which lm_head + embed_tokens"]
        + parts["SAM mask decoder"]
        + parts["text_hidden_fcs ([SEG] MLP 4096 -> 4096 -> 256)"]
        + lora_params
    )
    return {"parts": parts, "total": total, "trained": trained}


def tiny_timings() -> dict[str, float]:
    from cxrils.models.rosalia.configuration import RosaliaConfig
    from cxrils.models.rosalia.segmenter import RosaliaSegmenter, build_model
    from cxrils.models.rosalia.tiny import build_tiny_tokenizer

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tok = build_tiny_tokenizer(Path(tmp) / "tok")
        model, proc = build_model(RosaliaConfig.tiny(), tok)
        seg = RosaliaSegmenter(model, proc)
        build = time.perf_counter() - t0
        x = (np.random.default_rng(0).random((512, 420)) * 255).astype(np.uint8)
        seg.predict(x, "Segment the effusion in the left lung base.")  # warm-up
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            seg.predict(x, "Segment the effusion in the left lung base.")
            times.append(time.perf_counter() - t0)
    return {"build_s": build, "predict_s": float(np.median(times))}


def main() -> None:
    args = benchmark_parser(__doc__.splitlines()[0], page="rosalia_cost").parse_args()
    fs = full_size()
    gib = 1024**3
    lines = [
        "### LISA-7B-v1 / ROSALIA-7B-v1 parts (derived: parameter counts on the meta device)",
        "",
        "| part | parameters | bf16 GiB |",
        "|---|---:|---:|",
    ]
    for k, v in fs["parts"].items():
        lines.append(f"| {k} | {v / 1e6:,.1f} M | {2 * v / gib:.2f} |")
    total, trained = fs["total"], fs["trained"]
    frozen = total - (trained - fs["parts"][next(k for k in fs["parts"] if k.startswith("LoRA"))])
    lines += [
        f"| **whole model (without LoRA)** | **{total / 1e9:.2f} B** | **{2 * total / gib:.1f}** |",
        "",
        "### Memory (derived from the counts; activations not included)",
        "",
        "| step | what is held | GiB |",
        "|---|---|---:|",
        f"| inference (predict, evaluate) | all weights in bf16 | {2 * total / gib:.1f} |",
        f"| fine-tuning, one GPU | frozen bf16 ({frozen / 1e9:.2f} B) + trained fp32 weight, grad, AdamW m, v "
        f"({trained / 1e6:,.0f} M x 16 B) | {(2 * frozen + 16 * trained) / gib:.1f} |",
        f"| fine-tuning, 2 GPUs with ZeRO-2 (optimizer states and gradients sharded) | per GPU | "
        f"{(2 * frozen + 4 * trained + 12 * trained / 2) / gib:.1f} |",
        "",
    ]
    t = tiny_timings()
    lines += [
        "### Measured here (CPU, tiny random model `RosaliaConfig.tiny()`, 512 x 420 image)",
        "",
        "| step | seconds |",
        "|---|---:|",
        f"| build (tokenizer + model) | {t['build_s']:.1f} |",
        f"| one predict (up to 12 generated tokens + mask) | {t['predict_s']:.2f} |",
        "",
        "### Reported by the paper (Appendix F, not measured here)",
        "",
        "| step | time |",
        "|---|---|",
        "| fine-tuning, 15 epochs, total batch 256, 2 x H100, DeepSpeed ZeRO-2 | about 2.5 days |",
        "| MIMIC-ILS test split (12K pairs), masks only | about 20 minutes |",
        "| MIMIC-ILS test split, masks and generated text | about 1.5 hours |",
    ]
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
