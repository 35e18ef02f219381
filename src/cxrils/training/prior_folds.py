"""Out-of-fold priors for training the light model (issue 28).

The builtin anomaly map and detector each train on one half of the COVID-QU-Ex tuning
part and of the JSRT nodule images (:func:`cxrils.training.lesion_data.tuning_role`,
:func:`~cxrils.training.lesion_data.jsrt_role`). The light model's training dataset
(:mod:`cxrils.training.light_data`) holds images of both halves, so with the shipped
models every such image has one prior from a model that learned on it: sharper than on a
new film (``benchmarks/light_prior_shift.py`` for the light model trained on the shipped
models' priors, ``docs/results/light_prior_shift.md`` at commit 8d1e297: lung-level
opacity N-Acc on normal films 98.5 % on the anomaly map's own half against 93.8 % on the
other), and the light model learns to trust it more than it deserves on new films.
Copies of one film across the two halves (near-duplicates inside the tuning part, which
:func:`~cxrils.training.lesion_data.find_duplicates` does not remove) still leak: the
out-of-fold model trained on the copy.

With a second anomaly map trained on the detector half (``cxrils train-anomaly --role
detector``) and a second detector trained on the anomaly half (``cxrils train-detector
--role anomaly``), every image of the tuning part gets both priors from models that never
saw it: an anomaly-half image takes the second anomaly map and the shipped detector, a
detector-half image the shipped anomaly map and the second detector. Images of other
sources (the demo's generated studies) keep the shipped models, which never saw them.
Inference is unchanged: new films meet the shipped models, as out of fold as these.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from cxrils.config import Config
from cxrils.models.light.config import LightConfig
from cxrils.models.light.priors import (
    AnatomyFn,
    AnomalyFn,
    DetectorFn,
    ImagePriors,
    PriorComputer,
    default_anomaly,
    default_detector,
)
from cxrils.training.lesion_data import ROLES, jsrt_role, tuning_role
from cxrils.training.lesion_train import recorded_training
from cxrils.training.light_data import HUMAN_PREFIX, JSRT_BACKGROUND_PREFIX, JSRT_PREFIX, SYNTHETIC_PREFIX


def source_role(image_id: str) -> str | None:
    """The builtin lesion model (:data:`~cxrils.training.lesion_data.ROLES`) that trained
    on the source image of a light-training image id, or None when neither did.

    ``cqx-<id>`` (a COVID-QU-Ex tuning image) and ``syn-<id>`` (a COVID-QU-Ex normal as a
    synthetic background) follow :func:`~cxrils.training.lesion_data.tuning_role`;
    ``jsrt-<id>`` and ``syn-jsrt<id>`` (a JSRT nodule image) follow
    :func:`~cxrils.training.lesion_data.jsrt_role`; other ids (generated studies) give None.
    """
    if image_id.startswith(HUMAN_PREFIX):
        return tuning_role(image_id[len(HUMAN_PREFIX) :])
    if image_id.startswith(JSRT_PREFIX):
        return jsrt_role(image_id[len(JSRT_PREFIX) :])
    if image_id.startswith(SYNTHETIC_PREFIX + JSRT_BACKGROUND_PREFIX):
        return jsrt_role(image_id[len(SYNTHETIC_PREFIX + JSRT_BACKGROUND_PREFIX) :])
    if image_id.startswith(SYNTHETIC_PREFIX):
        return tuning_role(image_id[len(SYNTHETIC_PREFIX) :])
    return None


def weights_role(path: str | Path) -> str:
    """The half a builtin anomaly-map or detector weights file trained on: the ``role``
    of its ``training`` metadata (written by :func:`cxrils.training.lesion_train.run_summary`).

    Raises
    ------
    ValueError
        If the file is missing, unreadable, or records no role of
        :data:`~cxrils.training.lesion_data.ROLES`.
    """
    role = recorded_training(path).get("role")
    if role not in ROLES:
        raise ValueError(
            f"{path}: records no training half (metadata 'training.role' {role!r}); retrain it with "
            "cxrils train-anomaly / train-detector --role"
        )
    return str(role)


#: The ``training`` metadata key only each kind of builtin lesion model records: the
#: anomaly map's ``p_star`` (its normalisation) and the detector's validation AP50.
KIND_KEYS: dict[str, str] = {"anomaly": "p_star", "detector": "validation_ap50"}


def check_out_of_fold_weights(config: LightConfig) -> None:
    """Check that ``config.oof_anomaly_weights`` is an anomaly map trained on the detector
    half and ``config.oof_detector_weights`` a detector trained on the anomaly half
    (:func:`weights_role`, :data:`KIND_KEYS`), neither fine-tuned from a file of the other
    half (the ``init`` record of the summary; files written before it was recorded pass).

    Raises
    ------
    ValueError
        If a file is unset, unreadable, of the other kind or half, or fine-tuned from a
        file of another or an unknown half.
    """
    for kind, path, want in (
        ("anomaly", config.oof_anomaly_weights, "detector"),
        ("detector", config.oof_detector_weights, "anomaly"),
    ):
        if not path:
            raise ValueError("out-of-fold priors need both oof_anomaly_weights and oof_detector_weights")
        have = weights_role(path)
        if have != want:
            raise ValueError(f"{path}: trained on the {have!r} half; the other model's half, {want!r}, is needed")
        training = recorded_training(path)
        if KIND_KEYS[kind] not in training:
            raise ValueError(f"{path}: not a builtin {kind} weights file (its metadata lack {KIND_KEYS[kind]!r})")
        init = training.get("init")
        if isinstance(init, dict) and init.get("role") != want:
            raise ValueError(
                f"{path}: fine-tuned from {init.get('file')}, which trained on the {init.get('role')!r} half: "
                "not out of fold"
            )


def out_of_fold_stages(
    config: LightConfig, role: str, base: Config | None = None
) -> tuple[AnomalyFn | None, DetectorFn | None]:
    """The anomaly map and detector that never saw an image of the tuning half ``role``:
    for ``"anomaly"`` the out-of-fold map and the shipped detector, for ``"detector"`` the
    shipped map and the out-of-fold detector (each None where ``config`` computes no
    such prior: ``priors``, ``box_prior``). ``base``: the pipeline config whose anomaly and
    detection settings both use (default: the default config).

    Raises
    ------
    ValueError
        If ``role`` is not one of :data:`~cxrils.training.lesion_data.ROLES`.
    RuntimeError
        If a stage cannot be built.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    base = base or Config()
    oof = dataclasses.replace(
        base,
        anomaly=dataclasses.replace(base.anomaly, builtin_weights=config.oof_anomaly_weights),
        detection=dataclasses.replace(base.detection, builtin_weights=config.oof_detector_weights),
    )
    anomaly_cfg, detector_cfg = (oof, base) if role == "anomaly" else (base, oof)
    anomaly = default_anomaly(anomaly_cfg) if config.priors else None
    detector = default_detector(detector_cfg) if config.priors and config.box_prior else None
    return anomaly, detector


