"""Lesion boxes with confidences (paper section 3.1 step 2).

Backends: ``builtin`` (CPU, default, :mod:`.builtin`) and ``onnx`` (a VinDr-CXR YOLO
exported to ONNX, :mod:`.onnx_yolo`). Choose with ``cfg.backends.detector``. Only
hyperintense lesion classes (:data:`cxrils.vocab.VINDR_KEPT`) are returned.
"""

from cxrils.vision.detection.base import DetectorBackendError, LesionDetector, get_detector, keep_lesion_classes

__all__ = ["DetectorBackendError", "LesionDetector", "get_detector", "keep_lesion_classes"]
