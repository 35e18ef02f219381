"""One dataset under review: its database, its sampled records, what the page shows.

:func:`open_review` opens (or starts) the review of a finalized dataset: it makes the
sample on first use and stores it, and later checks that the dataset is still the one
the sample was drawn from. :class:`ReviewSession` answers the page: a sampled record
with its chain (:mod:`cxrils.review.chain`), its image and its mask, and the
reviewer's progress. The dataset is only read.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cxrils.dataset import read_grounding, read_manifest, read_records
from cxrils.fsutil import SAFE_IMAGE_ID
from cxrils.masks import decode_rle
from cxrils.overlay import LESION_RGB
from cxrils.review.chain import record_chain
from cxrils.review.sampling import SamplePlan, draw_sample
from cxrils.review.store import DB_NAME, REJECT_REASONS, ReviewError, ReviewStore, check_reviewer, dataset_fingerprint


def open_review(dataset_dir: str | Path, plan: SamplePlan | None = None) -> ReviewSession:
    """Open the review of a dataset, drawing and storing its sample on first use.

    Parameters
    ----------
    dataset_dir : path
        A finalized cxrils dataset; its review database is ``DATASET/review.sqlite``.
    plan : SamplePlan, optional
        How to draw the sample (default :class:`SamplePlan()`). Once a sample exists, a
        plan given here must be the stored one.

    Returns
    -------
    ReviewSession

    Raises
    ------
    DatasetError
        If the dataset is not finalized or a shard is corrupt.
    ReviewError
        If the dataset changed since its sample was drawn, or ``plan`` differs from the
        stored plan (the message shows both).
    cxrils.review.sampling.SamplingError
        If the plan cannot be drawn (no records, bad margin).
    """
    root = Path(dataset_dir).resolve()  # absolute: "." has no name to show or to put an export beside
    manifest = read_manifest(root)
    fingerprint = dataset_fingerprint(manifest)
    records = read_records(root)
    chosen = plan or SamplePlan()
    # A first start draws before it creates the database, so a plan that cannot be drawn leaves none behind.
    sample = None if (root / DB_NAME).exists() else draw_sample(records, chosen)
    store = ReviewStore(root / DB_NAME)
    try:
        stored = store.plan()
        if stored is None:
            store.create_sample(
                draw_sample(records, chosen) if sample is None else sample, chosen.to_dict(), fingerprint
            )
        else:
            if store.meta.get("dataset_fingerprint") != fingerprint:
                raise ReviewError(
                    f"{root}: the dataset's records changed since its review sample was drawn "
                    f"({store.path}); review the dataset it was drawn from, or move {store.path.name} "
                    "away to start a new review"
                )
            if plan is not None and plan.to_dict() != stored:
                raise ReviewError(
                    f"{store.path}: this review was planned with {json.dumps(stored, sort_keys=True)}; "
                    f"asked for {json.dumps(plan.to_dict(), sort_keys=True)}. Leave out the sampling "
                    f"options to continue it, or move {store.path.name} away to start a new review"
                )
        return ReviewSession(root, store, records)
    except BaseException:
        store.close()
        raise


def _plain(value: Any) -> Any:
    """Arrow/pandas values as JSON-ready Python values."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


