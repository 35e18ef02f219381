"""Importing the paper's upstream packages in the ``test_upstream_*`` tests.

The packages come with the ``upstream`` extra and ``scripts/install.sh``'s ``--no-deps``
step (hi-ml-multimodal 0.2.2, cxas 0.0.20, torch-geometric; see pyproject.toml). Two of
them declare torchvision, which cxrils never installs, and import it from their
package ``__init__`` although the modules the adapters use do not need it
(``health_multimodal.text.model``), or need it only for a backbone the test restates
(``cxas.models.UNet``). :func:`bare_packages` imports such modules from the installed
files without running the ``__init__`` of the packages above them.

A missing package skips its test with the command that installs it, except under
``CXRILS_REQUIRE_UPSTREAM=1`` (set by ``.ci/run``), where it fails: CI must run them.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

INSTALL = "bash scripts/install.sh .venv upstream (the upstream extra, then hi-ml-multimodal and cxas with --no-deps)"


def require(module: str, dist: str) -> Path:
    """The folder of the installed top-level package ``module`` (of the distribution
    ``dist``); skips the test, or fails it under ``CXRILS_REQUIRE_UPSTREAM=1``, when it is
    not installed."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        message = f"{dist} not installed: {INSTALL}"
        if os.environ.get("CXRILS_REQUIRE_UPSTREAM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return Path(list(spec.submodule_search_locations)[0])


@contextlib.contextmanager
def bare_packages(*packages: str, extra: dict[str, types.ModuleType] | None = None) -> Iterator[None]:
    """Register ``packages`` (dotted names of installed packages) as empty package
    modules whose ``__path__`` is their real folder, so their submodules import from
    the installed files while their own ``__init__`` never runs; ``extra`` adds other
    modules (restatements) for the duration. Every module imported under those names
    is removed afterwards and what was there before is restored."""
    extra = extra or {}
    roots = {p.split(".")[0] for p in packages} | {n.split(".")[0] for n in extra}
    mine = lambda name: name.split(".")[0] in roots  # noqa: E731
    saved = {k: v for k, v in sys.modules.items() if mine(k)}
    for k in saved:
        del sys.modules[k]
    try:
        for name in packages:
            top = name.split(".")[0]
            root = Path(list(importlib.util.find_spec(top).submodule_search_locations)[0])
            folder = root.joinpath(*name.split(".")[1:])
            module = types.ModuleType(name)
            module.__path__ = [str(folder)]
            module.__spec__ = ModuleSpec(name, None, is_package=True)
            module.__spec__.submodule_search_locations = [str(folder)]
            sys.modules[name] = module
        sys.modules.update(extra)
        importlib.invalidate_caches()
        yield
    finally:
        for k in [k for k in sys.modules if mine(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
