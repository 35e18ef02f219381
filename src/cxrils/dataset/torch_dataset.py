"""A torch ``Dataset`` over a finalized cxrils dataset folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cxrils.dataset.writer import DatasetError, read_records
from cxrils.masks import decode_rle

#: Record fields passed through with every item (besides image, mask, texts).
ITEM_FIELDS: tuple[str, ...] = (
    "record_id",
    "study_id",
    "image_id",
    "lesion_type",
    "instruction_type",
    "polarity",
    "certainty",
    "split",
)


class ILSDataset:
    """Instruction-answer-mask items of one split, decoding image and mask on access.

    Parameters
    ----------
    dataset_dir : path
        A folder written by :class:`cxrils.dataset.DatasetWriter` and finalized.
    split : str or None
        "train", "validate", "test" or an alias ("val", "validation", ...:
        :func:`cxrils.vocab.normalize_split`), or None or "all" for all rows.
    augment : callable, optional
        ``augment(x: uint8 (H, W), key: str) -> uint8 (H, W)``, e.g.
        :class:`cxrils.dataset.HistogramEqualization` (Appendix F); the key is
        ``"{epoch}:{record_id}"`` so that results do not depend on worker order.
    size : int, optional
        Resize image (area interpolation) and mask (nearest) to ``(size, size)`` so
        that items of different images stack into a batch; None keeps the stored size.
        The augmentation is applied after resizing, to the uint8 image at ``size``.
    cache : bool
        Keep every decoded (and resized) image and mask in memory after its first
        use, so that training reads each PNG once per run instead of once per item;
        items are identical with and without the cache. Memory: one uint8 image per
        image id and one bool mask per record (e.g. 128 px: 16 KB each).

    Items are dicts: ``image`` float32 tensor (1, H, W) in [0, 1]; ``mask`` float32
    tensor (H, W) in {0, 1} (all zero for negatives); ``instruction``, ``answer``
    (str); and the fields of :data:`ITEM_FIELDS`.

    Raises
    ------
    DatasetError
        If the folder is not a finalized dataset, or an image is missing or does not
        match its record's size.
    """

    def __init__(
        self,
        dataset_dir: str | Path,
        split: str | None = "train",
        *,
        augment: Callable[..., np.ndarray] | None = None,
        size: int | None = None,
        cache: bool = False,
    ):
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise DatasetError(f"size must be a whole number of pixels >= 1, or None, got {size!r}")
        self.dataset_dir = Path(dataset_dir)
        self.records = read_records(self.dataset_dir, split).reset_index(drop=True)
        self.augment, self.size, self.epoch = augment, size, 0
        self.cache = bool(cache)
        self._images: dict[str, np.ndarray] = {}
        self._masks: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.records)

    @property
    def polarities(self) -> list[str]:
        """Polarity of every item, for :class:`cxrils.dataset.BalancedBatchSampler`."""
        return [str(p) for p in self.records["polarity"].tolist()]

    def set_epoch(self, epoch: int) -> None:
        """Select the augmentation decisions of ``epoch``."""
        self.epoch = int(epoch)

    def load_image(self, index: int) -> np.ndarray:
        """The stored uint8 (H, W) image of item ``index``."""
        from PIL import Image

        r = self.records.iloc[index]
        path = self.dataset_dir / r["image_path"]
        try:
            with Image.open(path) as im:
                x = np.asarray(im.convert("L"), dtype=np.uint8)
        except OSError as err:
            raise DatasetError(f"{path}: cannot read image of record {r['record_id']}: {err}") from err
        if x.shape != (int(r["height"]), int(r["width"])):
            raise DatasetError(
                f"{path}: image is {x.shape}, record {r['record_id']} says {int(r['height'])}x{int(r['width'])}"
            )
        return x

    def __getitem__(self, index: int) -> dict[str, Any]:
        import torch

        r = self.records.iloc[index]
        x, mask = self._image_and_mask(index)
        if self.augment is not None:
            x = self.augment(x, f"{self.epoch}:{r['record_id']}")
        item = {
            "image": torch.from_numpy(x.astype(np.float32) / 255.0)[None],
            "mask": torch.from_numpy(mask.astype(np.float32)),
            "instruction": str(r["instruction"]),
            "answer": str(r["answer"]),
        }
        item.update({k: str(r[k]) for k in ITEM_FIELDS})
        return item

    def _image_and_mask(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Decoded uint8 (S, S) image and bool (S, S) mask of item ``index`` (cached
        when ``cache``; callers must not modify them in place)."""
        import cv2

        image_id = str(self.records.at[index, "image_id"])
        x = self._images.get(image_id)
        if x is None:
            x = self.load_image(index)
            if self.size is not None:
                x = cv2.resize(x, (self.size, self.size), interpolation=cv2.INTER_AREA)
            if self.cache:
                self._images[image_id] = x
        mask = self._masks.get(index)
        if mask is None:
            mask = decode_rle(self.records.at[index, "mask"])
            if self.size is not None:
                mask = cv2.resize(mask.astype(np.uint8), (self.size, self.size), interpolation=cv2.INTER_NEAREST) > 0
            if self.cache:
                self._masks[index] = mask
        return x, mask
