"""The builtin anatomy network: a MONAI U-Net, 1 input channel, 3 sigmoid outputs.

Output channels, in order: right lung, left lung, heart (patient sides: the patient's
right lung lies on the image's left on a frontal image).
"""

from __future__ import annotations

from typing import Any

#: Output channel order of the builtin network.
CHANNELS: tuple[str, ...] = ("right lung", "left lung", "heart")

#: Architecture used by ``cxrils train-anatomy`` (stored with the weights' metadata);
#: the shipped weights have it (model card).
DEFAULT_ARCH: dict[str, Any] = {
    "channels": [12, 24, 48, 96, 192],
    "strides": [2, 2, 2, 2],
    "num_res_units": 1,
    "input_size": 256,
}


def build_network(arch: dict[str, Any]):
    """Build the untrained network described by ``arch`` (keys of :data:`DEFAULT_ARCH`).

    Returns
    -------
    monai.networks.nets.UNet
        Maps a float32 tensor (N, 1, S, S) to logits (N, 3, S, S), S = ``input_size``.
    """
    from monai.networks.nets import UNet

    return UNet(
        spatial_dims=2, in_channels=1, out_channels=len(CHANNELS),
        channels=tuple(arch["channels"]), strides=tuple(arch["strides"]),
        num_res_units=int(arch["num_res_units"]), norm="batch",
    )
