"""ROSALIA's losses (paper section 5 "Loss function", following LISA).

L = lambda_txt * L_txt + lambda_bce * L_bce + lambda_dice * L_dice, with lambda_txt 0.5,
lambda_bce 5, lambda_dice 1. L_bce is computed on every sample (an empty target teaches
the empty answer); L_dice only on positives (Dice is undefined for empty targets).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def mask_bce(logits: list[torch.Tensor], targets: list[torch.Tensor]) -> torch.Tensor:
    """Mean over samples of the per-pixel mean sigmoid BCE.

    Parameters
    ----------
    logits, targets : list of tensors (H_i, W_i)
        Mask logits and float {0, 1} targets at each sample's own size.
    """
    if not logits:
        raise ValueError("mask_bce needs at least one sample")
    losses = [F.binary_cross_entropy_with_logits(p, t.float()) for p, t in zip(logits, targets)]
    return torch.stack(losses).mean()


def mask_dice(
    logits: list[torch.Tensor], targets: list[torch.Tensor], scale: float = 1000.0, eps: float = 1e-6
) -> torch.Tensor:
    """Dice loss averaged over **positive** samples (non-empty targets); 0 if there are none.

    ``1 - (2 |P∩T| + eps) / (|P| + |T| + eps)`` on sigmoid probabilities, with LISA's
    scaling of the sums by 1/``scale`` for numerical range.
    """
    losses = []
    for p, t in zip(logits, targets):
        if t.sum() == 0:
            continue
        prob = torch.sigmoid(p).flatten()
        tf = t.float().flatten()
        inter = 2 * (prob / scale * tf).sum()
        denom = (prob / scale).sum() + (tf / scale).sum()
        losses.append(1 - (inter + eps) / (denom + eps))
    if not losses:
        return torch.zeros((), dtype=logits[0].dtype if logits else torch.float32)
    return torch.stack(losses).mean()
