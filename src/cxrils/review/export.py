"""``--export-accepted``: the records the review accepted, as a new dataset.

Writes ``OUT/cxrils/`` (a finalized cxrils dataset: the accepted records unchanged,
their images and grounding files, through :class:`cxrils.dataset.DatasetWriter`) and
``OUT/mimic-ils/`` (the same records in the released MIMIC-ILS layout,
:func:`cxrils.dataset.mimic_ils.export_mimic_ils`). A record is accepted by the
consensus rule of :mod:`cxrils.review.stats` (some reviewer accepted it, none rejected
it). The source dataset and its review database are only read.

The export is built in a hidden folder beside ``OUT`` and swapped in by renames, so
``OUT`` is always a whole export (the previous one until the new one is complete).
"""

from __future__ import annotations

import datetime as _dt
import shutil
import tempfile
from pathlib import Path

import numpy as np

from cxrils.dataset import DatasetError, DatasetWriter, image_relpath, read_grounding, read_manifest, read_records
from cxrils.dataset.mimic_ils import export_mimic_ils
from cxrils.fsutil import fsync_folder
from cxrils.review.stats import consensus, current_frame
from cxrils.review.store import ReviewStore


def accepted_ids(store: ReviewStore) -> set[str]:
    """Record ids whose consensus is "accepted"."""
    cons = consensus(current_frame(store))
    return set(cons.loc[cons["accepted"], "record_id"])


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
        Receives ``cxrils/`` and ``mimic-ils/``; replaced as a whole if it exists.

    Returns
    -------
    dict
        ``records``, ``images``, ``out``, ``cxrils`` and ``mimic_ils`` (paths), and
        ``mimic_ils_counts`` (:func:`export_mimic_ils`'s counts).

    Raises
    ------
    cxrils.dataset.DatasetError
        If the dataset cannot be read, or an accepted record's image is missing.
    OSError
        If the output cannot be written.
    """
    from PIL import Image

    root, out = Path(dataset_dir), Path(out_dir).resolve()
    keep = accepted_ids(store)
    records = read_records(root)
    records = records[records["record_id"].isin(keep)]
    source = read_manifest(root)
    provenance = {
        "reviewed_subset_of": {"dataset": str(root.resolve()), "provenance": source.get("provenance"),
                               "review_database": store.path.name, "review_plan": store.plan(),
                               "dataset_fingerprint": store.meta.get("dataset_fingerprint")},
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
                writer.commit_study(str(image_id), x, [_row(r) for r in group.to_dict("records")],
                                    grounding=read_grounding(root, str(image_id)))
            writer.finalize()
        counts = export_mimic_ils(ds, tmp / "mimic-ils")
        for key in ("json", "images_dir", "masks_dir"):  # the paths they will have once swapped in
            counts[key] = counts[key].replace(str(tmp), str(out), 1)
        old = out.with_name(f".{out.name}.old")
        if old.exists():
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
    return {"records": len(records), "images": int(records["image_id"].nunique()), "out": str(out),
            "cxrils": str(out / "cxrils"), "mimic_ils": str(out / "mimic-ils"), "mimic_ils_counts": counts}
