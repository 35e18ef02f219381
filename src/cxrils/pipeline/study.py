"""One study through the stages: :class:`Pipeline` and :func:`process_study`.

Per image (paper section 3.1 and Appendix D):

0. Input: a row the reader could not use (``StudyInput.problem``) is excluded.
1. QC view (Appendix D.1): only frontal images (PA, AP) when ``cfg.qc.frontal_only``.
2. Report: a report over the length cap (``cfg.inputs``) is excluded or cut; a study
   whose report yielded no usable section is excluded (Appendix A.1).
3. ``x`` = the 8-bit image (uint8 (H, W)).
4. Anatomy on ``x``: lungs + heart give RadEdit's edit region (the paper uses
   HybridGNet here, section 3.1 step 2); organs that are not those of a frontal chest
   radiograph (``cxrils.vision.anatomy.frontal_plausibility``, ours) exclude the image.
   Where the backend gives both lung conventions (``AnatomyMasks.organs``), the visible
   lungs serve the organ role (plausibility, c4, CTR) and the whole lungs the rest (the
   edit region and the lungs of the anomaly map, so a retrocardiac lesion can be
   mapped, and the location masks).
5. Anomaly map: ``x_hat``, ``x_ano`` inside the edit region.
6. Location masks: anatomy on ``x_hat`` (the paper runs CXAS on the edited image,
   Appendix A.3; ``backends.anatomy_on_x_hat``) or on ``x`` by a second backend,
   cross-checked against step 4 (Appendix D.2; a discrepancy excludes the image);
   with one backend on ``x`` only, step 4's masks are used as they are.
7. Lesion boxes on ``x``.
8. Algorithm 1 + location verification -> :class:`~cxrils.types.StudyGrounding`.
9. Instruction-answer records (section 3.2), in the split of the image's patient
   (:func:`cxrils.dataset.assign_split` unless the input gave one); the study's
   absent-type negatives go to its first image that is not excluded (:class:`StudyResult`).

Each step is guarded: an exception becomes the study's exclusion reason
(``"error:<step>: <Type>: <message>"``) and never stops a run. Exclusion reasons
are ``"<category>: <detail>"``; the summary counts them by category.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from cxrils import vocab
from cxrils.config import Config
from cxrils.dataset import assign_split, image_relpath
from cxrils.io.base import image_too_small
from cxrils.pipeline.inputs import apply_report_cap
from cxrils.pipeline.stages import DEFAULT_STAGES, StageLoadError, StageProvider, resolve_stages
from cxrils.sources import StudyInput
from cxrils.sources.base import hide_uids
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox, StructuredReport, StudyGrounding
from cxrils.vision.anatomy import frontal_plausibility
from cxrils.vision.anatomy.base import AnatomySegmenter
from cxrils.vision.anomaly.base import AnomalyMapper
from cxrils.vision.batching import call_batch
from cxrils.vision.detection.base import LesionDetector

log = logging.getLogger(__name__)

#: Views that pass the frontal-only QC (Appendix D.1); one set for every stage.
ACCEPTED_VIEWS: frozenset[str] = vocab.FRONTAL_VIEWS


@dataclass
class StudyState:
    """A study part-way through the steps (what travels between Ray stages)."""

    study: StudyInput
    report: StructuredReport | None
    excluded: str | None = None
    x: np.ndarray | None = None
    anatomy_x: AnatomyMasks | None = None
    anomaly: AnomalyResult | None = None
    anatomy: AnatomyMasks | None = None
    boxes: list[LesionBox] = field(default_factory=list)


@dataclass
class StudyResult:
    """What the runner commits for one image.

    ``x`` (uint8 (H, W)) and ``records`` are None for an excluded image; ``stats``
    holds the counts the run summary adds up (see :mod:`cxrils.pipeline.summary`);
    ``grounding`` is what :func:`grounding_record` makes of the study's grounding
    (None for an excluded image), stored beside the records for review.

    The study's absent-type negatives (Appendix C.2: at most one per type per *study*)
    go to its first image in input order that is not excluded, which a worker cannot
    know (an earlier image of the study may be excluded by its pixels). So ``records``
    and ``stats`` hold them for the study's first image the input does not exclude
    (``StudyInput.first_of_study``), and not for a later image, whose
    ``carrying_study_negatives`` holds its records with them (no paraphrases yet); the
    runner, committing in input order, swaps those in
    (:meth:`Pipeline.carry_study_negatives`) when no earlier image of the study was
    committed unexcluded (:func:`cxrils.pipeline.runner.generate`). None for a first or
    an excluded image. With paraphrasing on, ``paraphrase_replies`` keeps the LLM's
    reply to each prompt the worker asked for it (prompt -> reply), so that the runner
    asks only about the records the kept variant does not share.
    """

    study_id: str
    image_id: str
    x: np.ndarray | None
    records: list[dict] | None
    excluded: str | None
    stats: dict[str, Any]
    grounding: dict | None = None
    carrying_study_negatives: list[dict] | None = None
    paraphrase_replies: dict[str, str] | None = None


def grounding_record(grounding: StudyGrounding, report: StructuredReport) -> dict:
    """JSON-ready account of how one image was grounded, stored as
    ``grounding/{image_id}.json`` in the dataset (:func:`cxrils.dataset.read_grounding`).

    :func:`cxrils.grounding.grounding_to_dict` (per finding: the structured finding,
    reported / grounded / empty lung-region labels (patient sides), every candidate
    box (x0, y0, x1, y1 in pixels of ``x``) with Algorithm 1's c1-c4 values and
    verdicts, the kept boxes, the drop reason) plus ``report``: the section the
    findings came from (``section_used``, ``section_text``). Report text stays in the
    dataset folder, as the records' ``sentence`` column does.
    """
    from cxrils.grounding import grounding_to_dict

    return {
        **grounding_to_dict(grounding),
        "report": {"section_used": report.section_used, "section_text": report.section_text},
    }


def _guarded(step: str) -> Callable:
    """Make ``step`` take one state or a list of them (a batch), skipping excluded
    states; an exception becomes the exclusion reason of the state it concerns (its
    image path shortened to the file name, DICOM UIDs hashed: the reason is written into
    the dataset). A
    batch that fails is run again image by image, so one bad image never excludes the
    rest of its batch (and every image ends as it would alone)."""

    def wrap(fn: Callable[[Pipeline, list[StudyState]], None]) -> Callable:
        def guard(self: Pipeline, batch: list[StudyState]) -> None:
            try:
                fn(self, batch)
            except StageLoadError:
                raise  # a configuration problem: stop the run
            except Exception as err:  # one bad study never stops the run
                if len(batch) > 1:
                    for state in batch:
                        guard(self, [state])
                    return
                state = batch[0]
                # the file's name for its path (no folder of this machine, no DICOM UID:
                # the reason is written into the dataset, third new-user trial)
                path = str(state.study.image_path)
                text = str(err).replace(path, Path(path).name) if path else str(err)
                state.excluded = f"error:{step}: {type(err).__name__}: {hide_uids(text)}"
                log.warning("%s: excluded: %s", state.study.image_id, state.excluded)

        def run(self: Pipeline, states: StudyState | list[StudyState]) -> StudyState | list[StudyState]:
            batch = [states] if isinstance(states, StudyState) else list(states)
            active = [s for s in batch if s.excluded is None]
            if active:
                guard(self, active)
            return states

        run.__name__ = fn.__name__
        run.__doc__ = fn.__doc__
        return run

    return wrap


class Pipeline:
    """The stages for one worker: model-backed stages are built on first use and
    kept, so each worker process (or Ray actor) loads each model once.

    Parameters
    ----------
    cfg : Config
        Thresholds and backend choices.
    stages : StageProvider or str, optional
        A provider object, or its import path (default :data:`DEFAULT_STAGES`).
    """

    def __init__(self, cfg: Config, stages: StageProvider | str = DEFAULT_STAGES):
        self.cfg = cfg
        self.stages = resolve_stages(stages) if isinstance(stages, str) else stages

    def _make(self, what: str, factory: Callable[[Config], Any], backend: str) -> Any:
        try:
            return factory(self.cfg)
        except Exception as err:
            raise StageLoadError(
                f"cannot load the {what} stage (backend {backend!r}): {type(err).__name__}: {err}"
            ) from err

    @cached_property
    def anatomy_segmenter(self) -> Any:
        """Anatomy segmenter, loaded once; :class:`StageLoadError` if it cannot be."""
        return self._make("anatomy", self.stages.make_anatomy, self.cfg.backends.anatomy)

    @cached_property
    def edit_region_segmenter(self) -> Any:
        """Segmenter of ``x`` for the edit region (``backends.anatomy_edit_region``;
        the anatomy segmenter itself when that is empty or the same backend)."""
        name = self.cfg.backends.anatomy_edit_region
        if not name or name == self.cfg.backends.anatomy:
            return self.anatomy_segmenter
        cfg = copy.deepcopy(self.cfg)
        cfg.backends.anatomy = name
        return self._make("anatomy (edit region)", lambda _: self.stages.make_anatomy(cfg), name)

    @cached_property
    def anatomy_on_x_hat(self) -> bool:
        """Whether location masks come from ``x_hat`` (``backends.anatomy_on_x_hat``).

        Raises
        ------
        StageLoadError
            For a value other than yes, no, auto.
        """
        value = self.cfg.backends.anatomy_on_x_hat.strip().lower()
        if value not in ("yes", "no", "auto"):
            raise StageLoadError(f"backends.anatomy_on_x_hat must be yes, no or auto, got {value!r}")
        return value == "yes" or (value == "auto" and self.cfg.backends.anomaly == "radedit")

    @property
    def _second_anatomy(self) -> bool:
        name = self.cfg.backends.anatomy_edit_region
        return self.anatomy_on_x_hat or bool(name and name != self.cfg.backends.anatomy)

    @cached_property
    def anomaly_mapper(self) -> Any:
        """Anomaly mapper, loaded once; :class:`StageLoadError` if it cannot be."""
        return self._make("anomaly", self.stages.make_anomaly, self.cfg.backends.anomaly)

    @cached_property
    def detector(self) -> Any:
        """Lesion detector, loaded once; :class:`StageLoadError` if it cannot be."""
        return self._make("detection", self.stages.make_detector, self.cfg.backends.detector)

    @cached_property
    def paraphrase_complete(self) -> Callable[[str], str] | None:
        """``prompt -> text`` of the ``llm`` backend when ``instructions.paraphrase`` is on
        (Appendix C.3), else None; :class:`StageLoadError` if no LLM is configured."""
        if not self.cfg.instructions.paraphrase:
            return None

        def factory(cfg: Config) -> Callable[[str], str]:
            from cxrils.report.llm import client_from_config

            client = client_from_config(cfg)
            return lambda prompt: (
                client.complete([{"role": "user", "content": prompt}], max_tokens=cfg.backends.llm_max_tokens).text
            )

        return self._make("paraphrase", factory, "llm")

    def load_models(self, *, paraphrase: bool = True) -> None:
        """Build every model-backed stage now (raises :class:`StageLoadError`);
        ``paraphrase=False`` leaves out the paraphrasing LLM (image side only)."""
        self.edit_region_segmenter, self.anatomy_segmenter, self.anomaly_mapper, self.detector  # noqa: B018
        self.anatomy_on_x_hat  # noqa: B018
        if paraphrase:
            self.paraphrase_complete  # noqa: B018

    # ------------------------------------------------------------ text side

    def structure(self, studies: list[StudyInput]) -> dict[tuple[str, str], StructuredReport]:
        """Structure the reports of ``studies`` in one batch (each distinct
        ``(study_id, text)`` once), keyed by ``(study_id, text)``.

        A report over the length cap (``cfg.inputs``) becomes a StructuredReport with
        ``excluded = "too long: ..."``, or with ``report_over_cap = "truncate"`` is
        structured cut, with a ``"truncated: ..."`` flag. Rows with an input
        ``problem`` are not structured (their key maps to an excluded placeholder).
        When the batch fails, reports are structured one by one and a report the
        structurer fails on becomes a StructuredReport with ``excluded =
        "error:report: ..."``.

        Raises
        ------
        StageLoadError
            If every report fails (a broken or unreachable structurer, not bad
            reports): nothing is committed, so a rerun retries them.
        """
        out: dict[tuple[str, str], StructuredReport] = {}
        todo: dict[tuple[str, str], tuple[str, list[str]]] = {}  # key -> (text to structure, flags)
        inputs = self.cfg.inputs
        for s in studies:
            key = (s.study_id, s.report)
            if s.problem is not None:
                out.setdefault(key, StructuredReport(s.study_id, None, "", excluded=f"input: {hide_uids(s.problem)}"))
                continue
            if key in todo:
                continue
            out.pop(key, None)
            text, note = apply_report_cap(s.report, inputs, f"study {s.study_id}" + (f", {s.where}" if s.where else ""))
            if text is None:
                out[key] = StructuredReport(s.study_id, None, "", excluded=note)
            else:
                todo[key] = (text, [note] if note else [])
        keys = list(todo)
        items = [(k[0], todo[k][0]) for k in keys]
        try:
            reports = list(self.stages.structure_reports(items, self.cfg)) if items else []
            if len(reports) != len(keys):
                raise RuntimeError(f"structurer returned {len(reports)} reports for {len(keys)}")
        except Exception as err:
            log.warning("batch report structuring failed (%s); structuring one by one", err)
            reports = []
            for item in items:
                try:
                    reports.append(next(iter(self.stages.structure_reports([item], self.cfg))))
                except Exception as one:
                    reports.append(
                        StructuredReport(item[0], None, "", excluded=f"error:report: {type(one).__name__}: {one}")
                    )
            if all(r.excluded and r.excluded.startswith("error:report") for r in reports):
                raise StageLoadError(
                    f"report structuring (backend {self.cfg.backends.report_structurer!r}) failed "
                    f"for every report, e.g. {reports[0].excluded}"
                ) from err
        for key, report in zip(keys, reports):
            flags = todo[key][1]
            if flags:
                report.flags = list(report.flags) + flags
                log.warning("%s", flags[0])
            out[key] = report
        return out

    # ------------------------------------------------------------ image side

    def start(self, study: StudyInput, report: StructuredReport | None) -> StudyState:
        """Steps 1-3: view QC, report exclusion, image loading."""
        state = StudyState(study=study, report=report)
        if study.problem is not None:
            state.excluded = f"input: {hide_uids(study.problem)}"
            return state
        if report is None:
            state.report = self.structure([study])[(study.study_id, study.report)]
        if self.cfg.qc.frontal_only and study.view is not None and study.view not in ACCEPTED_VIEWS:
            state.excluded = f"view_not_frontal: {study.view}"
        elif state.report.excluded:
            reason = state.report.excluded
            state.excluded = reason if reason.startswith("error:") else f"report: {reason}"
        else:
            self._load(state)
        return state

    @_guarded("image")
    def _load(self, states: list[StudyState]) -> None:
        (state,) = states  # start() loads one study at a time
        from_file_view: str | None
        x, from_file_view = self.stages.load_image(state.study.image_path, self.cfg)
        if not (isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype == np.uint8 and x.size):
            raise ValueError(
                f"{state.study.image_path}: image loader returned {type(x).__name__} "
                f"{getattr(x, 'shape', '')} {getattr(x, 'dtype', '')}, expected uint8 (H, W)"
            )
        small = image_too_small(x.shape)  # the rule of `cxrils predict` and the service
        if small:
            state.excluded = f"image_too_small: {small}"
            return
        view = (from_file_view or "").strip().upper()
        if self.cfg.qc.frontal_only and state.study.view is None and view and view not in ACCEPTED_VIEWS:
            state.excluded = f"view_not_frontal: {view}"
            return
        state.x = x

    @property
    def image_steps(self) -> tuple[Callable, ...]:
        """Steps 4-7 in order. Each takes a state or a list of states (a batch, whose
        model calls go through the backends' batch methods) and returns what it was
        given; a failure becomes the state's exclusion, an excluded state passes
        through unchanged, and every state ends as it would in a batch of one."""
        return (self.run_anatomy_x, self.run_anomaly, self.run_anatomy_x_hat, self.run_detector)

    @_guarded("anatomy")
    def run_anatomy_x(self, states: list[StudyState]) -> None:
        """Step 4: anatomy of ``x`` (edit region of the anomaly mapper), and its
        frontal-view plausibility (``cfg.qc``): implausible organs (a lateral image
        without a view, a failed segmentation) exclude the image as ``qc_anatomy``."""
        masks = call_batch(self.edit_region_segmenter, "segment_batch", AnatomySegmenter, [s.x for s in states])
        for state, m in zip(states, masks, strict=True):
            state.anatomy_x = m
            reason = frontal_plausibility(m, self.cfg.qc)
            if reason:
                state.excluded = f"qc_anatomy: {reason}"

    @_guarded("anomaly")
    def run_anomaly(self, states: list[StudyState]) -> None:
        """Step 5: anomaly map inside lungs + heart."""
        # Only the lungs are modelled as lung tissue: without ``lungs`` the builtin mapper
        # would flag the normal heart as anomalous (RadEdit ignores it and edits the region).
        regions = [s.anatomy_x.union(vocab.EDIT_REGION_LABELS) for s in states]
        lungs = [s.anatomy_x.union(("right lung", "left lung")) for s in states]
        results = call_batch(
            self.anomaly_mapper, "map_batch", AnomalyMapper, [s.x for s in states], regions, lungs=lungs
        )
        for state, result in zip(states, results, strict=True):
            state.anomaly = result

    @_guarded("anatomy")
    def run_anatomy_x_hat(self, states: list[StudyState]) -> None:
        """Step 6: the location masks (anatomy of ``x_hat``, or of ``x`` by the
        anatomy backend) and their cross-check against step 4 (Appendix D.2). With a
        single segmentation (same backend, ``x`` only) there is nothing to cross-check."""
        if not self._second_anatomy:
            for state in states:
                state.anatomy = state.anatomy_x
            return
        sources = [s.anomaly.x_hat if self.anatomy_on_x_hat else s.x for s in states]
        masks = call_batch(self.anatomy_segmenter, "segment_batch", AnatomySegmenter, sources)
        for state, m in zip(states, masks, strict=True):
            state.anatomy = m
            reason = self.stages.cross_check(state.anatomy_x, m, self.cfg)
            if reason:
                state.excluded = f"qc_crosscheck: {reason}"

    @_guarded("detection")
    def run_detector(self, states: list[StudyState]) -> None:
        """Step 7: lesion boxes on ``x``."""
        boxes = call_batch(
            self.detector,
            "detect_batch",
            LesionDetector,
            [s.x for s in states],
            anomalies=[s.anomaly for s in states],
            anatomies=[s.anatomy for s in states],
        )
        for state, found in zip(states, boxes, strict=True):
            state.boxes = list(found)

    def ground(self, state: StudyState) -> StudyGrounding | None:
        """Step 8: Algorithm 1 and location verification (paper section 3.1) on a
        study that passed steps 1-7. Returns None when the study is or becomes
        excluded (``state.excluded`` says why; a QC exclusion of the grounding still
        returns it); never raises."""
        if state.excluded is not None:
            return None
        try:
            grounding = self.stages.ground_study(
                study_id=state.study.study_id,
                image_id=state.study.image_id,
                x=state.x,
                report=state.report,
                anatomy=state.anatomy,
                anomaly=state.anomaly,
                boxes=state.boxes,
                cfg=self.cfg,
                organs=state.anatomy_x.organs(),
            )
        except Exception as err:  # one bad study never stops the run
            state.excluded = f"error:grounding: {type(err).__name__}: {err}"
            log.warning("%s: excluded: %s", state.study.image_id, state.excluded)
            return None
        if grounding.excluded:
            state.excluded = f"qc_grounding: {grounding.excluded}"
        truncated = [f for f in state.report.flags if f.startswith("truncated: ")]
        if truncated:  # recorded in every record's provenance
            grounding.provenance = {**grounding.provenance, "report": truncated[0]}
        return grounding

    def finish(self, state: StudyState) -> StudyResult:
        """Steps 8-9: Algorithm 1 and records; raises only :class:`StageLoadError` (the
        paraphrasing LLM cannot be built: a configuration problem stops the run).

        A later image of its study (not ``first_of_study``) gets its records twice,
        without and with the study's absent-type negatives (``carrying_study_negatives``
        of :class:`StudyResult`, not paraphrased: the runner seldom keeps them)."""
        from cxrils.pipeline.summary import study_stats

        grounding = self.ground(state)
        records: list[dict] | None = None
        carrying: list[dict] | None = None
        first = state.study.first_of_study
        replies: dict[str, str] | None = None if first or self.paraphrase_complete is None else {}
        doc: dict | None = None
        if state.excluded is None:
            try:
                records = self._records(state, grounding, absent_negatives=first, replies=replies)
                if not first:
                    carrying = self._records(state, grounding, absent_negatives=True, paraphrase=False)
                doc = grounding_record(grounding, state.report)  # stored beside the records for review
            except StageLoadError:
                raise
            except Exception as err:  # one bad study never stops the run
                state.excluded = f"error:records: {type(err).__name__}: {err}"
                log.warning("%s: excluded: %s", state.study.image_id, state.excluded)
                records = carrying = None
        ok = state.excluded is None
        return StudyResult(
            study_id=state.study.study_id,
            image_id=state.study.image_id,
            x=state.x if ok else None,
            records=records if ok else None,
            excluded=state.excluded,
            stats=study_stats(state.report, grounding if ok else None, records if ok else None, state.excluded),
            grounding=doc if ok else None,
            carrying_study_negatives=carrying if ok else None,
            paraphrase_replies=replies if ok and carrying is not None else None,
        )

    def _records(
        self,
        state: StudyState,
        grounding: StudyGrounding,
        *,
        absent_negatives: bool,
        paraphrase: bool = True,
        replies: dict[str, str] | None = None,
    ) -> list[dict]:
        """Step 9: the instruction-answer records of a grounded image (section 3.2),
        with the study's absent-type negatives or without, then, with ``paraphrase``,
        their paraphrases (:meth:`with_paraphrases`, with ``replies``)."""
        study = state.study
        # By patient (split.by = "patient", an empty id is a SplitError) or, when the
        # input says each study is a patient, by study: never by image.
        key = study.patient_id if self.cfg.split.by == "patient" else study.study_id
        split = study.split or assign_split(key, self.cfg)
        records = self.stages.generate_records(
            grounding,
            split=split,
            patient_id=study.patient_id,
            image_path=image_relpath(study.image_id),
            cfg=self.cfg,
            absent_negatives=absent_negatives,
        )
        return self.with_paraphrases(records, replies) if paraphrase else records

    def with_paraphrases(self, records: list[dict], replies: dict[str, str] | None = None) -> list[dict]:
        """``records`` and, when ``cfg.instructions.paraphrase`` is on (Appendix C.3, off
        by default), their paraphrases by the LLM (:func:`cxrils.instructions.paraphrase_records`);
        raises what the LLM raises. ``replies`` (prompt -> reply), when given, answers
        the prompts it holds and keeps the LLM's replies to the others."""
        complete = self.paraphrase_complete
        if complete is None:
            return records
        from cxrils.instructions import paraphrase_records

        if replies is not None:
            ask, known = complete, replies

            def complete(prompt: str) -> str:
                if prompt not in known:
                    known[prompt] = ask(prompt)
                return known[prompt]

        return records + paraphrase_records(records, complete, self.cfg)

    def carry_study_negatives(self, result: StudyResult) -> None:
        """Make ``result`` (a later image of its study, not excluded) carry its study's
        absent-type negatives: its records become ``carrying_study_negatives`` with
        their paraphrases (the LLM is asked here, in the runner's process), its counts
        follow; the prompts the worker asked (``paraphrase_replies``) are not asked
        again. A paraphrasing error excludes the image as ``error:records`` (the
        negatives then pass to the study's next image). Raises only
        :class:`StageLoadError`."""
        from cxrils.pipeline.summary import record_counts

        carrying, result.carrying_study_negatives = result.carrying_study_negatives, None
        replies, result.paraphrase_replies = result.paraphrase_replies, None
        if carrying is None or result.excluded is not None:
            return
        try:
            records = self.with_paraphrases(carrying, replies)
        except StageLoadError:
            raise
        except Exception as err:  # one bad study never stops the run
            result.excluded = f"error:records: {type(err).__name__}: {err}"
            log.warning("%s: excluded: %s", result.image_id, result.excluded)
            result.stats = {**result.stats, "excluded": result.excluded, "reported": {}, "grounded": {}, "records": {}}
            result.x, result.records, result.grounding = None, None, None
            return
        result.records = records
        result.stats = {**result.stats, "records": record_counts(records)}

    def process_study(self, study: StudyInput, report: StructuredReport | None = None) -> StudyResult:
        """All steps for one image; an exception in any step becomes an exclusion.

        Parameters
        ----------
        study : StudyInput
        report : StructuredReport, optional
            The study's structured report when the text side ran in a batch;
            structured here otherwise.
        """
        state = self.start(study, report)
        for step in self.image_steps:
            state = step(state)
        return self.finish(state)
