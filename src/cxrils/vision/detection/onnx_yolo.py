"""YOLO lesion detector exported to ONNX, run with onnxruntime (paper section 3.1
step 2: a VinDr-CXR YOLO from the VinBigData competition).

Pre-processing: letterbox — the image is scaled by ``s = S / max(H, W)`` (``S`` =
``detection.onnx_input_size``), centred on an ``S x S`` canvas padded with grey 114,
replicated to 3 channels, scaled to [0, 1], layout (1, 3, S, S) float32.

Output decoding, by shape (``nc`` = 14 VinDr-CXR classes, order of
:data:`cxrils.vocab.VINDR_CLASSES`):

- YOLOv5 layout (1, N, 5 + nc): ``cx, cy, w, h, objectness, class scores``;
  score = objectness * class score;
- YOLOv8 layout (1, 4 + nc, N): ``cx, cy, w, h, class scores``; score = class score.

Each candidate keeps its best class; candidates scoring below
``detection.onnx_min_score`` are dropped, then class-wise NMS (OpenCV
``cv2.dnn.NMSBoxesBatched``, IoU ``detection.onnx_nms_iou``), then the letterbox is
undone and boxes are clipped to the image. Classes outside
:data:`cxrils.vocab.VINDR_KEPT` are dropped (Appendix A.3).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from cxrils.config import Config, DetectionConfig
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox
from cxrils.vision.detection.base import DetectorBackendError, check_image, keep_lesion_classes
from cxrils.vocab import VINDR_CLASSES

#: Letterbox padding grey level (the YOLO convention).
PAD_VALUE = 114


def letterbox(x: np.ndarray, size: int) -> tuple[np.ndarray, float, tuple[float, float]]:
    """Scale ``x`` (uint8 (H, W)) into a ``size x size`` canvas, keeping its aspect.

    Returns
    -------
    canvas : numpy.ndarray, uint8, shape (size, size)
    scale : float
        Canvas pixels per image pixel.
    pad : (float, float)
        Left and top padding of the scaled image, canvas pixels.
    """
    h, w = x.shape
    scale = size / max(h, w)
    nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    resized = cv2.resize(x, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    canvas = np.full((size, size), PAD_VALUE, dtype=np.uint8)
    top, left = (size - nh) // 2, (size - nw) // 2
    canvas[top:top + nh, left:left + nw] = resized
    return canvas, scale, (float(left), float(top))


def decode(output: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode a YOLO output into ``(cxcywh (N, 4), scores (N,), class_ids (N,))``.

    Raises
    ------
    ValueError
        If the output shape matches neither the YOLOv5 nor the YOLOv8 layout.
    """
    out = np.asarray(output, dtype=np.float32)
    if out.ndim == 3 and out.shape[0] == 1:
        out = out[0]
    if out.ndim != 2:
        raise ValueError(f"unexpected YOLO output shape {np.shape(output)}")
    if out.shape[1] == 5 + n_classes:
        cls_scores = out[:, 5:] * out[:, 4:5]
    elif out.shape[0] == 4 + n_classes:
        out = out.T
        cls_scores = out[:, 4:]
    else:
        raise ValueError(f"YOLO output shape {np.shape(output)} fits neither (1, N, {5 + n_classes}) "
                         f"nor (1, {4 + n_classes}, N) for {n_classes} classes")
    class_ids = cls_scores.argmax(axis=1)
    scores = cls_scores[np.arange(len(out)), class_ids]
    return out[:, :4], scores, class_ids


class OnnxYoloDetector:
    """VinDr-CXR YOLO through onnxruntime (see module docstring).

    Parameters
    ----------
    model_path : str or Path
        The ``.onnx`` file (``backends.onnx_detector``).
    cfg : DetectionConfig
        ``onnx_input_size``, ``onnx_min_score``, ``onnx_nms_iou``.

    Raises
    ------
    DetectorBackendError
        If onnxruntime is missing or the file cannot be loaded.
    """

    name = "onnx"
    version = "yolo-onnx-1"

    def __init__(self, model_path: str | Path, cfg: DetectionConfig | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as err:
            raise DetectorBackendError(f"onnx detector needs onnxruntime: pip install 'cxrils[detect]' ({err})") from err
        self.cfg = cfg or DetectionConfig()
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise DetectorBackendError(f"onnx detector: model file {str(path)!r} not found; export the "
                                       "VinDr-CXR YOLO to ONNX and set backends.onnx_detector")
        try:
            self.session = ort.InferenceSession(str(path), providers=ort.get_available_providers())
        except Exception as err:  # onnxruntime raises several unrelated types
            raise DetectorBackendError(f"onnx detector: cannot load {str(path)!r}: {err}") from err
        self.input_name = self.session.get_inputs()[0].name

    @classmethod
    def from_config(cls, cfg: Config) -> "OnnxYoloDetector":
        """Build from ``backends.onnx_detector`` and the ``detection`` section."""
        if not cfg.backends.onnx_detector:
            raise DetectorBackendError("onnx detector: set backends.onnx_detector to the exported .onnx file")
        return cls(cfg.backends.onnx_detector, cfg.detection)

    def detect(self, x: np.ndarray, *, anomaly: AnomalyResult | None = None,
               anatomy: AnatomyMasks | None = None) -> list[LesionBox]:
        """See :meth:`cxrils.vision.detection.LesionDetector.detect` (``anomaly`` and
        ``anatomy`` are not used)."""
        check_image(x)
        h, w = x.shape
        size = self.cfg.onnx_input_size
        canvas, scale, (left, top) = letterbox(x, size)
        tensor = np.repeat(canvas[None, None].astype(np.float32) / 255.0, 3, axis=1)
        output = self.session.run(None, {self.input_name: tensor})[0]
        cxcywh, scores, class_ids = decode(output, len(VINDR_CLASSES))
        ok = scores >= self.cfg.onnx_min_score
        cxcywh, scores, class_ids = cxcywh[ok], scores[ok], class_ids[ok]
        if len(scores) == 0:
            return []
        xywh = np.column_stack([cxcywh[:, 0] - cxcywh[:, 2] / 2, cxcywh[:, 1] - cxcywh[:, 3] / 2,
                                cxcywh[:, 2], cxcywh[:, 3]])
        keep = np.asarray(cv2.dnn.NMSBoxesBatched(xywh.tolist(), scores.tolist(), class_ids.tolist(),
                                                  self.cfg.onnx_min_score, self.cfg.onnx_nms_iou)).reshape(-1)
        boxes = []
        for i in keep:
            x0 = np.clip((xywh[i, 0] - left) / scale, 0, w)
            y0 = np.clip((xywh[i, 1] - top) / scale, 0, h)
            x1 = np.clip((xywh[i, 0] + xywh[i, 2] - left) / scale, 0, w)
            y1 = np.clip((xywh[i, 1] + xywh[i, 3] - top) / scale, 0, h)
            if x1 > x0 and y1 > y0:
                boxes.append(LesionBox(float(x0), float(y0), float(x1), float(y1),
                                       float(scores[i]), VINDR_CLASSES[int(class_ids[i])]))
        return keep_lesion_classes(boxes)
