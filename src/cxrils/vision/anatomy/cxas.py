"""The ``cxas`` anatomy backend: an adapter over the PyPI package ``cxas``.

CXAS (Seibold et al. 2023; paper section 3.1 step 2) segments 159 anatomical classes
at 512 x 512 with a multi-label sigmoid head; its label names are the CXAS spellings
that :mod:`cxrils.vocab` uses, so zones, lobes, lungs and heart are taken from it
directly. The adapter reproduces CXAS's own preprocessing (grey -> RGB, [0, 1],
ImageNet mean/std, resize to 512) and its post-processing (sigmoid > 0.5, nearest
resize back to the input's size).

Weights come only from ``backends.cxas_weights`` (a local ``.pth``); the adapter
builds the network itself and never calls CXAS's downloader. ``cxas`` needs
torchvision (its ResNet-50 encoder), which cxrils does not install: see
docs/anatomy.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from cxrils.config import Config
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy.base import AnatomyBackendError, check_input
from cxrils.vocab import ANATOMY_LABELS

#: CXAS's network input side, pixels (its FileLoader.base_size).
CXAS_INPUT_SIZE = 512
#: CXAS model name whose architecture the weights must match.
CXAS_MODEL_NAME = "UNet_ResNet50_default"
#: ImageNet normalisation CXAS applies to its RGB input.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: Sigmoid threshold of CXAS (BackboneUNet.threshold).
CXAS_THRESHOLD = 0.5

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


def _load_cxas_network(weights: Path):
    """Build CXAS's BackboneUNet offline and load ``weights``; returns
    (logits module, id2label)."""
    import torch

    try:
        from cxas.label_mapper import id2label_dict
        from cxas.models.UNet.backbone_unet import BackboneUNet
    except ImportError as err:
        raise AnatomyBackendError(
            f"the cxas backend needs the package 'cxas' and its dependency torchvision "
            f"(pip install cxas): {err}") from err

    net = BackboneUNet(CXAS_MODEL_NAME, len(id2label_dict))
    try:
        checkpoint = torch.load(str(weights), map_location="cpu", weights_only=True)
        state = checkpoint.get("model", checkpoint)
        state = {k.removeprefix("module."): v for k, v in state.items()}
        missing, _ = net.load_state_dict(state, strict=False)
    except Exception as err:  # torch raises many types for a bad file
        raise AnatomyBackendError(f"{weights}: cannot load CXAS weights: {err}") from err
    if missing:
        raise AnatomyBackendError(f"{weights}: CXAS weights lack {len(missing)} tensors, e.g. {missing[:3]}")

    class _Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner._forward(x)["logits"]

    return _Logits(net), dict(id2label_dict)


class CxasSegmenter:
    """Lungs, heart, zones and lobes from a CXAS network.

    Parameters
    ----------
    network : torch.nn.Module
        Maps float32 (1, 3, 512, 512) (ImageNet-normalised) to logits (1, C, 512, 512).
    id2label : mapping of str to str
        CXAS label table for the C output channels.
    version : str
        Provenance string.

    Use :meth:`from_config` for the real network; tests pass a stand-in with the
    same output layout.
    """

    name = "cxas"

    def __init__(self, network, id2label: Mapping[str, str], version: str = "") -> None:
        import torch

        self.network = network.eval()
        self.channels = label_channels(id2label)
        self.version = version
        self._torch = torch

    @classmethod
    def from_config(cls, cfg: Config) -> "CxasSegmenter":
        """Build from ``cfg.backends.cxas_weights``.

        Raises
        ------
        AnatomyBackendError
            If the path is unset or missing, or the package ``cxas`` (with
            torchvision) is not installed.
        """
        path = cfg.backends.cxas_weights
        if not path:
            raise AnatomyBackendError(f"backends.cxas_weights is not set: {_GET_WEIGHTS}")
        weights = Path(path).expanduser()
        if not weights.is_file():
            raise AnatomyBackendError(f"{weights}: CXAS weights not found: {_GET_WEIGHTS}")
        network, id2label = _load_cxas_network(weights)
        from importlib import metadata

        return cls(network, id2label, version=f"cxas-{metadata.version('cxas')}:{weights.name}")

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        """All anatomy labels of one image at its own (H, W); see
        :class:`~cxrils.vision.anatomy.base.AnatomySegmenter`."""
        check_input(x)
        torch = self._torch
        import torch.nn.functional as F

        rgb = torch.from_numpy(x).float().div(255.0)[None].expand(3, -1, -1)
        mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
        data = F.interpolate(((rgb - mean) / std)[None], size=(CXAS_INPUT_SIZE, CXAS_INPUT_SIZE))
        idx = list(self.channels.values())
        with torch.inference_mode():
            logits = self.network(data)
            masks = (logits[:, idx].sigmoid() > CXAS_THRESHOLD).float()
            masks = F.interpolate(masks, size=x.shape, mode="nearest")[0].bool().numpy()
        return AnatomyMasks(masks={lab: masks[i] for i, lab in enumerate(self.channels)},
                            shape=tuple(x.shape), backend=self.name, version=self.version)
