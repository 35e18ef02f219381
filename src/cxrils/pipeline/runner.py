"""Run the pipeline over an input and write a dataset, resumably.

:func:`generate` is what ``cxrils generate`` does:

1. read the input (first ``limit`` studies in input order);
2. skip the images the dataset writer has already committed (``done_ids()``);
3. structure all remaining reports in one batch in this process (text side);
4. run the image side with the chosen runner: ``local`` (this process, or a pool
   of ``workers`` processes, each building its own :class:`Pipeline` once) or
   ``ray`` (:mod:`cxrils.pipeline.ray_runner`);
5. commit each image here, in input order: first its summary counts
   (``DATASET/pipeline/studies/{image_id}.json``, atomic), then the image and its
   records through ``DatasetWriter.commit_study`` (atomic per study); a study's
   absent-type negatives go to its first image committed unexcluded
   (:class:`~cxrils.pipeline.study.StudyResult`, Appendix C.2);
6. finalize the dataset and write ``DATASET/generate_summary.json``.

A kill at any moment loses at most the images not yet committed; rerunning the
same command commits the rest and produces the same dataset as an uninterrupted
run, because every image's result depends only on the image, its report, the
configuration and, for the study's absent-type negatives, whether an earlier image
of its study was committed unexcluded (read back from the dataset on a resume). The dataset folder is locked while a run writes it, and a rerun with
a different provenance (configuration, stage provider, code version, weight files:
:func:`cxrils.pipeline.provenance.run_provenance`) is refused with what changed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import multiprocessing as mp
import numbers
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cxrils.config import Config, config_from_dict
from cxrils.fsutil import atomic_write_json
from cxrils.pipeline.inputs import check_splits
from cxrils.pipeline.provenance import run_provenance
from cxrils.pipeline.ray_runner import check_ray_address, run_ray
from cxrils.pipeline.stages import DEFAULT_STAGES, RunError, resolve_stages
from cxrils.pipeline.study import Pipeline, StudyResult
from cxrils.pipeline.summary import summarize
from cxrils.sources import StudyInput, input_excludes, read_inputs
from cxrils.types import StructuredReport

log = logging.getLogger(__name__)

RUNNERS: tuple[str, ...] = ("local", "ray")
SUMMARY_NAME = "generate_summary.json"
_STATE_DIR = "pipeline"


@dataclass
class RunState:
    """The pipeline's own files inside a dataset folder: one counts file per committed
    image (``pipeline/studies/{image_id}.json``)."""

    out_dir: Path

    @property
    def studies_dir(self) -> Path:
        """The folder of the per-image counts files."""
        return self.out_dir / _STATE_DIR / "studies"

    def check_input(self, studies: list[StudyInput], done: set[str], frontal_only: bool = True) -> dict[str, str]:
        """The SHA-256 of each study of the input, after checking that the images already
        done are all in it, unchanged.

        A study's SHA-256 covers its image, study and patient ids, report text, view,
        split, whether it is its study's first image the input does not exclude, and the
        ids of its study's images before it in the input that the input does not exclude
        (:func:`cxrils.sources.input_excludes` with ``frontal_only``: which image carries
        the study's absent-type negatives depends on those; not the image path, so a
        moved input folder resumes); each done image's is kept in its counts file
        (``input_sha256``). The input may hold more images than the first run (a raised
        ``--limit``, a download that grew), never fewer or edited ones, nor a new image
        of a done study before a done one (unless the input excludes one of the two).
        Images done before this record are not checked.

        Raises
        ------
        RunError
            If a done image is not in the input, or its study differs: the dataset would
            mix two inputs (and its patient-level splits were checked on each alone); or
            a done image's counts file cannot be read.
        """
        # study id -> running SHA-256 of its image ids so far that the input does not exclude
        chain: dict[str, str] = {}
        digests = {}
        for st in studies:
            if input_excludes(st, frontal_only):  # never carries: what comes before it does not matter
                digests[st.image_id] = _study_sha256(st, "")
                continue
            earlier = chain.get(st.study_id, "")
            digests[st.image_id] = _study_sha256(st, earlier)
            chain[st.study_id] = hashlib.sha256(f"{earlier}\0{st.image_id}".encode()).hexdigest()
        missing = sorted(done - digests.keys())
        changed = []
        for i in sorted(done & digests.keys()):
            try:
                was = (self.load(i) or {}).get("input_sha256", digests[i])
            except (OSError, ValueError, AttributeError) as err:  # AttributeError: JSON, not an object
                raise RunError(f"{self.studies_dir / (i + '.json')}: unreadable counts file ({err})") from None
            if was != digests[i]:
                changed.append(i)
        how = "Resume with the input it was started with, or write to a new folder (-o)"
        if missing:
            raise RunError(
                f"cannot resume: {self.out_dir} holds {len(missing)} images this input does not have "
                f"(e.g. {missing[0]}): it was made from another input. {how}"
            )
        if changed:
            raise RunError(
                f"cannot resume: {len(changed)} images already done in {self.out_dir} have another study in "
                f"this input (e.g. {changed[0]}: its report, ids, view or split changed, or another image of its study "
                f"now comes before it). {how}"
            )
        return digests

    def save(self, result: StudyResult, input_sha256: str) -> None:
        """Write the committed image's counts file (atomically) with the SHA-256 of its input."""
        atomic_write_json(
            self.studies_dir / f"{result.image_id}.json", {**result.stats, "input_sha256": input_sha256}, indent=None
        )

    def remove_stale_temporaries(self) -> None:
        """Delete temporary files a killed run left behind (``cxrils.fsutil`` names
        them ``.{name}.*``); the files they were meant to replace are intact."""
        if self.studies_dir.is_dir():
            for tmp in self.studies_dir.glob(".*"):
                tmp.unlink(missing_ok=True)

    def load(self, image_id: str) -> dict[str, Any] | None:
        """The counts file of a committed image, None when it has none."""
        path = self.studies_dir / f"{image_id}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# ------------------------------------------------------------------ local runner

