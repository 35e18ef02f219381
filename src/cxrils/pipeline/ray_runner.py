"""The image side on Ray (``cxrils generate --runner ray``), with Ray Data.

The studies stream through one Ray Data step per pipeline step. Each
model-backed step is a callable class run by its own actor pool, so it loads its
model once per actor and scales on its own resources, set per step in the
configuration (``pipeline.ray.<step>``: ``num_gpus``, ``num_cpus``,
``batch_size``, ``actors``; :class:`cxrils.config.RayStageConfig`):

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

An actor step receives ``batch_size`` studies at a time and hands them to the
:class:`~cxrils.pipeline.study.Pipeline` step as one batch, which calls the
backend's batch method once (``segment_batch`` / ``map_batch`` /
``detect_batch``); every study's result is the one it gets alone, so batch size
and GPUs never change the dataset. Rows carry the pickled
:class:`~cxrils.pipeline.study.StudyState` (numpy arrays and dataclasses, which
Arrow cannot hold as such). Order is preserved, the text side ran in the driver
beforehand, and results are committed by the driver exactly as with the local
runner, so both runners write the same dataset.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Iterator
from typing import Any

from cxrils.config import Config, RayStageConfig, config_from_dict
from cxrils.pipeline.stages import DEFAULT_STAGES, RunError
from cxrils.pipeline.study import Pipeline, StudyResult
from cxrils.sources import StudyInput
from cxrils.types import StructuredReport

#: Model-backed steps (one actor pool each; the fields of ``pipeline.ray``) and the
#: Pipeline method each calls.
ACTOR_STEPS: dict[str, str] = {
    "anatomy_x": "run_anatomy_x",
    "anomaly": "run_anomaly",
    "anatomy_x_hat": "run_anatomy_x_hat",
    "detector": "run_detector",
}

_PIPELINES: dict[tuple[str, str], Pipeline] = {}


def _pipeline(cfg_dict: dict, stages: str) -> Pipeline:
    """This Ray worker's Pipeline for (cfg, stages), built once per process."""
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
    """A Ray Data callable class: one model-backed step of :class:`Pipeline`, run on
    each batch of studies as one batch.

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
        states = self.step([pickle.loads(b) for b in batch["state"]])
        return {"i": batch["i"], "state": [pickle.dumps(s) for s in states]}


def step_options(cfg: Config, workers: int, cluster: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Ray options of every step: ``{step: {"num_cpus", "num_gpus", "actors", "batch_size"}}``.

    Steps without ``num_cpus`` share the cluster's CPUs evenly with the tasks
    (``start``, ``finish``), so the whole pipeline fits even on a 2-CPU machine.

    Parameters
    ----------
    cfg : Config
        ``pipeline.ray.<step>`` gives each actor step's resources.
    workers : int
        Default actors per actor step (``--workers``) and the tasks' concurrency.
    cluster : dict
        ``ray.cluster_resources()`` (``"CPU"``, ``"GPU"``, ...).

    Raises
    ------
    RunError
        If a step asks for more GPUs or CPUs than the cluster has (its actors would
        wait for ever).
    """
    workers = max(1, workers)
    per_step: dict[str, RayStageConfig] = {
        f.name: getattr(cfg.pipeline.ray, f.name) for f in dataclasses.fields(cfg.pipeline.ray)
    }
    actors = {name: per_step[name].actors or workers for name in ACTOR_STEPS}
    cpus, gpus = float(cluster.get("CPU", 1.0)), float(cluster.get("GPU", 0.0))
    sharing = sum(actors[n] for n in ACTOR_STEPS if not per_step[n].num_cpus) + 2 * workers + 1
    share = cpus / sharing
    opts: dict[str, dict[str, Any]] = {}
    for name in ACTOR_STEPS:
        sc = per_step[name]
        for what, unit, need, have in (
            ("num_gpus", "GPUs", sc.num_gpus, gpus),
            ("num_cpus", "CPUs", sc.num_cpus, cpus),
        ):
            if need * actors[name] > have + 1e-9:
                raise RunError(
                    f"pipeline.ray.{name}: {actors[name]} actor(s) x {what}={need:g} exceed the "
                    f"cluster's {have:g} {unit}; lower pipeline.ray.{name}.{what} or .actors, "
                    "or add resources"
                )
        opts[name] = {
            "num_cpus": sc.num_cpus or share,
            "num_gpus": sc.num_gpus,
            "actors": actors[name],
            "batch_size": sc.batch_size,
        }
    for name in ("start", "finish"):
        opts[name] = {"num_cpus": share, "num_gpus": 0.0, "actors": workers, "batch_size": 1}
    return opts


