"""The ``cxas`` anatomy backend: an adapter over the PyPI package ``cxas``.

CXAS (Seibold et al. 2023; paper section 3.1 step 2) segments 159 anatomical classes
at 512 x 512 with a multi-label sigmoid head; its label names are the CXAS spellings
that :mod:`cxrils.vocab` uses, so zones, lobes, lungs and heart are taken from it
directly. The adapter reproduces CXAS's own preprocessing (cxas 0.0.20
``file_io.FileLoader``: grey -> RGB, [0, 1], ImageNet mean/std, then
``F.interpolate(..., 512)``, i.e. nearest, to 512 x 512) and its post-processing
(``BackboneUNet.threshold``: sigmoid > 0.5; ``CXAS.resize_to_numpy``: nearest resize
back to the input's size).

Weights come only from ``backends.cxas_weights`` (a local ``.pth``); the adapter
builds the network itself and never calls CXAS's downloader. cxas 0.0.20 loads its
checkpoint with ``torch.load(..., weights_only=False)`` (``models/__init__.py``
``load_weights``), which runs any code a pickle names; this adapter loads it with
``weights_only=True`` plus an allow-list of the data-only types a training checkpoint
holds besides tensors (:data:`SAFE_CHECKPOINT_GLOBALS`), and refuses anything else by
name (:func:`load_checkpoint_state`). ``cxas`` needs torchvision (its ResNet-50
encoder), which cxrils does not install: see docs/adapters.md.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cxrils.config import AnatomyConfig, Config
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy.base import AnatomyBackendError, AnatomySegmenter, check_input
from cxrils.vision.batching import inference, stacked_groups, torch_device
from cxrils.vocab import ANATOMY_LABELS

#: CXAS's network input side, pixels (its FileLoader.base_size).
CXAS_INPUT_SIZE = 512
#: CXAS model name whose architecture the weights must match.
CXAS_MODEL_NAME = "UNet_ResNet50_default"
#: ImageNet normalisation CXAS applies to its RGB input.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: Globals a CXAS checkpoint may name besides tensors and plain containers: data-only
#: types a training script saves next to ``"model"`` (its arguments, numpy scalars and
#: arrays, e.g. the best score). Unpickling them constructs data, never runs code.
SAFE_CHECKPOINT_GLOBALS: tuple[str, ...] = (
    "argparse.Namespace",
    "collections.defaultdict",
    "collections.OrderedDict",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.ndarray",
    "numpy.dtype",
)

_GET_WEIGHTS = (
    f"download the CXAS weights '{CXAS_MODEL_NAME}.pth' from the CXAS project "
    "(https://github.com/ConstantinSeibold/ChestXRayAnatomySegmentation) and set "
    "backends.cxas_weights to its local path"
)


def label_channels(id2label: Mapping[str, str], labels=ANATOMY_LABELS) -> dict[str, int]:
    """Output channel of each of our labels in a CXAS label table.

    Parameters
    ----------
    id2label : mapping of str to str
        CXAS's ``label_dict`` (channel index as a string -> label name).
    labels : sequence of str
        Labels wanted (CXAS spelling).

    Raises
    ------
    AnatomyBackendError
        If a wanted label is not in the table.
    """
    by_name = {name: int(idx) for idx, name in id2label.items()}
    missing = [lab for lab in labels if lab not in by_name]
    if missing:
        raise AnatomyBackendError(f"CXAS label table lacks {missing}")
    return {lab: by_name[lab] for lab in labels}


def _safe_globals(names: Sequence[str]) -> list[Any]:
    """The objects of allow-listed global names; with ``numpy.dtype`` come numpy's
    per-type dtype classes (``numpy.dtypes.Float64DType`` ...), which unpickling a dtype
    builds without naming them."""
    objects = []
    for name in names:
        module, _, attr = name.rpartition(".")
        objects.append(getattr(importlib.import_module(module), attr))
    if "numpy.dtype" in names:
        objects += [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith("DType")]
    return objects


def _allowed(name: str) -> bool:
    return name in SAFE_CHECKPOINT_GLOBALS or (name.startswith("numpy.dtypes.") and name.endswith("DType"))


def load_checkpoint_state(path: Path) -> dict[str, Any]:
    """The network state dict of a CXAS checkpoint, loaded safely.

    A CXAS ``.pth`` is a dict whose ``"model"`` entry is the state dict (cxas 0.0.20
    reads ``checkpoint["model"]`` and strips a ``module.`` prefix left by
    ``DataParallel``); a bare state dict is accepted too. The file is read with
    ``torch.load(weights_only=True)``; when it names other globals, they must all be in
    :data:`SAFE_CHECKPOINT_GLOBALS` (or numpy dtype classes) to be allowed.

    Returns
    -------
    dict
        Parameter name (without ``module.``) -> tensor.

    Raises
    ------
    AnatomyBackendError
        If the file is unreadable, names a global outside the allow-list (listed in
        the message, with how to re-save the state dict), or holds no tensor state dict.
    """
    import torch

    try:
        try:
            checkpoint = torch.load(str(path), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            names = list(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
            refused = [n for n in names if not _allowed(n)]
            if refused:
                raise AnatomyBackendError(
                    f"{path}: the CXAS checkpoint names code cxrils will not unpickle: {refused}. If you trust "
                    "the file, re-save its state dict in a trusted Python: torch.save(torch.load(f, "
                    "weights_only=False)['model'], 'cxas_state.pth') and point backends.cxas_weights at it"
                ) from None
            with torch.serialization.safe_globals(_safe_globals(names)):
                checkpoint = torch.load(str(path), map_location="cpu", weights_only=True)
    except AnatomyBackendError:
        raise
    except Exception as err:  # torch raises many types for a bad file
        raise AnatomyBackendError(f"{path}: cannot load CXAS weights: {err}") from err
    state = checkpoint.get("model", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not state or not all(torch.is_tensor(v) for v in state.values()):
        raise AnatomyBackendError(f"{path}: not a CXAS checkpoint (no 'model' state dict of tensors)")
    return {k.removeprefix("module."): v for k, v in state.items()}


def load_into(network: Any, state: Mapping[str, Any], path: Path) -> None:
    """Load ``state`` into ``network``; extra keys are ignored (cxas loads with
    ``strict=False``) but every parameter of the network must be there.

    Raises
    ------
    AnatomyBackendError
        If tensors are missing or shapes differ.
    """
    try:
        missing, _ = network.load_state_dict(dict(state), strict=False)
    except RuntimeError as err:  # size mismatch
        raise AnatomyBackendError(f"{path}: CXAS weights do not fit {CXAS_MODEL_NAME}: {err}") from err
    if missing:
        raise AnatomyBackendError(f"{path}: CXAS weights lack {len(missing)} tensors, e.g. {missing[:3]}")


def _load_cxas_network(weights: Path):
    """Build CXAS's BackboneUNet offline and load ``weights``; returns
    (logits module, id2label)."""
    import torch

    try:
        from cxas.label_mapper import id2label_dict
        from cxas.models.UNet.backbone_unet import BackboneUNet
    except ImportError as err:
        raise AnatomyBackendError(
            f"the cxas backend needs the package 'cxas' and its dependency torchvision (pip install cxas): {err}"
        ) from err

    net = BackboneUNet(CXAS_MODEL_NAME, len(id2label_dict))
    load_into(net, load_checkpoint_state(weights), weights)

    class _Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner._forward(x)["logits"]

    return _Logits(net), dict(id2label_dict)


class CxasSegmenter(AnatomySegmenter):
    """Lungs, heart, zones and lobes from a CXAS network.

    Parameters
    ----------
    network : torch.nn.Module
        Maps float32 (B, 3, 512, 512) (ImageNet-normalised) to logits (B, C, 512, 512).
    id2label : mapping of str to str
        CXAS label table for the C output channels.
    version : str
        Provenance string.
    device : str, optional
        Torch device; default CUDA when available, else CPU.
    precision : {"fp32", "fp16", "bf16"}
        Autocast on CUDA (``backends.precision``); CPU always computes in fp32.
    threshold : float
        Sigmoid threshold of a label (``anatomy.cxas_threshold``, CXAS's 0.5).

    Use :meth:`from_config` for the real network; tests pass a stand-in with the
    same output layout.
    """

    name = "cxas"

    def __init__(
        self,
        network,
        id2label: Mapping[str, str],
        version: str = "",
        device: str | None = None,
        precision: str = "fp32",
        threshold: float = AnatomyConfig.cxas_threshold,
    ) -> None:
        self.device = torch_device(device)
        self.network = network.to(self.device).eval()
        self.channels = label_channels(id2label)
        self.version = version
        self.precision = precision
        self.threshold = threshold

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The checkpoint :meth:`from_config` loads (``backends.cxas_weights``), when set;
        imports neither torch nor cxas."""
        return [p for p in [cfg.backends.cxas_weights] if p]

    @classmethod
    def from_config(cls, cfg: Config) -> CxasSegmenter:
        """Build from ``cfg.backends.cxas_weights``.

        Raises
        ------
        AnatomyBackendError
            If the path is unset or missing, the checkpoint is unsafe or unfit, or
            the package ``cxas`` (with torchvision) is not installed.
        """
        path = cfg.backends.cxas_weights
        if not path:
            raise AnatomyBackendError(f"backends.cxas_weights is not set: {_GET_WEIGHTS}")
        weights = Path(path).expanduser()
        if not weights.is_file():
            raise AnatomyBackendError(f"{weights}: CXAS weights not found: {_GET_WEIGHTS}")
        network, id2label = _load_cxas_network(weights)
        from importlib import metadata

        return cls(
            network,
            id2label,
            version=f"cxas-{metadata.version('cxas')}:{weights.name}",
            precision=cfg.backends.precision,
            threshold=cfg.anatomy.cxas_threshold,
        )

    def _input(self, x: np.ndarray):
        """CXAS's network input (3, 512, 512) of one image (module docstring)."""
        import torch
        import torch.nn.functional as F

        rgb = torch.from_numpy(x).float().div(255.0)[None].expand(3, -1, -1)
        mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
        return F.interpolate(((rgb - mean) / std)[None], size=(CXAS_INPUT_SIZE, CXAS_INPUT_SIZE))[0]

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        """All anatomy labels of one image at its own (H, W); see
        :class:`~cxrils.vision.anatomy.base.AnatomySegmenter`."""
        return self.segment_batch([x])[0]

    def segment_batch(self, xs: Sequence[np.ndarray]) -> list[AnatomyMasks]:
        """See :meth:`~cxrils.vision.anatomy.base.AnatomySegmenter.segment_batch`:
        stacked on CUDA, one by one on CPU (:mod:`cxrils.vision.batching`)."""
        import torch
        import torch.nn.functional as F

        for x in xs:
            check_input(x)
        idx = list(self.channels.values())
        out: list[AnatomyMasks] = []
        for group in stacked_groups(len(xs), self.device):
            data = torch.stack([self._input(xs[i]) for i in group]).to(self.device)
            with inference(self.device, self.precision):
                chosen = (self.network(data)[:, idx].float().sigmoid() > self.threshold).float()
            for k, i in enumerate(group):
                masks = F.interpolate(chosen[k : k + 1], size=xs[i].shape, mode="nearest")[0].bool().cpu().numpy()
                out.append(
                    AnatomyMasks(
                        masks={lab: masks[j] for j, lab in enumerate(self.channels)},
                        shape=tuple(xs[i].shape),
                        backend=self.name,
                        version=self.version,
                    )
                )
        return out
