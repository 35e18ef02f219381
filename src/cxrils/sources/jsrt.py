"""The JSRT database with the SCR masks (``jsrt_scr/`` of the shared data).

Source (``../shared/data/README.md``): the whole JSRT database (Shiraishi et al. 2000):
247 PA radiographs, 154 with one lung nodule (``JPCLN*``) and 93 without (``JPCNN*``),
digitised at 2048 x 2048 and stored as 8-bit grayscale PNGs at 512 x 512
(``images/<image_id>.png``; low contrast: equalise before use). One image per patient.
The SCR masks (van Ginneken et al. 2006): ``masks/{right_lung,left_lung,heart,
right_clavicle,left_clavicle}/<image_id>.png``, 0/255 at the image's size; "right"/"left"
are the patient's sides (the patient's right lung is on the image's left).
``nodules.csv``: one row per nodule image (centre ``x_2048, y_2048`` on the originals and
``x_512, y_512`` on the stored images, column then row; size in mm, subtlety 1-5,
malignancy, the database's own location words); ``non_nodules.csv``: the images without a
nodule (age, sex). Research and education use only; no redistribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cxrils.sources.base import cell_float, cell_id, cell_int, cell_number, existing, require_folder, table_rows

#: Folder of the corpus under the shared data root.
FOLDER = "jsrt_scr"
#: The SCR mask folders under ``masks/``.
MASKS: tuple[str, ...] = ("right_lung", "left_lung", "heart", "right_clavicle", "left_clavicle")


@dataclass(frozen=True)
class JsrtImage:
    """One stored JSRT image with the SCR masks found for it.

    Attributes
    ----------
    image_id : str
        ``JPCLN001``... (nodule) or ``JPCNN001``... (no nodule): the file stem; also the
        patient (one image per patient).
    image_path : pathlib.Path
        ``<folder>/images/<image_id>.png``, 8-bit grayscale, 512 x 512.
    right_lung, left_lung, heart, right_clavicle, left_clavicle : pathlib.Path or None
        ``<folder>/masks/<name>/<image_id>.png`` where the file exists, else None.
    """

    image_id: str
    image_path: Path
    right_lung: Path | None = None
    left_lung: Path | None = None
    heart: Path | None = None
    right_clavicle: Path | None = None
    left_clavicle: Path | None = None


@dataclass(frozen=True)
class JsrtNodule:
    """One row of ``jsrt_scr/nodules.csv``.

    Attributes
    ----------
    image_id : str
    x_512, y_512 : float
        Nodule centre on the stored 512 px image: column, row (pixels from the top-left
        corner, x to the image's right).
    x_2048, y_2048 : float or None
        The same centre on the 2048 px original.
    diameter_px_512 : float or None
        Nodule diameter on the stored image, pixels.
    size_mm : float or None
        Nodule diameter, mm.
    subtlety : int or None
        1 (extremely subtle) to 5 (obvious).
    malignancy : str
        ``"malignant"`` or ``"benign"`` ('' where absent).
    location : str
        The database's raw location and diagnosis (``location_and_diagnosis_raw``, e.g.
        ``"l.upper lobe lung cancer"``; ``l.``/``r.`` are the patient's sides).
    age : int or None
        None where the database gives ``?``.
    sex : str
    """

    image_id: str
    x_512: float
    y_512: float
    x_2048: float | None = None
    y_2048: float | None = None
    diameter_px_512: float | None = None
    size_mm: float | None = None
    subtlety: int | None = None
    malignancy: str = ""
    location: str = ""
    age: int | None = None
    sex: str = ""


@dataclass(frozen=True)
class JsrtNonNodule:
    """One row of ``jsrt_scr/non_nodules.csv``: an image without a nodule.

    Attributes
    ----------
    image_id : str
    age : int or None
    sex : str
    finding : str
        ``"non-nodule"`` in the shared data.
    """

    image_id: str
    age: int | None = None
    sex: str = ""
    finding: str = ""


def read_jsrt_images(data_root: str | Path) -> list[JsrtImage]:
    """The PNGs of ``<data_root>/jsrt_scr/images``, sorted by file name, with the SCR
    masks that exist for each.

    Raises
    ------
    FileNotFoundError
        If ``jsrt_scr/images`` is not a folder (the message names it).
    """
    folder = Path(data_root) / FOLDER
    out = []
    for path in sorted(require_folder(folder / "images").glob("*.png")):
        iid = path.stem
        masks = {name: existing(folder / "masks" / name / f"{iid}.png") for name in MASKS}
        out.append(JsrtImage(iid, path, **masks))
    return out


def read_jsrt_nodules(data_root: str | Path) -> list[JsrtNodule]:
    """The rows of ``<data_root>/jsrt_scr/nodules.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``nodules.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id``, ``x_512`` or ``y_512``, or a row has an empty or repeated
        ``image_id``, a centre that is not a number or another numeric column that is
        neither a number nor ``?`` (the message names the file and the row).
    """
    table = Path(data_root) / FOLDER / "nodules.csv"
    seen: set[str] = set()
    return [_nodule(table, where, row, seen) for where, row in table_rows(table, ("image_id", "x_512", "y_512"))]


def _nodule(table: Path, where: str, row: dict[str, str], seen: set[str]) -> JsrtNodule:
    def num(column: str) -> float | None:
        return cell_float(table, where, row, column, optional=True)

    return JsrtNodule(
        image_id=cell_id(table, where, row, "image_id", seen),
        x_512=cell_number(table, where, row, "x_512"),
        y_512=cell_number(table, where, row, "y_512"),
        x_2048=num("x_2048"),
        y_2048=num("y_2048"),
        diameter_px_512=num("diameter_px_512"),
        size_mm=num("size_mm"),
        subtlety=cell_int(table, where, row, "subtlety_1to5"),
        malignancy=(row.get("malignancy") or "").strip(),
        location=(row.get("location_and_diagnosis_raw") or "").strip(),
        age=cell_int(table, where, row, "age"),
        sex=(row.get("sex") or "").strip(),
    )


def read_jsrt_non_nodules(data_root: str | Path) -> list[JsrtNonNodule]:
    """The rows of ``<data_root>/jsrt_scr/non_nodules.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``non_nodules.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id``, or a row has an empty or repeated ``image_id`` or an age
        that is neither a whole number nor ``?`` (the message names the file and the row).
    """
    table = Path(data_root) / FOLDER / "non_nodules.csv"
    seen: set[str] = set()
    return [
        JsrtNonNodule(
            cell_id(table, where, row, "image_id", seen),
            cell_int(table, where, row, "age"),
            (row.get("sex") or "").strip(),
            (row.get("finding") or "").strip(),
        )
        for where, row in table_rows(table, ("image_id",))
    ]