_WORKER: Pipeline | None = None


def _init_worker(cfg_dict: dict, stages: str, threads: int) -> None:
    """Process-pool initializer: limit threads, build this worker's Pipeline once."""
    global _WORKER
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    _WORKER = Pipeline(config_from_dict(cfg_dict), stages)  # models load on the first study


def _work(study: StudyInput, report: StructuredReport) -> StudyResult:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.process_study(study, report)


def run_local(
    studies: list[StudyInput],
    reports: dict[tuple[str, str], StructuredReport],
    cfg: Config,
    *,
    stages: str = DEFAULT_STAGES,
    workers: int = 1,
    pipeline: Pipeline | None = None,
) -> Iterator[StudyResult]:
    """Yield one :class:`StudyResult` per study, in the order of ``studies``.

    ``workers <= 1`` runs in this process (with ``pipeline`` if given); otherwise a
    pool of ``workers`` spawned processes, each with its own :class:`Pipeline`, at
    most ``4 * workers`` studies in flight.

    Raises
    ------
    RunError
        If a worker process dies (e.g. killed for memory); committed studies stay.
    """
    if workers <= 1:
        pipe = pipeline or Pipeline(cfg, stages)
        pipe.load_models()
        for s in studies:
            yield pipe.process_study(s, reports[(s.study_id, s.report)])
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=mp.get_context("spawn"),
        initializer=_init_worker,
        initargs=(cfg.to_dict(), stages, threads),
    ) as pool:
        pending: deque[tuple[StudyInput, Future]] = deque()
        it = iter(studies)
        for s in itertools.islice(it, 4 * workers):
            pending.append((s, pool.submit(_work, s, reports[(s.study_id, s.report)])))
        while pending:
            s, fut = pending.popleft()
            try:
                result = fut.result()
            except BrokenProcessPool as err:
                raise RunError(
                    f"a worker process died while processing {s.image_id} ({err}); "
                    "finished studies are committed: rerun the same command to resume"
                ) from err
            nxt = next(it, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(_work, nxt, reports[(nxt.study_id, nxt.report)])))
            yield result


# ------------------------------------------------------------------ generate


