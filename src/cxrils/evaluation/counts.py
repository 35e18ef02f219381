"""Exact pixel counts of one (prediction, reference) mask pair, from arrays or COCO RLE.

Counts are Python ints (exact at any size; no float32 histograms).
For two RLEs the counts are computed on the RLE without decoding to pixels.

pycocotools computes intersections on RLE directly (``merge`` then ``area``, ~20 us
for a 512x512 mask against ~0.8 ms for ``decode``), but it does not validate
compressed counts: ``area`` of a truncated string is silently wrong and ``merge``
with it never returns. :func:`rle_areas` therefore parses a batch of counts strings
(vectorised NumPy, the inverse of pycocotools' ``rleToString``) and checks that the
runs are non-negative and cover exactly H*W pixels before pycocotools sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from pycocotools import mask as _coco

from cxrils.masks import MaskError, decode_rle

#: Most characters one run may take (5 bits each; runs are < 2**32, i.e. <= 7 chars).
_MAX_CHARS_PER_RUN = 7


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


def _as_bool_mask(mask: Any, what: str) -> np.ndarray:
    if isinstance(mask, Mapping):
        try:  # pycocotools' decode rejects runs that do not add up to H*W
            return decode_rle(mask)
        except MaskError as err:
            raise MaskError(f"{what} mask: {err}") from None
    arr = np.asarray(mask)
    if arr.ndim != 2:
        raise MaskError(f"{what} mask must be 2-D (H, W), got shape {arr.shape}")
    if arr.dtype != bool:
        if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise MaskError(f"{what} mask must be bool or numeric, got dtype {arr.dtype}")
        if np.issubdtype(arr.dtype, np.floating) and not np.isin(arr, (0.0, 1.0)).all():
            # a probability map scored as "!= 0" would be nearly all foreground
            raise MaskError(f"{what} mask is a float array with values other than 0 and 1 "
                            "(a probability map?): threshold it into a binary mask first")
        arr = arr != 0
    return arr


def mask_counts(pred: Any, ref: Any) -> MaskCounts:
    """Count the pixels of one (prediction, reference) mask pair, exactly.

    Parameters
    ----------
    pred, ref : ndarray of shape (H, W) or COCO RLE dict
        bool (or numeric, non-zero = foreground) arrays, or COCO RLE
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
    p = _as_bool_mask(pred, "predicted")
    r = _as_bool_mask(ref, "reference")
    if p.shape != r.shape:
        raise MaskSizeError(f"predicted mask is {p.shape[0]}x{p.shape[1]} (HxW) but the reference is "
                            f"{r.shape[0]}x{r.shape[1]}")
    pred_area = int(np.count_nonzero(p))
    ref_area = int(np.count_nonzero(r))
    inter = int(np.count_nonzero(np.logical_and(p, r))) if pred_area and ref_area else 0
    return MaskCounts(inter, pred_area + ref_area - inter, pred_area, ref_area)


