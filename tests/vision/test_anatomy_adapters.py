"""The cxas adapter and the backend registry (HybridGNet: test_hybridgnet.py).

CXAS cannot be imported here (it needs torchvision, which cxrils does not install), so
its adapter runs with a tiny stand-in network with CXAS's output layout (one logit
channel per label of a CXAS-style label table, at 512 x 512), and its checkpoint
loader reads checkpoints saved the way a CXAS training script saves them: a dict with
the state dict under "model" (keys prefixed "module." by DataParallel), as cxas
0.0.20's ``models/__init__.py`` ``load_weights`` reads it, next to the run's other
state (epoch, optimiser, arguments, numpy scores).
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle

import numpy as np
import pytest
import torch

from cxrils.config import Config
from cxrils.vision.anatomy import AnatomyBackendError, AnatomySegmenter, get_segmenter
from cxrils.vision.anatomy.cxas import CXAS_INPUT_SIZE, CxasSegmenter, label_channels, load_checkpoint_state, load_into
from cxrils.vision.anatomy.hybridgnet import HybridGNetSegmenter
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
        out = torch.full((x.shape[0], len(self.table), s, s), -8.0) + 0 * x.mean()
        ch = {name: int(i) for i, name in self.table.items()}
        out[:, ch["right lung"], :, : s // 3] = 8.0
        out[:, ch["left lung"], :, 2 * s // 3 :] = 8.0
        out[:, ch["heart"], s // 2 : 3 * s // 4, s // 3 : 2 * s // 3] = 8.0
        return out


def test_cxas_adapter_maps_labels_and_resizes_back():
    table = _label_table()
    net = _StandIn(table)
    seg = CxasSegmenter(net, table, version="stand-in", device="cpu")
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


class _TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4, 2)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def _cxas_style_checkpoint(path, extra=None):
    net = _TinyNet()
    state = collections.OrderedDict((f"module.{k}", v) for k, v in net.state_dict().items())
    torch.save(
        {
            "model": state,
            "epoch": 41,
            "optimizer": {"state": {}, "param_groups": [{"lr": 1e-4}]},
            "args": argparse.Namespace(model="UNet_ResNet50_default", lr=1e-4),
            "best_dice": np.float64(0.91),
            "history": np.zeros(3, np.float32),
            **(extra or {}),
        },
        path,
    )
    return net


def test_cxas_checkpoint_saved_the_cxas_way_loads_safely(tmp_path):
    path = tmp_path / "UNet_ResNet50_default.pth"
    original = _cxas_style_checkpoint(path)
    with pytest.raises(pickle.UnpicklingError):  # plain weights_only=True refuses it ...
        torch.load(path, weights_only=True)
    state = load_checkpoint_state(path)  # ... the allow-list accepts its data-only types
    assert set(state) == set(original.state_dict())  # "module." stripped as cxas does
    fresh = _TinyNet()
    load_into(fresh, state, path)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), original.state_dict().values()))
    bare = tmp_path / "bare.pth"  # a plain state dict works too
    torch.save(original.state_dict(), bare)
    assert set(load_checkpoint_state(bare)) == set(original.state_dict())


def test_cxas_checkpoint_with_code_is_refused_without_running_it(tmp_path):
    path = tmp_path / "evil.pth"
    _cxas_style_checkpoint(path, {"hook": _Evil()})
    with pytest.raises(AnatomyBackendError, match=r"names code cxrils will not unpickle: \['(posix|nt).system'\]"):
        load_checkpoint_state(path)
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"<html>Google Drive quota exceeded</html>")
    with pytest.raises(AnatomyBackendError, match="junk.pth: cannot load CXAS weights"):
        load_checkpoint_state(junk)
    nostate = tmp_path / "nostate.pth"
    torch.save({"epoch": 3}, nostate)
    with pytest.raises(AnatomyBackendError, match="no 'model' state dict"):
        load_checkpoint_state(nostate)
    partial = tmp_path / "partial.pth"
    torch.save({"model": {"conv.weight": torch.zeros(4, 3, 3, 3)}}, partial)
    with pytest.raises(AnatomyBackendError, match="lack 3 tensors"):
        load_into(_TinyNet(), load_checkpoint_state(partial), partial)
    wrong = tmp_path / "wrong.pth"
    torch.save({"model": {**_TinyNet().state_dict(), "conv.weight": torch.zeros(1)}}, wrong)
    with pytest.raises(AnatomyBackendError, match="do not fit"):
        load_into(_TinyNet(), load_checkpoint_state(wrong), wrong)


def test_cxas_batch_of_four_equals_four_singles_bit_for_bit():
    table = _label_table()

    class Conv(torch.nn.Module):  # a real (random) convolution, so batching could matter
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = torch.nn.Conv2d(3, len(table), 3, padding=1)

        def forward(self, x):
            return self.conv(x)

    seg = CxasSegmenter(Conv(), table, device="cpu")
    rng = np.random.default_rng(1)
    xs = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(300, 210), (256, 256), (200, 320), (300, 210)]]
    batch = seg.segment_batch(xs)
    for b, x in zip(batch, xs):
        single = seg.segment(x)
        assert b.shape == x.shape and all(np.array_equal(b[k], single[k]) for k in ANATOMY_LABELS)
    assert any(batch[0][k].any() for k in ANATOMY_LABELS)  # not trivially empty


def test_unknown_backend():
    with pytest.raises(AnatomyBackendError, match="unknown anatomy backend 'nope'"):
        get_segmenter("nope", Config())


@pytest.mark.parametrize(
    "bad", [np.zeros((4, 4), dtype=np.float32), np.zeros((4, 4, 3), dtype=np.uint8), np.zeros((0, 4), dtype=np.uint8)]
)
def test_adapters_reject_bad_images(bad):
    table = _label_table()
    for seg in (
        HybridGNetSegmenter(torch.nn.Identity(), device="cpu"),
        CxasSegmenter(_StandIn(table), table, device="cpu"),
    ):
        with pytest.raises(ValueError, match="uint8 \\(H, W\\)"):
            seg.segment(bad)
