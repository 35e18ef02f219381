"""ROSALIA behind the shared :class:`cxrils.models.base.Segmenter` API.

Two kinds of folder load here:

* a released ``LISAForCausalLM`` checkpoint (``config.json`` with ``architectures:
  ["LISAForCausalLM"]``: ROSALIA-7B-v1, LISA-7B-v1), used as it is (no LoRA), with the
  CLIP tower from its own folder (:func:`~cxrils.models.rosalia.lisa_checkpoint.find_clip_folder`);
* a cxrils run folder (``config.json`` with ``model_type: rosalia``, ``tokenizer/``,
  ``model.safetensors``): the whole state for randomly initialised (tiny) models, else
  only the trained parameters (LoRA, ``lm_head``, embeddings, mask decoder, [SEG] MLP) on
  top of the LISA checkpoint named in the config.

Devices and precision: ``precision="auto"`` puts the model on the GPU in bfloat16 when
one is visible (as the authors' ``model.bfloat16().cuda()``), else on the CPU in float32.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cxrils.models.base import ModelLoadError, Prediction, Segmenter, check_image, check_instruction
from cxrils.models.rosalia.configuration import MASK_GEOMETRIES, RosaliaConfig
from cxrils.models.rosalia.lisa_checkpoint import (
    LisaCheckpointError,
    clip_image_processor,
    find_clip_folder,
    is_lisa_config,
    llama_config,
    load_clip,
    load_lisa_weights,
    projector_type_from_shapes,
    read_lisa_config,
    sam_config_from_shapes,
    tensor_shapes,
)
from cxrils.models.rosalia.modeling import RosaliaForSegmentation
from cxrils.models.rosalia.processing import RosaliaProcessor
from cxrils.models.rosalia.tokenizer import SEG_TOKEN, LisaTokenizer, TokenizerError

WEIGHTS_NAME = "model.safetensors"
TOKENIZER_DIR = "tokenizer"
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def resolve_device_dtype(precision: str, device: str | torch.device | None = None) -> tuple[torch.device, torch.dtype]:
    """(device, dtype) for a precision: "auto" = bf16 on CUDA (the authors' default), fp32 on CPU.

    Raises
    ------
    ValueError
        On an unknown precision.
    """
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if precision == "auto":
        return dev, (torch.bfloat16 if dev.type == "cuda" else torch.float32)
    if precision not in _DTYPES:
        raise ValueError(f"precision must be auto, bf16, fp16 or fp32, got {precision!r}")
    return dev, _DTYPES[precision]


@contextlib.contextmanager
def _construction(dtype: torch.dtype, skip_init: bool):
    """Create modules directly in ``dtype`` (a 7B model is never built in float32 first),
    without random initialisation when weights follow."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        if skip_init:
            try:
                from transformers.initialization import no_init_weights
            except ImportError:  # pragma: no cover - transformers 4.x
                from transformers.modeling_utils import no_init_weights

            with no_init_weights():
                yield
        else:
            yield
    finally:
        torch.set_default_dtype(old)


def _from_scratch(cfg: RosaliaConfig) -> bool:
    return not cfg.checkpoint


def build_model(
    cfg: RosaliaConfig, tokenizer: LisaTokenizer | None = None, *, lora: bool = True, dtype: torch.dtype = torch.float32
) -> tuple[RosaliaForSegmentation, RosaliaProcessor]:
    """Build ROSALIA and its processor.

    With ``cfg.checkpoint`` (a local LISA-format folder) the sizes come from its
    ``config.json`` and weight shapes, the tokenizer from the folder, the weights are
    streamed in (:func:`~cxrils.models.rosalia.lisa_checkpoint.load_lisa_weights`) and the CLIP
    tower is loaded from its own folder; else a random model of ``cfg.llm_config`` /
    ``clip_config`` / ``sam_config`` with ``tokenizer`` (required then). LoRA is applied
    when ``lora``.

    Raises
    ------
    ModelLoadError
        Naming what is missing and where to put it (checkpoint, tokenizer, CLIP folder),
        or a checkpoint that does not fit.
    """
    from transformers import CLIPVisionConfig, CLIPVisionModel, LlamaForCausalLM, SamConfig, SamModel

    try:
        if cfg.checkpoint:
            folder = Path(cfg.checkpoint)
            lisa = read_lisa_config(folder)
            shapes = tensor_shapes(folder)
            tokenizer = tokenizer or LisaTokenizer(folder)
            cfg.projector_type = projector_type_from_shapes(shapes)
            cfg.mm_vision_select_layer = int(lisa.get("mm_vision_select_layer", cfg.mm_vision_select_layer))
            cfg.mm_use_im_start_end = bool(lisa.get("mm_use_im_start_end", cfg.mm_use_im_start_end))
            cfg.seg_out_dim = int(lisa.get("out_dim", cfg.seg_out_dim))
            llm_conf = llama_config(lisa)
            if llm_conf.vocab_size != len(tokenizer):
                raise LisaCheckpointError(
                    f"{folder}: config.json vocab_size {llm_conf.vocab_size} but the tokenizer "
                    f"has {len(tokenizer)} tokens"
                )
            sam_conf = sam_config_from_shapes(shapes)
            cfg.sam_image_size = sam_conf.vision_config.image_size
            vision, clip_proc = load_clip(find_clip_folder(cfg.clip_path, lisa, folder))
            with _construction(dtype, skip_init=True):
                llm, sam = LlamaForCausalLM(llm_conf), SamModel(sam_conf)
                model = RosaliaForSegmentation(cfg, llm, vision, sam, tokenizer.convert_tokens_to_ids(SEG_TOKEN))
            load_lisa_weights(model, folder)
        else:
            if tokenizer is None:
                raise ModelLoadError("a randomly initialised ROSALIA needs a tokenizer")
            from transformers import LlamaConfig

            llm_conf = LlamaConfig(
                **cfg.llm_config,
                vocab_size=len(tokenizer),
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            clip_conf = CLIPVisionConfig(**cfg.clip_config)
            clip_proc = clip_image_processor(size=clip_conf.image_size)
            with _construction(dtype, skip_init=False):
                model = RosaliaForSegmentation(
                    cfg,
                    LlamaForCausalLM(llm_conf),
                    CLIPVisionModel(clip_conf),
                    SamModel(SamConfig(**cfg.sam_config)),
                    tokenizer.convert_tokens_to_ids(SEG_TOKEN),
                )
        processor = RosaliaProcessor(tokenizer, cfg, clip_proc)
    except (LisaCheckpointError, TokenizerError) as err:
        raise ModelLoadError(str(err)) from err
    except ValueError as err:
        raise ModelLoadError(f"ROSALIA: {err}") from err
    model.vision_tower.requires_grad_(False)
    if lora:
        model.apply_lora()
    else:
        model.set_trainable()
    return model, processor


class RosaliaSegmenter(Segmenter):
    """ROSALIA for inference: ``predict(image, instruction) -> Prediction``.

    ``presence_score`` is the largest mask probability of the first [SEG] (0 when no
    [SEG] was generated).
    """

    model_type = "rosalia"

    def __init__(
        self, model: RosaliaForSegmentation, processor: RosaliaProcessor, device: torch.device | None = None
    ) -> None:
        self.model = model.eval()
        self.processor = processor
        self.device = device or next(model.parameters()).device

    @classmethod
    def _load(cls, path: Path, config: dict, **kwargs: Any) -> RosaliaSegmenter:
        """Load a LISA-format checkpoint or a cxrils run folder (module docstring).

        Keyword arguments: ``clip_path`` (CLIP folder), ``precision`` ("auto"), ``device``,
        ``num_threads`` (torch CPU threads), ``mask_geometry`` ("padded", the frame
        ROSALIA's weights learned, or "image" for LISA's own weights; see
        :class:`RosaliaConfig`).

        Raises
        ------
        ModelLoadError
            If the folder's weights or configuration do not fit, ``mask_geometry`` /
            ``precision`` is not one of the known values, or the extra ``models``
            (transformers, peft, accelerate) is not installed (the one-line message names
            the install command).
        """
        from safetensors.torch import load_file

        from cxrils.extras import MissingExtraError, require_extra

        try:
            require_extra("models", "ROSALIA / LISA checkpoints")
        except MissingExtraError as err:
            raise ModelLoadError(str(err)) from None

        if kwargs.get("num_threads"):
            torch.set_num_threads(int(kwargs["num_threads"]))
        geometry = {"mask_geometry": str(kwargs["mask_geometry"])} if kwargs.get("mask_geometry") else {}
        if is_lisa_config(config):
            try:
                cfg = RosaliaConfig(
                    checkpoint=str(path),
                    clip_path=str(kwargs.get("clip_path") or ""),
                    precision=str(kwargs.get("precision") or "auto"),
                    **geometry,
                )
            except ValueError as err:
                raise ModelLoadError(f"{path}: {err}") from err
            device, dtype = resolve_device_dtype(cfg.precision, kwargs.get("device"))
            model, processor = build_model(cfg, lora=False, dtype=dtype)
            return cls(model.to(device=device, dtype=dtype), processor, device)
        try:
            cfg = RosaliaConfig.load(path / "config.json")
        except (ValueError, TypeError) as err:
            raise ModelLoadError(f"{path / 'config.json'}: {err}") from err
        if kwargs.get("clip_path"):
            cfg.clip_path = str(kwargs["clip_path"])
        if kwargs.get("precision"):
            cfg.precision = str(kwargs["precision"])
        if geometry:
            if geometry["mask_geometry"] not in MASK_GEOMETRIES:
                raise ModelLoadError(
                    f"{path}: mask_geometry must be one of {MASK_GEOMETRIES}, got {geometry['mask_geometry']!r}"
                )
            cfg.mask_geometry = geometry["mask_geometry"]
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise ModelLoadError(f"{weights}: missing ROSALIA weights")
        try:
            tokenizer = LisaTokenizer(path / TOKENIZER_DIR)
        except TokenizerError as err:
            raise ModelLoadError(str(err)) from err
        device, dtype = resolve_device_dtype(cfg.precision, kwargs.get("device"))
        model, processor = build_model(cfg, tokenizer, dtype=dtype)
        state = load_file(str(weights))
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or (_from_scratch(cfg) and missing):
            raise ModelLoadError(
                f"{weights}: does not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        return cls(model.to(device=device, dtype=dtype), processor, device)

    def save_pretrained(self, path: str | Path) -> None:
        """Write config, tokenizer (``tokenizer/``) and weights to a run folder (module docstring)."""
        from safetensors.torch import save_file

        from cxrils.fsutil import atomic_path

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        cfg = self.model.cfg
        with atomic_path(out / "config.json") as tmp:
            cfg.save(tmp)
        self.processor.tokenizer.save_pretrained(out / TOKENIZER_DIR)
        if _from_scratch(cfg):  # random backbone: keep everything (persistent buffers too)
            state = dict(self.model.state_dict())
        else:  # a LISA checkpoint underneath: keep what training changed
            state = {k: v for k, v in self.model.named_parameters() if v.requires_grad}
        with atomic_path(out / WEIGHTS_NAME) as tmp:
            save_file({k: v.detach().to("cpu").clone().contiguous() for k, v in state.items()}, str(tmp))

    @torch.no_grad()
    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        """Answer one instruction: generate the text; its first [SEG] gives the mask.

        Parameters
        ----------
        image : ndarray of uint8, shape (H, W)
        instruction : str

        Returns
        -------
        Prediction
            bool (H, W) mask (logit > 0, as the authors' ``pred_masks > 0``; empty
            without [SEG]), decoded answer, presence score, ``padding_pixels``.
        """
        x, instruction = check_image(image), check_instruction(instruction)
        batch = self.processor.collate([self.processor.encode(x, instruction)])
        dtype = self.model.mm_projector_dtype
        batch = {k: v.to(self.device, dtype=dtype if v.is_floating_point() else None) for k, v in batch.items()}
        tok = self.processor.tokenizer
        new, decoded = self.model.generate(**batch, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        answer = self.processor.decode_answer(new[0].cpu())
        if decoded[0] is None:
            return Prediction(np.zeros(x.shape, dtype=bool), answer, 0.0)
        return self._prediction(decoded[0], answer, batch)

    @torch.no_grad()
    def predict_teacher_forced(self, image: np.ndarray, instruction: str, answer: str) -> Prediction:
        """The mask of the [SEG] in a given (reference) answer, as the authors' ``validate()``
        scores the model (``model_forward(inference=True)`` on the conversation with the
        reference answer: no generation, the text is not the model's).

        Returns
        -------
        Prediction
            Mask (empty when ``answer`` has no [SEG]), ``answer`` echoed, presence score,
            ``padding_pixels``.
        """
        x = check_image(image)
        batch = self.processor.collate([self.processor.encode(x, instruction, answer, None)])
        dtype = self.model.mm_projector_dtype
        batch = {
            k: v.to(self.device, dtype=dtype if v.is_floating_point() else None)
            for k, v in batch.items()
            if torch.is_tensor(v)
        }
        m = self.model
        seg = m.seg_hidden_positions(batch["input_ids"])
        if not bool(seg.any()):
            return Prediction(np.zeros(x.shape, dtype=bool), answer, 0.0)
        emb, att, _, image_pos = m.inputs_embeds(batch["input_ids"], batch["attention_mask"], batch["pixel_values"])
        hidden = m.language_model.model(inputs_embeds=emb, attention_mask=att).last_hidden_state
        seg_e = m.expand_positions(seg, image_pos, emb.shape[1] - batch["input_ids"].shape[1] + 1)
        prompt = m.text_hidden_fcs[0](hidden[0, int(seg_e[0].float().argmax())])[None]
        decoded = m.decode_masks(batch["sam_pixel_values"], [prompt], batch["reshaped_sizes"], batch["original_sizes"])
        return self._prediction(decoded[0], answer, batch)

    @staticmethod
    def _prediction(decoded: tuple[torch.Tensor, torch.Tensor], answer: str, batch: dict) -> Prediction:
        """The :class:`Prediction` of one sample's first [SEG] mask (``decoded``: its
        ``(logits, padding)`` from ``decode_masks``): foreground where the logit is > 0
        (the authors' ``pred_masks > 0``), ``padding_pixels`` in the image's pixels
        (:class:`~cxrils.models.base.Prediction`)."""
        logits, padding = decoded
        first = logits[0].float().cpu()
        (rh, rw), (oh, ow) = (tuple(int(v) for v in batch[k][0]) for k in ("reshaped_sizes", "original_sizes"))
        pad = int(padding[0])
        if (rh, rw) != (oh, ow):
            pad = round(pad * oh * ow / (rh * rw))
        return Prediction((first > 0).numpy(), answer, float(torch.sigmoid(first).max()), padding_pixels=pad)
