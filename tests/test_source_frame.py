"""Outputs that reference a source are in the source's frame, for all eight Patient
Orientations (identity, fliplr, flipud, rot180, transpose and its three compositions):
:func:`cxrils.io.base.to_source_frame`, then ``cxrils predict`` (mask.png, prediction.json's
RLE, mask.seg.dcm) and ``cxrils serve`` (mask, mask_png, dicom_seg).

The expectations are independent of the code under test: the stored pixels carry a bright
marker on the patient's left, placed from the meaning of Patient Orientation (PS3.3
C.7.6.1.1.1: the first value is the direction of increasing column, the second of
increasing row); the test model's mask is the bright pixels of what it sees, so the mask
in the source frame must be the bright pixels of the *stored* array, and the image the
model sees must have the marker on the image's right (the patient's left, standard
display).
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid
from typer.testing import CliRunner

from cxrils import templates
from cxrils.io import load_image
from cxrils.io.base import DISPLAY_OPS, ImageMeta, apply_display_ops, to_source_frame
from cxrils.masks import decode_rle
from cxrils.models.base import Prediction, Segmenter

#: The eight Patient Orientations of a frontal image: (columns run towards, rows run towards).
ORIENTATIONS = ["L\\F", "R\\F", "L\\H", "R\\H", "F\\L", "F\\R", "H\\L", "H\\R"]
CR_STORAGE = "1.2.840.10008.5.1.4.1.1.1"
ROWS, COLS = 40, 56  # not square: a transpose changes the shape
BRIGHT = 250


def patient_left_marker(orientation: str) -> np.ndarray:
    """uint8 (ROWS, COLS) stored pixels: a gradient (30..79) so that no two
    orientations look alike, and a bright block on the patient's left half, placed from
    the meaning of the two Patient Orientation values (not from cxrils' code)."""
    col_dir, row_dir = orientation.split("\\")
    arr = (30 + (np.arange(ROWS)[:, None] * 2 + np.arange(COLS)[None, :]) % 50).astype(np.uint8)
    r0, c0 = 8, 6  # off-centre along the head-feet axis too (rows 8..15 or columns 6..13)
    if col_dir in "LR":  # columns run left-right: the patient's left at high columns when they run to L
        cols = slice(COLS - 14, COLS - 6) if col_dir == "L" else slice(6, 14)
        rows = slice(r0, r0 + 8) if row_dir == "F" else slice(ROWS - r0 - 8, ROWS - r0)
    else:  # rows run left-right
        rows = slice(ROWS - 14, ROWS - 6) if row_dir == "L" else slice(6, 14)
        cols = slice(c0, c0 + 8) if col_dir == "F" else slice(COLS - c0 - 8, COLS - c0)
    arr[rows, cols] = BRIGHT
    return arr


def make_dicom(path: Path, arr: np.ndarray, orientation: str | None, *, uids: bool = True) -> Path:
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = CR_STORAGE
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = CR_STORAGE
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    if uids:
        ds.StudyInstanceUID, ds.SeriesInstanceUID = generate_uid(), generate_uid()
    ds.Modality, ds.ViewPosition = "CR", "PA"
    ds.Rows, ds.Columns = arr.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 8
    ds.HighBit, ds.PixelRepresentation = 7, 0
    ds.PixelData = arr.tobytes()
    if orientation:
        ds.PatientOrientation = orientation.split("\\")
    ds.save_as(path, enforce_file_format=True)
    return path


class BrightSegmenter(Segmenter):
    """Mask = the bright pixels of the image it sees (a fixed rule, so outputs are exact)."""

    model_type = "test-bright"

    @classmethod
    def _load(cls, path, config, **kwargs):
        return cls()

    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        return Prediction(image >= BRIGHT - 5, templates.render_answer("basic", "positive"), 0.9)


def _meta(ops: tuple[str, ...]) -> ImageMeta:
    return ImageMeta(
        format="dicom", original_shape=(ROWS, COLS), bits_stored=8, photometric="MONOCHROME2", display_ops=ops
    )


# --------------------------------------------------------------------------- the inversion
@pytest.mark.parametrize(
    "ops",
    [
        (),
        ("fliplr",),
        ("flipud",),
        ("fliplr", "flipud"),
        ("transpose",),
        ("transpose", "fliplr"),
        ("transpose", "flipud"),
        ("transpose", "fliplr", "flipud"),
    ],
)
def test_to_source_frame_inverts_every_composition(ops):
    x = np.arange(ROWS * COLS, dtype=np.int32).reshape(ROWS, COLS)  # every pixel distinct
    shown = apply_display_ops(x, ops)
    assert np.array_equal(to_source_frame(shown, _meta(ops)), x)
    assert np.array_equal(to_source_frame(shown[..., None], _meta(ops))[..., 0], x)  # a channel axis is kept
    expected_shape = (COLS, ROWS) if "transpose" in ops else (ROWS, COLS)
    assert shown.shape == expected_shape
    with pytest.raises(ValueError, match="unknown display op"):
        apply_display_ops(x, ("rot90",))
    assert set(DISPLAY_OPS) == {"transpose", "fliplr", "flipud"}


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_loader_shows_the_patient_left_on_the_right_and_inverts_exactly(tmp_path, orientation):
    stored = patient_left_marker(orientation)
    img = load_image(make_dicom(tmp_path / "o.dcm", stored, orientation))
    x = img.pixels
    bright = x >= BRIGHT - 5
    rr, cc = np.nonzero(bright)
    assert cc.min() >= x.shape[1] // 2, "the patient's left must be on the image's right"
    assert rr.max() < x.shape[0] // 2, "the marker is in the upper half (towards the head)"
    as_stored = load_image(make_dicom(tmp_path / "s.dcm", stored, None)).pixels  # same gray levels, no turning
    assert np.array_equal(to_source_frame(x, img.meta), as_stored)
    assert img.meta.to_dict()["display_ops"] == list(img.meta.display_ops)


# --------------------------------------------------------------------------- predict
@pytest.fixture
def bright_model(monkeypatch, tmp_path):
    monkeypatch.setattr(Segmenter, "from_pretrained", classmethod(lambda cls, *a, **k: BrightSegmenter()))
    return tmp_path / "model"


def _predict(model, image, out, *extra):
    from cxrils.cli import app

    return CliRunner().invoke(
        app,
        [
            "predict",
            str(image),
            "Segment the pneumonia in the left lung.",
            "-o",
            str(out),
            "--model",
            str(model),
            *extra,
        ],
    )


def _seg_pixels(data, src_path):
    hd = pytest.importorskip("highdicom")
    import pydicom

    seg = hd.seg.Segmentation.from_dataset(pydicom.dcmread(io.BytesIO(data)))
    src = pydicom.dcmread(src_path, stop_before_pixels=True)
    assert seg.get_source_image_uids() == [(src.StudyInstanceUID, src.SeriesInstanceUID, src.SOPInstanceUID)]
    assert (seg.Rows, seg.Columns) == (src.Rows, src.Columns)
    got = seg.get_pixels_by_source_instance(source_sop_instance_uids=[src.SOPInstanceUID], segment_numbers=[1])
    return got[0, :, :, 0] > 0


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_predict_writes_every_referencing_output_in_the_source_frame(bright_model, tmp_path, orientation):
    pytest.importorskip("highdicom")
    stored = patient_left_marker(orientation)
    src = make_dicom(tmp_path / "o.dcm", stored, orientation)
    res = _predict(bright_model, src, tmp_path / "out")
    assert res.exit_code == 0, res.output
    expected = stored >= BRIGHT - 5
    out = tmp_path / "out"
    assert np.array_equal(np.asarray(Image.open(out / "mask.png")) > 0, expected)
    info = json.loads((out / "prediction.json").read_text())
    assert info["frame"] == "source" and info["mask"]["size"] == [ROWS, COLS]
    assert np.array_equal(decode_rle(info["mask"]), expected)
    assert info["mask_area"] == int(expected.sum())
    assert np.array_equal(_seg_pixels((out / "mask.seg.dcm").read_bytes(), src), expected)
    # the overlay is for people: display frame, the patient's left on the image's right
    overlay = np.asarray(Image.open(out / "overlay.png"))
    assert overlay.shape[:2] == ((COLS, ROWS) if orientation[0] in "HF" else (ROWS, COLS))
    assert info["overlay_frame"] == "display"


def test_a_standard_and_a_mirrored_copy_give_mirrored_segs(bright_model, tmp_path):
    pytest.importorskip("highdicom")
    standard = patient_left_marker("L\\F")
    a = make_dicom(tmp_path / "a.dcm", standard, "L\\F")
    b = make_dicom(tmp_path / "b.dcm", np.ascontiguousarray(standard[:, ::-1]), "R\\F")  # same anatomy, mirrored
    assert _predict(bright_model, a, tmp_path / "pa").exit_code == 0
    assert _predict(bright_model, b, tmp_path / "pb").exit_code == 0
    seg_a = _seg_pixels((tmp_path / "pa" / "mask.seg.dcm").read_bytes(), a)
    seg_b = _seg_pixels((tmp_path / "pb" / "mask.seg.dcm").read_bytes(), b)
    assert seg_a.any() and np.array_equal(seg_b, seg_a[:, ::-1]) and not np.array_equal(seg_a, seg_b)


def test_predict_without_study_uids_writes_all_but_the_seg(bright_model, tmp_path):
    pytest.importorskip("highdicom")
    stored = patient_left_marker("R\\F")
    src = make_dicom(tmp_path / "o.dcm", stored, "R\\F", uids=False)
    res = _predict(bright_model, src, tmp_path / "out")
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    assert (out / "mask.png").is_file() and (out / "prediction.json").is_file() and (out / "overlay.png").is_file()
    assert not (out / "mask.seg.dcm").exists()
    assert "dicom_seg" not in json.loads((out / "prediction.json").read_text())["files"]
    notes = [line for line in res.output.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, res.output
    assert "Study Instance UID (0020,000D)" in notes[0] and "--no-dicom-seg" in notes[0] and str(src) in notes[0]
    assert "mask.seg.dcm" not in res.output.splitlines()[-1]
    res = _predict(bright_model, src, tmp_path / "out2", "--no-dicom-seg")
    assert res.exit_code == 0 and "note:" not in res.output


# --------------------------------------------------------------------------- serve
@pytest.fixture
def client():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cxrils.serve.app import create_app

    return TestClient(create_app(BrightSegmenter(), model_name="test"))


def _post(client, path: Path):
    return client.post(
        "/v1/segment",
        files={"image": ("x.dcm", path.read_bytes(), "application/dicom")},
        data={"instruction": "Segment the pneumonia in the left lung."},
    )


def _png(b64: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))))


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_serve_answers_in_the_source_frame(client, tmp_path, orientation):
    pytest.importorskip("highdicom")
    stored = patient_left_marker(orientation)
    src = make_dicom(tmp_path / "o.dcm", stored, orientation)
    r = _post(client, src)
    assert r.status_code == 200, r.text
    body = r.json()
    expected = stored >= BRIGHT - 5
    assert body["frame"] == "source" and (body["height"], body["width"]) == (ROWS, COLS)
    assert np.array_equal(decode_rle(body["mask"]), expected) and body["mask_area"] == int(expected.sum())
    assert np.array_equal(_png(body["mask_png"]) > 0, expected)
    assert np.array_equal(_seg_pixels(base64.b64decode(body["dicom_seg"]), src), expected)
    assert body["notes"] == []
    # what the page draws: the image and its mask in the display frame, the patient's left on the right
    shown, shown_mask = _png(body["image_png"]), _png(body["display_mask_png"]) > 0
    assert shown.shape == shown_mask.shape and np.array_equal(shown_mask, shown >= BRIGHT - 5)
    assert np.nonzero(shown_mask)[1].min() >= shown.shape[1] // 2


