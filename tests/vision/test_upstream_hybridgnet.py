"""The hybridgnet adapter on HybridGNet as upstream builds it, with torch_geometric's
real graph layers (the ``upstream`` extra).

HybridGNet's own module is not installable, so the CheXmask-Database layout is
restated here as a code folder (ngaggion/CheXmask-Database ``HybridGNet/`` at commit
abf1d4a), in its own words but with upstream's structure and numbers:

- ``models/modelUtils.py``: ``ChebConv`` = torch_geometric's ``ChebConv`` re-initialised
  from N(0, 0.1); ``Pool`` = a ``MessagePassing`` that multiplies node features by a
  sparse pooling matrix; ``residualBlock`` with ``BatchNorm2d(track_running_stats=False)``
  (batch statistics in eval mode too);
- ``models/HybridGNet2IGSC.py``: ``EncoderConv`` (six residual blocks, 4 x [2, 4, 8, 16,
  32] channels, five max-pools, ``fc_mu`` / ``fc_logvar``), ``SkipBlock`` (a ChebConv to
  2-D positions, then image features sampled there by ``torchvision.ops.roi_align`` with
  a 3 x 3 window, output 1 x 1, ``aligned=True``: restated below, torchvision is not
  installed) and ``Hybrid``, which keeps its graph matrices in plain lists and indexes
  them in ``forward`` (``self.adjacency_matrices[5]._indices()``,
  ``self.pool(x, self.upsample_matrices[0])``);
- ``utils/utils.py``: ``genMatrixesLungsHeart`` (ring adjacency per organ, 44 / 50 / 26
  nodes, pairwise-mean downsampling, interpolating upsampling) and
  ``scipy_to_torch_sparse``.

Randomly initialised and saved as a state dict, it goes through the adapter's own
path: ``load_hybridgnet`` (layout detection, import, matrices, ``Hybrid(...)``, weights)
and ``HybridGNetSegmenter``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from upstream_code import require

torch = pytest.importorskip("torch")

MODEL_UTILS = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.cheb_conv import ChebConv as _ChebConv
from torch_geometric.nn.inits import normal


class ChebConv(_ChebConv):
    def reset_parameters(self):
        for lin in self.lins:
            normal(lin, mean=0, std=0.1)
        normal(self.bias, mean=0, std=0.1)


class Pool(MessagePassing):
    def __init__(self):
        super().__init__(flow="source_to_target")

    def forward(self, x, pool_mat, dtype=None):
        pool_mat = pool_mat.transpose(0, 1)
        return self.propagate(edge_index=pool_mat._indices(), x=x, norm=pool_mat._values(), size=pool_mat.size())

    def message(self, x_j, norm):
        return norm.view(1, -1, 1) * x_j


class residualBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        if stride != 1 or in_channels != out_channels:
            self.skip = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(out_channels, track_running_stats=False))
        else:
            self.skip = None
        self.block = nn.Sequential(nn.BatchNorm2d(in_channels, track_running_stats=False), nn.ReLU(inplace=True),
                                   nn.Conv2d(in_channels, out_channels, 3, padding=1),
                                   nn.BatchNorm2d(out_channels, track_running_stats=False), nn.ReLU(inplace=True),
                                   nn.Conv2d(out_channels, out_channels, 3, padding=1))

    def forward(self, x):
        out = self.block(x)
        out += x if self.skip is None else self.skip(x)
        return F.relu(out)
"""

HYBRID = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from models.modelUtils import ChebConv, Pool, residualBlock