def _commit(writer: Any, state: RunState, result: StudyResult, input_sha256: str) -> bool:
    """Save the image's counts, then commit it; a commit the writer rejects (records
    that do not fit the schema) is committed as an exclusion instead. True when the
    image was committed unexcluded."""
    state.save(result, input_sha256)
    try:
        writer.commit_study(
            result.image_id, result.x, result.records, excluded=result.excluded, grounding=result.grounding
        )
    except ValueError as err:  # cxrils.dataset.DatasetError
        if result.excluded is not None:
            raise
        log.warning("%s: commit rejected: %s", result.image_id, err)
        result.excluded = f"error:commit: {type(err).__name__}: {err}"
        result.stats = {**result.stats, "excluded": result.excluded, "reported": {}, "grounded": {}, "records": {}}
        result.x, result.records, result.grounding = None, None, None
        state.save(result, input_sha256)
        writer.commit_study(result.image_id, None, None, excluded=result.excluded)
    return result.excluded is None


def _study_sha256(st: StudyInput, earlier: str) -> str:
    """SHA-256 of what identifies a study of the input, with ``earlier`` the running
    SHA-256 of the ids of its study's images before it that the input does not exclude
    ("" for an image the input excludes; :meth:`RunState.check_input`)."""
    h = hashlib.sha256()
    fields = (st.image_id, st.study_id, st.patient_id, st.report, st.view or "", st.split or "")
    for v in (*fields, str(st.first_of_study), earlier):
        h.update(v.encode("utf-8") + b"\0")
    return h.hexdigest()


def _open_writer(out_dir: Path, cfg: Config, stages: str) -> Any:
    """The dataset writer (holding the folder's lock) with this run's provenance.

    Raises
    ------
    RunError
        If another process writes the folder, or it was started with another
        provenance (the message says what changed and how to start over).
    """
    from cxrils.dataset import DatasetError, DatasetWriter, ProvenanceMismatch

    provenance = run_provenance(cfg, stages, resolve_stages(stages))
    try:
        # the checkout's commit changes with unrelated files; code_sha256 identifies the package code
        return DatasetWriter(out_dir, provenance, informative=("git_commit",))
    except ProvenanceMismatch as err:
        raise RunError(
            f"cannot resume: {err}. Resume only with the code, configuration (--config, --set), "
            f"stage provider (--stages) and weight files it was started with; to start over, delete "
            f"{out_dir} or write to a new folder (-o)"
        ) from None
    except DatasetError as err:
        raise RunError(str(err)) from None


