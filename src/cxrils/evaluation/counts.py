"""Exact pixel counts of one (prediction, reference) mask pair, from arrays or COCO RLE.

Counts are Python ints (exact at any size; no float32 histograms).
For two RLEs the counts are computed on the RLE without decoding to pixels:
pycocotools computes intersections on RLE directly (``merge`` then ``area``), after
:func:`cxrils.masks.rle_areas` has validated the counts of a whole batch (pycocotools
itself does not validate compressed counts). The RLE structure check, the counts
decoder and the bool-mask conversion are those of :mod:`cxrils.masks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pycocotools import mask as _coco

from cxrils.masks import InvalidRLE, MaskError, as_bool_mask, coco_rle, rle_areas


class MaskSizeError(MaskError):
    """Raised when a predicted mask and its reference mask differ in size."""


@dataclass(frozen=True)
class MaskCounts:
    """Pixel counts of one (prediction, reference) pair.

    Attributes
    ----------
    intersection, union, pred_area, ref_area : int
        Foreground pixel counts (exact Python ints) of ``P ∩ R``, ``P ∪ R``, ``P``, ``R``.
    """

    intersection: int
    union: int
    pred_area: int
    ref_area: int

    @property
    def is_positive(self) -> bool:
        """True when the reference mask is non-empty."""
        return self.ref_area > 0

    @property
    def iou(self) -> float | None:
        """``intersection / union`` (float64, correctly rounded); None when both are empty."""
        return self.intersection / self.union if self.union else None


def mask_counts(pred: Any, ref: Any) -> MaskCounts:
    """Count the pixels of one (prediction, reference) mask pair, exactly.

    Parameters
    ----------
    pred, ref : ndarray of shape (H, W) or COCO RLE dict
        bool arrays (or 0/1, 0/255 integer, 0/1 float: :func:`cxrils.masks.as_bool_mask`), or COCO RLE
        ``{"size": [H, W], "counts": str | bytes | list}``. Two RLEs are counted on
        the RLE (:func:`rle_mask_counts`); an RLE paired with an array is decoded
        with pycocotools.

    Returns
    -------
    MaskCounts

    Raises
    ------
    MaskSizeError
        If the two masks differ in (H, W).
    MaskError
        If a mask is not 2-D, not bool/numeric, or a malformed RLE.
    """
    if isinstance(pred, Mapping) and isinstance(ref, Mapping):
        return rle_mask_counts(pred, ref)
    p = as_bool_mask(pred, "predicted ")
    r = as_bool_mask(ref, "reference ")
    if p.shape != r.shape:
        raise MaskSizeError(
            f"predicted mask is {p.shape[0]}x{p.shape[1]} (HxW) but the reference is {r.shape[0]}x{r.shape[1]}"
        )
    pred_area = int(np.count_nonzero(p))
    ref_area = int(np.count_nonzero(r))
    inter = int(np.count_nonzero(np.logical_and(p, r))) if pred_area and ref_area else 0
    return MaskCounts(inter, pred_area + ref_area - inter, pred_area, ref_area)


def rle_intersection(pred: dict[str, Any], ref: dict[str, Any]) -> int:
    """Foreground pixels of ``pred ∩ ref`` for two validated, same-size pycocotools RLEs."""
    return int(_coco.area(_coco.merge([pred, ref], intersect=True)))


def rle_mask_counts(pred: Mapping[str, Any], ref: Mapping[str, Any]) -> MaskCounts:
    """Exact :class:`MaskCounts` of two COCO RLE masks, computed on the RLE.

    Parameters
    ----------
    pred, ref : dict
        COCO RLE ``{"size": [H, W], "counts": str | bytes | list}``.

    Raises
    ------
    MaskSizeError
        If the sizes differ.
    MaskError
        If either RLE is malformed (see :func:`rle_areas`).
    """
    return batch_mask_counts([(pred, ref)], start=None)[0]


def batch_mask_counts(pairs: Sequence[tuple[Any, Any]], start: int | None = 0) -> list[MaskCounts]:
    """:func:`mask_counts` of many pairs; pairs of two COCO RLEs are validated together
    with one :func:`rle_areas` call per side (much faster than pair by pair).

    Parameters
    ----------
    pairs : sequence of (pred, ref)
        Masks as in :func:`mask_counts`.
    start : int or None
        Number of the first pair in error messages ("item {start + k}: ..."); None
        for messages without an item number.

    Returns
    -------
    list of MaskCounts
        One per pair, in order.

    Raises
    ------
    MaskSizeError, MaskError
        As :func:`mask_counts`, naming the item.
    """

    def where(k: int) -> str:
        return "" if start is None else f"item {start + k}: "

    out: list[MaskCounts | None] = [None] * len(pairs)
    rle: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    for k, (pred, ref) in enumerate(pairs):
        try:
            if isinstance(pred, Mapping) and isinstance(ref, Mapping):
                p, r = coco_rle(pred, "predicted "), coco_rle(ref, "reference ")
                if p["size"] != r["size"]:
                    raise MaskSizeError(
                        f"predicted mask is {p['size'][0]}x{p['size'][1]} (HxW) but the "
                        f"reference is {r['size'][0]}x{r['size'][1]}"
                    )
                rle.append((k, p, r))
            else:
                out[k] = mask_counts(pred, ref)
        except MaskError as err:
            cls = MaskSizeError if isinstance(err, MaskSizeError) else MaskError
            raise cls(f"{where(k)}{err}") from None
    if rle:
        heights, widths = [p["size"][0] for _, p, _ in rle], [p["size"][1] for _, p, _ in rle]
        areas = []
        for side, masks in (("predicted", [p for _, p, _ in rle]), ("reference", [r for _, _, r in rle])):
            try:
                areas.append(rle_areas([m["counts"] for m in masks], heights, widths).tolist())
            except InvalidRLE as err:
                raise MaskError(f"{where(rle[err.index][0])}{side} mask: {err.reason}") from None
        for (k, p, r), pred_area, ref_area in zip(rle, *areas):
            inter = rle_intersection(p, r) if pred_area and ref_area else 0
            out[k] = MaskCounts(inter, pred_area + ref_area - inter, pred_area, ref_area)
    return out  # type: ignore[return-value]
