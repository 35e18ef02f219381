"""``cxrils train-detector`` / ``train-anomaly`` on a tiny synthetic COVID-QU-Ex: the
weights they write load into the builtin backends, the halves stay apart, and the
summary says what was trained on."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cxrils.config import AnomalyConfig, AnomalyTrainConfig, Config, DetectionConfig, DetectorTrainConfig
from cxrils.training.lesion_data import training_samples
from lesion_fixtures import write_covid_qu_ex

TINY = {"input_size": 32, "widths": (4, 4, 8, 8, 8), "epochs": 2, "batch_size": 4, "val_fraction": 0.3}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return write_covid_qu_ex(tmp_path_factory.mktemp("data"), n_covid=40, n_normal=20)


@pytest.mark.slow
def test_train_detector_writes_loadable_weights(data_root, tmp_path):
    from cxrils.training.detector_train import train_detector
    from cxrils.vision.detection import get_detector

    out = tmp_path / "det.safetensors"
    s = train_detector(data_root, out, dataclasses.replace(DetectorTrainConfig(), **TINY), progress=False)
    det_ids = {x.image_id for x in training_samples(data_root, "detector")}
    assert s["images"] == len(det_ids) and s["train_images"] + s["validation_images"] == len(det_ids)
    assert len(s["history"]) == 2 and 0 <= s["validation_ap50"] <= 1
    assert s["role"] == "detector" and s["init"] is None  # the half and the start it trained from
    det = get_detector("builtin", Config(detection=DetectionConfig(builtin_weights=str(out))))
    assert det.input_size == 32 and det.version.startswith("centernet-")
    x = np.full((64, 64), 100, np.uint8)
    assert all(b.class_name == "Lung Opacity" for b in det.detect(x))


@pytest.mark.slow
def test_train_anomaly_writes_loadable_weights_with_p_star(data_root, tmp_path):
    from cxrils.training.anomaly_train import best_threshold, train_anomaly
    from cxrils.vision.anomaly import get_anomaly_mapper

    out = tmp_path / "ano.safetensors"
    s = train_anomaly(data_root, out, dataclasses.replace(AnomalyTrainConfig(), **TINY), progress=False)
    assert (
        s["images"] == len(training_samples(data_root, "anomaly")) and s["p_star"] in AnomalyTrainConfig().p_star_grid
    )
    # the epoch is chosen by the validation AUROC, and p_star is that epoch's
    top = max(h["score"] for h in s["history"])
    assert s["history"][s["best_epoch"] - 1]["score"] == top == s["validation_auroc"]
    assert len(s["p_star_by_epoch"]) == len(s["history"]) and s["p_star"] == s["p_star_by_epoch"][s["best_epoch"] - 1]
    assert 0.0 <= s["validation_auroc"] <= 1.0 and 0.0 <= s["validation_iou"] <= 1.0
    m = get_anomaly_mapper("builtin", Config(anomaly=AnomalyConfig(builtin_weights=str(out))))
    assert m.p_star == s["p_star"] and m.version.startswith("lesionseg-")
    # best_threshold by hand: the threshold separating the two values wins with IoU 1
    prob = np.array([[[0.9, 0.2], [0.2, 0.2]]], np.float32)
    ref = np.array([[[True, False], [False, False]]])
    t, iou = best_threshold(prob, ref, (0.1, 0.5, 0.95))
    assert (t, iou) == (0.5, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["anomaly", "detector"])
def test_lesion_training_is_repeatable_from_its_seed(data_root, tmp_path, which):
    """The seed fixes the initial weights too (they were drawn before it was set, so two
    runs of one command gave different networks)."""
    from safetensors.torch import load_file

    from cxrils.training.anomaly_train import train_anomaly
    from cxrils.training.detector_train import train_detector

    train, base = {
        "anomaly": (train_anomaly, AnomalyTrainConfig()),
        "detector": (train_detector, DetectorTrainConfig()),
    }[which]

    def weights(name: str, seed: int) -> dict:
        out = tmp_path / f"{name}.safetensors"
        train(data_root, out, dataclasses.replace(base, **{**TINY, "epochs": 1, "seed": seed}), progress=False)
        return load_file(str(out))

    a, b, c = weights("a", 0), weights("b", 0), weights("c", 1)
    assert a.keys() == b.keys() == c.keys()
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    assert not all(np.array_equal(a[k].numpy(), c[k].numpy()) for k in a)


def test_train_anomaly_refuses_an_empty_validation_split(data_root, tmp_path):
    """Without validation images nothing can choose the epoch or p_star: a clear error,
    no weights file (before, epoch 1 and the first p_star of the grid were written)."""
    from cxrils.training.anomaly_train import train_anomaly

    out = tmp_path / "ano.safetensors"
    with pytest.raises(ValueError, match="no validation image"):
        train_anomaly(data_root, out, dataclasses.replace(AnomalyTrainConfig(), **{**TINY, "val_fraction": 0.0}))
    assert not out.exists()
