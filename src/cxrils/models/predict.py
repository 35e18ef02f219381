"""Batch prediction over a dataset split, written in the evaluation's format.

A predictions file has one row per record: ``record_id`` (str), ``mask`` (COCO RLE
``{"size": [H, W], "counts": str}`` from :func:`cxrils.masks.encode_rle`), ``answer``
(str; absent from teacher-forced files) and how each answer was decided
(``presence_score``, ``presence_threshold``, ``note``; null where a model gives none),
and ``padding_pixels`` (the pixels ROSALIA puts in the padding of SAM's square; 0 for the
light model), written by :func:`cxrils.evaluation.write_predictions` as Parquet
(``.parquet``) or JSON Lines (``.jsonl``), ready for ``cxrils evaluate`` (which reads the
first three, and ``padding_pixels`` for the authors' protocol).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from cxrils.fsutil import atomic_write_json
from cxrils.masks import encode_rle
from cxrils.models.base import Segmenter

log = logging.getLogger(__name__)


def predict_dataset(
    segmenter: Segmenter,
    dataset_dir: str | Path,
    split: str | None,
    out_path: str | Path,
    *,
    batch_size: int = 16,
    progress: bool = True,
    templates_only: bool = False,
    teacher_forced: bool = False,
) -> Path:
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
        ``.parquet`` or ``.jsonl`` file; every record of the split, paraphrased
        instructions included (evaluate with ``paraphrases="include"`` to score them)
        unless ``templates_only``. Columns: ``record_id``, ``mask`` (COCO RLE),
        ``answer`` and how each answer was decided: ``presence_score``,
        ``presence_threshold`` and ``note`` of :class:`~cxrils.models.base.Prediction`
        (:data:`cxrils.evaluation.io.SCORE_FIELDS`), and its ``padding_pixels``.
    batch_size : int
        (image, instruction) pairs per :meth:`Segmenter.predict_many` call (the light
        model's network batch may hold up to three rows per pair: its lung check of
        global questions).
    progress : bool
        Show a tqdm progress bar.
    templates_only : bool
        Predict only the Table 2 template records (``paraphrase_of`` empty), the ones
        the paper's tables score.
    teacher_forced : bool
        Masks from each record's reference answer instead of generated text, as the
        authors' ``validate()`` (models with ``predict_teacher_forced``, i.e. ROSALIA); the
        file then has no answers (text accuracy is not scored).

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    cxrils.dataset.DatasetError
        If the dataset is not readable, an image is missing, or the split has no
        records to predict (nothing is written).
    TypeError
        If ``segmenter`` is no :class:`Segmenter` (a path, say).
    ValueError
        If ``out_path`` does not end in ``.parquet`` or ``.jsonl``.
    """
    from cxrils.dataset import DatasetError, ILSDataset
    from cxrils.evaluation import PREDICTION_SUFFIXES, write_predictions
    from cxrils.progress import progress_bar

    if not isinstance(segmenter, Segmenter):
        raise TypeError(
            f"segmenter must be a loaded model (cxrils.models.Segmenter.from_pretrained(path)), got {type(segmenter).__name__}"
        )
    if Path(out_path).suffix not in PREDICTION_SUFFIXES:  # checked before hours of predicting
        raise ValueError(f"{out_path}: predictions must end in {' or '.join(PREDICTION_SUFFIXES)}")
    ds = ILSDataset(dataset_dir, split, augment=None, size=None)
    recs = ds.records
    rows: list[dict] = []
    cache: dict[str, np.ndarray] = {}
    order = np.argsort(recs["image_id"].to_numpy(), kind="stable")  # each image loaded once
    if templates_only:
        order = order[(recs["paraphrase_of"].to_numpy()[order] == "")]
    if not len(order):  # as `cxrils evaluate` and `cxrils baseline` refuse it, not an empty file
        where = f"split {split!r}" if split is not None else "any split"
        raise DatasetError(f"{dataset_dir}: no {'template ' if templates_only else ''}records in {where} to predict")
    with progress_bar(total=len(order), desc=f"predict {split or 'all'}", disable=not progress, unit="rec") as bar:
        for start in range(0, len(order), batch_size):
            idx = [int(i) for i in order[start : start + batch_size]]
            images = []
            for i in idx:
                image_id = recs.at[i, "image_id"]
                if image_id not in cache:
                    cache.clear()
                    cache[image_id] = ds.load_image(i)
                images.append(cache[image_id])
            if teacher_forced:
                if not hasattr(segmenter, "predict_teacher_forced"):
                    raise ValueError(f"{type(segmenter).__name__} cannot predict from reference answers")
                preds = [
                    segmenter.predict_teacher_forced(x, str(recs.at[i, "instruction"]), str(recs.at[i, "answer"]))
                    for x, i in zip(images, idx)
                ]
            else:
                preds = segmenter.predict_many(images, [str(recs.at[i, "instruction"]) for i in idx])
            for i, p in zip(idx, preds):
                rows.append(
                    {
                        "record_id": str(recs.at[i, "record_id"]),
                        "mask": dict(encode_rle(p.mask)),
                        "answer": p.answer,
                        "presence_score": float(p.presence_score),
                        "presence_threshold": p.presence_threshold,
                        "note": p.note,
                        "padding_pixels": p.padding_pixels,
                    }
                )
            bar.update(len(idx))
    rows.sort(key=lambda r: r["record_id"])
    write_predictions(out_path, rows, with_answers=not teacher_forced, with_scores=True, with_padding=True)
    return Path(out_path)


def forget_evaluation(run_dir: str | Path, split: str) -> None:
    """Delete ``predictions_{split}.parquet`` and ``eval_{split}.json`` of ``run_dir``
    (:func:`evaluate_run`'s outputs): they describe the weights the folder held, which
    training is about to replace (a trial resumed a run with more steps and
    ``--no-evaluate``: the folder kept the earlier model's scores beside the new model)."""
    for name in (f"predictions_{split}.parquet", f"eval_{split}.json"):
        (Path(run_dir) / name).unlink(missing_ok=True)


def evaluate_run(
    seg: Segmenter, dataset_dir: str | Path, run_dir: str | Path, split: str, *, progress: bool = True
) -> dict | None:
    """Predict ``split``, write ``predictions_{split}.parquet`` and ``eval_{split}.json``.

    Scores template instructions only, as the paper's Tables 4-6
    (:func:`cxrils.evaluation.evaluate_predictions` with paraphrases excluded).

    Returns
    -------
    dict or None
        Table 4 row (``gIoU``, ``cIoU``, ``n_acc``, ``text_accuracy`` in [0, 1] and
        counts); None when the split has no records.
    """
    from cxrils.dataset import read_records
    from cxrils.evaluation import evaluate_predictions
    from cxrils.models.predict import predict_dataset

    if not len(read_records(dataset_dir, split)):
        log.warning("%s: no %s records; skipping evaluation", dataset_dir, split)
        return None
    path = predict_dataset(
        seg, dataset_dir, split, Path(run_dir) / f"predictions_{split}.parquet", progress=progress, templates_only=True
    )
    report = evaluate_predictions(dataset_dir, path, split=split)
    metrics = report.table4()
    atomic_write_json(Path(run_dir) / f"eval_{split}.json", report.to_dict())
    return metrics
