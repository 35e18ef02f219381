"""Image loading: DICOM, PNG, JPEG (TIFF, BMP) -> the paper's 8-bit gray image ``x``.

One entry point, :func:`load_image`, returns a :class:`LoadedImage` whose ``pixels`` are
uint8 (H, W) in [0, 255], oriented as displayed (a DICOM frontal image in the standard
orientation, patient's right on the image's left), and whose ``meta`` keeps a whitelist
of facts about the file (shape, bit depth, photometric interpretation, view position,
patient orientation, pixel spacing and its source, the transforms applied). Every
failure raises :class:`ImageLoadError` naming the file and the reason.
"""

from __future__ import annotations

from pathlib import Path

from cxrils.io.base import RASTER_SIGNATURES, ImageLoadError, ImageMeta, LoadedImage

__all__ = ["ImageLoadError", "ImageMeta", "LoadedImage", "is_dicom", "load_image"]

_DICOM_SUFFIXES = (".dcm", ".dicom", ".dic")


def is_dicom(path: str | Path) -> bool:
    """True if ``path`` has the DICOM preamble (``DICM`` at byte 128), or a DICOM suffix
    (``.dcm``, ``.dicom``, ``.dic``) and content that is not a PNG / JPEG / TIFF / BMP (a
    PNG named ``.dcm`` is a PNG) and that pydicom reads as a preamble-less data set (a text
    file named ``.dcm`` is not DICOM: :func:`cxrils.io.dicom.reads_as_dataset`).

    Raises
    ------
    ImageLoadError
        If the file cannot be opened.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(132)
    except FileNotFoundError as err:
        raise ImageLoadError(path, "file not found") from err
    except IsADirectoryError as err:
        raise ImageLoadError(path, "is a directory, not an image file") from err
    except OSError as err:
        raise ImageLoadError(path, f"cannot open: {err.strerror or err}") from err
    if head[128:132] == b"DICM":
        return True
    if path.suffix.lower() not in _DICOM_SUFFIXES or head.startswith(tuple(magic for magic, _ in RASTER_SIGNATURES)):
        return False
    from cxrils.io.dicom import reads_as_dataset

    return reads_as_dataset(path)


def load_image(path: str | Path, *, max_pixels: int | None = None, voi: str = "auto") -> LoadedImage:
    """Load a chest radiograph as the 8-bit gray image the pipeline works on.

    DICOM (detected by its preamble, or a ``.dcm``/``.dicom``/``.dic`` suffix on content that is
    not a raster format and reads as a preamble-less data set: :func:`is_dicom`) goes
    through pydicom:
    Modality LUT, VOI LUT or window (``voi``, recorded), MONOCHROME1 inversion, scaling
    to 8 bits, Patient Orientation to the standard display (:mod:`cxrils.io.dicom`).
    Other files go through Pillow: EXIF orientation, gray levels scaled by their
    container's range (so 8- and 16-bit copies of one image give the same ``x``),
    colour and palette to gray (:mod:`cxrils.io.raster`).

    Parameters
    ----------
    path : str or Path
    max_pixels : int, optional
        Refuse images with more pixels than this, checked from the header before decoding;
        it replaces Pillow's own limit (a larger value is honoured).
        Default :attr:`cxrils.config.IOConfig.max_pixels`.
    voi : str
        DICOM VOI choice (``io.voi``): ``"auto"`` (VOI LUT, else first window, else
        min-max), ``"lut"``/``"lut:k"``, ``"window"``/``"window:k"``, ``"minmax"``.

    Returns
    -------
    LoadedImage
        ``pixels``: ndarray uint8 (H, W) in [0, 255], higher = brighter, as displayed (on a
        frontal image the patient's right is on the image's left); ``meta``: :class:`ImageMeta`.

    Raises
    ------
    ImageLoadError
        For any failure (missing file, unknown format, too many pixels, compressed DICOM
        without a decoder, corrupt or truncated data...), with the path and the reason.
    """
    if max_pixels is None:
        from cxrils.config import IOConfig

        max_pixels = IOConfig().max_pixels
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels < 1:
        raise ValueError(f"max_pixels must be a positive int, got {max_pixels!r}")
    if is_dicom(path):
        from cxrils.io.dicom import load_dicom

        return load_dicom(path, max_pixels=max_pixels, voi=voi)
    from cxrils.io.raster import load_raster

    return load_raster(path, max_pixels=max_pixels)
