"""Training of the builtin anatomy network (``cxrils train-anatomy``).

Data: the ``train`` part of :mod:`cxrils.vision.anatomy.data` (JSRT/SCR lungs + heart,
COVID-19 v7labs lungs, COVID-QU-Ex lungs; near-duplicates of held-back images left
out). The heart term of the loss is masked out for images without a heart reference
(every image but JSRT's). A validation part (``val_percent`` of the training patients,
by a second fixed hash rule; the ``test`` split is never read) selects the epoch whose
weights are kept, by the mean over the sources of each source's mean Dice. Loss:
binary cross-entropy + soft Dice per channel (sigmoid, multi-label). Schedule: AdamW with a one-cycle (cosine-annealed) learning rate.
Augmentation: small random affine (no horizontal flip: it would swap the
patient's sides and put the heart on the wrong side), gamma/contrast jitter, and
burned-in marks (letters, arrows) like those of journal figures in the COVID-19 set.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from cxrils.vision.anatomy.data import SOURCES, TEST_PERCENT, Sample, load_split, read_gray
from cxrils.vision.anatomy.network import CHANNELS, DEFAULT_ARCH, build_network
from cxrils.vision.anatomy.preprocess import prepare

log = logging.getLogger(__name__)


def _canvas_targets(sample: Sample, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image (S, S), targets (3, S, S), channel weights (3,) float32) for one sample.

    Image and targets are uint8 (255 = 1.0) to keep thousands of images in memory: the
    canvas of :func:`prepare` is an 8-bit image over 255, so this loses nothing; the
    bilinear target fractions are rounded to 1/255."""
    x = read_gray(sample.image_path)
    canvas, box = prepare(x, size)
    masks = [sample.right_lung, sample.left_lung,
             sample.heart if sample.heart is not None else np.zeros_like(sample.right_lung)]
    targets = np.stack([box.forward(m.astype(np.float32), cv2.INTER_LINEAR) for m in masks])
    weights = np.array([1.0, 1.0, 0.0 if sample.heart is None else 1.0], dtype=np.float32)
    return _to_uint8(canvas), _to_uint8(targets), weights


def _to_uint8(a: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(a, 0.0, 1.0) * 255).astype(np.uint8)


def _to_float(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) / 255.0


def one_cycle_lr(fraction: float, max_lr: float, warmup: float = 0.1) -> float:
    """One-cycle learning rate at ``fraction`` in [0, 1] of training, the schedule of
    ``torch.optim.lr_scheduler.OneCycleLR`` with its defaults: cosine warm-up from
    ``max_lr / 25`` over the first ``warmup`` part, then cosine annealing to
    ``max_lr / 25 / 1e4``."""
    start = max_lr / 25
    end = start / 1e4
    if fraction < warmup:
        lo, hi, t = start, max_lr, fraction / warmup
    else:
        lo, hi, t = max_lr, end, min((fraction - warmup) / (1 - warmup), 1.0)
    return hi + (lo - hi) * 0.5 * (1 + math.cos(math.pi * t))


def is_validation(source: str, patient_id: str, val_percent: int) -> bool:
    """True for the training-split patients held out for validation (fixed hash rule,
    independent of :func:`cxrils.vision.anatomy.data.split_of`)."""
    digest = hashlib.sha256(f"validation:{source}:{patient_id}".encode("utf-8")).hexdigest()
    return int(digest, 16) % 100 < val_percent


