"""Atomic file writes: a reader never sees a half-written file.

Each function writes to a temporary file in the destination folder, flushes and
fsyncs it, renames it over the destination (``os.replace``, atomic on POSIX), then
fsyncs the folder, so that the rename itself survives a power cut.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: A dataset's image id becomes a file name: no path separators, control characters or
#: leading dot (hidden temp files start with one), at most 200 characters.
SAFE_IMAGE_ID = re.compile(r"^[^./\\\x00-\x1f][^/\\\x00-\x1f]{0,199}$")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(dest: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; on success rename it to ``dest``.

    The caller writes the file at the yielded path (e.g. with a library that takes a
    path, such as pyarrow or Pillow). On an exception the temporary file is removed
    and ``dest`` is left untouched.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix or ".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; use the usual mode
        os.replace(tmp_path, dest)
        fsync_folder(dest.parent)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def atomic_write_bytes(dest: str | Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(dest: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``dest`` atomically."""
    atomic_write_bytes(dest, text.encode("utf-8"))


def atomic_write_json(dest: str | Path, obj: Any, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON (sorted keys) to ``dest`` atomically."""
    atomic_write_text(dest, json.dumps(obj, indent=indent, sort_keys=True, default=str) + "\n")


def fsync_folder(folder: str | Path) -> None:
    """Flush a folder's entries (names created, renamed or removed in it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: str | Path) -> None:
    """Flush every file directly in ``folder``, then the folder itself, to disk (before
    the folder is renamed into place as a whole)."""
    folder = Path(folder)
    for path in folder.iterdir():
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    fsync_folder(folder)


def within(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both resolved: links followed)."""
    p, f = Path(path).resolve(), Path(folder).resolve()
    return p == f or f in p.parents


def sha256_file(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
