"""Writing and reading a cxrils dataset folder (Parquet shards + PNG images + manifest).

Layout of ``out_dir``::

    .cxrils-writer.lock          held by the one DatasetWriter open on the folder
    provenance.json              run provenance given to DatasetWriter
    images/{image_id}.png        8-bit image x the masks refer to
    grounding/{image_id}.json    how the study was grounded (optional; cxrils generate writes it)
    parts/{image_id}.parquet     records of one finished study (the commit marker)
    excluded/{image_id}.json     exclusion marker {"image_id", "reason"}
    records/{split}-00000.parquet  deterministic shards written by finalize()
    manifest.json                schema version, shards (rows, sha256), counts, provenance

Every file is written atomically (:mod:`cxrils.fsutil`, folder fsynced after each
rename): a run killed at any point leaves only whole files plus hidden temporary
files (``.name.*``) that are ignored and cleaned. A study is done once its part file
or exclusion marker exists, so a rerun skips it (:meth:`DatasetWriter.done_ids`).
Only one writer at a time may hold a folder (a lock file; another process gets a
:class:`DatasetError`), and a folder is reopened only with the provenance it was
started with, so a dataset never mixes code, configuration or weight versions.
Readers check every shard against the SHA-256 the manifest lists.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock, Timeout

from cxrils.dataset.schema import COLUMNS, SCHEMA_VERSION, arrow_schema
from cxrils.dataset.splits import SPLITS, SplitError
from cxrils.fsutil import SAFE_IMAGE_ID, atomic_path, atomic_write_json, fsync_dir, fsync_folder, sha256_file
from cxrils.masks import MaskError, rle_area
from cxrils.vocab import split_filter

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

#: Rows per records shard (ours; ~50k rows keeps a shard near 10-20 MB).
DEFAULT_SHARD_SIZE = 50_000
#: Lock file of the folder's writer (hidden; flock-based, released when the process ends).
LOCK_NAME = ".cxrils-writer.lock"


class DatasetError(ValueError):
    """Raised for a malformed dataset folder, record or image (the message names the file)."""


class ProvenanceMismatch(DatasetError):
    """Raised by :class:`DatasetWriter` when a folder was started with another provenance
    (the message lists what changed); callers add how to resume or start over."""


def unreadable_part(path: str | Path, err: Exception) -> DatasetError:
    """The error for a part file (``parts/{image_id}.parquet``) that cannot be read, with
    the way out: deleting it makes ``cxrils generate`` process that one study again (the
    run resumes from the parts), so the dataset comes out as an uninterrupted run's."""
    cause = " ".join(str(err).split()) or type(err).__name__
    return DatasetError(
        f"{path}: unreadable part file ({cause}); delete this file and rerun cxrils generate with "
        "the same input and output: only this study is processed again, the other parts are kept "
        "and the result is identical"
    )


def image_relpath(image_id: str) -> str:
    """Path of an image inside the dataset folder: ``images/{image_id}.png``."""
    return f"images/{image_id}.png"


def grounding_relpath(image_id: str) -> str:
    """Path of a study's grounding inside the dataset folder: ``grounding/{image_id}.json``."""
    return f"grounding/{image_id}.json"


def read_grounding(dataset_dir: str | Path, image_id: str) -> dict[str, Any] | None:
    """The grounding :meth:`DatasetWriter.commit_study` stored for an image, or None
    when the dataset has none for it (written by an older cxrils, imported, or built
    by hand).

    The dict is :func:`cxrils.grounding.grounding_to_dict` of the study (per finding:
    the structured finding, reported / grounded / empty lung-region labels, every
    candidate box with Algorithm 1's c1-c4 values and verdicts, the kept boxes, the
    drop reason) plus ``report``: the report section the findings came from.

    Raises
    ------
    DatasetError
        If the id is not a safe file name, or the file exists but is not a JSON object.
    """
    _check_id(image_id)
    path = Path(dataset_dir) / grounding_relpath(image_id)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DatasetError(f"{path}: unreadable grounding file: {err}") from err
    if not isinstance(doc, dict):
        raise DatasetError(f"{path}: grounding file is not a JSON object")
    return doc