class InvalidRLE(MaskError):
    """A malformed RLE in a batch; ``index`` is its position in the batch."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


def rle_areas(counts: Sequence[str | bytes], heights: Sequence[int], widths: Sequence[int]) -> np.ndarray:
    """Validate a batch of COCO compressed RLE counts and return their foreground areas.

    The strings are parsed together (vectorised NumPy, the inverse of pycocotools'
    ``rleToString``): each character is 5 bits of a run, bit 0x20 continues the run,
    bit 0x10 of its last character is the sign, and runs after the third are stored
    as differences to the run two before.

    Parameters
    ----------
    counts : sequence of str or bytes
        ``counts`` of COCO compressed RLEs (column-major runs, background first).
    heights, widths : sequence of int
        The size of each mask in pixels.

    Returns
    -------
    ndarray of int64, shape (len(counts),)
        Foreground pixels of each mask.

    Raises
    ------
    InvalidRLE
        For the first mask (``.index``) with a character outside the alphabet
        '0'..'o', a string ending inside a run, a negative or too long run, or runs
        that do not add up to H*W.
    """
    n = len(counts)
    raws = []
    for i, c in enumerate(counts):
        try:
            raws.append(c.encode("ascii") if isinstance(c, str) else bytes(c))
        except (UnicodeEncodeError, TypeError):
            raise InvalidRLE(i, "RLE counts must be an ASCII string") from None
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    hw = np.asarray(heights, dtype=np.int64).reshape(n) * np.asarray(widths, dtype=np.int64).reshape(n)
    areas = np.zeros(n, dtype=np.int64)
    if ((lens == 0) & (hw != 0)).any():
        i = int(np.flatnonzero((lens == 0) & (hw != 0))[0])
        raise InvalidRLE(i, f"empty RLE counts for a mask of {hw[i]} pixels")
    nz = np.flatnonzero(lens)
    if nz.size == 0:
        return areas
    ln = lens[nz]
    v = np.frombuffer(b"".join(raws[i] for i in nz), dtype=np.uint8).astype(np.int64) - 48
    seg_char = np.repeat(np.arange(nz.size), ln)
    bad = (v < 0) | (v > 63)
    if bad.any():
        raise InvalidRLE(int(nz[seg_char[np.argmax(bad)]]), "RLE counts hold characters outside '0'..'o'")
    more = (v & 0x20) != 0
    ends = np.cumsum(ln) - 1
    if more[ends].any():
        raise InvalidRLE(int(nz[np.argmax(more[ends])]), "RLE counts end inside a run (truncated string)")
    last = np.flatnonzero(~more)  # last character of each run
    first = np.concatenate(([0], last[:-1] + 1))
    n_chars = last - first + 1
    if n_chars.max() > _MAX_CHARS_PER_RUN:
        raise InvalidRLE(int(nz[seg_char[last[np.argmax(n_chars > _MAX_CHARS_PER_RUN)]]]),
                         "RLE counts hold a run longer than 2**32")
    k = np.arange(v.size) - np.repeat(first, n_chars)
    x = np.add.reduceat((v & 0x1F) << (5 * k), first)
    x -= np.where(v[last] & 0x10, np.left_shift(1, 5 * n_chars), 0)  # sign extension
    seg_run = seg_char[last]
    run_start = np.searchsorted(seg_run, np.arange(nz.size))
    li = np.arange(x.size) - run_start[seg_run]  # index of the run within its mask
    runs = x.copy()
    for chain in (li % 2 == 1, (li % 2 == 0) & (li >= 2)):  # run i += run i - 2 (i > 2)
        y = np.where(chain, x, 0)
        cum = np.cumsum(y)
        base = cum[run_start] - y[run_start]
        runs[chain] = (cum - base[seg_run])[chain]
    bad = (runs < 0) | (runs >= 1 << 32)
    if bad.any():
        raise InvalidRLE(int(nz[seg_run[np.argmax(bad)]]), "RLE counts decode to a negative or too long run")
    total = np.add.reduceat(runs, run_start)
    mismatch = total != hw[nz]
    if mismatch.any():
        j = int(np.argmax(mismatch))
        raise InvalidRLE(int(nz[j]), f"RLE runs cover {total[j]} pixels, expected H*W = {hw[nz][j]}")
    areas[nz] = np.add.reduceat(np.where(li % 2 == 1, runs, 0), run_start)
    return areas


def coco_rle(rle: Mapping[str, Any], what: str = "") -> dict[str, Any]:
    """``{"size": [H, W], "counts": bytes}`` for pycocotools from a COCO RLE dict
    (compressed str/bytes, or uncompressed list counts, which pycocotools compresses).
    Does not validate the counts (see :func:`rle_areas`).

    Raises
    ------
    MaskError
        If ``rle`` is not a COCO RLE.
    """
    try:
        h, w = int(rle["size"][0]), int(rle["size"][1])
        counts = rle["counts"]
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise MaskError(f"{what}mask is not a COCO RLE {{size: [H, W], counts}}: {rle!r:.120}") from err
    if h < 0 or w < 0:
        raise MaskError(f"{what}mask size must be non-negative, got {[h, w]}")
    if isinstance(counts, list):
        if any(int(c) < 0 for c in counts) or sum(int(c) for c in counts) != h * w:
            raise MaskError(f"{what}mask: uncompressed RLE runs do not cover {h}x{w} pixels")
        counts = _coco.frPyObjects({"size": [h, w], "counts": [int(c) for c in counts]}, h, w)["counts"]
    if isinstance(counts, str):
        try:
            counts = counts.encode("ascii")
        except UnicodeEncodeError:
            raise MaskError(f"{what}mask counts must be an ASCII string") from None
    if not isinstance(counts, bytes):
        raise MaskError(f"{what}mask counts must be str, bytes or list, got {type(counts).__name__}")
    return {"size": [h, w], "counts": counts}


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
                    raise MaskSizeError(f"predicted mask is {p['size'][0]}x{p['size'][1]} (HxW) but the "
                                        f"reference is {r['size'][0]}x{r['size'][1]}")
                rle.append((k, p, r))
            else:
                out[k] = mask_counts(pred, ref)
        except MaskError as err:
            cls = MaskSizeError if isinstance(err, MaskSizeError) else MaskError
            raise cls(f"{where(k)}{err}") from None
    if rle:
        heights, widths = [p["size"][0] for _, p, _ in rle], [p["size"][1] for _, p, _ in rle]
        areas = []
        for side, j in (("predicted", 1), ("reference", 2)):
            try:
                areas.append(rle_areas([t[j]["counts"] for t in rle], heights, widths).tolist())
            except InvalidRLE as err:
                raise MaskError(f"{where(rle[err.index][0])}{side} mask: {err.reason}") from None
        for (k, p, r), pred_area, ref_area in zip(rle, *areas):
            inter = rle_intersection(p, r) if pred_area and ref_area else 0
            out[k] = MaskCounts(inter, pred_area + ref_area - inter, pred_area, ref_area)
    return out  # type: ignore[return-value]
