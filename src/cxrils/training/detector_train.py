"""Training of the built-in lesion detector (``cxrils train-detector``).

Data: the ``detector`` half of the COVID-QU-Ex tuning part
(:func:`cxrils.training.lesion_data.training_samples`; copies of other sources' or of
report-part images left out), plus the detector half of the JSRT nodule images
(:func:`cxrils.training.lesion_data.jsrt_backgrounds`) as adult PA films, with synthetic
effusions, airspace opacities and plate atelectasis drawn on a share of them
(:func:`cxrils.training.lesion_train.item_input`). Targets: one "Lung Opacity" box per 8-connected component
of the expert-verified infection mask (components under
``LesionDataConfig.box_min_area_frac`` of the lungs dropped); Normal images have no box.
A fixed hash share of these images (``val_fraction``) picks the best epoch by average
precision at IoU 0.5. The anomaly map's half and the report part are never read: the
detector and the anomaly map never learn from the same image (docs/grounding.md).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from cxrils.config import DetectionConfig, DetectorTrainConfig, LesionDataConfig, SyntheticConfig
from cxrils.training.lesion_data import lesion_boxes, random_affine, warp
from cxrils.training.lesion_train import (
    fit,
    item_input,
    lesion_training_data,
    run_summary,
    save_weights,
    split_validation,
    train_items,
)
from cxrils.vision.detection.centernet import STRIDE, average_precision, decode, loss, nms, targets
from cxrils.vision.lesion_nets import CenterNetDetector

#: VinDr-CXR class the detector emits (the only one its training data supports).
CLASSES: tuple[str, ...] = ("Lung Opacity",)


def train_detector(
    data_root: str | Path,
    out: str | Path,
    cfg: DetectorTrainConfig = DetectorTrainConfig(),
    data_cfg: LesionDataConfig = LesionDataConfig(),
    *,
    progress: bool = True,
    synthetic: SyntheticConfig | None = SyntheticConfig(),
    init: str | Path | None = None,
    role: str = "detector",
) -> dict:
    """Train the detector and write its weights (safetensors with metadata) to ``out``.

    With ``synthetic`` (the default), the role's JSRT nodule images join the training
    images as adult PA backgrounds, and synthetic lesions are drawn on a share of the
    training images (:func:`cxrils.training.lesion_train.item_input`), one box per
    component as for the human masks; validation scores the real COVID-QU-Ex images
    only. ``init`` fine-tunes an existing weights file. ``role``: the half of the
    tuning part (:data:`~cxrils.training.lesion_data.ROLES`) to train on; the other half
    gives an out-of-fold model (:mod:`cxrils.training.prior_folds`).

    Returns
    -------
    dict
        The training summary written into the weights' metadata: images used,
        validation AP at IoU 0.5 of the best epoch, per-epoch history, seconds.

    Raises
    ------
    FileNotFoundError
        If the COVID-QU-Ex folder is missing.
    ValueError
        If ``role`` is unknown or there are no training images.
    """
    import torch

    samples, backgrounds = lesion_training_data(data_root, role, data_cfg, synthetic)
    s = cfg.input_size
    grid = s // STRIDE
    items = train_items([*samples, *backgrounds], s)
    train_idx, val_idx = split_validation([smp.image_id for smp in samples], cfg.val_fraction, "detector-val")
    train_idx += list(range(len(samples), len(items)))
    plain = np.random.default_rng(0)  # item_input without synthetic lesions draws nothing

    def lungs_of(i: int) -> np.ndarray:
        return (items[i].right | items[i].left).astype(np.float32)

    def boxes_of(lesion: np.ndarray, lungs: np.ndarray) -> list:
        return lesion_boxes(lesion > 0.5, data_cfg.box_min_area_frac, lungs > 0.5)

    def make_batch(indices: list[int], rng: np.random.Generator):
        xs, tg = [], []
        for i in indices:
            x, les = item_input(items[train_idx[i]], rng, synthetic)
            m = random_affine(rng, s, cfg.aug_scale, cfg.aug_rotate_deg, cfg.aug_shift)
            les_w = warp((les >= 0.5).astype(np.float32), m, s, nearest=True)
            lungs_w = warp(lungs_of(train_idx[i]), m, s, nearest=True)
            xs.append(warp(x, m, s))
            tg.append(targets(boxes_of(les_w, lungs_w), grid, gaussian_alpha=cfg.gaussian_alpha))
        batch = {k: torch.from_numpy(np.stack([t[k] for t in tg])) for k in tg[0]}
        return torch.from_numpy(np.stack(xs))[:, None], batch

    def loss_fn(outputs, tgt):
        return loss(outputs, tgt, cfg.focal_alpha, cfg.focal_beta, cfg.size_weight, cfg.offset_weight)

    torch.manual_seed(cfg.seed)  # the initial weights too: a run is repeatable
    net = CenterNetDetector(cfg.widths, n_classes=len(CLASSES))
    truths = [boxes_of((items[i].lesion >= 0.5).astype(np.float32), lungs_of(i)) for i in val_idx]
    dc = DetectionConfig()  # validation decodes as the builtin backend does

    def validate() -> float:
        dets = []
        for start in range(0, len(val_idx), 32):
            chunk = val_idx[start : start + 32]
            out = net(torch.from_numpy(np.stack([item_input(items[i], plain, None)[0] for i in chunk]))[:, None])
            hm = torch.sigmoid(out["heatmap"]).numpy()
            for k in range(len(chunk)):
                dets.append(
                    nms(
                        decode(
                            hm[k],
                            out["size"][k].numpy(),
                            out["offset"][k].numpy(),
                            min_score=dc.builtin_min_score,
                            max_boxes=dc.builtin_max_boxes,
                        ),
                        dc.builtin_nms_iou,
                    )
                )
        return average_precision(dets, truths, 0.5)

    result = fit(net, len(train_idx), make_batch, loss_fn, validate, cfg, progress=progress, init=init)
    summary = {
        **run_summary(role, samples, len(train_idx), len(val_idx), result, backgrounds, synthetic, init),
        "validation_ap50": round(result["best_score"], 4),
    }
    arch = {"widths": list(cfg.widths), "input_size": s, "n_classes": len(CLASSES)}
    save_weights(
        net,
        out,
        {
            "arch": arch,
            "classes": list(CLASSES),
            "training": summary,
            "train_config": asdict(cfg),
            "data_config": asdict(data_cfg),
        },
    )
    return summary
