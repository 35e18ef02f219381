"""Evaluate ILS predictions: over in-memory pairs, or a predictions file against a dataset."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cxrils.evaluation.counts import MaskCounts, batch_mask_counts, rle_intersection
from cxrils.evaluation.io import (
    REFERENCE_COLUMNS,
    EvaluationError,
    iter_reference_batches,
    mask_column,
    predictions_from_table,
    read_predictions,
)
from cxrils.evaluation.metrics import answer_correct
from cxrils.evaluation.report import EvaluationReport
from cxrils.masks import InvalidRLE, rle_areas
from cxrils.templates import TemplateError, parse_answer
from cxrils.vocab import SplitError, split_filter


@dataclass(frozen=True)
class EvalSample:
    """One (prediction, reference) pair with optional answers and record metadata.

    Masks are bool (H, W) arrays (or 0/1, 0/255 integer, 0/1 float: :func:`cxrils.masks.as_bool_mask`) or COCO RLE dicts.
    ``ref_answer`` None means the text is not scored; ``pred_answer`` None with a
    reference answer counts as wrong. ``padding_pixels``: the prediction's pixels in the
    padding of SAM's square (:attr:`cxrils.models.base.Prediction.padding_pixels`),
    counted by the authors' protocol only.
    """

    pred_mask: Any
    ref_mask: Any
    pred_answer: str | None = None
    ref_answer: str | None = None
    lesion_type: str | None = None
    instruction_type: str | None = None
    polarity: str | None = None
    padding_pixels: int = 0


def _as_sample(item: Any) -> EvalSample:
    if isinstance(item, EvalSample):
        return item
    if isinstance(item, tuple) and len(item) in (2, 4):
        return EvalSample(*item)
    got = f"a tuple of {len(item)}" if isinstance(item, tuple) else type(item).__name__
    raise TypeError(
        "evaluate() takes EvalSample, (pred_mask, ref_mask) or "
        f"(pred_mask, ref_mask, pred_answer, ref_answer) items, got {got}"
    )


def evaluate(
    items: Iterable[Any], *, metadata: dict[str, Any] | None = None, batch_size: int = 1024
) -> EvaluationReport:
    """Evaluate (prediction, reference) pairs: gIoU, cIoU, N-Acc and text accuracy.

    Streams ``items``: memory does not depend on their number, and the result does
    not depend on their order (see :mod:`cxrils.evaluation.metrics`).

    Parameters
    ----------
    items : iterable
        :class:`EvalSample` objects, ``(pred_mask, ref_mask)`` tuples, or
        ``(pred_mask, ref_mask, pred_answer, ref_answer)`` tuples. Masks are bool
        (H, W) arrays or COCO RLE dicts; a pair must have the same (H, W).
    metadata : dict, optional
        Stored in the report's JSON.
    batch_size : int
        Items held at a time (RLE pairs are validated per batch); changes memory and
        speed, never the result.

    Returns
    -------
    EvaluationReport
        ``report.table4()["gIoU"]`` etc.; values in [0, 1], None for a group with no
        sample of the kind.

    Raises
    ------
    cxrils.masks.MaskError
        For a malformed mask or a size mismatch (message names the item index).
    cxrils.templates.TemplateError
        For a reference answer that matches no template.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    report = EvaluationReport(metadata)
    start, chunk = 0, []
    for i, item in enumerate(items):
        try:
            chunk.append(_as_sample(item))
        except TypeError as err:
            raise TypeError(f"item {i}: {err}") from None
        if len(chunk) == batch_size:
            _add_samples(report, chunk, start)
            start, chunk = start + len(chunk), []
    _add_samples(report, chunk, start)
    return report


def _add_samples(report: EvaluationReport, samples: list[EvalSample], start: int) -> None:
    counts = batch_mask_counts([(s.pred_mask, s.ref_mask) for s in samples], start)
    for k, (s, c) in enumerate(zip(samples, counts)):
        text = None
        if s.ref_answer is not None:
            try:
                text = answer_correct(s.pred_answer, s.ref_answer)
            except TemplateError as err:
                raise TemplateError(f"item {start + k}: reference answer: {err}") from None
        report.add(
            c,
            lesion_type=s.lesion_type,
            instruction_type=s.instruction_type,
            polarity=s.polarity,
            text_correct=text,
            padding_pixels=s.padding_pixels,
        )


def _examples(ids: pa.Array, k: int = 5) -> list[str]:
    return sorted(ids.slice(0, 1000).to_pylist())[:k]


def _duplicates(ids: pa.Array) -> pa.Array:
    counts = pc.value_counts(ids)
    return counts.field("values").filter(pc.greater(counts.field("counts"), 1))


