"""The builtin anatomy network: a MONAI U-Net, 1 input channel, 5 sigmoid outputs.

Output channels, in order (:data:`CHANNELS`; patient sides: the patient's right lung lies
on the image's left on a frontal image):

- ``right lung visible``, ``left lung visible``: the aerated lung whose border one sees,
  stopping at the heart, the mediastinum and the diaphragm, and above a pleural
  effusion (the JSRT/SCR and HybridGNet convention, also COVID-QU-Ex's);
- ``heart``;
- ``right lung``, ``left lung``: the whole lung, including the lung behind the heart and
  below the dome of the diaphragm as far as the radiograph shows its outline, and the
  lung a pleural effusion hides (the convention of CXAS and of the COVID-19 collection's
  v7labs masks).
"""

from __future__ import annotations

from typing import Any

#: Output channel order of the builtin network.
CHANNELS: tuple[str, ...] = ("right lung visible", "left lung visible", "heart", "right lung", "left lung")
#: Channels of the visible lungs, the heart and the whole lungs (indices into CHANNELS).
VISIBLE, HEART, FULL = (0, 1), 2, (3, 4)

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
        Maps a float32 tensor (N, 1, S, S) to logits (N, 5, S, S), S = ``input_size``.
    """
    from monai.networks.nets import UNet

    return UNet(
        spatial_dims=2,
        in_channels=1,
        out_channels=len(CHANNELS),
        channels=tuple(arch["channels"]),
        strides=tuple(arch["strides"]),
        num_res_units=int(arch["num_res_units"]),
        norm="batch",
    )
