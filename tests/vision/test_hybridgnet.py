"""The hybridgnet adapter: CheXmask's preprocessing and its inverse, and the network
built from stand-in code folders laid out like each supported upstream layout.

HybridGNet's code (GPL-3.0, needs torch_geometric and torchvision) is not installed
here. The stand-ins restate only the interface the adapter relies on, as upstream
has it:

- ngaggion/CheXmask-Database ``HybridGNet/`` (commit abf1d4a): ``models/HybridGNet2IGSC.py``
  with ``Hybrid(config, downsample_matrices, upsample_matrices, adjacency_matrices)``
  (K = 6 and window (3, 3) fixed inside; absolute imports ``from models.modelUtils``),
  ``utils/utils.py`` with ``genMatrixesLungsHeart()`` and ``scipy_to_torch_sparse``;
- ngaggion/HybridGNet (commit 6e92b3b): ``models/HybridGNet_2_IGSC.py`` whose
  ``Hybrid`` reads ``config['K']`` and ``config['window']`` (relative imports
  ``from .chebConv``), ``utils/utils.py`` with ``genMatrixesLH()``.

Both ``forward`` return ``(landmarks, pos1, pos2)`` with landmarks in [0, 1] canvas
units, 120 points: right lung 44, left lung 50, heart 26.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from cxrils.config import Config
from cxrils.vision.anatomy import AnatomyBackendError, AnatomySegmenter, get_segmenter
from cxrils.vision.anatomy.hybridgnet import (
    CANVAS,
    HybridGNetSegmenter,
    landmarks_from_output,
    landmarks_to_masks,
    load_hybridgnet,
    to_canvas,
)
from cxrils.vocab import ANATOMY_LABELS

torch = pytest.importorskip("torch")

# --- CheXmask preprocessing, restated (DataPreparation/mimic.py, back_mimic.py) ------


def chexmask_back(points, shape, crop_box):
    """back_mimic.py: landmarks / 1024 * max(h2, w2) - pad + pad_rem, where (h2, w2) is
    the cropped size, pad the centring pad, pad_rem the removed border."""
    left_rem, top_rem, right_rem, bottom_rem = crop_box
    h2, w2 = shape[0] - top_rem - bottom_rem, shape[1] - left_rem - right_rem
    side = max(h2, w2)
    pad_left, pad_top = (side - w2) // 2, (side - h2) // 2
    pts = np.asarray(points, float) / 1024 * side
    return pts - [pad_left, pad_top] + [left_rem, top_rem]


def bordered_image(shape=(300, 220), border=(10, 25, 5, 15), spot=(150, 120), seed=0):
    """A non-square image: grey 60-200 inside a black border (left, top, right,
    bottom), one bright 3 x 3 spot centred at (x, y) = spot."""
    rng = np.random.default_rng(seed)
    x = np.zeros(shape, np.uint8)
    left, top, right, bottom = border
    x[top : shape[0] - bottom, left : shape[1] - right] = rng.integers(
        60, 140, (shape[0] - top - bottom, shape[1] - left - right)
    )
    sx, sy = spot
    x[sy - 1 : sy + 2, sx - 1 : sx + 2] = 255
    return x


def spot_on_canvas(canvas):
    """Intensity-weighted centroid (x, y) of the bright spot on the canvas."""
    w = np.clip(canvas - 0.75, 0, None)
    rows, cols = np.nonzero(w)
    return np.array([(cols * w[rows, cols]).sum(), (rows * w[rows, cols]).sum()]) / w[rows, cols].sum()


@pytest.mark.parametrize(
    ("shape", "border", "spot"),
    [
        ((300, 220), (10, 25, 5, 15), (150, 120)),  # tall: padded left/right, upscaled
        ((1400, 2100), (40, 0, 60, 90), (700, 900)),  # wide: padded top/bottom, downscaled
    ],
)
def test_round_trip_puts_a_known_landmark_back_within_one_pixel(shape, border, spot):
    x = bordered_image(shape, border, spot)
    canvas, tf = to_canvas(x)
    assert canvas.shape == (CANVAS, CANVAS) and canvas.dtype == np.float32 and canvas.max() <= 1.0
    left, top, right, bottom = border
    assert (tf.crop_left, tf.crop_top) == (left, top)
    assert (tf.crop_width, tf.crop_height) == (shape[1] - left - right, shape[0] - top - bottom)
    found = spot_on_canvas(canvas)
    back = tf.to_image(found)
    assert np.abs(back - spot).max() <= 1.0, (back, spot)
    assert np.allclose(back, chexmask_back(found, shape, border))  # the same formula as back_mimic.py
    assert np.allclose(tf.to_canvas(tf.to_image(found)), found)
    # the old adapter squashed: x scaled by W / 1024 and y by H / 1024 -- off by many pixels
    squashed = found * [shape[1] / CANVAS, shape[0] / CANVAS]
    assert np.abs(squashed - spot).max() > 5


def test_canvas_landmarks_are_rounded_as_upstream_saves_them():
    """inferenceWithHybridGNet.py: ``output.cpu().numpy().reshape(-1, 2) * 1024`` then
    ``output.round().astype('int')`` (the landmarks CheXmask publishes)."""
    out = torch.rand(1, 120, 2, generator=torch.Generator().manual_seed(0))
    upstream = (out.numpy().reshape(-1, 2) * 1024).round().astype("int")
    for given in (out, (out, None, None)):  # Hybrid.forward returns (x, pos1, pos2)
        got = landmarks_from_output(given, 1)[0]
        assert np.array_equal(got, upstream)
    assert np.abs(out.numpy().reshape(-1, 2) * 1024 - upstream).max() > 0.4  # rounding moved some points


def test_black_image_and_bad_input():
    canvas, tf = to_canvas(np.zeros((50, 80), np.uint8))
    assert not canvas.any() and (tf.crop_width, tf.crop_height, tf.side) == (80, 50, 80)
    with pytest.raises(ValueError, match="uint8 \\(H, W\\)"):
        to_canvas(np.zeros((4, 4), np.float32))


# --- stand-in upstream code folders -------------------------------------------------

STANDIN_UTILS = """
import numpy as np
import torch

