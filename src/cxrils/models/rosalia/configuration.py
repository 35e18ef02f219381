"""Configuration of ROSALIA (the LISA architecture, paper section 5 and Appendix F).

Every constant below carries its source. The defaults are the paper's full-scale
setting (LISA-7B: LLaVA-7B + SAM ViT-H); :meth:`RosaliaConfig.tiny` gives a randomly
initialised miniature used by the tests on a CPU.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cxrils.config import LAMBDA_BCE, LAMBDA_DICE, LAMBDA_TXT
from cxrils.dataset.augment import HIST_EQ_PROB

SEG_TOKEN = "[SEG]"  # LISA's segmentation token (Lai et al. 2024); also cxrils.templates.SEG_TOKEN
IMAGE_TOKEN = "<image>"
#: LLaVA-v1 conversation preamble used by LISA-7B-v1 ("llava_v1" template).
SYSTEM_PROMPT = (
    "A chat between a curious human and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the human's questions."
)


@dataclass
class RosaliaConfig:
    """Hyper-parameters and sub-model settings of ROSALIA.

    Attributes
    ----------
    llava_path, sam_path, tokenizer_path : str
        Local folders with a transformers ``LlavaForConditionalGeneration``, ``SamModel``
        and tokenizer; or ``lisa_checkpoint`` for a LISA-7B-v1 folder (loaded through
        :mod:`cxrils.models.rosalia.lisa_checkpoint`). Empty = build from ``llava_config``
        / ``sam_config`` dicts (random initialisation, tests only).
    projector_type : {"linear", "mlp2x_gelu"}
        LLaVA-v1 / LISA-7B-v1 use a single linear projector; LLaVA-1.5 a 2-layer MLP.
    seg_out_dim : int
        Output of the [SEG] MLP (hidden -> hidden -> 256): SAM's prompt embedding size (256
        for every SAM, Kirillov et al. 2023).
    lora_r, lora_alpha, lora_dropout, lora_target_modules
        LoRA on the language model: rank 128, alpha 256 (paper section 5, Appendix F);
        dropout 0.05 and targets q_proj/v_proj as LISA's code.
    lambda_txt, lambda_bce, lambda_dice : float
        Loss weights 0.5, 5, 1 (paper section 5, "Loss function"); Dice on positives only.
    lr, warmup_steps, epochs, batch_size : AdamW lr 3e-4, 100 warm-up steps then decay to 0,
        15 epochs, total batch 256 (paper Appendix F).
    hist_eq_prob : float
        Histogram equalisation probability 0.5 (Appendix F).
    """

    llava_path: str = ""
    sam_path: str = ""
    tokenizer_path: str = ""
    lisa_checkpoint: str = ""
    llava_config: dict[str, Any] = field(default_factory=dict)
    sam_config: dict[str, Any] = field(default_factory=dict)
    projector_type: str = "linear"
    seg_out_dim: int = 256
    sam_image_size: int = 1024  # SAM input (Kirillov et al. 2023)
    clip_image_size: int = 224  # CLIP ViT-L/14 input of LLaVA-v1
    max_new_tokens: int = 32
    lora_r: int = 128
    lora_alpha: int = 256
    lora_dropout: float = 0.05
    lora_target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    lambda_txt: float = LAMBDA_TXT
    lambda_bce: float = LAMBDA_BCE
    lambda_dice: float = LAMBDA_DICE
    lr: float = 3e-4
    warmup_steps: int = 100
    epochs: int = 15
    batch_size: int = 256
    micro_batch_size: int = 2
    hist_eq_prob: float = HIST_EQ_PROB
    seed: int = 0

    def save(self, path: str | Path) -> None:
        """Write the configuration as JSON (with ``model_type: rosalia``)."""
        data = asdict(self)
        data["lora_target_modules"] = list(self.lora_target_modules)
        data["model_type"] = "rosalia"
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> "RosaliaConfig":
        """Read a configuration written by :meth:`save`.

        Raises
        ------
        ValueError
            If the file is not a ROSALIA configuration.
        """
        data = json.loads(Path(path).read_text())
        if data.pop("model_type", "rosalia") != "rosalia":
            raise ValueError(f"{path}: not a ROSALIA configuration")
        data["lora_target_modules"] = tuple(data.get("lora_target_modules", ("q_proj", "v_proj")))
        return cls(**data)

    @classmethod
    def tiny(cls, vocab_size: int = 512) -> "RosaliaConfig":
        """A miniature, randomly initialised configuration for CPU tests.

        CLIP 32 px / patch 8 (16 image tokens), a 2-layer Llama of width 64, SAM with a
        64 px input and a 2-layer encoder; LoRA rank 8. Never meant to learn anything
        useful; it exercises exactly the code paths of the full model.
        """
        return cls(
            llava_config={
                "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                                  "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 32,
                                  "patch_size": 8, "projection_dim": 32},
                "text_config": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
                                "vocab_size": vocab_size, "max_position_embeddings": 512},
                "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
            },
            sam_config={
                "vision_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                  "mlp_dim": 64, "image_size": 64, "patch_size": 8, "output_channels": 32,
                                  "global_attn_indexes": [1], "window_size": 4, "num_pos_feats": 16},
                "prompt_encoder_config": {"hidden_size": 32, "image_size": 64, "patch_size": 8,
                                          "mask_input_channels": 4},
                "mask_decoder_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                        "mlp_dim": 64, "iou_head_hidden_dim": 32},
            },
            seg_out_dim=32, sam_image_size=64, clip_image_size=32, max_new_tokens=12,
            lora_r=8, lora_alpha=16, warmup_steps=2, epochs=1, batch_size=4, micro_batch_size=2,
        )
