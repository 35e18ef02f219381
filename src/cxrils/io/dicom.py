"""DICOM radiographs through pydicom, to the paper's 8-bit image.

The display pipeline of DICOM PS3.3 C.11 (Modality LUT -> VOI LUT -> Presentation),
done in this order:

1. stored values, with junk high bits above Bits Stored masked by pydicom's decoder
   (sign-extended when Pixel Representation is signed);
2. Modality LUT: Modality LUT Sequence, or Rescale Slope / Intercept (negative slopes
   included) -- :func:`pydicom.pixels.apply_modality_lut`;
3. VOI, chosen by ``voi`` (``io.voi``) and recorded in ``meta.transforms``: by default
   (``"auto"``) the first item of the VOI LUT Sequence if present, else the first Window
   Center / Width (with its VOI LUT Function), else a min-max stretch of the modality
   values; ``"lut[:k]"`` / ``"window[:k]"`` ask for the k-th LUT / window (0 first),
   ``"minmax"`` for the stretch;
4. MONOCHROME1 inversion (so that higher = brighter, as MONOCHROME2);
5. scaling to 8 bits (``round(255 * f)``, ``f`` in [0, 1]);
6. orientation (Patient Orientation (0020,0020)): a frontal image stored mirrored or
   rotated is turned to the standard display, the patient's right on the image's left
   and the head at the top (:func:`orient_frontal`); contradictory tags raise
   :class:`~cxrils.io.ImageLoadError`.

Only whitelisted header fields leave this module (see :class:`cxrils.io.ImageMeta`):
no names, dates, UIDs or other identifiers. Nor does an error message quote a header
value, which may be free text typed into the wrong field (a name as the Photometric
Interpretation): a refusal names the element and says in words what is wrong with it.
For the same reason, importing this module silences pydicom's warnings (``UserWarning``) and
masks the quoted values in the records of the ``pydicom`` logger ("Invalid value for VR
IS: '...'"), both of which quote the value they doubt.
"""

from __future__ import annotations

import logging
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import Dataset
from pydicom.errors import InvalidDicomError
from pydicom.pixels import apply_modality_lut, apply_voi, apply_windowing, get_decoder
from pydicom.uid import (
    UID,
    JPEG2000TransferSyntaxes,
    JPEGBaseline8Bit,
    JPEGExtended12Bit,
    JPEGLSTransferSyntaxes,
    JPEGTransferSyntaxes,
    SegmentationStorage,
)

from cxrils.config import VOI_CHOICE
from cxrils.io.base import ImageLoadError, ImageMeta, LoadedImage, apply_display_ops, minmax_unit, unit_to_uint8
from cxrils.vocab import FRONTAL_VIEWS, LATERAL_VIEWS, read_view_position

_MONOCHROME = ("MONOCHROME1", "MONOCHROME2")
_COLOUR = ("RGB", "YBR_FULL", "YBR_FULL_422", "YBR_RCT", "YBR_ICT")
#: The other defined terms of Photometric Interpretation (DICOM PS3.3 C.7.6.3.1.2), which
#: a refusal may quote; any other value is not shown (module docstring).
_OTHER_PHOTOMETRIC = ("PALETTE COLOR", "YBR_PARTIAL_420", "YBR_PARTIAL_422", "HSV", "ARGB", "CMYK")
#: The defined terms of VOI LUT Function (PS3.3 C.11.2.1.3), which pydicom's windowing reads.
_VOI_FUNCTIONS = ("LINEAR", "LINEAR_EXACT", "SIGMOID")
#: Output range asked of pydicom's windowing; see :func:`_window_unit`.
_WINDOW_OUT_BITS = 16
#: Largest number of stored levels handled through a lookup table (see _monochrome_to_uint8).
_MAX_LEVELS = 1 << 20
_DIRECTION = re.compile(r"[LRAPHF]{1,3}")
_AXIS = {"L": "LR", "R": "LR", "A": "AP", "P": "AP", "H": "HF", "F": "HF"}


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def mask_quoted(text: str) -> str:
    """``text`` with every quoted value ('...' or "...") replaced by ``'...'``: a library's
    message about a header element may quote its value (module docstring)."""
    return _QUOTED.sub("'...'", text)


