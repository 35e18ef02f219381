"""Training loss of the light model (paper section 5 / Appendix F where it applies).

L = lambda_bce * BCE(mask) + lambda_dice * Dice(mask, positives only)
    + lambda_presence * BCE(presence; positives weighted presence_pos_weight) + lambda_type * [CE(lesion) + BCE(certainty)]

BCE is over every pixel of every sample (negatives teach empty masks); Dice only over
samples with a non-empty reference mask, as the paper does, since Dice is undefined
for empty targets. The lesion-type and certainty terms use lesion-inference positives
only (the only answers that state them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from monai.losses import DiceLoss

from cxrils.models.light.config import LightConfig

_DICE = DiceLoss(sigmoid=True, reduction="mean")


def light_loss(
    out: dict[str, torch.Tensor], mask: torch.Tensor, lesion: torch.Tensor, certainty: torch.Tensor, config: LightConfig
) -> dict[str, torch.Tensor]:
    """Loss terms of one batch.

    Parameters
    ----------
    out : dict
        :class:`~cxrils.models.light.network.LightILSNet` outputs (logits).
    mask : Tensor, float32 (B, S, S)
        Reference masks in {0, 1}; all zero for negatives.
    lesion : Tensor, int64 (B,)
        Index into :data:`cxrils.vocab.INFERENCE_LESION_TYPES`, -1 where not a
        lesion-inference positive.
    certainty : Tensor, float32 (B,)
        1 definitive, 0 tentative (read only where ``lesion >= 0``).
    config : LightConfig
        Loss weights.

    Returns
    -------
    dict of str to Tensor
        Scalar terms ``bce``, ``dice``, ``presence``, ``type`` and their weighted ``loss``.
    """
    logits = out["mask"][:, 0]
    positive = mask.flatten(1).amax(1) > 0
    bce = F.binary_cross_entropy_with_logits(logits, mask)
    dice = _DICE(logits[positive][:, None], mask[positive][:, None]) if positive.any() else logits.sum() * 0.0
    presence = F.binary_cross_entropy_with_logits(
        out["presence"], positive.float(), pos_weight=torch.tensor(config.presence_pos_weight, dtype=logits.dtype)
    )
    has_type = lesion >= 0
    if has_type.any():
        type_loss = F.cross_entropy(out["lesion"][has_type], lesion[has_type]) + F.binary_cross_entropy_with_logits(
            out["certainty"][has_type], certainty[has_type]
        )
    else:
        type_loss = out["lesion"].sum() * 0.0
    loss = (
        config.lambda_bce * bce
        + config.lambda_dice * dice
        + config.lambda_presence * presence
        + config.lambda_type * type_loss
    )
    return {
        "loss": loss,
        "bce": bce.detach(),
        "dice": dice.detach(),
        "presence": presence.detach(),
        "type": type_loss.detach(),
    }
