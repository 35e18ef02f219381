"""The stage implementations the pipeline calls, behind one replaceable object.

A *stage provider* builds the model-backed stages (anatomy segmenter, anomaly
mapper, lesion detector) and gives the plain functions (report structuring, image
loading, anatomy cross-check, Algorithm 1, instruction generation). Split
assignment is not a stage: the pipeline always splits by patient
(:func:`cxrils.dataset.assign_split`), whatever the provider.
:class:`BuiltinStages` serves the stages from the cxrils stage packages with the
backends named in ``cfg.backends``. Another provider can be named on the
command line (``cxrils generate --stages package.module:Name``) to plug in other
implementations; it is resolved by import path in every worker, so it must be an
importable module-level class or object.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from cxrils.config import Config
from cxrils.types import AnatomyMasks, AnomalyResult, LesionBox, StructuredReport, StudyGrounding

if TYPE_CHECKING:  # the stage packages load only when a stage is made (Ray actors stay light)
    from cxrils.registry import Registry
    from cxrils.vision.anatomy import AnatomySegmenter
    from cxrils.vision.anomaly import AnomalyMapper
    from cxrils.vision.detection import LesionDetector

#: The default provider's import path.
DEFAULT_STAGES = "cxrils.pipeline.stages:BuiltinStages"


class StageLoadError(RuntimeError):
    """A stage could not be built (missing weights, bad backend name...): a
    configuration problem that stops the run, unlike a per-study failure."""


class RunError(RuntimeError):
    """A run that cannot start or continue (message says why and what to do). Defined
    here, below both runners (:mod:`cxrils.pipeline.runner`,
    :mod:`cxrils.pipeline.ray_runner`), so that they need not import each other."""


class StageProvider(Protocol):
    """What the pipeline needs from the stages; ``--stages module:Name`` swaps in another
    implementation (:class:`BuiltinStages` is the default). Sides are the patient's:
    on a frontal image the patient's right lung lies on the image's left."""

    def structure_reports(self, items: Iterable[tuple[str, str]], cfg: Config) -> Iterator[StructuredReport]:
        """One :class:`StructuredReport` per ``(study_id, report_text)``, in order."""
        ...

    def load_image(self, path: Path, cfg: Config) -> tuple[np.ndarray, str | None]:
        """``(x, view)``: the 8-bit image uint8 (H, W) and the file's view position
        ("PA", "AP", ... or None); raises on an unreadable file."""
        ...

    def make_anatomy(self, cfg: Config) -> AnatomySegmenter:
        """An :class:`~cxrils.vision.anatomy.AnatomySegmenter`: ``segment(x uint8 (H, W))
        -> AnatomyMasks`` (every label of :data:`cxrils.vocab.ANATOMY_LABELS`, bool
        (H, W)) and ``segment_batch``, built once per worker."""
        ...

    def make_anomaly(self, cfg: Config) -> AnomalyMapper:
        """An :class:`~cxrils.vision.anomaly.AnomalyMapper`: ``map(x, edit_region bool
        (H, W), *, lungs=None) -> AnomalyResult`` (x_hat uint8, x_ano float32 in
        [0, 1]) and ``map_batch``, built once per worker."""
        ...

    def make_detector(self, cfg: Config) -> LesionDetector:
        """A :class:`~cxrils.vision.detection.LesionDetector`: ``detect(x, *, anomaly=None,
        anatomy=None) -> list[LesionBox]`` (boxes in pixels of ``x``) and
        ``detect_batch``, built once per worker."""
        ...

    def cross_check(self, a: AnatomyMasks, b: AnatomyMasks, cfg: Config) -> str | None:
        """Appendix D.2: None when two anatomy sources agree, else the reason."""
        ...

    def ground_study(
        self,
        *,
        study_id: str,
        image_id: str,
        x: np.ndarray,
        report: StructuredReport,
        anatomy: AnatomyMasks,
        anomaly: AnomalyResult,
        boxes: list[LesionBox],
        cfg: Config,
        view_position: str | None = None,
        crosscheck: str | None = None,
        ctr: float | None = None,
        organs: AnatomyMasks | None = None,
    ) -> StudyGrounding:
        """Algorithm 1 and location verification, as :func:`cxrils.grounding.ground_study`
        (same keywords); the pipeline passes those up to ``cfg``, and ``organs``."""
        ...

    def generate_records(
        self,
        grounding: StudyGrounding,
        *,
        split: str,
        patient_id: str,
        image_path: str,
        cfg: Config,
        absent_negatives: bool = True,
    ) -> list[dict[str, Any]]:
        """Dataset rows of one image (:func:`cxrils.instructions.generate_records`)."""
        ...


class BuiltinStages:
    """The cxrils stages, with the backends chosen in ``cfg.backends``.

    Every method imports its stage lazily, so that a Ray actor serving one stage
    loads only that stage's model.
    """

    def structure_reports(self, items: Iterable[tuple[str, str]], cfg: Config) -> Iterator[StructuredReport]:
        """Batch report structuring (paper section 3.1 step 1): ``(study_id, text)``
        pairs in, one :class:`StructuredReport` per pair out, in order."""
        from cxrils.report import structure_reports

        return structure_reports(items, cfg)

    def load_image(self, path: Path, cfg: Config) -> tuple[np.ndarray, str | None]:
        """``x`` uint8 (H, W) and the view position read from the file (DICOM
        ViewPosition) or None; raises ``cxrils.io.ImageLoadError``."""
        from cxrils.io import load_image

        loaded = load_image(path, max_pixels=cfg.io.max_pixels, voi=cfg.io.voi)
        return loaded.pixels, getattr(loaded.meta, "view_position", None)

    def make_anatomy(self, cfg: Config) -> AnatomySegmenter:
        """The anatomy segmenter ``cfg.backends.anatomy`` (``.segment(x) -> AnatomyMasks``)."""
        from cxrils.vision.anatomy import get_segmenter

        return get_segmenter(cfg.backends.anatomy, cfg)

    def make_anomaly(self, cfg: Config) -> AnomalyMapper:
        """The anomaly mapper ``cfg.backends.anomaly`` (``.map(x, edit_region) -> AnomalyResult``)."""
        from cxrils.vision.anomaly import get_anomaly_mapper

        return get_anomaly_mapper(cfg.backends.anomaly, cfg)

    def make_detector(self, cfg: Config) -> LesionDetector:
        """The lesion detector ``cfg.backends.detector`` (``.detect(x, ...) -> list[LesionBox]``)."""
        from cxrils.vision.detection import get_detector

        return get_detector(cfg.backends.detector, cfg)

    def cross_check(self, a: AnatomyMasks, b: AnatomyMasks, cfg: Config) -> str | None:
        """Lung/heart cross-check of two segmentations (Appendix D.2): None or the reason."""
        from cxrils.vision.anatomy import cross_check

        return cross_check(a, b, cfg.qc)

    def ground_study(
        self,
        *,
        study_id: str,
        image_id: str,
        x: np.ndarray,
        report: StructuredReport,
        anatomy: AnatomyMasks,
        anomaly: AnomalyResult,
        boxes: list[LesionBox],
        cfg: Config,
        view_position: str | None = None,
        crosscheck: str | None = None,
        ctr: float | None = None,
        organs: AnatomyMasks | None = None,
    ) -> StudyGrounding:
        """Algorithm 1 and location verification (section 3.1 steps 3-4)."""
        from cxrils.grounding import ground_study

        return ground_study(
            study_id=study_id,
            image_id=image_id,
            x=x,
            report=report,
            anatomy=anatomy,
            anomaly=anomaly,
            boxes=boxes,
            cfg=cfg,
            view_position=view_position,
            crosscheck=crosscheck,
            ctr=ctr,
            organs=organs,
        )

    def generate_records(
        self,
        grounding: StudyGrounding,
        *,
        split: str,
        patient_id: str,
        image_path: str,
        cfg: Config,
        absent_negatives: bool = True,
    ) -> list[dict[str, Any]]:
        """Instruction-answer records of one image (section 3.2)."""
        from cxrils.instructions import generate_records

        return generate_records(
            grounding,
            split=split,
            patient_id=patient_id,
            image_path=image_path,
            cfg=cfg,
            absent_negatives=absent_negatives,
        )

    def weight_files(self, cfg: Config) -> dict[str, list[str]]:
        """The weight files (or folders) the backends of ``cfg`` load, by stage: hashed
        into the run's provenance so a resume with other weights is refused.

        Each backend lists its own (its class's ``weight_files(cfg)``, through the
        stage's :class:`~cxrils.registry.Registry`; no optional package is imported):
        one label per stage and backend, ``"anatomy (NAME)"`` (the edit region's
        segmenter too, when it is another), ``"anomaly (NAME)"``, ``"detector (NAME)"``,
        even when empty; the report side's (structurer, location mapper, and the LLM of
        paraphrasing) under their backend's name, ``"llm"``, when there are any. An
        unknown backend name lists nothing (building it fails later).
        """
        from cxrils.report import LOCATION_MAPPERS, STRUCTURERS
        from cxrils.vision.anatomy.base import BACKENDS as ANATOMY
        from cxrils.vision.anomaly.base import BACKENDS as ANOMALY
        from cxrils.vision.detection.base import BACKENDS as DETECTOR

        def listed(registry: Registry[Any], name: str) -> list[str]:
            return registry.weight_files(name, cfg) if name in registry else []

        b = cfg.backends
        out: dict[str, list[str]] = {}
        for name in dict.fromkeys([b.anatomy, b.anatomy_edit_region or b.anatomy]):
            out[f"anatomy ({name})"] = listed(ANATOMY, name)
        out[f"anomaly ({b.anomaly})"] = listed(ANOMALY, b.anomaly)
        out[f"detector ({b.detector})"] = listed(DETECTOR, b.detector)
        text: list[tuple[str, list[str]]] = [
            (b.report_structurer, listed(STRUCTURERS, b.report_structurer)),
            (b.location_mapper, listed(LOCATION_MAPPERS, b.location_mapper)),
        ]
        if cfg.instructions.paraphrase:  # paraphrasing asks the shared LLM (Appendix C.3)
            from cxrils.report.llm import llm_weight_files

            text.append(("llm", llm_weight_files(cfg)))
        for label, paths in text:
            if paths:
                out[label] = list(dict.fromkeys(out.get(label, []) + paths))
        return {label: [p for p in paths if p] for label, paths in out.items()}


def resolve_stages(spec: str) -> StageProvider:
    """Import a provider from ``"package.module:Name"``; a class is instantiated.

    Raises
    ------
    ValueError
        If the spec is malformed or the module or attribute cannot be imported.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"stage provider {spec!r} is not of the form package.module:Name")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot import stage provider {spec!r}: {err}") from err
    provider: StageProvider = obj() if isinstance(obj, type) else obj
    return provider


if TYPE_CHECKING:  # mypy checks that the default provider has the protocol's signatures
    _BUILTIN_IS_A_PROVIDER: StageProvider = BuiltinStages()