def test_serve_without_study_uids_says_why_there_is_no_seg(client, tmp_path):
    pytest.importorskip("highdicom")
    r = _post(client, make_dicom(tmp_path / "o.dcm", patient_left_marker("F\\L"), "F\\L", uids=False))
    assert r.status_code == 200
    body = r.json()
    assert body["dicom_seg"] is None and body["mask_area"] > 0
    assert len(body["notes"]) == 1 and "Study Instance UID (0020,000D)" in body["notes"][0]
    assert str(tmp_path) not in body["notes"][0]  # the server's temporary path is not shown


# --------------------------------------------------------------------------- anatomy, ground
class _BrightAnatomy:
    """Anatomy stub: every label is the bright pixels of the image it sees."""

    name = "bright"

    def segment(self, x):
        from cxrils.types import AnatomyMasks
        from cxrils.vocab import ANATOMY_LABELS

        bright = x >= BRIGHT - 5
        return AnatomyMasks({k: bright.copy() for k in ANATOMY_LABELS}, x.shape, "bright", "test")


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_anatomy_writes_label_masks_in_the_source_frame(monkeypatch, tmp_path, orientation):
    """``cxrils anatomy`` wrote its masks in the display frame with nothing to map them
    back (a new user's trial, on a mirrored and a transposed DICOM)."""
    from cxrils.cli import app
    from cxrils.vision.anatomy import base

    monkeypatch.setattr(base, "get_segmenter", lambda name, cfg: _BrightAnatomy())
    stored = patient_left_marker(orientation)
    src = make_dicom(tmp_path / "o.dcm", stored, orientation)
    res = CliRunner().invoke(app, ["anatomy", str(src), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out" / "o"
    assert np.array_equal(np.asarray(Image.open(out / "right_lung.png")) > 0, stored >= BRIGHT - 5)
    info = json.loads((out / "anatomy.json").read_text())
    assert info["frame"] == "source" and info["shape"] == [ROWS, COLS] and info["overlay_frame"] == "display"
    assert info["display_ops"] == list(load_image(src).meta.display_ops)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_a_box_around_the_marker_holds_it_in_the_source_frame(tmp_path, orientation):
    """:func:`cxrils.io.base.box_to_source_frame` (``cxrils ground``'s boxes): the box of
    the bright marker in the picture the model sees covers the marker's stored pixels."""
    from cxrils.io.base import box_to_source_frame
    from cxrils.types import LesionBox

    stored = patient_left_marker(orientation)
    img = load_image(make_dicom(tmp_path / "o.dcm", stored, orientation))
    rr, cc = np.nonzero(img.pixels >= BRIGHT - 5)
    box = (float(cc.min()), float(rr.min()), float(cc.max() + 1), float(rr.max() + 1))
    x0, y0, x1, y1 = box_to_source_frame(box, img.pixels.shape, img.meta)
    assert np.array_equal(LesionBox(x0, y0, x1, y1, 1.0, "x").to_mask(stored.shape), stored >= BRIGHT - 5)


def test_anatomy_and_ground_refuse_an_output_that_is_a_file(tmp_path):
    from cxrils.cli import app

    afile = tmp_path / "afile"
    afile.write_text("hi")
    src = make_dicom(tmp_path / "o.dcm", patient_left_marker("L\\F"), "L\\F")
    for args in (["anatomy", str(src)], ["ground", str(src), "Right lower lobe consolidation."]):
        res = CliRunner().invoke(app, [*args, "-o", str(afile)])
        assert res.exit_code == 2 and "exists and is not a folder" in res.output, res.output
    res = CliRunner().invoke(app, ["ground", str(src), "Opacity.", "-o", str(tmp_path / "g"), "--view", "sideways"])
    assert res.exit_code == 2 and "not a view position" in res.output
    res = CliRunner().invoke(app, ["ground", str(src), str(tmp_path), "-o", str(tmp_path / "g")])
    assert res.exit_code == 2 and "is a folder" in res.output
    # new-user trial: "" was read as the current folder ("is a folder")
    res = CliRunner().invoke(app, ["ground", str(src), "", "-o", str(tmp_path / "g")])
    assert res.exit_code == 2 and "REPORT_TEXT is empty" in res.output and "is a folder" not in res.output
