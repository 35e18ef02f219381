"""Optional dependencies ("extras") and the one-line message when one is missing.

The default install (``bash scripts/install.sh .venv``) brings the core
dependencies plus the extras of :data:`DEFAULT_EXTRAS`; every other feature names its
extra. A feature whose extra is not installed fails with :class:`MissingExtraError`,
whose message is one line naming the feature, the extra and the exact command that
installs it into the running Python environment, e.g.::

    --runner ray needs the 'ray' extra (ray is not installed); install it with: /path/.venv/bin/python -m pip install 'cxrils[ray]'

The extras themselves are declared in ``pyproject.toml`` ([project.optional-dependencies]).
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from collections.abc import Iterable

#: Extras that ``scripts/install.sh`` installs when no extras are given: the web page
#: and REST API (``serve``) and compressed DICOM input plus DICOM SEG output (``dicom``).
DEFAULT_EXTRAS: tuple[str, ...] = ("serve", "dicom")


class MissingExtraError(ImportError):
    """Raised when a feature's optional dependency is not installed.

    ``str(err)`` is one line: feature, extra, missing module, install command.
    Attributes: ``feature``, ``extra``, ``module``.
    """

    def __init__(self, feature: str, extra: str, module: str) -> None:
        self.feature, self.extra, self.module = feature, extra, module
        super().__init__(
            f"{feature} needs the '{extra}' extra ({module} is not installed); "
            f"install it with: {install_command(extra)}"
        )


def install_command(extra: str) -> str:
    """The command that installs ``extra`` into the running environment.

    ``<this python> -m pip install 'cxrils[extra]'``: pip keeps the installed cxrils
    (editable or not) and adds the extra's dependencies from its metadata, so the
    command is right for a source checkout too, whether or not the venv is activated.
    """
    return f"{shlex.quote(sys.executable)} -m pip install 'cxrils[{extra}]'"


def missing_module(modules: Iterable[str]) -> str | None:
    """The first of ``modules`` (top-level import names) that cannot be imported, or None."""
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a parent package missing, or a broken stub in sys.modules
            return name
    return None


def require(extra: str, modules: Iterable[str], feature: str) -> None:
    """Check that a feature's modules are importable.

    Parameters
    ----------
    extra : str
        Name of the extra in ``pyproject.toml`` (e.g. ``"serve"``).
    modules : iterable of str
        Import names the feature needs (e.g. ``("fastapi", "uvicorn")``).
    feature : str
        What the user asked for, as they typed it (e.g. ``"cxrils serve"``).

    Raises
    ------
    MissingExtraError
        Naming the first missing module.
    """
    missing = missing_module(modules)
    if missing is not None:
        raise MissingExtraError(feature, extra, missing)


#: Import names each extra of ``pyproject.toml`` provides (what :func:`require` checks).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "uvicorn", "multipart"),
    "dicom": ("highdicom", "pylibjpeg"),
    "ray": ("ray",),
    "models": ("transformers", "peft", "accelerate"),
    "radedit": ("diffusers", "transformers"),
    "detect": ("onnxruntime",),
    "llm": ("httpx",),
    "hf": ("datasets",),
}


def require_extra(extra: str, feature: str) -> None:
    """:func:`require` with the modules of :data:`EXTRA_MODULES` ``[extra]``.

    Raises
    ------
    MissingExtraError
    KeyError
        On an extra not in :data:`EXTRA_MODULES`.
    """
    require(extra, EXTRA_MODULES[extra], feature)
