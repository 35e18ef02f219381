"""Builtin lesion detector: a small CenterNet trained on expert-verified lesion masks.

It plays the VinDr-CXR YOLO's role of the paper (section 3.1 step 2): boxes with
confidences from a model trained on human annotations. Weights ship in the package
(``cxrils/weights/detector_builtin.safetensors``, model card ``detector_builtin.md``),
trained by ``cxrils train-detector`` (:mod:`cxrils.training.detector_train`) on one half
of the COVID-QU-Ex tuning part, with one box per connected component of the infection
masks. It emits one VinDr-CXR class, "Lung Opacity", the only one its data supports.

It reads only the image: not the anomaly map, not the anatomy. The anomaly map
(:mod:`cxrils.vision.anomaly.builtin`) is another network with another target (pixel
masks, not box centres), trained on the other half of the tuning images, so
Algorithm 1's c3 (anomaly signal inside the box) checks the detector against an
independent model (docs/grounding.md).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from cxrils.config import Config, DetectionConfig
from cxrils.fsutil import sha256_file
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox
from cxrils.vision.detection.base import DetectorBackendError, LesionDetector, check_image, keep_lesion_classes
from cxrils.vision.detection.centernet import decode, nms
from cxrils.vision.lesion_nets import CenterNetDetector, load_weights, network_input

#: File name of the shipped weights inside ``cxrils/weights``.
WEIGHTS_NAME = "detector_builtin.safetensors"


def default_weights() -> Path:
    """Path of the detector weights shipped in the package."""
    return Path(str(resources.files("cxrils") / "weights" / WEIGHTS_NAME))


def _build(meta: dict) -> CenterNetDetector:
    arch = meta["arch"]
    return CenterNetDetector(tuple(arch["widths"]), n_classes=int(arch["n_classes"]))


class BuiltinDetector(LesionDetector):
    """The learned CenterNet detector (see module docstring).

    Parameters
    ----------
    cfg : DetectionConfig
        ``builtin_weights`` (empty: shipped), ``builtin_min_score``,
        ``builtin_max_boxes``, ``builtin_nms_iou``.

    Raises
    ------
    DetectorBackendError
        If the weights are missing or do not fit the network.
    """

    name = "builtin"

    def __init__(self, cfg: DetectionConfig | None = None) -> None:
        import torch

        self.cfg = cfg or DetectionConfig()
        path = Path(self.cfg.builtin_weights) if self.cfg.builtin_weights else default_weights()
        self.net, meta = load_weights(path, _build, DetectorBackendError)
        try:
            self.input_size = int(meta["arch"]["input_size"])
            self.classes = [str(c) for c in meta["classes"]]
        except (KeyError, TypeError, ValueError) as err:
            raise DetectorBackendError(f"{path}: weights lack their input size or class names: {err!r}") from err
        if len(self.classes) != self.net.n_classes:
            raise DetectorBackendError(
                f"{path}: {len(self.classes)} class names for a detector of {self.net.n_classes} classes"
            )
        self.version = "centernet-" + sha256_file(path)[:12]
        self._torch = torch

    @classmethod
    def from_config(cls, cfg: Config) -> BuiltinDetector:
        """Build from the ``detection`` section of a :class:`~cxrils.config.Config`."""
        return cls(cfg.detection)

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The file :meth:`from_config` loads: ``detection.builtin_weights``, else the shipped one."""
        return [cfg.detection.builtin_weights or str(default_weights())]

    def detect(
        self, x: np.ndarray, *, anomaly: AnomalyResult | None = None, anatomy: AnatomyMasks | None = None
    ) -> list[LesionBox]:
        """See :meth:`cxrils.vision.detection.LesionDetector.detect`. ``anomaly`` and
        ``anatomy`` are ignored (the detector is independent of both).

        Raises
        ------
        ValueError
            If ``x`` is not uint8 (H, W).
        """
        check_image(x)
        s = self.input_size
        torch = self._torch
        with torch.inference_mode():
            out = self.net(torch.from_numpy(network_input(x, s))[None, None])
        found = decode(
            torch.sigmoid(out["heatmap"][0]).numpy(),
            out["size"][0].numpy(),
            out["offset"][0].numpy(),
            min_score=self.cfg.builtin_min_score,
            max_boxes=self.cfg.builtin_max_boxes,
        )
        h, w = x.shape
        sx, sy = w / s, h / s
        boxes = [
            LesionBox(
                float(np.clip(x0 * sx, 0, w)),
                float(np.clip(y0 * sy, 0, h)),
                float(np.clip(x1 * sx, 0, w)),
                float(np.clip(y1 * sy, 0, h)),
                float(score),
                self.classes[c],
            )
            for x0, y0, x1, y1, score, c in nms(found, self.cfg.builtin_nms_iou)
        ]
        return keep_lesion_classes(b for b in boxes if b.x1 > b.x0 and b.y1 > b.y0)
