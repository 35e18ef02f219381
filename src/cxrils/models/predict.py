"""Batch prediction over a dataset split, written in the evaluation's format.

A predictions file has one row per record: ``record_id`` (str), ``mask`` (COCO RLE
``{"size": [H, W], "counts": str}`` from :func:`cxrils.masks.encode_rle`),
``answer`` (str) and ``presence_score`` (float in [0, 1]). The format follows the
suffix: ``.parquet`` or JSON Lines (``.jsonl``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

from cxrils.fsutil import atomic_path
from cxrils.masks import encode_rle
from cxrils.models.base import Segmenter

PREDICTION_SUFFIXES = (".parquet", ".jsonl")


def write_predictions(path: str | Path, rows: Iterable[dict]) -> Path:
    """Write prediction rows atomically as Parquet or JSON Lines (by suffix).

    Raises
    ------
    ValueError
        If the suffix is neither ``.parquet`` nor ``.jsonl``.
    """
    out = Path(path)
    if out.suffix not in PREDICTION_SUFFIXES:
        raise ValueError(f"{out}: predictions must end in {' or '.join(PREDICTION_SUFFIXES)}")
    rows = list(rows)
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([
            ("record_id", pa.string()),
            ("mask", pa.struct([("size", pa.list_(pa.int32())), ("counts", pa.string())])),
            ("answer", pa.string()),
            ("presence_score", pa.float32()),
        ])
        with atomic_path(out, suffix=".parquet") as tmp:
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    else:
        with atomic_path(out, suffix=".jsonl") as tmp:
            tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows), encoding="utf-8")
    return out


def predict_dataset(segmenter: Segmenter, dataset_dir: str | Path, split: str | None, out_path: str | Path,
                    *, batch_size: int = 16, progress: bool = True) -> Path:
    """Predict every record of a dataset split and write the predictions file.

    Parameters
    ----------
    segmenter : Segmenter
        Any loaded model.
    dataset_dir : path
        A finalized cxrils dataset (:mod:`cxrils.dataset`).
    split : str or None
        "train", "validate", "test", or None for all records.
    out_path : path
        ``.parquet`` or ``.jsonl`` file.
    batch_size : int
        (image, instruction) pairs per :meth:`Segmenter.predict_many` call.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    cxrils.dataset.DatasetError
        If the dataset is not readable or an image is missing.
    """
    from tqdm import tqdm

    from cxrils.dataset import ILSDataset

    ds = ILSDataset(dataset_dir, split, augment=None, size=None)
    recs = ds.records
    rows: list[dict] = []
    cache: dict[str, np.ndarray] = {}
    order = np.argsort(recs["image_id"].to_numpy(), kind="stable")  # each image loaded once
    with tqdm(total=len(order), desc=f"predict {split or 'all'}", disable=not progress, unit="rec") as bar:
        for start in range(0, len(order), batch_size):
            idx = [int(i) for i in order[start:start + batch_size]]
            images = []
            for i in idx:
                image_id = recs.at[i, "image_id"]
                if image_id not in cache:
                    cache.clear()
                    cache[image_id] = ds.load_image(i)
                images.append(cache[image_id])
            preds = segmenter.predict_many(images, [str(recs.at[i, "instruction"]) for i in idx])
            for i, p in zip(idx, preds):
                rows.append({"record_id": str(recs.at[i, "record_id"]), "mask": dict(encode_rle(p.mask)),
                             "answer": p.answer, "presence_score": float(p.presence_score)})
            bar.update(len(idx))
    rows.sort(key=lambda r: r["record_id"])
    return write_predictions(out_path, rows)
