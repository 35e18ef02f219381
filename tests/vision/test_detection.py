"""Lesion detectors: the learned builtin CenterNet (box validity, independence of the
anomaly map, against expert lesions), and the ONNX YOLO adapter run by onnxruntime on a
tiny ONNX graph built here that emits known boxes.

The tiny graphs follow ultralytics/yolov5 ``export.py`` (commit 2c666a8): input
``images`` (1, 3, S, S) or, with ``--dynamic``, ("batch", 3, "height", "width");
metadata ``stride`` and ``names`` written as ``str(model.names)`` (a dict).
"""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import Config, DetectionConfig
from cxrils.types import AnomalyResult, LesionBox
from cxrils.vision.detection import DetectorBackendError, get_detector, keep_lesion_classes
from cxrils.vocab import VINDR_CLASSES, VINDR_KEPT


def _random_detector(tmp_path, size=64):
    import torch

    from cxrils.training.lesion_train import save_weights
    from cxrils.vision.lesion_nets import CenterNetDetector

    torch.manual_seed(0)
    net = CenterNetDetector((4, 4, 8, 8, 8))
    with torch.no_grad():
        net.heatmap[-1].bias.fill_(0.0)  # peaks everywhere around 0.5: many candidate boxes
    path = save_weights(
        net,
        tmp_path / "det.safetensors",
        {"arch": {"widths": [4, 4, 8, 8, 8], "input_size": size, "n_classes": 1}, "classes": ["Lung Opacity"]},
    )
    return Config(detection=DetectionConfig(builtin_weights=str(path)))


def test_builtin_boxes_are_valid_and_ignore_the_anomaly_map_and_anatomy(tmp_path):
    from cxrils.types import AnatomyMasks

    cfg = _random_detector(tmp_path)
    det = get_detector("builtin", cfg)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (150, 210)).astype(np.uint8)
    boxes = det.detect(x)
    assert 0 < len(boxes) <= cfg.detection.builtin_max_boxes
    assert all(b.class_name == "Lung Opacity" and 0 <= b.x0 < b.x1 <= 210 and 0 <= b.y0 < b.y1 <= 150 for b in boxes)
    conf = [b.confidence for b in boxes]
    assert conf == sorted(conf, reverse=True) and min(conf) >= cfg.detection.builtin_min_score and max(conf) <= 1
    ano = AnomalyResult(x_hat=x, x_ano=np.ones(x.shape, np.float32), edit_region=np.ones(x.shape, bool), backend="hand")
    masks = AnatomyMasks(masks={"right lung": np.zeros(x.shape, bool)}, shape=x.shape, backend="hand")
    assert det.detect(x, anomaly=ano, anatomy=masks) == boxes  # independent of both
    with pytest.raises(ValueError, match="uint8"):
        det.detect(x.astype(np.float32))
    with pytest.raises(DetectorBackendError, match="unknown"):
        get_detector("yolo9000", Config())
    with pytest.raises(DetectorBackendError, match="not found"):
        get_detector("builtin", Config(detection=DetectionConfig(builtin_weights=str(tmp_path / "none"))))


@pytest.mark.parametrize(
    "meta, match",
    [
        ({"arch": {"widths": [4, 4, 8, 8, 8], "input_size": 64, "n_classes": 1}}, "lack their input size or class"),
        (
            {"arch": {"widths": [4, 4, 8, 8, 8], "input_size": 64, "n_classes": 1}, "classes": ["a", "b"]},
            "2 class names for a detector of 1 classes",
        ),
    ],
)
def test_builtin_weights_without_their_class_names_are_refused(tmp_path, meta, match):
    """The detector read ``meta["classes"]`` unchecked (a KeyError traceback), where the
    anomaly map checks its metadata (a standards review)."""
    import torch

    from cxrils.training.lesion_train import save_weights
    from cxrils.vision.lesion_nets import CenterNetDetector

    torch.manual_seed(0)
    path = save_weights(CenterNetDetector((4, 4, 8, 8, 8)), tmp_path / "det.safetensors", meta)
    with pytest.raises(DetectorBackendError, match=match):
        get_detector("builtin", Config(detection=DetectionConfig(builtin_weights=str(path))))


def test_shipped_detector_finds_expert_lesions_on_held_back_images(shared_data):
    """On held-back COVID-QU-Ex images (report part): the best box of most COVID-19
    images overlaps an expert lesion component (IoU >= 0.3), and normal images get
    lower top confidences than COVID-19 images."""
    from cxrils.training.lesion_data import covid_qu_ex_samples, lesion_boxes
    from cxrils.vision.detection.centernet import box_iou

    det = get_detector("builtin", Config())
    samples = covid_qu_ex_samples(shared_data, "report")
    covid = [s for s in samples if s.positive][:12]
    normal = [s for s in samples if not s.positive][:12]
    hits, top_covid, top_normal = 0, [], []
    for s in covid + normal:
        boxes = det.detect(s.image())
        top = boxes[0].confidence if boxes else 0.0
        if s.positive:
            right, left = s.lungs()
            truth = lesion_boxes(s.lesion(), 0.02, right | left)
            b = boxes[0] if boxes else None
            hits += b is not None and max(box_iou((b.x0, b.y0, b.x1, b.y1), t) for t in truth) >= 0.3
            top_covid.append(top)
        else:
            top_normal.append(top)
    assert hits >= 0.6 * len(covid)
    assert np.mean(top_covid) > np.mean(top_normal) + 0.1


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


