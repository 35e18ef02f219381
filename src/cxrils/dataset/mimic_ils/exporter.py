"""``cxrils export --format mimic-ils``: a cxrils dataset in the release layout.

Writes what KAIST-Edlab/ROSALIA's ``train_ds.py`` reads (``--json_dir``,
``--base_image_dir``, ``--base_mask_dir``; layout in
:mod:`cxrils.dataset.mimic_ils.format`):

* ``OUT/mimic_ils_instruction_answer.json`` with the splits ``train``, ``val``, ``test``
  (always all three; the loader indexes ``json[split]``), one sample per image, keyed by
  the image id; each pair has ``instruction``, ``answer``, ``target`` (the record's lesion
  type, which the loader reads as ``disease``), positives also ``seg_mask_path``; and one
  extra key, ``certainty``, which the authors' loader ignores and the importer reads back;
* ``OUT/lesion_mask/{image_id}_{k}.png``: 0/255 8-bit masks, one per distinct mask of an
  image, at the stored image size; a re-export into the same folder removes the mask
  files the earlier export's JSON named and the new one does not, so the folder holds
  the masks of one export only (no other file there is touched); while it runs,
  ``OUT/.cxrils_export_masks`` lists each mask before it is written, so the masks of an
  export that stopped before its JSON are removed by the next one too;
* the 8-bit images, copied to the images folder the user names (default
  ``OUT/files``; an image already there is kept only when it is the same file byte for
  byte; nothing else in that folder is touched) as ``{patient_id}/{study_id}/{image_id}.png`` (as MIMIC-CXR-JPG's
  ``pXX/pXXXXXXXX/sXXXXXXXX/`` nesting ends, so ids read back) or ``{image_id}.png`` when the
  record has no patient or study id; ``image_path`` is relative to that folder.

Paraphrased rows (Appendix C.3) are left out unless asked for: the release format has
no field to mark them. Columns the format does not carry (report sentences, finding
entities, provenance) are not exported.
"""

from __future__ import annotations

import filecmp
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from cxrils.dataset.mimic_ils.format import (
    CERTAINTY_KEY,
    JSON_NAME,
    MASK_DIR_NAME,
    MASK_KEY,
    NEGATIVE_KEY,
    PAIRS_KEY,
    POSITIVE_KEY,
    SPLIT_TO_RELEASE,
    iter_samples,
)
from cxrils.dataset.splits import SPLITS
from cxrils.dataset.writer import DatasetError, image_relpath, read_manifest, read_records
from cxrils.fsutil import atomic_path, within
from cxrils.masks import decode_rle

PARAPHRASE_MODES = ("exclude", "include")
_SAFE_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


#: The list of masks an export is writing (in ``OUT``; removed when it finishes).
PENDING_NAME = ".cxrils_export_masks"


def _image_relpath(image_id: str, patient_id: str, study_id: str) -> str:
    if _SAFE_PART.match(patient_id or "") and _SAFE_PART.match(study_id or ""):
        return f"{patient_id}/{study_id}/{image_id}.png"
    return f"{image_id}.png"


def _write_mask(path: Path, mask: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, suffix=".png") as tmp:
        Image.fromarray(mask.astype(np.uint8) * 255, mode="L").save(tmp, format="PNG")


def _copy_image(src: Path, dest: Path) -> None:
    if dest.is_file():
        a, b = src.stat(), dest.stat()
        # the copy keeps the source's time (copy2): same size and time is the same file;
        # same size and another time is compared byte for byte
        if a.st_size == b.st_size and (a.st_mtime_ns == b.st_mtime_ns or filecmp.cmp(src, dest, shallow=False)):
            return  # already exported (a re-export); another image under its name is replaced
    _check_png(src)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest, suffix=".png") as tmp:
        shutil.copy2(src, tmp)


