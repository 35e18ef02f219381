"""Types shared by the image loaders: the result, its metadata and the error."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: File signatures (magic bytes) of the raster formats Pillow reads here, with their
#: format names (PNG, JPEG/JFIF, TIFF little / big endian, BMP specifications): tells a
#: corrupt file of a known format from a file of another kind, and a raster file from
#: DICOM whatever its name.
RASTER_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"BM", "BMP"),
)


class ImageLoadError(ValueError):
    """An image could not be loaded.

    Parameters
    ----------
    path : str or Path
        The file that failed.
    reason : str
        What went wrong, in words a user can act on.

    Attributes
    ----------
    path : str
    reason : str
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across process pools
        return (type(self), (self.path, self.reason))


@dataclass(frozen=True)
class ImageMeta:
    """What :func:`cxrils.io.load_image` keeps about an image (a whitelist: no names, dates or IDs).

    Attributes
    ----------
    format : str
        ``"dicom"``, ``"png"``, ``"jpeg"``, ``"tiff"`` or ``"bmp"``.
    original_shape : tuple of int
        (H, W) in pixels of the stored image, before EXIF orientation is applied.
    bits_stored : int
        Bits per sample of the stored data (DICOM Bits Stored; 8 or 16 for PNG...).
    photometric : str
        DICOM Photometric Interpretation (``"MONOCHROME1"``, ``"MONOCHROME2"``, ``"RGB"``...),
        or its equivalent for a raster file (``"MONOCHROME2"``, ``"RGB"``, ``"RGBA"``,
        ``"PALETTE COLOR"``).
    view_position : str or None
        DICOM View Position (``"PA"``, ``"AP"``, ``"LL"``...) when present; None otherwise.
    pixel_spacing : tuple of float or None
        (row spacing, column spacing) in millimetres per pixel of :attr:`LoadedImage.pixels`
        (the display frame: the stored file's values swapped where ``display_ops`` holds a
        ``"transpose"``).
    pixel_spacing_source : str or None
        ``"PixelSpacing"`` (calibrated at the patient), ``"ImagerPixelSpacing (uncalibrated)"``
        (at the detector: magnification not corrected), or None when unknown.
    transforms : list of str
        The operations applied, in order, with their parameters (e.g.
        ``"voi:window(center=15000, width=30000, function=LINEAR)"``, ``"invert:MONOCHROME1"``).
    transfer_syntax : str or None
        DICOM Transfer Syntax name (None for raster files).
    patient_orientation : tuple of str or None
        DICOM Patient Orientation as stored (direction of increasing column, of
        increasing row: ``("R", "F")`` is a mirrored frontal image), None when absent. The
        pixels are turned to the standard display (``("L", "F")``: patient's right on the
        image's left); ``transforms`` says how (``"orient:fliplr(...)"``).
    codestream_precision : int or None
        Sample precision of the JPEG / JPEG-LS / JPEG 2000 codestream when it differs from
        ``bits_stored`` (the decoder uses the codestream's); None when they agree or the
        data are not compressed.
    display_ops : tuple of str
        The operations, in the order applied, that turned the source frame into
        :attr:`LoadedImage.pixels` (each ``"transpose"``, ``"fliplr"`` or ``"flipud"``, see
        :data:`DISPLAY_OPS`); empty when ``pixels`` are in the source frame. The source
        frame is the one a viewer overlays a mask on: a DICOM's stored Rows x Columns
        grid (viewers do not apply Patient Orientation), a raster file's EXIF-oriented
        grid (viewers apply EXIF). :func:`to_source_frame` undoes them.
    """

    format: str
    original_shape: tuple[int, int]
    bits_stored: int
    photometric: str
    view_position: str | None = None
    pixel_spacing: tuple[float, float] | None = None
    pixel_spacing_source: str | None = None
    transforms: list[str] = field(default_factory=list)
    transfer_syntax: str | None = None
    patient_orientation: tuple[str, str] | None = None
    codestream_precision: int | None = None
    display_ops: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict."""
        d = dataclasses.asdict(self)
        d["original_shape"] = list(self.original_shape)
        d["pixel_spacing"] = list(self.pixel_spacing) if self.pixel_spacing else None
        d["patient_orientation"] = list(self.patient_orientation) if self.patient_orientation else None
        d["display_ops"] = list(self.display_ops)
        return d


#: The array operations a loader may apply to reach the display frame, each its own
#: inverse: ``transpose`` swaps rows and columns, ``fliplr`` reverses the columns,
#: ``flipud`` the rows (of the first two axes; a trailing channel axis is kept).
DISPLAY_OPS = {
    "transpose": lambda a: np.swapaxes(a, 0, 1),
    "fliplr": lambda a: a[:, ::-1],
    "flipud": lambda a: a[::-1, :],
}


def apply_display_ops(array: np.ndarray, ops: tuple[str, ...] | list[str]) -> np.ndarray:
    """Apply ``ops`` (names of :data:`DISPLAY_OPS`) to ``array`` in order.

    Parameters
    ----------
    array : ndarray, shape (H, W) or (H, W, C), any dtype
    ops : sequence of str

    Returns
    -------
    ndarray, contiguous, same dtype (H and W swapped once per ``transpose``)

    Raises
    ------
    ValueError
        On an op name not in :data:`DISPLAY_OPS`.
    """
    out = np.asarray(array)
    for op in ops:
        if op not in DISPLAY_OPS:
            raise ValueError(f"unknown display op {op!r}; expected one of {sorted(DISPLAY_OPS)}")
        out = DISPLAY_OPS[op](out)
    return np.ascontiguousarray(out)


def to_source_frame(array: np.ndarray, meta: ImageMeta) -> np.ndarray:
    """Turn an array aligned with :attr:`LoadedImage.pixels` (e.g. a predicted mask) into
    the source frame: :attr:`ImageMeta.display_ops` undone, in reverse order.

    Parameters
    ----------
    array : ndarray, shape (H, W) or (H, W, C)
        In the display frame (the shape of ``pixels``).
    meta : ImageMeta
        Of the image ``array`` is aligned with.

    Returns
    -------
    ndarray, contiguous, same dtype, in the source frame (a DICOM's Rows x Columns).
    """
    return apply_display_ops(array, tuple(reversed(meta.display_ops)))


def source_frame_shape(shape: tuple[int, ...], meta: ImageMeta) -> tuple[int, int]:
    """The (H, W) an array of display-frame ``shape`` has in the source frame: rows and
    columns swapped once per ``"transpose"`` of :attr:`ImageMeta.display_ops`."""
    h, w = int(shape[0]), int(shape[1])
    return (w, h) if meta.display_ops.count("transpose") % 2 else (h, w)


def source_frame_record(meta: ImageMeta) -> dict[str, Any]:
    """The JSON fields that say which frame an output is in: arrays that lie on the
    image in the source frame (``"frame": "source"``), overlays in the display frame,
    and the ``display_ops`` that lead from one to the other (``cxrils predict``,
    ``anatomy`` and ``ground``; docs/io.md)."""
    return {"frame": "source", "overlay_frame": "display", "display_ops": list(meta.display_ops)}


def box_to_source_frame(
    box: tuple[float, float, float, float], shape: tuple[int, int], meta: ImageMeta
) -> tuple[float, float, float, float]:
    """A box ``(x0, y0, x1, y1)`` in continuous pixel coordinates of the display frame
    (x = column, pixel edges at integers: the box of :class:`cxrils.types.LesionBox`) of
    an image of ``shape`` (H, W), in the source frame: :attr:`ImageMeta.display_ops`
    undone in reverse order, as :func:`to_source_frame` does for a mask, so that the
    box holds the same pixels there.

    Raises
    ------
    ValueError
        If ``meta.display_ops`` holds an operation outside :data:`DISPLAY_OPS`.
    """
    x0, y0, x1, y1 = box
    h, w = shape
    for op in reversed(meta.display_ops):
        if op == "fliplr":
            x0, x1 = w - x1, w - x0
        elif op == "flipud":
            y0, y1 = h - y1, h - y0
        elif op == "transpose":
            x0, y0, x1, y1 = y0, x0, y1, x1
            h, w = w, h
        else:
            raise ValueError(f"unknown display op {op!r}; expected one of {sorted(DISPLAY_OPS)}")
    return x0, y0, x1, y1


@dataclass(frozen=True)
class LoadedImage:
    """An image as the pipeline sees it.

    Attributes
    ----------
    pixels : ndarray of uint8, shape (H, W)
        Gray values in [0, 255], oriented as displayed (higher = brighter, i.e. denser
        tissue is bright as on a MONOCHROME2 display; EXIF orientation applied). This is the
        8-bit image ``x`` of the paper. On a frontal image the patient's right is on the
        image's left.
    meta : ImageMeta
    """

    pixels: np.ndarray
    meta: ImageMeta


def unit_to_uint8(f: np.ndarray) -> np.ndarray:
    """Map values in [0, 1] to uint8 [0, 255] by rounding (values are never wrapped).

    Parameters
    ----------
    f : ndarray of float, shape (H, W)
        Values in [0, 1] (anything outside is clipped; callers only pass in-range values).

    Returns
    -------
    ndarray of uint8, shape (H, W)
    """
    return np.rint(np.clip(f, 0.0, 1.0) * 255.0).astype(np.uint8)


def minmax_unit(values: np.ndarray, where: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """Scale ``values`` linearly so that their minimum is 0 and maximum 1 (no clipping).

    A constant image maps to all zeros (no range to stretch).

    Parameters
    ----------
    values : ndarray, any shape
    where : ndarray of bool, same shape, optional
        Take the minimum and maximum over ``values[where]`` only (at least one True).

    Returns
    -------
    (ndarray of float64, shape as input; lo; hi)
    """
    v = values.astype(np.float64, copy=False)
    ref = v if where is None else v[where]
    lo, hi = float(ref.min()), float(ref.max())
    if hi <= lo:
        return np.zeros(v.shape, dtype=np.float64), lo, hi
    return (v - lo) / (hi - lo), lo, hi


#: Fewest pixels a radiograph needs on each side to be answered by ``cxrils predict`` and
#: the web service, and the least nonzero ``MimicIlsConfig.max_side`` an import may store
#: (ours: the light model's input is 96 px and its anatomy prior works at 256 px, so a
#: thumbnail or a 1 x 1 image is no radiograph to answer about).
MIN_IMAGE_SIDE = 32


def image_too_small(shape: tuple[int, ...], min_side: int = MIN_IMAGE_SIDE) -> str | None:
    """Why an image of ``shape`` (rows, cols[, channels]) is too small to answer about, or None.

    Returns
    -------
    str or None
        ``"the image is W x H pixels; a chest X-ray needs at least N on each side"``
        when either side is below ``min_side``, else None.
    """
    rows, cols = int(shape[0]), int(shape[1])
    if min(rows, cols) >= min_side:
        return None
    return f"the image is {cols} x {rows} pixels; a chest X-ray needs at least {min_side} on each side"
