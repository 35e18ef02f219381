"""Reading reference records of a cxrils dataset and prediction files; writing predictions.

A dataset folder (:mod:`cxrils.dataset.schema`) holds ``records/*.parquet`` shards with
the columns of :data:`cxrils.dataset.schema.COLUMNS`, masks as COCO RLE structs
``{size: [H, W], counts: str}``, and ``manifest.json``. A predictions file is Parquet
(``.parquet``) or JSON Lines (any other suffix, e.g. ``.jsonl``) with one row per
record: ``record_id`` (str), ``mask`` (COCO RLE struct, or its JSON text) and an
optional ``answer`` (str).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cxrils.dataset.schema import SCHEMA_VERSION
from cxrils.dataset.writer import DatasetError, shard_paths
from cxrils.fsutil import atomic_path
from cxrils.masks import MaskError, coco_rle
from cxrils.vocab import SplitError, split_filter


class EvaluationError(ValueError):
    """Raised for unusable inputs to evaluation: a message naming the file and the problem."""


#: Reference columns evaluation reads.
_JSONL_CHUNK = 8192
#: The suffixes of the predictions files the CLI writes: Parquet or JSON Lines.
PREDICTION_SUFFIXES: tuple[str, ...] = (".parquet", ".jsonl")

REFERENCE_COLUMNS: tuple[str, ...] = (
    "record_id",
    "split",
    "lesion_type",
    "instruction_type",
    "polarity",
    "answer",
    "mask",
)


def dataset_shards(dataset_dir: str | Path) -> list[Path]:
    """The ``records/*.parquet`` shards of a dataset folder (sorted by name).

    With a manifest that lists the shards (a folder finalized by
    :class:`cxrils.dataset.DatasetWriter`), those shards in manifest order, each
    checked against its SHA-256 (:func:`cxrils.dataset.shard_paths`).

    Raises
    ------
    EvaluationError
        If the folder, its ``records/`` shards or a readable ``manifest.json`` of this
        schema version are missing, or a shard is not the one the manifest lists.
    """
    root = Path(dataset_dir)
    if not root.is_dir():
        raise EvaluationError(
            f"{root}: {'is a file, not a dataset folder' if root.exists() else 'dataset folder not found'}"
        )
    manifest = root / "manifest.json"
    if manifest.exists():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            version = data.get("schema_version", SCHEMA_VERSION)
        except (OSError, ValueError, AttributeError) as err:
            raise EvaluationError(f"{manifest}: unreadable manifest: {err}") from err
        if version != SCHEMA_VERSION:
            raise EvaluationError(f"{manifest}: schema_version {version!r}, this cxrils reads {SCHEMA_VERSION}")
        if "shards" in data:  # written by DatasetWriter.finalize: the listing and each SHA-256 are checked
            try:
                return shard_paths(root)
            except DatasetError as err:
                raise EvaluationError(str(err)) from None
    shards = sorted((root / "records").glob("*.parquet"))
    if not shards:
        raise EvaluationError(f"{root}: no records/*.parquet shards (is this a cxrils dataset folder?)")
    return shards


#: Which records an evaluation covers with respect to the paraphrased instructions of
#: Appendix C.3 (rows whose ``paraphrase_of`` is set): template rows only (the paper's
#: Tables 4-6), every row, or the paraphrases only (the Appendix C.3 experiment).
PARAPHRASE_MODES: tuple[str, ...] = ("exclude", "include", "only")


def iter_reference_batches(
    dataset_dir: str | Path,
    split: str | None,
    columns: Iterable[str],
    batch_size: int = 1024,
    *,
    optional: Iterable[str] = (),
    paraphrases: str = "include",
) -> Iterator[pa.RecordBatch]:
    """Stream the records of one split (all splits when ``split`` is None) in shard order.

    Parameters
    ----------
    dataset_dir : path
        A cxrils dataset folder.
    split : str or None
        "train", "validate", "test" (or an alias such as "val",
        :func:`cxrils.vocab.split_filter`), or None or "all" for every record.
    columns : iterable of str
        Columns to read (an error if a shard lacks one).
    batch_size : int
        Rows per Parquet read; only memory depends on it.
    optional : iterable of str
        Columns read when a shard has them (absent from the batch otherwise).
    paraphrases : {"include", "exclude", "only"}
        Keep every row, only template rows (``paraphrase_of`` empty or absent), or only
        paraphrased rows (Appendix C.3).

    Yields
    ------
    pyarrow.RecordBatch
        Batches may be shorter than ``batch_size`` after filtering.

    Raises
    ------
    EvaluationError
        On an unknown split name, an unreadable shard or a missing column.
    """
    if paraphrases not in PARAPHRASE_MODES:
        raise EvaluationError(f"paraphrases must be one of {PARAPHRASE_MODES}, got {paraphrases!r}")
    try:
        split = split_filter(split)
    except SplitError as err:
        raise EvaluationError(str(err)) from None
    for shard in dataset_shards(dataset_dir):
        try:
            pf = pq.ParquetFile(shard)
            names = pf.schema_arrow.names
            cols = list(dict.fromkeys([*columns, *(c for c in optional if c in names)]))
            missing = [c for c in cols if c not in names]
            if missing:
                raise EvaluationError(f"{shard}: missing columns {missing} (see cxrils.dataset.schema.COLUMNS)")
            has_para = "paraphrase_of" in names
            if paraphrases == "only" and not has_para:
                continue
            read = cols + [
                c
                for c in ("split", "paraphrase_of")
                if c not in cols and (c == "split" and split is not None or c == "paraphrase_of" and has_para)
            ]
            for batch in pf.iter_batches(batch_size=batch_size, columns=read):
                keep = None
                if split is not None:
                    keep = pc.fill_null(pc.equal(batch.column("split"), split), False)
                if paraphrases != "include" and has_para:
                    is_para = pc.fill_null(pc.not_equal(batch.column("paraphrase_of"), ""), False)
                    sel = is_para if paraphrases == "only" else pc.invert(is_para)
                    keep = sel if keep is None else pc.and_(keep, sel)
                if keep is not None:
                    batch = batch.filter(keep)
                if batch.num_rows:
                    yield batch.select(cols)
        except (OSError, pa.ArrowException) as err:
            raise EvaluationError(f"{shard}: unreadable Parquet shard: {err}") from err


def mask_column(mask: pa.ChunkedArray | pa.Array, where: str) -> tuple[list[Any], list[int], list[int]]:
    """Split a ``mask`` column (COCO RLE struct, or its JSON text) into counts, heights, widths.

    Raises
    ------
    EvaluationError
        If the column is of another type, or a row has no mask or a size that is not [H, W];
        ``where`` names the source in the message.
    """
    if _is_text(mask.type):
        counts, heights, widths = [], [], []
        for i, text in enumerate(mask.to_pylist()):
            try:
                if not isinstance(text, str):
                    raise ValueError("it is empty")
                rle, (height, width) = _rle_mask(text)
            except ValueError as err:
                raise EvaluationError(f"{where}: row {i}: mask is not a COCO RLE JSON text: {err}") from err
            counts.append(rle["counts"])
            heights.append(height)
            widths.append(width)
        return counts, heights, widths
    if not pa.types.is_struct(mask.type) or {"size", "counts"} - {f.name for f in mask.type}:
        raise EvaluationError(f"{where}: column 'mask' must be a COCO RLE struct {{size, counts}}, got {mask.type}")
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    if mask.null_count:
        raise EvaluationError(f"{where}: {mask.null_count} rows have no mask")
    sizes = mask.field("size").to_pylist()
    bad = next((i for i, s in enumerate(sizes) if s is None or len(s) != 2), None)
    if bad is not None:
        raise EvaluationError(f"{where}: row {bad}: mask size must be [H, W], got {sizes[bad]}")
    return mask.field("counts").to_pylist(), [s[0] for s in sizes], [s[1] for s in sizes]


def read_predictions(path: str | Path) -> pa.Table:
    """Read a predictions file into a table of ``record_id``, ``counts``, ``height``,
    ``width`` and (when the file has them) ``answer`` and ``padding_pixels``.

    Parameters
    ----------
    path : path
        ``.parquet``, or JSON Lines (one object per line) for any other suffix.

    Returns
    -------
    pyarrow.Table
        Columns ``record_id`` (str), ``counts`` (COCO compressed RLE counts, str),
        ``height``, ``width`` (int64) and optionally ``answer`` (str, nullable) and
        ``padding_pixels`` (int64 >= 0, null read as 0: the prediction's pixels in the
        padding of SAM's square, :attr:`cxrils.models.base.Prediction.padding_pixels`).

    Raises
    ------
    EvaluationError
        If the file is missing or unreadable, a line is not JSON, or a column is
        missing or of the wrong type.
    """
    path = Path(path)
    if path.is_dir():
        raise EvaluationError(f"{path}: is a folder; give the predictions file (.parquet or .jsonl) in it")
    if not path.is_file():
        raise EvaluationError(f"{path}: predictions file not found")
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as err:
            raise EvaluationError(f"{path}: unreadable Parquet file: {err}") from err
        return predictions_from_table(table, str(path))
    tables: list[pa.Table] = []
    ids, counts, heights, widths, answers, any_answer = [], [], [], [], [], False
    padding: list[Any] = []
    any_padding = False
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj, rid, mask, (height, width) = _jsonl_prediction(line)
                except ValueError as err:
                    kind = "" if path.suffix == ".jsonl" else " (predictions are .parquet or JSON Lines, .jsonl)"
                    raise EvaluationError(
                        f"{path}: line {lineno}: not a prediction "
                        f"{{record_id, mask: {{size, counts}}, answer?}}: {err}{kind}"
                    ) from err
                counts.append(mask["counts"])
                heights.append(height)
                widths.append(width)
                if not isinstance(rid, str):
                    raise EvaluationError(f"{path}: line {lineno}: record_id must be a string, got {rid!r}")
                ids.append(rid)
                any_answer = any_answer or "answer" in obj
                answers.append(obj.get("answer"))
                any_padding = any_padding or "padding_pixels" in obj
                padding.append(obj.get("padding_pixels"))
                if len(ids) == _JSONL_CHUNK:  # keep few Python objects alive: Arrow holds the rest
                    tables.append(_prediction_table(ids, counts, heights, widths, answers, str(path), padding))
                    ids, counts, heights, widths, answers, padding = [], [], [], [], [], []
    except (OSError, UnicodeDecodeError) as err:
        raise EvaluationError(f"{path}: unreadable predictions file: {err}") from err
    tables.append(_prediction_table(ids, counts, heights, widths, answers, str(path), padding))
    table = pa.concat_tables(tables)
    unused = [name for name, seen in (("answer", any_answer), ("padding_pixels", any_padding)) if not seen]
    return table.drop_columns(unused)


def _jsonl_prediction(line: str) -> tuple[dict[str, Any], Any, dict[str, Any], tuple[int, int]]:
    """One JSON Lines prediction: ``(object, record_id, mask, (height, width))``.

    Raises
    ------
    ValueError
        Saying in plain words what the line lacks.
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        # json's "Invalid control character at" already ends in "at"
        raise ValueError(f"not valid JSON ({err.msg.removesuffix(' at')} at column {err.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON {type(obj).__name__}, not an object")
    for field in ("record_id", "mask"):
        if field not in obj:
            raise ValueError(f"it has no {field!r} field")
    mask, size = _rle_mask(obj["mask"])
    return obj, obj["record_id"], mask, size


def _rle_mask(mask: Any) -> tuple[dict[str, Any], tuple[int, int]]:
    """A COCO RLE mask object (or its JSON text) and its ``(height, width)``.

    Raises
    ------
    ValueError
        Saying in plain words what the mask lacks.
    """
    if isinstance(mask, str):
        try:
            mask = json.loads(mask)
        except json.JSONDecodeError:
            raise ValueError("its mask is a string that is not JSON") from None
    if not isinstance(mask, dict):
        raise ValueError("its mask is not an object {size: [height, width], counts: RLE string}")
    for field in ("size", "counts"):
        if field not in mask:
            raise ValueError(f"its mask has no {field!r} field")
    size = mask["size"]
    if not (
        isinstance(size, list)
        and len(size) == 2
        and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and 0 <= v < 2**31
            for v in size
        )
    ):
        raise ValueError(f"its mask's size is {size!r}, not [height, width] integers")
    return mask, (int(size[0]), int(size[1]))


def predictions_from_table(table: Any, where: str = "predictions") -> pa.Table:
    """Normalise an in-memory predictions table (pyarrow Table or pandas DataFrame with
    ``record_id``, ``mask`` and optional ``answer`` and ``padding_pixels``) like
    :func:`read_predictions`.

    Raises
    ------
    EvaluationError
        If a column is missing or of the wrong type; ``where`` names the source.
    """
    if not isinstance(table, pa.Table):
        if not hasattr(table, "columns"):
            raise EvaluationError(
                f"{where}: expected a predictions file path, a pandas DataFrame or a pyarrow Table, "
                f"got {type(table).__name__}"
            )
        try:
            table = pa.Table.from_pandas(table, preserve_index=False)
        except (TypeError, ValueError, pa.ArrowException) as err:
            raise EvaluationError(f"{where}: not a table of predictions: {err}") from err
    for col in ("record_id", "mask"):
        if col not in table.column_names:
            raise EvaluationError(f"{where}: missing column {col!r} (have {table.column_names})")
    ids = table.column("record_id")
    if not _is_text(ids.type) or ids.null_count:
        raise EvaluationError(f"{where}: record_id must be non-null strings, got {ids.type}")
    answer = table.column("answer") if "answer" in table.column_names else None
    if answer is not None and not (_is_text(answer.type) or pa.types.is_null(answer.type)):
        raise EvaluationError(f"{where}: column 'answer' must hold strings, got {answer.type}")
    padding = None
    if "padding_pixels" in table.column_names:
        padding = _padding_array(table.column("padding_pixels"), ids, where)
    mask = table.column("mask")
    if _is_rle_struct(mask.type):  # the usual case, kept in Arrow (no Python objects per row)
        mask = mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
        size, counts = pc.struct_field(mask, "size"), pc.struct_field(mask, "counts")
        bad = pc.or_kleene(
            pc.is_null(mask), pc.or_kleene(pc.is_null(counts), pc.not_equal(pc.list_value_length(size), 2))
        )
        bad = pc.fill_null(bad, True)
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            raise EvaluationError(
                f"{where}: record {ids[row].as_py()!r}: mask must be a COCO RLE "
                f"{{size: [H, W], counts}}, got {mask[row].as_py()!r:.120}"
            )
        cols = {
            "record_id": ids.cast(pa.string()),
            "counts": counts.cast(pa.string()),
            "height": pc.list_element(size, 0).cast(pa.int64()),
            "width": pc.list_element(size, 1).cast(pa.int64()),
        }
        if answer is not None:
            cols["answer"] = answer.cast(pa.string())
        if padding is not None:
            cols["padding_pixels"] = padding
        return pa.table(cols)
    counts, heights, widths = mask_column(mask, where)
    out = _prediction_table(
        ids.to_pylist(), counts, heights, widths, None if answer is None else answer.to_pylist(), where
    )
    return out if padding is None else out.append_column("padding_pixels", padding)


def _padding_array(column: Any, ids: Any, where: Any) -> pa.Array:
    """The ``padding_pixels`` column as int64 >= 0 (null read as 0).

    Raises
    ------
    EvaluationError
        If it holds anything but non-negative integers and nulls; ``where`` names the source.
    """
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_floating(column.type):  # pandas turns an integer column with a null into floats
        whole = pc.fill_null(pc.equal(pc.floor(column), column), True)  # NaN != NaN: not whole
        nan = pc.fill_null(pc.is_nan(column), False)
        if not pc.all(pc.or_(whole, nan)).as_py():
            row = pc.index(pc.and_(pc.invert(whole), pc.invert(nan)), True).as_py()
            raise EvaluationError(
                f"{where}: record {ids[row].as_py()!r}: padding_pixels must be an integer, got {column[row].as_py()}"
            )
        column = pc.if_else(nan, pa.scalar(None, column.type), column)
    elif not (pa.types.is_integer(column.type) or pa.types.is_null(column.type)):
        raise EvaluationError(f"{where}: column 'padding_pixels' must hold integers, got {column.type}")
    try:
        column = pc.fill_null(column.cast(pa.int64()), 0)
    except pa.ArrowInvalid as err:
        raise EvaluationError(f"{where}: column 'padding_pixels': {err}") from None
    negative = pc.less(column, 0)
    if pc.any(negative).as_py():
        row = pc.index(negative, True).as_py()
        raise EvaluationError(
            f"{where}: record {ids[row].as_py()!r}: padding_pixels must be >= 0, got {column[row].as_py()}"
        )
    return column


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_rle_struct(t: pa.DataType) -> bool:
    names = {f.name: f.type for f in t} if pa.types.is_struct(t) else {}
    return (
        "counts" in names
        and "size" in names
        and _is_text(names["counts"])
        and (pa.types.is_list(names["size"]) or pa.types.is_large_list(names["size"]))
        and pa.types.is_integer(names["size"].value_type)
    )


def _prediction_table(
    ids: list[Any],
    counts: list[Any],
    heights: list[Any],
    widths: list[Any],
    answers: list[Any] | None,
    path: Any,
    padding: list[Any] | None = None,
) -> pa.Table:
    norm = []
    for rid, c, h, w in zip(ids, counts, heights, widths):
        if isinstance(c, list):  # uncompressed COCO RLE: compress (checks the runs add up to H*W)
            try:
                c = coco_rle({"size": [h, w], "counts": c})["counts"]
            except MaskError as err:
                raise EvaluationError(f"{path}: record {rid!r}: {err}") from err
        if isinstance(c, bytes):
            c = c.decode("ascii", errors="replace")
        if not isinstance(c, str):
            raise EvaluationError(f"{path}: record {rid!r}: mask counts must be a COCO RLE string, got {c!r:.60}")
        norm.append(c)
    try:
        sizes = {"height": pa.array(heights, pa.int64()), "width": pa.array(widths, pa.int64())}
    except (TypeError, ValueError, pa.ArrowException) as err:
        raise EvaluationError(f"{path}: mask sizes must be integers [H, W]: {err}") from err
    cols: dict[str, Any] = {"record_id": pa.array(ids, pa.string()), "counts": pa.array(norm, pa.string()), **sizes}
    if answers is not None:
        bad = next((i for i, a in enumerate(answers) if a is not None and not isinstance(a, str)), None)
        if bad is not None:
            raise EvaluationError(f"{path}: record {ids[bad]!r}: answer must be a string or null")
        cols["answer"] = pa.array(answers, pa.string())
    if padding is not None:
        # whole floats are read (3.0), as from Parquet or pandas (_padding_array)
        padding = [int(v) if isinstance(v, float) and v.is_integer() else v for v in padding]
        bad = next(
            (i for i, v in enumerate(padding) if v is not None and (not isinstance(v, int) or isinstance(v, bool))),
            None,
        )
        if bad is not None:
            raise EvaluationError(f"{path}: record {ids[bad]!r}: padding_pixels must be an integer or null")
        try:
            values = pa.array(padding, pa.int64())
        except (OverflowError, pa.ArrowInvalid) as err:
            raise EvaluationError(f"{path}: padding_pixels out of range: {err}") from None
        cols["padding_pixels"] = _padding_array(values, pa.array(ids, pa.string()), path)
    return pa.table(cols)


#: Optional columns of a model's predictions file that say how each answer was decided
#: (:class:`cxrils.models.base.Prediction`); evaluation reads none of them.
SCORE_FIELDS: tuple[tuple[str, Any], ...] = (
    ("presence_score", pa.float64()),
    ("presence_threshold", pa.float64()),
    ("note", pa.string()),
)


def _finite_or_none(value: Any) -> Any:
    """``value``, or None for a non-finite float (JSON has no NaN; Parquet gets a null)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_predictions(
    path: str | Path,
    rows: Iterable[dict[str, Any]],
    *,
    with_answers: bool = True,
    with_scores: bool = False,
    with_padding: bool = False,
    chunk_size: int = 4096,
) -> int:
    """Write predictions atomically as Parquet (``.parquet``) or JSON Lines (other suffixes).

    Parameters
    ----------
    path : path
        Destination file.
    rows : iterable of dict
        ``{"record_id": str, "mask": {"size": [H, W], "counts": str}, "answer": str | None}``;
        streamed in chunks of ``chunk_size`` rows.
    with_answers : bool
        Write the ``answer`` column/key. Without it, evaluation reports text accuracy
        as n/a; with it, a null answer is scored as wrong.
    with_scores : bool
        Also write :data:`SCORE_FIELDS` from each row (``presence_score`` in [0, 1],
        ``presence_threshold`` and ``note``, null where a row has none), which say why
        an answer is present or absent.
    with_padding : bool
        Also write ``padding_pixels`` (int >= 0, 0 where a row has none): the
        prediction's pixels in the padding of SAM's square, which the authors' protocol
        counts (:attr:`cxrils.models.base.Prediction.padding_pixels`).

    Returns
    -------
    int
        Rows written.
    """
    path = Path(path)
    fields = [
        ("record_id", pa.string()),
        ("mask", pa.struct([("size", pa.list_(pa.int32())), ("counts", pa.string())])),
    ]
    schema = pa.schema(
        fields
        + ([("answer", pa.string())] if with_answers else [])
        + (list(SCORE_FIELDS) if with_scores else [])
        + ([("padding_pixels", pa.int64())] if with_padding else [])
    )

    def plain(row: dict[str, Any]) -> dict[str, Any]:
        out = {
            "record_id": row["record_id"],
            "mask": {"size": [int(v) for v in row["mask"]["size"]], "counts": row["mask"]["counts"]},
        }
        if with_answers:
            out["answer"] = row.get("answer")
        if with_scores:
            out.update({name: _finite_or_none(row.get(name)) for name, _ in SCORE_FIELDS})
        if with_padding:
            out["padding_pixels"] = int(row.get("padding_pixels") or 0)
        return out

    n = 0
    with atomic_path(path, suffix=path.suffix) as tmp:
        if path.suffix == ".parquet":
            with pq.ParquetWriter(tmp, schema) as writer:
                chunk: list[dict[str, Any]] = []
                for row in rows:
                    chunk.append(plain(row))
                    if len(chunk) >= chunk_size:
                        writer.write_table(pa.Table.from_pylist(chunk, schema))
                        n, chunk = n + len(chunk), []
                if chunk or n == 0:
                    writer.write_table(pa.Table.from_pylist(chunk, schema))
                    n += len(chunk)
        else:
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(plain(row), separators=(",", ":")) + "\n")
                    n += 1
    return n
