"""End-to-end: Debian's headless Chromium, driven by Playwright, against the page on 127.0.0.1.

Uploads a real CXR from ../shared/data, types an instruction, waits for the overlay
and the answer, and saves a screenshot. Skips where Chromium or Playwright is absent
(``.ci/run`` installs both).
"""

from __future__ import annotations

import shutil
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")

from cxrils.serve.app import create_app  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(segmenter):
    port = _free_port()
    config = uvicorn.Config(create_app(segmenter, model_name="test"), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started:
        if time.time() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def test_upload_instruction_overlay_answer(server, shared_data, tmp_path):
    from playwright.sync_api import sync_playwright

    image = next(iter(sorted((shared_data / "nih_bbox").rglob("*.png"))), None)
    if image is None:
        pytest.skip("no NIH image under ../shared/data/nih_bbox")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(server + "/")
        page.set_input_files("#file", str(image))
        page.fill("#instruction", "Segment the pneumonia in the right lung.")
        page.keyboard.press("Enter")
        page.wait_for_selector("body[data-state=done]", timeout=30_000)
        assert page.inner_text("#answer") == "[SEG]"
        assert page.inner_text("#error") == ""
        assert not page.is_disabled("#download")
        # The canvas shows the image with the red overlay somewhere.
        red = page.evaluate("""() => { const c = document.getElementById('view');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i] > d[i+1] + 60) n++; return n; }""")
        assert red > 0
        page.screenshot(path=str(tmp_path / "page.png"))
        # An API error is shown in words.
        page.fill("#instruction", "")
        page.click("#run")
        assert "instruction" in page.inner_text("#error").lower()
        browser.close()
    assert (tmp_path / "page.png").stat().st_size > 10_000
    np.testing.assert_equal((tmp_path / "page.png").read_bytes()[:4], b"\x89PNG")
