"""Helpers of the corpus reader tests: the tests' own view of the files, with the csv
module and Pillow, independent of the readers."""

from __future__ import annotations

import csv
from pathlib import Path

from PIL import Image


def raw_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV as the csv module reads them: the tests' independent view of a table."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) of an image file, from its header."""
    with Image.open(path) as im:
        return im.size
