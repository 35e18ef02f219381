"""Training of the builtin anatomy network (``cxrils train-anatomy``).

Data: the ``train`` part of :mod:`cxrils.vision.anatomy.data` (JSRT/SCR lungs + heart,
COVID-19 v7labs lungs). The heart term of the loss is masked out for images without a
heart reference. Loss: binary cross-entropy + soft Dice per channel (sigmoid,
multi-label). Augmentation: small random affine (no horizontal flip: it would swap the
patient's sides and put the heart on the wrong side), gamma/contrast jitter, and
burned-in marks (letters, arrows) like those of journal figures in the COVID-19 set.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from cxrils.vision.anatomy.data import TEST_PERCENT, Sample, load_samples, read_gray
from cxrils.vision.anatomy.network import CHANNELS, DEFAULT_ARCH, build_network
from cxrils.vision.anatomy.preprocess import prepare

log = logging.getLogger(__name__)


def _canvas_targets(sample: Sample, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image (S, S), targets (3, S, S), channel weights (3,)) float32 for one sample."""
    x = read_gray(sample.image_path)
    canvas, box = prepare(x, size)
    masks = [sample.right_lung, sample.left_lung,
             sample.heart if sample.heart is not None else np.zeros_like(sample.right_lung)]
    targets = np.stack([box.forward(m.astype(np.float32), cv2.INTER_LINEAR) for m in masks])
    weights = np.array([1.0, 1.0, 0.0 if sample.heart is None else 1.0], dtype=np.float32)
    return canvas, targets, weights


