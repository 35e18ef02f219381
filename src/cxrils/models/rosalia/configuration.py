"""Configuration of ROSALIA (the LISA architecture, paper section 5 and Appendix F).

Every constant carries its source. The defaults are the paper's full-scale setting,
fine-tuned from a ``LISAForCausalLM`` checkpoint (``xinlai/LISA-7B-v1`` or
``checkone/ROSALIA-7B-v1``) with the CLIP tower from its own folder;
:meth:`RosaliaConfig.tiny` gives a randomly initialised miniature for CPU tests.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from cxrils.config import LAMBDA_BCE, LAMBDA_DICE, LAMBDA_TXT
from cxrils.dataset.augment import HIST_EQ_PROB

#: LLaVA-v1's ``llava_v1`` conversation system prompt (model/llava/conversation.py).
SYSTEM_PROMPT = (
    "A chat between a curious human and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the human's questions."
)
#: LoRA on every linear layer of the language model (train_ds.py ``find_linear_layers``:
#: all ``nn.Linear`` outside visual_model, vision_tower, mm_projector, text_hidden_fcs;
#: the q_proj/v_proj filter is commented out). ``("q_proj", "v_proj")`` selects LISA's
#: original choice instead.
ALL_LINEAR = "all-linear"
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
MASK_GEOMETRIES = ("padded", "image")


@dataclass
class RosaliaConfig:
    """Hyper-parameters and sub-model settings of ROSALIA.

    Attributes
    ----------
    checkpoint : str
        Local ``LISAForCausalLM`` folder (config.json with ``architectures:
        ["LISAForCausalLM"]``, LLaMA tokenizer, weights without the CLIP tower): LISA-7B-v1
        to fine-tune as the paper, ROSALIA-7B-v1 to use the released model. Empty =
        random initialisation from ``llm_config``/``clip_config``/``sam_config`` (tests).
    clip_path : str
        Local CLIP ViT-L/14 folder (``openai/clip-vit-large-patch14``, 224 px); empty =
        looked up (:func:`cxrils.models.rosalia.lisa_checkpoint.find_clip_folder`).
    mm_vision_select_layer : int
        CLIP hidden state fed to the projector: -2 (LISA config.json), patch tokens only.
    mm_use_im_start_end : bool
        ``<im_start><image><im_end>`` in the prompt (LISA config.json: true).
    seg_out_dim : int
        ``text_hidden_fcs`` output = SAM's prompt size, 256 (config.json ``out_dim``).
    sam_image_size : int
        SAM input side, 1024 (``ResizeLongestSide(1024)``).
    mask_geometry : {"padded", "image"}
        How SAM's low-resolution mask becomes the image's mask. "padded" (default): the
        frame the released weights learned (LISA.py ``model_forward`` postprocesses to the
        1024 x 1024 label size and ``reason_seg_dataset.py`` zero-pads the target there;
        ``validate()`` scores the same frame), whose image area is then resized to the
        image; "image": ``postprocess_masks`` with the image size, as
        ``inference_rosalia_example.py`` calls it, which for a non-square image reads the
        mask in a frame the weights were not trained on (docs/rosalia.md). LISA's own
        weights (``xinlai/LISA-7B-v1``) learned the image frame (dvlab-research/LISA
        ``utils/reason_seg_dataset.py``: the label at the image's size): use "image"
        to predict with them.
    max_new_tokens : int
        Generation budget, 512 (inference_rosalia_example.py); greedy, stops at ``</s>``.
    lora_r, lora_alpha, lora_dropout, lora_target_modules
        Rank 128, alpha 256 (paper section 5, merge_weight.sh), dropout 0.05 (train_ds.py),
        targets :data:`ALL_LINEAR` or module name suffixes such as ``("q_proj", "v_proj")``.
    lora_sam_encoder : bool
        ``--lora_sam_encoder`` of train_ds.py / merge_weight.sh: LoRA also on every linear
        layer of SAM's image encoder. Upstream computes the image embeddings under
        ``torch.no_grad`` (LISA.py ``get_visual_embs``), and so does cxrils, so those LoRA
        weights get no gradient and stay at their start (B = 0): the flag changes the
        trained-parameter list and the run folder, not the model's outputs. Default off
        (train_ds.py's default).
    lambda_txt, lambda_bce, lambda_dice : float
        0.5, 5, 1 (paper section 5; train_ds.py ce/bce/dice_loss_weight).
    lr, warmup_steps, epochs, batch_size, micro_batch_size, betas, grad_clip
        AdamW lr 3e-4 (betas 0.9, 0.95, weight decay 0), 100 linear warm-up steps then
        linear decay to 0 (WarmupDecayLR), gradient clipping 1.0 (train_ds.py ds_config);
        15 epochs, total batch 256 (paper Appendix F).
    hist_eq_prob : float
        Histogram equalisation probability 0.5 (Appendix F).
    precision : {"auto", "bf16", "fp16", "fp32"}
        "auto" = bf16 on a GPU (train_ds.py ``--precision`` default), fp32 on a CPU.
    """

    checkpoint: str = ""
    clip_path: str = ""
    llm_config: dict[str, Any] = field(default_factory=dict)
    clip_config: dict[str, Any] = field(default_factory=dict)
    sam_config: dict[str, Any] = field(default_factory=dict)
    mm_vision_select_layer: int = -2
    mm_use_im_start_end: bool = True
    projector_type: str = "linear"
    seg_out_dim: int = 256
    sam_image_size: int = 1024
    mask_geometry: str = "padded"
    max_new_tokens: int = 512
    lora_r: int = 128
    lora_alpha: int = 256
    lora_dropout: float = 0.05
    lora_target_modules: tuple[str, ...] = (ALL_LINEAR,)
    lora_sam_encoder: bool = False
    lambda_txt: float = LAMBDA_TXT
    lambda_bce: float = LAMBDA_BCE
    lambda_dice: float = LAMBDA_DICE
    lr: float = 3e-4
    betas: tuple[float, ...] = (0.9, 0.95)
    grad_clip: float = 1.0
    warmup_steps: int = 100
    epochs: int = 15
    batch_size: int = 256
    micro_batch_size: int = 2
    hist_eq_prob: float = HIST_EQ_PROB
    precision: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        self.lora_target_modules = tuple(self.lora_target_modules)
        self.betas = tuple(float(b) for b in self.betas)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.mask_geometry not in MASK_GEOMETRIES:
            raise ValueError(f"mask_geometry must be one of {MASK_GEOMETRIES}, got {self.mask_geometry!r}")

    def save(self, path: str | Path) -> None:
        """Write the configuration as JSON (with ``model_type: rosalia``)."""
        data = asdict(self)
        data["lora_target_modules"] = list(self.lora_target_modules)
        data["betas"] = list(self.betas)
        data["model_type"] = "rosalia"
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> RosaliaConfig:
        """Read a configuration written by :meth:`save`.

        Raises
        ------
        ValueError
            If the file is not a ROSALIA configuration or has unknown keys.
        """
        data = json.loads(Path(path).read_text())
        if data.pop("model_type", "rosalia") != "rosalia":
            raise ValueError(f"{path}: not a ROSALIA configuration")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown ROSALIA settings {unknown} (written by another cxrils version?)")
        return cls(**data)

    @classmethod
    def tiny(cls) -> RosaliaConfig:
        """A miniature, randomly initialised configuration for CPU tests.

        A 2-layer Llama of width 64 (vocabulary from the tokenizer), CLIP 32 px / patch 8
        (16 image tokens), SAM with a 64 px input and a 2-layer encoder; LoRA rank 8.
        Never meant to learn anything useful; it runs exactly the full model's code.
        """
        return cls(
            llm_config={
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "max_position_embeddings": 512,
                "rms_norm_eps": 1e-6,
            },
            clip_config={
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "image_size": 32,
                "patch_size": 8,
            },
            sam_config={
                "vision_config": {
                    "hidden_size": 32,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 2,
                    "mlp_dim": 64,
                    "image_size": 64,
                    "patch_size": 8,
                    "output_channels": 32,
                    "global_attn_indexes": [1],
                    "window_size": 4,
                    "num_pos_feats": 16,
                },
                "prompt_encoder_config": {
                    "hidden_size": 32,
                    "image_size": 64,
                    "patch_size": 8,
                    "mask_input_channels": 4,
                },
                "mask_decoder_config": {
                    "hidden_size": 32,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 2,
                    "mlp_dim": 64,
                    "iou_head_hidden_dim": 32,
                },
            },
            seg_out_dim=32,
            sam_image_size=64,
            max_new_tokens=12,
            lora_r=8,
            lora_alpha=16,
            warmup_steps=2,
            epochs=1,
            batch_size=4,
            micro_batch_size=2,
        )