def evaluate_predictions(
    dataset_dir: str | Path,
    predictions: str | Path | Any,
    *,
    split: str | None = "test",
    paraphrases: str = "exclude",
    batch_size: int = 1024,
) -> EvaluationReport:
    """Evaluate a predictions file (or table) against the records of a dataset split.

    Parameters
    ----------
    dataset_dir : path
        A cxrils dataset folder (``records/*.parquet``, :mod:`cxrils.dataset.schema`).
    predictions : path, pyarrow.Table or pandas.DataFrame
        ``.parquet`` or JSON Lines with ``record_id``, ``mask`` (COCO RLE) and optional
        ``answer``: exactly one row per record of the split. Without an ``answer``
        column, text accuracy is not scored (n/a); with it, a null answer is wrong. An
        optional ``padding_pixels`` column (int >= 0, null = 0; ROSALIA's predictions
        have it) is counted by the authors' protocol (:mod:`cxrils.evaluation.official`).
    split : str or None
        Split to evaluate ("test" as the paper; aliases such as "val" read); None or
        "all" for every record.
    paraphrases : {"exclude", "include", "only"}
        Rows with paraphrased instructions (Appendix C.3, ``paraphrase_of`` set):
        left out (default: the paper's Tables 4-6 use the template instructions),
        evaluated with the template rows, or evaluated alone (the Appendix C.3 test).
    batch_size : int
        Records per batch; changes memory use, never the result.

    Returns
    -------
    EvaluationReport

    Raises
    ------
    EvaluationError
        Naming the file and the problem: unreadable files, missing or duplicate
        record ids, ids that are not records of the split, masks whose size differs
        from the reference, malformed RLE, reference answers that match no template.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(predictions, (str, Path)):
        where = str(predictions)
        pred = read_predictions(predictions)
    else:
        where = "predictions"
        pred = predictions_from_table(predictions, where)
    try:
        split = split_filter(split)
    except SplitError as err:
        raise EvaluationError(str(err)) from None
    split_name = split if split is not None else "all"
    # The join is kept in Arrow: ids and an int32 index per record, no Python object per record.
    pred_ids = pred.column("record_id").combine_chunks()
    dups = _duplicates(pred_ids)
    if len(dups):
        raise EvaluationError(f"{where}: {len(dups)} duplicate record ids, e.g. {_examples(dups)}")
    ref_ids = pa.chunked_array(
        [
            b.column("record_id").cast(pa.string())
            for b in iter_reference_batches(dataset_dir, split, ["record_id"], batch_size, paraphrases=paraphrases)
        ],
        type=pa.string(),
    ).combine_chunks()
    if len(ref_ids) == 0:
        where_in = f"split {split_name!r}" if split is not None else "any split"
        raise EvaluationError(
            f"{dataset_dir}: no paraphrased records in {where_in} (--paraphrases only; a dataset generated "
            "without paraphrases has none)"
            if paraphrases == "only"
            else f"{dataset_dir}: no records in {where_in}"
        )
    dups = _duplicates(ref_ids)
    if len(dups):
        raise EvaluationError(f"{dataset_dir}: {len(dups)} duplicate record ids in the dataset, e.g. {_examples(dups)}")
    if pred.num_rows == 0:
        raise EvaluationError(f"{where}: holds no prediction (an empty file or table)")
    missing = ref_ids.filter(pc.invert(pc.is_in(ref_ids, value_set=pred_ids)))
    if len(missing):
        which = f"{split_name} records" if split is not None else "records (all splits)"
        raise EvaluationError(
            f"{where}: {len(missing)} of {len(ref_ids)} {which} have no prediction, e.g. {_examples(missing)}"
        )
    extra = pred_ids.filter(pc.invert(pc.is_in(pred_ids, value_set=ref_ids)))
    if len(extra):
        raise EvaluationError(_outside_message(where, dataset_dir, extra, split, paraphrases, batch_size))
    index = pc.index_in(ref_ids, value_set=pred_ids)  # row of each record's prediction, in dataset order
    del ref_ids, pred_ids, missing, extra

    score_text = "answer" in pred.column_names
    report = EvaluationReport(
        {
            "dataset": str(dataset_dir),
            "predictions": where,
            "split": split_name,
            "paraphrases": paraphrases,
            "text_scored": score_text,
            "padding_counted": "padding_pixels" in pred.column_names,
        }
    )
    offset = 0
    for batch in iter_reference_batches(dataset_dir, split, REFERENCE_COLUMNS, batch_size, paraphrases=paraphrases):
        rows = pred.take(index.slice(offset, batch.num_rows))
        offset += batch.num_rows
        _score_batch(report, batch, rows, score_text, str(dataset_dir), where)
    return report


def _outside_message(
    where: str, dataset_dir: str | Path, extra: pa.Array, split: str | None, paraphrases: str, batch_size: int
) -> str:
    """Why predicted ids are not records of the evaluated split: in which split they
    are, left out by ``--paraphrases``, or not in the dataset at all. ``split``: as
    :func:`cxrils.vocab.split_filter` gives it."""
    where_found: Counter[str] = Counter()
    for batch in iter_reference_batches(
        dataset_dir, None, ["record_id", "split"], batch_size, optional=["paraphrase_of"], paraphrases="include"
    ):
        hit = batch.filter(pc.is_in(batch.column("record_id").cast(pa.string()), value_set=extra))
        para = hit.column("paraphrase_of").to_pylist() if "paraphrase_of" in hit.schema.names else [""] * hit.num_rows
        for s, p in zip(hit.column("split").to_pylist(), para):
            if split is not None and s != split:
                where_found[f"in split {s!r}"] += 1
            elif p:
                where_found[f"paraphrased-instruction rows, left out by --paraphrases {paraphrases}"] += 1
            else:
                where_found[f"template rows, left out by --paraphrases {paraphrases}"] += 1
    absent = len(extra) - sum(where_found.values())
    if absent:
        where_found["not in the dataset"] = absent
    parts = ", ".join(f"{n} {what}" for what, n in sorted(where_found.items(), key=lambda kv: (-kv[1], kv[0])))
    hint = (
        "; evaluate another split with --split (train | validate | test | all)"
        if any(k.startswith("in split") for k in where_found)
        else ""
    )
    records = f"records of split {split!r}" if split is not None else "records"
    return (
        f"{where}: {len(extra)} record ids are not {records} of {dataset_dir} ({parts}), e.g. {_examples(extra)}{hint}"
    )


def _score_batch(
    report: EvaluationReport, ref: pa.RecordBatch, pred: pa.Table, score_text: bool, dataset: str, where: str
) -> None:
    ids = ref.column("record_id").to_pylist()
    r_counts, r_h, r_w = mask_column(ref.column("mask"), dataset)
    p_counts, p_h, p_w = (pred.column(c).to_pylist() for c in ("counts", "height", "width"))
    for rid, ph, pw, rh, rw in zip(ids, p_h, p_w, r_h, r_w):
        if (ph, pw) != (rh, rw):
            raise EvaluationError(
                f"{where}: record {rid!r}: mask is {ph}x{pw} (HxW) but the reference image is {rh}x{rw}"
            )
    try:
        ref_areas = rle_areas(r_counts, r_h, r_w).tolist()
    except InvalidRLE as err:
        raise EvaluationError(f"{dataset}: record {ids[err.index]!r}: reference mask: {err.reason}") from None
    try:
        pred_areas = rle_areas(p_counts, p_h, p_w).tolist()
    except InvalidRLE as err:
        raise EvaluationError(f"{where}: record {ids[err.index]!r}: mask: {err.reason}") from None
    answers = pred.column("answer").to_pylist() if score_text else [None] * len(ids)
    has_padding = "padding_pixels" in pred.column_names
    padding = pred.column("padding_pixels").to_pylist() if has_padding else [0] * len(ids)
    columns = (ref.column(c).to_pylist() for c in ("lesion_type", "instruction_type", "polarity", "answer"))
    for i, (lesion, itype, polarity, ref_answer) in enumerate(zip(*columns)):
        pa_, ra = pred_areas[i], ref_areas[i]
        inter = 0
        if pa_ and ra:
            inter = rle_intersection(
                {"size": [p_h[i], p_w[i]], "counts": _as_bytes(p_counts[i])},
                {"size": [r_h[i], r_w[i]], "counts": _as_bytes(r_counts[i])},
            )
        text = None
        if score_text:
            try:
                ref_parsed = parse_answer(ref_answer)
            except (TemplateError, AttributeError) as err:
                raise EvaluationError(f"{dataset}: record {ids[i]!r}: reference answer: {err}") from None
            text = answer_correct(answers[i], ref_parsed)
        report.add(
            MaskCounts(inter, pa_ + ra - inter, pa_, ra),
            lesion_type=lesion,
            instruction_type=itype,
            polarity=polarity,
            text_correct=text,
            padding_pixels=padding[i],
        )


def _as_bytes(counts: str | bytes) -> bytes:
    return counts if isinstance(counts, bytes) else counts.encode("ascii")