def yolo_names(names=VINDR_CLASSES):
    """yolov5's metadata value: str() of the model's {id: name} dict."""
    return str(dict(enumerate(names)))


def yolo_graph(path, rows: np.ndarray, input_shape=(1, 3, S, S), meta=None) -> None:
    """An ONNX model whose output is the constant ``rows`` per image (plus 0 x the
    image mean, so the input is consumed): a YOLO head that always emits the same
    candidates. ``meta``: metadata_props as yolov5's export writes them."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], axes=[1, 2, 3], keepdims=1),  # (B, 1, 1, 1)
        helper.make_node("Reshape", ["m", "shape"], ["m2"]),  # (B, 1, 1)
        helper.make_node("Mul", ["m2", "zero"], ["z"]),
        helper.make_node("Add", ["rows", "z"], ["output0"]),  # broadcast to (B, N, K)
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_yolo",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["B", *rows.shape[1:]])],
        initializer=[
            numpy_helper.from_array(rows.astype(np.float32), "rows"),
            numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
            numpy_helper.from_array(np.array([-1, 1, 1], np.int64), "shape"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for k, v in (meta or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
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
    return np.stack(
        [
            v5_row((10, 20, 30, 60), 0.9, "Consolidation", 0.8),  # 0.72: kept
            v5_row((11, 21, 31, 61), 0.9, "Consolidation", 0.5),  # same class, overlaps: NMS
            v5_row((10, 20, 30, 60), 0.9, "Nodule/Mass", 0.5),  # other class: kept (class-wise)
            v5_row((0, 0, 40, 40), 0.9, "Aortic enlargement", 0.9),  # dropped class
            v5_row((5, 70, 20, 90), 0.1, "Pleural effusion", 0.02),  # 0.002 < onnx_min_score
        ]
    )[None]


def detector(tmp_path, rows, input_shape=(1, 3, S, S), meta=None, input_size=640):
    """The onnx backend on a tiny graph; the config's onnx_input_size (640 by default)
    must not matter when the model's input shape is fixed."""
    path = tmp_path / "yolo.onnx"
    yolo_graph(path, rows, input_shape, meta)
    cfg = Config()
    cfg.backends.onnx_detector = str(path)
    cfg.detection = DetectionConfig(onnx_input_size=input_size)
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


@pytest.mark.parametrize("layout", ["v5", "v8"])
def test_onnx_undoes_the_letterbox_as_each_layouts_scale_boxes(tmp_path, layout):
    """An image whose scaled width is not whole (100 x 45 at 64: g = 0.64, 28.8 px):
    yolov5 ``scale_boxes`` subtracts the fractional pad (64 - 28.8) / 2 = 17.6, current
    ultralytics ``round((64 - round(28.8)) / 2 - 0.1)`` = round(17.4) = 17; then divides by g."""
    g, pad = 0.64, {"v5": 17.6, "v8": 17.0}[layout]
    canvas_box = (30.0, 10.0, 40.0, 30.0)  # x0, y0, x1, y1 on the canvas
    row = np.zeros(5 + NC)
    row[:5] = [35.0, 20.0, 10.0, 20.0, 1.0]
    row[5 + VINDR_CLASSES.index("Consolidation")] = 0.8
    rows = row[None, None] if layout == "v5" else np.concatenate([row[:4], row[5:]])[None, :, None]
    (box,) = detector(tmp_path, rows).detect(np.zeros((100, 45), np.uint8))
    expected = [(canvas_box[0] - pad) / g, canvas_box[1] / g, (canvas_box[2] - pad) / g, canvas_box[3] / g]
    assert [box.x0, box.y0, box.x1, box.y1] == pytest.approx(expected, abs=1e-4)


def test_onnx_keeps_at_most_max_det_boxes_the_best(tmp_path):
    """yolov5 / ultralytics non_max_suppression: ``max_det=300`` boxes after NMS."""
    rows = []
    for k in range(400):  # 400 disjoint 1 x 1 canvas boxes, scores rising with k
        r, c = divmod(k, 25)
        row = np.zeros(5 + NC)
        row[:5] = [2 * c + 1.5, 2 * r + 1.5, 1.0, 1.0, 1.0]
        row[5 + VINDR_CLASSES.index("Consolidation")] = 0.1 + 0.8 * k / 400
        rows.append(row)
    boxes = detector(tmp_path, np.stack(rows)[None]).detect(np.zeros((64, 64), np.uint8))
    assert len(boxes) == 300
    assert min(b.confidence for b in boxes) == pytest.approx(0.1 + 0.8 * 100 / 400, abs=1e-6)
    cfg = Config()
    cfg.backends.onnx_detector = str(tmp_path / "yolo.onnx")
    cfg.detection = DetectionConfig(onnx_max_det=0)
    with pytest.raises(DetectorBackendError, match="onnx_max_det must be at least 1"):
        get_detector("onnx", cfg)


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


