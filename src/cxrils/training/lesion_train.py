"""The training loop shared by the built-in lesion networks (``cxrils train-detector``,
``cxrils train-anomaly``).

Each trainer gives its network, a batch function (augmented inputs and targets) and a
validation score; this module runs AdamW with a one-cycle learning rate
(``torch.optim.lr_scheduler.OneCycleLR``), scores the validation images after every
epoch, keeps the weights of the best epoch and writes them as safetensors with their
metadata. The validation images are a fixed hash share of the training role's
tuning-part images (:func:`split_validation`); the report part is never read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cxrils.config import LesionDataConfig, LesionTrainConfig, SyntheticConfig
from cxrils.fsutil import atomic_path, sha256_file
from cxrils.training.lesion_data import JsrtBackground, LesionSample, jsrt_backgrounds, training_samples
from cxrils.training.synthetic import draw_lesions
from cxrils.vision.lesion_nets import network_mask, weights_metadata

log = logging.getLogger(__name__)


def split_validation(ids: Sequence[str], fraction: float, salt: str) -> tuple[list[int], list[int]]:
    """Indices (train, validation) of ``ids``: an id is validation when
    ``sha256("<salt>:<id>")`` modulo 10,000 is below ``fraction * 10,000`` (fixed)."""
    val = [
        i
        for i, s in enumerate(ids)
        if int(hashlib.sha256(f"{salt}:{s}".encode()).hexdigest(), 16) % 10_000 < fraction * 10_000
    ]
    vs = set(val)
    return [i for i in range(len(ids)) if i not in vs], val


def role_samples(data_root: str | Path, role: str, data_cfg: LesionDataConfig) -> list[LesionSample]:
    """:func:`cxrils.training.lesion_data.training_samples` of a role.

    Raises
    ------
    ValueError
        If there are none.
    FileNotFoundError
        If the COVID-QU-Ex folder is missing.
    """
    samples = training_samples(data_root, role, data_cfg)
    if not samples:
        raise ValueError(f"{data_root}: no COVID-QU-Ex tuning images for the {role} model")
    return samples


@dataclass(frozen=True)
class TrainItem:
    """One training image of a built-in lesion network, on its S x S grid.

    Attributes
    ----------
    small : numpy.ndarray, uint8, shape (S, S)
        The image squashed to S x S (area interpolation), not yet equalised
        (:func:`cxrils.vision.lesion_nets.network_input` = its histogram equalisation).
    lesion : numpy.ndarray, float32, shape (S, S)
        Share of each cell covered by the human lesion mask.
    right, left : numpy.ndarray, bool, shape (S, S)
        The lungs (patient sides), for synthetic lesions and box filtering.
    positive : bool
        A COVID-19 image (a human lesion mask exists).
    """

    small: np.ndarray
    lesion: np.ndarray
    right: np.ndarray
    left: np.ndarray
    positive: bool


def train_items(samples: Sequence[LesionSample | JsrtBackground], size: int) -> list[TrainItem]:
    """:class:`TrainItem` of each sample at side ``size``."""
    out = []
    for smp in samples:
        x = smp.image()
        right, left = smp.lungs()
        small = cv2.resize(np.ascontiguousarray(x), (size, size), interpolation=cv2.INTER_AREA)
        lesion = cv2.resize(smp.lesion(right.shape).astype(np.float32), (size, size), interpolation=cv2.INTER_AREA)
        out.append(
            TrainItem(small, lesion, network_mask(right, size) > 0, network_mask(left, size) > 0, bool(smp.positive))
        )
    return out


def item_input(
    item: TrainItem, rng: np.random.Generator, synth: SyntheticConfig | None
) -> tuple[np.ndarray, np.ndarray]:
    """Network input and lesion target of one item, before the affine augmentation.

    With ``synth``, synthetic lesions (:func:`cxrils.training.synthetic.draw_lesions`) are
    drawn on a share ``synth.lesion_p_covid`` of the COVID-19 images and
    ``synth.lesion_p_normal`` of the others, and join the target.

    Returns
    -------
    x : numpy.ndarray, float32, shape (S, S)
        Histogram-equalised image in [0, 1] (as :func:`~cxrils.vision.lesion_nets.network_input`).
    lesion : numpy.ndarray, float32, shape (S, S)
        Lesion share per cell in [0, 1].
    """
    small, lesion = item.small, item.lesion
    p = 0.0 if synth is None else (synth.lesion_p_covid if item.positive else synth.lesion_p_normal)
    if p > 0 and rng.random() < p:
        drawn, region = draw_lesions(small.astype(np.float32) / 255.0, item.right, item.left, rng, synth)
        small = np.rint(drawn * 255).astype(np.uint8)
        lesion = np.maximum(lesion, region.astype(np.float32))
    return cv2.equalizeHist(small).astype(np.float32) / 255.0, lesion


def lesion_training_data(
    data_root: str | Path, role: str, data_cfg: LesionDataConfig, synth: SyntheticConfig | None
) -> tuple[list[LesionSample], list[JsrtBackground]]:
    """(COVID-QU-Ex samples of the role, JSRT backgrounds of the role or none without ``synth``)."""
    return role_samples(data_root, role, data_cfg), ([] if synth is None else jsrt_backgrounds(data_root, role))


def recorded_training(path: str | Path) -> dict:
    """The ``training`` summary stored in a builtin lesion model's weights metadata
    (:func:`save_weights`, read by :func:`cxrils.vision.lesion_nets.weights_metadata`);
    ``{}`` when the file has none.

    Raises
    ------
    ValueError
        If the file is missing or its metadata cannot be read.
    """
    training = weights_metadata(path).get("training", {})
    return training if isinstance(training, dict) else {}


def init_record(init: str | Path | None) -> dict | None:
    """What a run fine-tuned from, for its summary: the file's name, SHA-256 and the
    half it recorded (``role``, None for files written before roles were recorded);
    None without ``init``."""
    if init is None:
        return None
    return {"file": Path(init).name, "sha256": sha256_file(init), "role": recorded_training(init).get("role")}


def run_summary(
    role: str,
    samples: list[LesionSample],
    n_train: int,
    n_val: int,
    result: dict,
    backgrounds: Sequence[JsrtBackground] = (),
    synth: SyntheticConfig | None = None,
    init: str | Path | None = None,
) -> dict:
    """The JSON-ready summary of a training run stored with its weights: data, the half
    trained on (``role``), the file fine-tuned from (``init``, :func:`init_record`), image
    counts, best epoch, per-epoch history (4 decimals) and seconds."""
    n_pos = sum(s.positive for s in samples)
    return {
        "data": f"COVID-QU-Ex infection segmentation, train split: '{role}' half of the tuning part "
        "(cxrils.training.lesion_data), copies of other sources' and report-part images excluded"
        + (
            f"; plus {len(backgrounds)} JSRT nodule images of the role as backgrounds of synthetic lesions"
            if backgrounds
            else ""
        ),
        "role": role,
        "init": init_record(init),
        "synthetic": None if synth is None else asdict(synth),
        "images": len(samples),
        "covid_images": n_pos,
        "normal_images": len(samples) - n_pos,
        "jsrt_backgrounds": len(backgrounds),
        "train_images": n_train,
        "validation_images": n_val,
        "best_epoch": result["best_epoch"],
        "history": [{k: round(v, 4) if isinstance(v, float) else v for k, v in h.items()} for h in result["history"]],
        "train_seconds": round(result["train_seconds"], 1),
    }


def fit(
    net,
    n_train: int,
    make_batch: Callable[[list[int], np.random.Generator], tuple[Any, Any]],
    loss_fn: Callable[[Any, Any], Any],
    validate: Callable[[], float],
    cfg: LesionTrainConfig,
    *,
    progress: bool = True,
    init: str | Path | None = None,
) -> dict:
    """Train ``net`` in place and load the weights of its best validation epoch.

    Parameters
    ----------
    net : torch.nn.Module
        Built by the caller after ``torch.manual_seed(cfg.seed)``, so that its initial
        weights, and not only the batches, follow the seed (fit seeds torch and numpy
        again for the batch order and augmentation).
    n_train : int
        Number of training items; batches are drawn from a fresh permutation per epoch.
    make_batch : callable
        ``make_batch(indices, rng) -> (inputs, targets)`` (augmented).
    loss_fn : callable
        ``loss_fn(net(inputs), targets) -> scalar tensor``.
    validate : callable
        Higher-is-better score of the current weights on the validation images (the
        net is put in eval mode around the call).
    cfg : LesionTrainConfig
    init : path, optional
        A weights file of the same network to start from (fine-tuning).

    Returns
    -------
    dict
        ``best_epoch``, ``best_score``, ``history`` (per epoch: loss, score, seconds),
        ``train_seconds``.

    Raises
    ------
    FileNotFoundError, ValueError
        If ``init`` is missing or does not fit ``net``.
    """
    import copy

    import torch

    from cxrils.progress import progress_bar

    if init is not None:
        from safetensors.torch import load_file

        if not Path(init).is_file():
            raise FileNotFoundError(f"{init}: weights file to fine-tune from not found")
        try:
            net.load_state_dict(load_file(str(init)))
        except RuntimeError as err:
            raise ValueError(f"{init}: does not fit this network: {err}") from err

    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    steps_per_epoch = max(1, n_train // cfg.batch_size)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.epochs * steps_per_epoch)
    best: tuple[float, int, dict] | None = None
    history = []
    t_start = time.perf_counter()
    for epoch in range(cfg.epochs):
        t0 = time.perf_counter()
        net.train()
        order = rng.permutation(n_train)
        losses = []
        bar = progress_bar(
            range(steps_per_epoch),
            desc=f"epoch {epoch + 1}/{cfg.epochs}",
            disable=not progress,
            unit="batch",
            leave=False,
        )
        for b in bar:
            inputs, targets = make_batch([int(i) for i in order[b * cfg.batch_size : (b + 1) * cfg.batch_size]], rng)
            loss = loss_fn(net(inputs), targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", refresh=False)
        net.eval()
        with torch.inference_mode():
            score = float(validate())
        history.append(
            {"epoch": epoch + 1, "loss": float(np.mean(losses)), "score": score, "seconds": time.perf_counter() - t0}
        )
        log.info(
            "epoch %d: loss %.4f, validation %.4f (%.0f s)",
            epoch + 1,
            history[-1]["loss"],
            score,
            history[-1]["seconds"],
        )
        if progress:
            print(
                f"epoch {epoch + 1}/{cfg.epochs}: loss {history[-1]['loss']:.4f}, validation {score:.4f}, "
                f"{history[-1]['seconds']:.0f} s",
                flush=True,
            )
        if best is None or score > best[0]:
            best = (score, epoch + 1, copy.deepcopy(net.state_dict()))
    net.load_state_dict(best[2])
    net.eval()
    return {
        "best_epoch": best[1],
        "best_score": best[0],
        "history": history,
        "train_seconds": time.perf_counter() - t_start,
    }


def save_weights(net, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Write ``net``'s state dict to ``path`` (safetensors, atomically) with
    ``metadata`` stored as JSON strings (``safetensors`` metadata are str -> str)."""
    from safetensors.torch import save_file

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in net.state_dict().items()}
    with atomic_path(out, suffix=".safetensors") as tmp:
        save_file(state, str(tmp), metadata={k: json.dumps(v) for k, v in metadata.items()})
    return out
