"""The user-facing light model: load, predict, save.

>>> seg = Segmenter.from_pretrained("runs/light")                    # doctest: +SKIP
>>> pred = seg.predict(x, "Segment the effusion in the left lung base.")  # doctest: +SKIP
>>> pred.mask.shape == x.shape, pred.answer, pred.presence_score      # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from cxrils import vocab
from cxrils.fsutil import atomic_path, atomic_write_json
from cxrils.models.base import CONFIG_NAME, ModelLoadError, Prediction, Segmenter, check_image
from cxrils.models.light.answer import compose_answer, locations_from_mask
from cxrils.models.light.config import LightConfig
from cxrils.models.light.text import InstructionEncoder, interpret_instruction
from cxrils.types import AnatomyMasks

WEIGHTS_NAME = "model.safetensors"
AnatomyFn = Callable[[np.ndarray], AnatomyMasks]


def default_anatomy() -> AnatomyFn:
    """The configured anatomy segmenter's ``segment`` (``cxrils.vision.anatomy``, builtin).

    Raises
    ------
    RuntimeError
        If the anatomy stage is not installed.
    """
    try:
        from cxrils.config import Config
        from cxrils.vision.anatomy import get_segmenter
    except ImportError as err:
        raise RuntimeError("global positive answers name lung regions and need the anatomy stage "
                           f"(cxrils.vision.anatomy), which is not available: {err}") from err
    cfg = Config()
    return get_segmenter(cfg.backends.anatomy, cfg).segment


class LightSegmenter(Segmenter):
    """Light ILS model (FiLM U-Net, presence head, template answers); see docs/models.md.

    Parameters
    ----------
    config : LightConfig
    net : LightILSNet, optional
        A network (randomly initialised from ``config`` when None).
    anatomy : callable, optional
        ``anatomy(x uint8 (H, W)) -> AnatomyMasks`` used to name the locations of a
        global positive answer; default: :func:`default_anatomy`, created on first use.
    num_threads : int, optional
        torch intra-op threads for inference (unchanged when None).
    """

    model_type = "light"

    def __init__(self, config: LightConfig, net=None, *, anatomy: AnatomyFn | None = None,
                 num_threads: int | None = None) -> None:
        import torch

        from cxrils.models.light.network import LightILSNet

        self.config = config
        self.encoder = InstructionEncoder(config.text_encoder)
        self.net = net if net is not None else LightILSNet(config, self.encoder.dim)
        self.net.eval()
        self._anatomy = anatomy
        if num_threads is not None:
            torch.set_num_threads(num_threads)

    @classmethod
    def _load(cls, path: Path, config: dict, *, anatomy: AnatomyFn | None = None,
              num_threads: int | None = None) -> "LightSegmenter":
        from safetensors.torch import load_file

        try:
            cfg = LightConfig.from_dict(config)
        except (TypeError, ValueError) as err:
            raise ModelLoadError(f"{path / CONFIG_NAME}: invalid light model config: {err}") from err
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise ModelLoadError(f"{weights}: missing; train the model first (cxrils train --model light)")
        seg = cls(cfg, anatomy=anatomy, num_threads=num_threads)
        try:
            state = load_file(str(weights))
            seg.net.load_state_dict(state)
        except Exception as err:  # safetensors / torch raise several types on bad files
            raise ModelLoadError(f"{weights}: cannot load weights into the light model: {err}") from err
        seg.net.eval()
        return seg

    def save(self, path: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``path`` (atomically)."""
        from safetensors.torch import save_file

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.net.state_dict().items()}
        with atomic_path(out / WEIGHTS_NAME, suffix=".safetensors") as tmp:
            save_file(state, str(tmp), metadata={"model_type": self.model_type})
        atomic_write_json(out / CONFIG_NAME, self.config.to_dict())
        return out

    def anatomy(self, x: np.ndarray) -> AnatomyMasks:
        """Anatomy masks of ``x`` (creates the default segmenter on first use)."""
        if self._anatomy is None:
            self._anatomy = default_anatomy()
        return self._anatomy(x)

    def _forward(self, images: list[np.ndarray], instructions: list[str]) -> dict[str, np.ndarray]:
        import cv2
        import torch

        s = self.config.image_size
        batch = np.stack([cv2.resize(x, (s, s), interpolation=cv2.INTER_AREA) for x in images])
        x_t = torch.from_numpy(batch.astype(np.float32) / 255.0)[:, None]
        t_t = torch.from_numpy(self.encoder.encode(instructions))
        with torch.inference_mode():
            out = self.net(x_t, t_t)
        return {
            "mask_logits": out["mask"][:, 0],
            "presence": torch.sigmoid(out["presence"]).numpy(),
            "lesion": torch.softmax(out["lesion"], dim=1).numpy(),
            "certainty": torch.sigmoid(out["certainty"]).numpy(),
        }

    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        """Answer one instruction about one image (see :meth:`Segmenter.predict`).

        Raises
        ------
        ValueError
            If ``image`` is not uint8 (H, W).
        cxrils.models.light.text.InstructionError
            If the structured encoder cannot read the instruction.
        """
        return self.predict_many([image], [instruction])[0]

    def predict_many(self, images: list[np.ndarray], instructions: list[str]) -> list[Prediction]:
        """Answer several (image, instruction) pairs in one network pass.

        Returns
        -------
        list of Prediction
            Masks at each image's own (H, W).
        """
        import torch
        import torch.nn.functional as F

        if len(images) != len(instructions):
            raise ValueError(f"{len(images)} images but {len(instructions)} instructions")
        if not images:
            return []
        images = [check_image(x) for x in images]
        out = self._forward(images, list(instructions))
        c = self.config
        preds = []
        for i, (x, text) in enumerate(zip(images, instructions)):
            p = float(out["presence"][i])
            mask = np.zeros(x.shape, dtype=bool)
            if p >= c.tau_presence:
                logits = F.interpolate(out["mask_logits"][i][None, None], size=x.shape, mode="bilinear",
                                       align_corners=False)[0, 0]
                mask = (torch.sigmoid(logits) >= c.tau_mask).numpy()
            interp = interpret_instruction(text)
            parsed = interp.parsed if interp is not None else None
            present = bool(mask.any())
            locations: list[str] = []
            if present and (parsed is None or parsed.instruction_type == "global") and (
                    parsed is None or parsed.target not in vocab.ORGAN_LOCATIONS):
                locations = locations_from_mask(mask, self.anatomy(x), c.tau_location)
            lesion = vocab.INFERENCE_LESION_TYPES[int(np.argmax(out["lesion"][i]))]
            certainty = "definitive" if out["certainty"][i] >= 0.5 else "tentative"
            answer = compose_answer(parsed, present, locations=locations, lesion=lesion, certainty=certainty)
            preds.append(Prediction(mask=mask, answer=answer, presence_score=p))
        return preds