def generate(
    input_path: str | Path,
    out_dir: str | Path,
    cfg: Config,
    *,
    runner: str = "local",
    workers: int = 1,
    limit: int | None = None,
    stages: str = DEFAULT_STAGES,
    progress: Callable[[int, int], Any] | None = None,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Generate (or resume) a dataset from an input; return the run summary.

    Parameters
    ----------
    input_path : path
        MIMIC-CXR folder, IU X-ray folder or generic CSV (:mod:`cxrils.sources`).
    out_dir : path
        Dataset folder; created, or resumed when it holds a partial run.
    cfg : Config
    runner : {"local", "ray"}
    workers : int
        Local: worker processes (<= 1: this process). Ray: actors per model-backed stage.
    limit : int, optional
        Only the first ``limit`` studies (images) of the input, in input order. Images a
        resumed folder already holds beyond them (an earlier run with a higher limit)
        stay, and the summary counts them (with a warning).
    stages : str
        Stage provider import path (:mod:`cxrils.pipeline.stages`).
    progress : callable, optional
        Called as ``progress(n_done, n_total)`` after each committed image.
    ray_address : str, optional
        Ray cluster address for ``runner="ray"`` (default: start a local instance).

    Returns
    -------
    dict
        :func:`cxrils.pipeline.summary.summarize` of all images of the input
        (this run's and earlier runs'), plus ``input``, ``dataset``, ``runner``.

    Raises
    ------
    InputError
        For an unreadable input, images without a patient id (``cfg.split.by =
        "patient"``) or a patient in two splits (:func:`~cxrils.pipeline.inputs.check_splits`).
    RunError
        For a ``cfg`` that is no Config, an unknown runner, a negative ``limit``, a ``ray_address`` nothing answers at, a folder another
        process writes, a provenance mismatch on
        resume (configuration, stages, code or weights), an input without an image already
        done or with it edited (:meth:`RunState.check_input`), or a dead worker.
    """
    if runner not in RUNNERS:
        raise RunError(f"unknown runner {runner!r}; choose one of {list(RUNNERS)}")
    if not isinstance(cfg, Config):
        raise RunError(
            f"cfg must be a cxrils.config.Config (Config(), or load_config(path, overrides)), got {type(cfg).__name__}"
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 0):
        raise RunError(f"limit must be an integer >= 0 (0 takes none), got {limit!r}")
    if runner == "ray" and ray_address is not None:
        check_ray_address(ray_address)  # before the text side, which may take hours with an LLM
    out = Path(out_dir)
    # Splits are checked on the whole input, so a patient's split never depends on --limit.
    studies_all = check_splits(
        read_inputs(input_path, inputs=cfg.inputs, frontal_only=cfg.qc.frontal_only), input_path, cfg.split.by
    )
    studies = studies_all[:limit] if limit is not None else studies_all
    state = RunState(out)
    with _open_writer(out, cfg, stages) as writer:
        state.remove_stale_temporaries()
        done = set(writer.done_ids())
        digests = state.check_input(studies_all, done, cfg.qc.frontal_only)
        # A resume with a lower --limit still counts every image the folder holds:
        # the summary describes the dataset, not this run's slice of the input.
        beyond = [s for s in studies_all[len(studies) :] if s.image_id in done]
        if beyond:
            log.warning(
                "%s already holds %d images beyond the first %d of the input; the summary counts them too",
                out,
                len(beyond),
                len(studies),
            )
        counts = _generate(
            studies + beyond,
            digests,
            writer,
            state,
            cfg,
            runner=runner,
            workers=workers,
            stages=stages,
            progress=progress,
            ray_address=ray_address,
        )
        # Names only: the summary travels with the dataset, and a folder path of this
        # machine (a user's home) is no part of it.
        names = (Path(os.path.abspath(input_path)).name, Path(os.path.abspath(out)).name)  # "." has a name too
        summary = {"input": names[0], "dataset": names[1], "runner": runner, **counts}
        atomic_write_json(out / SUMMARY_NAME, summary)
    return summary


def _generate(
    studies: list[StudyInput],
    digests: dict[str, str],
    writer: Any,
    state: RunState,
    cfg: Config,
    *,
    runner: str,
    workers: int,
    stages: str,
    progress: Callable[[int, int], Any] | None,
    ray_address: str | None,
) -> dict[str, Any]:
    """The body of :func:`generate`, with the writer open (and the folder locked):
    process and commit what is not done yet, finalize, return the counts of all
    ``studies``."""
    done = set(writer.done_ids())
    todo = [s for s in studies if s.image_id not in done]
    # The studies whose absent-type negatives an image already holds: the done images of
    # a study that can carry them come before its todo images (check_input refuses an
    # input where one does not), and were committed in order.
    need = {s.study_id for s in todo}
    excluded = writer.exclusions()
    carried = {s.study_id for s in studies if s.image_id in done and s.study_id in need and s.image_id not in excluded}
    n_total, n_done = len(studies), len(studies) - len(todo)
    log.info("%d images in input, %d already committed, %d to process", n_total, n_done, len(todo))
    if progress:
        progress(n_done, n_total)
    if todo:
        pipeline = Pipeline(cfg, stages)
        reports = pipeline.structure(todo)
        if runner == "local":
            results: Iterable[StudyResult] = run_local(
                todo, reports, cfg, stages=stages, workers=workers, pipeline=pipeline
            )
        else:
            results = run_ray(todo, reports, cfg, stages=stages, workers=workers, address=ray_address)
        for result in results:
            if result.study_id not in carried:
                pipeline.carry_study_negatives(result)
            result.carrying_study_negatives = result.paraphrase_replies = None
            if _commit(writer, state, result, digests[result.image_id]):
                carried.add(result.study_id)
            n_done += 1
            if progress:
                progress(n_done, n_total)
    writer.finalize()
    stats = []
    missing = 0
    for s in studies:
        st = state.load(s.image_id)
        if st is None:
            missing += 1
        else:
            stats.append(st)
    summary = summarize(stats)
    if missing:
        summary["studies"]["without_counts"] = missing
    return summary
