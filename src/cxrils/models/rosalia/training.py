"""Training ROSALIA with accelerate (paper section 5, Appendix F).

AdamW (lr 3e-4, betas 0.9/0.95, no weight decay), 100 warm-up steps then linear decay to 0
(DeepSpeed's WarmupDecayLR), gradient clipping 1.0 (train_ds.py ``ds_config``), 15 epochs,
total batch 256 reached by gradient accumulation over micro-batches,
1:1 positive/negative mini-batches (:class:`cxrils.dataset.BalancedBatchSampler`), an
epoch being twice the positives (:func:`epoch_samples`, train_ds.py ``--batch_balance``),
the mask losses on SAM's padded 1024 x 1024 frame as upstream's (see
:mod:`cxrils.models.rosalia.modeling`), and
histogram equalisation with probability 0.5 (:class:`cxrils.dataset.HistogramEqualization`).
For several GPUs run the same entry point under ``accelerate launch`` with the
DeepSpeed ZeRO-2 configuration shipped as ``ds_zero2.json`` (see docs/rosalia.md).

Precision: ``cfg.precision`` "auto" trains in bfloat16 on a GPU (train_ds.py's default):
the frozen weights are stored in bf16, the trained ones in float32 (master weights, as
DeepSpeed's bf16 optimiser keeps), and the forward pass runs under ``torch.autocast``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from cxrils.models.rosalia.configuration import RosaliaConfig
from cxrils.models.rosalia.segmenter import TOKENIZER_DIR, RosaliaSegmenter, build_model, resolve_device_dtype


def train_rosalia(
    segmenter: RosaliaSegmenter,
    batches: Iterable[Sequence[dict]],
    out_dir: str | Path,
    *,
    total_steps: int,
    start_step: int = 0,
    save_every: int = 0,
    log: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Train ``segmenter.model`` on micro-batches, checkpointing to ``out_dir``.

    Parameters
    ----------
    segmenter : RosaliaSegmenter
        Built with :func:`~cxrils.models.rosalia.segmenter.build_model` (LoRA applied).
    batches : iterable of sequences of dict
        Micro-batches (already 1:1 positive/negative, e.g. from
        ``cxrils.dataset.BalancedBatchSampler``), starting after those already used by
        ``start_step``; each sample has ``image`` (uint8 (H, W)), ``instruction``,
        ``answer`` and ``mask`` (bool (H, W)); augmentation is the data side's job.
    out_dir : path
        Run folder: model, ``optimizer.pt`` and ``train_log.jsonl`` are written there
        atomically every ``save_every`` optimiser steps (0: only at the end).
    total_steps : int
        Optimiser steps of the whole schedule (warm-up ``cfg.warmup_steps``, then linear
        decay to 0). One optimiser step accumulates ``cfg.batch_size //
        cfg.micro_batch_size`` micro-batches.
    start_step : int
        Steps already done (resume): the schedule continues from there and the optimiser
        state is read from ``out_dir/optimizer.pt`` when present.

    Returns
    -------
    list of dict
        The whole log (one entry per optimiser step: step, lr, loss terms).
    """
    from accelerate import Accelerator
    from transformers import get_linear_schedule_with_warmup

    from cxrils.fsutil import atomic_path, atomic_write_text

    out = Path(out_dir)
    log_path, opt_path = out / "train_log.jsonl", out / "optimizer.pt"
    model, proc, cfg = segmenter.model, segmenter.processor, segmenter.model.cfg
    accum = max(1, cfg.batch_size // cfg.micro_batch_size)
    device, dtype = resolve_device_dtype(cfg.precision)
    acc = Accelerator(gradient_accumulation_steps=accum, cpu=device.type == "cpu")
    model.to(device=acc.device, dtype=dtype)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:  # master weights in float32
        p.data = p.data.float()
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=0.0)
    history: list[dict] = []
    if start_step:
        history = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()][:start_step]
        if opt_path.is_file():
            opt.load_state_dict(torch.load(opt_path, map_location="cpu", weights_only=True))
    sched = get_linear_schedule_with_warmup(opt, cfg.warmup_steps, total_steps, last_epoch=-1)
    with warnings.catch_warnings():  # fast-forward: no optimiser step is missed here
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(start_step):  # continue the schedule where the run stopped
            sched.step()
    model, opt, sched = acc.prepare(model, opt, sched)
    model.train()

    def save() -> None:
        from cxrils.models.predict import forget_evaluation

        forget_evaluation(out, "validate")  # the scores of the weights this save replaces
        segmenter.model = acc.unwrap_model(model)
        segmenter.save_pretrained(out)
        with atomic_path(opt_path) as tmp:
            torch.save(opt.state_dict(), tmp)
        atomic_write_text(log_path, "".join(json.dumps(h) + "\n" for h in history))

    step = start_step
    for samples in batches:
        if step >= total_steps:
            break
        encoded = [proc.encode(s["image"], s["instruction"], s["answer"], s["mask"]) for s in samples]
        batch = proc.collate(encoded)
        batch = {
            k: (v.to(acc.device) if torch.is_tensor(v) else [t.to(acc.device) for t in v]) for k, v in batch.items()
        }
        with acc.accumulate(model):
            with torch.autocast(device_type=acc.device.type, dtype=dtype, enabled=dtype != torch.float32):
                result = model(**batch)
            acc.backward(result.loss)
            if acc.sync_gradients and cfg.grad_clip > 0:
                acc.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            sched.step()
            opt.zero_grad()
        if acc.sync_gradients:
            step += 1
            entry = {
                "step": step,
                "lr": sched.get_last_lr()[0],
                "loss": float(result.loss.detach()),
                "loss_txt": float(result.loss_txt),
                "loss_bce": float(result.loss_bce),
                "loss_dice": float(result.loss_dice),
            }
            if not all(math.isfinite(v) for v in entry.values()):
                raise FloatingPointError(f"non-finite loss at step {step}: {entry}")
            history.append(entry)
            if log:
                log(entry)
            if save_every and step % save_every == 0:
                save()
    save()
    segmenter.model = acc.unwrap_model(model).eval()
    segmenter.device = acc.device
    return history


