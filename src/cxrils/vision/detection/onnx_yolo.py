"""YOLO lesion detector exported to ONNX, run with onnxruntime (paper section 3.1
step 2: a VinDr-CXR YOLO from the VinBigData competition).

Model file, as ultralytics/yolov5 ``export.py`` writes it: input ``images`` of shape
(1, 3, S_h, S_w) (``--dynamic`` makes batch and size symbolic), metadata ``stride`` and
``names`` (``str()`` of the class names, a dict ``{0: name, ...}`` or a list, read
back with ``ast.literal_eval`` as yolov5's ``DetectMultiBackend`` does). A fixed input
shape sets the letterbox size; ``detection.onnx_input_size`` is used only when the
shape is symbolic (and must then be a multiple of the stride). When the names are
present they must be the 14 VinDr-CXR classes in :data:`cxrils.vocab.VINDR_CLASSES`
order (case and spaces aside); another model is refused.

Pre-processing: letterbox as yolov5 ``utils/augmentations.py`` ``letterbox`` with
``auto=False``: the image is scaled by ``s = min(S_h / H, S_w / W)`` (bilinear),
centred on an ``S_h x S_w`` canvas padded with grey 114, replicated to 3 channels,
scaled to [0, 1], layout (B, 3, S_h, S_w) float32.

Output decoding, by shape (``nc`` = 14 VinDr-CXR classes):

- YOLOv5 layout (B, N, 5 + nc): ``cx, cy, w, h, objectness, class scores``;
  score = objectness * class score;
- YOLOv8 layout (B, 4 + nc, N): ``cx, cy, w, h, class scores``; score = class score.

Each candidate keeps its best class; candidates scoring below
``detection.onnx_min_score`` are dropped, then class-wise NMS (OpenCV
``cv2.dnn.NMSBoxesBatched``, IoU ``detection.onnx_nms_iou``) keeping at most
``detection.onnx_max_det`` boxes, the highest-scoring (``max_det=300`` of yolov5's
``non_max_suppression`` and ultralytics'), then the letterbox is undone and boxes are
clipped to the image. The letterbox is undone as each layout's own ``scale_boxes`` does
(:func:`unletterbox_pad`): yolov5 subtracts the fractional padding
``((S_w - W * g) / 2, (S_h - H * g) / 2)``, current ultralytics (YOLOv8 layout) the
whole-pixel padding the letterbox applied; the canvas itself is padded by whole pixels
either way.
Classes outside :data:`cxrils.vocab.VINDR_KEPT` are dropped (Appendix A.3).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cxrils.config import Config, DetectionConfig
from cxrils.extras import install_command
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox
from cxrils.vision.batching import check_lengths
from cxrils.vision.detection.base import DetectorBackendError, LesionDetector, check_image, keep_lesion_classes
from cxrils.vocab import VINDR_CLASSES

#: Letterbox padding grey level (the YOLO convention).
PAD_VALUE = 114


def letterbox(x: np.ndarray, size: int | tuple[int, int]) -> tuple[np.ndarray, float, tuple[float, float]]:
    """Scale ``x`` (uint8 (H, W)) into a canvas of ``size`` (side, or (height, width)),
    keeping its aspect (yolov5 ``letterbox``, ``auto=False``).

    Returns
    -------
    canvas : numpy.ndarray, uint8, shape (S_h, S_w)
    scale : float
        Canvas pixels per image pixel.
    pad : (float, float)
        Left and top padding of the scaled image, canvas pixels.
    """
    out_h, out_w = (size, size) if isinstance(size, int) else size
    h, w = x.shape
    scale = min(out_h / h, out_w / w)
    nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    resized = cv2.resize(x, (nw, nh), interpolation=cv2.INTER_LINEAR) if (nh, nw) != (h, w) else x
    canvas = np.full((out_h, out_w), PAD_VALUE, dtype=np.uint8)
    top, left = (out_h - nh) // 2, (out_w - nw) // 2
    canvas[top : top + nh, left : left + nw] = resized
    return canvas, scale, (float(left), float(top))


def parse_names(value: str) -> list[str]:
    """Class names from yolov5's ``names`` metadata (``str()`` of a dict ``{id: name}``
    or of a list).

    Raises
    ------
    ValueError
        If the text is not such a literal.
    """
    try:
        names = ast.literal_eval(value)
    except (ValueError, SyntaxError) as err:
        raise ValueError(f"metadata 'names' is not a dict or list literal: {value[:80]!r}") from err
    if isinstance(names, dict):
        return [str(names[k]) for k in sorted(names)]
    if isinstance(names, (list, tuple)):
        return [str(n) for n in names]
    raise ValueError(f"metadata 'names' is a {type(names).__name__}, not a dict or list")


def check_names(names: Sequence[str], path: Path) -> None:
    """Refuse a model whose class names are not the 14 VinDr-CXR classes in order
    (compared ignoring case and repeated spaces).

    Raises
    ------
    DetectorBackendError
        Naming the first differences.
    """

    def norm(n: str) -> str:
        return " ".join(str(n).lower().split())

    if [norm(n) for n in names] != [norm(n) for n in VINDR_CLASSES]:
        diff = [f"{i}: {a!r} != {b!r}" for i, (a, b) in enumerate(zip(names, VINDR_CLASSES)) if norm(a) != norm(b)]
        raise DetectorBackendError(
            f"onnx detector: {path} has {len(names)} classes that are not the 14 VinDr-CXR classes in order"
            f" ({'; '.join(diff[:3]) or 'different count'}); export the VinDr-CXR YOLO with its class list "
            f"{list(VINDR_CLASSES)}"
        )


def decode(output: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Decode a YOLO output into ``(cxcywh (N, 4), scores (N,), class_ids (N,), layout)``,
    ``layout`` "v5" or "v8" (module docstring).

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
        cls_scores, layout = out[:, 5:] * out[:, 4:5], "v5"
    elif out.shape[0] == 4 + n_classes:
        out = out.T
        cls_scores, layout = out[:, 4:], "v8"
    else:
        raise ValueError(
            f"YOLO output shape {np.shape(output)} fits neither (1, N, {5 + n_classes}) "
            f"nor (1, {4 + n_classes}, N) for {n_classes} classes"
        )
    class_ids = cls_scores.argmax(axis=1)
    scores = cls_scores[np.arange(len(out)), class_ids]
    return out[:, :4], scores, class_ids, layout


def unletterbox_pad(
    layout: str, canvas: tuple[int, int], shape: tuple[int, int], scale: float, pad: tuple[float, float]
) -> tuple[float, float]:
    """The (left, top) padding, canvas pixels, that a layout's ``scale_boxes`` subtracts
    before dividing by ``scale`` (the gain ``min(S_h / H, S_w / W)``): yolov5
    ``utils/general.py`` the fractional ``((S_w - W * g) / 2, (S_h - H * g) / 2)``;
    current ultralytics ``utils/ops.py`` (the "v8" layout) ``round((S_w - round(W * g)) /
    2 - 0.1)``, which is the letterbox's own whole-pixel ``pad`` (:func:`letterbox`).
    ``canvas`` and ``shape`` are (height, width)."""
    if layout == "v8":
        return pad
    return (canvas[1] - shape[1] * scale) / 2, (canvas[0] - shape[0] * scale) / 2


class OnnxYoloDetector(LesionDetector):
    """VinDr-CXR YOLO through onnxruntime (see module docstring).

    Parameters
    ----------
    model_path : str or Path
        The ``.onnx`` file (``backends.onnx_detector``).
    cfg : DetectionConfig
        ``onnx_input_size`` (only for a model with a symbolic input size),
        ``onnx_min_score``, ``onnx_nms_iou``, ``onnx_max_det``.

    Attributes
    ----------
    input_size : (int, int)
        Letterbox (height, width): the model's fixed input shape, else the config's.
    batched : bool
        Whether the input's batch dimension is symbolic, so that images can be
        stacked (on the CUDA provider only; on CPU they run one by one, see
        :mod:`cxrils.vision.batching`).
    names : list of str or None
        The class names of the model's metadata, when it has them.

    Raises
    ------
    DetectorBackendError
        If onnxruntime is missing, the file cannot be loaded, its input is not
        (B, 3, H, W), its names are not VinDr-CXR's, or the configured size does not
        fit its stride.
    """

    name = "onnx"
    version = "yolo-onnx-3"

    def __init__(self, model_path: str | Path, cfg: DetectionConfig | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as err:
            raise DetectorBackendError(f"onnx detector needs onnxruntime: {install_command('detect')} ({err})") from err
        self.cfg = cfg or DetectionConfig()
        if self.cfg.onnx_max_det < 1:
            raise DetectorBackendError(f"detection.onnx_max_det must be at least 1, got {self.cfg.onnx_max_det}")
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise DetectorBackendError(
                f"onnx detector: model file {str(path)!r} not found; export the "
                "VinDr-CXR YOLO to ONNX and set backends.onnx_detector"
            )
        try:
            self.session = ort.InferenceSession(str(path), providers=ort.get_available_providers())
        except Exception as err:  # onnxruntime raises several unrelated types
            raise DetectorBackendError(f"onnx detector: cannot load {str(path)!r}: {err}") from err
        meta = self.session.get_modelmeta().custom_metadata_map
        self.names = None
        if "names" in meta:
            try:
                self.names = parse_names(meta["names"])
            except ValueError as err:
                raise DetectorBackendError(f"onnx detector: {path}: {err}") from err
            check_names(self.names, path)
        stride = int(meta["stride"]) if str(meta.get("stride", "")).isdigit() else None
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.input_size, self.batched = self._input_geometry(inp.shape, stride, path)
        self.stack = self.batched and "CUDAExecutionProvider" in self.session.get_providers()

    def _input_geometry(self, shape: Sequence[Any], stride: int | None, path: Path) -> tuple[tuple[int, int], bool]:
        if len(shape) != 4 or (isinstance(shape[1], int) and shape[1] != 3):
            raise DetectorBackendError(f"onnx detector: {path} input has shape {list(shape)}, expected (B, 3, H, W)")
        h, w = shape[2], shape[3]
        if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
            size = (h, w)
        else:
            size = (self.cfg.onnx_input_size, self.cfg.onnx_input_size)
            if stride and size[0] % stride:
                raise DetectorBackendError(
                    f"onnx detector: detection.onnx_input_size={size[0]} is not a multiple "
                    f"of the model's stride {stride} ({path})"
                )
        return size, not isinstance(shape[0], int)

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The model :meth:`from_config` loads (``backends.onnx_detector``), when set;
        imports no onnxruntime."""
        return [p for p in [cfg.backends.onnx_detector] if p]

    @classmethod
    def from_config(cls, cfg: Config) -> OnnxYoloDetector:
        """Build from ``backends.onnx_detector`` and the ``detection`` section."""
        if not cfg.backends.onnx_detector:
            raise DetectorBackendError("onnx detector: set backends.onnx_detector to the exported .onnx file")
        return cls(cfg.backends.onnx_detector, cfg.detection)

    def detect(
        self, x: np.ndarray, *, anomaly: AnomalyResult | None = None, anatomy: AnatomyMasks | None = None
    ) -> list[LesionBox]:
        """See :meth:`cxrils.vision.detection.LesionDetector.detect` (``anomaly`` and
        ``anatomy`` are not used)."""
        return self.detect_batch([x])[0]

    def detect_batch(
        self,
        xs: Sequence[np.ndarray],
        *,
        anomalies: Sequence[AnomalyResult | None] | None = None,
        anatomies: Sequence[AnatomyMasks | None] | None = None,
    ) -> list[list[LesionBox]]:
        """See :meth:`cxrils.vision.detection.LesionDetector.detect_batch`: stacked when
        the model's batch dimension is symbolic and it runs on CUDA, else one by one."""
        check_lengths("detect_batch", len(xs), anomalies, anatomies)
        for x in xs:
            check_image(x)
        groups = [list(range(len(xs)))] if self.stack and xs else [[i] for i in range(len(xs))]
        out: list[list[LesionBox]] = [[] for _ in xs]
        for group in groups:
            boxed = [letterbox(xs[i], self.input_size) for i in group]
            tensor = np.stack([np.repeat(c[None].astype(np.float32) / 255.0, 3, axis=0) for c, _, _ in boxed])
            output = self.session.run(None, {self.input_name: tensor})[0]
            if output.shape[0] != len(group):
                raise ValueError(f"YOLO output of shape {output.shape} for a batch of {len(group)}")
            for k, i in enumerate(group):
                _, scale, pad = boxed[k]
                out[i] = self._boxes(output[k : k + 1], xs[i].shape, scale, pad)
        return out

    def _boxes(
        self, output: np.ndarray, shape: tuple[int, int], scale: float, pad: tuple[float, float]
    ) -> list[LesionBox]:
        """Decode, NMS and un-letterbox the output of one image (``shape``: its (H, W);
        ``scale`` and ``pad``: the letterbox's)."""
        h, w = shape
        cxcywh, scores, class_ids, layout = decode(output, len(VINDR_CLASSES))
        left, top = unletterbox_pad(layout, self.input_size, (h, w), scale, pad)
        ok = scores >= self.cfg.onnx_min_score
        cxcywh, scores, class_ids = cxcywh[ok], scores[ok], class_ids[ok]
        if len(scores) == 0:
            return []
        xywh = np.column_stack(
            [cxcywh[:, 0] - cxcywh[:, 2] / 2, cxcywh[:, 1] - cxcywh[:, 3] / 2, cxcywh[:, 2], cxcywh[:, 3]]
        )
        keep = np.asarray(
            cv2.dnn.NMSBoxesBatched(
                xywh.tolist(), scores.tolist(), class_ids.tolist(), self.cfg.onnx_min_score, self.cfg.onnx_nms_iou
            )
        ).reshape(-1)
        keep = keep[np.argsort(-scores[keep], kind="stable")][: self.cfg.onnx_max_det]
        boxes = []
        for i in keep:
            x0 = np.clip((xywh[i, 0] - left) / scale, 0, w)
            y0 = np.clip((xywh[i, 1] - top) / scale, 0, h)
            x1 = np.clip((xywh[i, 0] + xywh[i, 2] - left) / scale, 0, w)
            y1 = np.clip((xywh[i, 1] + xywh[i, 3] - top) / scale, 0, h)
            if x1 > x0 and y1 > y0:
                boxes.append(
                    LesionBox(
                        float(x0), float(y0), float(x1), float(y1), float(scores[i]), VINDR_CLASSES[int(class_ids[i])]
                    )
                )
        return keep_lesion_classes(boxes)