def _check_png(src: Path) -> None:
    """Raise DatasetError when the dataset's image ``src`` is no intact PNG (Pillow's
    ``verify``: every chunk's CRC, without decoding the pixels); a trial's truncated image
    was copied into an export that train_ds.py and the importer then could not read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(src) as im:
            im.verify()
    except (OSError, SyntaxError, UnidentifiedImageError, ValueError) as err:
        raise DatasetError(f"{src}: the dataset's image is damaged ({err}); regenerate the dataset") from err


def export_mimic_ils(
    dataset_dir: str | Path, out_dir: str | Path, *, images_dir: str | Path | None = None, paraphrases: str = "exclude"
) -> dict[str, Any]:
    """Write a finalized cxrils dataset in the MIMIC-CXR-Ext-ILS layout (module docstring).

    Parameters
    ----------
    dataset_dir : path
        A finalized cxrils dataset.
    out_dir : path
        Receives the JSON and ``lesion_mask/``.
    images_dir : path, optional
        Where the images go and what ``image_path`` is relative to (``--base_image_dir``
        of train_ds.py); default ``out_dir/files``.
    paraphrases : {"exclude", "include"}
        Whether paraphrased-instruction rows become pairs too.

    Returns
    -------
    dict
        Counts: samples and pairs per release split, masks and images written, mask files
        of an earlier export removed (``stale_masks_removed``), files in ``lesion_mask/``
        that no export wrote, kept (``other_files_kept``), and the paths.

    Raises
    ------
    DatasetError
        If the dataset is not readable, an image file is missing or damaged, ``paraphrases`` is
        unknown, or ``out_dir`` or ``images_dir`` lies inside the dataset folder. Nothing
        is written when the dataset is not finalized.
    """
    if paraphrases not in PARAPHRASE_MODES:
        raise DatasetError(f"paraphrases must be one of {PARAPHRASE_MODES}, got {paraphrases!r}")
    ds, out = Path(dataset_dir), Path(out_dir)
    images = Path(images_dir) if images_dir is not None else out / "files"
    masks_dir = out / MASK_DIR_NAME
    for where, what in ((out, "the export"), (images, "its images")):
        if within(where, ds):
            raise DatasetError(f"{where}: {what} would be written inside the dataset {ds}; choose a folder outside it")
    if within(images, masks_dir):
        raise DatasetError(f"{images}: the images would be written inside the mask folder {masks_dir}; choose another")
    read_manifest(ds)  # a folder that is no finalized dataset fails before anything is written
    pending = out / PENDING_NAME
    earlier = _named_masks(out / JSON_NAME) | _pending_masks(pending)
    out.mkdir(parents=True, exist_ok=True)
    masks_dir.mkdir(exist_ok=True)  # train_ds.py's --base_mask_dir, empty when no pair is positive
    pending.write_text("".join(f"{name}\n" for name in sorted(earlier)), encoding="utf-8")
    counts: dict[str, Any] = {"samples": {}, "positive_pairs": {}, "negative_pairs": {}, "masks": 0, "images": 0}
    mask_files: set[str] = set()
    with atomic_path(out / JSON_NAME, suffix=".json") as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write("{")
        for s_i, split in enumerate(SPLITS):
            rsplit = SPLIT_TO_RELEASE[split]
            recs = read_records(ds, split)
            if paraphrases == "exclude" and len(recs):
                recs = recs[recs["paraphrase_of"] == ""]
            fh.write(("," if s_i else "") + json.dumps(rsplit) + ": {")
            n_samples = n_pos = n_neg = 0
            for image_id, group in recs.groupby("image_id", sort=True):
                sample, written = _sample(ds, str(image_id), group, images, masks_dir, pending)
                counts["masks"] += len(written)
                mask_files.update(written)
                counts["images"] += 1
                fh.write(("," if n_samples else "") + "\n" + json.dumps(str(image_id)) + ": " + json.dumps(sample))
                n_samples += 1
                n_pos += len(sample[PAIRS_KEY][POSITIVE_KEY])
                n_neg += len(sample[PAIRS_KEY][NEGATIVE_KEY])
            fh.write("}")
            counts["samples"][rsplit], counts["positive_pairs"][rsplit], counts["negative_pairs"][rsplit] = (
                n_samples,
                n_pos,
                n_neg,
            )
        fh.write("}\n")
    stale = [masks_dir / name for name in sorted(earlier - mask_files) if (masks_dir / name).is_file()]
    for path in stale:  # after the new JSON is in place: it names none of them
        path.unlink()
    pending.unlink()
    counts["stale_masks_removed"] = len(stale)
    # files no export wrote are the user's: kept, and counted so that the CLI can say so
    counts["other_files_kept"] = sum(
        1 for p in masks_dir.iterdir() if p.is_file() and p.name not in mask_files and not p.name.startswith(".")
    )
    counts.update({"json": str(out / JSON_NAME), "images_dir": str(images), "masks_dir": str(masks_dir)})
    return counts


def _named_masks(json_path: Path) -> set[str]:
    """The mask file names (``seg_mask_path``) an earlier export's JSON at ``json_path``
    names; empty when there is none, or when it cannot be read (then nothing is removed)."""
    if not json_path.is_file():
        return set()
    names: set[str] = set()
    try:
        with open(json_path, "rb") as fh:
            for _split, _key, item in iter_samples(fh, str(json_path)):
                pairs = item.get(PAIRS_KEY, {}) if isinstance(item, dict) else {}
                for pair in pairs.get(POSITIVE_KEY, []) if isinstance(pairs, dict) else []:
                    name = pair.get(MASK_KEY) if isinstance(pair, dict) else None
                    if isinstance(name, str) and name and Path(name).name == name:
                        names.add(name)
    except (DatasetError, OSError):
        return set()
    return names


def _pending_masks(path: Path) -> set[str]:
    """The mask file names listed by an export that stopped before it finished (a
    :data:`PENDING_NAME` file left behind); empty when there is none."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    return {n for n in lines if n and Path(n).name == n and n.endswith(".png")}