def epoch_samples(polarities) -> int:
    """Samples in one training epoch: twice the positives, as train_ds.py's
    ``--batch_balance`` defines it (``ReasonSegDataset.__len__`` = ``2 * len(pos_dataset)``:
    index ``i < P`` is positive ``i``, any other a negative drawn by ``random.choice``;
    the authors' train.sh passes ``--batch_balance``). cxrils draws the negatives
    without repetition within an epoch, and every micro-batch exactly 1:1
    (:class:`cxrils.dataset.BalancedBatchSampler`; upstream's shuffled loader is 1:1
    only on average, docs/rosalia.md).

    Parameters
    ----------
    polarities : sequence of str or bool
        Per training record: "positive" / "negative", or True for positive.

    Returns
    -------
    int
        ``2 * P``, ``P`` the number of positive records.
    """
    return 2 * sum(1 for p in polarities if (bool(p) if isinstance(p, (bool, np.bool_)) else p == "positive"))


def schedule_steps(cfg: RosaliaConfig, polarities) -> int:
    """Optimiser steps of the whole schedule: ``epochs * ceil(epoch_samples / batch_size)``
    (train_ds.py: ``steps_per_epoch = ceil(N / global_effective_batch)``,
    ``total_num_steps = epochs * steps_per_epoch``), at least one step per epoch.

    Parameters
    ----------
    cfg : RosaliaConfig
        ``epochs`` and the total batch ``batch_size``.
    polarities : sequence of str or bool
        As :func:`epoch_samples`.

    Returns
    -------
    int
        Optimiser steps.
    """
    return cfg.epochs * max(1, math.ceil(epoch_samples(polarities) / cfg.batch_size))


def _parse_overrides(overrides: dict[str, str]) -> tuple[RosaliaConfig, bool]:
    """``--set key=value`` -> (RosaliaConfig, tiny); ``tiny=true`` starts from
    :meth:`RosaliaConfig.tiny` (random miniature, CPU smoke runs)."""
    items = dict(overrides)
    tiny = items.pop("tiny", "false").lower() in ("1", "true", "yes")
    cfg = RosaliaConfig.tiny() if tiny else RosaliaConfig()
    fields = {f.name for f in dataclasses.fields(RosaliaConfig)} - {"llm_config", "clip_config", "sam_config"}
    for key, raw in items.items():
        if key not in fields:
            raise ValueError(f"unknown ROSALIA setting {key!r}; known: {sorted(fields)} and tiny")
        default = getattr(cfg, key)
        try:
            if isinstance(default, tuple):
                kind = type(default[0]) if default else str
                value = tuple(kind(v.strip()) for v in raw.split(","))
            elif isinstance(default, bool):
                value = raw.lower() in ("1", "true", "yes")
            else:
                value = type(default)(raw)
        except ValueError as err:
            raise ValueError(f"--set {key}={raw!r}: expected {type(default).__name__}") from err
        setattr(cfg, key, value)
    try:
        cfg.__post_init__()
    except ValueError as err:
        raise ValueError(f"--set: {err}") from err
    return cfg, tiny