def roi_align_window(layer, pos, window):
    """torchvision.ops.roi_align(layer, boxes, output_size=(1, 1), aligned=True) for the
    boxes SkipBlock.lookup builds ([x - w//2, y - w//2, x + w//2 + 1, y + w//2 + 1] in
    feature pixels): the box shifted by -0.5, ceil(box side) bilinear samples per axis
    at bin centres, averaged; a sample beyond [-1, side] counts 0, coordinates below 0
    are clamped to 0, the last row / column is repeated (torchvision's
    bilinear_interpolate)."""
    B, N, _ = pos.shape
    F_, h, w = layer.shape[1:]

    def axis(centre, half_lo, size, n_samples):
        start = centre - half_lo - 0.5
        k = torch.arange(n_samples, dtype=centre.dtype, device=centre.device)
        coord = start[..., None] + k + 0.5                      # (B, N, S)
        valid = (coord >= -1.0) & (coord <= size)
        coord = coord.clamp(min=0)
        low = coord.floor().long()
        last = low >= size - 1
        low = torch.where(last, torch.full_like(low, size - 1), low)
        high = torch.where(last, low, low + 1)
        coord = torch.where(last, low.to(coord.dtype), coord)
        frac = coord - low
        return low, high, frac, valid

    nx, ny = window[0] // 2 * 2 + 1, window[1] // 2 * 2 + 1  # box side x2 - x1 = 2 (w // 2) + 1
    xl, xh, fx, vx = axis(pos[..., 0], window[0] // 2, w, nx)
    yl, yh, fy, vy = axis(pos[..., 1], window[1] // 2, h, ny)
    out = []
    for b in range(B):
        f = layer[b].reshape(F_, -1)
        def at(yy, xx):
            return f[:, (yy[b][:, :, None] * w + xx[b][:, None, :]).reshape(-1)].reshape(F_, N, ny, nx)
        wy, wx = fy[b][:, :, None], fx[b][:, None, :]
        val = ((1 - wy) * (1 - wx) * at(yl, xl) + (1 - wy) * wx * at(yl, xh)
               + wy * (1 - wx) * at(yh, xl) + wy * wx * at(yh, xh))
        val = val * (vy[b][:, :, None] & vx[b][:, None, :])
        out.append(val.mean(dim=(2, 3)).T)  # (N, F)
    return torch.stack(out)


class EncoderConv(nn.Module):
    def __init__(self, latents=64, hw=32):
        super().__init__()
        self.latents = latents
        self.c = 4
        self.size = self.c * np.array([2, 4, 8, 16, 32], dtype=np.intc)
        self.maxpool = nn.MaxPool2d(2)
        self.dconv_down1 = residualBlock(1, self.size[0])
        self.dconv_down2 = residualBlock(self.size[0], self.size[1])
        self.dconv_down3 = residualBlock(self.size[1], self.size[2])
        self.dconv_down4 = residualBlock(self.size[2], self.size[3])
        self.dconv_down5 = residualBlock(self.size[3], self.size[4])
        self.dconv_down6 = residualBlock(self.size[4], self.size[4])
        self.fc_mu = nn.Linear(self.size[4] * hw * hw, self.latents)
        self.fc_logvar = nn.Linear(self.size[4] * hw * hw, self.latents)

    def forward(self, x):
        x = self.maxpool(self.dconv_down1(x))
        x = self.maxpool(self.dconv_down2(x))
        x = self.maxpool(self.dconv_down3(x))
        x = self.maxpool(self.dconv_down4(x))
        conv5 = self.dconv_down5(x)
        conv6 = self.dconv_down6(self.maxpool(conv5))
        flat = conv6.view(conv6.size(0), -1)
        return self.fc_mu(flat), self.fc_logvar(flat), conv6, conv5


class SkipBlock(nn.Module):
    def __init__(self, in_filters, window):
        super().__init__()
        self.window = window
        self.graphConv_pre = ChebConv(in_filters, 2, 1, bias=False)

    def forward(self, x, adj, conv_layer):
        pos = self.graphConv_pre(x, adj)
        skip = roi_align_window(conv_layer, pos * conv_layer.shape[-1], self.window)
        return torch.cat((x, skip, pos), axis=2), pos


class Hybrid(nn.Module):
    def __init__(self, config, downsample_matrices, upsample_matrices, adjacency_matrices):
        super().__init__()
        self.config = config
        hw = config["inputsize"] // 32
        self.z = config["latents"]
        self.encoder = EncoderConv(latents=self.z, hw=hw)
        self.downsample_matrices = downsample_matrices
        self.upsample_matrices = upsample_matrices
        self.adjacency_matrices = adjacency_matrices
        n_nodes = config["n_nodes"]
        self.filters = config["filters"]
        self.K = 6
        self.window = (3, 3)
        self.dec_lin = nn.Linear(self.z, self.filters[-1] * n_nodes[-1])
        self.normalization2u = nn.InstanceNorm1d(self.filters[1])
        self.normalization3u = nn.InstanceNorm1d(self.filters[2])
        self.normalization4u = nn.InstanceNorm1d(self.filters[3])
        self.normalization5u = nn.InstanceNorm1d(self.filters[4])
        self.normalization6u = nn.InstanceNorm1d(self.filters[5])
        outsize = int(self.encoder.size[4])
        self.graphConv_up6 = ChebConv(self.filters[6], self.filters[5], self.K)
        self.graphConv_up5 = ChebConv(self.filters[5], self.filters[4], self.K)
        self.SC_1 = SkipBlock(self.filters[4], self.window)
        self.graphConv_up4 = ChebConv(self.filters[4] + outsize + 2, self.filters[3], self.K)
        self.graphConv_up3 = ChebConv(self.filters[3], self.filters[2], self.K)
        self.SC_2 = SkipBlock(self.filters[2], self.window)
        self.graphConv_up2 = ChebConv(self.filters[2] + outsize + 2, self.filters[1], self.K)
        self.graphConv_up1 = ChebConv(self.filters[1], self.filters[0], 1, bias=False)
        self.pool = Pool()
        torch.nn.init.normal_(self.dec_lin.weight, 0, 0.1)

    def forward(self, x):
        self.mu, self.log_var, conv6, conv5 = self.encoder(x)
        z = self.mu  # eval: no sampling
        x = F.relu(self.dec_lin(z)).reshape(z.shape[0], -1, self.filters[-1])
        x = F.relu(self.normalization6u(self.graphConv_up6(x, self.adjacency_matrices[5]._indices())))
        x = F.relu(self.normalization5u(self.graphConv_up5(x, self.adjacency_matrices[4]._indices())))
        x, pos1 = self.SC_1(x, self.adjacency_matrices[3]._indices(), conv6)
        x = F.relu(self.normalization4u(self.graphConv_up4(x, self.adjacency_matrices[3]._indices())))
        x = self.pool(x, self.upsample_matrices[0])
        x = F.relu(self.normalization3u(self.graphConv_up3(x, self.adjacency_matrices[2]._indices())))
        x, pos2 = self.SC_2(x, self.adjacency_matrices[1]._indices(), conv5)
        x = F.relu(self.normalization2u(self.graphConv_up2(x, self.adjacency_matrices[1]._indices())))
        x = self.graphConv_up1(x, self.adjacency_matrices[0]._indices())
        return x, pos1, pos2
'''

UTILS = """
import numpy as np
import torch


def scipy_to_torch_sparse(m):
    return torch.sparse_coo_tensor(np.vstack((m.row, m.col)), torch.tensor(m.data, dtype=torch.float32), m.shape)


def mOrgan(n):
    a = np.zeros([n, n])
    for i in range(n):
        a[i, i - 1] = a[i, (i + 1) % n] = 1
    return a


def mOrganD(n):
    n2 = int(np.ceil(n / 2))
    d = np.zeros([n2, n])
    for i in range(n2):
        if 2 * i + 1 == n:
            d[i, 2 * i] = 1
        else:
            d[i, 2 * i] = d[i, 2 * i + 1] = 1 / 2
    return d


def mOrganU(n):
    n2 = int(np.ceil(n / 2))
    u = np.zeros([n, n2])
    for i in range(n):
        if i % 2 == 0:
            u[i, i // 2] = 1
        else:
            u[i, i // 2] = u[i, (i // 2 + 1) % n2] = 1 / 2
    return u


def genMatrixesLungsHeart():
    sizes = [44, 50, 26]
    halves = [int(np.ceil(s / 2)) for s in sizes]
    A, AD = np.zeros([sum(sizes)] * 2), np.zeros([sum(halves)] * 2)
    D, U = np.zeros([sum(halves), sum(sizes)]), np.zeros([sum(sizes), sum(halves)])
    p = q = 0
    for s, h in zip(sizes, halves):
        A[p:p + s, p:p + s] = mOrgan(s)
        AD[q:q + h, q:q + h] = mOrgan(h)
        D[q:q + h, p:p + s] = mOrganD(s)
        U[p:p + s, q:q + h] = mOrganU(s)
        p, q = p + s, q + h
    return A, AD, D, U
"""


@pytest.fixture(scope="module")
def chexmask_folder(tmp_path_factory):
    """The restated CheXmask-Database ``HybridGNet/`` folder and a random state dict."""
    require("torch_geometric", "torch-geometric")
    root = tmp_path_factory.mktemp("chexmask") / "HybridGNet"
    (root / "models").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "models" / "modelUtils.py").write_text(textwrap.dedent(MODEL_UTILS))
    (root / "models" / "HybridGNet2IGSC.py").write_text(textwrap.dedent(HYBRID))
    (root / "utils" / "utils.py").write_text(textwrap.dedent(UTILS))
    import sys

    # upstream's top-level names ("models", "utils") may already name other modules
    # (e.g. benchmarks/models.py, put on sys.path by another test): set them aside. Upstream's
    # folders have no __init__.py, and a namespace package loses to a plain models.py anywhere
    # on sys.path, so the path entries holding such files are set aside too.
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] in ("models", "utils")}
    saved_path = list(sys.path)
    sys.path[:] = [str(root)] + [
        p for p in sys.path if not any((Path(p or ".") / f).exists() for f in ("models.py", "utils.py"))
    ]
    try:
        import scipy.sparse as sp
        from models.HybridGNet2IGSC import Hybrid
        from utils.utils import genMatrixesLungsHeart, scipy_to_torch_sparse

        A, AD, D, U = (sp.csc_matrix(m).tocoo() for m in genMatrixesLungsHeart())
        torch.manual_seed(0)
        config = {
            "n_nodes": [120] * 3 + [60] * 3,
            "latents": 64,
            "inputsize": 1024,
            "filters": [2, 32, 32, 32, 16, 16, 16],
            "skip_features": 32,
        }
        net = Hybrid(
            config,
            [scipy_to_torch_sparse(D)],
            [scipy_to_torch_sparse(U)],
            [scipy_to_torch_sparse(m) for m in [A] * 3 + [AD] * 3],
        )
        state = net.state_dict()
    finally:
        sys.path[:] = saved_path
        for k in [k for k in sys.modules if k.split(".")[0] in ("models", "utils")]:
            del sys.modules[k]
        sys.modules.update(saved)
    weights = root.parent / "bestMSE.pt"
    torch.save(state, weights)
    return root, weights


def film(seed, shape=(300, 260)):
    rng = np.random.default_rng(seed)
    x = rng.integers(40, 200, shape, dtype=np.uint8)
    x[: 10 + seed] = 0  # a black border, cropped by the preprocessing
    return x


def graph_tensors(net):
    return [
        t for name in ("downsample_matrices", "upsample_matrices", "adjacency_matrices") for t in getattr(net, name)
    ]


@pytest.mark.slow
def test_upstream_hybridgnet_graph_matrices_move_with_the_network(chexmask_folder):
    """Upstream keeps the matrices in lists; the adapter's network moves them with
    ``.to`` (the old adapter left them on the CPU: a device mismatch on a GPU)."""
    from cxrils.vision.anatomy.hybridgnet import HybridGNetSegmenter, load_hybridgnet

    root, weights = chexmask_folder
    net, layout = load_hybridgnet(root, weights)
    assert layout.module == "models.HybridGNet2IGSC" and len(graph_tensors(net)) == 8
    seg = HybridGNetSegmenter(net, device="meta")
    assert all(p.device.type == "meta" for p in seg.network.parameters())
    assert all(t.device.type == "meta" for t in graph_tensors(seg.network))
    net, _ = load_hybridgnet(root, weights)
    seg = HybridGNetSegmenter(net, device="cpu")
    seg.network.to(torch.float64)
    assert all(t.dtype == torch.float64 for t in graph_tensors(seg.network))
    assert "_graph_adjacency_matrices_0" not in seg.network.state_dict()  # weights file layout unchanged
    net.load_state_dict(torch.load(weights, weights_only=True))  # still loads the saved state dict
    with torch.no_grad():  # and runs in float64, every graph matrix converted with it
        assert net(torch.zeros(1, 1, 1024, 1024, dtype=torch.float64))[0].dtype == torch.float64


@pytest.mark.slow
def test_upstream_hybridgnet_batch_equals_singles(chexmask_folder, monkeypatch):
    """Upstream's encoder normalises with batch statistics, so a stacked batch changes
    every image's landmarks; the adapter runs one image per forward pass even where
    the device's rule would stack them (CUDA's, forced here), so a batch gives each
    image exactly its single-image landmarks. (Two images: each forward at 1024 x 1024
    takes about 2 s on a CPU.)"""
    from cxrils.vision.anatomy import hybridgnet
    from cxrils.vision.anatomy.hybridgnet import CANVAS, HybridGNetSegmenter, load_hybridgnet, to_canvas

    root, weights = chexmask_folder
    net, _ = load_hybridgnet(root, weights)
    seg = HybridGNetSegmenter(net, device="cpu")
    xs = [film(k) for k in range(2)]
    canvases = torch.from_numpy(np.stack([to_canvas(x)[0] for x in xs]))[:, None]
    with torch.no_grad():
        stacked = net(canvases)[0]
        alone = [net(c[None])[0] for c in canvases]
    assert (stacked - torch.cat(alone)).abs().max() * CANVAS > 1e-3  # a stacked batch is not its singles

    seen = []
    real = net.forward
    monkeypatch.setattr(net, "forward", lambda x: (out := real(x), seen.append(out[0]))[0])
    monkeypatch.setattr(hybridgnet, "stacked_groups", lambda n, device: [list(range(n))], raising=False)
    batch = seg.segment_batch(xs)
    assert [t.shape[0] for t in seen] == [1, 1]  # one canvas per forward pass
    assert all(torch.equal(got, want) for got, want in zip(seen, alone))  # = each image alone
    assert [b.shape for b in batch] == [x.shape for x in xs] and batch[0].backend == "hybridgnet"
