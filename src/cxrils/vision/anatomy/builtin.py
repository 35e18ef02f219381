"""The ``builtin`` anatomy backend: the small MONAI U-Net trained by this project.

Weights ship in the package (``cxrils/weights/anatomy_builtin.safetensors``, model card
``anatomy_builtin.md``). The network predicts the visible right and left lungs, the
heart, and the whole right and left lungs (sigmoid, multi-label;
:mod:`cxrils.vision.anatomy.network`) on a letterboxed, CLAHE-equalised 256 x 256
canvas; outputs are mapped back to the input's own size, thresholded, and cleaned
(largest connected component, holes filled). Zones and lobes come from the geometric
rule of :mod:`cxrils.vision.anatomy.regions`, applied to the whole lungs.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import cv2
import numpy as np

from cxrils.config import AnatomyConfig, Config
from cxrils.fsutil import sha256_file
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy.base import AnatomyBackendError, AnatomySegmenter, assemble, check_input
from cxrils.vision.anatomy.network import CHANNELS, FULL, HEART, VISIBLE, build_network
from cxrils.vision.anatomy.preprocess import prepare

#: File name of the shipped weights inside ``cxrils/weights``.
WEIGHTS_NAME = "anatomy_builtin.safetensors"


def default_weights() -> Path:
    """Path of the weights shipped in the package."""
    return Path(str(resources.files("cxrils") / "weights" / WEIGHTS_NAME))


def largest_component(mask: np.ndarray) -> np.ndarray:
    """Largest 8-connected component of a bool (H, W) mask with its holes filled
    (all False stays all False)."""
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros(mask.shape, dtype=bool)
    keep = (labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))).astype(np.uint8)
    contours, _ = cv2.findContours(keep, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(keep, contours, -1, 1, thickness=cv2.FILLED)
    return keep.astype(bool)


class BuiltinSegmenter(AnatomySegmenter):
    """Right lung, left lung and heart from the shipped network; zones and lobes by rule.

    Parameters
    ----------
    weights : path, optional
        A ``.safetensors`` file written by ``cxrils train-anatomy``; default: the
        weights shipped in the package.
    cfg : AnatomyConfig, optional
        Probability threshold and the zone/lobe rule's fractions.

    Raises
    ------
    AnatomyBackendError
        If the weights file is missing or does not match the architecture in its
        metadata.
    """

    name = "builtin"

    def __init__(self, weights: str | Path | None = None, cfg: AnatomyConfig | None = None) -> None:
        import torch
        from safetensors import SafetensorError
        from safetensors.torch import load_file, safe_open

        path = Path(weights) if weights is not None else default_weights()
        if not path.is_file():
            raise AnatomyBackendError(
                f"{path}: builtin anatomy weights not found; train them with `cxrils train-anatomy`"
            )
        try:
            with safe_open(str(path), framework="pt") as fh:
                meta = fh.metadata() or {}
            arch = json.loads(meta["arch"])
            if json.loads(meta.get("channels", "[]")) != list(CHANNELS):
                raise ValueError(f"channels {meta.get('channels')} != {list(CHANNELS)}")
            net = build_network(arch)
            net.load_state_dict(load_file(str(path)))
        except (SafetensorError, KeyError, ValueError, RuntimeError, OSError) as err:
            raise AnatomyBackendError(f"{path}: not usable builtin anatomy weights: {err}") from err
        self.cfg = cfg or AnatomyConfig()
        self.input_size = int(arch["input_size"])
        self.network = net.eval()
        self.version = "unet-" + sha256_file(path)[:12]
        self._torch = torch

    @classmethod
    def from_config(cls, cfg: Config) -> BuiltinSegmenter:
        """The shipped weights with ``cfg.anatomy``."""
        return cls(cfg=cfg.anatomy)

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The file :meth:`from_config` loads: the shipped weights."""
        return [str(default_weights())]

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Sigmoid outputs at the input's size.

        Parameters
        ----------
        x : numpy.ndarray, uint8, shape (H, W)

        Returns
        -------
        numpy.ndarray, float32, shape (5, H, W)
            Probabilities in [0, 1] of the channels of
            :data:`~cxrils.vision.anatomy.network.CHANNELS`: visible right and left lung,
            heart, whole right and left lung (patient sides).
        """
        check_input(x)
        canvas, box = prepare(x, self.input_size, self.cfg)
        torch = self._torch
        with torch.inference_mode():
            logits = self.network(torch.from_numpy(canvas)[None, None])[0]
        return box.inverse(torch.sigmoid(logits).numpy())

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        """All anatomy labels of one image; see :class:`~cxrils.vision.anatomy.base.AnatomySegmenter`.

        Lungs are thresholded at ``cfg.threshold``, the heart at ``cfg.heart_threshold``;
        a pixel claimed by both lungs goes to the more probable one; each organ keeps its
        largest connected component, holes filled. The whole lungs (``masks``, cut into
        zones and lobes) hold their visible lungs (``visible``,
        :meth:`~cxrils.types.AnatomyMasks.organs`).
        """
        p = self.probabilities(x)
        t = self.cfg.threshold

        def split(p_right: np.ndarray, p_left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return (
                largest_component((p_right >= t) & (p_right >= p_left)),
                largest_component((p_left >= t) & (p_left > p_right)),
            )

        seen_right, seen_left = split(p[VISIBLE[0]], p[VISIBLE[1]])
        full_right, full_left = split(p[FULL[0]], p[FULL[1]])
        full_right = largest_component(full_right | (seen_right & ~full_left))
        full_left = largest_component(full_left | (seen_left & ~full_right))
        heart = largest_component(p[HEART] >= self.cfg.heart_threshold)
        return assemble(
            full_right, full_left, heart, self.cfg, self.name, self.version, visible=(seen_right, seen_left)
        )
