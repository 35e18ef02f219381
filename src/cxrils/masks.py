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
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
from pycocotools import mask as _coco


class RLE(TypedDict):
    """COCO compressed RLE: ``size`` = [H, W], ``counts`` = ASCII string."""

    size: list[int]
    counts: str


class MaskError(ValueError):
    """Raised for a malformed mask or RLE."""


def as_bool_mask(mask: Any, what: str = "") -> np.ndarray:
    """The one conversion of a mask to bool (H, W), used by the encoder and the evaluation.

    Parameters
    ----------
    mask : ndarray of shape (H, W), or COCO RLE dict
        bool; integer holding 0 and one positive value (0/1, or 0/255 as PNG masks;
        that value = foreground); float holding only 0 and 1 (a
        probability map is refused rather than binarised: "!= 0" would make it nearly
        all foreground); or an RLE, decoded with :func:`decode_rle`.
    what : str
        Prefix of error messages naming the mask (e.g. ``"predicted "``).

    Returns
    -------
    ndarray of bool, shape (H, W)
        ``mask`` itself when it already is a bool (H, W) array.

    Raises
    ------
    MaskError
        If the array is not 2-D, not bool/numeric, a float array with values other
        than 0 and 1, an integer array with a negative value or two different nonzero
        values, or a malformed RLE.
    """
    if isinstance(mask, Mapping):
        try:
            return decode_rle(mask)
        except MaskError as err:
            raise MaskError(f"{what}mask: {err}") from None
    if mask is None:
        raise MaskError(f"{what}mask is None: give a bool (H, W) array (all False for an empty answer) or a COCO RLE")
    arr = np.asarray(mask)
    if arr.ndim != 2:
        raise MaskError(f"{what}mask must be 2-D (H, W), got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise MaskError(f"{what}mask must be bool or numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.isin(arr, (0.0, 1.0)).all():
        raise MaskError(
            f"{what}mask is a float array with values other than 0 and 1 "
            "(a probability map?): threshold it into a binary mask first"
        )
    out: np.ndarray = arr != 0
    if np.issubdtype(arr.dtype, np.integer) and out.any():
        fg = arr[out]
        lo, hi = fg.min(), fg.max()
        if lo != hi or lo < 0:
            raise MaskError(
                f"{what}mask is an integer array with foreground values {lo} to {hi}, not one positive value "
                "(a label image or an 8-bit probability map?): give 0 for background and one value (1 or 255) "
                "for the lesion"
            )
    return out


def encode_rle(mask: np.ndarray) -> RLE:
    """Encode a binary mask as COCO compressed RLE.

    Parameters
    ----------
    mask : ndarray, shape (H, W)
        As :func:`as_bool_mask`: bool, integer 0 and one positive value (0/1, 0/255) or a
        0/1 float array.

    Returns
    -------
    RLE
        ``{"size": [H, W], "counts": str}``; an all-zero mask gives a valid RLE of area 0.

    Raises
    ------
    MaskError
        If ``mask`` is not 2-D, not bool/numeric, or a float array other than 0/1.
    """
    arr = as_bool_mask(mask)
    rle = _coco.encode(np.asfortranarray(arr.astype(np.uint8)))
    counts = rle["counts"]
    return {
        "size": [int(rle["size"][0]), int(rle["size"][1])],
        "counts": counts.decode("ascii") if isinstance(counts, bytes) else str(counts),
    }


class InvalidRLE(MaskError):
    """A malformed RLE in a batch; ``index`` is its position in the batch."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


#: Most characters one run may take (5 bits each; runs are < 2**32, i.e. <= 7 chars).
_MAX_CHARS_PER_RUN = 7


def rle_areas(counts: Sequence[str | bytes], heights: Sequence[int], widths: Sequence[int]) -> np.ndarray:
    """Validate a batch of COCO compressed RLE counts and return their foreground areas.

    The one decoder of pycocotools' compressed counts (the inverse of its
    ``rleToString``), vectorised over the batch: each character is 5 bits of a run
    (ASCII 48..111), bit 0x20 continues the run, bit 0x10 of its last character is the
    sign, and runs after the second are stored as differences to the run two before.
    pycocotools does not validate compressed counts: ``area`` of a truncated string is
    silently wrong and ``merge`` with it never returns, so every RLE is checked here
    before pycocotools sees it.

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
        raise InvalidRLE(
            int(nz[seg_char[last[np.argmax(n_chars > _MAX_CHARS_PER_RUN)]]]), "RLE counts hold a run longer than 2**32"
        )
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


