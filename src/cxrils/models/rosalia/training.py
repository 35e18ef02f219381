"""Training ROSALIA with accelerate (paper section 5, Appendix F).

AdamW (lr 3e-4), 100 warm-up steps then linear decay to 0 (DeepSpeed's WarmupDecayLR),
15 epochs, total batch 256 reached by gradient accumulation over micro-batches,
1:1 positive/negative mini-batches and histogram equalisation with probability 0.5.
For several GPUs run the same entry point under ``accelerate launch`` with the
DeepSpeed ZeRO-2 configuration shipped as ``ds_zero2.json`` (see docs/models.md).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from cxrils.models.rosalia.segmenter import RosaliaSegmenter

DEEPSPEED_CONFIG = Path(__file__).with_name("ds_zero2.json")


def hist_equalize(x: np.ndarray) -> np.ndarray:
    """Histogram equalisation of a uint8 (H, W) image (Appendix F augmentation)."""
    import cv2

    return cv2.equalizeHist(x)


def train_rosalia(
    segmenter: RosaliaSegmenter,
    batches: Iterable[Sequence[dict]],
    out_dir: str | Path,
    *,
    total_steps: int,
    log: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Train ``segmenter.model`` on micro-batches and save it to ``out_dir``.

    Parameters
    ----------
    segmenter : RosaliaSegmenter
        Built with :func:`~cxrils.models.rosalia.segmenter.build_model` (LoRA applied).
    batches : iterable of sequences of dict
        Micro-batches (already 1:1 positive/negative, e.g. from
        ``cxrils.dataset.BalancedBatchSampler``); each sample has ``image`` (uint8 (H, W)),
        ``instruction``, ``answer`` and ``mask`` (bool (H, W)).
    out_dir : path
        Run folder; the model is saved there at the end.
    total_steps : int
        Optimiser steps of the schedule (warm-up ``cfg.warmup_steps``, then linear decay
        to 0). One optimiser step accumulates ``cfg.batch_size // cfg.micro_batch_size``
        micro-batches.

    Returns
    -------
    list of dict
        One log entry per optimiser step (step, lr, loss terms).
    """
    from accelerate import Accelerator
    from transformers import get_linear_schedule_with_warmup

    model, proc, cfg = segmenter.model, segmenter.processor, segmenter.model.cfg
    accum = max(1, cfg.batch_size // cfg.micro_batch_size)
    acc = Accelerator(gradient_accumulation_steps=accum, cpu=not torch.cuda.is_available())
    rng = random.Random(cfg.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    sched = get_linear_schedule_with_warmup(opt, cfg.warmup_steps, total_steps)
    model, opt, sched = acc.prepare(model, opt, sched)
    model.train()
    history: list[dict] = []
    step, micro = 0, 0
    for samples in batches:
        encoded = []
        for s in samples:
            x = hist_equalize(s["image"]) if rng.random() < cfg.hist_eq_prob else s["image"]
            encoded.append(proc.encode(x, s["instruction"], s["answer"], s["mask"]))
        batch = proc.collate(encoded)
        batch = {k: (v.to(acc.device) if torch.is_tensor(v) else [t.to(acc.device) for t in v]) for k, v in batch.items()}
        with acc.accumulate(model):
            out = model(**batch)
            acc.backward(out.loss)
            opt.step()
            sched.step()
            opt.zero_grad()
        micro += 1
        if acc.sync_gradients:
            step += 1
            entry = {"step": step, "lr": sched.get_last_lr()[0], "loss": float(out.loss.detach()),
                     "loss_txt": float(out.loss_txt), "loss_bce": float(out.loss_bce), "loss_dice": float(out.loss_dice)}
            if not all(math.isfinite(v) for v in entry.values()):
                raise FloatingPointError(f"non-finite loss at step {step}: {entry}")
            history.append(entry)
            if log:
                log(entry)
            if step >= total_steps:
                break
    segmenter.model = acc.unwrap_model(model).eval()
    out = Path(out_dir)
    segmenter.save_pretrained(out)
    (out / "train_log.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    return history
