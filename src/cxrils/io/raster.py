"""PNG, JPEG, TIFF and BMP through Pillow, to the paper's 8-bit image.

* EXIF orientation is applied (:func:`PIL.ImageOps.exif_transpose`), so the pixels are
  as displayed.
* 8-bit gray is kept as is; 16-bit and 32-bit gray are stretched linearly from their
  minimum to their maximum (never clipped, never wrapped); bilevel maps to 0/255.
* RGB, RGBA, LA and palette images are converted to gray with Pillow's ITU-R 601-2 luma
  (alpha is dropped).
* The pixel count is checked from the header, before decoding, against ``max_pixels``;
  Pillow's own decompression-bomb error is also turned into :class:`ImageLoadError`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from cxrils.io.base import ImageLoadError, ImageMeta, LoadedImage, minmax_unit, unit_to_uint8

#: Formats Pillow may detect; anything else is refused.
FORMATS: tuple[str, ...] = ("PNG", "JPEG", "TIFF", "BMP")
_HIGH_DEPTH = {"I;16": 16, "I;16L": 16, "I;16B": 16, "I;16N": 16, "I": 32, "F": 32}
_COLOUR = {"RGB": "RGB", "RGBA": "RGBA", "RGBX": "RGB", "CMYK": "CMYK", "YCbCr": "YBR_FULL",
           "LA": "MONOCHROME2", "P": "PALETTE COLOR", "PA": "PALETTE COLOR"}


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


def _to_gray(im: Image.Image, transforms: list[str]) -> np.ndarray:
    mode = im.mode
    if mode == "L":
        return np.asarray(im, dtype=np.uint8)
    if mode == "1":
        transforms.append("gray:1->L")
        return np.asarray(im.convert("L"), dtype=np.uint8)
    if mode in _HIGH_DEPTH:
        f, lo, hi = minmax_unit(np.asarray(im))
        transforms.append(f"scale:minmax({lo:g}..{hi:g})->uint8")
        return unit_to_uint8(f)
    if mode in ("P", "PA"):
        im = im.convert("RGBA" if "transparency" in im.info or mode == "PA" else "RGB")
        transforms.append(f"palette:{mode}->{im.mode}")
    transforms.append(f"gray:{im.mode}->L(ITU-R 601-2)")
    return np.asarray(im.convert("L"), dtype=np.uint8)


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
            with Image.open(path, formats=list(FORMATS)) as im:
                w, h = im.size
                if w * h > max_pixels:
                    raise ImageLoadError(path, f"image has {h}x{w} = {w * h} pixels, more than the "
                                               f"limit of {max_pixels} (io.max_pixels)")
                if getattr(im, "n_frames", 1) != 1:
                    raise ImageLoadError(path, f"multi-frame {im.format} ({im.n_frames} frames); "
                                               "expected a single image")
                fmt, mode, bits = str(im.format), im.mode, _bits(im)
                orientation = im.getexif().get(0x0112, 1)  # EXIF Orientation tag
                im.load()
                oriented = ImageOps.exif_transpose(im)
                if orientation not in (None, 1):
                    transforms.append(f"exif_transpose(orientation={orientation})")
                gray = _to_gray(oriented, transforms)
    except ImageLoadError:
        raise
    except Image.DecompressionBombError as err:
        raise ImageLoadError(path, f"refused as a possible decompression bomb: {err}") from err
    except FileNotFoundError as err:
        raise ImageLoadError(path, "file not found") from err
    except IsADirectoryError as err:
        raise ImageLoadError(path, "is a directory, not an image file") from err
    except Image.UnidentifiedImageError as err:
        raise ImageLoadError(path, f"not a recognised image ({', '.join(FORMATS)} or DICOM)") from err
    except (OSError, SyntaxError, ValueError, EOFError) as err:
        # Pillow reports truncated and corrupt data as OSError / SyntaxError / ValueError.
        raise ImageLoadError(path, f"cannot decode image data: {type(err).__name__}: {err}") from err
    meta = ImageMeta(
        format=fmt.lower(),
        original_shape=(h, w),
        bits_stored=bits,
        photometric=_photometric(mode),
        transforms=transforms,
    )
    return LoadedImage(pixels=np.ascontiguousarray(gray), meta=meta)
