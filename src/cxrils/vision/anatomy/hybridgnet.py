"""The ``hybridgnet`` anatomy backend: HybridGNet landmarks -> masks.

HybridGNet (Gaggion et al. 2022, 2024; the paper's source of lung and heart masks,
section 3.1 step 2, trained on CheXmask) predicts 120 contour landmarks on a
1024 x 1024 canvas: the patient's right lung (44 points), left lung (50), heart (26),
in that order. Zones and lobes come from the geometric rule of
:mod:`cxrils.vision.anatomy.regions`.

Preprocessing is CheXmask's (``DataPreparation/mimic.py`` of ngaggion/CheXmask-Database):
the black border (pixels <= 1) is cropped to the bounding box of the rest, the crop
is zero-padded to a centred square (``pad = (side - size) // 2`` before), resized to
1024 x 1024 (OpenCV's default bilinear) and scaled to [0, 1]. Landmarks go back
through the inverse of exactly that (``DataPostprocessing/ReversePreprocessing/
back_mimic.py``): ``p / 1024 * side - pad + crop``, so non-square images are never
squashed (:class:`CanvasTransform`).

Three properties of upstream's ``Hybrid`` shape how the adapter runs it (docs/adapters.md):

* its graph matrices (sparse adjacency, up- and downsampling) are held in plain Python
  lists, which ``Module.to`` does not move; CheXmask's ``inferenceWithHybridGNet.py``
  builds them on the GPU before the network. The adapter registers them as
  non-persistent buffers of the module that holds them (:func:`register_graph_buffers`),
  so ``.to(device)``, ``.cuda()`` and dtype conversions move them with the weights;
* with torch_geometric >= 2.5, whose ``MessagePassing`` generates each class's
  ``propagate`` from the class's source, upstream's ``class ChebConv(ChebConv)``
  (``models/modelUtils.py``: a subclass with its parent's name) gets a ``propagate``
  without ``x`` and ``norm`` (torch_geometric's ``Inspector.get_source`` caches sources
  by class name, so the parent's ``propagate_type`` is never read), a ``TypeError`` at
  the first forward pass; the adapter gives such classes back torch_geometric's generic
  ``propagate`` (:func:`repair_generated_propagate`). The network is also built while
  upstream's modules are importable, which that inspection needs;
* its encoder's ``BatchNorm2d(track_running_stats=False)`` (``models/modelUtils.py``
  ``residualBlock``) normalises with the statistics of the batch in eval mode too, so an
  image's landmarks depend on the other images of its forward pass. Upstream's inference
  feeds one image per pass, and so does the adapter, on every device.

HybridGNet's code is GPL-3.0 and needs torch_geometric and torchvision, so cxrils
does not vendor it: the network is imported from the user's own copy
(``backends.hybridgnet_dir``) with the weights ``backends.hybridgnet_weights`` (a
state dict). Two layouts are recognised (:data:`LAYOUTS`): CheXmask-Database's
``HybridGNet/`` folder (``models/HybridGNet2IGSC.py``, ``utils/utils.py`` with
``genMatrixesLungsHeart``; the layout the HF Space ``ngaggion/Chest-x-ray-HybridGNet-
Segmentation`` is said to share, not checked here) and ngaggion/HybridGNet
(``models/HybridGNet_2_IGSC.py``, ``utils/utils.py`` with ``genMatrixesLH``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cxrils.config import AnatomyConfig, Config
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy.base import AnatomyBackendError, AnatomySegmenter, assemble, check_input
from cxrils.vision.batching import torch_device

#: Side of HybridGNet's square input canvas, pixels (CheXmask's 1024 x 1024).
CANVAS = 1024
#: Pixels at or below this grey level form the border CheXmask crops
#: (``remove_padding``: ``img > 1`` is kept).
BORDER_MAX = 1
#: Landmark counts per organ, in output order (HybridGNet's lungs + heart model).
LANDMARK_COUNTS: dict[str, int] = {"right lung": 44, "left lung": 50, "heart": 26}
#: This adapter's mask recipe, in :attr:`HybridGNetSegmenter.version` so that a resumed
#: run never mixes masks of two recipes (r2: landmarks rounded on the canvas first).
RECIPE = "hybridgnet-r2"
N_LANDMARKS = sum(LANDMARK_COUNTS.values())


@dataclass(frozen=True)
class Layout:
    """One upstream code layout: where ``Hybrid`` and the graph matrices live and
    what its constructor's ``config`` needs beyond the common keys."""

    module: str  # module holding the class Hybrid(config, downsample, upsample, adjacency)
    matrices: str  # function of utils/utils.py returning (A, AD, D, U) for lungs + heart
    source: str
    extra_config: dict[str, Any] = field(default_factory=dict)

    @property
    def file(self) -> str:
        """The module's file, relative to the upstream folder."""
        return self.module.replace(".", "/") + ".py"