def _burn_in_marks(image: np.ndarray, rng: np.random.Generator) -> None:
    """Draw a few letters and an arrow, black or white, on a float (S, S) canvas in place."""
    s = image.shape[0]
    for _ in range(int(rng.integers(1, 4))):
        layer = np.zeros(image.shape, dtype=np.uint8)
        if rng.random() < 0.5:
            text = "".join(rng.choice(list("ABCDLR0123456789"), size=int(rng.integers(1, 3))))
            org = (int(rng.integers(0, s - 20)), int(rng.integers(20, s)))
            cv2.putText(layer, text, org, cv2.FONT_HERSHEY_SIMPLEX, float(rng.uniform(0.4, 1.2)),
                        255, int(rng.integers(1, 3)))
        else:
            p0 = rng.integers(0, s, size=2)
            p1 = np.clip(p0 + rng.integers(-s // 6, s // 6, size=2), 0, s - 1)
            cv2.arrowedLine(layer, (int(p0[0]), int(p0[1])), (int(p1[0]), int(p1[1])), 255,
                            int(rng.integers(1, 4)), tipLength=0.3)
        image[layer > 0] = float(rng.choice([0.0, 1.0]))


def _augment(images, targets, rng: np.random.Generator):
    """Random affine (shared by image and targets) and intensity jitter, on tensors
    (N, 1, S, S) and (N, 3, S, S)."""
    import torch
    import torch.nn.functional as F

    n = images.shape[0]
    angle = torch.tensor(rng.uniform(-10, 10, n) * math.pi / 180, dtype=torch.float32)
    scale = torch.tensor(rng.uniform(0.85, 1.15, n), dtype=torch.float32)
    shift = torch.tensor(rng.uniform(-0.08, 0.08, (n, 2)), dtype=torch.float32)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    images = F.grid_sample(images, grid, align_corners=False)
    targets = F.grid_sample(targets, grid, align_corners=False)
    gamma = torch.tensor(rng.uniform(0.7, 1.4, (n, 1, 1, 1)), dtype=torch.float32)
    gain = torch.tensor(rng.uniform(0.85, 1.15, (n, 1, 1, 1)), dtype=torch.float32)
    images = (images.clamp(0, 1) ** gamma * gain).clamp(0, 1)
    return images, targets


def _loss(logits, targets, weights):
    """BCE + soft Dice per channel, each channel weighted by ``weights`` (N, 3)."""
    import torch.nn.functional as F

    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none").mean(dim=(2, 3))
    prob = logits.sigmoid()
    inter = (prob * targets).sum(dim=(2, 3))
    dice = 1 - (2 * inter + 1) / (prob.sum(dim=(2, 3)) + targets.sum(dim=(2, 3)) + 1)
    return ((bce + dice) * weights).sum() / weights.sum().clamp(min=1)


def train_anatomy(
    data_root: str | Path,
    out_path: str | Path,
    *,
    epochs: int = 20,
    covid_per_epoch: int = 120,
    batch_size: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int = 1,
    arch: dict[str, Any] | None = None,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """Train the builtin network on the ``train`` split and save it as safetensors.

    Parameters
    ----------
    data_root : path
        Folder holding ``jsrt_scr`` and ``covid_ieee8023`` (``../shared/data``).
    out_path : path
        Destination ``.safetensors`` file (written atomically); the architecture, the
        channel names and the training summary go into its metadata.
    epochs, batch_size, lr, seed, threads : training settings (AdamW, one-cycle schedule).
    covid_per_epoch : int
        COVID-19 images drawn (without replacement) for each epoch, next to every JSRT
        training image; keeps an epoch short on a CPU.
    arch : dict, optional
        Architecture (keys of :data:`~cxrils.vision.anatomy.network.DEFAULT_ARCH`).
    progress : callable
        Receives one line per epoch.

    Returns
    -------
    dict
        Training summary (counts, epochs, final loss, seconds).

    Raises
    ------
    FileNotFoundError
        If the public data folders are missing.
    """
    import torch
    from safetensors.torch import save_file

    from cxrils.fsutil import atomic_path

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    arch = dict(arch or DEFAULT_ARCH)
    size = int(arch["input_size"])
    t0 = time.time()
    samples = load_samples(data_root, "train")
    if not samples:
        raise FileNotFoundError(f"{data_root}: no training images with masks found")
    prepared = [_canvas_targets(s, size) for s in samples]
    images = np.stack([p[0] for p in prepared])[:, None]
    targets = np.stack([p[1] for p in prepared])
    weights = np.stack([p[2] for p in prepared])
    progress(f"prepared {len(samples)} training images in {time.time() - t0:.0f} s")

    net = build_network(arch)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    jsrt_idx = np.array([i for i, s in enumerate(samples) if s.heart is not None])
    covid_idx = np.array([i for i, s in enumerate(samples) if s.heart is None])
    n_covid = min(covid_per_epoch, len(covid_idx))
    per_epoch = len(jsrt_idx) + n_covid
    steps_per_epoch = math.ceil(per_epoch / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps_per_epoch,
                                                pct_start=0.1)
    loss_value = float("nan")
    for epoch in range(epochs):
        net.train()
        chosen = rng.choice(covid_idx, size=n_covid, replace=False) if n_covid else covid_idx[:0]
        order = rng.permutation(np.concatenate([jsrt_idx, chosen]).astype(int))
        total = 0.0
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            xb = images[idx].copy()
            for j in range(len(idx)):
                if rng.random() < 0.3:
                    _burn_in_marks(xb[j, 0], rng)
            xt, yt = _augment(torch.from_numpy(xb), torch.from_numpy(targets[idx]), rng)
            loss = _loss(net(xt), yt, torch.from_numpy(weights[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        loss_value = total / per_epoch
        progress(f"epoch {epoch + 1}/{epochs} loss {loss_value:.4f} ({time.time() - t0:.0f} s)")

    summary = {
        "train_images": {src: sum(s.source == src for s in samples) for src in ("jsrt_scr", "covid_ieee8023")},
        "split_rule": f"sha256('<source>:<patient_id>') % 100 < {TEST_PERCENT} -> test",
        "epochs": epochs, "covid_per_epoch": n_covid, "batch_size": batch_size, "lr": lr, "seed": seed,
        "final_loss": round(loss_value, 5), "seconds": round(time.time() - t0, 1),
    }
    state = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    metadata = {"arch": json.dumps(arch), "channels": json.dumps(list(CHANNELS)),
                "training": json.dumps(summary)}
    with atomic_path(out_path, suffix=".safetensors") as tmp:
        save_file(state, str(tmp), metadata=metadata)
    return summary
