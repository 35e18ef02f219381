"""Validation metrics used at the end of training (paper section 6.1).

gIoU: mean IoU over positives (non-empty reference mask); cIoU: summed intersection
over summed union over positives; N-Acc: share of negatives (empty reference mask)
whose predicted mask is empty; text accuracy: exact match of the answer with the
reference answer (Table 6: template and every variable must match; both sides are
rendered by :mod:`cxrils.templates`, so string equality is that criterion).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cxrils.masks import decode_rle


def ils_metrics(dataset_dir: str | Path, split: str | None, predictions: list[dict]) -> dict:
    """Score prediction rows (``record_id``, ``mask`` RLE, ``answer``) against a split.

    Returns
    -------
    dict
        ``gIoU``, ``cIoU``, ``n_acc``, ``text_acc`` (fractions in [0, 1], None when
        undefined) and the counts ``n_positive``, ``n_negative``.

    Raises
    ------
    KeyError
        If a record of the split has no prediction.
    """
    from cxrils.dataset import read_records

    refs = read_records(dataset_dir, split)
    by_id = {p["record_id"]: p for p in predictions}
    ious, inter_sum, union_sum, neg_ok, n_neg, text_ok = [], 0, 0, 0, 0, 0
    for rec in refs.itertuples(index=False):
        if rec.record_id not in by_id:
            raise KeyError(f"no prediction for record {rec.record_id!r}")
        pred = by_id[rec.record_id]
        ref_mask = decode_rle(rec.mask)
        pred_mask = decode_rle(pred["mask"])
        if pred_mask.shape != ref_mask.shape:
            raise ValueError(f"record {rec.record_id}: predicted mask {pred_mask.shape} vs reference {ref_mask.shape}")
        text_ok += int(str(pred.get("answer", "")).strip() == str(rec.answer).strip())
        if ref_mask.any():
            inter = int((pred_mask & ref_mask).sum())
            union = int((pred_mask | ref_mask).sum())
            ious.append(inter / union)
            inter_sum += inter
            union_sum += union
        else:
            n_neg += 1
            neg_ok += int(not pred_mask.any())
    n = len(refs)
    return {
        "gIoU": float(np.mean(ious)) if ious else None,
        "cIoU": inter_sum / union_sum if union_sum else None,
        "n_acc": neg_ok / n_neg if n_neg else None,
        "text_acc": text_ok / n if n else None,
        "n_positive": len(ious),
        "n_negative": n_neg,
    }
