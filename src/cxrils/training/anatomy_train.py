"""Training of the builtin anatomy network (``cxrils train-anatomy``).

Data: the ``train`` part of :mod:`cxrils.training.anatomy_data` (JSRT/SCR lungs + heart,
COVID-19 v7labs lungs, COVID-QU-Ex lungs; near-duplicates of held-back images left
out). The sources draw lungs in two conventions (:data:`cxrils.training.anatomy_data.FULL_LUNG_SOURCES`),
and each teaches the channels it knows (:mod:`cxrils.vision.anatomy.network`):

- JSRT/SCR and COVID-QU-Ex (visible lungs): the visible-lung channels, the heart (JSRT
  only), and the whole-lung channels everywhere except the medial gap between the two
  visible lungs and the heart (:func:`medial_gap`), where the whole lung may or may not
  reach;
- COVID-19 v7labs (whole lungs): the whole-lung channels only.

Terms without a reference are masked out of the loss, per channel and per pixel. A
validation part (``val_percent`` of the training patients, by a second fixed hash rule;
the ``test`` split is never read) selects the epoch whose weights are kept, by the mean
over the sources of each source's mean Dice on its fully known channels. Loss: binary
cross-entropy + soft Dice per channel (sigmoid, multi-label). Schedule: AdamW with a
one-cycle (cosine-annealed) learning rate. Augmentation: small random affine (no
horizontal flip: it would swap the patient's sides and put the heart on the wrong side),
gamma/contrast jitter, burned-in marks (letters, arrows) like those of journal figures in
the COVID-19 set, and synthetic findings of adult films (:mod:`cxrils.training.synthetic`,
:class:`cxrils.config.SyntheticConfig`): a pleural effusion (the visible lung loses what
the fluid covers, the whole lung keeps it), an airspace opacity or plate atelectasis (both
lung masks unchanged), an enlarged heart (everything warped alike), tubes and wires.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cxrils.config import SyntheticConfig
from cxrils.training import synthetic
from cxrils.training.anatomy_data import FULL_LUNG_SOURCES, SOURCES, SPLIT, Sample, load_split, read_gray
from cxrils.vision.anatomy.network import CHANNELS, DEFAULT_ARCH, FULL, HEART, VISIBLE, build_network
from cxrils.vision.anatomy.preprocess import prepare

log = logging.getLogger(__name__)


def medial_gap(right: np.ndarray, left: np.ndarray, heart: np.ndarray | None) -> np.ndarray:
    """Where a whole lung may reach beyond the visible lungs: bool (H, W).

    In every row holding both visible lungs, the columns between the patient's right
    lung's last pixel (its medial edge, on the image's left) and the left lung's first
    pixel: the mediastinum, the heart and the lung behind it. Plus the heart mask when
    there is one, grown by 2 pixels so that the visible lungs' medial borders are not
    scored either.

    Parameters
    ----------
    right, left : numpy.ndarray, bool, shape (H, W)
        Visible lungs, patient sides.
    heart : numpy.ndarray, bool, shape (H, W), or None
    """
    h, w = right.shape
    gap = np.zeros((h, w), dtype=bool)
    both = right.any(axis=1) & left.any(axis=1)
    medial_right = w - 1 - np.argmax(right[:, ::-1], axis=1)  # last column of the right lung
    medial_left = np.argmax(left, axis=1)  # first column of the left lung
    cols = np.arange(w)[None, :]
    gap[both] = ((cols > medial_right[:, None]) & (cols < medial_left[:, None]))[both]
    if heart is not None:
        gap |= heart
    return cv2.dilate(gap.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0


def _canvas_targets(sample: Sample, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(image (S, S), targets (5, S, S), channel weights (5,) float32, gap (S, S)) of one sample.

    Channels as :data:`~cxrils.vision.anatomy.network.CHANNELS`. A visible-lung source
    fills the whole-lung channels with its visible lungs, which hold outside ``gap``
    (:func:`medial_gap`: 1 where the whole lung is unknown); a whole-lung source
    (:data:`~cxrils.training.anatomy_data.FULL_LUNG_SOURCES`) has weight 0 on the visible
    channels and the heart, and an empty gap. Image, targets and gap are uint8 (255 = 1.0
    for image and targets) to keep thousands of images in memory: the canvas of
    :func:`prepare` is an 8-bit image over 255, so this loses nothing; the bilinear target
    fractions are rounded to 1/255."""
    x = read_gray(sample.image_path)
    canvas, box = prepare(x, size)
    heart = sample.heart if sample.heart is not None else np.zeros_like(sample.right_lung)
    masks = [sample.right_lung, sample.left_lung, heart, sample.right_lung, sample.left_lung]
    targets = np.stack([box.forward(m.astype(np.float32), cv2.INTER_LINEAR) for m in masks])
    if sample.source in FULL_LUNG_SOURCES:
        weights = np.array([0.0, 0.0, 0.0, 1.0, 1.0], dtype=np.float32)
        gap = np.zeros((size, size), dtype=np.uint8)
    else:
        weights = np.array([1.0, 1.0, 0.0 if sample.heart is None else 1.0, 1.0, 1.0], dtype=np.float32)
        gap = medial_gap(
            targets[0] > 0.5, targets[1] > 0.5, targets[2] > 0.5 if sample.heart is not None else None
        ).astype(np.uint8)
    return _to_uint8(canvas), _to_uint8(targets), weights, gap


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


