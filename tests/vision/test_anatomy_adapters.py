"""The cxas and hybridgnet adapters and the backend registry.

CXAS cannot be imported here (it needs torchvision, which cxrils does not install), so
its adapter runs with a tiny stand-in network with CXAS's output layout (one logit
channel per label of a CXAS-style label table, at 512 x 512). HybridGNet's code is GPL
and not installed: its landmark-to-mask path runs on landmarks made here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cxrils.config import Config
from cxrils.vision.anatomy import AnatomyBackendError, AnatomySegmenter, get_segmenter
from cxrils.vision.anatomy.cxas import CXAS_INPUT_SIZE, CxasSegmenter, label_channels
from cxrils.vision.anatomy.hybridgnet import CANVAS, HybridGNetSegmenter, landmarks_to_masks
from cxrils.vocab import ANATOMY_LABELS


def _label_table(seed=0):
    """A CXAS-style id -> label table: our labels among filler classes, shuffled."""
    names = list(ANATOMY_LABELS) + [f"other class {i}" for i in range(20)]
    order = np.random.default_rng(seed).permutation(len(names))
    return {str(i): names[j] for i, j in enumerate(order)}


class _StandIn(torch.nn.Module):
    """Logits (1, C, 512, 512): channel "right lung" positive in the canvas's left
    third, "left lung" in its right third, "heart" in a centre box; others negative.
    Records the input it saw."""

    def __init__(self, table):
        super().__init__()
        self.table = table
        self.seen = None

    def forward(self, x):
        self.seen = x
        s = CXAS_INPUT_SIZE
        out = torch.full((1, len(self.table), s, s), -8.0)
        ch = {name: int(i) for i, name in self.table.items()}
        out[:, ch["right lung"], :, : s // 3] = 8.0
        out[:, ch["left lung"], :, 2 * s // 3:] = 8.0
        out[:, ch["heart"], s // 2: 3 * s // 4, s // 3: 2 * s // 3] = 8.0
        return out


def test_cxas_adapter_maps_labels_and_resizes_back():
    table = _label_table()
    net = _StandIn(table)
    seg = CxasSegmenter(net, table, version="stand-in")
    assert isinstance(seg, AnatomySegmenter)
    x = np.random.default_rng(0).integers(0, 256, (300, 210), dtype=np.uint8)
    m = seg.segment(x)
    assert net.seen.shape == (1, 3, CXAS_INPUT_SIZE, CXAS_INPUT_SIZE)
    # ImageNet-normalised RGB from a grey image: channels differ only by mean/std
    assert torch.allclose(net.seen[0, 0] * 0.229 + 0.485, net.seen[0, 1] * 0.224 + 0.456, atol=1e-5)
    assert set(m.masks) == set(ANATOMY_LABELS) and m.shape == (300, 210) and m.backend == "cxas"
    right, left, heart = m["right lung"], m["left lung"], m["heart"]
    assert right.shape == (300, 210)
    # patient's right lung on the image's left third, at the input's own size
    assert np.flatnonzero(right.any(axis=0)).max() == pytest.approx(210 / 3, abs=1)
    assert np.flatnonzero(left.any(axis=0)).min() == pytest.approx(2 * 210 / 3, abs=1)
    assert np.flatnonzero(heart.any(axis=1)).min() == pytest.approx(150, abs=1)
    assert not m["right lung base"].any()  # negative logits -> empty


def test_cxas_label_table_missing_label():
    table = {str(i): f"class {i}" for i in range(10)}
    with pytest.raises(AnatomyBackendError, match="lacks"):
        label_channels(table)


def test_cxas_from_config_needs_local_weights(tmp_path):
    cfg = Config()
    with pytest.raises(AnatomyBackendError, match="backends.cxas_weights"):
        get_segmenter("cxas", cfg)
    cfg.backends.cxas_weights = str(tmp_path / "absent.pth")
    with pytest.raises(AnatomyBackendError, match="absent.pth.*UNet_ResNet50_default"):
        get_segmenter("cxas", cfg)


def _ring(cx, cy, rx, ry, n):
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([cx + rx * np.cos(t), cy + ry * np.sin(t)], axis=1)


def _landmarks():
    """Right lung (image left), left lung (image right), heart: ellipses on the canvas."""
    return np.concatenate([_ring(300, 480, 150, 300, 44), _ring(724, 480, 150, 300, 50),
                           _ring(560, 700, 140, 100, 26)])


def test_landmarks_to_masks_scales_x_and_y_separately():
    shape = (600, 300)  # H, W: y scale 600/1024, x scale 300/1024
    m = landmarks_to_masks(_landmarks(), shape)
    assert set(m) == {"right lung", "left lung", "heart"}
    rows, cols = np.nonzero(m["right lung"])
    assert cols.min() == pytest.approx(150 * 300 / 1024, abs=1.5)
    assert cols.max() == pytest.approx(450 * 300 / 1024, abs=1.5)
    assert rows.min() == pytest.approx(180 * 600 / 1024, abs=1.5)
    assert rows.max() == pytest.approx(780 * 600 / 1024, abs=1.5)
    # filled polygon: area close to the scaled ellipse's
    expected = np.pi * (150 * 300 / 1024) * (300 * 600 / 1024)
    assert m["right lung"].sum() == pytest.approx(expected, rel=0.05)
    assert np.nonzero(m["left lung"])[1].mean() > np.nonzero(m["right lung"])[1].mean()


def test_landmarks_to_masks_rejects_bad_input():
    with pytest.raises(ValueError, match="120, 2"):
        landmarks_to_masks(np.zeros((100, 2)), (10, 10))
    bad = _landmarks()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        landmarks_to_masks(bad, (10, 10))


def test_hybridgnet_segmenter_with_made_landmarks():
    seen = {}

    def predictor(canvas):
        seen["shape"], seen["dtype"], seen["max"] = canvas.shape, canvas.dtype, canvas.max()
        return _landmarks()

    seg = HybridGNetSegmenter(predictor, version="made")
    assert isinstance(seg, AnatomySegmenter)
    x = np.full((512, 400), 200, dtype=np.uint8)
    m = seg.segment(x)
    assert seen["shape"] == (CANVAS, CANVAS) and seen["dtype"] == np.float32 and seen["max"] <= 1.0
    assert set(m.masks) == set(ANATOMY_LABELS) and m.shape == (512, 400) and m.backend == "hybridgnet"
    assert (m["right lung base"] <= m["right lung"]).all()


def test_hybridgnet_from_config_errors(tmp_path):
    cfg = Config()
    with pytest.raises(AnatomyBackendError, match="hybridgnet_dir"):
        get_segmenter("hybridgnet", cfg)
    cfg.backends.hybridgnet_dir = str(tmp_path)
    cfg.backends.hybridgnet_weights = str(tmp_path / "weights.pt")
    with pytest.raises(AnatomyBackendError, match="weights.pt"):
        get_segmenter("hybridgnet", cfg)
    (tmp_path / "weights.pt").write_bytes(b"x")
    with pytest.raises(AnatomyBackendError, match="cannot import HybridGNet"):
        get_segmenter("hybridgnet", cfg)


def test_unknown_backend():
    with pytest.raises(AnatomyBackendError, match="unknown anatomy backend 'nope'"):
        get_segmenter("nope", Config())


@pytest.mark.parametrize("bad", [np.zeros((4, 4), dtype=np.float32), np.zeros((4, 4, 3), dtype=np.uint8),
                                 np.zeros((0, 4), dtype=np.uint8)])
def test_adapters_reject_bad_images(bad):
    seg = HybridGNetSegmenter(lambda c: _landmarks())
    with pytest.raises(ValueError, match="uint8 \\(H, W\\)"):
        seg.segment(bad)
