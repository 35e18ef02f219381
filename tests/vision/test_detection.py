"""Lesion detectors: the builtin anomaly-region proposals, and the ONNX YOLO
adapter run by onnxruntime on a tiny ONNX graph built here that emits known boxes."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import Config, DetectionConfig
from cxrils.types import AnomalyResult, LesionBox
from cxrils.vision.detection import DetectorBackendError, get_detector, keep_lesion_classes
from cxrils.vocab import VINDR_CLASSES, VINDR_KEPT


def anomaly_with_blobs():
    h = w = 200
    x_ano = np.zeros((h, w), np.float32)
    x_ano[120:170, 20:80] = 0.45    # strong opacity, patient-right lung (image left)
    x_ano[40:80, 130:170] = 0.15    # faint opacity, left lung
    x_ano[100:104, 150:154] = 0.9   # speck: below the minimum area
    x_ano[10:60, 90:110] = 0.9      # between the lungs: not a lung region
    lungs = np.zeros((h, w), bool)
    lungs[10:190, 10:90] = lungs[10:190, 110:190] = True
    x = np.full((h, w), 80, np.uint8)
    return x, AnomalyResult(x_hat=x, x_ano=x_ano, edit_region=lungs, backend="hand")


def test_builtin_boxes_follow_anomaly_regions_inside_the_lungs():
    x, ano = anomaly_with_blobs()
    boxes = get_detector("builtin", Config()).detect(x, anomaly=ano)
    assert len(boxes) == 2
    strong, faint = boxes  # highest confidence first
    assert strong.confidence > faint.confidence > 0
    assert strong.class_name in VINDR_KEPT
    # boxes enclose their region (smoothing widens them by a few pixels)
    assert strong.x0 <= 20 and strong.x1 >= 80 and strong.y0 <= 120 and strong.y1 >= 170
    assert strong.x1 <= 90 and faint.x0 >= 110   # stays in its lung
    assert faint.y1 <= 100


def test_builtin_uses_the_anatomy_lungs_when_given():
    from cxrils.types import AnatomyMasks

    x, ano = anomaly_with_blobs()
    right = np.zeros(x.shape, bool)
    right[10:190, 10:90] = True  # only the patient-right lung: the left-lung blob is ignored
    masks = AnatomyMasks(masks={"right lung": right, "left lung": np.zeros_like(right)}, shape=x.shape,
                         backend="hand")
    boxes = get_detector("builtin", Config()).detect(x, anomaly=ano, anatomy=masks)
    assert len(boxes) == 1 and boxes[0].x1 <= 90


def test_builtin_needs_the_anomaly_map():
    x, ano = anomaly_with_blobs()
    with pytest.raises(ValueError, match="anomaly"):
        get_detector("builtin", Config()).detect(x)
    with pytest.raises(ValueError, match="shape"):
        get_detector("builtin", Config()).detect(x[:50], anomaly=ano)
    with pytest.raises(DetectorBackendError, match="unknown"):
        get_detector("yolo9000", Config())


def test_keep_lesion_classes_drops_non_hyperintense_classes():
    boxes = [LesionBox(0, 0, 1, 1, 0.5, c) for c in VINDR_CLASSES]
    kept = {b.class_name for b in keep_lesion_classes(boxes)}
    assert kept == set(VINDR_KEPT)
    assert not kept & {"Aortic enlargement", "Other lesion", "Pneumothorax"}


# --- ONNX YOLO with a tiny graph ---------------------------------------------------

onnx = pytest.importorskip("onnx", reason="detect extra (onnx) not installed")
pytest.importorskip("onnxruntime", reason="detect extra (onnxruntime) not installed")

S = 64  # letterbox size used in these tests
NC = len(VINDR_CLASSES)


def yolo_graph(path, rows: np.ndarray) -> None:
    """An ONNX model whose output is the constant ``rows`` (plus 0 x mean(input), so
    the input is consumed): a YOLO head that always emits the same candidates."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["rows", "z"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny_yolo",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, S, S])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(rows.shape))],
        initializer=[numpy_helper.from_array(rows.astype(np.float32), "rows"),
                     numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def to_canvas(box, h=100, w=50):
    """Image box (x0, y0, x1, y1) -> letterboxed (cx, cy, bw, bh) on the S x S canvas."""
    s = S / max(h, w)
    left, top = (S - round(w * s)) // 2, (S - round(h * s)) // 2
    x0, y0, x1, y1 = box[0] * s + left, box[1] * s + top, box[2] * s + left, box[3] * s + top
    return [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0]


def v5_row(box, obj, cls, score):
    scores = np.zeros(NC)
    scores[VINDR_CLASSES.index(cls)] = score
    return np.concatenate([to_canvas(box), [obj], scores])


def v5_rows():
    return np.stack([
        v5_row((10, 20, 30, 60), 0.9, "Consolidation", 0.8),     # 0.72: kept
        v5_row((11, 21, 31, 61), 0.9, "Consolidation", 0.5),     # same class, overlaps: NMS
        v5_row((10, 20, 30, 60), 0.9, "Nodule/Mass", 0.5),       # other class: kept (class-wise)
        v5_row((0, 0, 40, 40), 0.9, "Aortic enlargement", 0.9),  # dropped class
        v5_row((5, 70, 20, 90), 0.1, "Pleural effusion", 0.02),  # 0.002 < onnx_min_score
    ])[None]


def detector(tmp_path, rows):
    path = tmp_path / "yolo.onnx"
    yolo_graph(path, rows)
    cfg = Config()
    cfg.backends.onnx_detector = str(path)
    cfg.detection = DetectionConfig(onnx_input_size=S)
    return get_detector("onnx", cfg)


def test_onnx_yolo_v5_decoding_letterbox_and_classwise_nms(tmp_path):
    boxes = detector(tmp_path, v5_rows()).detect(np.zeros((100, 50), np.uint8))
    assert [b.class_name for b in boxes] == ["Consolidation", "Nodule/Mass"]
    assert boxes[0].confidence == pytest.approx(0.72, abs=1e-6)
    assert boxes[1].confidence == pytest.approx(0.45, abs=1e-6)
    assert [boxes[0].x0, boxes[0].y0, boxes[0].x1, boxes[0].y1] == pytest.approx([10, 20, 30, 60], abs=1e-4)


def test_onnx_yolo_v8_layout(tmp_path):
    v5 = v5_rows()[0]
    v8 = np.concatenate([v5[:, :4], v5[:, 5:] * v5[:, 4:5]], axis=1).T[None]  # (1, 4 + nc, N)
    boxes = detector(tmp_path, v8).detect(np.zeros((100, 50), np.uint8))
    assert [b.class_name for b in boxes] == ["Consolidation", "Nodule/Mass"]
    assert boxes[0].x1 == pytest.approx(30, abs=1e-4)


def test_onnx_errors(tmp_path):
    with pytest.raises(DetectorBackendError, match="backends.onnx_detector"):
        get_detector("onnx", Config())
    cfg = Config()
    cfg.backends.onnx_detector = str(tmp_path / "none.onnx")
    with pytest.raises(DetectorBackendError, match="not found"):
        get_detector("onnx", cfg)
    bad = detector(tmp_path, np.zeros((1, 7, 3)))
    with pytest.raises(ValueError, match="fits neither"):
        bad.detect(np.zeros((10, 10), np.uint8))
