"""Training of the builtin anomaly map's network (``cxrils train-anomaly``).

Data: the ``anomaly`` half of the COVID-QU-Ex tuning part
(:func:`cxrils.training.lesion_data.training_samples`; copies of other sources' or of
report-part images left out): COVID-19 images with their expert-verified infection
masks and Normal images (all-background targets), plus the anomaly half of the JSRT
nodule images (:func:`cxrils.training.lesion_data.jsrt_backgrounds`) as adult PA films;
synthetic effusions, airspace opacities and plate atelectasis are drawn on a share of
them (:func:`cxrils.training.lesion_train.item_input`); with ``lung_input`` the network
also sees the image's expert lung mask. Loss: binary cross-entropy on every
pixel plus soft Dice on the COVID-19 images (ours). A fixed hash share of these images
(``val_fraction``) picks the best epoch by the pixel AUROC of the lesion probability in
their lungs (lesion pixels against the other lung pixels, Normal films included; issue 28:
the mean IoU of the lesion images alone, the former rule, ignored false regions on Normal
films and picked mid-schedule epochs), and that epoch's best-IoU threshold over the images
with a lesion is stored as ``p_star`` (:mod:`cxrils.vision.anomaly.builtin` maps it to
Table 7's tau_ano). The detector's half and the report part are never read.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import cv2
import numpy as np

from cxrils.config import AnomalyTrainConfig, LesionDataConfig, SyntheticConfig
from cxrils.evaluation.metrics import region_pixel_auroc
from cxrils.training.lesion_data import random_affine, warp
from cxrils.training.lesion_train import (
    fit,
    item_input,
    lesion_training_data,
    run_summary,
    save_weights,
    split_validation,
    train_items,
)
from cxrils.vision.lesion_nets import LesionSegNet


def _area(m: np.ndarray, side: int) -> np.ndarray:
    return cv2.resize(m.astype(np.float32), (side, side), interpolation=cv2.INTER_AREA)


def best_threshold(prob: np.ndarray, ref: np.ndarray, grid: tuple[float, ...]) -> tuple[float, float]:
    """``(threshold, mean IoU)``: the grid threshold of ``prob`` (N, h, w) with the
    highest mean IoU against the bool masks ``ref`` (N, h, w) (an empty pair scores 1)."""
    best = (grid[0], -1.0)
    r = ref.reshape(len(ref), -1)
    for t in grid:
        f = prob.reshape(len(prob), -1) >= t
        inter, union = (f & r).sum(1), (f | r).sum(1)
        score = float(np.mean(np.where(union > 0, inter / np.maximum(union, 1), 1.0)))
        if score > best[1]:
            best = (float(t), score)
    return best


def train_anomaly(
    data_root: str | Path,
    out: str | Path,
    cfg: AnomalyTrainConfig = AnomalyTrainConfig(),
    data_cfg: LesionDataConfig = LesionDataConfig(),
    *,
    progress: bool = True,
    synthetic: SyntheticConfig | None = SyntheticConfig(),
    init: str | Path | None = None,
    role: str = "anomaly",
) -> dict:
    """Train the lesion map and write its weights (safetensors with metadata) to ``out``.

    With ``synthetic`` (the default), the role's JSRT nodule images join the training
    images as adult PA backgrounds, and synthetic lesions are drawn on a share of the
    training images (:func:`cxrils.training.lesion_train.item_input`); validation scores
    the real COVID-QU-Ex images only. ``init`` fine-tunes an existing weights file.
    ``role``: the half of the tuning part (:data:`~cxrils.training.lesion_data.ROLES`) to
    train on; the other half gives an out-of-fold model
    (:mod:`cxrils.training.prior_folds`).

    Returns
    -------
    dict
        Training summary (also in the weights' metadata): images used, ``p_star``,
        ``validation_auroc`` (the chosen epoch's; the lesion probability at the network's
        output, ``input_size / 2`` px, binned in 256 bins: :func:`~cxrils.evaluation.
        region_pixel_auroc`), ``validation_iou`` (mean IoU of the validation images with a
        lesion at ``p_star``), ``p_star_by_epoch``, per-epoch history (``score``: the
        AUROC), seconds.

    Raises
    ------
    FileNotFoundError
        If the COVID-QU-Ex folder is missing.
    ValueError
        If ``role`` is unknown, there are no training images or no validation image, or
        the validation images' lungs hold no lesion pixel or no other pixel.
    """
    import torch
    import torch.nn.functional as F

    samples, backgrounds = lesion_training_data(data_root, role, data_cfg, synthetic)
    s, half = cfg.input_size, cfg.input_size // 2
    items = train_items([*samples, *backgrounds], s)
    train_idx, val_idx = split_validation([smp.image_id for smp in samples], cfg.val_fraction, "anomaly-val")
    train_idx += list(range(len(samples), len(items)))
    plain = np.random.default_rng(0)  # item_input without synthetic lesions draws nothing

    def _jitter(lungs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The lung channel grown or shrunk by up to ``lung_jitter_px`` pixels: at
        inference it comes from the anatomy model, not from the expert."""
        k = int(rng.integers(-cfg.lung_jitter_px, cfg.lung_jitter_px + 1))
        if k == 0:
            return lungs
        op = cv2.dilate if k > 0 else cv2.erode
        return op(lungs, np.ones((3, 3), np.uint8), iterations=abs(k))

    def _channels(x: np.ndarray, lungs: np.ndarray) -> np.ndarray:
        return np.stack([x, lungs]) if cfg.lung_input else x[None]

    def make_batch(indices: list[int], rng: np.random.Generator):
        xs, ys = [], []
        for i in indices:
            item = items[train_idx[i]]
            x, les = item_input(item, rng, synthetic)
            lungs = (item.right | item.left).astype(np.float32)
            m = random_affine(rng, s, cfg.aug_scale, cfg.aug_rotate_deg, cfg.aug_shift)
            lungs_w = _jitter(warp(lungs, m, s, nearest=True), rng) if cfg.lung_input else lungs
            xs.append(_channels(warp(x, m, s), lungs_w))
            ys.append(_area(warp(les, m, s), half))
        return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))[:, None]

    def loss_fn(logits, target):
        bce = F.binary_cross_entropy_with_logits(logits, target)
        p = torch.sigmoid(logits).flatten(1)
        t = target.flatten(1)
        pos = t.sum(1) > 0
        if not bool(pos.any()):
            return cfg.bce_weight * bce
        inter = (p * t).sum(1)[pos]
        dice = 1 - (2 * inter + 1) / (p.sum(1)[pos] + t.sum(1)[pos] + 1)
        return cfg.bce_weight * bce + cfg.dice_weight * dice.mean()

    if not val_idx:
        raise ValueError(
            f"{data_root}: no validation image (val_fraction {cfg.val_fraction} of {len(samples)} images): "
            "nothing to choose the epoch and p_star on"
        )
    lesion = np.stack([_area(items[i].lesion, half) >= 0.5 for i in val_idx])
    lungs = np.stack([_area(items[i].right | items[i].left, half) >= 0.5 for i in val_idx])
    if not (lesion & lungs).any() or not (~lesion & lungs).any():
        raise ValueError(
            f"{data_root}: the {len(val_idx)} validation images hold no lesion pixel or no other lung pixel in "
            "their lungs: the AUROC that chooses the epoch is undefined"
        )
    torch.manual_seed(cfg.seed)  # the initial weights too: a run is repeatable
    net = LesionSegNet(cfg.widths, in_channels=2 if cfg.lung_input else 1)
    val_pos = [k for k, m in enumerate(lesion) if m.any()]
    per_epoch: list[tuple[float, float]] = []  # (p_star, IoU at p_star) of each validated epoch

    def validate() -> float:
        """Pixel AUROC of the lesion probability inside the lungs of every validation image
        (lesion pixels against the other lung pixels, Normal films' included); records the
        epoch's best-IoU threshold over the images with a lesion."""
        probs = []
        for start in range(0, len(val_idx), 32):
            chunk = val_idx[start : start + 32]
            inputs = np.stack(
                [
                    _channels(item_input(items[i], plain, None)[0], (items[i].right | items[i].left).astype(np.float32))
                    for i in chunk
                ]
            )
            probs.append(torch.sigmoid(net(torch.from_numpy(inputs)))[:, 0].numpy())
        prob = np.concatenate(probs)
        per_epoch.append(best_threshold(prob[val_pos], lesion[val_pos], cfg.p_star_grid))
        return region_pixel_auroc(prob, lesion, lungs)

    result = fit(net, len(train_idx), make_batch, loss_fn, validate, cfg, progress=progress, init=init)
    p_star, iou = per_epoch[result["best_epoch"] - 1]
    summary = {
        **run_summary(role, samples, len(train_idx), len(val_idx), result, backgrounds, synthetic, init),
        "p_star": p_star,
        "validation_iou": round(iou, 4),
        "validation_auroc": round(result["best_score"], 4),
        "p_star_by_epoch": [t for t, _ in per_epoch],
    }
    save_weights(
        net,
        out,
        {
            "arch": {"widths": list(cfg.widths), "input_size": s, "in_channels": net.in_channels},
            "training": summary,
            "train_config": asdict(cfg),
            "data_config": asdict(data_cfg),
        },
    )
    return summary
