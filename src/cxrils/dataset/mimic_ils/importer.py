"""``cxrils import-mimic-ils``: the released MIMIC-CXR-Ext-ILS as a cxrils dataset.

Streams the release JSON (:func:`cxrils.dataset.mimic_ils.format.iter_samples`), one
sample (= one image and its pairs) at a time, and writes each as one study through
:class:`cxrils.dataset.DatasetWriter` (atomic, resumable: finished studies are skipped
on a rerun). A missing image skips that sample, a missing or unreadable mask skips that
pair, a text that is no template keeps the pair with empty parsed fields; each is one
line of ``mimic_ils_import_problems.jsonl`` and a count in ``mimic_ils_import_report.json``,
never an error for the rest.

Images are stored at :attr:`cxrils.config.MimicIlsConfig.max_side` on the longest side
(bilinear, as SAM's ``ResizeLongestSide``), masks resized with nearest neighbour by their
own aspect into the stored image's frame (:func:`~cxrils.dataset.mimic_ils.format.read_mask_png`),
so the records' masks are the image part of the grid the authors' ``validate()`` scores
on (it also counts predictions in SAM's padding to 1024 x 1024; docs/evaluation.md).
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import IO, Any

import numpy as np

from cxrils.config import MimicIlsConfig
from cxrils.dataset.mimic_ils.format import (
    CERTAINTY_KEY,
    JSON_NAME,
    MASK_DIR_NAME,
    MASK_KEY,
    NEGATIVE_KEY,
    PAIR_KEYS,
    PAIRS_KEY,
    POSITIVE_KEY,
    SPLIT_FROM_RELEASE,
    ids_from_image_path,
    image_id_for,
    iter_samples,
    parse_pair,
    read_mask_png,
    resized_shape,
)
from cxrils.dataset.writer import DatasetError, DatasetWriter, ProvenanceMismatch
from cxrils.fsutil import atomic_path, atomic_write_json, atomic_write_text, sha256_file
from cxrils.io.base import MIN_IMAGE_SIDE, image_too_small
from cxrils.masks import encode_rle

log = logging.getLogger(__name__)

REPORT_NAME = "mimic_ils_import_report.json"
PROBLEMS_NAME = "mimic_ils_import_problems.jsonl"
#: Per-study problem lists, written before the study's commit (so a resumed run still reports them).
PROBLEM_DIR = "mimic_ils_problems"
SOURCE = "MIMIC-CXR-Ext-ILS 1.0.0 (PhysioNet), KAIST-Edlab/ROSALIA layout"


@dataclass(frozen=True)
class _Job:
    split: str
    release_split: str
    sample_key: str
    item: Any
    images_dir: str
    masks_dir: str
    max_side: int
    foreground: int


def _problem(job: _Job, kind: str, detail: str, pair: str = "") -> dict[str, Any]:
    return {"split": job.release_split, "sample_key": job.sample_key, "pair": pair, "kind": kind, "detail": detail}


def _resize_image(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    from PIL import Image

    if x.shape == shape:
        return x
    return np.asarray(Image.fromarray(x).resize((shape[1], shape[0]), Image.Resampling.BILINEAR))


def _pairs(job: _Job, problems: list[dict[str, Any]]) -> list[tuple[str, int, dict[str, Any]]]:
    pairs = job.item.get(PAIRS_KEY)
    if not isinstance(pairs, dict):
        problems.append(_problem(job, "malformed_sample", f"no {PAIRS_KEY!r} object"))
        return []
    out = []
    for polarity, key in (("positive", POSITIVE_KEY), ("negative", NEGATIVE_KEY)):
        lst = pairs.get(key)
        if lst is None:
            problems.append(_problem(job, "malformed_sample", f"no {key!r} list (read as empty)"))
            continue
        if not isinstance(lst, list):
            problems.append(_problem(job, "malformed_sample", f"{key!r} is not a list"))
            continue
        out += [(polarity, k, qa) for k, qa in enumerate(lst)]
    return out


#: What :func:`process_sample` returns: image id, split, the image (None when nothing of
#: the sample could be imported), its records and its problems.
_Result = tuple[str, str, np.ndarray | None, list[dict[str, Any]], list[dict[str, Any]]]


def _leaves_folder(rel: str) -> bool:
    """Whether a release path (``image_path``, ``seg_mask_path``) is absolute (``/x``,
    ``\\x``, or with a Windows drive, ``C:x``) or climbs out of the folder it is relative
    to (a ``..`` part); read lexically, so a folder of symbolic links still reads."""
    win = PureWindowsPath(rel)
    return rel.startswith(("/", "\\")) or bool(win.drive) or ".." in win.parts


def process_sample(job: _Job) -> _Result:
    """Read one release sample: image, masks, texts -> (image_id, split, x, records, problems).

    ``x`` is None (and records empty) when the sample's image cannot be used. Never raises
    for bad data: every problem is returned.
    """
    from cxrils.io import ImageLoadError, load_image

    problems: list[dict[str, Any]] = []
    item = job.item
    image_path = item.get("image_path") if isinstance(item, dict) else None
    if not isinstance(image_path, str) or not image_path:
        problems.append(_problem(job, "malformed_sample", "no 'image_path' string"))
        return "", job.split, None, [], problems
    if _leaves_folder(image_path):
        problems.append(_problem(job, "malformed_sample", f"image_path {image_path!r} leads outside --images"))
        return "", job.split, None, [], problems
    image_id = image_id_for(job.sample_key, image_path)
    pairs = _pairs(job, problems)
    if not pairs:
        if not problems:  # a malformed pairs object is already counted, once
            problems.append(_problem(job, "no_pairs", "sample has no instruction-answer pairs"))
        return image_id, job.split, None, [], problems
    src = Path(job.images_dir) / image_path
    try:
        x0 = load_image(src).pixels
    except ImageLoadError as err:
        kind = "missing_image" if not src.exists() else "bad_image"
        problems.append(_problem(job, kind, str(err)))
        return image_id, job.split, None, [], problems
    shape = resized_shape(x0.shape[0], x0.shape[1], job.max_side)
    too_small = image_too_small(shape)
    if too_small:  # e.g. a 90 x 72 image stored at max_side 32 would be 32 x 26
        problems.append(
            _problem(job, "image_too_small", f"{image_path} stored at max_side {job.max_side}: {too_small}")
        )
        return image_id, job.split, None, [], problems
    x = _resize_image(x0, shape)
    patient_id, study_id = ids_from_image_path(image_path)
    masks: dict[str, np.ndarray] = {}
    empty_why: dict[str, str] = {}  # an empty mask's reason, by its path
    records: list[dict[str, Any]] = []
    empty = np.zeros(shape, bool)
    for polarity, k, qa in pairs:
        where = f"{POSITIVE_KEY if polarity == 'positive' else NEGATIVE_KEY}[{k}]"
        if not isinstance(qa, dict) or not all(isinstance(qa.get(key), str) for key in PAIR_KEYS[:2]):
            problems.append(_problem(job, "malformed_pair", "needs 'instruction' and 'answer' strings", where))
            continue
        mask_rel = qa.get(MASK_KEY)
        if polarity == "positive":
            if not isinstance(mask_rel, str) or not mask_rel:
                problems.append(_problem(job, "malformed_pair", f"positive pair without {MASK_KEY!r}", where))
                continue
            if _leaves_folder(mask_rel):
                problems.append(
                    _problem(job, "malformed_pair", f"{MASK_KEY} {mask_rel!r} leads outside --masks", where)
                )
                continue
            if mask_rel not in masks:
                mpath = Path(job.masks_dir) / mask_rel
                if not mpath.is_file():
                    problems.append(_problem(job, "missing_mask", f"{mpath}: not found", where))
                    continue
                try:
                    mask, differs = read_mask_png(mpath, x0.shape, job.foreground, out_shape=shape)
                except (OSError, ValueError) as err:
                    problems.append(_problem(job, "bad_mask", f"{mpath}: {err}", where))
                    continue
                if differs:
                    problems.append(
                        _problem(
                            job,
                            "mask_size_differs",
                            f"{mpath}: not the size of its "
                            f"{x0.shape[0]}x{x0.shape[1]} image; resized by its own aspect "
                            f"into the image's frame, as the authors' loader (kept)",
                            where,
                        )
                    )
                masks[mask_rel] = mask
                if not mask.any():
                    empty_why[mask_rel] = _empty_mask_why(mpath, job.foreground)
            mask = masks[mask_rel]
            if not mask.any():
                problems.append(
                    _problem(job, "empty_positive_mask", f"{mask_rel}: {empty_why[mask_rel]} (kept)", where)
                )
        else:
            mask = empty
            if isinstance(mask_rel, str) and mask_rel:
                problems.append(
                    _problem(
                        job,
                        "negative_with_mask",
                        f"{mask_rel}: a negative pair's mask is not read (kept, empty)",
                        where,
                    )
                )
        try:
            fields = parse_pair(qa["instruction"], qa["answer"], qa.get("target"), polarity, qa.get(CERTAINTY_KEY))
        except ValueError as err:
            problems.append(_problem(job, "unknown_lesion_type", str(err), where))
            continue
        problems += [_problem(job, "not_template", p, where) for p in fields.problems]
        provenance = {
            "source": SOURCE,
            "release_split": job.release_split,
            "sample_key": job.sample_key,
            "image_path": image_path,
            "pair": where,
            "release_target": qa.get("target"),
            "seg_mask_path": mask_rel if polarity == "positive" else None,
            "original_size": list(x0.shape),
            "max_side": job.max_side,
        }
        records.append(
            {
                "record_id": f"{image_id}:{len(records)}",
                "study_id": study_id,
                "image_id": image_id,
                "patient_id": patient_id,
                "split": job.split,
                "lesion_type": fields.lesion_type,
                "target": fields.target,
                "instruction_type": fields.instruction_type,
                "polarity": polarity,
                "locations": fields.locations,
                "certainty": fields.certainty,
                "instruction": qa["instruction"],
                "answer": qa["answer"],
                "mask": dict(encode_rle(mask)),
                "mask_area": int(mask.sum()),
                "height": shape[0],
                "width": shape[1],
                "finding_entity": "",
                "sentence_index": 0,
                "sentence": "",
                "source_findings": "[]",
                "paraphrase_of": "",
                "persona": "",
                "provenance": json.dumps(provenance, sort_keys=True),
            }
        )
    return image_id, job.split, x, records, problems


def _check_inputs(json_path: Path, images_dir: Path, masks_dir: Path) -> None:
    if not json_path.is_file():
        raise DatasetError(
            f"{json_path}: {'is a folder, not a file' if json_path.is_dir() else 'not found'}; it is {JSON_NAME} "
            "of MIMIC-CXR-Ext-ILS 1.0.0 "
            "(PhysioNet, credentialed access: physionet.org/content/mimic-cxr-ext-ils/1.0.0/)"
        )
    if not images_dir.is_dir():
        raise DatasetError(
            f"{images_dir}: not a folder; give the files/ folder of MIMIC-CXR-JPG 2.1.0 "
            "(PhysioNet, credentialed access), the --base_image_dir of the authors' train.sh"
        )
    if not masks_dir.is_dir():
        raise DatasetError(f"{masks_dir}: not a folder; give the {MASK_DIR_NAME}/ folder of MIMIC-CXR-Ext-ILS 1.0.0")


#: How many of the JSON's first mask paths :func:`_check_masks_folder` looks for.
_MASKS_PROBED = 20


def _check_masks_folder(json_path: Path, masks_dir: Path) -> None:
    """Refuse a ``--masks`` under which none of the first :data:`_MASKS_PROBED` distinct
    mask files of the JSON is found (before anything is written): a wrong folder would otherwise
    import every positive pair as ``missing_mask`` and leave a dataset of negatives, whose
    samples a rerun with the right folder skips as done. Names ``masks_dir/lesion_mask``
    when the masks are there (the release's folder above it given). A JSON that cannot be
    read is left to the import, which names the problem."""
    probed: list[str] = []
    try:
        with open(json_path, "rb") as fh:
            for _, _, item in iter_samples(fh, str(json_path)):
                both = item.get(PAIRS_KEY) if isinstance(item, dict) else None
                pairs = both.get(POSITIVE_KEY) if isinstance(both, dict) else None
                for qa in pairs if isinstance(pairs, list) else []:
                    rel = qa.get(MASK_KEY) if isinstance(qa, dict) else None
                    if isinstance(rel, str) and rel and not _leaves_folder(rel) and rel not in probed:
                        if (masks_dir / rel).is_file():
                            return
                        probed.append(rel)  # distinct files: several pairs share one mask
                if len(probed) >= _MASKS_PROBED:
                    break
    except (DatasetError, OSError):
        return
    if not probed:
        return
    inner = masks_dir / MASK_DIR_NAME
    hint = (
        f"the masks are under {inner}: give that folder as --masks"
        if (inner / probed[0]).is_file()
        else f"give the {MASK_DIR_NAME}/ folder of MIMIC-CXR-Ext-ILS 1.0.0 (its {MASK_KEY} are relative to it)"
    )
    raise DatasetError(
        f"{masks_dir}: none of the first {len(probed)} mask files {json_path.name} names is there "
        f"(e.g. {probed[0]!r}); {hint}"
    )


class _Progress:
    """Bytes of the JSON read so far, for a tqdm bar (the number of samples is unknown
    until the end of a streamed file)."""

    def __init__(self, fh: IO[bytes], total: int, enabled: bool) -> None:
        from cxrils.progress import progress_bar

        self.fh = fh
        self.bar = progress_bar(total=total, unit="B", unit_scale=True, desc="import MIMIC-ILS", disable=not enabled)
        self.last = 0

    def update(self, **postfix: Any) -> None:
        pos = self.fh.tell()
        self.bar.update(pos - self.last)
        self.last = pos
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        self.update()
        self.bar.close()


def import_mimic_ils(
    json_path: str | Path,
    images_dir: str | Path,
    masks_dir: str | Path,
    out_dir: str | Path,
    *,
    cfg: MimicIlsConfig | None = None,
    workers: int = 1,
    progress: bool = True,
    shard_size: int | None = None,
) -> dict[str, Any]:
    """Import the release into a finalized cxrils dataset at ``out_dir`` (module docstring).

    Parameters
    ----------
    json_path : path
        ``mimic_ils_instruction_answer.json`` of MIMIC-CXR-Ext-ILS 1.0.0.
    images_dir : path
        MIMIC-CXR-JPG 2.1.0 ``files/`` (the items' ``image_path`` are relative to it).
    masks_dir : path
        The release's ``lesion_mask/`` (the pairs' ``seg_mask_path`` are relative to it).
    out_dir : path
        Dataset folder; rerunning on the same folder resumes (finished samples skipped).
    cfg : MimicIlsConfig, optional
        ``max_side`` (longest stored side, 0 = original size) and ``mask_foreground``.
    workers : int
        Processes reading images and masks (1 = in this process).
    progress : bool
        tqdm bar over the bytes of the JSON.

    Returns
    -------
    dict
        The report also written to ``out_dir/mimic_ils_import_report.json``: pairs read,
        imported, skipped, problems by kind, samples by split, the manifest path.

    Raises
    ------
    DatasetError
        If an input is missing (naming what to fetch), none of the first 20 distinct mask
        files the JSON names is under ``masks_dir`` (:func:`_check_masks_folder`), the
        JSON is malformed,
        ``max_side`` is below :data:`cxrils.io.base.MIN_IMAGE_SIDE` (and not 0), or
        ``out_dir`` was imported from another JSON or with another ``max_side``.
    """
    cfg = cfg or MimicIlsConfig()
    if 0 < cfg.max_side < MIN_IMAGE_SIDE:
        raise DatasetError(
            f"max_side {cfg.max_side}: images need at least {MIN_IMAGE_SIDE} px a side for the models (0 keeps them whole)"
        )
    json_path, images_dir, masks_dir, out = Path(json_path), Path(images_dir), Path(masks_dir), Path(out_dir)
    _check_inputs(json_path, images_dir, masks_dir)
    _check_masks_folder(json_path, masks_dir)
    provenance = {
        "source": SOURCE,
        "json": json_path.name,
        "json_sha256": sha256_file(json_path),
        "max_side": cfg.max_side,
        "mask_foreground": cfg.mask_foreground,
    }
    try:
        writer = (
            DatasetWriter(out, provenance)
            if shard_size is None
            else DatasetWriter(out, provenance, shard_size=shard_size)
        )
    except ProvenanceMismatch as err:
        raise ProvenanceMismatch(
            f"{err}. Resume only with the JSON and settings the import was started with; to start over "
            f"(e.g. after a run that failed on a broken JSON), delete {out} or import into a new folder (-o)"
        ) from None
    done = writer.done_ids()
    (out / PROBLEM_DIR).mkdir(exist_ok=True)
    run_problems: list[dict[str, Any]] = []
    stats: dict[str, Any] = {
        "samples": 0,
        "samples_skipped_done": 0,
        "pairs_imported": 0,
        "samples_imported": 0,
        "by_split": {},
    }
    seen: set[str] = set()
    # image file (_image_key) -> (release split, sample key) of the sample it was imported
    # with: first those an earlier run imported (all of them, wherever they come in the
    # JSON, so that a rerun never adds a second sample of an image already held), then
    # this run's, decided on success in JSON order
    imported_as: dict[str, tuple[str, str]] = _held_images(json_path, done) if done else {}

    def commit(job: _Job, result: _Result) -> None:
        image_id, split, x, records, problems = result
        if x is None or not records:
            run_problems.extend(problems)
            return
        image_path = str(job.item.get("image_path", ""))
        if _image_key(image_path) in imported_as:
            first_split, first_key = imported_as[_image_key(image_path)]
            why = (
                f"{image_path} was imported with sample {first_key!r} of {first_split} (skipped: one image "
                "in two samples would be in the dataset twice, perhaps in two splits)"
            )
            run_problems.append(_problem(job, "duplicate_image", why))
            return
        imported_as[_image_key(image_path)] = (job.release_split, job.sample_key)
        atomic_write_json(out / PROBLEM_DIR / f"{image_id}.json", problems)
        writer.commit_study(image_id, x, records)
        stats["pairs_imported"] += len(records)
        stats["samples_imported"] += 1
        stats["by_split"][split] = stats["by_split"].get(split, 0) + 1

    def jobs(fh: IO[bytes]) -> Iterator[_Job]:
        for rsplit, key, item in iter_samples(fh, str(json_path)):
            stats["samples"] += 1
            split = SPLIT_FROM_RELEASE.get(rsplit)
            job = _Job(
                split or "",
                str(rsplit),
                str(key),
                item,
                str(images_dir),
                str(masks_dir),
                cfg.max_side,
                cfg.mask_foreground,
            )
            if split is None:
                run_problems.append(
                    _problem(job, "unknown_split", f"split {rsplit!r} is not one of {sorted(SPLIT_FROM_RELEASE)}")
                )
                continue
            if not isinstance(item, dict):
                run_problems.append(_problem(job, "malformed_sample", "sample is not an object"))
                continue
            image_path = str(item.get("image_path", ""))
            image_id = image_id_for(job.sample_key, image_path)
            if image_id in seen:
                run_problems.append(_problem(job, "duplicate_sample", f"image id {image_id!r} already read (skipped)"))
                continue
            seen.add(image_id)
            if image_id in done:
                stats["samples_skipped_done"] += 1
                continue
            yield job

    try:
        with open(json_path, "rb") as fh:
            bar = _Progress(fh, json_path.stat().st_size, progress)
            try:
                _run(jobs(fh), commit, workers, lambda: bar.update(pairs=stats["pairs_imported"]))
            finally:
                bar.close()
        manifest = writer.finalize()
    finally:
        writer.close()  # release the folder's lock
    report = _write_report(out, run_problems, stats, manifest)
    return report


def _empty_mask_why(path: Path, foreground: int) -> str:
    """Why a positive pair's mask PNG read as empty: no pixel at all, or none of the
    foreground level (a 0/1 mask, a common way to save one, reads as empty: the release's
    masks are 0/255, as the authors' loader reads them, ``mask == 255``)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            peak = int(np.asarray(im.convert("L")).max(initial=0))
    except (OSError, ValueError):
        peak = 0
    if not 0 < peak < foreground:  # none at all, or lost in the resize to the stored size
        return "no foreground pixel at the stored size"
    return (
        f"no pixel of value {foreground}, its largest value is {peak}: the release's masks are 0/{foreground} "
        f"(a mask saved as 0/1 reads as empty)"
    )


def _image_key(image_path: str) -> str:
    """One spelling of a release ``image_path``: ``./p10//x.jpg`` and ``p10/x.jpg`` name
    one file."""
    return posixpath.normpath(image_path.replace("\\", "/"))


def _held_images(json_path: Path, done: set[str]) -> dict[str, tuple[str, str]]:
    """Image file (:func:`_image_key`) -> (release split, sample key) of every sample of
    the JSON that the dataset already holds (``done`` image ids): one streamed pass
    before a resumed import, the first such sample of a file in JSON order."""
    held: dict[str, tuple[str, str]] = {}
    seen: set[str] = set()
    with open(json_path, "rb") as fh:
        for rsplit, key, item in iter_samples(fh, str(json_path)):
            if rsplit not in SPLIT_FROM_RELEASE or not isinstance(item, dict):
                continue  # never imported (unknown_split, malformed_sample)
            image_path = str(item.get("image_path", ""))
            image_id = image_id_for(str(key), image_path)
            if image_id in seen:
                continue  # a repeated key is skipped (duplicate_sample): its image is another's
            seen.add(image_id)
            if image_id in done:
                held.setdefault(_image_key(image_path), (str(rsplit), str(key)))
    return held


def _run(jobs: Iterator[_Job], commit: Callable[..., Any], workers: int, tick: Callable[[], None]) -> None:
    """Process ``jobs`` and ``commit(job, result)`` each, in the jobs' order."""
    if workers <= 1:
        for job in jobs:
            commit(job, process_sample(job))
            tick()
        return
    window = 4 * workers
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending = []
        for job in jobs:
            pending.append((job, pool.submit(process_sample, job)))
            if len(pending) >= window:
                first, fut = pending.pop(0)
                commit(first, fut.result())
                tick()
        for job, fut in pending:
            commit(job, fut.result())
            tick()


def _write_report(
    out: Path, run_problems: list[dict[str, Any]], stats: dict[str, Any], manifest: Path
) -> dict[str, Any]:
    problems = list(run_problems)
    for p in sorted((out / PROBLEM_DIR).glob("*.json")):
        if p.name.startswith("."):
            continue
        try:
            problems += json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise DatasetError(f"{p}: unreadable problem list: {err}") from err
    problems.sort(key=lambda d: (d["split"], d["sample_key"], d["pair"], d["kind"]))
    by_kind: dict[str, int] = {}
    for problem in problems:
        by_kind[problem["kind"]] = by_kind.get(problem["kind"], 0) + 1
    manifest_data = json.loads(manifest.read_text(encoding="utf-8"))
    report = {
        "source": SOURCE,
        "samples_in_json": stats["samples"],
        "samples_imported_this_run": stats["samples_imported"],
        "pairs_imported_this_run": stats["pairs_imported"],
        "samples_already_done": stats["samples_skipped_done"],
        "records_in_dataset": manifest_data["n_records"],
        "images_in_dataset": manifest_data["n_images"],
        "records_by_split": manifest_data["counts"]["by_split"],
        "problems_by_kind": dict(sorted(by_kind.items())),
        "n_problems": len(problems),
        "problems_file": PROBLEMS_NAME,
        "manifest": str(manifest),
    }
    with atomic_path(out / PROBLEMS_NAME) as tmp:
        tmp.write_text("".join(json.dumps(p, sort_keys=True) + "\n" for p in problems), encoding="utf-8")
    atomic_write_text(out / REPORT_NAME, json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report