def load_overlapping(net, state: dict) -> list[str]:
    """Load ``state`` into ``net``; a tensor whose shape differs (an output layer of
    another channel count) takes the overlapping leading slice of the stored one on every
    dimension, its other entries keeping their fresh initialisation.

    Returns
    -------
    list of str
        Names of the tensors loaded partially.

    Raises
    ------
    ValueError
        If ``state`` lacks a tensor of ``net`` or has one ``net`` does not (another
        architecture).
    """
    own = net.state_dict()
    if set(own) != set(state):
        raise ValueError(
            f"init weights have other tensors: missing {sorted(set(own) - set(state))[:3]}, "
            f"unexpected {sorted(set(state) - set(own))[:3]}"
        )
    partial = []
    for name, tensor in own.items():
        stored = state[name]
        if tuple(stored.shape) == tuple(tensor.shape):
            own[name] = stored
            continue
        if stored.dim() != tensor.dim():
            raise ValueError(f"init tensor {name} has {stored.dim()} dimensions, the network {tensor.dim()}")
        merged = tensor.clone()
        overlap = tuple(slice(0, min(a, b)) for a, b in zip(stored.shape, tensor.shape))
        merged[overlap] = stored[overlap]
        own[name] = merged
        partial.append(name)
    net.load_state_dict(own)
    return partial


def is_validation(source: str, patient_id: str, val_percent: int) -> bool:
    """True for the training-split patients held out for validation (fixed hash rule,
    independent of :func:`cxrils.training.anatomy_data.split_of`)."""
    digest = hashlib.sha256(f"validation:{source}:{patient_id}".encode()).hexdigest()
    return int(digest, 16) % 100 < val_percent


