"""REST API of ``cxrils serve`` with good and bad inputs (httpx through TestClient)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cxrils.masks import decode_rle  # noqa: E402
from cxrils.serve.app import ServiceConfig, create_app  # noqa: E402


def _png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def image() -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.random((64, 48)) * 255).astype(np.uint8)


@pytest.fixture
def client(segmenter):
    return TestClient(create_app(segmenter, model_name="test", config=ServiceConfig(max_upload_bytes=200_000)))


def test_health_info_docs(client):
    assert client.get("/v1/health").json() == {"status": "ok"}
    info = client.get("/v1/info").json()
    assert info["lesion_types"][0] == "cardiomegaly" and "effusion" in info["examples"]
    assert "left lung base" in info["locations"] and "left lower lobe" in info["locations"]
    assert client.get("/docs").status_code == 200
    page = client.get("/")
    assert page.status_code == 200 and "drop" in page.text
    # an inline icon: the browser asks for no /favicon.ico, a 404 in its console (second new-user trial)
    assert '<link rel="icon" href="data:,">' in page.text


def test_segment_png_returns_exact_mask(client, image):
    r = client.post(
        "/v1/segment",
        files={"image": ("x.png", _png(image), "image/png")},
        data={"instruction": "Segment the effusion in the left lung base."},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    expected = image >= np.percentile(image, 95)
    assert np.array_equal(decode_rle(body["mask"]), expected)
    assert body["mask_area"] == int(expected.sum())
    assert (body["width"], body["height"]) == (48, 64)
    assert body["answer"] == "[SEG]"
    assert body["presence_threshold"] is None  # this segmenter has no presence threshold
    assert body["instruction_answered"] == "Segment the effusion in the left lung base."
    assert body["dicom_seg"] is None  # a PNG has no DICOM to reference
    png = np.array(Image.open(io.BytesIO(base64.b64decode(body["mask_png"]))))
    assert np.array_equal(png > 127, expected)
    assert np.array(Image.open(io.BytesIO(base64.b64decode(body["image_png"])))).shape == (64, 48)
    assert np.array(Image.open(io.BytesIO(base64.b64decode(body["overlay_png"])))).shape == (64, 48, 3)


@pytest.mark.slow
def test_segment_real_dicom(segmenter, client, shared_data):
    path = shared_data / "dicom" / "RG1_UNCR.dcm"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    files = {"image": ("x.dcm", path.read_bytes(), "application/dicom")}
    data = {"instruction": "Segment the pneumonia in the right lung."}
    over = client.post("/v1/segment", files=files, data=data)
    assert over.status_code == 413  # over the 200 kB test limit, said in MB (not rounded down to 0)
    # 200000 / 2**20; the file is over the limit plus the form's 1 MB, so the body check answers
    assert (
        over.json()["detail"] == "the request is larger than the limit of 0.191 MB for the image plus 1 MB for the form"
    )
    big = TestClient(create_app(segmenter))
    r = big.post("/v1/segment", files=files, data=data)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mask"]["size"] == [body["height"], body["width"]] and body["height"] > 100
    text = r.text.lower()
    assert "patient" not in text and "institution" not in text  # no header fields in the response
    # the mask as DICOM SEG, referencing the uploaded image, pixel-aligned
    hd = pytest.importorskip("highdicom")
    import pydicom

    seg = hd.seg.Segmentation.from_dataset(pydicom.dcmread(io.BytesIO(base64.b64decode(body["dicom_seg"]))))
    src = pydicom.dcmread(path, stop_before_pixels=True)
    assert seg.get_source_image_uids() == [(src.StudyInstanceUID, src.SeriesInstanceUID, src.SOPInstanceUID)]
    got = seg.get_pixels_by_source_instance(source_sop_instance_uids=[src.SOPInstanceUID], segment_numbers=[1])
    assert np.array_equal(got[0, :, :, 0] > 0, decode_rle(body["mask"]))
    assert str(seg.PatientName) == "" and str(seg.PatientID) == ""


@pytest.mark.parametrize(
    "files,data,status,words",
    [
        (
            {"image": ("x.txt", b"hello, not an image", "text/plain")},
            {"instruction": "Segment the edema."},
            400,
            "could not be read",
        ),
        (
            {"image": ("x.dcm", b"\0" * 128 + b"DICM" + b"\x02\x00", "application/dicom")},
            {"instruction": "Segment the edema."},
            400,
            "could not be read",
        ),
        (
            {"image": ("x.dcm", bytes(range(256)) * 8, "application/dicom")},
            {"instruction": "Segment the edema."},
            400,
            "not a recognised image",
        ),
        ({"image": ("x.png", b"", "image/png")}, {"instruction": "Segment the edema."}, 400, "empty"),
        (
            {"image": ("x.png", b"\x89PNG" + b"\0" * 300_000, "image/png")},
            {"instruction": "Segment the edema."},
            413,
            "limit",
        ),
    ],
)
def test_bad_uploads(client, files, data, status, words):
    r = client.post("/v1/segment", files=files, data=data)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]


def test_an_image_too_small_to_be_a_radiograph_is_refused(client):
    files = {"image": ("x.png", _png(np.full((1, 1), 128, np.uint8)), "image/png")}
    r = client.post("/v1/segment", files=files, data={"instruction": "Segment the edema."})
    assert r.status_code == 422 and r.json()["detail"] == (
        "the image is 1 x 1 pixels; a chest X-ray needs at least 32 on each side"
    )


def test_a_second_image_or_instruction_part_is_refused_not_dropped(client, image):
    png = _png(image)
    two_images = [("image", ("a.png", png, "image/png")), ("image", ("b.png", png, "image/png"))]
    r = client.post("/v1/segment", files=two_images, data={"instruction": "Segment the edema."})
    assert r.status_code == 422 and r.json()["detail"] == "send one 'image' part per request; this request has 2"
    one = {"image": ("x.png", png, "image/png")}
    r = client.post("/v1/segment", files=one, data={"instruction": ["Segment the edema.", "Segment the opacity."]})
    assert r.status_code == 422 and "one 'instruction' part" in r.json()["detail"]
    r = client.post("/v1/segment", files=one, data={"instruction": "Segment the edema."})
    assert r.status_code == 200, r.text


def test_the_openapi_page_shows_one_image_and_one_instruction(client):
    body = client.get("/openapi.json").json()["paths"]["/v1/segment"]["post"]["requestBody"]
    ref = body["content"]["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[1]
    props = client.get("/openapi.json").json()["components"]["schemas"][ref]["properties"]
    assert props["instruction"]["type"] == "string"
    assert props["image"]["type"] == "string"  # one file, not an array of them


def test_bad_instructions(client, image):
    files = {"image": ("x.png", _png(image), "image/png")}
    r = client.post("/v1/segment", files=files, data={"instruction": "   "})
    assert r.status_code == 422 and "empty" in r.json()["detail"]
    r = client.post("/v1/segment", files=files, data={"instruction": "x" * 501})
    assert r.status_code == 422 and "limit" in r.json()["detail"]
    r = client.post("/v1/segment", files=files)
    assert r.status_code == 422 and r.json()["detail"].startswith("no instruction was given")
    # the model cannot read it (names no lesion type): 422 with the model's reason, not a 500
    r = client.post("/v1/segment", files=files, data={"instruction": "Segment the lungs."})
    assert r.status_code == 422 and "lungs" in r.json()["detail"]
    # over Starlette's 1 MB text-part limit: the instruction's own limit, not the parser's words
    r = client.post("/v1/segment", files=files, data={"instruction": "x" * 1_200_000})
    assert r.status_code == 422 and r.json()["detail"] == (
        "a text form field is larger than 1 MB: the instruction's limit is 500 characters, and the image goes "
        "in a file part"
    )


def test_an_image_sent_as_text_is_refused_in_plain_words(client):
    r = client.post("/v1/segment", data={"image": "not a file", "instruction": "Segment the edema."})
    assert r.status_code == 422
    assert r.json()["detail"] == "the form field 'image' must be a file part (curl: -F image=@FILE), not text"


def test_a_request_over_the_upload_limit_names_no_single_field(image, segmenter):
    small = TestClient(create_app(segmenter, config=ServiceConfig(max_upload_bytes=1000)))
    r = small.post(
        "/v1/segment", files={"image": ("x.png", _png(image), "image/png")}, data={"instruction": "y" * 1_100_000}
    )
    assert r.status_code == 413
    assert (
        r.json()["detail"] == "the request is larger than the limit of 0.000954 MB for the image plus 1 MB for the form"
    )


def test_upload_not_kept(client, image, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    r = client.post(
        "/v1/segment",
        files={"image": ("x.png", _png(image), "image/png")},
        data={"instruction": "Segment the effusion in the left lung base."},
    )
    assert r.status_code == 200
    assert list(tmp_path.iterdir()) == []


def test_concurrent_requests_do_not_mix(client):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(1)
    images = [(rng.random((32 + i, 40)) * 255).astype(np.uint8) for i in range(8)]

    def call(x):
        r = client.post(
            "/v1/segment",
            files={"image": ("x.png", _png(x), "image/png")},
            data={"instruction": "Segment the opacity in the right lung."},
        )
        return x, r.json()

    with ThreadPoolExecutor(4) as pool:
        for x, body in pool.map(call, images):
            assert np.array_equal(decode_rle(body["mask"]), x >= np.percentile(x, 95))


def test_missing_fields_and_pages_answer_in_plain_words(client, image):
    r = client.post("/v1/segment", data={"instruction": "Segment the edema."})
    assert r.status_code == 422
    assert r.json() == {"detail": "no image was uploaded: choose a PNG, JPEG or DICOM file of a chest X-ray"}
    r = client.post("/v1/segment")
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "no image" in detail and "no instruction" in detail
    # an image sent as a text part: test_an_image_sent_as_text_is_refused_in_plain_words
    page = client.get("/no/such/page", headers={"accept": "text/html"})
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert '<a href="/">' in page.text and "detail" not in page.text
    api = client.get("/v1/nothing")
    assert api.status_code == 404 and "POST /v1/segment" in api.json()["detail"]
    assert client.get("/v1/segment").json()["detail"].startswith("GET is not allowed")


def test_the_response_says_which_instruction_was_answered(client, image):
    files = {"image": ("x.png", _png(image), "image/png")}
    r = client.post("/v1/segment", files=files, data={"instruction": "Is there pneumonia in the RLL?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["instruction"] == "Is there pneumonia in the RLL?"
    assert body["instruction_answered"] == "Segment the pneumonia in the right lower lobe."
    r = client.post("/v1/segment", files=files, data={"instruction": "Segment the pneumonia in the lingula."})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert "lingula" in detail and "accepted" in detail.lower() and "left lower lobe" in detail


def test_info_says_whether_uploads_are_kept(segmenter, tmp_path):
    """The page's privacy line follows /v1/info's keeps_uploads (app.js), which follows --keep-uploads."""
    assert TestClient(create_app(segmenter)).get("/v1/info").json()["keeps_uploads"] is False
    kept = TestClient(create_app(segmenter, config=ServiceConfig(keep_uploads_dir=tmp_path / "kept")))
    assert kept.get("/v1/info").json()["keeps_uploads"] is True
    script = (Path(__file__).resolve().parents[2] / "src/cxrils/serve/static/app.js").read_text()
    assert "info.keeps_uploads" in script and "--keep-uploads" in script


def test_keep_uploads_in_a_file_is_refused_at_start(segmenter, tmp_path):
    """A kept-uploads path that is a file used to start the service and fail every
    request with a 500 (a new user's trial)."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match="afile: cannot keep uploads there"):
        create_app(segmenter, config=ServiceConfig(keep_uploads_dir=afile))


def test_page_error_says_its_first_sentence_once():
    """app.js's plainError, run by Node: a server detail that repeats the status sentence
    is shown once; another detail follows the sentence."""
    import re
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    script = (Path(__file__).resolve().parents[2] / "src/cxrils/serve/static/app.js").read_text()
    words = re.search(r"const STATUS_WORDS = \{.*?\};", script, re.S).group(0)
    func = re.search(r"function plainError\(status, detail\) \{.*?\n\}", script, re.S).group(0)
    probe = (
        f"{words}\n{func}\n"
        "console.log(plainError(400, 'the file could not be read as a chest X-ray image: not DICOM'));\n"
        "console.log(plainError(413, 'the image is larger than the limit of 50 MB'));\n"
    )
    out = subprocess.run([node, "-e", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    first, second = out.strip().splitlines()
    assert first == "The file could not be read as a chest X-ray image: not DICOM"
    assert second == "The file is too large. The image is larger than the limit of 50 MB"
