"""A predicted mask as a DICOM Segmentation (SEG) object that references its source image.

Written with highdicom (extra ``dicom``) so that a DICOM viewer (OHIF, 3D Slicer) shows
it over the X-ray it was predicted on: a BINARY SEG with one segment and one frame of
the source's Rows x Columns, whose Referenced Series Sequence and per-frame Derivation
Image / Source Image Sequence name the source SOP instance (PS3.3 A.51, C.8.20).

What is copied from the source header (nothing else; see docs/io.md):

* :data:`REFERENCE_FIELDS`: SOP Class UID, SOP Instance UID, Study Instance UID,
  Series Instance UID (to reference the image and put the SEG in its study), Rows and
  Columns (the frame geometry);
* :data:`SPATIAL_FIELDS` only when the source has a Frame of Reference UID and all of
  them (cross-sectional geometry). Projection radiographs (CR/DX) normally have none:
  then, as PS3.3 A.51.5 allows, the SEG has no frame of reference and its frame is
  pixel-aligned with the source (same Rows and Columns), without pixel measures.

The Patient and Study modules' Type 2 attributes (Patient's Name, Patient ID, Birth
Date, Sex, Study Date and Time, Study ID, Accession Number, Referring Physician) are
written **empty**: no personal data leaves the source. Viewers that group series by
patient may therefore list the SEG under an unnamed patient; it stays in the source's
study (same Study Instance UID).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from cxrils import __version__
from cxrils.extras import require_extra
from cxrils.fsutil import atomic_write_bytes

#: Source attributes the SEG needs to reference the image and match its frame.
REFERENCE_FIELDS: tuple[str, ...] = (
    "SOPClassUID",
    "SOPInstanceUID",
    "StudyInstanceUID",
    "SeriesInstanceUID",
    "Rows",
    "Columns",
)
#: Source attributes of a frame of reference, copied only all together.
SPATIAL_FIELDS: tuple[str, ...] = (
    "FrameOfReferenceUID",
    "PixelSpacing",
    "SliceThickness",
    "ImageOrientationPatient",
    "ImagePositionPatient",
)
#: Patient and Study module attributes (Type 2) written empty.
EMPTIED_FIELDS: tuple[str, ...] = (
    "PatientName",
    "PatientID",
    "PatientBirthDate",
    "PatientSex",
    "StudyDate",
    "StudyTime",
    "StudyID",
    "AccessionNumber",
    "ReferringPhysicianName",
)
#: Segmented Property Type per lesion type: names of ``pydicom.sr.codedict.codes.SCT``
#: (SNOMED CT codes of DICOM PS3.16); types without an entry there are coded "Lesion".
PROPERTY_TYPES: dict[str, str] = {
    "effusion": "PleuralEffusion",
    "cardiomegaly": "Cardiomegaly",
    "edema": "PulmonaryEdema",
}
#: Longest value of a DICOM LO (Long String) attribute (PS3.5 Table 6.2-1).
LO_MAX = 64


class DicomSegError(ValueError):
    """Raised when a SEG cannot be written: the source is not a readable single-frame
    DICOM image, or the mask does not match its Rows x Columns."""


def _lo(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LO_MAX else text[: LO_MAX - 3] + "..."


def source_reference(path: str | Path):
    """The header fields of a DICOM image that a SEG may copy (see the module docstring).

    Parameters
    ----------
    path : path
        The DICOM file the mask was predicted on.

    Returns
    -------
    pydicom.Dataset
        Only :data:`REFERENCE_FIELDS`, :data:`SPATIAL_FIELDS` (when complete) and
        :data:`EMPTIED_FIELDS` (empty).

    Raises
    ------
    DicomSegError
        If the file is not DICOM, lacks a reference field, or is multi-frame.
    """
    import pydicom
    from pydicom.dataset import Dataset
    from pydicom.errors import InvalidDicomError

    from cxrils.io.dicom import element_words, mask_quoted

    try:
        src = pydicom.dcmread(str(path), stop_before_pixels=True)
    except (InvalidDicomError, OSError, ValueError) as err:
        raise DicomSegError(f"{path}: DICOM SEG output needs a DICOM source image: {mask_quoted(str(err))}") from None
    values: dict[str, object] = {}
    for k in REFERENCE_FIELDS + SPATIAL_FIELDS + ("NumberOfFrames",):
        try:
            values[k] = _checked_value(src, k)
        except (ValueError, TypeError, OverflowError):  # a name typed into it: never quoted (review)
            if k in SPATIAL_FIELDS:
                values[k] = None  # the frame of reference is optional: left out whole, below
                continue
            raise DicomSegError(f"{path}: cannot reference this DICOM in a SEG: malformed {element_words(k)}") from None
    missing = [k for k in REFERENCE_FIELDS if values[k] in (None, "")]
    if missing:
        names = ", ".join(map(element_words, missing))
        raise DicomSegError(f"{path}: cannot reference this DICOM in a SEG: it has no {names}")
    if int(values["NumberOfFrames"] or 1) != 1:
        raise DicomSegError(f"{path}: multi-frame DICOM is not supported for SEG output")
    stub = Dataset()
    for k in REFERENCE_FIELDS:
        setattr(stub, k, values[k])
    if all(values[k] not in (None, "") for k in SPATIAL_FIELDS):
        for k in SPATIAL_FIELDS:
            setattr(stub, k, values[k])
    for k in EMPTIED_FIELDS:
        setattr(stub, k, None)
    return stub


def _checked_value(src, keyword: str) -> object:
    """The value of ``keyword`` in ``src`` (None when absent), its numbers checked as
    numbers (IS, DS, US: "DOE\\JANE" as Pixel Spacing raises ValueError).

    Raises
    ------
    ValueError, TypeError
        If pydicom cannot read the value or a number of it is none.
    """
    if keyword not in src:
        return None
    elem = src[keyword]
    value = elem.value
    if elem.VR in ("IS", "DS", "US", "UL", "SS", "FD", "FL") and value not in (None, ""):
        for v in value if elem.VM > 1 else [value]:
            float(v)
    return value


def make_dicom_seg(reference, mask: np.ndarray, *, segment_label: str, description: str, model_name: str = "cxrils"):
    """Build the SEG of ``mask`` for a source read by :func:`source_reference`.

    Parameters
    ----------
    reference : pydicom.Dataset
        :func:`source_reference` of the DICOM image the mask was predicted on.
    mask : ndarray of bool, shape (Rows, Columns)
        The predicted lesion mask, pixel-aligned with the image (as
        :func:`cxrils.io.load_image` returns it); may be empty (a negative answer).
    segment_label : str
        Segment Label, e.g. the lesion type ("pneumonia"); also picks the Segmented
        Property Type (:data:`PROPERTY_TYPES`, else "Lesion").
    description : str
        Series Description, e.g. the instruction answered (cut to 64 characters).
    model_name : str
        Manufacturer's Model Name and the algorithm's name (cut to 64 characters).

    Returns
    -------
    highdicom.seg.Segmentation

    Raises
    ------
    cxrils.extras.MissingExtraError
        If highdicom (extra ``dicom``) is not installed.
    DicomSegError
        If the mask's shape is not the source's Rows x Columns.
    """
    require_extra("dicom", "DICOM SEG output")
    import highdicom as hd
    from pydicom.sr.codedict import codes

    from cxrils.io.dicom import mask_quoted

    m = np.asarray(mask, dtype=bool)
    if m.shape != (int(reference.Rows), int(reference.Columns)):
        raise DicomSegError(
            f"the mask is {m.shape[0]}x{m.shape[1]} but the image is "
            f"{reference.Rows}x{reference.Columns} (Rows x Columns)"
        )
    label = _lo(segment_label or "lesion")
    property_type = getattr(codes.SCT, PROPERTY_TYPES.get(segment_label, "Lesion"))
    algorithm = hd.AlgorithmIdentificationSequence(
        name=_lo(model_name), version=__version__, family=codes.DCM.ArtificialIntelligence
    )
    segment = hd.seg.SegmentDescription(
        segment_number=1,
        segment_label=label,
        segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
        segmented_property_type=property_type,
        algorithm_type=hd.seg.SegmentAlgorithmTypeValues.AUTOMATIC,
        algorithm_identification=algorithm,
    )
    # highdicom logs, at INFO, each module it copies "from" the reference (which holds only
    # the fields above); cxrils' INFO log would show that chatter to users as if patient
    # data were copied.
    hd_log = logging.getLogger("highdicom")
    level = hd_log.level
    hd_log.setLevel(max(level, logging.WARNING))
    try:
        return hd.seg.Segmentation(
            source_images=[reference],
            pixel_array=m[None].astype(np.uint8),
            segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
            segment_descriptions=[segment],
            series_instance_uid=hd.UID(),
            series_number=1,
            sop_instance_uid=hd.UID(),
            instance_number=1,
            manufacturer="cxrils",
            manufacturer_model_name=_lo(model_name),
            software_versions=__version__,
            device_serial_number="none",
            content_label="CXRILS",
            content_description=label,
            series_description=_lo(description),
            omit_empty_frames=False,
        )
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise DicomSegError(f"highdicom cannot build a SEG for this image: {mask_quoted(str(err))}") from None
    finally:
        hd_log.setLevel(level)


def dicom_seg_bytes(reference, mask: np.ndarray, **kwargs) -> bytes:
    """:func:`make_dicom_seg` as the bytes of a DICOM file (Part 10, with preamble)."""
    import io

    buf = io.BytesIO()
    make_dicom_seg(reference, mask, **kwargs).save_as(buf, enforce_file_format=True)
    return buf.getvalue()


def write_dicom_seg(
    out_path: str | Path,
    source_path: str | Path,
    mask: np.ndarray,
    *,
    segment_label: str,
    description: str,
    model_name: str = "cxrils",
) -> Path:
    """Write ``mask`` as a BINARY DICOM SEG referencing the DICOM at ``source_path``,
    atomically (see :func:`make_dicom_seg` for the parameters).

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    cxrils.extras.MissingExtraError
        If highdicom (extra ``dicom``) is not installed.
    DicomSegError
        If the source cannot be referenced or the mask's shape is not its Rows x Columns
        (the message names the source file).
    """
    require_extra("dicom", "DICOM SEG output")
    reference = source_reference(source_path)
    try:
        data = dicom_seg_bytes(
            reference, mask, segment_label=segment_label, description=description, model_name=model_name
        )
    except DicomSegError as err:
        raise DicomSegError(f"{source_path}: {err}") from None
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, data)
    return out