class _MaskQuotedValues(logging.Filter):
    """Masks every quoted value in a record of the ``pydicom`` logger (module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = mask_quoted(record.getMessage()), None
        return True


logging.getLogger("pydicom").addFilter(_MaskQuotedValues())
warnings.filterwarnings("ignore", category=UserWarning, module=r"pydicom(\.|$)")


def _why(err: BaseException) -> str:
    """An exception's message on one line, without the exception's class name (the
    messages of pydicom and its decoders are words; a bare class name is not)."""
    text = " ".join(str(err).split())
    return text or "the reader gave no reason"


def element_words(keyword: str) -> str:
    """A DICOM element for messages, in words with its tag: ``"StudyInstanceUID"`` ->
    ``"Study Instance UID (0020,000D)"`` (names from pydicom's data dictionary; an unknown
    keyword is returned as given)."""
    from pydicom.datadict import dictionary_description, tag_for_keyword

    tag = tag_for_keyword(keyword)
    return keyword if tag is None else f"{dictionary_description(tag)} ({tag >> 16:04X},{tag & 0xFFFF:04X})"


def _int_element(path: Path, ds: Dataset, keyword: str, default: int | None = None) -> int:
    """The integer value of an Image Pixel module element; ``default`` when it is absent
    or empty and a default exists.

    Raises
    ------
    ImageLoadError
        If the element is absent (and has no default) or not an integer, naming it.
    """
    try:
        value = ds.get(keyword)
    except Exception as err:  # a value pydicom cannot convert (e.g. "1A" in a US element)
        raise ImageLoadError(path, f"malformed {element_words(keyword)}: not a whole number") from err
    if value is None or value == "":
        if default is None:
            raise ImageLoadError(path, f"the DICOM header has no {element_words(keyword)}, which an image needs")
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as err:
        raise ImageLoadError(path, f"malformed {element_words(keyword)}: not a whole number") from err


def install_hint(uid: str) -> str:
    """The Python packages that decode pixel data of a transfer syntax (for error messages).

    Parameters
    ----------
    uid : str
        Transfer Syntax UID.

    Returns
    -------
    str
        E.g. ``"pylibjpeg and pylibjpeg-openjpeg (the 'dicom' extra: pip install 'cxrils[dicom]')"``.
    """
    extra = "(the 'dicom' extra: pip install 'cxrils[dicom]')"
    if uid in JPEG2000TransferSyntaxes:
        return f"pylibjpeg and pylibjpeg-openjpeg {extra}"
    if uid in (JPEGBaseline8Bit, JPEGExtended12Bit):
        return f"pylibjpeg and pylibjpeg-libjpeg {extra}, or Pillow"
    if uid in JPEGTransferSyntaxes or uid in JPEGLSTransferSyntaxes:
        return f"pylibjpeg and pylibjpeg-libjpeg {extra}"
    return "a pydicom pixel-data plugin for it (see pydicom's list of supported transfer syntaxes)"


def reads_as_dataset(path: str | Path) -> bool:
    """True if pydicom reads ``path``, a file without the ``DICM`` prefix at byte 128, as a
    preamble-less DICOM file (a File Meta group, command group or bare data set, as
    ACR-NEMA and some writers store them).

    ``pydicom.dcmread(path, force=True)`` reads any bytes: without the prefix it assumes no
    preamble and parses whatever is there as data elements (a text file or random bytes
    come out as one element with a tag no standard defines). A real data set begins with an
    element of the DICOM data dictionary: the first element pydicom reads must be a
    dictionary tag (repeating groups such as (60xx,eeee) included) or a group length
    (gggg,0000). A file that pydicom raises on counts as DICOM, so that the DICOM reader
    names the problem.

    Raises
    ------
    ImageLoadError
        If the file cannot be opened.
    """
    from pydicom.datadict import get_entry

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pydicom warns on every tag it cannot look up
            ds = pydicom.dcmread(path, force=True, stop_before_pixels=True)
    except OSError as err:
        raise ImageLoadError(path, f"cannot open: {err.strerror or err}") from err
    except Exception:  # pydicom raises many types on corrupt headers
        return True
    first = next(iter([*ds.file_meta.keys(), *ds.keys()]), None)
    if first is None:
        return False
    if first.element == 0 and not first.is_private:
        return True
    try:
        get_entry(first)
    except KeyError:
        return False
    return True


def _read(path: Path) -> Dataset:
    try:
        with open(path, "rb") as fh:
            has_preamble = fh.read(132)[128:132] == b"DICM"
        # Files without the 128-byte preamble are read only when named *.dcm / *.dicom.
        return pydicom.dcmread(path, force=not has_preamble)
    except InvalidDicomError as err:
        raise ImageLoadError(path, f"not a DICOM file: {_why(err)}") from err
    except Exception as err:  # pydicom raises many types on corrupt headers
        raise ImageLoadError(path, f"cannot read DICOM header: {_why(err)}") from err


def _transfer_syntax(path: Path, ds: Dataset) -> UID:
    tsyntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    if tsyntax is None:
        raise ImageLoadError(path, "DICOM file meta has no Transfer Syntax UID (0002,0010)")
    tsyntax = UID(str(tsyntax))
    try:
        decoder = get_decoder(tsyntax)
    except NotImplementedError as err:
        # a UID pydicom does not know is a header value like any other (module docstring)
        shown = f"{tsyntax.name} ({tsyntax})" if tsyntax.name != str(tsyntax) else "(a UID pydicom does not know)"
        raise ImageLoadError(path, f"transfer syntax {shown} has no pixel-data decoder in pydicom") from err
    if not decoder.is_available:
        raise ImageLoadError(
            path,
            f"pixel data is compressed with {tsyntax.name} ({tsyntax}) and no decoder for it is "
            f"installed; install {install_hint(tsyntax)}",
        )
    return tsyntax


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


def _nth(ds: Dataset, keyword: str, k: int) -> tuple[float, int]:
    """The k-th value of a possibly multi-valued DS element, and its number of values.

    Raises
    ------
    IndexError
        If the element has no k-th value.
    ValueError
        If the value is not a number (the message names the element, not the value).
    """
    elem = ds[keyword]
    values = list(elem.value) if elem.VM > 1 else [elem.value]
    if k >= len(values):
        raise IndexError(f"the file has {len(values)} {keyword} value{'s' if len(values) != 1 else ''}")
    try:
        return float(values[k]), len(values)
    except (TypeError, ValueError):
        raise ValueError(f"{element_words(keyword)} is not a number") from None


def _voi_unit(
    values: np.ndarray, ds: Dataset, present: np.ndarray | None = None, voi: str = "auto"
) -> tuple[np.ndarray, str]:
    """Apply the VOI transform of ``ds`` chosen by ``voi`` to modality values; output in
    [0, 1] and its record (with ``io.voi=...`` when not ``"auto"``).

    ``"auto"``: VOI LUT item 0, else window 0, else min-max. ``"lut[:k]"`` and
    ``"window[:k]"``: the k-th item / window (0 first), min-max when the file has none
    (said in the record). The min-max stretch takes its range from ``values[present]``
    when ``present`` is given.
    """
    kind, _, index = voi.partition(":")
    k = int(index or 0)
    tag = "" if voi == "auto" else f" (io.voi={voi})"
    seq = ds.get("VOILUTSequence")
    note = ""
    if kind in ("auto", "lut") and seq:
        if k < len(seq) and seq[k].get("LUTDescriptor") is not None and seq[k].get("LUTData") is not None:
            item = seq[k]
            desc = item.LUTDescriptor
            n_entries, first_map, bits = int(desc[0]) or 2**16, int(desc[1]), int(desc[2])
            _check_lut_length(item, n_entries, "VOI LUT")
            iv = np.clip(np.rint(values), first_map, first_map + n_entries - 1).astype(np.int64)
            # pydicom reads the table (US/SS/OW, endianness); we index it with the clipped values.
            lut = apply_voi(np.arange(first_map, first_map + n_entries, dtype=np.int64), ds, k).astype(np.float64)
            lo, hi = float(lut.min()), float(lut.max())
            y = lut[iv - first_map]
            f = (y - lo) / (hi - lo) if hi > lo else np.zeros_like(y)
            return f, (
                f"voi:lut[{k} of {len(seq)}](entries={n_entries}, first={first_map}, bits={bits}, "
                f"output {lo:g}..{hi:g}){tag}"
            )
        if kind == "lut":
            note = f"; no usable VOI LUT item {k} (the file has {len(seq)})"
    elif kind == "lut":
        note = "; the file has no VOI LUT Sequence"
    if kind in ("auto", "window") and "WindowCenter" in ds and "WindowWidth" in ds:
        try:
            center, n_windows = _nth(ds, "WindowCenter", k)
            width, _ = _nth(ds, "WindowWidth", k)
            function = str(ds.get("VOILUTFunction", "") or "LINEAR").strip().upper()
            if function not in _VOI_FUNCTIONS:
                raise ValueError(f"{element_words('VOILUTFunction')} is none of {', '.join(_VOI_FUNCTIONS)}")
            f = _window_unit(values, center, width, function)
            return f, (f"voi:window[{k} of {n_windows}](center={center:g}, width={width:g}, function={function}){tag}")
        except (ValueError, TypeError, IndexError) as err:  # empty, non-numeric, out-of-range or no k-th window
            note = f"; window{f' {k}' if k else ''} ignored: {err}"
    elif kind == "window":
        note = "; the file has no Window Center / Width"
    f, lo, hi = minmax_unit(values, present)
    return f, f"voi:minmax({lo:g}..{hi:g}){tag}{note}"


def _check_lut_length(item: Dataset, n_entries: int, name: str) -> None:
    """Raise ValueError when an LUT item holds fewer entries than its LUT Descriptor says
    (``n_entries``, 0 read as 65536 by the caller); ``name`` names the table."""
    data = item.LUTData
    if isinstance(data, bytes):  # OW: pydicom unpacks one 16-bit word per entry (apply_voi)
        stored = len(data) // 2
    elif isinstance(data, int):  # US with one value
        stored = 1
    else:
        stored = len(data)
    if stored < n_entries:
        raise ValueError(f"the {name} Data holds {stored} entries where its LUT Descriptor says {n_entries}")


def _check_modality_lut(ds: Dataset) -> None:
    """Raise ValueError, in words, for a Modality LUT that cannot be applied: a Rescale
    Slope or Intercept that is not a number, or an LUT shorter than its descriptor."""
    seq = ds.get("ModalityLUTSequence")
    if seq:
        item = seq[0]
        if item.get("LUTDescriptor") is None or item.get("LUTData") is None:
            raise ValueError("the Modality LUT Sequence item has no LUT Descriptor or LUT Data")
        _check_lut_length(item, int(item.LUTDescriptor[0]) or 2**16, "Modality LUT")
        return
    for keyword in ("RescaleSlope", "RescaleIntercept"):
        try:
            value = ds.get(keyword)
            if value is not None and value != "" and not math.isfinite(float(value)):
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"{element_words(keyword)} is not a number") from None


def _display_unit(
    path: Path,
    stored: np.ndarray,
    ds: Dataset,
    photometric: str,
    transforms: list[str],
    present: np.ndarray | None = None,
    voi: str = "auto",
) -> np.ndarray:
    """Modality LUT -> VOI -> MONOCHROME1 inversion of stored values; output in [0, 1].

    ``present`` (bool, same shape as ``stored``) marks the values that occur in the image,
    for the min-max VOI fallback when ``stored`` is a table of levels rather than the image.
    """
    try:
        _check_modality_lut(ds)
    except ValueError as err:
        raise ImageLoadError(path, f"cannot apply the Modality LUT: {err}") from err
    try:
        values = apply_modality_lut(stored, ds)
    except Exception as err:  # what the checks above do not foresee; pydicom's words may quote values
        raise ImageLoadError(path, "cannot apply the Modality LUT: pydicom cannot read it") from err
    if ds.get("ModalityLUTSequence"):
        transforms.append("modality:lut")
    elif "RescaleSlope" in ds and "RescaleIntercept" in ds:
        transforms.append(
            f"modality:rescale(slope={float(ds.RescaleSlope):g}, intercept={float(ds.RescaleIntercept):g})"
        )
    try:
        f, record = _voi_unit(values, ds, present, voi)
    except ValueError as err:  # ours, in words (_check_lut_length)
        raise ImageLoadError(path, f"cannot apply the VOI LUT: {err}") from err
    except Exception as err:  # pydicom's words may quote header values
        raise ImageLoadError(path, "cannot apply the VOI LUT: pydicom cannot read it") from err
    transforms.append(record)
    if photometric == "MONOCHROME1":
        f = 1.0 - f
        transforms.append("invert:MONOCHROME1")
    return f


def _monochrome_to_uint8(
    path: Path, arr: np.ndarray, ds: Dataset, photometric: str, transforms: list[str], voi: str = "auto"
) -> np.ndarray:
    """The 8-bit display image of integer stored values ``arr`` (H, W).

    The chain is applied once per stored level between the image's minimum and maximum
    (a lookup table, as viewers do), then the table is indexed by the pixels: the result
    equals applying the chain to every pixel, several times faster for 12-16-bit data.
    """
    lo, hi = int(arr.min()), int(arr.max())
    if hi - lo >= _MAX_LEVELS:  # e.g. 32-bit data with a huge range: per pixel
        return unit_to_uint8(_display_unit(path, arr, ds, photometric, transforms, voi=voi))
    index = arr.astype(np.int64) - lo
    levels = np.arange(lo, hi + 1, dtype=np.int64).astype(arr.dtype)
    present = np.bincount(index.ravel(), minlength=levels.size) > 0
    table = unit_to_uint8(_display_unit(path, levels, ds, photometric, transforms, present, voi))
    return table[index]


def _pixel_spacing(ds: Dataset) -> tuple[tuple[float, float] | None, str | None]:
    for keyword, source in (
        ("PixelSpacing", "PixelSpacing"),
        ("ImagerPixelSpacing", "ImagerPixelSpacing (uncalibrated)"),
    ):
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
    # read as an input table's view cell is ("AP PORTABLE" -> "AP"); the field is free
    # text, so what is kept is a known term or a not-frontal view's view words, never a
    # name typed into it
    term, not_frontal = read_view_position(value)
    return term or not_frontal


def _patient_orientation(path: Path, ds: Dataset) -> tuple[str, str] | None:
    """Patient Orientation (0020,0020) as two direction codes, or None when absent/empty.

    Raises
    ------
    ImageLoadError
        If present but not two codes of L, R, A, P, H, F (e.g. ``"L\\R"`` is read, and
        refused later as naming one axis twice).
    """
    try:
        elem = ds.get("PatientOrientation")
        values = [] if elem is None or elem == "" else (list(elem) if not isinstance(elem, str) else [elem])
    except Exception as err:  # a malformed element
        raise ImageLoadError(path, f"unreadable Patient Orientation (0020,0020): {_why(err)}") from err
    values = [str(v).strip().upper() for v in values]
    if not any(values):
        return None
    if len(values) != 2 or not all(_DIRECTION.fullmatch(v) for v in values):
        text = "\\".join(values)
        # quoted only when made of direction letters: the field is free text (a name must not travel)
        shown = repr(text) if re.fullmatch(r"[LRAPHF\\ ]{0,16}", text) else f"of {len(text)} characters"
        raise ImageLoadError(
            path,
            f"Patient Orientation (0020,0020) {shown} is not two direction codes "
            "(L, R, A, P, H, F): cannot tell the patient's sides",
        )
    return values[0], values[1]


def orient_frontal(
    pixels: np.ndarray, orientation: tuple[str, str] | None, view_position: str | None
) -> tuple[np.ndarray, list[str], bool]:
    """Turn a frontal image to the standard display: the patient's right on the image's
    left (columns run towards the patient's left, ``L``) and the head at the top (rows
    run towards the feet, ``F``), i.e. Patient Orientation ``L\\F``.

    The first value of Patient Orientation is the direction of increasing column index,
    the second of increasing row index; each value's first letter is its main direction
    (DICOM PS3.3 C.7.6.1.1.1). ``R\\F`` (mirrored) is flipped left-right, ``L\\H``
    up-down, ``R\\H`` both; ``F\\L``-like values (rotated) are transposed first.

    Parameters
    ----------
    pixels : ndarray, shape (H, W)
    orientation : (str, str) or None
        As read (:func:`_patient_orientation`); None leaves the image as stored.
    view_position : str or None
        View Position, to check the orientation against.

    Returns
    -------
    (ndarray, tuple of str, list of str)
        The oriented pixels; the ops applied in order (names of
        :data:`cxrils.io.base.DISPLAY_OPS`: ``("transpose", "fliplr")``...; empty when
        none), which :func:`cxrils.io.base.to_source_frame` undoes; and their record for
        ``meta.transforms`` (e.g. ``["orient:fliplr(PatientOrientation R\\F -> L\\F)"]``).

    Raises
    ------
    ValueError
        If the two values name one axis (``L\\R``), or the orientation and the view
        contradict each other (a coronal orientation with a lateral View Position, an
        A/P direction with a PA/AP View Position).
    """
    if orientation is None:
        return pixels, (), []
    row_dir, col_dir = orientation
    text = f"{row_dir}\\{col_dir}"
    axes = (_AXIS[row_dir[0]], _AXIS[col_dir[0]])
    if axes[0] == axes[1]:
        raise ValueError(f"Patient Orientation {text} names one axis twice")
    view = (view_position or "").strip().upper()
    if "AP" in axes:  # a sagittal or axial plane: not a frontal radiograph
        if view in FRONTAL_VIEWS:
            raise ValueError(
                f"View Position {view} is frontal but Patient Orientation {text} is not "
                "(an A/P direction): the tags contradict each other"
            )
        return pixels, (), [f"orient:none(PatientOrientation {text}: not a frontal plane, left as stored)"]
    if view in LATERAL_VIEWS:
        raise ValueError(
            f"View Position {view} is lateral but Patient Orientation {text} is frontal: the tags contradict each other"
        )
    ops: list[str] = []
    if axes[0] == "HF":  # columns run head-feet: rotated by 90 degrees
        row_dir, col_dir = col_dir, row_dir
        ops.append("transpose")
    if row_dir[0] == "R":
        ops.append("fliplr")
    if col_dir[0] == "H":
        ops.append("flipud")
    if not ops:
        return pixels, (), []
    return apply_display_ops(pixels, ops), tuple(ops), [f"orient:{'+'.join(ops)}(PatientOrientation {text} -> L\\F)"]


def _codestream_precision(ds: Dataset, tsyntax: UID) -> int | None:
    """Sample precision written in the first frame's JPEG / JPEG-LS / JPEG 2000
    codestream header, or None (uncompressed data, or a header pydicom cannot parse)."""
    if not tsyntax.is_compressed:
        return None
    try:
        from pydicom.encaps import generate_frames
        from pydicom.pixels import utils

        frame = next(generate_frames(ds.PixelData, number_of_frames=1))
        if tsyntax in JPEG2000TransferSyntaxes:
            params = utils.get_j2k_parameters(frame)
        elif tsyntax in JPEGTransferSyntaxes or tsyntax in JPEGLSTransferSyntaxes:
            params = utils._get_jpg_parameters(frame)  # pydicom's own JPEG header parser
        else:
            return None
        precision = params.get("precision")
        return int(precision) if precision else None
    except Exception:  # an unparsable header: the decoder reports real problems
        return None


#: Segmentation Storage SOP Class UID (PS3.4 B.5): a mask, whose pixels are no radiograph.


def load_dicom(path: str | Path, *, max_pixels: int, voi: str = "auto") -> LoadedImage:
    """Load a single-frame DICOM radiograph as the paper's 8-bit image.

    Parameters
    ----------
    path : str or Path
    max_pixels : int
        Refuse images with more than this many pixels (Rows x Columns), before decoding.
    voi : str
        VOI choice (``io.voi``): ``"auto"``, ``"lut"``, ``"lut:k"``, ``"window"``,
        ``"window:k"`` or ``"minmax"`` (module docstring).

    Returns
    -------
    LoadedImage
        ``pixels`` uint8 (H, W), brighter = denser, MONOCHROME1 inverted, a frontal image
        in the standard orientation (patient's right on the image's left); ``meta`` as in
        :class:`cxrils.io.ImageMeta` (``patient_orientation`` as stored,
        ``codestream_precision`` when it differs from Bits Stored).

    Raises
    ------
    ImageLoadError
        Not DICOM, no pixel data, a DICOM Segmentation, multi-frame, unsupported
        photometric interpretation, too
        many pixels, compressed pixel data without an installed decoder (the message names
        the transfer syntax and the package to install), data that fails to decode, or a
        Patient Orientation that is malformed or contradicts the View Position.
    """
    if not VOI_CHOICE.fullmatch(voi):
        raise ValueError(f"voi must be auto, minmax, lut[:k] or window[:k], got {voi!r}")
    path = Path(path)
    ds = _read(path)
    if "PixelData" not in ds:
        raise ImageLoadError(path, "DICOM file has no Pixel Data (7FE0,0010): not an image object")
    if str(ds.get("Modality", "")).strip().upper() == "SEG" or str(ds.get("SOPClassUID", "")) == SegmentationStorage:
        raise ImageLoadError(
            path, "a DICOM Segmentation (Modality SEG), not an X-ray image: give the image it segments"
        )
    tsyntax = _transfer_syntax(path, ds)
    rows, cols = _int_element(path, ds, "Rows"), _int_element(path, ds, "Columns")
    bits_stored = _int_element(path, ds, "BitsStored", default=0) or _int_element(path, ds, "BitsAllocated")
    frames = _int_element(path, ds, "NumberOfFrames", default=1)
    photometric = str(ds.get("PhotometricInterpretation", "")).strip().upper()
    if photometric not in _MONOCHROME + _COLOUR:
        shown = (
            repr(photometric) if photometric in _OTHER_PHOTOMETRIC else "(a value that is no defined term, not shown)"
        )
        raise ImageLoadError(
            path, f"unsupported Photometric Interpretation {shown}; expected one of {_MONOCHROME + _COLOUR}"
        )
    if frames != 1:
        raise ImageLoadError(path, f"multi-frame DICOM ({frames} frames); expected a single radiograph")
    if rows * cols > max_pixels:
        raise ImageLoadError(
            path, f"image has {rows}x{cols} = {rows * cols} pixels, more than the limit of {max_pixels} (io.max_pixels)"
        )
    try:
        # Bits above Bits Stored are junk: pydicom masks them (sign-extending signed data).
        ds.pixel_array_options(correct_unused_bits=True)
        arr = ds.pixel_array
    except Exception as err:  # decoders raise many types on corrupt or truncated data
        raise ImageLoadError(path, f"cannot decode pixel data ({tsyntax.name}): {_why(err)}") from err

    transforms: list[str] = []
    if photometric in _MONOCHROME:
        if arr.ndim != 2:
            raise ImageLoadError(path, f"expected a 2-D monochrome image, decoded shape {arr.shape}")
        pixels = _monochrome_to_uint8(path, arr, ds, photometric, transforms, voi)
    else:
        if arr.ndim != 3 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
            raise ImageLoadError(path, f"expected 8-bit RGB pixel data, decoded {arr.dtype} {arr.shape}")
        from PIL import Image

        pixels = np.asarray(Image.fromarray(arr).convert("L"), dtype=np.uint8)
        transforms.append(f"gray:{photometric}->L(ITU-R 601-2)")
    transforms.append("scale:uint8")
    view = _view_position(ds)
    orientation = _patient_orientation(path, ds)
    try:
        pixels, display_ops, turned = orient_frontal(pixels, orientation, view)
    except ValueError as err:
        raise ImageLoadError(path, f"{err}: cannot tell the patient's sides") from err
    transforms += turned
    spacing, spacing_source = _pixel_spacing(ds)
    if "transpose" in display_ops and spacing is not None:
        spacing = (spacing[1], spacing[0])
    precision = _codestream_precision(ds, tsyntax)
    meta = ImageMeta(
        format="dicom",
        original_shape=(rows, cols),
        bits_stored=bits_stored,
        photometric=photometric,
        view_position=view,
        pixel_spacing=spacing,
        pixel_spacing_source=spacing_source,
        transforms=transforms,
        transfer_syntax=tsyntax.name,
        patient_orientation=orientation,
        codestream_precision=precision if precision is not None and precision != bits_stored else None,
        display_ops=display_ops,
    )
    return LoadedImage(pixels=pixels, meta=meta)
