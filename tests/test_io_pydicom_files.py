"""The reader over pydicom's own test files (``python -m benchmarks.pydicom_files``): every
refusal is one line in words that names the file, never a raw Python exception text, and
a file that lacks an element the image needs is refused naming that element."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pydicom
import pytest
from PIL import Image

from benchmarks.pydicom_files import run, sample_files
from cxrils.io import ImageLoadError, is_dicom, load_image

#: What a raw exception text looks like: a class name with a colon, or Python's attribute
#: / key wording.
RAW = re.compile(r"\b\w*(Error|Exception|Warning):|object has no attribute|^'\w+'$|Traceback")


def test_every_refusal_of_pydicoms_files_is_one_line_in_words():
    paths = sample_files()
    if not paths:
        pytest.skip("pydicom ships no test files here")
    read, refused = run(paths)
    assert read > 0
    for items in refused.values():
        for path, message in items:
            assert message.startswith(f"{path}: "), message
            assert "\n" not in message, message
            assert not RAW.search(message.split(": ", 1)[1]), message


def _sample(name: str) -> Path:
    path = next((p for p in sample_files() if p.name == name), None)
    if path is None:
        pytest.skip(f"pydicom's {name} is not installed")
    return path


def test_a_missing_or_malformed_image_element_is_named():
    path = _sample("nested_priv_SQ.dcm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = pydicom.dcmread(path)
        assert "Rows" not in ds and "PixelData" in ds  # the file's own defect, read independently
        with pytest.raises(ImageLoadError, match=r"has no Rows \(0028,0010\), which an image needs"):
            load_image(path)
        # badVR.dcm holds Number of Frames '1A' (pydicom's own test of an invalid IS value)
        with pytest.raises(ImageLoadError, match=r"malformed Number of Frames \(0028,0008\): not a whole number$"):
            load_image(_sample("badVR.dcm"))


def test_a_png_named_dcm_is_read_as_a_png(tmp_path):
    arr = (np.arange(48 * 40).reshape(48, 40) % 256).astype(np.uint8)
    path = tmp_path / "upload.dcm"
    Image.fromarray(arr).save(path, format="PNG")
    img = load_image(path)
    assert img.meta.format == "png" and np.array_equal(img.pixels, arr)
    (tmp_path / "junk.dcm").write_bytes(b"not an image at all")
    with pytest.raises(ImageLoadError, match="junk.dcm: not a recognised image"):  # nor a DICOM data set
        load_image(tmp_path / "junk.dcm")


@pytest.mark.parametrize("name", ["ExplVR_LitEndNoMeta.dcm", "ExplVR_BigEndNoMeta.dcm", "rtstruct.dcm"])
def test_pydicoms_files_without_preamble_are_dicom(name):
    path = _sample(name)
    assert path.read_bytes()[128:132] != b"DICM"
    assert is_dicom(path)