def _tokenizer(cfg: RosaliaConfig, tiny: bool, run_dir: Path):
    """The tiny tokenizer (built into the run folder) or None (the checkpoint's own)."""
    if tiny:
        from cxrils.models.rosalia.tiny import build_tiny_tokenizer

        return build_tiny_tokenizer(run_dir / TOKENIZER_DIR)
    if not cfg.checkpoint:
        raise ValueError(
            "ROSALIA needs local weights: --set checkpoint=DIR with xinlai/LISA-7B-v1 (to fine-tune as "
            "the paper) or checkone/ROSALIA-7B-v1 downloaded from the Hugging Face hub, and the CLIP "
            "folder openai/clip-vit-large-patch14 beside it (or --set clip_path=DIR); "
            "or --set tiny=true for a CPU smoke run"
        )
    return None


def _batches(dataset, sampler) -> Iterator[list[dict]]:
    """Micro-batches of uint8 images, bool masks and texts from an ILSDataset."""
    from cxrils.masks import decode_rle

    epoch = 0
    while True:
        dataset.set_epoch(epoch)
        sampler.set_epoch(epoch)
        for indices in sampler:
            batch = []
            for i in indices:
                item = dataset[i]
                x = np.rint(item["image"][0].numpy() * 255).astype(np.uint8)
                batch.append(
                    {
                        "image": x,
                        "mask": decode_rle(dataset.records.iloc[i]["mask"]),
                        "instruction": item["instruction"],
                        "answer": item["answer"],
                    }
                )
            yield batch
        epoch += 1


def cli_train(
    dataset: str | Path,
    run_dir: str | Path,
    overrides: dict[str, str],
    *,
    resume: bool = True,
    evaluate: bool = True,
    progress: bool = True,
) -> dict:
    """``cxrils train --model rosalia``: train on a cxrils dataset's train split.

    Settings come from ``--set key=value`` (fields of :class:`RosaliaConfig`, plus
    ``steps`` to override the schedule length, ``save_every`` (optimiser steps between
    checkpoints, default 200) and ``tiny=true`` for a CPU smoke run). The schedule is
    :func:`schedule_steps` optimiser steps: an epoch is twice the train split's
    positives (upstream's ``--batch_balance``), not its size. With ``resume`` and a
    checkpoint in ``run_dir``, training continues from the last checkpoint: same
    schedule position, optimiser state, and the batches not yet used.

    Raises
    ------
    ValueError
        On an unknown setting, missing local weights or a split without positives or
        negatives.
    """
    from cxrils.dataset import BalancedBatchSampler, HistogramEqualization, ILSDataset
    from cxrils.models.base import Segmenter
    from cxrils.models.predict import evaluate_run

    steps_override = overrides.pop("steps", None) if isinstance(overrides, dict) else None
    cfg, tiny = _parse_overrides(overrides)
    save_every = int(overrides.pop("save_every", "200")) if isinstance(overrides, dict) else 200
    run = Path(run_dir)
    done = 0
    if resume and (run / "config.json").is_file() and (run / "train_log.jsonl").is_file():
        seg = Segmenter.from_pretrained(run)
        cfg = seg.model.cfg
        done = sum(1 for line in (run / "train_log.jsonl").read_text().splitlines() if line.strip())
    else:
        from cxrils.models.base import ModelLoadError

        try:
            model, proc = build_model(cfg, _tokenizer(cfg, tiny, run))
        except ModelLoadError as err:
            raise ValueError(str(err)) from err
        seg = RosaliaSegmenter(model, proc)
    data = ILSDataset(dataset, "train", augment=HistogramEqualization(cfg.hist_eq_prob, seed=cfg.seed))
    accum = max(1, cfg.batch_size // cfg.micro_batch_size)
    total = int(steps_override) if steps_override else schedule_steps(cfg, data.polarities)
    remaining = max(0, total - done)
    t0 = time.perf_counter()
    if remaining:
        sampler = BalancedBatchSampler(
            data.polarities,
            cfg.micro_batch_size,
            seed=cfg.seed,
            num_batches=max(1, epoch_samples(data.polarities) // cfg.micro_batch_size),
        )
        batches = itertools.islice(_batches(data, sampler), done * accum, None)  # skip used batches
        train_rosalia(
            seg,
            batches,
            run,
            total_steps=total,
            start_step=done,
            save_every=save_every,
            log=(lambda e: print(json.dumps(e), flush=True)) if progress else None,
        )
    result = {"steps": total, "train_seconds": time.perf_counter() - t0, "accumulation": accum}
    if evaluate:
        result["validate"] = evaluate_run(seg, dataset, run, "validate", progress=progress)
    return result
