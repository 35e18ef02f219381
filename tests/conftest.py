"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo root>/../shared/data``: the public sample data (never committed here).

    Skips the test with a reason when the folder is absent.
    """
    path = (REPO_ROOT / ".." / "shared" / "data").resolve()
    if not path.is_dir():
        pytest.skip(f"../shared/data not found: {path} (public sample data, see its README)")
    return path


#: Launch flags of headless Debian Chromium in the browser tests (no sandbox in containers,
#: no GPU, nothing that reaches the network).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture
def chromium():
    """A headless Debian Chromium driven by Playwright (a ``Browser``; :func:`chromium_executable`)."""
    from playwright import sync_api

    from browser import chromium_executable

    exe = chromium_executable()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def live_server():
    """Start an ASGI app with uvicorn on a free 127.0.0.1 port, in a thread: a function
    ``app -> "http://127.0.0.1:PORT"``; every server it started stops at teardown."""
    import socket
    import threading
    import time

    uvicorn = pytest.importorskip("uvicorn")
    started = []

    def start(app) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        started.append((srv, thread))
        deadline = time.time() + 20
        while not srv.started:
            if time.time() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield start
    for srv, thread in started:
        srv.should_exit = True
        thread.join(timeout=10)