#: Seconds to wait for a TCP connection to a ``--ray-address`` before Ray's own
#: connection, which retries for minutes on an address nothing listens at.
RAY_CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Check that something listens at a Ray cluster address before ``ray.init``.

    ``address`` is ``host:port`` or ``ray://host:port`` (Ray Client); ``auto`` and
    ``local`` are Ray's own keywords and are not checked.

    Raises
    ------
    RunError
        If the address is not of that form, or no TCP connection opens within
        ``timeout_s`` seconds.
    """
    import socket

    if address in ("auto", "local"):
        return
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise RunError(f"--ray-address {address!r}: expected host:port, ray://host:port, auto or local")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise RunError(
            f"--ray-address {address!r}: no Ray cluster answers there ({err}); start one with "
            "`ray start --head` or leave --ray-address out to start a local one"
        ) from None


def run_ray(
    studies: list[StudyInput],
    reports: dict[tuple[str, str], StructuredReport],
    cfg: Config,
    *,
    stages: str = DEFAULT_STAGES,
    workers: int = 1,
    address: str | None = None,
) -> Iterator[StudyResult]:
    """Yield one :class:`StudyResult` per study, in the order of ``studies``.

    Parameters
    ----------
    studies, reports, cfg, stages
        As :func:`cxrils.pipeline.runner.run_local`; ``cfg.pipeline.ray`` sets each
        actor step's GPUs, CPUs, batch size and pool size (:func:`step_options`).
    workers : int
        Actors per model-backed step unless ``pipeline.ray.<step>.actors`` is set,
        and the tasks' concurrency.
    address : str, optional
        Ray cluster to connect to when Ray is not initialised yet; None starts a
        local instance (shut down again at the end).

    Raises
    ------
    RunError
        If nothing answers at ``address`` (:func:`check_ray_address`), a step needs
        more resources than the cluster has, or Ray fails or
        returns studies out of order (committed studies stay; rerun to resume).
    """
    import ray

    started = not ray.is_initialized()
    if started:
        if address is not None:
            check_ray_address(address)
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        opts = step_options(cfg, workers, ray.cluster_resources())
        cfg_dict = cfg.to_dict()
        items = [{"i": i, "state": pickle.dumps((s, reports[(s.study_id, s.report)]))} for i, s in enumerate(studies)]
        ds = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 200)))
        o = opts["start"]
        ds = ds.map_batches(
            _start,
            fn_kwargs={"cfg_dict": cfg_dict, "stages": stages},
            batch_size=1,
            compute=ray.data.TaskPoolStrategy(size=o["actors"]),
            num_cpus=o["num_cpus"],
        )
        for name, method in ACTOR_STEPS.items():
            o = opts[name]
            ds = ds.map_batches(
                StepActor,
                fn_constructor_args=(cfg_dict, stages, method),
                batch_size=o["batch_size"],
                compute=ray.data.ActorPoolStrategy(size=o["actors"]),
                num_cpus=o["num_cpus"],
                num_gpus=o["num_gpus"],
            )
        o = opts["finish"]
        ds = ds.map_batches(
            _finish,
            fn_kwargs={"cfg_dict": cfg_dict, "stages": stages},
            batch_size=1,
            compute=ray.data.TaskPoolStrategy(size=o["actors"]),
            num_cpus=o["num_cpus"],
        )
        expected = 0
        try:
            for row in ds.iter_rows():
                if int(row["i"]) != expected:
                    raise RunError(f"Ray returned study {row['i']} where {expected} was expected")
                expected += 1
                yield pickle.loads(row["result"])
        except ray.exceptions.RayError as err:
            raise RunError(
                f"the Ray run stopped after {expected} studies (committed studies stay; rerun to resume): {err}"
            ) from err
        if expected != len(studies):
            raise RunError(f"Ray returned {expected} of {len(studies)} studies")
    finally:
        if started:
            ray.shutdown()
