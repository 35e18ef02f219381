"""NIH ChestX-ray14 images with an expert box (``nih_bbox/`` of the shared data).

Source (``../shared/data/README.md``): 12 images of NIH ChestX-ray14 (Wang et al. 2017;
free use with acknowledgement) that have an expert box in ``BBox_List_2017``, 1024 x 1024
originals stored as 8-bit grayscale PNGs at 512 x 512 (``images/<image_id>.png``).
``bboxes.csv``: one box per image (cardiomegaly 3, pneumonia 3, nodule 3, atelectasis,
mass, infiltrate), ``x, y, w, h`` in stored pixels and ``x_1024...`` on the originals;
``images.csv``: the images with their NIH labels (text-mined from the reports, ``|``
separated), patient id, age, sex, view and sizes. No masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cxrils.sources.base import InputError, cell_float, cell_id, cell_int, cell_number, table_rows

#: Folder of the corpus under the shared data root.
FOLDER = "nih_bbox"


@dataclass(frozen=True)
class NihBox:
    """One row of ``nih_bbox/bboxes.csv``: an expert box.

    Attributes
    ----------
    image_id : str
        The table's ``image_id`` without its ``.png`` (``00001369_000``).
    image_path : pathlib.Path
        ``<folder>/images/<the table's image_id>`` (not checked to exist).
    finding : str
        The NIH finding of the box as written (``Cardiomegaly``, ``Pneumonia``, ``Nodule``,
        ``Atelectasis``, ``Mass``, ``Infiltrate``).
    x, y, w, h : float
        The box on the stored image, pixels: left column, top row (from the top-left
        corner), width, height.
    x_1024, y_1024, w_1024, h_1024 : float or None
        The same box on the 1024 px original.
    """

    image_id: str
    image_path: Path
    finding: str
    x: float
    y: float
    w: float
    h: float
    x_1024: float | None = None
    y_1024: float | None = None
    w_1024: float | None = None
    h_1024: float | None = None

    @property
    def xyxy(self) -> tuple[float, float, float, float]:
        """``(x0, y0, x1, y1)`` on the stored image (x1 = x + w, y1 = y + h)."""
        return (self.x, self.y, self.x + self.w, self.y + self.h)


@dataclass(frozen=True)
class NihImage:
    """One row of ``nih_bbox/images.csv``.

    Attributes
    ----------
    image_id : str
        The table's ``image_id`` without its ``.png``.
    image_path : pathlib.Path
        ``<folder>/<file>`` (``images/...png``; not checked to exist).
    labels : tuple of str
        The NIH labels (``nih_finding_labels`` split at ``|``), e.g. ``("Consolidation",
        "Pneumonia")``; ``("No Finding",)`` as NIH writes it.
    patient_id, sex, view : str
        ``patient_id``, ``sex`` (F/M), ``view_position`` (PA/AP) as written ('' where absent).
    age : int or None
    width, height : int or None
        Stored size (``w``, ``h``).
    """

    image_id: str
    image_path: Path
    labels: tuple[str, ...]
    patient_id: str = ""
    sex: str = ""
    view: str = ""
    age: int | None = None
    width: int | None = None
    height: int | None = None


def _stem(table: Path, where: str, row: dict[str, str], seen: set[str] | None = None) -> tuple[str, str]:
    name = cell_id(table, where, row, "image_id", seen)
    return name.removesuffix(".png"), name


def read_nih_boxes(data_root: str | Path) -> list[NihBox]:
    """The expert boxes of ``<data_root>/nih_bbox/bboxes.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``bboxes.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id``, ``finding``, ``x``, ``y``, ``w`` or ``h``, or a row has
        an empty ``image_id``, a coordinate that is not a number or a box of negative
        size (the message names the file and the row).
    """
    folder = Path(data_root) / FOLDER
    table = folder / "bboxes.csv"
    out = []
    for where, row in table_rows(table, ("image_id", "finding", "x", "y", "w", "h")):
        iid, name = _stem(table, where, row)
        x, y, w, h = (cell_number(table, where, row, k) for k in ("x", "y", "w", "h"))
        if w < 0 or h < 0:
            raise InputError(table, f"{where}: box of negative size (w {w}, h {h})")
        orig = (cell_float(table, where, row, f"{k}_1024", optional=True) for k in "xywh")
        out.append(NihBox(iid, folder / "images" / name, row["finding"].strip(), x, y, w, h, *orig))
    return out


def read_nih_images(data_root: str | Path) -> list[NihImage]:
    """The images of ``<data_root>/nih_bbox/images.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``images.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id``, ``file`` or ``nih_finding_labels``, or a row has an
        empty or repeated ``image_id``, an empty ``file`` or a size or age that is not a
        whole number (the message names the file and the row).
    """
    folder = Path(data_root) / FOLDER
    table = folder / "images.csv"
    seen: set[str] = set()
    out = []
    for where, row in table_rows(table, ("image_id", "file", "nih_finding_labels")):
        iid, _ = _stem(table, where, row, seen)
        file = cell_id(table, where, row, "file")
        labels = tuple(t.strip() for t in row["nih_finding_labels"].split("|") if t.strip())
        out.append(
            NihImage(
                iid,
                folder / file,
                labels,
                (row.get("patient_id") or "").strip(),
                (row.get("sex") or "").strip(),
                (row.get("view_position") or "").strip(),
                cell_int(table, where, row, "age"),
                cell_int(table, where, row, "w"),
                cell_int(table, where, row, "h"),
            )
        )
    return out
