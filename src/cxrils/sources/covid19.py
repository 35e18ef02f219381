"""The COVID-19 image data collection (ieee8023, 2020 snapshot; ``covid_ieee8023/`` of the
shared data).

Source (``../shared/data/README.md``): 527 frontal images (PA, AP, AP supine) of
https://github.com/ieee8023/covid-chestxray-dataset, stored as 8-bit grayscale PNGs
``images/<image_id>.png`` (longest side at most 512 px), many cropped from journal
figures. ``metadata.csv``: one row per image (``image_id``, ``orig_filename``,
``patientid``, ``finding``, ``view``, ``license``, sizes, free-text clinical notes...).
``masks_lung_v7labs/<image_id>.png``: hand-drawn masks of both lungs in one mask (427;
they also ship in the torchxrayvision wheel); ``masks_lung_vae/<image_id>.png``:
model-made lung masks (192); 0/255 PNGs at the image's size. ``severity_scores.csv``:
the mean of three experts' scores for 93 images (Cohen et al. 2020, CC BY-SA): geographic
extent 0-8 and opacity 0-6, both summed over the two lungs. Licences per image (the
``license`` column).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cxrils.sources.base import cell_id, cell_int, cell_number, existing, table_rows

#: Folder of the corpus under the shared data root.
FOLDER = "covid_ieee8023"


@dataclass(frozen=True)
class Covid19Image:
    """One row of ``covid_ieee8023/metadata.csv``, with the lung masks found for it.

    Attributes
    ----------
    image_id : str
        Image id, the stem of the stored PNG.
    image_path : pathlib.Path
        ``<folder>/images/<image_id>.png`` (not checked to exist).
    patient_id : str
        ``patientid`` ('' where the table has no such column or value).
    orig_filename : str
        The collection's file name (``orig_filename``; '' where absent), the key of
        ``severity_scores.csv``.
    view, finding, license : str
        As the table gives them ('' where absent), e.g. ``"PA"``, ``"AP Supine"``.
    width, height : int or None
        Stored size in pixels (``w``, ``h``).
    v7labs_mask_path, vae_mask_path : pathlib.Path or None
        ``masks_lung_v7labs/<image_id>.png`` and ``masks_lung_vae/<image_id>.png`` where
        the file exists, else None: 0/255, both lungs in one mask.
    """

    image_id: str
    image_path: Path
    patient_id: str = ""
    orig_filename: str = ""
    view: str = ""
    finding: str = ""
    license: str = ""
    width: int | None = None
    height: int | None = None
    v7labs_mask_path: Path | None = None
    vae_mask_path: Path | None = None


@dataclass(frozen=True)
class Covid19Severity:
    """One row of ``covid_ieee8023/severity_scores.csv``.

    Attributes
    ----------
    filename : str
        The collection's file name (``filename``), matched to ``orig_filename`` of
        ``metadata.csv``.
    image_id : str or None
        The matched image's id; None when no ``metadata.csv`` row has that file name.
    image_path : pathlib.Path or None
        ``<folder>/images/<image_id>.png`` of the matched image (not checked to exist).
    geographic_mean : float
        Mean geographic extent score, 0-8 (both lungs, no side).
    opacity_mean : float
        Mean opacity score, 0-6.
    """

    filename: str
    image_id: str | None
    image_path: Path | None
    geographic_mean: float
    opacity_mean: float


def read_covid19_images(data_root: str | Path) -> list[Covid19Image]:
    """The images of ``<data_root>/covid_ieee8023/metadata.csv``, in row order.

    Raises
    ------
    FileNotFoundError
        If ``metadata.csv`` does not exist (the message names it).
    InputError
        If it lacks ``image_id``, holds an empty or repeated ``image_id`` or a size that is
        not a whole number (the message names the file and the row).
    """
    folder = Path(data_root) / FOLDER
    table = folder / "metadata.csv"
    seen: set[str] = set()
    out = []
    for where, row in table_rows(table, ("image_id",)):
        iid = cell_id(table, where, row, "image_id", seen)
        out.append(
            Covid19Image(
                image_id=iid,
                image_path=folder / "images" / f"{iid}.png",
                patient_id=(row.get("patientid") or "").strip(),
                orig_filename=(row.get("orig_filename") or "").strip(),
                view=(row.get("view") or "").strip(),
                finding=(row.get("finding") or "").strip(),
                license=(row.get("license") or "").strip(),
                width=cell_int(table, where, row, "w"),
                height=cell_int(table, where, row, "h"),
                v7labs_mask_path=existing(folder / "masks_lung_v7labs" / f"{iid}.png"),
                vae_mask_path=existing(folder / "masks_lung_vae" / f"{iid}.png"),
            )
        )
    return out


def read_covid19_severity(data_root: str | Path) -> list[Covid19Severity]:
    """The rows of ``<data_root>/covid_ieee8023/severity_scores.csv``, in row order, each
    matched to its image through ``metadata.csv`` (``filename`` = ``orig_filename``).

    Raises
    ------
    FileNotFoundError
        If ``severity_scores.csv`` or ``metadata.csv`` does not exist.
    InputError
        If ``severity_scores.csv`` lacks ``filename``, ``geographic_mean`` or
        ``opacity_mean``, or a score is not a number (the message names the file and the
        row); or ``metadata.csv`` is malformed (:func:`read_covid19_images`).
    """
    folder = Path(data_root) / FOLDER
    table = folder / "severity_scores.csv"
    rows = table_rows(table, ("filename", "geographic_mean", "opacity_mean"))
    by_name = {m.orig_filename: m for m in read_covid19_images(data_root) if m.orig_filename}
    out = []
    for where, row in rows:
        name = cell_id(table, where, row, "filename")
        image = by_name.get(name)
        out.append(
            Covid19Severity(
                name,
                image.image_id if image else None,
                image.image_path if image else None,
                cell_number(table, where, row, "geographic_mean"),
                cell_number(table, where, row, "opacity_mean"),
            )
        )
    return out
