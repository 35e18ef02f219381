"""DICOM SEG output (cxrils.models.dicom_seg, ``cxrils predict``): a SEG written for a real
DICOM of ../shared/data/dicom is read back by highdicom and pydicom with the right
referenced SOP instance and frame geometry, the mask round-trips, and no other header
field of the source reaches it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

pytest.importorskip("highdicom")
import highdicom as hd  # noqa: E402
import pydicom  # noqa: E402

from cxrils.cli import app  # noqa: E402
from cxrils.models.dicom_seg import REFERENCE_FIELDS, DicomSegError, write_dicom_seg  # noqa: E402

#: Header fields of the sample files that must never reach a SEG (personal, institutional,
#: acquisition details): a test reads their values from the source and looks for them.
PRIVATE_FIELDS = (
    "PatientName",
    "PatientID",
    "PatientBirthDate",
    "OtherPatientIDs",
    "InstitutionName",
    "InstitutionalDepartmentName",
    "ReferringPhysicianName",
    "StationName",
    "AccessionNumber",
    "StudyID",
    "StudyDate",
    "StudyTime",
    "SeriesDate",
    "ContentDate",
    "StudyDescription",
    "Manufacturer",
    "ManufacturerModelName",
    "DeviceSerialNumber",
    "SoftwareVersions",
    "ImageComments",
    "InstanceCreatorUID",
)


def _dicoms(shared_data):
    paths = [shared_data / "dicom" / "RG1_UNCR.dcm", *sorted((shared_data / "dicom").glob("siim_*.dcm"))]
    paths = [p for p in paths if p.is_file()]
    if not paths:
        pytest.skip("no DICOM files under ../shared/data/dicom")
    return paths


def _lesion(shape):
    h, w = shape
    rr, cc = np.mgrid[:h, :w]
    return ((rr - 0.6 * h) / (0.12 * h)) ** 2 + ((cc - 0.3 * w) / (0.08 * w)) ** 2 <= 1


def _all_values(ds) -> list[str]:
    out = []
    for el in ds.iterall():
        if el.VR != "SQ" and el.tag != 0x7FE00010:
            out.append(str(el.value))
    return out


@pytest.mark.parametrize("empty", [False, True])
def test_seg_references_the_source_and_the_mask_round_trips(shared_data, tmp_path, empty):
    for src_path in _dicoms(shared_data):
        src = pydicom.dcmread(src_path, stop_before_pixels=True)
        mask = np.zeros((src.Rows, src.Columns), bool) if empty else _lesion((src.Rows, src.Columns))
        out = write_dicom_seg(
            tmp_path / f"{src_path.stem}.seg.dcm",
            src_path,
            mask,
            segment_label="pneumonia",
            description="cxrils: Segment the pneumonia in the left lower lobe.",
        )
        seg = hd.seg.segread(out)
        assert seg.SOPClassUID == "1.2.840.10008.5.1.4.1.1.66.4"  # Segmentation Storage
        assert seg.Modality == "SEG" and seg.SegmentationType == "BINARY"
        assert seg.StudyInstanceUID == src.StudyInstanceUID  # in the source's study
        assert seg.SeriesInstanceUID != src.SeriesInstanceUID and seg.SOPInstanceUID != src.SOPInstanceUID
        # the referenced instance, through highdicom and through the raw sequences
        assert seg.get_source_image_uids() == [(src.StudyInstanceUID, src.SeriesInstanceUID, src.SOPInstanceUID)]
        ref_series = seg.ReferencedSeriesSequence[0]
        assert ref_series.SeriesInstanceUID == src.SeriesInstanceUID
        ref = ref_series.ReferencedInstanceSequence[0]
        assert (ref.ReferencedSOPClassUID, ref.ReferencedSOPInstanceUID) == (src.SOPClassUID, src.SOPInstanceUID)
        frame = seg.PerFrameFunctionalGroupsSequence[0]
        source_image = frame.DerivationImageSequence[0].SourceImageSequence[0]
        assert source_image.ReferencedSOPInstanceUID == src.SOPInstanceUID
        # frame geometry: one frame, pixel-aligned with the source (no frame of reference in CR/SC)
        assert (int(seg.NumberOfFrames), seg.Rows, seg.Columns) == (1, src.Rows, src.Columns)
        assert "FrameOfReferenceUID" not in seg and "FrameOfReferenceUID" not in src
        got = seg.get_pixels_by_source_instance(source_sop_instance_uids=[src.SOPInstanceUID], segment_numbers=[1])
        assert got.shape == (1, src.Rows, src.Columns, 1)
        assert np.array_equal(got[0, :, :, 0] > 0, mask)
        assert seg.SegmentSequence[0].SegmentLabel == "pneumonia"
        assert "left lower lobe" in seg.SeriesDescription
        # nothing else of the source header: personal fields empty, private values absent
        for field in ("PatientName", "PatientID", "PatientBirthDate", "PatientSex", "AccessionNumber", "StudyDate"):
            assert str(seg.get(field, "")) == ""
        values = set(_all_values(pydicom.dcmread(out)))
        for field in PRIVATE_FIELDS:
            value = str(src.get(field, "") or "")
            if value:
                assert value not in values, f"{field} of the source reached the SEG"
        assert set(REFERENCE_FIELDS) == {
            "SOPClassUID",
            "SOPInstanceUID",
            "StudyInstanceUID",
            "SeriesInstanceUID",
            "Rows",
            "Columns",
        }


def test_bad_sources_and_shapes_are_refused(shared_data, tmp_path):
    src_path = _dicoms(shared_data)[0]
    src = pydicom.dcmread(src_path, stop_before_pixels=True)
    with pytest.raises(DicomSegError, match="mask is 10x10"):
        write_dicom_seg(tmp_path / "a.dcm", src_path, np.zeros((10, 10), bool), segment_label="x", description="d")
    png = tmp_path / "x.png"
    Image.fromarray(np.zeros((src.Rows, src.Columns), np.uint8)).save(png)
    with pytest.raises(DicomSegError, match="needs a DICOM source"):
        write_dicom_seg(
            tmp_path / "b.dcm", png, np.zeros((src.Rows, src.Columns), bool), segment_label="x", description="d"
        )
    assert not (tmp_path / "a.dcm").exists() and not (tmp_path / "b.dcm").exists()


@pytest.mark.slow
def test_predict_a_dicom_writes_png_rle_and_seg(shared_data, tmp_path):
    src_path = _dicoms(shared_data)[0]
    out = tmp_path / "pred"
    res = CliRunner().invoke(
        app, ["predict", str(src_path), "Segment the pneumonia in the left lower lobe.", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "instruction answered: Segment the pneumonia in the left lower lobe." in res.output
    info = json.loads((out / "prediction.json").read_text())
    assert info["files"]["dicom_seg"] == "mask.seg.dcm"
    assert info["instruction_answered"] == "Segment the pneumonia in the left lower lobe."
    png = np.asarray(Image.open(out / "mask.png")) > 0
    seg = hd.seg.segread(out / "mask.seg.dcm")
    src = pydicom.dcmread(src_path, stop_before_pixels=True)
    got = seg.get_pixels_by_source_instance(source_sop_instance_uids=[src.SOPInstanceUID], segment_numbers=[1])
    assert np.array_equal(got[0, :, :, 0] > 0, png)
    # a SEG needs a DICOM source
    png_in = tmp_path / "x.png"
    Image.fromarray(np.full((64, 64), 90, np.uint8)).save(png_in)
    res = CliRunner().invoke(app, ["predict", str(png_in), "Segment the edema.", "--dicom-seg", "-o", str(out)])
    assert res.exit_code == 2 and "needs a DICOM image" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_seg_without_highdicom_says_which_extra(shared_data, tmp_path, monkeypatch):
    import sys

    src_path = _dicoms(shared_data)[0]
    monkeypatch.setitem(sys.modules, "highdicom", None)  # as if not installed
    res = CliRunner().invoke(
        app, ["predict", str(src_path), "Segment the edema.", "--dicom-seg", "-o", str(tmp_path / "p")]
    )
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "'dicom' extra" in lines[0] and "pip install 'cxrils[dicom]'" in lines[0]
    res = CliRunner().invoke(app, ["predict", str(src_path), "Segment the edema.", "-o", str(tmp_path / "q")])
    assert res.exit_code == 0, res.output  # automatic SEG: skipped with a note, PNG and RLE written
    assert "note:" in res.output and (tmp_path / "q" / "mask.png").is_file()
    assert not (tmp_path / "q" / "mask.seg.dcm").exists()


def test_a_seg_is_refused_as_an_x_ray(shared_data, tmp_path):
    """A SEG has 1-bit pixel data and was read as a radiograph (a new user's trial:
    predict answered on it, with a raw Python error in its notes)."""
    from cxrils.io import ImageLoadError, load_image

    src_path = _dicoms(shared_data)[0]
    src = pydicom.dcmread(src_path, stop_before_pixels=True)
    out = write_dicom_seg(
        tmp_path / "m.seg.dcm", src_path, _lesion((src.Rows, src.Columns)), segment_label="opacity", description="d"
    )
    with pytest.raises(ImageLoadError, match="a DICOM Segmentation"):
        load_image(out)


def _raw(ds, tag: int, vr: str, text: str) -> None:
    """Store ``text`` in ``ds`` as element ``tag`` unvalidated (a name typed into it)."""
    raw = text.encode() + b" " * (len(text) % 2)
    ds[tag] = pydicom.dataelem.RawDataElement(pydicom.tag.Tag(tag), vr, len(raw), raw, 0, False, True)


def test_a_name_in_a_malformed_element_never_reaches_the_seg_error(shared_data, tmp_path):
    # review (stop 62): "DOE\JANE" as Pixel Spacing raised a bare ValueError quoting it
    # (a traceback in the server log); as Number of Frames, the same
    src_path = _dicoms(shared_data)[0]
    src = pydicom.dcmread(src_path)
    mask = np.zeros((src.Rows, src.Columns), bool)
    spatial = src.copy()
    for k, v in (("FrameOfReferenceUID", "1.2.3"), ("SliceThickness", "1"), ("ImagePositionPatient", [0, 0, 0])):
        setattr(spatial, k, v)
    spatial.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
    _raw(spatial, 0x00280030, "DS", "DOE\\JANE")
    spatial.save_as(tmp_path / "spacing.dcm")
    out = write_dicom_seg(tmp_path / "a.dcm", tmp_path / "spacing.dcm", mask, segment_label="x", description="d")
    seg = pydicom.dcmread(out)
    assert "FrameOfReferenceUID" not in seg or seg.FrameOfReferenceUID != "1.2.3"  # left out whole
    frames = src.copy()
    _raw(frames, 0x00280008, "IS", "DOE JANE")
    frames.save_as(tmp_path / "frames.dcm")
    with pytest.raises(DicomSegError) as err:
        write_dicom_seg(tmp_path / "b.dcm", tmp_path / "frames.dcm", mask, segment_label="x", description="d")
    assert "malformed Number of Frames (0028,0008)" in str(err.value) and "DOE" not in str(err.value)
