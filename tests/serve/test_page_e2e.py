"""End-to-end: Debian's headless Chromium, driven by Playwright, against the page on 127.0.0.1.

Uploads a real CXR from ../shared/data, types an instruction, waits for the overlay
and the answer, saves a screenshot; then makes requests fail after that success and
checks that the previous result is gone and the error is in plain words. Skips where
Chromium or Playwright is absent (``.ci/run`` installs both).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("uvicorn")

from cxrils.serve.app import create_app  # noqa: E402

pytestmark = [pytest.mark.browser]

RED_PIXELS = """() => { const c = document.getElementById('view');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > d[i+1] + 60) n++; return n; }"""
LIT_PIXELS = """() => { const c = document.getElementById('view');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) n++; return n; }"""


@pytest.fixture
def server(segmenter, live_server):
    return live_server(create_app(segmenter, model_name="test"))


def _assert_cleared(page) -> None:
    assert page.inner_text("#answer") == "—"
    assert page.inner_text("#answered") == "—"
    assert page.inner_text("#score") == "—" and page.inner_text("#area") == "—"
    assert page.is_disabled("#download")
    assert page.evaluate(LIT_PIXELS) == 0  # the previous image and mask are gone
    assert page.get_attribute("body", "data-state") == "error"


def test_upload_instruction_overlay_answer_then_errors(server, shared_data, tmp_path, chromium):
    image = next(iter(sorted((shared_data / "nih_bbox").rglob("*.png"))), None)
    if image is None:
        pytest.skip("no NIH image under ../shared/data/nih_bbox")
    page = chromium.new_page(viewport={"width": 1200, "height": 800})
    page.goto(server + "/")
    page.set_input_files("#file", str(image))
    page.fill("#instruction", "Is there pneumonia in the right lower lobe?")
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-state=done]", timeout=30_000)
    assert page.inner_text("#answer") == "[SEG]"
    assert page.inner_text("#answered") == "Segment the pneumonia in the right lower lobe."
    assert page.inner_text("#error") == ""
    assert not page.is_disabled("#download")
    assert page.is_visible(".marker.left") and page.inner_text(".marker.left") == "R"
    assert page.evaluate(RED_PIXELS) > 0  # the image with the red overlay
    page.screenshot(path=str(tmp_path / "page.png"))

    # 1. a file that is not an image, after that success: result cleared, error in words
    bad = tmp_path / "notes.png"
    bad.write_text("not an image at all")
    page.set_input_files("#file", str(bad))
    page.fill("#instruction", "Segment the edema.")
    page.click("#run")
    page.wait_for_selector("body[data-state=error]", timeout=30_000)
    error = page.inner_text("#error")
    assert error.startswith("The file could not be read as a chest X-ray image: ")
    assert error.lower().count("could not be read") == 1  # the sentence is said once
    assert "{" not in error and "400" not in error
    _assert_cleared(page)

    # 2. success again, then an instruction the model cannot read: cleared again
    page.set_input_files("#file", str(image))
    page.fill("#instruction", "Segment the effusion in the left lung base.")
    page.click("#run")
    page.wait_for_selector("body[data-state=done]", timeout=30_000)
    assert page.evaluate(LIT_PIXELS) > 0
    page.fill("#instruction", "Segment the pneumonia in the lingula.")
    page.click("#run")
    page.wait_for_selector("body[data-state=error]", timeout=30_000)
    error = page.inner_text("#error")
    assert error.startswith("The request could not be answered.") and "lingula" in error and "accepted" in error.lower()
    _assert_cleared(page)
    assert not page.is_visible(".marker.left")
    page.screenshot(path=str(tmp_path / "page-error.png"))

    # 3. nothing typed: said in words, still nothing shown
    page.fill("#instruction", "")
    page.click("#run")
    assert "instruction" in page.inner_text("#error").lower()
    _assert_cleared(page)

    # 4. a page that does not exist: a page with a way back, not JSON
    page.goto(server + "/no-such-page")
    assert "no page at this address" in page.inner_text("body").lower()
    assert page.locator("a[href='/']").count() == 1
    for shot in ("page.png", "page-error.png"):
        data = (tmp_path / shot).read_bytes()
        assert data[:4] == b"\x89PNG" and len(data) > 10_000
    np.testing.assert_equal(page.url.endswith("/no-such-page"), True)
