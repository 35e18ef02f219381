"""Image semantics through the pipeline: a mirrored DICOM is turned to the standard
display before anything is segmented, and an image whose anatomy is not that of a
frontal chest radiograph (a lateral image given as frontal) is excluded with the reason."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np
import pydicom
import pytest
from pipeline_helpers import config

from cxrils.config import Config
from cxrils.dataset import read_exclusions, read_records
from cxrils.instructions import generate_records
from cxrils.io import load_image
from cxrils.masks import decode_rle
from cxrils.pipeline.runner import generate
from cxrils.types import StudyGrounding
from cxrils.vision.anatomy import frontal_plausibility, get_segmenter


def _write_pairs(folder: Path, rows: list[dict]) -> Path:
    path = folder / "pairs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["study_id", "patient_id", "image_path", "view", "report"])
        w.writeheader()
        w.writerows(rows)
    return path


def _mirrored_dicom(src: Path, shown: np.ndarray, out: Path) -> Path:
    """A copy of the real DICOM ``src`` whose pixels are ``shown`` (uint8, standard
    display) stored mirrored, with Patient Orientation R\\F saying so."""
    ds = pydicom.dcmread(src)
    for keyword in ("WindowCenter", "WindowWidth", "RescaleSlope", "RescaleIntercept", "VOILUTSequence"):
        if keyword in ds:
            delattr(ds, keyword)
    ds.file_meta.TransferSyntaxUID = pydicom.uid.ExplicitVRLittleEndian
    ds.Rows, ds.Columns = shown.shape
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.PatientOrientation = ["R", "F"]  # columns run towards the patient's right: mirrored
    ds.PixelData = np.ascontiguousarray(shown[:, ::-1]).tobytes()
    ds.save_as(out, enforce_file_format=True)
    return out


@pytest.fixture(scope="module")
def chest(shared_data: Path) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    """The real RG1 CR chest (PA, Patient Orientation L\\F) at 512 px, with a focal
    opacity added in the lower part of the patient's right lung (the image's left) as
    the builtin anatomy segments it; returns (source, image, right lung, left lung)."""
    src = shared_data / "dicom" / "RG1_UNCR.dcm"
    x = load_image(src).pixels
    h, w = x.shape
    x = cv2.resize(x, (round(w * 512 / max(h, w)), round(h * 512 / max(h, w))), interpolation=cv2.INTER_AREA)
    organs = get_segmenter("builtin", Config()).segment(x)
    right, left = organs["right lung"], organs["left lung"]
    rows, cols = np.nonzero(right)
    assert cols.mean() < np.nonzero(left)[1].mean()  # the source is in the standard orientation
    r0, c0 = rows.min() + 0.85 * (rows.max() - rows.min()), np.median(cols)
    rr, cc = np.mgrid[0 : x.shape[0], 0 : x.shape[1]]
    blob = np.exp(-(((rr - r0) / 30.0) ** 2 + ((cc - c0) / 45.0) ** 2))
    shown = np.clip(x + 90.0 * blob * right, 0, 255).astype(np.uint8)
    return src, shown, right, left


@pytest.mark.needs_data
def test_mirrored_dicom_reaches_the_builtin_anatomy_in_the_standard_display(tmp_path, chest):
    """Real loader and anatomy network: a DICOM stored mirrored (Patient Orientation
    R\\F) is turned back, so the builtin anatomy's patient-right lung is the one on the
    image's left, where the added opacity is (the lesion models' part of the same path is
    tested with fake stages below: a synthetic blob is not a lesion the learned lesion
    map and detector were trained on)."""
    src, shown, right, left = chest
    dcm = _mirrored_dicom(src, shown, tmp_path / "mirrored.dcm")
    loaded = load_image(dcm)
    assert "orient:fliplr(PatientOrientation R\\F -> L\\F)" in loaded.meta.transforms
    assert loaded.meta.patient_orientation == ("R", "F")
    got = loaded.pixels.astype(float).ravel()  # the loader may rescale the levels (VOI), not turn them
    assert np.corrcoef(got, shown.astype(float).ravel())[0, 1] > 0.99
    assert np.corrcoef(got, shown[:, ::-1].astype(float).ravel())[0, 1] < 0.9
    organs = get_segmenter("builtin", Config()).segment(loaded.pixels)
    got_right, got_left = organs["right lung"], organs["left lung"]
    assert np.nonzero(got_right)[1].mean() < np.nonzero(got_left)[1].mean()
    overlap = (got_right & right).sum() / max(1, min(got_right.sum(), right.sum()))
    assert overlap > 0.8 and not (got_right & left).sum() > 0.05 * got_right.sum()


def test_mirrored_dicom_is_turned_before_the_stages_see_it(tmp_path):
    """The same with the fake stages (lungs are image halves, the patient's right on the
    image's left) and the real loader: independent of the builtin models."""
    shown = np.full((48, 48), 60, np.uint8)
    shown[20:30, 6:16] = 220  # opacity in the patient's right lung: the image's left
    shown[0, 0], shown[0, 47] = 0, 255  # the full range: the min-max VOI leaves the levels as they are
    ds_in = tmp_path / "src.dcm"
    from test_io import make_dicom  # a minimal DICOM writer

    make_dicom(ds_in, shown, ViewPosition="PA")
    _mirrored_dicom(ds_in, shown, tmp_path / "mirrored.dcm")
    cfg = config()
    cfg.qc.frontal_plausibility = True
    out = tmp_path / "ds"
    generate(
        _write_pairs(
            tmp_path,
            [
                {
                    "study_id": "s1",
                    "patient_id": "p1",
                    "image_path": "mirrored.dcm",
                    "view": "PA",
                    "report": "Right opacity.",
                }
            ],
        ),
        out,
        cfg,
        stages="fake_stages:FakeStagesRealLoader",
    )
    (rec,) = read_records(out).query("polarity == 'positive'").itertuples()
    mask = decode_rle({"size": list(rec.mask["size"]), "counts": rec.mask["counts"]})
    cols = np.nonzero(mask)[1]
    assert cols.size and cols.max() < 24 and list(rec.locations) == ["right lung"]


@pytest.mark.needs_data
def test_a_lateral_image_given_as_frontal_is_excluded_with_the_reason(tmp_path, shared_data):
    iu = shared_data / "iu_xray"
    with open(iu / "images.csv", newline="") as fh:
        lateral = next(r for r in csv.DictReader(fh) if r["view_visual"] == "lateral")
    rows = [
        {
            "study_id": "lat",
            "patient_id": "p-lat",
            "image_path": str((iu / lateral["file"]).resolve()),
            "view": "",
            "report": "FINDINGS: Small right pleural effusion. Heart size is normal.",
        },  # no view
        {
            "study_id": "front",
            "patient_id": "p-front",
            "image_path": str((iu / "images" / "CXR1900_IM-0584-1001.png").resolve()),
            "view": "",
            "report": "FINDINGS: Small right pleural effusion. Heart size is normal.",
        },
    ]
    out = tmp_path / "ds"
    summary = generate(_write_pairs(tmp_path, rows), out, Config())
    excluded = read_exclusions(out)
    image_id = Path(lateral["file"]).stem
    assert excluded[image_id].startswith("qc_anatomy: ")
    assert excluded[image_id].endswith(": not a frontal chest view, or a failed segmentation")
    assert summary["studies"]["excluded_by_reason"] == {"qc_anatomy": 1}
    records = read_records(out)
    assert image_id not in set(records["image_id"])  # no "effusion in the right lung", no cardiomegaly negative
    assert set(records["image_id"]) == {"CXR1900_IM-0584-1001"}


@pytest.mark.slow
@pytest.mark.needs_data
def test_every_jsrt_human_mask_is_plausible_and_the_iu_lateral_images_are_not(shared_data):
    """The bounds hold the human-annotated frontal anatomy of JSRT (SCR masks, 247 PA
    images) and refuse the builtin segmentation of the four IU lateral images."""
    from PIL import Image

    from cxrils.types import AnatomyMasks

    masks_dir = shared_data / "jsrt_scr" / "masks"
    qc = Config().qc
    for png in sorted((masks_dir / "heart").glob("*.png")):
        organs = {
            k: np.asarray(Image.open(masks_dir / d / png.name)) > 127
            for k, d in (("right lung", "right_lung"), ("left lung", "left_lung"), ("heart", "heart"))
        }
        masks = AnatomyMasks(masks=organs, shape=organs["heart"].shape, backend="jsrt-scr")
        assert frontal_plausibility(masks, qc) is None, png.name
        mirrored = AnatomyMasks(masks={k: v[:, ::-1] for k, v in organs.items()}, shape=masks.shape, backend="m")
        assert "mirrored image or lungs swapped" in frontal_plausibility(mirrored, qc)
    seg = get_segmenter("builtin", Config())
    with open(shared_data / "iu_xray" / "images.csv", newline="") as fh:
        laterals = [r["file"] for r in csv.DictReader(fh) if r["view_visual"] == "lateral"]
    assert len(laterals) == 4
    for name in laterals:
        assert frontal_plausibility(seg.segment(load_image(shared_data / "iu_xray" / name).pixels), qc)


def test_no_cardiomegaly_negative_from_an_implausible_ctr():
    cfg = Config()

    def cardiomegaly_negatives(ctr):
        g = StudyGrounding(study_id="s", image_id="i", shape=(8, 8), findings=[], empty_locations=[], ctr=ctr)
        recs = generate_records(g, split="train", patient_id="p", image_path="images/i.png", cfg=cfg)
        return [r for r in recs if r["lesion_type"] == "cardiomegaly" and r["polarity"] == "negative"]

    assert len(cardiomegaly_negatives(0.42)) == 1  # Appendix D.3: CTR <= 0.45
    assert cardiomegaly_negatives(0.023) == []  # the lateral image's "CTR": below ctr_plausible_min
    assert cardiomegaly_negatives(0.5) == [] and cardiomegaly_negatives(None) == []
    assert json.loads(json.dumps(cfg.qc.ctr_plausible_min)) == 0.30
