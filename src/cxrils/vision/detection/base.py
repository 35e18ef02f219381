"""The ``LesionDetector`` protocol and its registry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from cxrils.config import Config
from cxrils.registry import Registry
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox
from cxrils.vision.batching import check_lengths
from cxrils.vocab import VINDR_KEPT


class DetectorBackendError(RuntimeError):
    """A backend cannot be built: unknown name, missing package or model file."""


@runtime_checkable
class LesionDetector(Protocol):
    """Proposes lesion boxes with a confidence."""

    name: str
    version: str

    def detect(
        self, x: np.ndarray, *, anomaly: AnomalyResult | None = None, anatomy: AnatomyMasks | None = None
    ) -> list[LesionBox]:
        """Candidate lesion boxes of ``x``.

        Parameters
        ----------
        x : numpy.ndarray, uint8, shape (H, W)
            Frontal chest X-ray.
        anomaly : AnomalyResult, optional
            Anomaly map of ``x`` (needed by the builtin backend).
        anatomy : AnatomyMasks, optional
            Anatomy of ``x`` (the builtin backend uses its lungs).

        Returns
        -------
        list of LesionBox
            Boxes ``(x0, y0, x1, y1)`` in pixels of ``x`` (x = column), confidence in
            [0, 1], class names of :data:`cxrils.vocab.VINDR_KEPT` only (Appendix A.3),
            highest confidence first.

        Raises
        ------
        ValueError
            If ``x`` is not uint8 (H, W) or a needed input is missing or mis-shaped.
        """
        ...

    def detect_batch(
        self,
        xs: Sequence[np.ndarray],
        *,
        anomalies: Sequence[AnomalyResult | None] | None = None,
        anatomies: Sequence[AnatomyMasks | None] | None = None,
    ) -> list[list[LesionBox]]:
        """:meth:`detect` of each image; each result is the one the image gets alone.

        The default detects image by image; model-backed backends override it to
        stack images (:mod:`cxrils.vision.batching`).

        Parameters
        ----------
        xs : sequence of numpy.ndarray, uint8, shape (H_i, W_i)
        anomalies, anatomies : sequence, optional
            One per image (see :meth:`detect`); None = None for every image.

        Returns
        -------
        list of list of LesionBox
            One list per image, in order, boxes in pixels of that image.

        Raises
        ------
        ValueError
            If the sequences differ in length or an image's inputs are invalid.
        """
        n = len(xs)
        check_lengths("detect_batch", n, anomalies, anatomies)
        anomalies = [None] * n if anomalies is None else anomalies
        anatomies = [None] * n if anatomies is None else anatomies
        return [self.detect(x, anomaly=a, anatomy=m) for x, a, m in zip(xs, anomalies, anatomies)]


#: Backend name -> "module:Class" (:class:`cxrils.registry.Registry`); each class provides
#: ``from_config(cfg)`` and ``weight_files(cfg)`` (the files it loads, for provenance).
BACKENDS: Registry[LesionDetector] = Registry(
    "detector backend",
    {
        "builtin": "cxrils.vision.detection.builtin:BuiltinDetector",
        "onnx": "cxrils.vision.detection.onnx_yolo:OnnxYoloDetector",
    },
    DetectorBackendError,
)


def get_detector(name: str, cfg: Config) -> LesionDetector:
    """Build the detector backend ``name`` (``builtin`` or ``onnx``).

    Raises
    ------
    DetectorBackendError
        If the name is unknown, or the backend's package or model file is missing.
    """
    return BACKENDS.build(name, cfg)


def keep_lesion_classes(boxes: Iterable[LesionBox]) -> list[LesionBox]:
    """Boxes of hyperintense lesion classes only (drops aortic enlargement, other
    lesion, pneumothorax and cardiomegaly; Appendix A.3), highest confidence first."""
    kept = [b for b in boxes if b.class_name in VINDR_KEPT]
    return sorted(kept, key=lambda b: -b.confidence)


def check_image(x: np.ndarray) -> None:
    """Raise ValueError unless ``x`` is a non-empty uint8 (H, W) array."""
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype != np.uint8 or x.size == 0:
        raise ValueError(f"x must be a non-empty uint8 (H, W) image, got {x.dtype} {x.shape}")
