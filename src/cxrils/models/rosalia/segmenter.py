"""ROSALIA behind the shared :class:`cxrils.models.base.Segmenter` API.

A run folder holds ``config.json`` (``model_type: rosalia`` + :class:`RosaliaConfig`),
the tokenizer (``tokenizer/``) and ``model.safetensors``: the whole state when the backbone was
randomly initialised (tiny test models), else only the trained parameters (LoRA,
mask decoder, [SEG] MLP, lm_head, embeddings) on top of the local LLaVA/SAM or LISA
weights named in the config.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from cxrils.models.base import ModelLoadError, Prediction, Segmenter, check_image
from cxrils.models.rosalia.configuration import RosaliaConfig
from cxrils.models.rosalia.modeling import RosaliaForSegmentation, build_llava, build_sam
from cxrils.models.rosalia.processing import RosaliaProcessor

WEIGHTS_NAME = "model.safetensors"
TOKENIZER_DIR = "tokenizer"


def _num_image_tokens(llava) -> int:
    vc = llava.config.vision_config
    n = (vc.image_size // vc.patch_size) ** 2
    # "default" strategy drops CLIP's CLS token, "full" keeps it (LLaVA convention).
    return n if llava.config.vision_feature_select_strategy == "default" else n + 1


def build_model(cfg: RosaliaConfig, tokenizer) -> tuple[RosaliaForSegmentation, RosaliaProcessor]:
    """Build ROSALIA and its processor from a config and a tokenizer.

    Loads LISA weights when ``cfg.lisa_checkpoint`` is set (local folder), resizes the
    token embeddings to the tokenizer, then applies LoRA.
    """
    from cxrils.models.rosalia.lisa_checkpoint import load_lisa_into, read_checkpoint

    tokenizer = RosaliaProcessor.prepare_tokenizer(tokenizer)
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    seg_id = tokenizer.convert_tokens_to_ids("[SEG]")
    llava = build_llava(cfg, image_id)
    sam = build_sam(cfg)
    if llava.get_input_embeddings().weight.shape[0] != len(tokenizer):
        llava.resize_token_embeddings(len(tokenizer))
    model = RosaliaForSegmentation(cfg, llava, sam, seg_id)
    if cfg.lisa_checkpoint:
        load_lisa_into(model, read_checkpoint(cfg.lisa_checkpoint))
    model.apply_lora()
    return model, RosaliaProcessor(tokenizer, cfg, _num_image_tokens(llava))


def _from_scratch(cfg: RosaliaConfig) -> bool:
    return not (cfg.llava_path or cfg.lisa_checkpoint)


class RosaliaSegmenter(Segmenter):
    """ROSALIA for inference: ``predict(image, instruction) -> Prediction``.

    ``presence_score`` is the largest mask probability (0 when no [SEG] was generated).
    """

    model_type = "rosalia"

    def __init__(self, model: RosaliaForSegmentation, processor: RosaliaProcessor) -> None:
        self.model = model.eval()
        self.processor = processor

    @classmethod
    def _load(cls, path: Path, config: dict, **kwargs) -> "RosaliaSegmenter":
        from safetensors.torch import load_file
        from transformers import AutoTokenizer

        cfg = RosaliaConfig.load(path / "config.json")
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise ModelLoadError(f"{weights}: missing ROSALIA weights")
        tokenizer = AutoTokenizer.from_pretrained(str(path / TOKENIZER_DIR), local_files_only=True)
        model, processor = build_model(cfg, tokenizer)
        state = load_file(str(weights))
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or (_from_scratch(cfg) and missing):
            raise ModelLoadError(f"{weights}: does not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
        return cls(model, processor)

    def save_pretrained(self, path: str | Path) -> None:
        """Write config, tokenizer (``tokenizer/``) and weights to a run folder (see module docs)."""
        from safetensors.torch import save_file

        from cxrils.fsutil import atomic_path

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        cfg = self.model.cfg
        with atomic_path(out / "config.json") as tmp:
            cfg.save(tmp)
        self.processor.tokenizer.save_pretrained(str(out / TOKENIZER_DIR))
        if _from_scratch(cfg):  # random backbone: keep everything (persistent buffers too)
            state = dict(self.model.state_dict())
        else:  # local LLaVA/SAM/LISA weights: keep what training changed
            state = {k: v for k, v in self.model.named_parameters() if v.requires_grad}
        with atomic_path(out / WEIGHTS_NAME) as tmp:
            save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, str(tmp))

    @torch.no_grad()
    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        """Answer one instruction: generate the text; a [SEG] in it gives the mask.

        Parameters
        ----------
        image : ndarray of uint8, shape (H, W)
        instruction : str

        Returns
        -------
        Prediction
            bool (H, W) mask (sigmoid > 0.5; empty without [SEG]), decoded answer, score.
        """
        x = check_image(image)
        enc = self.processor.encode(x, instruction)
        batch = self.processor.collate([enc], left_pad=True)
        new, logits = self.model.generate(**batch, eos_token_id=self.processor.tokenizer.eos_token_id)
        answer = self.processor.decode_answer(new[0])
        if logits[0] is None:
            return Prediction(np.zeros(x.shape, dtype=bool), answer, 0.0)
        prob = torch.sigmoid(logits[0])
        return Prediction((prob > 0.5).numpy(), answer, float(prob.max()))