def _uncompressed_runs(counts: list[Any], what: str) -> list[int]:
    """Integer runs of uncompressed COCO counts; NaN, infinities, text, booleans and
    fractions are refused (JSON readers turn ``NaN``/``Infinity`` into floats)."""
    runs = []
    for k, c in enumerate(counts):
        ok = isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))
        if not ok and isinstance(c, (float, np.floating)) and math.isfinite(c) and float(c).is_integer():
            ok = True
        if not ok:
            raise MaskError(f"{what}mask: uncompressed RLE counts must be non-negative integers; run {k} is {c!r:.40}")
        if c < 0:
            raise MaskError(f"{what}mask: uncompressed RLE counts must be non-negative; run {k} is {c}")
        runs.append(int(c))
    return runs


def coco_rle(rle: Mapping[str, Any] | Any, what: str = "") -> dict[str, Any]:
    """``{"size": [H, W], "counts": bytes}`` for pycocotools from a COCO RLE dict: the one
    structural check of an RLE.

    Compressed counts (str or bytes) must be ASCII; their runs are checked by
    :func:`rle_areas` (which :func:`decode_rle` calls; the evaluation calls it per
    batch). Uncompressed counts (a list) must be non-negative integers summing to H*W;
    they are compressed with pycocotools.

    Parameters
    ----------
    rle : dict
        ``{"size": [H, W], "counts": str | bytes | list}``.
    what : str
        Prefix of error messages naming the mask (e.g. ``"predicted "``).

    Raises
    ------
    MaskError
        If ``rle`` is not a COCO RLE, the size is negative, or uncompressed counts are
        not integers (NaN, Infinity, text...), are negative or do not cover H*W pixels.
    """
    try:
        size, counts = rle["size"], rle["counts"]
        if not isinstance(size, (list, tuple, np.ndarray)) or len(size) != 2:
            raise ValueError("size must be a list of two numbers")
        h, w = _whole(size[0]), _whole(size[1])
    except (KeyError, TypeError, IndexError, ValueError, OverflowError) as err:
        why = f" ({err})" if isinstance(err, ValueError) else ""
        raise MaskError(f"{what}mask is not a COCO RLE {{size: [H, W], counts}}{why}: {rle!r:.120}") from err
    if h < 0 or w < 0:
        raise MaskError(f"{what}mask: RLE size must be non-negative, got {[h, w]}")
    if isinstance(counts, list):
        runs = _uncompressed_runs(counts, what)
        if sum(runs) != h * w:
            raise MaskError(f"{what}mask: uncompressed RLE counts sum to {sum(runs)}, expected H*W = {h * w}")
        counts = _coco.frPyObjects({"size": [h, w], "counts": runs}, h, w)["counts"]
    if isinstance(counts, str):
        try:
            counts = counts.encode("ascii")
        except UnicodeEncodeError:
            raise MaskError(f"{what}mask: RLE counts must be an ASCII string") from None
    if not isinstance(counts, bytes):
        raise MaskError(f"{what}mask: RLE counts must be str, bytes or list, got {type(counts).__name__}")
    return {"size": [h, w], "counts": counts}


def _whole(v: Any) -> int:
    """``v`` as an int when it is a whole number (an int, or a float such as ``256.0``);
    ValueError for a fraction, text or a boolean (``int("256")`` or ``int(256.7)`` would
    pass them silently)."""
    number = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if not number or float(v) != int(v):  # int(NaN) and int(inf) raise too
        raise ValueError(f"size entries must be whole numbers, got {v!r}")
    return int(v)


def _checked(rle: RLE | Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """:func:`coco_rle` with the compressed runs checked (:func:`rle_areas`), and the
    foreground pixel count they give."""
    coco = coco_rle(rle)
    try:
        area = int(rle_areas([coco["counts"]], [coco["size"][0]], [coco["size"][1]])[0])
    except InvalidRLE as err:
        raise MaskError(f"RLE of size {coco['size']}: {err.reason}") from None
    return coco, area


def _to_coco(rle: RLE | Mapping[str, Any]) -> dict[str, Any]:
    """:func:`coco_rle` with the compressed runs checked."""
    return _checked(rle)[0]


def decode_rle(rle: RLE | Mapping[str, Any]) -> np.ndarray:
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
    mask: np.ndarray = out.astype(bool)
    return mask


def rle_area(rle: RLE | dict[str, Any]) -> int:
    """Foreground pixel count of an RLE, without decoding.

    Raises
    ------
    MaskError
        If the RLE is malformed or its runs do not add up to H*W.
    """
    return _checked(rle)[1]


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
    if (
        isinstance(height, bool)
        or isinstance(width, bool)
        or int(height) != height
        or int(width) != width
        or height < 0
        or width < 0
    ):
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