#: Recognised layouts of ``backends.hybridgnet_dir`` (module docstring).
LAYOUTS: dict[str, Layout] = {
    "chexmask": Layout(
        "models.HybridGNet2IGSC", "genMatrixesLungsHeart", "ngaggion/CheXmask-Database HybridGNet/ (and the HF Space)"
    ),
    # trainerHybrid.py's defaults --K 6 --w 3 (the CheXmask copy hard-codes them)
    "hybridgnet": Layout(
        "models.HybridGNet_2_IGSC", "genMatrixesLH", "ngaggion/HybridGNet", {"K": 6, "window": (3, 3)}
    ),
}
#: The constructor config both layouts share (CheXmask inferenceWithHybridGNet.py).
BASE_CONFIG: dict[str, Any] = {
    "latents": 64,
    "inputsize": CANVAS,
    "filters": [2, 32, 32, 32, 16, 16, 16],
    "skip_features": 32,
}


@dataclass(frozen=True)
class CanvasTransform:
    """How an image of shape (H, W) was placed on the 1024 x 1024 canvas.

    Attributes
    ----------
    crop_left, crop_top : int
        Border removed on the left and top, pixels of the image.
    crop_width, crop_height : int
        Size of the cropped image.
    pad_left, pad_top : int
        Zero padding before the crop inside its square, pixels.
    side : int
        Side of that square, ``max(crop_width, crop_height)``.
    """

    crop_left: int
    crop_top: int
    crop_width: int
    crop_height: int
    pad_left: int
    pad_top: int
    side: int

    def to_image(self, points: np.ndarray) -> np.ndarray:
        """Canvas (x, y) = (column, row) points -> image points, as back_mimic.py:
        ``p / 1024 * side - pad + crop``. Shape (..., 2), float64."""
        pts = np.asarray(points, dtype=np.float64) / CANVAS * self.side
        return pts - [self.pad_left, self.pad_top] + [self.crop_left, self.crop_top]

    def to_canvas(self, points: np.ndarray) -> np.ndarray:
        """Image (x, y) points -> canvas points (the inverse of :meth:`to_image`)."""
        pts = np.asarray(points, dtype=np.float64) - [self.crop_left, self.crop_top] + [self.pad_left, self.pad_top]
        return pts / self.side * CANVAS


def to_canvas(x: np.ndarray) -> tuple[np.ndarray, CanvasTransform]:
    """CheXmask's preprocessing of one image (module docstring).

    Parameters
    ----------
    x : numpy.ndarray, uint8, shape (H, W)

    Returns
    -------
    canvas : numpy.ndarray, float32, shape (1024, 1024)
        In [0, 1].
    transform : CanvasTransform
        What to invert to bring canvas points back to ``x``.

    Raises
    ------
    ValueError
        If ``x`` is not a non-empty uint8 (H, W) array.
    """
    check_input(x)
    rows, cols = np.nonzero(x > BORDER_MAX)
    if rows.size:
        top, left = int(rows.min()), int(cols.min())
        h, w = int(rows.max()) - top + 1, int(cols.max()) - left + 1
    else:  # an all-black image: nothing to crop (upstream's boundingRect would fail)
        top, left, (h, w) = 0, 0, x.shape
    side = max(h, w)
    pad_top, pad_left = (side - h) // 2, (side - w) // 2
    square = np.zeros((side, side), dtype=np.uint8)
    square[pad_top : pad_top + h, pad_left : pad_left + w] = x[top : top + h, left : left + w]
    canvas = cv2.resize(square, (CANVAS, CANVAS)).astype(np.float32) / 255.0
    return canvas, CanvasTransform(left, top, w, h, pad_left, pad_top, side)


