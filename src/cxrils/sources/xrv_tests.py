"""The torchxrayvision test images (``xrv_tests/`` of the shared data).

Source (``../shared/data/README.md``): 8 images from the tests of the torchxrayvision
package (NIH ChestX-ray14, PadChest, the COVID-19 collection, SIIM-ACR, TBX11K), stored as
8-bit grayscale PNGs ``images/<image_id>.png`` (longest side at most 512 px).
``images.csv``: per image its source dataset and labels as that dataset writes them
(``Cardiomegaly``, ``No Finding``, ``tb``, ``healthy``...; empty where not looked up) and
sizes; ``tbx11k_boxes.csv``: the TBX11K tuberculosis boxes, ``x, y, w, h`` in stored
pixels. NIH images CC0; the others per source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cxrils.sources.base import cell_id, cell_int, cell_number, table_rows

#: Folder of the corpus under the shared data root.
FOLDER = "xrv_tests"


@dataclass(frozen=True)
class XrvImage:
    """One row of ``xrv_tests/images.csv``.

    Attributes
    ----------
    image_id : str
    image_path : pathlib.Path
        ``<folder>/images/<image_id>.png`` (not checked to exist).
    dataset : str
        The source dataset as written (``"NIH ChestX-ray14 (CC0)"``...).
    labels : str
        The source's label text as written ('' where none was looked up).
    width, height : int or None
        Stored size (``w``, ``h``).
    """

    image_id: str
    image_path: Path
    dataset: str
    labels: str
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True)
class XrvBox:
    """One row of ``xrv_tests/tbx11k_boxes.csv``: a TBX11K tuberculosis box.

    Attributes
    ----------
    image_id : str
    category : str
        ``ActiveTuberculosis``, ``ObsoletePulmonaryTuberculosis``...
    x, y, w, h : float
        On the stored image, pixels: left column, top row, width, height.
    """

    image_id: str
    category: str
    x: float
    y: float
    w: float
    h: float

    @property
    def xyxy(self) -> tuple[float, float, float, float]:
        """``(x0, y0, x1, y1)`` on the stored image."""
        return (self.x, self.y, self.x + self.w, self.y + self.h)


def read_xrv_images(data_root: str | Path) -> list[XrvImage]:
    """The images of ``<data_root>/xrv_tests/images.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``images.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id`` or ``labels``, or a row has an empty or repeated
        ``image_id`` or a size that is not a whole number (the message names the file and
        the row).
    """
    folder = Path(data_root) / FOLDER
    table = folder / "images.csv"
    seen: set[str] = set()
    out = []
    for where, row in table_rows(table, ("image_id", "labels")):
        iid = cell_id(table, where, row, "image_id", seen)
        out.append(
            XrvImage(
                iid,
                folder / "images" / f"{iid}.png",
                (row.get("dataset") or "").strip(),
                row["labels"].strip(),
                cell_int(table, where, row, "w"),
                cell_int(table, where, row, "h"),
            )
        )
    return out


def read_xrv_boxes(data_root: str | Path) -> list[XrvBox]:
    """The boxes of ``<data_root>/xrv_tests/tbx11k_boxes.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``tbx11k_boxes.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id``, ``x``, ``y``, ``w`` or ``h``, or a coordinate is not a
        number (the message names the file and the row).
    """
    table = Path(data_root) / FOLDER / "tbx11k_boxes.csv"
    return [
        XrvBox(
            cell_id(table, where, row, "image_id"),
            (row.get("category") or "").strip(),
            *(cell_number(table, where, row, k) for k in "xywh"),
        )
        for where, row in table_rows(table, ("image_id", "x", "y", "w", "h"))
    ]
