"""DICOM radiographs through pydicom, to the paper's 8-bit image.

The display pipeline of DICOM PS3.3 C.11 (Modality LUT -> VOI LUT -> Presentation),
done in this order:

1. stored values, with junk high bits above Bits Stored masked (sign-extended when
   Pixel Representation is signed);
2. Modality LUT: Modality LUT Sequence, or Rescale Slope / Intercept (negative slopes
   included) -- :func:`pydicom.pixels.apply_modality_lut`;
3. VOI, chosen deterministically and recorded in ``meta.transforms``: the first item of
   the VOI LUT Sequence if present, else the first Window Center / Width (with its VOI LUT
   Function), else a min-max stretch of the modality values;
4. MONOCHROME1 inversion (so that higher = brighter, as MONOCHROME2);
5. scaling to 8 bits (``round(255 * f)``, ``f`` in [0, 1]).

Only whitelisted header fields leave this module (see :class:`cxrils.io.ImageMeta`):
no names, dates, UIDs or other identifiers.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import Dataset
from pydicom.errors import InvalidDicomError
from pydicom.pixels import apply_modality_lut, apply_voi, apply_windowing, get_decoder
from pydicom.uid import (
    JPEG2000TransferSyntaxes,
    JPEGBaseline8Bit,
    JPEGExtended12Bit,
    JPEGLSTransferSyntaxes,
    JPEGTransferSyntaxes,
    UID,
)

from cxrils.io.base import ImageLoadError, ImageMeta, LoadedImage, minmax_unit, unit_to_uint8

_MONOCHROME = ("MONOCHROME1", "MONOCHROME2")
_COLOUR = ("RGB", "YBR_FULL", "YBR_FULL_422", "YBR_RCT", "YBR_ICT")
#: Output range asked of pydicom's windowing; see :func:`_window_unit`.
_WINDOW_OUT_BITS = 16
_VIEW_POSITION = re.compile(r"[A-Z]{1,8}( [A-Z]{1,8})?")


def install_hint(uid: str) -> str:
    """The Python packages that decode pixel data of a transfer syntax (for error messages).

    Parameters
    ----------
    uid : str
        Transfer Syntax UID.

    Returns
    -------
    str
        E.g. ``"pylibjpeg and pylibjpeg-openjpeg (pip install 'cxrils[dicom]')"``.
    """
    extra = "(pip install 'cxrils[dicom]')"
    if uid in JPEG2000TransferSyntaxes:
        return f"pylibjpeg and pylibjpeg-openjpeg {extra}"
    if uid in (JPEGBaseline8Bit, JPEGExtended12Bit):
        return f"pylibjpeg and pylibjpeg-libjpeg {extra}, or Pillow"
    if uid in JPEGTransferSyntaxes or uid in JPEGLSTransferSyntaxes:
        return f"pylibjpeg and pylibjpeg-libjpeg {extra}"
    return "a pydicom pixel-data plugin for it (see pydicom's list of supported transfer syntaxes)"


def _read(path: Path) -> Dataset:
    try:
        with open(path, "rb") as fh:
            has_preamble = fh.read(132)[128:132] == b"DICM"
        # Files without the 128-byte preamble are read only when named *.dcm / *.dicom.
        return pydicom.dcmread(path, force=not has_preamble)
    except InvalidDicomError as err:
        raise ImageLoadError(path, f"not a DICOM file: {err}") from err
    except Exception as err:  # pydicom raises many types on corrupt headers
        raise ImageLoadError(path, f"cannot read DICOM header: {type(err).__name__}: {err}") from err


def _transfer_syntax(path: Path, ds: Dataset) -> UID:
    tsyntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    if tsyntax is None:
        raise ImageLoadError(path, "DICOM file meta has no Transfer Syntax UID (0002,0010)")
    tsyntax = UID(str(tsyntax))
    try:
        decoder = get_decoder(tsyntax)
    except NotImplementedError as err:
        raise ImageLoadError(
            path, f"transfer syntax {tsyntax.name} ({tsyntax}) has no pixel-data decoder in pydicom"
        ) from err
    if not decoder.is_available:
        raise ImageLoadError(
            path,
            f"pixel data is compressed with {tsyntax.name} ({tsyntax}) and no decoder for it is "
            f"installed; install {install_hint(tsyntax)}",
        )
    return tsyntax


def _mask_unused_bits(arr: np.ndarray, bits_stored: int, signed: bool) -> np.ndarray:
    """Keep the low ``bits_stored`` bits (sign-extended if ``signed``); junk high bits dropped.

    pydicom >= 3 already does this for native data; it is repeated here so that the
    guarantee does not depend on a decoder option.
    """
    nbits = arr.dtype.itemsize * 8
    if arr.dtype.kind not in "iu" or not 0 < bits_stored < nbits:
        return arr
    raw = arr.view(np.dtype(f"u{arr.dtype.itemsize}")) & np.array((1 << bits_stored) - 1, dtype=f"u{arr.dtype.itemsize}")
    if not signed:
        return raw.astype(arr.dtype, copy=False)
    out = raw.astype(np.int64)
    out[out >= (1 << (bits_stored - 1))] -= 1 << bits_stored
    return out.astype(arr.dtype)


def _first(ds: Dataset, keyword: str) -> tuple[float, int]:
    """First value of a possibly multi-valued DS element, and its number of values."""
    elem = ds[keyword]
    if elem.VM > 1:
        return float(elem.value[0]), int(elem.VM)
    return float(elem.value), 1


def _window_unit(values: np.ndarray, center: float, width: float, function: str) -> np.ndarray:
    """Window ``values`` to [0, 1] with pydicom's PS3.3 C.11.2.1.2 implementation.

    pydicom derives the window's output range from Bits Stored and Rescale Slope /
    Intercept, so a negative slope reverses it. We want the window fraction itself: we
    hand pydicom a dataset holding only the window, with a fixed unsigned 16-bit output
    range, and divide by its maximum.

    Raises
    ------
    ValueError
        From pydicom, on a width out of range or an unknown VOI LUT Function.
    """
    ref = Dataset()
    ref.PhotometricInterpretation = "MONOCHROME2"
    ref.BitsStored = _WINDOW_OUT_BITS
    ref.PixelRepresentation = 0
    ref.WindowCenter = f"{center:.10g}"
    ref.WindowWidth = f"{width:.10g}"
    ref.VOILUTFunction = function
    out = apply_windowing(values.astype(np.float64), ref)
    return out / float(2**_WINDOW_OUT_BITS - 1)


def _voi_unit(values: np.ndarray, ds: Dataset) -> tuple[np.ndarray, str]:
    """Apply the VOI transform of ``ds`` to modality values; output in [0, 1] and its record."""
    seq = ds.get("VOILUTSequence")
    if seq:
        item = seq[0]
        desc = item.get("LUTDescriptor")
        if desc is not None and item.get("LUTData") is not None:
            n_entries, first_map, bits = int(desc[0]) or 2**16, int(desc[1]), int(desc[2])
            iv = np.clip(np.rint(values), first_map, first_map + n_entries - 1).astype(np.int64)
            lut = apply_voi(np.arange(first_map, first_map + n_entries, dtype=np.int64), ds, 0)
            lo, hi = float(lut.min()), float(lut.max())
            y = apply_voi(iv, ds, 0).astype(np.float64)
            f = (y - lo) / (hi - lo) if hi > lo else np.zeros_like(y)
            return f, (f"voi:lut[0 of {len(seq)}](entries={n_entries}, first={first_map}, bits={bits}, "
                       f"output {lo:g}..{hi:g})")
    note = ""
    if ds.get("WindowCenter") is not None and ds.get("WindowWidth") is not None:
        center, n_windows = _first(ds, "WindowCenter")
        width, _ = _first(ds, "WindowWidth")
        function = str(ds.get("VOILUTFunction", "") or "LINEAR").strip().upper()
        try:
            f = _window_unit(values, center, width, function)
            return f, f"voi:window[0 of {n_windows}](center={center:g}, width={width:g}, function={function})"
        except ValueError as err:
            note = f"; window ignored: {err}"
    f, lo, hi = minmax_unit(values)
    return f, f"voi:minmax({lo:g}..{hi:g}){note}"


def _pixel_spacing(ds: Dataset) -> tuple[tuple[float, float] | None, str | None]:
    for keyword, source in (("PixelSpacing", "PixelSpacing"),
                            ("ImagerPixelSpacing", "ImagerPixelSpacing (uncalibrated)")):
        try:
            value = ds.get(keyword)
            row, col = float(value[0]), float(value[1])
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            continue
        if row > 0 and col > 0 and math.isfinite(row) and math.isfinite(col):
            return (row, col), source
    return None, None


def _view_position(ds: Dataset) -> str | None:
    try:
        value = str(ds.get("ViewPosition", "") or "").strip().upper()
    except Exception:  # a malformed element must not stop loading the pixels
        return None
    return value if _VIEW_POSITION.fullmatch(value) else None


def load_dicom(path: str | Path, *, max_pixels: int) -> LoadedImage:
    """Load a single-frame DICOM radiograph as the paper's 8-bit image.

    Parameters
    ----------
    path : str or Path
    max_pixels : int
        Refuse images with more than this many pixels (Rows x Columns), before decoding.

    Returns
    -------
    LoadedImage
        ``pixels`` uint8 (H, W), brighter = denser, MONOCHROME1 inverted; ``meta`` as in
        :class:`cxrils.io.ImageMeta`.

    Raises
    ------
    ImageLoadError
        Not DICOM, no pixel data, multi-frame, unsupported photometric interpretation, too
        many pixels, compressed pixel data without an installed decoder (the message names
        the transfer syntax and the package to install), or data that fails to decode.
    """
    path = Path(path)
    ds = _read(path)
    if "PixelData" not in ds:
        raise ImageLoadError(path, "DICOM file has no Pixel Data (7FE0,0010): not an image object")
    tsyntax = _transfer_syntax(path, ds)
    try:
        rows, cols = int(ds.Rows), int(ds.Columns)
        bits_stored = int(ds.get("BitsStored") or ds.BitsAllocated)
        signed = int(ds.get("PixelRepresentation", 0)) == 1
        frames = int(ds.get("NumberOfFrames") or 1)
    except (AttributeError, TypeError, ValueError) as err:
        raise ImageLoadError(path, f"missing or malformed image pixel module element: {err}") from err
    photometric = str(ds.get("PhotometricInterpretation", "")).strip().upper()
    if photometric not in _MONOCHROME + _COLOUR:
        raise ImageLoadError(path, f"unsupported Photometric Interpretation {photometric!r}; "
                                   f"expected one of {_MONOCHROME + _COLOUR}")
    if frames != 1:
        raise ImageLoadError(path, f"multi-frame DICOM ({frames} frames); expected a single radiograph")
    if rows * cols > max_pixels:
        raise ImageLoadError(path, f"image has {rows}x{cols} = {rows * cols} pixels, more than the "
                                   f"limit of {max_pixels} (io.max_pixels)")
    try:
        arr = ds.pixel_array
    except Exception as err:  # decoders raise many types on corrupt or truncated data
        raise ImageLoadError(path, f"cannot decode pixel data ({tsyntax.name}): {type(err).__name__}: {err}") from err

    transforms: list[str] = []
    if photometric in _MONOCHROME:
        if arr.ndim != 2:
            raise ImageLoadError(path, f"expected a 2-D monochrome image, decoded shape {arr.shape}")
        if bits_stored < arr.dtype.itemsize * 8:
            arr = _mask_unused_bits(arr, bits_stored, signed)
            transforms.append(f"mask_bits(stored={bits_stored} of {arr.dtype.itemsize * 8}, signed={signed})")
        try:
            values = apply_modality_lut(arr, ds)
        except Exception as err:
            raise ImageLoadError(path, f"cannot apply the Modality LUT: {type(err).__name__}: {err}") from err
        if ds.get("ModalityLUTSequence"):
            transforms.append("modality:lut")
        elif "RescaleSlope" in ds and "RescaleIntercept" in ds:
            transforms.append(f"modality:rescale(slope={float(ds.RescaleSlope):g}, "
                              f"intercept={float(ds.RescaleIntercept):g})")
        try:
            f, voi = _voi_unit(values, ds)
        except Exception as err:
            raise ImageLoadError(path, f"cannot apply the VOI LUT: {type(err).__name__}: {err}") from err
        transforms.append(voi)
        if photometric == "MONOCHROME1":
            f = 1.0 - f
            transforms.append("invert:MONOCHROME1")
    else:
        if arr.ndim != 3 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
            raise ImageLoadError(path, f"expected 8-bit RGB pixel data, decoded {arr.dtype} {arr.shape}")
        from PIL import Image

        f = np.asarray(Image.fromarray(arr).convert("L"), dtype=np.float64) / 255.0
        transforms.append(f"gray:{photometric}->L(ITU-R 601-2)")
    pixels = unit_to_uint8(f)
    transforms.append("scale:uint8")

    spacing, spacing_source = _pixel_spacing(ds)
    meta = ImageMeta(
        format="dicom",
        original_shape=(rows, cols),
        bits_stored=bits_stored,
        photometric=photometric,
        view_position=_view_position(ds),
        pixel_spacing=spacing,
        pixel_spacing_source=spacing_source,
        transforms=transforms,
        transfer_syntax=tsyntax.name,
    )
    return LoadedImage(pixels=pixels, meta=meta)
