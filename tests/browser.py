"""Where the browser tests find their browser (a helper module, not a conftest, so that
every test folder imports the same one)."""

from __future__ import annotations

import pytest


def chromium_executable() -> str:
    """The path of Debian's ``chromium``, with Playwright importable; skips with a reason
    where either is missing, or fails there when ``CXRILS_REQUIRE_BROWSER=1`` (``.ci/run``
    installs both and sets it, so CI never skips the browser tests)."""
    import importlib.util
    import os
    import shutil

    missing = pytest.fail if os.environ.get("CXRILS_REQUIRE_BROWSER") == "1" else pytest.skip
    if importlib.util.find_spec("playwright") is None:
        missing("playwright not installed (the dev extra)")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        missing("Debian chromium not installed (apt-get install -y chromium)")
    return exe
