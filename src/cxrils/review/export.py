"""``--export-accepted``: the records the review accepted, as a new dataset.

Writes ``OUT/cxrils/`` (a finalized cxrils dataset: the accepted records unchanged,
their images and grounding files, through :class:`cxrils.dataset.DatasetWriter`) and
``OUT/mimic-ils/`` (the same records in the released MIMIC-ILS layout,
:func:`cxrils.dataset.mimic_ils.export_mimic_ils`). A record is accepted by the
consensus rule of :mod:`cxrils.review.stats` (some reviewer accepted it, none rejected
it). The source dataset and its review database are only read.

The export is built in a hidden folder beside ``OUT`` and swapped in by renames, so
``OUT`` is always a whole export (the previous one until the new one is complete).
Only an earlier export (or an empty folder) is ever replaced: ``OUT`` may not be the
dataset, lie inside it or hold it, and any other existing folder or file is refused.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from cxrils.dataset import DatasetError, DatasetWriter, image_relpath, read_grounding, read_manifest, read_records
from cxrils.dataset.mimic_ils import export_mimic_ils
from cxrils.fsutil import fsync_folder, within
from cxrils.review.stats import consensus, current_frame
from cxrils.review.store import ReviewError, ReviewStore

#: What an export folder holds (:func:`export_accepted`); a folder with anything else is no export.
EXPORT_ENTRIES: frozenset[str] = frozenset({"cxrils", "mimic-ils"})


def accepted_ids(store: ReviewStore) -> set[str]:
    """Record ids whose consensus is "accepted"."""
    cons = consensus(current_frame(store))
    return set(cons.loc[cons["accepted"], "record_id"])


def is_export(folder: Path) -> bool:
    """Whether ``folder`` is an earlier :func:`export_accepted` output: a folder holding
    only ``cxrils/`` and ``mimic-ils/``, whose ``cxrils/provenance.json`` names the
    reviewed dataset (``reviewed_subset_of``)."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    names = {p.name for p in folder.iterdir()}
    if not names or not names <= EXPORT_ENTRIES:
        return False
    try:
        provenance = json.loads((folder / "cxrils" / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(provenance, dict) and "reviewed_subset_of" in provenance


def _replaceable(folder: Path) -> bool:
    """An empty folder or an earlier export: what an export may replace."""
    return is_export(folder) or (folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()))


def check_export_dir(dataset_dir: Path, out: Path) -> None:
    """Refuse an export folder whose replacement would lose anything.

    Raises
    ------
    ReviewError
        If ``out`` is the dataset, lies inside it or holds it, or exists and is neither
        an empty folder nor an earlier export (:func:`is_export`).
    """
    src, out = Path(dataset_dir).resolve(), Path(out).resolve()
    if within(out, src) or within(src, out):
        raise ReviewError(
            f"{out}: the accepted records must go to a folder outside the reviewed dataset {src} "
            "(neither the dataset, a folder inside it, nor one that holds it)"
        )
    if out.exists() and not _replaceable(out):
        raise ReviewError(
            f"{out}: exists and is not an earlier export of accepted records (it would be replaced "
            "as a whole); name a new folder, or move this one away"
        )


def _row(record: dict) -> dict:
    """A record read back from Parquet as the writer takes it (lists, not arrays)."""
    out = dict(record)
    out["locations"] = [str(v) for v in record["locations"]]
    out["mask"] = {"size": [int(v) for v in record["mask"]["size"]], "counts": str(record["mask"]["counts"])}
    return out


def export_accepted(dataset_dir: str | Path, store: ReviewStore, out_dir: str | Path) -> dict:
    """Write the accepted records as a cxrils dataset and in the MIMIC-ILS layout.

    Parameters
    ----------
    dataset_dir : path
        The reviewed (finalized) dataset.
    store : ReviewStore
        Its review database.
    out_dir : path
        Receives ``cxrils/`` and ``mimic-ils/``. An earlier export or an empty folder
        there is replaced as a whole; anything else is refused (:func:`check_export_dir`).

    Returns
    -------
    dict
        ``records``, ``images``, ``out``, ``cxrils`` and ``mimic_ils`` (paths), and
        ``mimic_ils_counts`` (:func:`export_mimic_ils`'s counts).

    Raises
    ------
    ReviewError
        If ``out_dir`` is not a folder the export may replace (:func:`check_export_dir`).
    cxrils.dataset.DatasetError
        If the dataset cannot be read, or an accepted record's image is missing.
    OSError
        If the output cannot be written.
    """
    from PIL import Image

    root, out = Path(dataset_dir), Path(out_dir).resolve()
    check_export_dir(root, out)
    keep = accepted_ids(store)
    records = read_records(root)
    records = records[records["record_id"].isin(keep)]
    source = read_manifest(root)
    provenance = {
        "reviewed_subset_of": {
            "dataset": str(root.resolve()),
            "provenance": source.get("provenance"),
            "review_database": store.path.name,
            "review_plan": store.plan(),
            "dataset_fingerprint": store.meta.get("dataset_fingerprint"),
        },
        "rule": "accepted by at least one reviewer and rejected by none",
        "reviewers": store.reviewers(),
        "exported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        ds = tmp / "cxrils"
        with DatasetWriter(ds, provenance) as writer:
            for image_id, group in records.groupby("image_id", sort=True):
                src = root / image_relpath(str(image_id))
                if not src.is_file():
                    raise DatasetError(f"{src}: image of accepted records of {image_id} missing from the dataset")
                with Image.open(src) as im:
                    x = np.asarray(im.convert("L"))
                writer.commit_study(
                    str(image_id),
                    x,
                    [_row(r) for r in group.to_dict("records")],
                    grounding=read_grounding(root, str(image_id)),
                )
            writer.finalize()
        counts = export_mimic_ils(ds, tmp / "mimic-ils")
        for key in ("json", "images_dir", "masks_dir"):  # the paths they will have once swapped in
            counts[key] = counts[key].replace(str(tmp), str(out), 1)
        check_export_dir(root, out)  # again: the folder may have changed while the export was built
        old = out.with_name(f".{out.name}.old")
        if old.exists():  # the previous export of a swap that was interrupted
            if not _replaceable(old):
                raise ReviewError(f"{old}: left in the way and not an earlier export; move it away")
            shutil.rmtree(old)
        if out.exists():
            out.rename(old)
        tmp.rename(out)
        fsync_folder(out.parent)
        if old.exists():
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {
        "records": len(records),
        "images": int(records["image_id"].nunique()),
        "out": str(out),
        "cxrils": str(out / "cxrils"),
        "mimic_ils": str(out / "mimic-ils"),
        "mimic_ils_counts": counts,
    }