def test_onnx_input_size_and_names_come_from_the_model(tmp_path):
    meta = {"stride": "32", "names": yolo_names()}
    det = detector(tmp_path, v5_rows(), meta=meta)  # fixed (1, 3, 64, 64), config says 640
    assert det.input_size == (S, S) and not det.batched and det.names == list(VINDR_CLASSES)
    boxes = det.detect(np.zeros((100, 50), np.uint8))
    assert [boxes[0].x0, boxes[0].y0, boxes[0].x1, boxes[0].y1] == pytest.approx([10, 20, 30, 60], abs=1e-4)
    # a list literal and other spacing/case are accepted (yolov5 wrote lists in older versions)
    det = detector(tmp_path, v5_rows(), meta={"names": str([n.upper() for n in VINDR_CLASSES])})
    assert det.names[0] == "AORTIC ENLARGEMENT"


@pytest.mark.parametrize(
    ("names", "match"),
    [
        (["person", "bicycle"], "2 classes that are not the 14 VinDr-CXR classes"),
        ([*VINDR_CLASSES[:4], VINDR_CLASSES[5], VINDR_CLASSES[4], *VINDR_CLASSES[6:]], "4: 'ILD' != 'Consolidation'"),
        ([*VINDR_CLASSES, "No finding"], "15 classes"),
    ],
)
def test_onnx_refuses_a_model_of_other_classes(tmp_path, names, match):
    with pytest.raises(DetectorBackendError, match=match):
        detector(tmp_path, v5_rows(), meta={"names": yolo_names(names)})
    with pytest.raises(DetectorBackendError, match="not a dict or list literal"):
        detector(tmp_path, v5_rows(), meta={"names": "Aortic enlargement, Atelectasis"})


def test_onnx_dynamic_shape_uses_the_config_size_and_checks_the_stride(tmp_path):
    dynamic = ("batch", 3, "height", "width")
    det = detector(tmp_path, v5_rows(), input_shape=dynamic, meta={"stride": "32"}, input_size=S)
    assert det.input_size == (S, S) and det.batched and not det.stack  # CPU provider: one by one
    assert [b.class_name for b in det.detect(np.zeros((100, 50), np.uint8))] == ["Consolidation", "Nodule/Mass"]
    with pytest.raises(DetectorBackendError, match="onnx_input_size=70 is not a multiple of the model's stride 32"):
        detector(tmp_path, v5_rows(), input_shape=dynamic, meta={"stride": "32"}, input_size=70)
    with pytest.raises(DetectorBackendError, match="expected \\(B, 3, H, W\\)"):
        detector(tmp_path, v5_rows(), input_shape=(1, 1, S, S))


def test_onnx_rectangular_input_letterboxes_to_height_and_width(tmp_path):
    h_in, w_in = 96, 64  # yolov5 --imgsz 96 64
    s = min(h_in / 100, w_in / 50)
    left, top = (w_in - round(50 * s)) // 2, (h_in - round(100 * s)) // 2
    x0, y0, x1, y1 = 10 * s + left, 20 * s + top, 30 * s + left, 60 * s + top
    row = np.zeros(5 + NC)
    row[:5] = [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0, 0.9]
    row[5 + VINDR_CLASSES.index("Consolidation")] = 0.8
    det = detector(tmp_path, row[None, None], input_shape=(1, 3, h_in, w_in))
    assert det.input_size == (h_in, w_in)
    (box,) = det.detect(np.zeros((100, 50), np.uint8))
    assert [box.x0, box.y0, box.x1, box.y1] == pytest.approx([10, 20, 30, 60], abs=1e-4)


def test_onnx_batch_of_four_equals_four_singles(tmp_path):
    det = detector(tmp_path, v5_rows(), input_shape=("batch", 3, S, S))
    xs = [
        np.zeros((100, 50), np.uint8),
        np.full((80, 120), 30, np.uint8),
        np.zeros((64, 64), np.uint8),
        np.full((100, 50), 200, np.uint8),
    ]
    singles = [det.detect(x) for x in xs]
    det.stack = True  # the stacked path the CUDA provider takes, on CPU
    assert det.detect_batch(xs) == singles
    assert singles[0] != singles[1]  # sizes differ, so do the boxes
    with pytest.raises(ValueError, match="3 items given for 4 images"):
        det.detect_batch(xs, anomalies=[None] * 3)