def ring(n):
    a = np.zeros((n, n))
    for i in range(n):
        a[i, i - 1] = a[i, (i + 1) % n] = 1
    return a

def _matrices():
    sizes = [44, 50, 26]
    half = [int(np.ceil(s / 2)) for s in sizes]
    A, AD = np.zeros((120, 120)), np.zeros((60, 60))
    D, U = np.zeros((60, 120)), np.zeros((120, 60))
    p = q = 0
    for s, h in zip(sizes, half):
        A[p:p + s, p:p + s] = ring(s)
        AD[q:q + h, q:q + h] = ring(h)
        for i in range(s):
            D[q + i // 2, p + i] = 0.5
            U[p + i, q + i // 2] = 1
        p, q = p + s, q + h
    return A, AD, D, U

def {matrices}():
    return _matrices()

def scipy_to_torch_sparse(m):
    return torch.sparse_coo_tensor(np.vstack((m.row, m.col)), m.data.astype(np.float32), m.shape,
                                   check_invariants=False)
"""

STANDIN_MODEL = '''
import numpy as np
import torch
{helper_import}

class Hybrid(torch.nn.Module):
    """Stand-in: checks the constructor's arguments as the real class uses them and
    returns fixed ellipses (canvas units) shifted by `offset`, as (x, pos1, pos2)."""

    def __init__(self, config, downsample_matrices, upsample_matrices, adjacency_matrices):
        super().__init__()
        assert config["inputsize"] == 1024 and config["latents"] == 64
        assert config["filters"] == [2, 32, 32, 32, 16, 16, 16]
        assert config["n_nodes"] == [120, 120, 120, 60, 60, 60]
        {layout_checks}
        assert [tuple(a.shape) for a in adjacency_matrices] == [(120, 120)] * 3 + [(60, 60)] * 3
        assert tuple(downsample_matrices[0].shape) == (60, 120) and tuple(upsample_matrices[0].shape) == (120, 60)
        self.offset = torch.nn.Parameter(torch.zeros(2))
        self.seen = []
        # upstream keeps its graph matrices in plain lists, as here
        self.downsample_matrices, self.upsample_matrices = downsample_matrices, upsample_matrices
        self.adjacency_matrices = adjacency_matrices

    def forward(self, x):
        self.seen.append(tuple(x.shape))
        t = np.linspace(0, 2 * np.pi, 200, endpoint=False)
        def ring(cx, cy, rx, ry, n):
            return np.stack([cx + rx * np.cos(t[:: 200 // n][:n]), cy + ry * np.sin(t[:: 200 // n][:n])], 1)
        pts = np.concatenate([ring(300, 480, 150, 300, 44), ring(724, 480, 150, 300, 50),
                              ring(560, 700, 140, 100, 26)]) / 1024
        out = torch.as_tensor(pts, dtype=torch.float32)[None].repeat(x.shape[0], 1, 1) + self.offset
        out = out + 0 * x.mean()
        return out, None, None
'''


def standin(tmp_path, layout):
    root = tmp_path / layout
    (root / "models").mkdir(parents=True)
    (root / "utils").mkdir()
    if layout == "chexmask":
        model_file, matrices = "HybridGNet2IGSC.py", "genMatrixesLungsHeart"
        helper, checks = "from models.modelUtils import helper", 'assert "K" not in config'
        (root / "models" / "modelUtils.py").write_text("helper = 1\n")
    else:
        model_file, matrices = "HybridGNet_2_IGSC.py", "genMatrixesLH"
        helper = "from .chebConv import helper"
        checks = 'assert config["K"] == 6 and tuple(config["window"]) == (3, 3)'
        (root / "models" / "chebConv.py").write_text("helper = 1\n")
    (root / "models" / model_file).write_text(
        textwrap.dedent(STANDIN_MODEL).replace("{helper_import}", helper).replace("{layout_checks}", checks)
    )
    (root / "utils" / "utils.py").write_text(STANDIN_UTILS.replace("{matrices}", matrices))
    weights = tmp_path / f"{layout}.pt"
    torch.save({"offset": torch.tensor([0.0, 0.0])}, weights)
    return root, weights


@pytest.mark.parametrize("layout", ["chexmask", "hybridgnet"])
def test_network_builds_from_each_upstream_layout(tmp_path, layout):
    root, weights = standin(tmp_path, layout)
    sys.modules["models"] = sys.modules.get("models")  # a name another library might hold
    before_path = list(sys.path)
    try:
        net, found = load_hybridgnet(root, weights)
        assert found.module.endswith("HybridGNet2IGSC" if layout == "chexmask" else "HybridGNet_2_IGSC")
        assert sys.path == before_path
        assert sys.modules.get("models") is None and "utils.utils" not in sys.modules  # nothing leaked
    finally:
        sys.modules.pop("models", None)
    cfg = Config()
    cfg.backends.hybridgnet_dir, cfg.backends.hybridgnet_weights = str(root), str(weights)
    seg = get_segmenter("hybridgnet", cfg)
    assert isinstance(seg, AnatomySegmenter) and seg.version == f"hybridgnet-r2:{found.module}:{weights.name}"
    x = bordered_image((600, 400), (0, 0, 0, 0))
    m = seg.segment(x)
    assert set(m.masks) == set(ANATOMY_LABELS) and m.shape == (600, 400)
    # the right lung ring, centred at canvas (300, 480), lands where back_mimic.py puts it
    rows, cols = np.nonzero(m["right lung"])
    centre = chexmask_back([300, 480], (600, 400), (0, 0, 0, 0))
    assert abs(cols.mean() - centre[0]) < 2 and abs(rows.mean() - centre[1]) < 2
    assert cols.mean() < np.nonzero(m["left lung"])[1].mean()  # patient right = image left


def test_generic_module_names_elsewhere_do_not_shadow_upstream(tmp_path, monkeypatch):
    """Upstream's models/ and utils/ have no __init__.py; a regular models.py or utils.py
    on sys.path (a benchmarks folder has one) would win over such namespace packages."""
    shadow = tmp_path / "elsewhere"
    shadow.mkdir()
    (shadow / "models.py").write_text("SHADOW = True\n")
    (shadow / "utils.py").write_text("SHADOW = True\n")
    monkeypatch.syspath_prepend(str(shadow))
    root, weights = standin(tmp_path, "chexmask")
    net, layout = load_hybridgnet(root, weights)
    assert layout.matrices == "genMatrixesLungsHeart" and "models" not in sys.modules


def test_chexmask_clone_root_and_errors(tmp_path):
    root, weights = standin(tmp_path / "CheXmask-Database", "chexmask")
    net, layout = load_hybridgnet(root.parent.parent / "CheXmask-Database" / "chexmask", weights)
    (tmp_path / "clone").mkdir()
    root.rename(tmp_path / "clone" / "HybridGNet")
    net, layout = load_hybridgnet(tmp_path / "clone", weights)  # the repository root works too
    assert layout.matrices == "genMatrixesLungsHeart"
    with pytest.raises(AnatomyBackendError, match="HybridGNet2IGSC.py.*CheXmask.*HybridGNet_2_IGSC.py"):
        load_hybridgnet(tmp_path, weights)
    bad = tmp_path / "bad.pt"
    torch.save({"nothing": torch.zeros(1)}, bad)
    with pytest.raises(AnatomyBackendError, match="bad.pt: cannot load HybridGNet weights"):
        load_hybridgnet(tmp_path / "clone", bad)
    broken = tmp_path / "clone" / "HybridGNet" / "utils" / "utils.py"
    broken.write_text("import torch_geometric_missing\n")
    with pytest.raises(AnatomyBackendError, match="cannot import HybridGNet.*torch_geometric"):
        load_hybridgnet(tmp_path / "clone", weights)


def test_from_config_errors(tmp_path):
    cfg = Config()
    with pytest.raises(AnatomyBackendError, match="hybridgnet_dir"):
        get_segmenter("hybridgnet", cfg)
    cfg.backends.hybridgnet_dir = str(tmp_path)
    cfg.backends.hybridgnet_weights = str(tmp_path / "weights.pt")
    with pytest.raises(AnatomyBackendError, match="weights.pt"):
        get_segmenter("hybridgnet", cfg)
    (tmp_path / "weights.pt").write_bytes(b"x")
    with pytest.raises(AnatomyBackendError, match="not a HybridGNet code folder"):
        get_segmenter("hybridgnet", cfg)


def test_batch_of_four_equals_four_singles_bit_for_bit(tmp_path):
    root, weights = standin(tmp_path, "hybridgnet")
    net, _ = load_hybridgnet(root, weights)
    seg = HybridGNetSegmenter(net, device="cpu")
    xs = [
        bordered_image(s, b, p, seed=k)
        for k, (s, b, p) in enumerate(
            [
                ((300, 220), (10, 25, 5, 15), (150, 120)),
                ((200, 260), (0, 0, 0, 0), (100, 100)),
                ((260, 260), (5, 5, 5, 5), (60, 70)),
                ((300, 220), (0, 30, 0, 0), (100, 200)),
            ]
        )
    ]
    batch = seg.segment_batch(xs)
    singles = [seg.segment(x) for x in xs]
    assert all(tuple(s) == (1, 1, 1024, 1024) for s in net.seen)  # one canvas per forward on CPU
    for b, s in zip(batch, singles):
        assert all(np.array_equal(b[k], s[k]) for k in ANATOMY_LABELS)


def test_graph_matrices_in_plain_lists_move_with_the_network(tmp_path):
    """Module.to leaves tensors held in lists behind (a device mismatch on a GPU); the
    segmenter registers them as buffers, so they follow every .to."""
    root, weights = standin(tmp_path, "chexmask")
    net, _ = load_hybridgnet(root, weights)
    lists = ("downsample_matrices", "upsample_matrices", "adjacency_matrices")
    assert sum(len(getattr(net, n)) for n in lists) == 8
    HybridGNetSegmenter(net, device="meta")
    assert all(t.device.type == "meta" for n in lists for t in getattr(net, n))
    assert net.offset.device.type == "meta" and list(net.state_dict()) == ["offset"]


def test_landmarks_to_masks_fills_on_the_image_grid_and_rejects_bad_input():
    def ring(cx, cy, n):
        t = np.linspace(0, 2 * np.pi, n, endpoint=False)
        return np.stack([cx + 20 * np.cos(t), cy + 30 * np.sin(t)], 1)

    pts = np.concatenate([ring(50, 60, 44), ring(170, 60, 50), ring(110, 110, 26)])
    m = landmarks_to_masks(pts, (150, 220))
    assert m["right lung"].shape == (150, 220) and m["right lung"][60, 50] and not m["right lung"][60, 170]
    assert m["left lung"][60, 170] and m["heart"][110, 110]
    assert m["right lung"].sum() == pytest.approx(np.pi * 20 * 30, rel=0.05)
    with pytest.raises(ValueError, match="120, 2"):
        landmarks_to_masks(np.zeros((100, 2)), (10, 10))
    pts[3, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        landmarks_to_masks(pts, (10, 10))
