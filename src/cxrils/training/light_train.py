"""Training of the light model on a cxrils dataset, with checkpoints and resume.

A run folder holds ``config.json`` (model type and :class:`LightConfig`),
``checkpoint.pt`` (network, optimiser, scheduler, step; rewritten atomically),
``metrics.jsonl`` (one line per logged step), and at the end ``model.safetensors``,
``calibration.json`` (thresholds chosen on the validation split),
``predictions_validate.parquet`` and ``eval_validate.json`` (gIoU, cIoU, N-Acc, text
accuracy on the validation split).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from cxrils import vocab
from cxrils.fsutil import atomic_path, atomic_write_json, atomic_write_text, sha256_file
from cxrils.models.base import CONFIG_NAME
from cxrils.models.light.calibrate import calibrate
from cxrils.models.light.config import LightConfig
from cxrils.models.light.inputs import PriorsFn, dataset_inputs
from cxrils.models.light.priors import AnatomyFn, AnomalyFn, ImagePriors, default_anatomy
from cxrils.models.light.segmenter import LightSegmenter
from cxrils.models.predict import evaluate_run, forget_evaluation

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
METRICS_NAME = "metrics.jsonl"
CALIBRATION_NAME = "calibration.json"
CALIBRATED = ("tau_presence", "tau_mask", "tau_presence_by_target")  # set by calibration after training
#: Settings that change no weight (answers only), so they may differ when a run is resumed.
INFERENCE_ONLY = (
    "cardiomegaly_min_ctr",
    "cardiomegaly_by_ctr",
    "cardiomegaly_needs_score",
    "consistent_answers",
    "tau_location",
    "lung_answer_min_zones",
)
WARMUP_STEPS = 100  # linear warm-up then linear decay to 0, as ROSALIA (Appendix F)


class TrainError(ValueError):
    """Raised for an unusable dataset or run folder (message names the path)."""


def _lr_lambda(steps: int):
    warm = min(WARMUP_STEPS, max(1, steps // 10))

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (steps - step) / max(1, steps - warm))

    return f


def _batch(seg: LightSegmenter, ds, indices: list[int], cache: dict[str, ImagePriors], priors_of: PriorsFn | None):
    import torch

    items, x, t = dataset_inputs(seg, ds, indices, cache, priors_of)
    mask = torch.stack([it["mask"] for it in items])
    lesion = torch.tensor(
        [
            vocab.INFERENCE_LESION_TYPES.index(it["lesion_type"])
            if it["instruction_type"] == "lesion_inference"
            and it["polarity"] == "positive"
            and it["lesion_type"] in vocab.INFERENCE_LESION_TYPES
            else -1
            for it in items
        ]
    )
    certainty = torch.tensor([float(it["certainty"] == "definitive") for it in items])
    return x, t, mask, lesion, certainty


def _summary_number(run_dir: Path, key: str) -> float | None:
    """``key`` of the run's earlier ``train_summary.json`` (a finite number), else None."""
    try:
        value = json.loads((run_dir / "train_summary.json").read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and value == value else None


def _stored_config(run_dir: Path) -> LightConfig:
    """The configuration a run folder was trained with (``config.json``).

    Raises
    ------
    TrainError
        If it cannot be read or parsed (naming the file).
    """
    path = run_dir / CONFIG_NAME
    try:
        return LightConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        raise TrainError(f"{path}: unreadable run configuration ({err})") from None


def _resolve_config(
    run_dir: Path, config: LightConfig | None, resume: bool, inference_keys: tuple[str, ...] = INFERENCE_ONLY
) -> tuple[LightConfig, bool]:
    if resume and (run_dir / CHECKPOINT_NAME).is_file():
        stored = _stored_config(run_dir)
        if config is not None and config.to_dict() != stored.to_dict():
            changed = sorted(k for k, v in config.to_dict().items() if stored.to_dict().get(k) != v)
            weights = [k for k in changed if k not in {"steps", *CALIBRATED, *INFERENCE_ONLY}]
            if weights:
                raise TrainError(
                    f"{run_dir}: a run with another configuration exists (differs in {weights}; the "
                    "thresholds calibration wrote may differ too); "
                    "use a new run folder or --no-resume"
                )
            if config.steps < stored.steps:
                raise TrainError(
                    f"{run_dir}: this run was started for {stored.steps} steps; --steps {config.steps} is fewer "
                    "(its weights may be past them, and its learning-rate schedule is set by the steps). Give "
                    f"--steps {stored.steps} or more to resume or extend it, or use a new run folder or --no-resume"
                )
            stored.steps = config.steps
        if config is not None:
            for key in inference_keys:  # only those the caller set: the others keep the run's
                setattr(stored, key, getattr(config, key))
        return stored, True
    return config or LightConfig(), False


def train_light(
    dataset_dir: str | Path,
    run_dir: str | Path,
    config: LightConfig | None = None,
    *,
    resume: bool = True,
    progress: bool = True,
    log_every: int = 10,
    checkpoint_every: int = 100,
    evaluate: bool = True,
    anatomy: AnatomyFn | None = None,
    anomaly: AnomalyFn | None = None,
    inference_keys: tuple[str, ...] = INFERENCE_ONLY,
) -> dict:
    """Train the light model; resume from ``run_dir/checkpoint.pt`` when present.

    Parameters
    ----------
    dataset_dir : path
        A finalized cxrils dataset with ``train`` records (positives and negatives).
    run_dir : path
        Output folder (created).
    config : LightConfig, optional
        Hyper-parameters; default :class:`LightConfig`. On resume it must equal the
        stored one except for ``steps`` (which may grow).
    resume : bool
        Continue from the checkpoint when one exists; False starts over.
    progress : bool
        Show a tqdm progress bar.
    log_every, checkpoint_every : int
        Steps between metric lines and between checkpoints.
    evaluate : bool
        Predict and score the validation split at the end.
    anatomy, anomaly : callable, optional
        Anatomy segmenter and anomaly mapper of the priors and the answers' locations
        (see :class:`LightSegmenter`; default: the configured builtin stages). With
        ``config.oof_anomaly_weights`` and ``oof_detector_weights``, the images of the
        builtin lesion models' tuning part take out-of-fold priors instead, in training
        and in the threshold choice (:mod:`cxrils.training.prior_folds`).
    inference_keys : tuple of str
        On resume, the settings of :data:`INFERENCE_ONLY` taken from ``config``; the
        others keep the run's stored values (``cxrils train`` passes those given by
        ``--set``, so a resumed run's answer settings are not reset to the defaults).

    Returns
    -------
    dict
        ``steps``, ``train_seconds``, ``final_loss`` (loss of the last step; None when
        unknown, e.g. a resumed run whose checkpoint predates it); with ``config.calibrate``,
        ``calibration`` (thresholds chosen on the validation split, also written to
        ``calibration.json`` and stored in ``config.json``); with out-of-fold priors,
        ``oof_priors`` (each weights file's SHA-256); when evaluated, ``validate``
        (Table 4 row of :meth:`cxrils.evaluation.EvaluationReport.table4`).

    Raises
    ------
    TrainError
        If the dataset has no train positives or negatives, an out-of-fold weights file
        is unreadable or of the wrong half, or the run folder holds
        an incompatible run.
    """
    import torch

    from cxrils.dataset import BalancedBatchSampler, DatasetError, HistogramEqualization, ILSDataset
    from cxrils.models.light.losses import light_loss
    from cxrils.progress import progress_bar

    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    cfg, resuming = _resolve_config(run, config, resume, inference_keys)
    torch.manual_seed(cfg.seed)
    try:
        ds = ILSDataset(
            dataset_dir,
            "train",
            augment=HistogramEqualization(cfg.hist_eq_prob, cfg.seed),
            size=cfg.image_size,
            cache=True,
        )
        sampler = BalancedBatchSampler(ds.polarities, cfg.batch_size, seed=cfg.seed)
    except (DatasetError, ValueError) as err:
        raise TrainError(f"{dataset_dir}: cannot train on this dataset: {err}") from err

    priors_of: PriorsFn | None = None
    oof_hashes: dict[str, str] | None = None  # the files' SHA-256, checked on resume
    if cfg.oof_anomaly_weights:
        from cxrils.training.prior_folds import OutOfFoldPriors

        anatomy = anatomy or default_anatomy()
        try:
            priors_of = OutOfFoldPriors(cfg, anatomy)
            oof_hashes = {
                "anomaly_sha256": sha256_file(cfg.oof_anomaly_weights),
                "detector_sha256": sha256_file(cfg.oof_detector_weights),
            }
        except (ValueError, RuntimeError, OSError) as err:
            raise TrainError(f"out-of-fold priors: {err}") from err
    seg = LightSegmenter(cfg, anatomy=anatomy, anomaly=anomaly)
    seg.warn_implausible = False  # one count after training, not a warning per image
    try:  # the versions of the prior stages the weights learn from, stored with them
        seg.prior_stages = seg.stage_versions()
    except RuntimeError as err:
        raise TrainError(f"the light model's prior stages cannot be built: {err}") from err
    net = seg.net
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg.steps))
    step, elapsed = 0, 0.0
    last_loss: float | None = None
    if resuming:
        state = torch.load(run / CHECKPOINT_NAME, map_location="cpu", weights_only=False)
        net.load_state_dict(state["net"])
        opt.load_state_dict(state["opt"])
        step, elapsed = int(state["step"]), float(state["elapsed_s"])
        if "prior_stages" not in state:  # written before the record: its stages are not known
            log.warning("%s: its checkpoint does not record its prior stages; the weights will not either", run)
            seg.prior_stages = {}
        elif state["prior_stages"] != seg.prior_stages:
            raise TrainError(
                f"{run}: its checkpoint was trained with other prior stages ({state['prior_stages']}) than the "
                f"ones it would go on with ({seg.prior_stages}); start over with --no-resume"
            )
        if state.get("oof_priors", oof_hashes) != oof_hashes:
            raise TrainError(
                f"{run}: its checkpoint was trained on other out-of-fold weights files "
                f"({state.get('oof_priors')}) than {cfg.oof_anomaly_weights} / {cfg.oof_detector_weights}; "
                "start over with --no-resume"
            )
        last_loss = state.get("loss", _summary_number(run, "final_loss"))  # checkpoints before "loss" was stored
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg.steps), last_epoch=step - 1)
        _keep_metrics_up_to(run / METRICS_NAME, step)
        log.info("resuming %s at step %d", run, step)
    else:
        (run / METRICS_NAME).unlink(missing_ok=True)
    start_step = step
    atomic_write_json(run / CONFIG_NAME, cfg.to_dict())

    def checkpoint() -> None:
        with atomic_path(run / CHECKPOINT_NAME, suffix=".pt") as tmp:
            torch.save(
                {
                    "net": net.state_dict(),
                    "opt": opt.state_dict(),
                    "step": step,
                    "elapsed_s": elapsed,
                    "loss": last_loss,
                    "oof_priors": oof_hashes,
                    "prior_stages": seg.prior_stages,
                },
                tmp,
            )

    net.train()
    prior_cache: dict[str, ImagePriors] = {}
    n_batches = len(sampler)
    running: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    bar = progress_bar(total=cfg.steps, initial=step, desc="train light", disable=not progress, unit="step")
    while step < cfg.steps:
        epoch, offset = divmod(step, n_batches)
        sampler.set_epoch(epoch)
        ds.set_epoch(epoch)
        for b, indices in enumerate(sampler):
            if b < offset:
                continue
            x, t, mask, lesion, certainty = _batch(seg, ds, indices, prior_cache, priors_of)
            outs = net.member_outputs(x, t) if hasattr(net, "member_outputs") else [net(x, t)]
            member_terms = [light_loss(o, mask, lesion, certainty, cfg) for o in outs]
            terms = {k: sum(m[k] for m in member_terms) / len(outs) for k in member_terms[0]}
            opt.zero_grad(set_to_none=True)
            terms["loss"].backward()
            opt.step()
            sched.step()
            step += 1
            last_loss = float(terms["loss"].detach())
            for k, v in terms.items():
                running.setdefault(k, []).append(float(v.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{last_loss:.3f}", refresh=False)
            if step % log_every == 0 or step == cfg.steps:
                line = {
                    "step": step,
                    "epoch": epoch,
                    "lr": sched.get_last_lr()[0],
                    "elapsed_s": elapsed + time.perf_counter() - t0,
                    **{k: float(np.mean(v)) for k, v in running.items()},
                }
                with open(run / METRICS_NAME, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line) + "\n")
                running.clear()
            if step % checkpoint_every == 0 or step == cfg.steps:
                elapsed_now = elapsed + time.perf_counter() - t0
                elapsed, t0 = elapsed_now, time.perf_counter()
                checkpoint()
            if step >= cfg.steps:
                break
    bar.close()
    _log_implausible(prior_cache)
    if resuming and step == start_step:  # nothing trained: the earlier summary's time, not the last checkpoint's
        elapsed = _summary_number(run, "train_seconds") or elapsed
    else:
        elapsed += time.perf_counter() - t0
    net.eval()
    result: dict = {"steps": step, "train_seconds": elapsed, "final_loss": last_loss}
    if oof_hashes is not None:
        result["oof_priors"] = oof_hashes
    if cfg.calibrate:
        from cxrils.dataset import read_records

        val = read_records(dataset_dir, "validate")
        if len(val) and val["polarity"].nunique() == 2:
            result["calibration"] = calibrate(seg, dataset_dir, "validate", priors_of=priors_of)
            atomic_write_json(run / CALIBRATION_NAME, result["calibration"])
            log.info("thresholds chosen on validate: %s", result["calibration"])
        else:
            (run / CALIBRATION_NAME).unlink(missing_ok=True)  # an earlier model's choice
            log.warning(
                "%s: validate split lacks positives or negatives; keeping thresholds %s / %s (by target: %s)",
                dataset_dir,
                cfg.tau_presence,
                cfg.tau_mask,
                cfg.tau_presence_by_target,
            )
    if step != start_step or not resuming:  # other weights than the folder's scores describe
        forget_evaluation(run, "validate")
    seg.save(run)
    if evaluate:
        result["validate"] = evaluate_run(seg, dataset_dir, run, "validate", progress=progress)
        _warn_consistency_n_acc(cfg, result, run)
    atomic_write_json(run / "train_summary.json", result)
    return result


def _keep_metrics_up_to(path: Path, step: int) -> None:
    """Drop the lines of ``metrics.jsonl`` logged after checkpoint ``step``: a killed run
    logged them, and the resumed run trains those steps again and logs them anew (a
    line that cannot be read, a torn last line, goes too)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            logged = json.loads(line).get("step")
        except (ValueError, AttributeError):
            continue
        if isinstance(logged, int) and logged <= step:
            kept.append(line + "\n")
    atomic_write_text(path, "".join(kept))


def _warn_consistency_n_acc(cfg: LightConfig, result: dict, run: Path) -> None:
    """Warn when the validate N-Acc of the answers the saved model gives falls below
    ``calib_min_n_acc``, with the reason: the calibration could not meet it on this
    validation split (too few or too hard negatives), or it met it on the network's own
    scores and ``consistent_answers`` then answered a negative present where another
    question about the same image passes (the calibrated bound holds for the scores,
    not for those answers)."""
    calib, val = result.get("calibration") or {}, result.get("validate") or {}
    n_acc = val.get("n_acc")
    if n_acc is None or n_acc >= cfg.calib_min_n_acc:
        return
    if not calib:
        log.warning(
            "validate N-Acc of the saved model is %.1f%%, under calib_min_n_acc %.1f%%; no calibration chose its "
            "thresholds (calibrate off, or the validate split lacks positives or negatives)",
            100 * n_acc,
            100 * cfg.calib_min_n_acc,
        )
    elif not calib.get("constraint_met"):
        log.warning(
            "validate N-Acc of the saved model is %.1f%%, under calib_min_n_acc %.1f%%: no thresholds on the "
            "validation split reach it (the calibration kept the best gIoU + N-Acc); the model answers many "
            "negatives present. More or cleaner training data, or more steps, may help",
            100 * n_acc,
            100 * cfg.calib_min_n_acc,
        )
    elif cfg.consistent_answers:
        log.warning(
            "validate N-Acc of the saved model's answers is %.1f%%, under calib_min_n_acc %.1f%% that its "
            "thresholds meet on the network's own scores (%.1f%%): consistent_answers answers a negative "
            "present where another question about the same image passes. For the calibrated N-Acc, set "
            '"consistent_answers": false in %s (an inference setting; no retraining)',
            100 * n_acc,
            100 * cfg.calib_min_n_acc,
            100 * calib.get("n_acc", float("nan")),
            run / CONFIG_NAME,
        )


def _log_implausible(priors: dict[str, ImagePriors]) -> None:
    """One warning for the training images (``priors``: image id -> priors) whose anatomy
    does not look like a frontal chest radiograph (:attr:`ImagePriors.implausible`)."""
    bad = sorted((image_id, p.implausible) for image_id, p in priors.items() if p.implausible)
    if bad:
        log.warning(
            "%d of %d training images do not look like frontal chest radiographs to the anatomy stage "
            "(their priors were used as computed), e.g. %s: %s",
            len(bad),
            len(priors),
            bad[0][0],
            bad[0][1],
        )


def cli_train(
    dataset: str | Path,
    run_dir: str | Path,
    overrides: dict[str, str],
    *,
    resume: bool = True,
    evaluate: bool = True,
    progress: bool = True,
) -> dict:
    """``cxrils train --model light``: :func:`train_light` with ``--set key=value`` overrides.

    Raises
    ------
    ValueError
        On an unknown key or a value of the wrong type.
    """
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(LightConfig) if f.init}
    values: dict = {}
    for key, raw in overrides.items():
        if key not in fields:
            raise ValueError(f"unknown light model setting {key!r}; known: {sorted(fields)}")
        default = getattr(LightConfig(), key)
        try:
            if isinstance(default, tuple):
                values[key] = tuple(int(v) for v in raw.split(","))
            elif isinstance(default, dict):
                values[key] = json.loads(raw)
                if not isinstance(values[key], dict):
                    raise ValueError(raw)
            elif isinstance(default, bool):
                if raw.lower() not in ("1", "true", "yes", "0", "false", "no"):
                    raise ValueError(raw)
                values[key] = raw.lower() in ("1", "true", "yes")
            else:
                values[key] = type(default)(raw)
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            raise ValueError(
                f"--set {key}={raw!r}: expected {type(default).__name__}"
                + (' as JSON, e.g. {"opacity": 0.9}' if isinstance(default, dict) else "")
                + (" (true/false, yes/no or 1/0)" if isinstance(default, bool) else "")
            ) from err
    config = None
    if values and resume and (Path(run_dir) / CHECKPOINT_NAME).is_file():
        # a resumed run keeps every setting the user does not set again (a --set of an
        # inference key must not read as a change of its steps or architecture)
        config = LightConfig.from_dict({**_stored_config(Path(run_dir)).to_dict(), **values})
    elif values or not resume:
        config = LightConfig(**values)
    return train_light(
        dataset,
        run_dir,
        config,
        resume=resume,
        progress=progress,
        evaluate=evaluate,
        inference_keys=tuple(k for k in INFERENCE_ONLY if k in values),
    )