def _sample(
    ds: Path, image_id: str, group: Any, images: Path, masks_dir: Path, pending: Path
) -> tuple[dict[str, Any], list[str]]:
    first = group.iloc[0]
    rel = _image_relpath(image_id, str(first["patient_id"]), str(first["study_id"]))
    src = ds / image_relpath(image_id)
    if not src.is_file():
        raise DatasetError(f"{src}: image of {image_id} missing from the dataset")
    dest = images / rel
    if dest.resolve() != src.resolve():
        _copy_image(src, dest)
    mask_names: dict[str, str] = {}
    pos, neg = [], []
    group = group.assign(_index=[int(str(r).rpartition(":")[2]) for r in group["record_id"]]).sort_values("_index")
    for rec in group.itertuples(index=False):
        pair = {"instruction": rec.instruction, "answer": rec.answer, "target": rec.lesion_type}
        if rec.certainty:
            pair[CERTAINTY_KEY] = rec.certainty
        if rec.polarity == "positive":
            rle = {"size": [int(v) for v in rec.mask["size"]], "counts": rec.mask["counts"]}
            key = rle["counts"] + "|" + "x".join(map(str, rle["size"]))
            if key not in mask_names:
                name = f"{image_id}_{len(mask_names)}.png"
                with open(pending, "a", encoding="utf-8") as fh:  # listed before it exists
                    fh.write(name + "\n")
                _write_mask(masks_dir / name, decode_rle(rle))
                mask_names[key] = name
            pair[MASK_KEY] = mask_names[key]
            pos.append(pair)
        else:
            neg.append(pair)
    return {"image_path": rel, PAIRS_KEY: {POSITIVE_KEY: pos, NEGATIVE_KEY: neg}}, list(mask_names.values())