def validation_weights(weights: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Channel weights (N, C) of the validation score: a channel counts only where its
    reference is known everywhere, so the whole-lung channels of images with a medial gap
    (visible-lung sources) are left out."""
    out = weights.copy()
    partial = gaps.reshape(len(gaps), -1).any(axis=1)
    out[np.ix_(partial, list(FULL))] = 0.0
    return out


def _val_dice(
    net, images: np.ndarray, targets: np.ndarray, weights: np.ndarray, groups: np.ndarray
) -> tuple[float, dict[str, float]]:
    """Validation Dice at the canvas size, probabilities thresholded at 0.5.

    ``images`` (N, 1, S, S) and ``targets`` (N, C, S, S) uint8, ``weights`` (N, C)
    (:func:`validation_weights`), ``groups`` (N,) the source of each image. Returns the mean over the sources of each
    source's mean Dice over its channels with a reference (weights > 0), so that the
    largest source does not decide alone, and the per-source means."""
    import torch

    net.eval()
    scores: list[np.ndarray] = []
    with torch.no_grad():
        for i in range(0, len(images), 8):
            pred = net(torch.from_numpy(_to_float(images[i : i + 8]))).sigmoid().numpy() > 0.5
            ref = targets[i : i + 8] > 127
            inter = (pred & ref).sum(axis=(2, 3))
            total = pred.sum(axis=(2, 3)) + ref.sum(axis=(2, 3))
            dice = np.where(total > 0, 2 * inter / np.maximum(total, 1), 1.0)
            w = weights[i : i + 8] > 0
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
            cv2.putText(
                layer, text, org, cv2.FONT_HERSHEY_SIMPLEX, float(rng.uniform(0.4, 1.2)), 255, int(rng.integers(1, 3))
            )
        else:
            p0 = rng.integers(0, s, size=2)
            p1 = np.clip(p0 + rng.integers(-s // 6, s // 6, size=2), 0, s - 1)
            cv2.arrowedLine(
                layer, (int(p0[0]), int(p0[1])), (int(p1[0]), int(p1[1])), 255, int(rng.integers(1, 4)), tipLength=0.3
            )
        image[layer > 0] = float(rng.choice([0.0, 1.0]))


def _synthetic_findings(
    image: np.ndarray,
    targets: np.ndarray,
    weights: np.ndarray,
    gap: np.ndarray,
    rng: np.random.Generator,
    cfg: SyntheticConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw synthetic findings on one canvas (module docstring), in place of a copy.

    Parameters
    ----------
    image : numpy.ndarray, float32, shape (S, S), in [0, 1]
    targets : numpy.ndarray, float32, shape (5, S, S), in [0, 1]
    weights : numpy.ndarray, float32, shape (5,)
        The sample's channel weights (a heart is enlarged only where it is known).
    gap : numpy.ndarray, float32, shape (S, S)
        1 where the whole lung is unknown (:func:`medial_gap`).
    rng : numpy.random.Generator
    cfg : SyntheticConfig

    Returns
    -------
    image, targets, gap : new arrays of the same shapes.
    """
    targets = targets.copy()
    if weights[HEART] > 0 and rng.random() < cfg.p_heart:
        map_x, map_y = synthetic.heart_warp(image.shape, targets[HEART] > 0.5, rng.uniform(*cfg.heart_factor))
        image = cv2.remap(image, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        targets = np.stack([cv2.remap(t, map_x, map_y, cv2.INTER_LINEAR) for t in targets])
        gap = cv2.remap(gap, map_x, map_y, cv2.INTER_NEAREST)
    for side, vis, full in (("right", VISIBLE[0], FULL[0]), ("left", VISIBLE[1], FULL[1])):
        lung = targets[full] > 0.5
        if rng.random() < cfg.p_effusion / 2:
            region = synthetic.effusion_region(lung, side, rng, cfg)
            image = synthetic.add_density(image, region, rng, cfg)
            targets[vis][region] = 0.0
        if rng.random() < cfg.p_blob / 2:
            maker = synthetic.blob_region if rng.random() < 0.75 else synthetic.band_region
            image = synthetic.add_density(
                image, maker(lung, rng, cfg), rng, cfg, edge_sigma=cfg.blob_edge_sigma, patchy=True
            )
    if rng.random() < cfg.p_lines:
        image = synthetic.draw_lines(image, rng, cfg)
    return image, targets, gap


def _augment(images, targets, rng: np.random.Generator):
    """Random affine (shared by image and targets) and intensity jitter, on tensors
    (N, 1, S, S) and (N, C, S, S)."""
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
    """BCE + soft Dice per channel over the pixels of weight 1.

    ``logits``, ``targets`` and ``weights`` are (N, C, S, S); a pixel of weight 0 takes no
    part in either term, and a channel of an image without any weighted pixel is left
    out of the mean."""
    import torch.nn.functional as F

    bce_px = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    area = weights.sum(dim=(2, 3))
    bce = (bce_px * weights).sum(dim=(2, 3)) / area.clamp(min=1)
    prob = logits.sigmoid() * weights
    t = targets * weights
    inter = (prob * t).sum(dim=(2, 3))
    dice = 1 - (2 * inter + 1) / (prob.sum(dim=(2, 3)) + t.sum(dim=(2, 3)) + 1)
    counted = (area > 0).float()
    return ((bce + dice) * counted).sum() / counted.sum().clamp(min=1)


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
    synthetic_cfg: SyntheticConfig | None = None,
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
        metadata) is used and ``arch`` is ignored. A file of another channel list (an
        older release) loads by :func:`load_overlapping`.
    arch : dict, optional
        Architecture (keys of :data:`~cxrils.vision.anatomy.network.DEFAULT_ARCH`).
    synthetic_cfg : SyntheticConfig, optional
        Synthetic findings drawn on training images (defaults when None).
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
    synth = synthetic_cfg or SyntheticConfig()
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

    def stack(part: list[Sample]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        prepared = [_canvas_targets(s, size) for s in part]
        return (
            np.stack([p[0] for p in prepared])[:, None],
            np.stack([p[1] for p in prepared]),
            np.stack([p[2] for p in prepared]),
            np.stack([p[3] for p in prepared]),
            np.array([s.source for s in part]),
        )

    images, targets, weights, gaps, _ = stack(samples)
    val = None
    if val_samples:
        v_images, v_targets, v_weights, v_gaps, v_groups = stack(val_samples)
        val = (v_images, v_targets, validation_weights(v_weights, v_gaps), v_groups)
    progress(f"prepared {len(samples)} training + {len(val_samples)} validation images in {time.time() - t0:.0f} s")

    net = build_network(arch)
    fresh: list[str] = []
    if init_state is not None:
        fresh = load_overlapping(net, init_state)
        if fresh:
            progress(
                f"fine-tuning: {len(fresh)} tensors of another shape start from their overlap "
                f"with the init file: {', '.join(fresh)}"
            )
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    by_source = {src: np.array([i for i, s in enumerate(samples) if s.source == src], dtype=int) for src in SOURCES}
    draws = {
        "jsrt_scr": len(by_source["jsrt_scr"]),
        "covid_ieee8023": min(covid_per_epoch, len(by_source["covid_ieee8023"])),
        "covid_qu_ex": min(qu_ex_per_epoch, len(by_source["covid_qu_ex"])),
    }
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
        order = rng.permutation(
            np.concatenate([rng.choice(by_source[src], size=n, replace=False) for src, n in draws.items()]).astype(int)
        )
        total = 0.0
        for i in range(0, len(order), batch_size):
            idx = order[i : i + batch_size]
            xb, yb, gb = _to_float(images[idx]), _to_float(targets[idx]), gaps[idx].astype(np.float32)
            for j in range(len(idx)):
                xb[j, 0], yb[j], gb[j] = _synthetic_findings(xb[j, 0], yb[j], weights[idx[j]], gb[j], rng, synth)
                if rng.random() < 0.3:
                    _burn_in_marks(xb[j, 0], rng)
            xt, yg = _augment(torch.from_numpy(xb), torch.from_numpy(np.concatenate([yb, gb[:, None]], 1)), rng)
            yt, known = yg[:, :-1], (yg[:, -1:] < 0.5).float()
            pixel_w = torch.from_numpy(weights[idx])[:, :, None, None].expand_as(yt).clone()
            pixel_w[:, list(FULL)] *= known
            loss = _loss(net(xt), yt, pixel_w)
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
                best = (score, epoch + 1, {k: v.detach().clone() for k, v in net.state_dict().items()}, per_source)
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
        "split_rule": f"sha256('<source>:<patient_id>') % 100 < {SPLIT.test_percent} -> test",
        "validation_rule": f"sha256('validation:<source>:<patient_id>') % 100 < {val_percent} (train split only)",
        "init": Path(init).name if init is not None else None,
        "init_tensors_reshaped": fresh,
        "synthetic": dataclasses.asdict(synth),
        "epochs": epochs,
        "epochs_run": epochs_run,
        "best_epoch": best[1] if best else epochs_run,
        "best_val_dice": round(best[0], 5) if best else None,
        "best_val_dice_per_source": {k: round(v, 5) for k, v in best[3].items()} if best else None,
        "per_epoch": draws,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "final_loss": round(loss_value, 5),
        "seconds": round(time.time() - t0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
    }
    state = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    metadata = {"arch": json.dumps(arch), "channels": json.dumps(list(CHANNELS)), "training": json.dumps(summary)}
    with atomic_path(out_path, suffix=".safetensors") as tmp:
        save_file(state, str(tmp), metadata=metadata)
    return summary