def _check_id(image_id: str) -> None:
    if not isinstance(image_id, str) or not SAFE_IMAGE_ID.match(image_id):
        raise DatasetError(
            f"image id {image_id!r} is not a safe file name "
            "(no '/', '\\', control characters or leading '.', at most 200 characters)"
        )


def provenance_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """What differs between two JSON-ready provenances, one line per leaf:
    ``"config.grounding.tau_ano: 0.1, now 0.2"``; long strings (hashes) are shortened."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in new:
                out.append(f"{where}: {_short(old[key])}, now absent")
            elif key not in old:
                out.append(f"{where}: absent, now {_short(new[key])}")
            else:
                out.extend(provenance_changes(old[key], new[key], where))
        return out
    return [] if old == new else [f"{prefix or 'provenance'}: {_short(old)}, now {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:24] + "..." + text[-8:]


def _record_key(record_id: str) -> tuple[str, int]:
    image_id, _, index = str(record_id).rpartition(":")
    return image_id, int(index)


class DatasetWriter:
    """Atomic, resumable writer of a dataset folder (layout in the module docstring).

    Parameters
    ----------
    out_dir : path
        Dataset folder; created if missing. Reopening an existing folder resumes.
    provenance : dict
        JSON-serialisable run description (backends and versions, thresholds, code
        version); written to ``provenance.json`` and to the manifest.
    shard_size : int
        Rows per records shard written by :meth:`finalize`.
    informative : tuple of str
        Top-level provenance keys that only inform (e.g. the git commit of the whole
        checkout, where a code hash identifies the code): a resumed run whose provenance
        differs only in them resumes and keeps the values the folder was started with.

    Raises
    ------
    DatasetError
        If ``out_dir`` is a file or cannot be created, or another writer holds the
        folder (its lock, :data:`LOCK_NAME`);
        :class:`ProvenanceMismatch` if the folder was started with a different
        provenance outside ``informative`` and holds a committed study (the message
        lists what changed, see :func:`provenance_changes`); with nothing committed the
        new provenance replaces the old.

    Notes
    -----
    The writer holds the folder's lock until :meth:`close` (or the end of a ``with``
    block, or of the process). Use one writer per folder at a time.
    """

    def __init__(
        self,
        out_dir: str | Path,
        provenance: dict[str, Any],
        *,
        shard_size: int = DEFAULT_SHARD_SIZE,
        informative: tuple[str, ...] = (),
    ):
        if shard_size < 1:
            raise DatasetError(f"shard_size must be >= 1, got {shard_size}")
        self.out_dir = Path(out_dir)
        self.provenance = dict(provenance)
        self.informative = tuple(informative)
        self.shard_size = int(shard_size)
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise DatasetError(f"{self.out_dir}: exists and is not a folder; a dataset is written into a folder")
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise DatasetError(f"{self.out_dir}: cannot create the dataset folder: {err}") from None
        self._lock = FileLock(str(self.out_dir / LOCK_NAME), timeout=0)
        try:
            self._lock.acquire()
        except Timeout:
            raise DatasetError(
                f"{self.out_dir}: another process is writing this dataset (it holds "
                f"{self.out_dir / LOCK_NAME}); wait for it to finish, or write to another "
                "folder"
            ) from None
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        prov_path = self.out_dir / "provenance.json"
        resuming = prov_path.exists()
        if not resuming:
            others = sorted(p.name for p in self.out_dir.iterdir() if p.name != LOCK_NAME)
            if others:  # new-user trial: a dataset went into a folder of unrelated files without a word
                shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
                log.warning(
                    "%s holds files of no cxrils dataset (%s); the dataset is written beside them", self.out_dir, shown
                )
        for sub in ("images", "grounding", "parts", "excluded"):
            (self.out_dir / sub).mkdir(parents=True, exist_ok=True)
        new = json.loads(json.dumps(self.provenance, sort_keys=True, default=str))
        if resuming:
            try:
                old = json.loads(prov_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as err:
                raise DatasetError(f"{prov_path}: unreadable provenance: {err}") from err
            if isinstance(old, dict) and old != new:
                kept = {k: old[k] for k in self.informative if k in old}
                if {**new, **kept} == old:  # only informative keys differ: resume as started
                    self.provenance.update(kept)
                    new = old
            if old != new and not self.done_ids():
                # nothing was committed under it (a run that stopped while loading its stages,
                # new-user trial): no version to mix, so this run's provenance replaces it
                log.info("%s: nothing committed under its earlier provenance; starting with this one", self.out_dir)
                atomic_write_json(prov_path, self.provenance)
                return
            if old != new:
                changes = provenance_changes(old, new)
                more = f" (and {len(changes) - 8} more)" if len(changes) > 8 else ""
                raise ProvenanceMismatch(
                    f"{self.out_dir} was started with another provenance ({prov_path}): "
                    + "; ".join(changes[:8])
                    + more
                )
        else:
            atomic_write_json(prov_path, self.provenance)

    def close(self) -> None:
        """Release the folder's lock (the writer is not used afterwards)."""
        self._lock.release()

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _clean_temp(self) -> None:
        for sub in ("images", "grounding", "parts", "excluded", "records"):
            folder = self.out_dir / sub
            if folder.is_dir():
                for tmp in folder.glob(".*"):
                    tmp.unlink(missing_ok=True)

    def done_ids(self) -> set[str]:
        """Image ids already committed (records or exclusion); temporary files ignored."""
        done = {p.stem for p in (self.out_dir / "parts").glob("*.parquet") if not p.name.startswith(".")}
        done |= {p.stem for p in (self.out_dir / "excluded").glob("*.json") if not p.name.startswith(".")}
        return done

    def commit_study(
        self,
        image_id: str,
        x: np.ndarray | None,
        records: list[dict[str, Any]] | None,
        excluded: str | None = None,
        grounding: dict[str, Any] | None = None,
    ) -> None:
        """Write one study atomically: its image and grounding, then its records (the commit marker).

        Parameters
        ----------
        image_id : str
            Used as a file name: no ``/``, ``\\``, control characters or leading ``.``.
        x : ndarray of uint8, shape (H, W), or None
            The 8-bit image the masks refer to; required when ``records`` is non-empty.
        records : list of dict or None
            Rows with the columns of :data:`cxrils.dataset.schema.COLUMNS` (as made by
            :func:`cxrils.instructions.generate_records`); ``image_path`` is set to
            ``images/{image_id}.png``. An empty list marks the study done with no rows.
        excluded : str or None
            Exclusion reason (QC); then only the marker is written and ``records``
            must be empty.
        grounding : dict or None
            JSON-ready account of how the study was grounded (:func:`read_grounding`
            says what ``cxrils generate`` puts there); written to
            ``grounding/{image_id}.json`` before the part file, so a committed study
            has it. A study committed without one, or excluded, has none (a file a
            failed attempt left is removed).

        Raises
        ------
        DatasetError
            On an unsafe id, a missing or malformed image, a record of another image,
            missing columns, or a mask that is not the record's (another size than
            its height x width, another area than its ``mask_area``, or pixels on a
            negative).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq
        from PIL import Image

        _check_id(image_id)
        records = list(records or [])
        if excluded is not None:
            if records:
                raise DatasetError(f"study {image_id}: excluded ({excluded}) but {len(records)} records given")
            atomic_write_json(
                self.out_dir / "excluded" / f"{image_id}.json", {"image_id": image_id, "reason": str(excluded)}
            )
            (self.out_dir / grounding_relpath(image_id)).unlink(missing_ok=True)  # of an attempt that failed
            return
        rows = [self._check_record(image_id, r) for r in records]
        if rows:
            if x is None:
                raise DatasetError(f"study {image_id}: records need the image x")
            x = np.asarray(x)
            if x.ndim != 2 or x.dtype != np.uint8:
                raise DatasetError(f"study {image_id}: image must be uint8 (H, W), got {x.dtype} {x.shape}")
            for r in rows:
                if (r["height"], r["width"]) != x.shape:
                    raise DatasetError(
                        f"study {image_id}: record {r['record_id']} is {r['height']}x{r['width']}"
                        f" but the image is {x.shape[0]}x{x.shape[1]}"
                    )
            with atomic_path(self.out_dir / image_relpath(image_id), suffix=".png") as tmp:
                Image.fromarray(x).save(tmp, format="PNG")
        try:
            table = pa.Table.from_pylist(rows, schema=arrow_schema())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise DatasetError(f"study {image_id}: records do not fit the schema: {err}") from err
        if grounding is not None:
            atomic_write_json(self.out_dir / grounding_relpath(image_id), grounding, indent=None)
        else:  # a file a failed attempt left would describe another commit
            (self.out_dir / grounding_relpath(image_id)).unlink(missing_ok=True)
        with atomic_path(self.out_dir / "parts" / f"{image_id}.parquet", suffix=".parquet") as tmp:
            pq.write_table(table, tmp)

    def _check_record(self, image_id: str, record: dict[str, Any]) -> dict[str, Any]:
        missing = [c for c in COLUMNS if c not in record and c != "image_path"]
        if missing:
            raise DatasetError(f"study {image_id}: record {record.get('record_id')!r} lacks columns {missing}")
        if record["image_id"] != image_id or _record_key(record["record_id"])[0] != image_id:
            raise DatasetError(
                f"study {image_id}: record {record['record_id']!r} belongs to image {record['image_id']!r}"
            )
        if record["split"] not in SPLITS:
            raise DatasetError(f"study {image_id}: record {record['record_id']!r} has split {record['split']!r}")
        row = {c: record.get(c) for c in COLUMNS}
        row["image_path"] = image_relpath(image_id)
        try:
            mask = {"size": [int(v) for v in record["mask"]["size"]], "counts": str(record["mask"]["counts"])}
        except (KeyError, TypeError, ValueError) as err:
            raise DatasetError(
                f"study {image_id}: record {record['record_id']!r} mask is not a COCO RLE dict: {err}"
            ) from err
        row["mask"] = mask
        # the mask must be the record's: its size, its area, and empty for a negative
        rid = record["record_id"]
        if mask["size"] != [record["height"], record["width"]]:
            raise DatasetError(
                f"study {image_id}: record {rid!r} mask is {mask['size'][0]}x{mask['size'][1]}"
                f" (H x W) but the record is {record['height']}x{record['width']}"
            )
        try:
            area = rle_area(mask)
        except MaskError as err:
            raise DatasetError(f"study {image_id}: record {rid!r} mask: {err}") from err
        if area != record["mask_area"]:
            raise DatasetError(
                f"study {image_id}: record {rid!r} has mask_area {record['mask_area']} but its mask {area}"
            )
        if record["polarity"] == "negative" and area:
            raise DatasetError(f"study {image_id}: record {rid!r} is a negative with a non-empty mask ({area} pixels)")
        return row

    def exclusions(self) -> dict[str, str]:
        """image_id -> exclusion reason of every excluded study (:func:`read_exclusions`)."""
        return read_exclusions(self.out_dir)

    def finalize(self) -> Path:
        """Compact the part files into deterministic shards and write ``manifest.json``.

        Rows are sorted by (image_id, record index) and split into
        ``records/{split}-{k:05d}.parquet`` of at most ``shard_size`` rows. The same
        committed studies always give byte-identical shards. Hidden temporary files
        of interrupted runs are deleted, so call it only once no writer is running.
        Returns the manifest path.

        The shards are written into ``records.new/``, which then replaces
        ``records/`` by two renames (the old folder kept as ``records.old/`` until the
        manifest is written), so an interrupted finalize never leaves a mix of old and
        new shards; the next finalize restores or removes what an interruption left.

        Raises
        ------
        DatasetError
            If a part file cannot be read.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        self._clean_temp()  # leftovers of interrupted runs (finalize runs after all writers stop)
        rec_dir, new_dir, old_dir = (self.out_dir / name for name in ("records", "records.new", "records.old"))
        if old_dir.is_dir():  # an interrupted swap: put the last complete shards back first
            if rec_dir.is_dir():
                shutil.rmtree(old_dir)
            else:
                old_dir.rename(rec_dir)
        if new_dir.exists():
            shutil.rmtree(new_dir)
        parts = sorted(p for p in (self.out_dir / "parts").glob("*.parquet") if not p.name.startswith("."))
        tables = []
        for p in parts:
            try:
                tables.append(pq.read_table(p, schema=arrow_schema()))
            except (OSError, pa.ArrowException) as err:
                raise unreadable_part(p, err) from err
        table = pa.concat_tables(tables) if tables else arrow_schema().empty_table()
        keys = [_record_key(r) for r in table.column("record_id").to_pylist()]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        table = table.take(pa.array(order, type=pa.int64()))
        new_dir.mkdir()
        shards = []
        for split in SPLITS:
            sub = table.filter(pc.equal(table.column("split"), split))
            for k, start in enumerate(range(0, sub.num_rows, self.shard_size)):
                name = f"{split}-{k:05d}.parquet"
                pq.write_table(sub.slice(start, self.shard_size), new_dir / name)
                shards.append(
                    {
                        "path": f"records/{name}",
                        "split": split,
                        "rows": min(self.shard_size, sub.num_rows - start),
                        "sha256": sha256_file(new_dir / name),
                    }
                )
        fsync_dir(new_dir)
        if rec_dir.is_dir():
            rec_dir.rename(old_dir)
        new_dir.rename(rec_dir)
        fsync_folder(self.out_dir)  # the two renames reach the disk before the manifest names the shards
        exclusions = self.exclusions()
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "columns": list(COLUMNS),
            "shards": shards,
            "n_records": table.num_rows,
            "n_images": len({r for r in table.column("image_id").to_pylist()}),
            "counts": _counts(table.select(["split", "lesion_type", "instruction_type", "polarity"]).to_pylist()),
            "exclusions": {"n": len(exclusions), "by_reason": dict(sorted(Counter(exclusions.values()).items()))},
            "provenance": self.provenance,
        }
        path = self.out_dir / "manifest.json"
        atomic_write_json(path, manifest)
        if old_dir.is_dir():
            shutil.rmtree(old_dir)
            fsync_folder(self.out_dir)
        return path


