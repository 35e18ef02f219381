"""The image side on Ray (``cxrils generate --runner ray``), with Ray Data.

The studies stream through one Ray Data step per pipeline step. Each
model-backed step is a callable class run by its own actor pool, so it loads its
model once per actor and scales on its own resources (a GPU for the anomaly
mapper, CPUs for the rest):

==================  ==========  ==================================================
step                executed    what
==================  ==========  ==================================================
``start``           tasks       view QC, report exclusion, image loading
``anatomy_x``       actor pool  anatomy of ``x`` -> edit region (HybridGNet's role)
``anomaly``         actor pool  ``x_hat``, ``x_ano`` (RadEdit's role)
``anatomy_x_hat``   actor pool  anatomy of ``x_hat`` + cross-check (CXAS's role)
``detector``        actor pool  lesion boxes (YOLO's role)
``finish``          tasks       Algorithm 1, records
==================  ==========  ==================================================

Rows carry the pickled :class:`~cxrils.pipeline.study.StudyState` (numpy arrays
and dataclasses, which Arrow cannot hold as such). Order is preserved, the text
side ran in the driver beforehand, and results are committed by the driver
exactly as with the local runner, so both runners write the same dataset.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterator

from cxrils.config import Config, config_from_dict
from cxrils.pipeline.inputs import StudyInput
from cxrils.pipeline.runner import RunError
from cxrils.pipeline.stages import DEFAULT_STAGES
from cxrils.pipeline.study import Pipeline, StudyResult
from cxrils.types import StructuredReport

#: Model-backed steps (one actor pool each) and the Pipeline method each calls.
ACTOR_STEPS: dict[str, str] = {
    "anatomy_x": "run_anatomy_x",
    "anomaly": "run_anomaly",
    "anatomy_x_hat": "run_anatomy_x_hat",
    "detector": "run_detector",
}

_PIPELINES: dict[tuple[str, str], Pipeline] = {}


def _pipeline(cfg_dict: dict, stages: str) -> Pipeline:
    """This Ray worker's Pipeline for (cfg, stages), built once per process."""
    import json

    key = (json.dumps(cfg_dict, sort_keys=True), stages)
    if key not in _PIPELINES:
        _PIPELINES[key] = Pipeline(config_from_dict(cfg_dict), stages)
    return _PIPELINES[key]


def _start(batch: dict[str, Any], cfg_dict: dict, stages: str) -> dict[str, Any]:
    pipe = _pipeline(cfg_dict, stages)
    out = []
    for blob in batch["state"]:
        study, report = pickle.loads(blob)
        out.append(pickle.dumps(pipe.start(study, report)))
    return {"i": batch["i"], "state": out}


def _finish(batch: dict[str, Any], cfg_dict: dict, stages: str) -> dict[str, Any]:
    pipe = _pipeline(cfg_dict, stages)
    return {"i": batch["i"], "result": [pickle.dumps(pipe.finish(pickle.loads(b))) for b in batch["state"]]}


class StepActor:
    """A Ray Data callable class: one model-backed step of :class:`Pipeline`.

    Parameters
    ----------
    cfg_dict : dict
        ``Config.to_dict()``.
    stages : str
        Stage provider import path.
    method : str
        The Pipeline step method (a value of :data:`ACTOR_STEPS`).
    """

    def __init__(self, cfg_dict: dict, stages: str, method: str):
        self.step = getattr(_pipeline(cfg_dict, stages), method)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"i": batch["i"], "state": [pickle.dumps(self.step(pickle.loads(b))) for b in batch["state"]]}


def run_ray(studies: list[StudyInput], reports: dict[tuple[str, str], StructuredReport], cfg: Config, *,
            stages: str = DEFAULT_STAGES, workers: int = 1, address: str | None = None,
            stage_options: dict[str, dict[str, Any]] | None = None) -> Iterator[StudyResult]:
    """Yield one :class:`StudyResult` per study, in the order of ``studies``.

    Parameters
    ----------
    studies, reports, cfg, stages
        As :func:`cxrils.pipeline.runner.run_local`.
    workers : int
        Actors per model-backed step (and the tasks' concurrency).
    address : str, optional
        Ray cluster to connect to when Ray is not initialised yet; None starts a
        local instance (shut down again at the end).
    stage_options : dict, optional
        Per step (keys of :data:`ACTOR_STEPS`, ``"start"``, ``"finish"``) Ray
        options that replace the defaults, e.g. ``{"anomaly": {"num_gpus": 1,
        "num_cpus": 1}}``. Defaults: the cluster's CPUs shared evenly by all actors
        and tasks, so the whole pipeline fits even on a 2-CPU machine.
    """
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        workers = max(1, workers)
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        share = cpus / (len(ACTOR_STEPS) * workers + 2 * workers + 1)
        opts = {name: {"num_cpus": share} for name in (*ACTOR_STEPS, "start", "finish")}
        for name, o in (stage_options or {}).items():
            if name not in opts:
                raise ValueError(f"unknown Ray step {name!r}; known: {sorted(opts)}")
            opts[name] = dict(o)
        cfg_dict = cfg.to_dict()
        items = [{"i": i, "state": pickle.dumps((s, reports[(s.study_id, s.report)]))}
                 for i, s in enumerate(studies)]
        ds = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 200)))
        ds = ds.map_batches(_start, fn_kwargs={"cfg_dict": cfg_dict, "stages": stages}, batch_size=1,
                            compute=ray.data.TaskPoolStrategy(size=workers), **opts["start"])
        for name, method in ACTOR_STEPS.items():
            ds = ds.map_batches(StepActor, fn_constructor_args=(cfg_dict, stages, method), batch_size=1,
                                compute=ray.data.ActorPoolStrategy(size=workers), **opts[name])
        ds = ds.map_batches(_finish, fn_kwargs={"cfg_dict": cfg_dict, "stages": stages}, batch_size=1,
                            compute=ray.data.TaskPoolStrategy(size=workers), **opts["finish"])
        expected = 0
        try:
            for row in ds.iter_rows():
                if int(row["i"]) != expected:
                    raise RunError(f"Ray returned study {row['i']} where {expected} was expected")
                expected += 1
                yield pickle.loads(row["result"])
        except ray.exceptions.RayError as err:
            raise RunError(f"the Ray run stopped after {expected} studies (committed studies stay; rerun to "
                           f"resume): {err}") from err
        if expected != len(studies):
            raise RunError(f"Ray returned {expected} of {len(studies)} studies")
    finally:
        if started:
            ray.shutdown()
