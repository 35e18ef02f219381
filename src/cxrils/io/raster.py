"""PNG, JPEG, TIFF and BMP through Pillow, to the paper's 8-bit image.

* EXIF orientation is applied (:func:`PIL.ImageOps.exif_transpose`), so the pixels are
  as displayed.
* Gray levels are scaled linearly by the range of their container, the one rule for
  every integer depth: ``x = round(v * 255 / (2**bits - 1))``. 8-bit gray is kept as
  is; a 16-bit copy ``v16 = 257 * v8`` of an 8-bit image gives back exactly the same
  ``x``, and a constant image keeps its level (it is not stretched, nor zeroed). PNG 1.2
  (section 4.2.6) stores samples scaled up to the full 16 bits and records the original
  depth in ``sBIT``; a 16-bit gray PNG whose ``sBIT`` gives fewer bits but whose values
  all fit in those bits was written unscaled, and is scaled by that range instead
  (12-bit data: ``round(v * 255 / 4095)``); a correctly scaled image so dark that all its
  values fit in those bits cannot be told apart and is read so too. One without ``sBIT``
  whose values all fit in 12 bits is scaled by the 16-bit range and logged as a warning
  (it is nearly black).
  Bilevel
  maps to 0/255. 32-bit integer and float images have no display range of their own:
  they are stretched from their minimum to their maximum (never clipped, never
  wrapped; a constant one maps to 0).
* RGB, RGBA, LA and palette images are converted to gray with Pillow's ITU-R 601-2 luma
  (alpha is dropped).
* The pixel count is checked from the header, before decoding, against ``max_pixels``
  (``io.max_pixels``), which replaces Pillow's own decompression-bomb limit: a limit
  above Pillow's default is honoured.
"""

from __future__ import annotations

import logging
import re
import struct
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from cxrils.io.base import RASTER_SIGNATURES, ImageLoadError, ImageMeta, LoadedImage, minmax_unit, unit_to_uint8

log = logging.getLogger(__name__)

#: Formats Pillow may detect; anything else is refused.
FORMATS: tuple[str, ...] = ("PNG", "JPEG", "TIFF", "BMP")
_HIGH_DEPTH = {"I;16": 16, "I;16L": 16, "I;16B": 16, "I;16N": 16, "I": 32, "F": 32}
_COLOUR = {
    "RGB": "RGB",
    "RGBA": "RGBA",
    "RGBX": "RGB",
    "CMYK": "CMYK",
    "YCbCr": "YBR_FULL",
    "LA": "MONOCHROME2",
    "P": "PALETTE COLOR",
    "PA": "PALETTE COLOR",
}


def _signature_format(path: Path) -> str | None:
    """The format whose signature the file starts with, or None (unreadable or none)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return None
    return next((fmt for magic, fmt in RASTER_SIGNATURES if head.startswith(magic)), None)


def _photometric(mode: str) -> str:
    if mode in _COLOUR:
        return _COLOUR[mode]
    return "MONOCHROME2"


def _bits(im: Image.Image) -> int:
    if im.mode == "1":
        return 1
    if im.mode in _HIGH_DEPTH:
        # A 16-bit PNG may open as 32-bit "I" on older Pillow: trust the file's own depth.
        return 16 if im.format == "PNG" else _HIGH_DEPTH[im.mode]
    return 8


def _png_significant_bits(path: Path) -> int | None:
    """The ``sBIT`` gray depth of a 16-bit gray (or gray + alpha) PNG, or None where the
    file has none (chunks are read up to the first IDAT; PNG 1.2 section 4.2.6)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(8) != b"\x89PNG\r\n\x1a\n":
                return None
            gray16 = False
            while True:
                head = fh.read(8)
                if len(head) < 8:
                    return None
                length, kind = struct.unpack(">I4s", head)
                if kind == b"IDAT" or length > 1 << 20:
                    return None
                data = fh.read(length)
                fh.seek(4, 1)  # CRC (Pillow checks the file when it decodes it)
                if kind == b"IHDR" and len(data) >= 10:
                    gray16 = data[8] == 16 and data[9] in (0, 4)  # bit depth, colour type
                elif kind == b"sBIT" and data:
                    return int(data[0]) if gray16 and 1 <= data[0] < 16 else None
    except OSError:
        return None