def read_exclusions(dataset_dir: str | Path) -> dict[str, str]:
    """image_id -> exclusion reason of every excluded study of a dataset folder
    (``excluded/*.json``); read-only, finalized or not.

    Raises
    ------
    DatasetError
        If a marker is malformed.
    """
    out = {}
    for p in sorted((Path(dataset_dir) / "excluded").glob("*.json")):
        if p.name.startswith("."):
            continue
        try:
            out[p.stem] = json.loads(p.read_text(encoding="utf-8"))["reason"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
            raise DatasetError(f"{p}: malformed exclusion marker: {err}") from err
    return out


def _counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by split, lesion type, instruction type and polarity (nested dicts)."""

    def tally(key: str) -> dict[str, int]:
        return dict(sorted(Counter(r[key] for r in rows).items()))

    detail: dict[str, dict[str, Any]] = {}
    for r in rows:
        d = detail.setdefault(r["split"], {}).setdefault(r["lesion_type"], {}).setdefault(r["instruction_type"], {})
        d[r["polarity"]] = d.get(r["polarity"], 0) + 1
    return {
        "by_split": tally("split"),
        "by_lesion_type": tally("lesion_type"),
        "by_instruction_type": tally("instruction_type"),
        "by_polarity": tally("polarity"),
        "by_split_type_instruction_polarity": detail,
    }


def read_manifest(dataset_dir: str | Path) -> dict[str, Any]:
    """The parsed ``manifest.json`` of a finalized dataset.

    Raises
    ------
    DatasetError
        If the folder does not exist, the manifest is missing (dataset not finalized),
        unreadable, or of another schema version.
    """
    path = Path(dataset_dir) / "manifest.json"
    if not Path(dataset_dir).is_dir():
        what = "not a folder" if Path(dataset_dir).exists() else "no such dataset folder"
        raise DatasetError(f"{dataset_dir}: {what}")
    if not path.is_file():
        raise DatasetError(f"{path}: no manifest; is this a finalized cxrils dataset folder?")
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DatasetError(f"{path}: unreadable manifest: {err}") from err
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise DatasetError(
            f"{path}: schema version {manifest.get('schema_version')!r}, this cxrils reads {SCHEMA_VERSION}"
        )
    return manifest


def _shards(dataset_dir: str | Path, split: str | None) -> list[dict[str, Any]]:
    """The manifest's shard entries (of one split, or all), after checking that
    ``records/`` holds exactly the manifest's shards and that each of them has the
    SHA-256 the manifest lists.

    Raises
    ------
    DatasetError
        If the split is unknown (aliases such as "val" are normalised), ``records/``
        and the manifest list different shards (a finalize interrupted between swapping the records folder and
        writing the manifest, or files changed by hand), or a shard's bytes are not
        those the manifest lists (corrupt or replaced; the message names it).
    """
    manifest = read_manifest(dataset_dir)
    try:
        split = split_filter(split)  # "val", "validation" name the validate split; "all" every one
    except SplitError as err:
        raise DatasetError(str(err)) from None
    root = Path(dataset_dir)
    listed = {s["path"] for s in manifest["shards"]}
    on_disk = {f"records/{p.name}" for p in (root / "records").glob("*.parquet")}
    if listed != on_disk:
        raise DatasetError(
            f"{root}: records/ and manifest.json disagree (missing {sorted(listed - on_disk)}, "
            f"unlisted {sorted(on_disk - listed)}); an interrupted finalize? "
            "Run the finalize again (rerun `cxrils generate` with the same output folder)"
        )
    chosen = [s for s in manifest["shards"] if split is None or s["split"] == split]
    for shard in chosen:
        path = root / shard["path"]
        try:
            digest = sha256_file(path)
        except OSError as err:
            raise DatasetError(f"{path}: unreadable records shard: {err}") from err
        if digest != shard.get("sha256"):
            raise DatasetError(
                f"{path}: records shard is corrupt or was replaced: its SHA-256 is {digest}, "
                f"manifest.json lists {shard.get('sha256')}; write the shards again from the committed "
                "studies (rerun `cxrils generate` with the same input and output folder)"
            )
    return chosen


def shard_paths(dataset_dir: str | Path, split: str | None = None) -> list[Path]:
    """Absolute paths of the records shards (of one split, or all), in manifest order;
    usable as ``datasets.load_dataset("parquet", data_files=...)``.

    Raises
    ------
    DatasetError
        As :func:`_shards`.
    """
    return [Path(dataset_dir) / s["path"] for s in _shards(dataset_dir, split)]


def read_records(dataset_dir: str | Path, split: str | None = None) -> pd.DataFrame:
    """All records of a finalized dataset (or of one split) as a pandas DataFrame.

    Columns are those of :data:`cxrils.dataset.schema.COLUMNS`; ``mask`` holds dicts
    ``{"size": array([H, W]), "counts": str}`` (decode with
    :func:`cxrils.masks.decode_rle`); ``locations`` holds arrays of str. ``split``:
    "train", "validate", "test" or an alias (:func:`cxrils.vocab.normalize_split`:
    "val", "validation", "testing", any case), None or "all" for all rows
    (:func:`cxrils.vocab.split_filter`).

    Raises
    ------
    DatasetError
        If the split name is unknown, the dataset is not finalized, a shard is missing, corrupt or replaced (its
        SHA-256 differs from the manifest's), or a shard's row count differs from the
        manifest's (shards of another finalize).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for shard in _shards(dataset_dir, split):
        p = Path(dataset_dir) / shard["path"]
        try:
            tables.append(pq.read_table(p, schema=arrow_schema()))
        except (OSError, pa.ArrowException) as err:
            raise DatasetError(f"{p}: unreadable records shard: {err}") from err
        if tables[-1].num_rows != shard["rows"]:
            raise DatasetError(
                f"{p}: {tables[-1].num_rows} rows, manifest.json says {shard['rows']}; "
                "shards and manifest come from different finalize runs: finalize again"
            )
    table = pa.concat_tables(tables) if tables else arrow_schema().empty_table()
    return table.to_pandas()
