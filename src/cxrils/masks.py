"""Binary mask encodings.

Two run-length flavours exist in this field and must never be confused:

* **COCO compressed RLE** (:func:`encode_rle` / :func:`decode_rle`), through pycocotools:
  column-major (Fortran) order, 0-indexed, alternating runs starting with zeros,
  LEB128-like compressed into ASCII ``counts``; ``size`` is ``[H, W]``. This is the
  on-disk format of cxrils.
* **"start length" RLE** of CheXmask and Kaggle (:func:`decode_start_length_rle`):
  row-major (C) order, **1-indexed** starts, space-separated ``start length`` pairs
  of foreground runs only.

Masks in memory are ``numpy.ndarray`` of dtype bool, shape (H, W), row/col indexing.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import numpy as np
from pycocotools import mask as _coco


class RLE(TypedDict):
    """COCO compressed RLE: ``size`` = [H, W], ``counts`` = ASCII string."""

    size: list[int]
    counts: str


class MaskError(ValueError):
    """Raised for a malformed mask or RLE."""


def _as_mask(mask: np.ndarray) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.ndim != 2:
        raise MaskError(f"mask must be 2-D (H, W), got shape {arr.shape}")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number):
            raise MaskError(f"mask must be bool or numeric, got dtype {arr.dtype}")
        arr = arr != 0
    return arr


def encode_rle(mask: np.ndarray) -> RLE:
    """Encode a binary mask as COCO compressed RLE.

    Parameters
    ----------
    mask : ndarray, shape (H, W)
        bool, or numeric where non-zero is foreground.

    Returns
    -------
    RLE
        ``{"size": [H, W], "counts": str}``; an all-zero mask gives a valid RLE of area 0.

    Raises
    ------
    MaskError
        If ``mask`` is not 2-D or not bool/numeric.
    """
    arr = _as_mask(mask)
    rle = _coco.encode(np.asfortranarray(arr.astype(np.uint8)))
    counts = rle["counts"]
    return {"size": [int(rle["size"][0]), int(rle["size"][1])],
            "counts": counts.decode("ascii") if isinstance(counts, bytes) else str(counts)}


def _compressed_runs(counts: bytes) -> np.ndarray:
    """Run lengths of a COCO compressed ``counts`` string (the inverse of pycocotools'
    ``rleToString``: 5-bit groups stored as ASCII 48..111, continuation bit 0x20, sign
    bit 0x10 in a value's last group, runs after the second stored as differences from
    the run two before).

    pycocotools does not expose this and decodes malformed strings into wrong masks
    without an error, so :func:`_to_coco` uses it to check the runs.

    Returns
    -------
    ndarray of int64, shape (n_runs,)

    Raises
    ------
    MaskError
        On a character outside 48..111, a truncated value, or a negative run.
    """
    c = np.frombuffer(counts, dtype=np.uint8).astype(np.int64) - 48
    if c.size == 0:
        return np.zeros(0, dtype=np.int64)
    bad = np.flatnonzero((c < 0) | (c >= 64))
    if bad.size:
        raise MaskError(f"RLE counts has an invalid character {chr(counts[bad[0]])!r} at {bad[0]}")
    last = (c & 0x20) == 0  # the last 5-bit group of each value
    if not last[-1]:
        raise MaskError("RLE counts end in the middle of a value")
    ends = np.flatnonzero(last)
    starts = np.concatenate([[0], ends[:-1] + 1])
    group = np.repeat(np.arange(ends.size), ends - starts + 1)
    shift = 5 * (np.arange(c.size) - starts[group])
    values = np.add.reduceat((c & 0x1F) << shift, starts)
    negative = (c[ends] & 0x10) != 0
    values[negative] -= np.int64(1) << (shift[ends[negative]] + 5)
    runs = values.copy()
    runs[1::2] = np.cumsum(values[1::2])  # run m = delta m + run m-2, for m > 2
    runs[2::2] = np.cumsum(values[2::2])
    if (runs < 0).any():
        raise MaskError(f"RLE counts decode to a negative run at run {int(np.flatnonzero(runs < 0)[0])}")
    return runs


def _to_coco(rle: RLE | dict[str, Any]) -> dict[str, Any]:
    try:
        size = [int(rle["size"][0]), int(rle["size"][1])]
        counts = rle["counts"]
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise MaskError(f"not a COCO RLE (needs 'size' [H, W] and 'counts'): {rle!r:.200}") from err
    if size[0] < 0 or size[1] < 0:
        raise MaskError(f"RLE size must be non-negative, got {size}")
    if isinstance(counts, list):  # uncompressed COCO RLE
        try:
            runs = [int(c) for c in counts]
        except (TypeError, ValueError) as err:
            raise MaskError(f"uncompressed RLE counts must be integers: {counts!r:.200}") from err
        if any(r < 0 for r in runs):
            raise MaskError("uncompressed RLE counts must be non-negative")
        if sum(runs) != size[0] * size[1]:
            raise MaskError(f"uncompressed RLE counts sum to {sum(runs)}, expected {size[0] * size[1]}")
        return _coco.frPyObjects({"size": size, "counts": runs}, size[0], size[1])
    if isinstance(counts, str):
        try:
            counts = counts.encode("ascii")
        except UnicodeEncodeError as err:
            raise MaskError("RLE counts must be ASCII") from err
    if not isinstance(counts, bytes):
        raise MaskError(f"RLE counts must be str, bytes or list, got {type(counts).__name__}")
    total = int(_compressed_runs(counts).sum())
    if total != size[0] * size[1]:
        raise MaskError(f"RLE counts cover {total} pixels, expected {size[0]}x{size[1]} = {size[0] * size[1]}")
    return {"size": size, "counts": counts}


def decode_rle(rle: RLE | dict[str, Any]) -> np.ndarray:
    """Decode a COCO RLE (compressed str/bytes or uncompressed list counts).

    Returns
    -------
    ndarray of bool, shape (H, W)

    Raises
    ------
    MaskError
        If the RLE is malformed or its runs do not add up to H*W.
    """
    coco = _to_coco(rle)
    h, w = coco["size"]
    if h * w == 0:
        return np.zeros((h, w), dtype=bool)
    try:
        out = _coco.decode(coco)
    except Exception as err:  # pycocotools raises bare Exceptions on bad counts
        raise MaskError(f"cannot decode RLE of size {coco['size']}: {err}") from err
    if out.shape != (h, w):
        raise MaskError(f"decoded RLE has shape {out.shape}, expected {(h, w)}")
    return out.astype(bool)


def rle_area(rle: RLE | dict[str, Any]) -> int:
    """Foreground pixel count of an RLE, without decoding."""
    return int(_coco.area(_to_coco(rle)))


def rle_bbox(rle: RLE | dict[str, Any]) -> tuple[float, float, float, float]:
    """Bounding box ``(x0, y0, x1, y1)`` in pixels (x = column); (0, 0, 0, 0) if empty."""
    x, y, w, h = (float(v) for v in _coco.toBbox(_to_coco(rle)))
    return (x, y, x + w, y + h)


def rle_to_uncompressed_counts(rle: RLE | dict[str, Any]) -> list[int]:
    """Run lengths in column-major order, starting with a (possibly zero) background run."""
    mask = decode_rle(rle)
    flat = mask.flatten(order="F").astype(np.int8)
    if flat.size == 0:
        return []
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(bounds).tolist()
    if flat[0] == 1:
        runs = [0] + runs
    return [int(r) for r in runs]


def rle_to_json(rle: RLE) -> str:
    """Serialise an RLE as compact JSON text."""
    return json.dumps({"size": list(rle["size"]), "counts": rle["counts"]}, separators=(",", ":"))


def rle_from_json(text: str) -> RLE:
    """Parse JSON text written by :func:`rle_to_json` (validates the structure).

    Raises
    ------
    MaskError
        If the text is not JSON or not an RLE.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise MaskError(f"RLE is not valid JSON: {err}") from err
    coco = _to_coco(obj)
    counts = coco["counts"]
    return {"size": list(coco["size"]), "counts": counts.decode("ascii") if isinstance(counts, bytes) else counts}