class ReviewSession:
    """The review of one dataset (module docstring). Build it with :func:`open_review`.

    Attributes
    ----------
    root : Path
        The dataset folder, absolute.
    store : ReviewStore
    sample : pandas.DataFrame
        The stored sample, in review order.
    """

    def __init__(self, root: Path, store: ReviewStore, records):
        self.root = root
        self.store = store
        self.sample = store.sample()
        ids = set(self.sample["record_id"])
        rows = records[records["record_id"].isin(ids)]
        self._records: dict[str, dict] = {
            str(r["record_id"]): {k: _plain(v) for k, v in r.items()} for r in rows.to_dict("records")
        }
        missing = ids - set(self._records)
        if missing:
            raise ReviewError(
                f"{store.path}: {len(missing)} sampled records are not in the dataset (e.g. {sorted(missing)[0]!r})"
            )
        self._by_position = [str(r) for r in self.sample["record_id"]]
        self._positions = {r: i for i, r in enumerate(self._by_position)}
        self._mask_png = lru_cache(maxsize=64)(self._render_mask)

    def __len__(self) -> int:
        return len(self._by_position)

    def record(self, position: int) -> dict:
        """The sampled record at ``position`` (columns of the dataset schema).

        Raises
        ------
        ReviewError
            If there is no such position.
        """
        if not isinstance(position, int) or not 0 <= position < len(self._by_position):
            raise ReviewError(f"there is no record {position!r} in this review (0-{len(self._by_position) - 1})")
        return self._records[self._by_position[position]]

    def position_of(self, record_id: str) -> int:
        """The sample position of a record id.

        Raises
        ------
        ReviewError
            If the record is not in the sample.
        """
        if record_id not in self._positions:
            raise ReviewError(f"record {record_id!r} is not in the review sample")
        return self._positions[record_id]

    def image_path(self, position: int) -> Path:
        """The stored 8-bit PNG of the record's image, inside ``DATASET/images``.

        Raises
        ------
        ReviewError
            If the record's image id is not a plain file name, or its file is missing.
        """
        image_id = str(self.record(position)["image_id"])
        images = (self.root / "images").resolve()
        path = (images / f"{image_id}.png").resolve()
        if not SAFE_IMAGE_ID.match(image_id) or path.parent != images:
            raise ReviewError(f"record {self._by_position[position]!r}: image id {image_id!r} is not a file name")
        if not path.is_file():
            raise ReviewError(f"{path}: the image of record {self._by_position[position]!r} is missing")
        return path

    def mask_png(self, position: int) -> bytes:
        """The record's mask as an RGBA PNG at the image's size: the lesion colour
        (:data:`cxrils.overlay.LESION_RGB`), opaque on mask pixels, transparent
        elsewhere (the page sets the opacity). Empty masks are fully transparent."""
        self.record(position)
        return self._mask_png(position)

    def _render_mask(self, position: int) -> bytes:
        from PIL import Image

        r = self.record(position)
        mask = decode_rle({"size": [int(v) for v in r["mask"]["size"]], "counts": r["mask"]["counts"]})
        rgba = np.zeros(mask.shape + (4,), np.uint8)
        rgba[mask] = (*LESION_RGB, 255)
        buf = io.BytesIO()
        Image.fromarray(rgba, mode="RGBA").save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def payload(self, position: int, reviewer: str | None = None) -> dict:
        """What the page shows of one record: its fields, its chain, the reviewer's
        current decision on it, and the URLs of its image and mask.

        Raises
        ------
        ReviewError
            For an unknown position or a bad reviewer name.
        DatasetError
            If the image's grounding file is unreadable.
        """
        r = self.record(position)
        grounding = read_grounding(self.root, str(r["image_id"]))
        current = None
        if reviewer is not None:
            name = check_reviewer(reviewer)
            d = self.store.current(name).get((name, r["record_id"]))
            if d is not None:
                current = {"decision": d.decision, "reason": d.reason, "decided_at": d.decided_at}
        fields = (
            "record_id",
            "image_id",
            "study_id",
            "split",
            "lesion_type",
            "target",
            "instruction_type",
            "polarity",
            "locations",
            "certainty",
            "instruction",
            "answer",
            "mask_area",
            "height",
            "width",
            "finding_entity",
            "sentence_index",
            "sentence",
        )
        return {
            "position": position,
            "total": len(self),
            **{k: r.get(k) for k in fields},
            "chain": record_chain(r, grounding),
            "current": current,
            "image_url": f"/api/records/{position}/image.png",
            "mask_url": f"/api/records/{position}/mask.png",
        }

    def progress(self, reviewer: str) -> dict:
        """Counts of a reviewer's current decisions: ``decided``, ``accept``, ``reject``,
        ``skip``, ``remaining`` and ``total``."""
        reviewer = check_reviewer(reviewer)
        counts = {"accept": 0, "reject": 0, "skip": 0}
        for d in self.store.current(reviewer).values():
            counts[d.decision] += 1
        decided = sum(counts.values())
        return {
            "reviewer": reviewer,
            "total": len(self),
            "decided": decided,
            "remaining": len(self) - decided,
            **counts,
        }

    def info(self) -> dict:
        """The review's summary for the page: dataset, plan, sample size, reasons, reviewers."""
        return {
            "dataset": self.root.name,
            "plan": self.store.plan(),
            "total": len(self),
            "created_at": self.store.meta.get("created_at"),
            "reasons": REJECT_REASONS,
            "reviewers": self.store.reviewers(),
        }

    def close(self) -> None:
        """Close the database."""
        self.store.close()