def landmarks_to_masks(points: np.ndarray, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """Fill HybridGNet's contours on an image grid.

    Parameters
    ----------
    points : numpy.ndarray, float, shape (120, 2)
        (x, y) = (column, row) in pixels of that image: right lung 44, left lung 50,
        heart 26 points (patient sides: the right lung is on the image's left).
    shape : (int, int)
        (H, W) of the image.

    Returns
    -------
    dict
        ``"right lung"``, ``"left lung"``, ``"heart"``: bool (H, W) filled polygons
        of the rounded points (as back_mimic.py's ``drawContours``).

    Raises
    ------
    ValueError
        If ``points`` is not a finite (120, 2) array or ``shape`` is not positive.
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.shape != (N_LANDMARKS, 2) or not np.isfinite(pts).all():
        raise ValueError(f"HybridGNet landmarks must be a finite ({N_LANDMARKS}, 2) array, got {pts.shape}")
    h, w = int(shape[0]), int(shape[1])
    if h < 1 or w < 1:
        raise ValueError(f"image shape must be positive, got {shape}")
    out, start = {}, 0
    for label, n in LANDMARK_COUNTS.items():
        canvas = np.zeros((h, w), dtype=np.uint8)
        cv2.fillPoly(canvas, [np.round(pts[start : start + n]).astype(np.int32).reshape(-1, 1, 2)], 1)
        out[label] = canvas.astype(bool)
        start += n
    return out


def landmarks_from_output(output: Any, batch: int) -> np.ndarray:
    """Canvas landmarks (B, 120, 2) from HybridGNet's forward output: a tensor, or a
    tuple whose first item is the landmarks (``Hybrid.forward`` returns ``(x, pos1,
    pos2)``), in [0, 1] canvas units: times 1024 and rounded to whole canvas pixels, as
    CheXmask's ``HybridGNet/inferenceWithHybridGNet.py`` saves them (``output * 1024``,
    ``output.round().astype('int')``), before ``back_mimic.py`` maps them back (and
    rounds again: :func:`landmarks_to_masks`). Float64.

    Raises
    ------
    ValueError
        If the output does not hold ``batch`` x 120 points.
    """
    if isinstance(output, (tuple, list)):
        output = output[0]
    arr = output.detach().float().cpu().numpy()
    if arr.size != batch * N_LANDMARKS * 2:
        raise ValueError(f"HybridGNet output of shape {arr.shape} does not hold {batch} x {N_LANDMARKS} points")
    return np.round(arr.reshape(batch, N_LANDMARKS, 2).astype(np.float64) * CANVAS)


class BufferList(SequenceABC):
    """A read-only list view of buffers registered on a module: item ``k`` is the
    module's buffer ``names[k]``, read at access time, so it follows the module across
    ``.to()`` (the list upstream code indexes, e.g. ``self.adjacency_matrices[5]``)."""

    def __init__(self, module: Any, names: Sequence[str]) -> None:
        self._module = module
        self._names = tuple(names)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [getattr(self._module, n) for n in self._names[index]]
        return getattr(self._module, self._names[index])

    def __len__(self) -> int:
        return len(self._names)


def register_graph_buffers(network: Any) -> int:
    """Turn every list or tuple of tensors held as a plain attribute of ``network`` or
    of its submodules (upstream ``Hybrid``: ``downsample_matrices``, ``upsample_matrices``,
    ``adjacency_matrices``) into non-persistent buffers, read back through a
    :class:`BufferList` under the same attribute name.

    Afterwards ``network.to(device)`` / ``.to(dtype)`` move those tensors too, and the
    state dict is unchanged (non-persistent buffers are not saved).

    Returns
    -------
    int
        Number of tensors registered (0 if there were none, or on a second call).
    """
    import torch

    count = 0
    for module in network.modules():
        for attr, value in list(vars(module).items()):
            if attr.startswith("_") or not isinstance(value, (list, tuple)) or not value:
                continue
            if not all(isinstance(t, torch.Tensor) for t in value):
                continue
            names = [f"_graph_{attr}_{k}" for k in range(len(value))]
            for name, tensor in zip(names, value):
                module.register_buffer(name, tensor, persistent=False)
            object.__setattr__(module, attr, BufferList(module, names))
            count += len(value)
    return count


def repair_generated_propagate(network: Any) -> int:
    """Give torch_geometric's generic ``MessagePassing.propagate`` back to every message
    passing class in ``network`` whose generated ``propagate`` lacks an argument its
    ``message`` / ``aggregate`` / ``update`` read (module docstring: upstream's
    ``class ChebConv(ChebConv)`` under torch_geometric >= 2.5). The generic method takes
    the same keywords and computes the same messages; it is only not TorchScript-ready.

    Returns
    -------
    int
        Number of classes repaired (0 without torch_geometric or when none needed it).
    """
    import inspect

    try:
        from torch_geometric.nn import MessagePassing
    except ImportError:
        return 0
    repaired: set[type] = set()
    for module in network.modules():
        cls = type(module)
        if not isinstance(module, MessagePassing) or cls in repaired:
            continue
        params = inspect.signature(cls.propagate).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            continue  # already the generic one
        needed = {a[:-2] if a.endswith(("_i", "_j")) else a for a in getattr(module, "_user_args", [])}
        if not needed <= set(params):
            cls.propagate = MessagePassing.propagate
            repaired.add(cls)
    return len(repaired)


def find_layout(code_dir: Path) -> tuple[Path, Layout]:
    """The layout of a HybridGNet code folder (a CheXmask-Database clone's root is
    accepted for its ``HybridGNet/`` folder).

    Raises
    ------
    AnatomyBackendError
        If the folder holds neither layout; the message names both.
    """
    for folder in (code_dir, code_dir / "HybridGNet"):
        for layout in LAYOUTS.values():
            if (folder / layout.file).is_file() and (folder / "utils" / "utils.py").is_file():
                return folder, layout
    known = "; ".join(f"{lay.file} + utils/utils.py ({lay.source})" for lay in LAYOUTS.values())
    raise AnatomyBackendError(f"{code_dir}: not a HybridGNet code folder; expected {known}")


@contextlib.contextmanager
def _upstream_imports(folder: Path) -> Iterator[None]:
    """Import from ``folder`` with its top-level ``models`` / ``utils`` packages, then
    restore ``sys.path`` and ``sys.modules`` (those generic names must not leak).

    Upstream's ``models/`` and ``utils/`` have no ``__init__.py`` (namespace packages),
    which any regular ``models`` or ``utils`` module elsewhere on ``sys.path`` would
    shadow; so both are registered as packages of ``folder`` first (running an
    ``__init__.py`` where there is one)."""
    import importlib.machinery
    import importlib.util

    def ours(name: str) -> bool:
        return name.split(".")[0] in ("models", "utils")

    saved = {k: v for k, v in sys.modules.items() if ours(k)}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(folder))
    try:
        for name in ("models", "utils"):
            package = folder / name
            if not package.is_dir():
                continue
            init = package / "__init__.py"
            if init.is_file():
                spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(package)])
            else:
                spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
                spec.submodule_search_locations = [str(package)]
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            if init.is_file():
                spec.loader.exec_module(module)
        yield
    finally:
        sys.path.remove(str(folder))
        for k in [k for k in sys.modules if ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


def load_hybridgnet(code_dir: Path, weights: Path) -> tuple[Any, Layout]:
    """Build HybridGNet (lungs + heart, two image-to-graph skips) from the user's copy
    and load its state dict (``weights_only`` loading: a state dict holds tensors only).

    Returns
    -------
    (torch.nn.Module, Layout)
        The network in eval mode and the layout it came from.

    Raises
    ------
    AnatomyBackendError
        If the code cannot be imported or the weights do not load.
    """
    import importlib

    import scipy.sparse as sp
    import torch

    folder, layout = find_layout(code_dir)
    with _upstream_imports(folder):
        try:
            hybrid = importlib.import_module(layout.module).Hybrid
            utils = importlib.import_module("utils.utils")
            matrices, to_sparse = getattr(utils, layout.matrices), utils.scipy_to_torch_sparse
        except (ImportError, AttributeError) as err:
            raise AnatomyBackendError(
                f"{folder}: cannot import HybridGNet ({layout.file}, utils/utils.py "
                f"{layout.matrices}; {layout.source}; it needs torch_geometric and "
                f"torchvision): {err}"
            ) from err
        adj, adj_down, down, up = (sp.csc_matrix(m).tocoo() for m in matrices())
        n1, n2 = adj.shape[0], adj_down.shape[0]
        config = {**BASE_CONFIG, "n_nodes": [n1, n1, n1, n2, n2, n2], **layout.extra_config}
        # Built inside the import context: torch_geometric's MessagePassing inspects its
        # subclasses' type hints at construction through sys.modules[cls.__module__].
        net = hybrid(config, [to_sparse(down)], [to_sparse(up)], [to_sparse(a) for a in [adj] * 3 + [adj_down] * 3])
    repair_generated_propagate(net)
    try:
        net.load_state_dict(torch.load(str(weights), map_location="cpu", weights_only=True))
    except Exception as err:  # torch raises many types for a bad file
        raise AnatomyBackendError(f"{weights}: cannot load HybridGNet weights: {err}") from err
    return net.eval(), layout


class HybridGNetSegmenter(AnatomySegmenter):
    """Lungs and heart from HybridGNet landmarks; zones and lobes by rule.

    Parameters
    ----------
    network : torch.nn.Module
        Maps float32 (B, 1, 1024, 1024) canvases in [0, 1] to landmarks in [0, 1]
        canvas units (a tensor of B x 120 x 2 values, or a tuple whose first item is).
    cfg : AnatomyConfig, optional
        Fractions of the zone/lobe rule.
    version : str
        Provenance string.
    device : str, optional
        Torch device; default CUDA when available. HybridGNet always runs in fp32:
        its graph layers (torch_geometric) are not validated in half precision.
        The network's graph matrices move with it (:func:`register_graph_buffers`).
    """

    name = "hybridgnet"

    def __init__(
        self, network: Any, cfg: AnatomyConfig | None = None, version: str = "", device: str | None = None
    ) -> None:
        self.device = torch_device(device)
        register_graph_buffers(network)
        self.network = network.to(self.device).eval()
        self.cfg = cfg or AnatomyConfig()
        self.version = version

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The weights :meth:`from_config` loads (``backends.hybridgnet_weights``), when
        set (the code folder ``backends.hybridgnet_dir`` is not hashed); imports neither
        torch nor torch_geometric."""
        return [p for p in [cfg.backends.hybridgnet_weights] if p]

    @classmethod
    def from_config(cls, cfg: Config) -> HybridGNetSegmenter:
        """Build from ``backends.hybridgnet_dir`` (the user's HybridGNet code, either
        layout of :data:`LAYOUTS`) and ``backends.hybridgnet_weights``.

        Raises
        ------
        AnatomyBackendError
            If either is unset or missing, or the code cannot be imported.
        """
        where = (
            "put HybridGNet's code (GPL-3.0) in a folder: ngaggion/CheXmask-Database's HybridGNet/ "
            "or a clone of ngaggion/HybridGNet, download its lungs+heart weights, and set "
            "backends.hybridgnet_dir and backends.hybridgnet_weights"
        )
        code, weights = cfg.backends.hybridgnet_dir, cfg.backends.hybridgnet_weights
        if not code or not weights:
            raise AnatomyBackendError(f"the hybridgnet backend is not configured: {where}")
        code_dir, wpath = Path(code).expanduser(), Path(weights).expanduser()
        if not code_dir.is_dir():
            raise AnatomyBackendError(f"{code_dir}: HybridGNet code folder not found: {where}")
        if not wpath.is_file():
            raise AnatomyBackendError(f"{wpath}: HybridGNet weights not found: {where}")
        net, layout = load_hybridgnet(code_dir, wpath)
        return cls(net, cfg.anatomy, version=f"{RECIPE}:{layout.module}:{wpath.name}")

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        """All anatomy labels of one image at its own (H, W); see
        :class:`~cxrils.vision.anatomy.base.AnatomySegmenter`."""
        return self.segment_batch([x])[0]

    def segment_batch(self, xs: Sequence[np.ndarray]) -> list[AnatomyMasks]:
        """See :meth:`~cxrils.vision.anatomy.base.AnatomySegmenter.segment_batch`:
        one canvas per forward pass on every device, as upstream's inference runs it
        (its encoder normalises with batch statistics: module docstring), under
        ``torch.no_grad``."""
        import torch

        out: list[AnatomyMasks] = []
        for x in xs:
            canvas, transform = to_canvas(x)
            # no_grad, as upstream's inference: under inference_mode, Pool's transpose of
            # a sparse matrix made outside it raises "Cannot set version_counter".
            with torch.no_grad():
                points = landmarks_from_output(self.network(torch.from_numpy(canvas)[None, None].to(self.device)), 1)
            organs = landmarks_to_masks(transform.to_image(points[0]), x.shape)
            out.append(
                assemble(organs["right lung"], organs["left lung"], organs["heart"], self.cfg, self.name, self.version)
            )
        return out
