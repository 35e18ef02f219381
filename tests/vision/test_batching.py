"""The batch plumbing shared by the image stages: the protocols' default batch methods
(used for backends without one, such as a custom stage provider's), grouping per
device, and the precision context."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox
from cxrils.vision.anatomy.base import AnatomySegmenter
from cxrils.vision.anomaly.base import AnomalyMapper
from cxrils.vision.batching import call_batch, inference, stacked_groups
from cxrils.vision.detection.base import LesionDetector


class OnlySingles:
    """A backend with only the single-image methods, recording its calls."""

    def __init__(self):
        self.calls = []

    def segment(self, x):
        self.calls.append(("segment", x.shape))
        return AnatomyMasks(masks={"right lung": x > 0}, shape=x.shape, backend="t")

    def map(self, x, edit_region, *, lungs=None):
        self.calls.append(("map", lungs is None))
        return AnomalyResult(x_hat=x, x_ano=np.zeros(x.shape, np.float32), edit_region=edit_region, backend="t")

    def detect(self, x, *, anomaly=None, anatomy=None):
        self.calls.append(("detect", anomaly is None, anatomy is None))
        return [LesionBox(0, 0, 1, 1, 0.5, "Consolidation")]


def test_default_batch_methods_call_the_single_image_ones_in_order():
    b = OnlySingles()
    xs = [np.ones((2, 3), np.uint8), np.zeros((4, 1), np.uint8)]
    masks = call_batch(b, "segment_batch", AnatomySegmenter, xs)
    assert [m.shape for m in masks] == [(2, 3), (4, 1)]
    regions = [np.ones(x.shape, bool) for x in xs]
    assert len(call_batch(b, "map_batch", AnomalyMapper, xs, regions)) == 2
    call_batch(b, "map_batch", AnomalyMapper, xs, regions, lungs=regions)
    boxes = call_batch(b, "detect_batch", LesionDetector, xs, anomalies=[None, None])
    assert boxes == [[LesionBox(0, 0, 1, 1, 0.5, "Consolidation")]] * 2
    assert b.calls == [
        ("segment", (2, 3)),
        ("segment", (4, 1)),
        ("map", True),
        ("map", True),
        ("map", False),
        ("map", False),
        ("detect", True, True),
        ("detect", True, True),
    ]
    with pytest.raises(ValueError, match="1 items given for 2 images"):
        call_batch(b, "map_batch", AnomalyMapper, xs, regions[:1])
    with pytest.raises(ValueError, match="3 items given for 2 images"):
        call_batch(b, "detect_batch", LesionDetector, xs, anatomies=[None] * 3)


def test_a_backend_batch_method_is_preferred():
    class Batched(OnlySingles):
        def segment_batch(self, xs):
            self.calls.append(("batch", len(xs)))
            return [self.segment(x) for x in xs]

    b = Batched()
    call_batch(b, "segment_batch", AnatomySegmenter, [np.ones((2, 2), np.uint8)] * 3)
    assert b.calls[0] == ("batch", 3)


def test_groups_per_device_and_precision_context():
    assert stacked_groups(3, "cpu") == [[0], [1], [2]]
    assert stacked_groups(3, "cuda:0") == [[0, 1, 2]] and stacked_groups(0, "cuda") == []
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with inference("cpu", "bf16"):  # CPU always computes in fp32
        y = lin(x)
    assert y.dtype == torch.float32 and torch.equal(y, lin(x).detach())
    with pytest.raises(ValueError, match="precision must be one of"):
        with inference("cpu", "fp8"):
            pass