class OutOfFoldPriors:
    """Priors of light-training images from lesion models that never saw them
    (:func:`out_of_fold_stages` by :func:`source_role`).

    Parameters
    ----------
    config : LightConfig
        Its ``oof_anomaly_weights`` (an anomaly map trained on the detector half) and
        ``oof_detector_weights`` (a detector trained on the anomaly half), and
        ``priors`` / ``box_prior`` (which maps are computed at all).
    anatomy : callable
        The anatomy segmenter of the priors (the light model's own).
    base : Config, optional
        As :func:`out_of_fold_stages`.

    Raises
    ------
    ValueError
        If a weights file fails :func:`check_out_of_fold_weights`.
    RuntimeError
        If a stage cannot be built (e.g. the weights do not fit the network).
    """

    def __init__(self, config: LightConfig, anatomy: AnatomyFn, base: Config | None = None) -> None:
        check_out_of_fold_weights(config)
        self._config = config
        # both halves' stages are built now, so that a file that does not load fails here
        self._computers = {
            role: PriorComputer(anatomy, *out_of_fold_stages(config, role, base), warn=False) for role in ROLES
        }

    def __call__(self, image_id: str, x: np.ndarray) -> ImagePriors | None:
        """Priors of ``x`` uint8 (H, W), the image ``image_id`` of a light-training
        dataset; None for an image neither lesion model trained on (the caller uses the
        light model's own priors)."""
        role = source_role(image_id)
        if role is None:
            return None
        return self._computers[role].priors(x, with_anomaly=self._config.priors, key=image_id)
