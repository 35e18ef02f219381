"""Small CPU networks of the built-in lesion models (plain torch, no pretrained weights).

Both take the image squashed to ``S x S`` and histogram-equalised
(:func:`network_input`), float32 in [0, 1]; the lesion map's
network may take the lung mask at the same size as a second channel.

* :class:`LesionSegNet` (the anomaly map's network, :mod:`cxrils.vision.anomaly.builtin`):
  an encoder-decoder (U-Net, Ronneberger et al. 2015) with a stride-2 stem, giving one
  lesion logit per pixel at ``S / 2``;
* :class:`CenterNetDetector` (the lesion detector, :mod:`cxrils.vision.detection.builtin`):
  the same kind of encoder with a shallower decoder to stride 4 and the three heads of
  CenterNet ("Objects as Points", Zhou et al. 2019): a centre heatmap per class, the box
  size (log width and log height in output cells) and the sub-cell centre offset.

They share the block layout only; each model has its own weights, training images and
training target (docs/grounding.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def conv_block(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """Two 3x3 convolutions with batch norm and ReLU; the first has ``stride``."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class Encoder(nn.Module):
    """Five stride-2 stages; ``forward`` returns the feature maps at strides 2..32.

    Parameters
    ----------
    widths : tuple of 5 int
        Channels of the five stages.
    in_channels : int
        Input channels.
    """

    def __init__(self, widths: tuple[int, ...], in_channels: int = 1) -> None:
        super().__init__()
        if len(widths) != 5:
            raise ValueError(f"the encoder needs 5 widths, got {widths}")
        chans = (int(in_channels),) + tuple(widths)
        self.stages = nn.ModuleList(conv_block(chans[i], chans[i + 1], 2) for i in range(5))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """x float32 (B, in_channels, S, S) -> five maps (B, widths[i], S / 2**(i+1), ...)."""
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats


class _Decoder(nn.Module):
    """Upsampling path from stride 32 to stride ``2 ** (5 - levels)`` with skips."""

    def __init__(self, widths: tuple[int, ...], levels: int) -> None:
        super().__init__()
        self.ups = nn.ModuleList()
        c = widths[4]
        for k in range(levels):
            skip = widths[3 - k]
            self.ups.append(conv_block(c + skip, skip))
            c = skip
        self.out_channels = c

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        x = feats[4]
        for k, block in enumerate(self.ups):
            skip = feats[3 - k]
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = block(torch.cat([x, skip], dim=1))
        return x


class LesionSegNet(nn.Module):
    """Lesion probability per pixel.

    ``forward(x)`` with x float32 (B, in_channels, S, S) (image; with 2 channels, then
    the lung mask in {0, 1}) returns logits (B, 1, S/2, S/2) (S a multiple of 32).
    """

    def __init__(self, widths: tuple[int, ...] = (16, 32, 64, 128, 128), in_channels: int = 1) -> None:
        super().__init__()
        self.widths = tuple(int(w) for w in widths)
        self.in_channels = int(in_channels)
        self.encoder = Encoder(self.widths, self.in_channels)
        self.decoder = _Decoder(self.widths, levels=4)
        self.head = nn.Conv2d(self.decoder.out_channels, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits float32 (B, 1, S/2, S/2) of x float32 (B, in_channels, S, S)."""
        return self.head(self.decoder(self.encoder(x)))


class CenterNetDetector(nn.Module):
    """CenterNet heads at stride 4.

    ``forward(x)`` with x float32 (B, 1, S, S) returns a dict: ``heatmap`` logits
    (B, n_classes, S/4, S/4), ``size`` (B, 2, S/4, S/4): log(width), log(height) of
    the box in output cells, ``offset`` (B, 2, S/4, S/4): centre offset in cells, x
    then y, in [0, 1) at the peak.
    """

    def __init__(
        self, widths: tuple[int, ...] = (16, 32, 64, 128, 128), n_classes: int = 1, head_width: int = 32
    ) -> None:
        super().__init__()
        self.widths = tuple(int(w) for w in widths)
        self.n_classes = int(n_classes)
        self.encoder = Encoder(self.widths)
        self.decoder = _Decoder(self.widths, levels=3)
        c = self.decoder.out_channels

        def head(out: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(c, head_width, 3, 1, 1), nn.ReLU(inplace=True), nn.Conv2d(head_width, out, 1)
            )

        self.heatmap = head(self.n_classes)
        self.size = head(2)
        self.offset = head(2)
        # CenterNet initialises the heatmap bias so that sigmoid = 0.1 (focal-loss prior)
        nn.init.constant_(self.heatmap[-1].bias, -2.19)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The heads of x float32 (B, 1, S, S), as the class docstring says."""
        h = self.decoder(self.encoder(x))
        return {"heatmap": self.heatmap(h), "size": self.size(h), "offset": self.offset(h)}


def network_input(x: np.ndarray, size: int) -> np.ndarray:
    """The input of the built-in lesion networks (this module).

    ``x`` uint8 (H, W) is squashed to ``size`` x ``size`` (area interpolation; aspect
    NOT kept, as COVID-QU-Ex stored its images) and histogram-equalised, which makes the
    input the same for any monotone grey-level mapping of the image (CR, DR, journal
    figures). Returns float32 (size, size) in [0, 1].
    """
    small = cv2.resize(np.ascontiguousarray(x), (size, size), interpolation=cv2.INTER_AREA)
    return cv2.equalizeHist(small).astype(np.float32) / 255.0


def network_mask(m: np.ndarray, size: int) -> np.ndarray:
    """A bool (H, W) mask on the grid of :func:`network_input`: squashed to ``size`` x
    ``size`` by area interpolation and kept where at least half a cell is covered.
    Returns float32 (size, size) in {0, 1}."""
    return (cv2.resize(m.astype(np.float32), (size, size), interpolation=cv2.INTER_AREA) >= 0.5).astype(np.float32)


def weights_metadata(path: str | Path, error: type[Exception] = ValueError) -> dict[str, Any]:
    """The metadata of a file written by :func:`cxrils.training.lesion_train.save_weights`,
    each value decoded from its JSON string (``arch``, ``training``, ...; ``{}`` when none).

    Raises
    ------
    error
        If the file is missing or its metadata cannot be read (the message names the file).
    """
    from safetensors import SafetensorError, safe_open

    p = Path(path)
    if not p.is_file():
        raise error(f"{p}: weights not found")
    try:
        with safe_open(str(p), framework="pt") as fh:
            return {k: json.loads(v) for k, v in (fh.metadata() or {}).items()}
    except (SafetensorError, ValueError, OSError) as err:
        raise error(f"{p}: not usable weights: {err}") from err


def load_weights(path: str | Path, build: Callable[[dict], Any], error: type[Exception]):
    """``(net, metadata)`` from a file written by :func:`cxrils.training.lesion_train.save_weights`; ``build(meta)``
    makes the network from the metadata.

    Raises
    ------
    error
        If the file is missing or does not fit the network (the message names the file).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    p = Path(path)
    meta = weights_metadata(p, error)
    try:
        net = build(meta)
        net.load_state_dict(load_file(str(p)))
    except (SafetensorError, KeyError, ValueError, TypeError, RuntimeError, OSError) as err:
        raise error(f"{p}: not usable weights: {err}") from err
    return net.eval(), meta
