"""COVID-QU-Ex infection segmentation, train split (``covid_qu_ex/`` of the shared data).

Source (``../shared/data/README.md`` and ``covid_qu_ex/README.md``): the "Infection
Segmentation Data" subset of COVID-QU-Ex (Tahir et al., 2021, Qatar University), Train
split: 2,796 frontal images (1,864 COVID-19, 932 Normal), 8-bit grayscale 256 x 256 as
distributed. ``infection_masks/ID.png``: 0/255 COVID-19 infection masks (expert-verified,
from QaTa-COV19), for the COVID-19 images only; ``lung_masks/ID.png``: 0/255 mask of both
lungs in one mask, for every image; masks are at the size of their image. COVID-QU-Ex
gives no patient ids. Research use (Kaggle COVID-QU-Ex terms); never copied into the
project.

The reader lists the images of ``images.csv``; which part of a fixed split an image falls
in is training policy (:mod:`cxrils.training.lesion_data`, :mod:`cxrils.training.anatomy_data`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cxrils.sources.base import InputError, cell_id, cell_int, table_rows

#: Folder of the corpus under the shared data root.
FOLDER = "covid_qu_ex"
#: The image classes of ``images.csv``'s ``cls`` column.
CLASSES: tuple[str, ...] = ("COVID-19", "Normal")


@dataclass(frozen=True)
class QuExImage:
    """One row of ``covid_qu_ex/images.csv``.

    Attributes
    ----------
    image_id : str
        Image id (``covid_1``, ``Normal_10``...); also the file stem.
    cls : {"COVID-19", "Normal"}
    image_path : pathlib.Path
        ``<folder>/images/<image_id>.png`` (8-bit grayscale, 256 x 256 as distributed).
    lung_mask_path : pathlib.Path
        ``<folder>/<lung_mask>``: 0/255 PNG of both lungs (one mask), at the image's size.
    infection_mask_path : pathlib.Path or None
        ``<folder>/<infection_mask>``: 0/255 PNG of the infection; None where the column is
        empty or absent (the Normal images).
    width, height : int or None
        Stored size in pixels (columns ``w``, ``h``); None where the table lacks them.

    Paths are as the table gives them, joined to the corpus folder; the reader does not
    check that the files exist.
    """

    image_id: str
    cls: str
    image_path: Path
    lung_mask_path: Path
    infection_mask_path: Path | None
    width: int | None = None
    height: int | None = None

    @property
    def positive(self) -> bool:
        """True when the image has an infection mask (a COVID-19 image)."""
        return self.infection_mask_path is not None


def read_covid_qu_ex(data_root: str | Path) -> list[QuExImage]:
    """The images of ``<data_root>/covid_qu_ex/images.csv``, in row order.

    Parameters
    ----------
    data_root : path
        The shared data folder (``../shared/data``).

    Raises
    ------
    FileNotFoundError
        If ``images.csv`` does not exist (the message names it).
    InputError
        If ``images.csv`` lacks ``image_id``, ``cls`` or ``lung_mask``, or a row has an
        empty or repeated ``image_id``, a ``cls`` not in :data:`CLASSES`, an empty
        ``lung_mask`` or a ``w``/``h`` that is not a whole number (the message names the
        file and the row).
    """
    folder = Path(data_root) / FOLDER
    table = folder / "images.csv"
    seen: set[str] = set()
    out = []
    for where, row in table_rows(table, ("image_id", "cls", "lung_mask")):
        iid = cell_id(table, where, row, "image_id", seen)
        cls = row["cls"].strip()
        if cls not in CLASSES:
            raise InputError(table, f"{where}: cls {row['cls']!r} is not one of {list(CLASSES)}")
        lung = row["lung_mask"].strip()
        if not lung:
            raise InputError(table, f"{where}: image {iid} has no lung_mask")
        infection = (row.get("infection_mask") or "").strip()
        out.append(
            QuExImage(
                iid,
                cls,
                folder / "images" / f"{iid}.png",
                folder / lung,
                folder / infection if infection else None,
                cell_int(table, where, row, "w"),
                cell_int(table, where, row, "h"),
            )
        )
    return out
