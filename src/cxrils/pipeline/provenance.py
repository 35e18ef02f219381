"""What a dataset was made with, so that a resumed run never mixes versions.

:func:`run_provenance` records the code (package version, git commit when the package
is a git checkout, SHA-256 of the package's source files), the configuration, the
stage provider, and the SHA-256 of every weight file the stages use (the provider's
``weight_files(cfg)``). The dataset writer stores it in ``provenance.json`` and the
manifest, and refuses to reopen a folder with a different one
(:class:`cxrils.dataset.DatasetWriter`).
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cxrils
from cxrils.config import Config
from cxrils.fsutil import sha256_file

log = logging.getLogger(__name__)

#: Source files whose content is part of the code version (weights are hashed apart).
_SOURCE_SUFFIXES = (".py", ".txt")


def _package_dir() -> Path:
    return Path(cxrils.__file__).resolve().parent


def code_sha256() -> str:
    """SHA-256 over the relative paths and bytes of the package's ``.py`` and ``.txt``
    files (``weights/`` excluded): changes with any edit of the code or its prompts,
    committed or not."""
    root = _package_dir()
    h = hashlib.sha256()
    for path in sorted(
        p
        for p in root.rglob("*")
        if p.suffix in _SOURCE_SUFFIXES
        and p.is_file()
        and "weights" not in p.relative_to(root).parts
        and "__pycache__" not in p.parts
    ):
        h.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


#: The distributions whose versions can change a generated dataset (the pixels the
#: image and vision stages compute, the models they load): recorded in every run's
#: provenance, where another version refuses a resume.
DATASET_DEPENDENCIES: tuple[str, ...] = (
    "numpy",
    "scipy",
    "torch",
    "opencv-python-headless",
    "scikit-image",
    "pillow",
    "pydicom",
    "pycocotools",
    "monai",
    "transformers",
    "peft",
    "diffusers",
    "onnxruntime",
)
#: What ``cxrils version`` prints: :data:`DATASET_DEPENDENCIES` and the libraries that
#: run stages or serve answers without changing a dataset (Ray, FastAPI), so installing
#: the ``serve`` or ``ray`` extra between runs does not block a resume.
KEY_DEPENDENCIES: tuple[str, ...] = (*DATASET_DEPENDENCIES, "ray", "fastapi")


def dependency_versions(dists: tuple[str, ...] = KEY_DEPENDENCIES) -> dict[str, str | None]:
    """``{distribution: version}`` of ``dists`` (default :data:`KEY_DEPENDENCIES`; None
    when not installed)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in dists:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def git_commit() -> str | None:
    """The git commit of the package's source when it is a tracked git checkout, else None."""
    root = _package_dir()
    try:
        tracked = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--error-unmatch", "__init__.py"], capture_output=True, timeout=10
        )
        if tracked.returncode != 0:
            return None
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def weight_hashes(files: Mapping[str, list[str | Path]]) -> dict[str, dict[str, str]]:
    """``{label: {path: sha256}}`` of weight files; a folder stands for every file in it.

    Parameters
    ----------
    files : mapping
        Label (e.g. ``"anatomy (builtin)"``) -> paths of files or folders.

    Returns
    -------
    dict
        Paths as given (folders: ``folder/relative/path``), files shipped in the package
        as ``cxrils/weights/...`` (the same in every install); a missing path maps to
        ``"missing"`` (the stage that needs it fails with its own message).
    """
    package = _package_dir()

    def name(path: Path) -> str:
        try:
            return "cxrils/" + path.resolve().relative_to(package).as_posix()
        except ValueError:
            return str(path)

    out: dict[str, dict[str, str]] = {}
    for label, paths in files.items():
        hashes: dict[str, str] = {}
        for p in (Path(q) for q in paths if str(q)):
            if p.is_dir():
                for f in sorted(q for q in p.rglob("*") if q.is_file()):
                    hashes[name(f)] = sha256_file(f)
            elif p.is_file():
                hashes[name(p)] = sha256_file(p)
            else:
                hashes[str(p)] = "missing"
        out[label] = hashes
    return out


def run_provenance(cfg: Config, stages: str, provider: Any) -> dict[str, Any]:
    """The provenance of a ``cxrils generate`` run (JSON-ready).

    Parameters
    ----------
    cfg : Config
    stages : str
        Stage provider import path.
    provider : object
        The resolved provider; its ``weight_files(cfg)`` (label -> paths), when it has
        one, names the weight files to hash.

    Returns
    -------
    dict
        ``generator``, ``cxrils_version``, ``git_commit`` (None outside a git
        checkout), ``code_sha256``, ``dependencies`` (:func:`dependency_versions` of
        :data:`DATASET_DEPENDENCIES`: a resume under other library versions is refused), ``stages``, ``config``,
        ``weights``.
    """
    listing = getattr(provider, "weight_files", None)
    files = listing(cfg) if callable(listing) else {}
    if files:
        log.info("hashing the weight files of %s", ", ".join(files))
    return {
        "generator": "cxrils generate",
        "cxrils_version": cxrils.__version__,
        "git_commit": git_commit(),
        "code_sha256": code_sha256(),
        "dependencies": dependency_versions(DATASET_DEPENDENCIES),
        "stages": stages,
        "config": cfg.dataset_settings(),
        "weights": weight_hashes(files),
    }