def decode_start_length_rle(text: str, height: int, width: int) -> np.ndarray:
    """Decode the CheXmask / Kaggle "start length" RLE (row-major, 1-indexed starts).

    Parameters
    ----------
    text : str
        Space-separated ``start length`` pairs of foreground runs; "" or "-1" is empty.
    height, width : int
        Mask size in pixels.

    Returns
    -------
    ndarray of bool, shape (height, width)

    Raises
    ------
    MaskError
        On a bad size, non-integer values, an odd number of values, a start < 1, a
        negative length, or a run past the end of the image.
    """
    if isinstance(height, bool) or isinstance(width, bool) or int(height) != height or int(width) != width \
            or height < 0 or width < 0:
        raise MaskError(f"start-length RLE needs a non-negative integer size, got {height}x{width}")
    out = np.zeros(int(height) * int(width), dtype=bool)
    stripped = text.strip()
    if stripped in ("", "-1"):
        return out.reshape(int(height), int(width))
    try:
        values = np.array(stripped.split(), dtype=np.int64)
    except ValueError as err:
        raise MaskError(f"start-length RLE has non-integer values: {stripped[:80]!r}") from err
    if values.size % 2:
        raise MaskError("start-length RLE needs an even number of values (start length pairs)")
    starts, lengths = values[0::2] - 1, values[1::2]
    if (starts < 0).any() or (lengths < 0).any():
        raise MaskError("start-length RLE starts are 1-indexed and lengths non-negative")
    if (starts + lengths > out.size).any():
        raise MaskError(f"start-length RLE runs past the end of a {height}x{width} image")
    for s, n in zip(starts, lengths):
        out[s : s + n] = True
    return out.reshape(int(height), int(width))  # row-major (C order)
