"""Out-of-fold priors for training the light model (issue 28).

The builtin anomaly map and detector each train on one half of the COVID-QU-Ex tuning
part and of the JSRT nodule images (:func:`cxrils.training.lesion_data.tuning_role`,
:func:`~cxrils.training.lesion_data.jsrt_role`). The light model's training dataset
(:mod:`cxrils.training.light_data`) holds images of both halves, so with the shipped
models every such image has one prior from a model that learned on it: sharper than on a
new film (``benchmarks/light_prior_shift.py``: lung-level opacity N-Acc on normal films
98.5 % on the anomaly map's own half against 93.8 % on the other), and the light model
learns to trust it more than it deserves on the radiologists' held-back films.

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
import json
from pathlib import Path

import numpy as np

from cxrils.config import Config
from cxrils.models.light.config import LightConfig
from cxrils.models.light.priors import AnatomyFn, ImagePriors, PriorComputer, default_anomaly, default_detector
from cxrils.training.lesion_data import ROLES, jsrt_role, tuning_role
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
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as err:  # safetensors raises several types on missing or bad files
        raise ValueError(f"{path}: cannot read weights metadata: {err}") from err
    try:
        role = json.loads(meta.get("training", "{}")).get("role")
    except (ValueError, AttributeError):
        role = None
    if role not in ROLES:
        raise ValueError(
            f"{path}: records no training half (metadata 'training.role' {role!r}); retrain it with "
            "cxrils train-anomaly / train-detector --role"
        )
    return role


class OutOfFoldPriors:
    """Priors of light-training images from lesion models that never saw them.

    Parameters
    ----------
    config : LightConfig
        Its ``oof_anomaly_weights`` (an anomaly map trained on the detector half) and
        ``oof_detector_weights`` (a detector trained on the anomaly half), and
        ``priors`` / ``box_prior`` (which maps are computed at all).
    anatomy : callable
        The anatomy segmenter of the priors (the light model's own).
    base : Config, optional
        Pipeline config whose anomaly and detection settings both models use (default:
        the default config).

    Raises
    ------
    ValueError
        If a weights file is unset or records the wrong half (:func:`weights_role`).
    """

    def __init__(self, config: LightConfig, anatomy: AnatomyFn, base: Config | None = None) -> None:
        base = base or Config()
        self._config = config
        self._anatomy = anatomy
        for path, want in ((config.oof_anomaly_weights, "detector"), (config.oof_detector_weights, "anomaly")):
            if not path:
                raise ValueError("out-of-fold priors need both oof_anomaly_weights and oof_detector_weights")
            if weights_role(path) != want:
                raise ValueError(
                    f"{path}: trained on the {weights_role(path)!r} half; the other model's half, {want!r}, is needed"
                )
        self._oof_cfg = dataclasses.replace(
            base,
            anomaly=dataclasses.replace(base.anomaly, builtin_weights=config.oof_anomaly_weights),
            detection=dataclasses.replace(base.detection, builtin_weights=config.oof_detector_weights),
        )
        self._base = base
        self._computers: dict[str, PriorComputer] = {}

    def _computer(self, role: str) -> PriorComputer:
        """Role ``"anomaly"``: the out-of-fold anomaly map and the shipped detector;
        ``"detector"``: the shipped anomaly map and the out-of-fold detector."""
        if role not in self._computers:
            with_boxes = self._config.priors and self._config.box_prior
            anomaly_cfg, detector_cfg = (
                (self._oof_cfg, self._base) if role == "anomaly" else (self._base, self._oof_cfg)
            )
            self._computers[role] = PriorComputer(
                self._anatomy,
                default_anomaly(anomaly_cfg) if self._config.priors else None,
                default_detector(detector_cfg) if with_boxes else None,
            )
        return self._computers[role]

    def __call__(self, image_id: str, x: np.ndarray) -> ImagePriors | None:
        """Priors of ``x`` uint8 (H, W), the image ``image_id`` of a light-training
        dataset; None for an image neither lesion model trained on (the caller uses the
        light model's own priors)."""
        role = source_role(image_id)
        if role is None:
            return None
        return self._computer(role).priors(x, with_anomaly=self._config.priors, key=image_id)