def _to_gray(im: Image.Image, transforms: list[str], bits: int, significant: int | None = None) -> np.ndarray:
    """Gray uint8 of ``im``; ``bits`` is the stored depth (:func:`_bits` of the file, before
    an EXIF transpose, which drops ``im.format``); ``significant`` a 16-bit PNG's ``sBIT``
    depth (module docstring)."""
    mode = im.mode
    if mode == "L":
        return np.asarray(im, dtype=np.uint8)
    if mode == "1":
        transforms.append("gray:1->L")
        return np.asarray(im.convert("L"), dtype=np.uint8)
    if mode in _HIGH_DEPTH:
        if bits == 16 and mode != "F":
            # Container range, exactly: (v * 255 + full // 2) // full = round(v * 255 / full).
            v = np.clip(np.asarray(im, dtype=np.int64), 0, 65535)
            full = 65535
            if significant is not None and v.max() < 2**significant:  # written unscaled
                full = 2**significant - 1
                transforms.append(f"png_sbit:{significant}(unscaled)")
            transforms.append(f"scale:linear(0..{full})->uint8")
            return ((v * 255 + full // 2) // full).astype(np.uint8)
        f, lo, hi = minmax_unit(np.asarray(im))
        transforms.append(f"scale:minmax({lo:g}..{hi:g})->uint8")
        return unit_to_uint8(f)
    if mode in ("P", "PA"):
        im = im.convert("RGBA" if "transparency" in im.info or mode == "PA" else "RGB")
        transforms.append(f"palette:{mode}->{im.mode}")
    transforms.append(f"gray:{im.mode}->L(ITU-R 601-2)")
    return np.asarray(im.convert("L"), dtype=np.uint8)


_PILLOW_LIMIT = threading.Lock()


@contextmanager
def _pillow_limit(max_pixels: int) -> Iterator[None]:
    """Raise Pillow's decompression-bomb limit (a process-wide setting) to at least
    ``max_pixels`` while an image is opened, so that our own limit decides; Pillow's
    value is never lowered and is put back afterwards."""
    with _PILLOW_LIMIT:
        old = Image.MAX_IMAGE_PIXELS
        if old is not None and old < max_pixels:
            Image.MAX_IMAGE_PIXELS = max_pixels
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = old


def load_raster(path: str | Path, *, max_pixels: int) -> LoadedImage:
    """Load a PNG/JPEG/TIFF/BMP image as the paper's 8-bit gray image.

    Parameters
    ----------
    path : str or Path
    max_pixels : int
        Refuse images with more than this many pixels (width x height, from the header).

    Returns
    -------
    LoadedImage
        ``pixels`` uint8 (H, W) as displayed; ``meta.original_shape`` is the stored (H, W)
        before EXIF orientation.

    Raises
    ------
    ImageLoadError
        Unreadable or unrecognised file, multi-frame file, too many pixels, or truncated or
        corrupt data.
    """
    path = Path(path)
    transforms: list[str] = []
    try:
        with warnings.catch_warnings():
            # Our own limit is checked below; Pillow's warning level would only add noise.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with _pillow_limit(max_pixels):
                opened = Image.open(path, formats=list(FORMATS))
            with opened as im:
                w, h = im.size
                if w * h > max_pixels:
                    raise ImageLoadError(
                        path, f"image has {h}x{w} = {w * h} pixels, more than the limit of {max_pixels} (io.max_pixels)"
                    )
                if getattr(im, "n_frames", 1) != 1:
                    raise ImageLoadError(
                        path, f"multi-frame {im.format} ({im.n_frames} frames); expected a single image"
                    )
                fmt, mode, bits = str(im.format), im.mode, _bits(im)
                significant = _png_significant_bits(path) if fmt == "PNG" and bits == 16 else None
                orientation = im.getexif().get(0x0112, 1)  # EXIF Orientation tag
                im.load()
                oriented = ImageOps.exif_transpose(im)
                if orientation not in (None, 1):
                    transforms.append(f"exif_transpose(orientation={orientation})")
                gray = _to_gray(oriented, transforms, bits, significant)
                if significant is not None and f"png_sbit:{significant}(unscaled)" in transforms:
                    bits = significant  # the depth it was read by
    except ImageLoadError:
        raise
    except Image.DecompressionBombError as err:  # over twice max_pixels: Pillow refused it in open()
        # Pillow's own text quotes its limit (twice ours): keep its pixel count, name only our limit.
        size = re.search(r"\((\d+) pixels\)", str(err))
        count = f"{size.group(1)} pixels" if size else "more than twice that many pixels"
        raise ImageLoadError(
            path,
            f"image has {count}, more than the limit of {max_pixels} (io.max_pixels): "
            "refused before decoding (possible decompression bomb)",
        ) from err
    except FileNotFoundError as err:
        raise ImageLoadError(path, "file not found") from err
    except IsADirectoryError as err:
        raise ImageLoadError(path, "is a directory, not an image file") from err
    except Image.UnidentifiedImageError as err:
        signed = _signature_format(Path(path))
        if signed is not None:  # e.g. a PNG whose header chunk fails its checksum
            raise ImageLoadError(path, f"a corrupt {signed} file: its header cannot be read") from err
        raise ImageLoadError(path, f"not a recognised image ({', '.join(FORMATS)} or DICOM)") from err
    except (OSError, SyntaxError, ValueError, EOFError) as err:
        # Pillow reports truncated and corrupt data as OSError / SyntaxError / ValueError.
        why = " ".join(str(err).split()) or "the decoder gave no reason"
        raise ImageLoadError(path, f"cannot decode image data: {why}") from err
    if bits == 16 and mode != "F" and 0 < gray.max() <= 16:  # all values below ~4096 of 65535
        log.warning(
            "%s: a 16-bit %s whose values all fit in 12 bits is scaled by the 16-bit range, so it is "
            "nearly black (max gray level %d of 255); %san 8-bit copy gives its gray levels",
            path,
            fmt,
            int(gray.max()),
            "an sBIT chunk of 12 (significant bits) or " if fmt == "PNG" else "",
        )
    meta = ImageMeta(
        format=fmt.lower(),
        original_shape=(h, w),
        bits_stored=bits,
        photometric=_photometric(mode),
        transforms=transforms,
    )
    return LoadedImage(pixels=np.ascontiguousarray(gray), meta=meta)