def _val_dice(net, images: np.ndarray, targets: np.ndarray, weights: np.ndarray,
              groups: np.ndarray) -> tuple[float, dict[str, float]]:
    """Validation Dice at the canvas size, probabilities thresholded at 0.5.

    ``images`` (N, 1, S, S) and ``targets`` (N, 3, S, S) uint8, ``weights`` (N, 3),
    ``groups`` (N,) the source of each image. Returns the mean over the sources of each
    source's mean Dice over its channels with a reference (weights > 0), so that the
    largest source does not decide alone, and the per-source means."""
    import torch

    net.eval()
    scores: list[np.ndarray] = []
    with torch.no_grad():
        for i in range(0, len(images), 8):
            pred = net(torch.from_numpy(_to_float(images[i:i + 8]))).sigmoid().numpy() > 0.5
            ref = targets[i:i + 8] > 127
            inter = (pred & ref).sum(axis=(2, 3))
            total = pred.sum(axis=(2, 3)) + ref.sum(axis=(2, 3))
            dice = np.where(total > 0, 2 * inter / np.maximum(total, 1), 1.0)
            w = weights[i:i + 8] > 0
            scores.extend((dice * w).sum(axis=1) / w.sum(axis=1))
    per_image = np.asarray(scores)
    per_source = {str(g): float(per_image[groups == g].mean()) for g in dict.fromkeys(groups.tolist())}
    return float(np.mean(list(per_source.values()))), per_source


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
    qu_ex_per_epoch: int = 240,
    batch_size: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int = 1,
    val_percent: int = 10,
    max_seconds: float | None = None,
    init: str | Path | None = None,
    arch: dict[str, Any] | None = None,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """Train the builtin network on the ``train`` split and save it as safetensors.

    Parameters
    ----------
    data_root : path
        Folder holding ``jsrt_scr``, ``covid_ieee8023`` and ``covid_qu_ex``
        (``../shared/data``).
    out_path : path
        Destination ``.safetensors`` file (written atomically); the architecture, the
        channel names and the training summary go into its metadata.
    epochs, batch_size, lr, seed, threads : training settings (AdamW, one-cycle schedule).
        ``epochs`` is the most epochs run.
    val_percent : int
        Percent of the training patients held out for validation (:func:`is_validation`);
        the weights of the epoch with the best validation Dice are saved. With 0, or
        when no patient falls in the validation part, the last epoch's weights are saved.
    max_seconds : float, optional
        Wall-clock budget of the training loop (after data preparation). The learning
        rate follows :func:`one_cycle_lr` over whichever is further along, the steps or
        the elapsed time, so training anneals and stops within the budget on a loaded
        machine.
    covid_per_epoch, qu_ex_per_epoch : int
        COVID-19 v7labs and COVID-QU-Ex images drawn (without replacement) for each
        epoch, next to every JSRT training image; keeps an epoch short on a CPU and
        keeps JSRT, the only source of hearts, from being drowned out.
    init : path, optional
        A builtin weights file to start from (fine-tuning); its architecture (from its
        metadata) is used and ``arch`` is ignored.
    arch : dict, optional
        Architecture (keys of :data:`~cxrils.vision.anatomy.network.DEFAULT_ARCH`).
    progress : callable
        Receives one line per epoch.

    Returns
    -------
    dict
        Training summary (counts, epochs, final loss, wall ``seconds`` and the
        process's ``cpu_seconds`` summed over its threads, which a loaded machine
        stretches less).

    Raises
    ------
    FileNotFoundError
        If the public data folders or the ``init`` file are missing.
    ValueError
        If ``init`` lacks the builtin network's ``arch`` metadata.
    """
    import torch
    from safetensors.torch import save_file

    from cxrils.fsutil import atomic_path

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    arch = dict(arch or DEFAULT_ARCH)
    init_state = None
    if init is not None:
        from safetensors import safe_open
        from safetensors.torch import load_file

        if not Path(init).is_file():
            raise FileNotFoundError(f"{init}: weights file to fine-tune from not found")
        with safe_open(str(init), framework="pt") as fh:
            meta = fh.metadata() or {}
        if "arch" not in meta:
            raise ValueError(f"{init}: no 'arch' metadata; not a builtin anatomy weights file")
        arch = json.loads(meta["arch"])
        init_state = load_file(str(init))
    size = int(arch["input_size"])
    t0, cpu0 = time.time(), time.process_time()
    split = load_split(data_root)
    all_train = split.train
    if not all_train:
        raise FileNotFoundError(f"{data_root}: no training images with masks found")
    val_samples = [s for s in all_train if is_validation(s.source, s.patient_id, val_percent)]
    samples = [s for s in all_train if not is_validation(s.source, s.patient_id, val_percent)]
    if not samples:
        raise FileNotFoundError(f"{data_root}: every training image fell into the validation part")

    def stack(part: list[Sample]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        prepared = [_canvas_targets(s, size) for s in part]
        return (np.stack([p[0] for p in prepared])[:, None], np.stack([p[1] for p in prepared]),
                np.stack([p[2] for p in prepared]), np.array([s.source for s in part]))

    images, targets, weights, _ = stack(samples)
    val = stack(val_samples) if val_samples else None
    progress(f"prepared {len(samples)} training + {len(val_samples)} validation images "
             f"in {time.time() - t0:.0f} s")

    net = build_network(arch)
    if init_state is not None:
        net.load_state_dict(init_state)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    by_source = {src: np.array([i for i, s in enumerate(samples) if s.source == src], dtype=int)
                 for src in SOURCES}
    draws = {"jsrt_scr": len(by_source["jsrt_scr"]),
             "covid_ieee8023": min(covid_per_epoch, len(by_source["covid_ieee8023"])),
             "covid_qu_ex": min(qu_ex_per_epoch, len(by_source["covid_qu_ex"]))}
    per_epoch = sum(draws.values())
    steps_per_epoch = math.ceil(per_epoch / batch_size)
    total_steps = epochs * steps_per_epoch
    step = 0

    def progress_fraction() -> float:
        done = step / total_steps
        if max_seconds is not None:
            done = max(done, (time.time() - t_start) / max_seconds)
        return min(done, 1.0)

    t_start = time.time()
    loss_value = float("nan")
    best: tuple[float, int, dict[str, Any], dict[str, float]] | None = None
    epochs_run = 0
    for epoch in range(epochs):
        net.train()
        order = rng.permutation(np.concatenate([rng.choice(by_source[src], size=n, replace=False)
                                                for src, n in draws.items()]).astype(int))
        total = 0.0
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            xb = _to_float(images[idx])
            for j in range(len(idx)):
                if rng.random() < 0.3:
                    _burn_in_marks(xb[j, 0], rng)
            xt, yt = _augment(torch.from_numpy(xb), torch.from_numpy(_to_float(targets[idx])), rng)
            loss = _loss(net(xt), yt, torch.from_numpy(weights[idx]))
            for group in opt.param_groups:
                group["lr"] = one_cycle_lr(progress_fraction(), lr)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            total += loss.item() * len(idx)
        loss_value = total / per_epoch
        epochs_run = epoch + 1
        line = f"epoch {epoch + 1}/{epochs} loss {loss_value:.4f}"
        if val is not None:
            score, per_source = _val_dice(net, *val)
            line += f" val Dice {score:.4f} (" + ", ".join(f"{k} {v:.4f}" for k, v in per_source.items()) + ")"
            if best is None or score > best[0]:
                best = (score, epoch + 1, {k: v.detach().clone() for k, v in net.state_dict().items()},
                        per_source)
        progress(f"{line} ({time.time() - t0:.0f} s)")
        if progress_fraction() >= 1.0:
            if epoch + 1 < epochs:
                progress(f"stopping: wall-clock budget of {max_seconds:.0f} s used")
            break
    if best is not None:
        net.load_state_dict(best[2])

    summary = {
        "train_images": {src: sum(s.source == src for s in samples) for src in SOURCES},
        "validation_images": {src: sum(s.source == src for s in val_samples) for src in SOURCES},
        "near_duplicates_left_out": {src: sum(s.source == src for s, _ in split.excluded) for src in SOURCES},
        "split_rule": f"sha256('<source>:<patient_id>') % 100 < {TEST_PERCENT} -> test",
        "validation_rule": f"sha256('validation:<source>:<patient_id>') % 100 < {val_percent} (train split only)",
        "init": Path(init).name if init is not None else None,
        "epochs": epochs, "epochs_run": epochs_run,
        "best_epoch": best[1] if best else epochs_run,
        "best_val_dice": round(best[0], 5) if best else None,
        "best_val_dice_per_source": {k: round(v, 5) for k, v in best[3].items()} if best else None,
        "per_epoch": draws, "batch_size": batch_size, "lr": lr, "seed": seed,
        "final_loss": round(loss_value, 5), "seconds": round(time.time() - t0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
    }
    state = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    metadata = {"arch": json.dumps(arch), "channels": json.dumps(list(CHANNELS)),
                "training": json.dumps(summary)}
    with atomic_path(out_path, suffix=".safetensors") as tmp:
        save_file(state, str(tmp), metadata=metadata)
    return summary
