"""Out-of-fold priors (cxrils.training.prior_folds): which lesion model saw which
training image, the weights' recorded half, and that each image's priors come from the
models that did not train on it."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest
import torch
from light_synthetic import block_anatomy, make_tiny_dataset
from safetensors.torch import save_file

from cxrils.models.light import LightConfig
from cxrils.models.light.inputs import dataset_inputs
from cxrils.models.light.segmenter import LightSegmenter
from cxrils.training import prior_folds
from cxrils.training.light_train import TrainError, train_light
from cxrils.training.prior_folds import OutOfFoldPriors, source_role, weights_role
from cxrils.types import LesionBox


def _half(salt: str, image_id: str) -> str:
    """The halves rule restated: sha256("<source>-role:<id>") even -> detector, odd -> anomaly."""
    return ("detector", "anomaly")[int(hashlib.sha256(f"{salt}-role:{image_id}".encode()).hexdigest(), 16) % 2]


@pytest.mark.parametrize(
    ("image_id", "salt", "source_id"),
    [
        ("cqx-covid_17", "covid_qu_ex", "covid_17"),
        ("cqx-Normal_3", "covid_qu_ex", "Normal_3"),
        ("syn-Normal_3", "covid_qu_ex", "Normal_3"),
        ("jsrt-JPCLN001", "jsrt_scr", "JPCLN001"),
        ("syn-jsrtJPCLN042", "jsrt_scr", "JPCLN042"),
    ],
)
def test_source_role_follows_each_sources_halves_rule(image_id, salt, source_id):
    assert source_role(image_id) == _half(salt, source_id)


def test_source_role_is_none_for_images_no_lesion_model_saw():
    assert source_role("covid-19-pneumonia-7.jpg") is None
    assert source_role("SARS-10.1148rg.242035193-g04mr34g0-Fig8a-day0") is None


def test_both_halves_occur_among_training_ids():
    # the rule splits, not routes everything to one model
    roles = {source_role(f"cqx-covid_{k}") for k in range(20)}
    assert roles == {"detector", "anomaly"}


def _weights(path, role, kind="anomaly", init=None):
    """A weights file whose metadata record what cxrils' lesion training records: the half
    trained on, the kind's own key (the map's p_star, the detector's AP50), the init."""
    training = {"role": role, "init": init, **({"p_star": 0.15} if kind == "anomaly" else {"validation_ap50": 0.5})}
    meta = {"training": json.dumps(training)} if role else {}
    save_file({"w": torch.zeros(1)}, str(path), metadata=meta)
    return str(path)


def test_weights_role_reads_the_training_metadata_and_names_bad_files(tmp_path):
    assert weights_role(_weights(tmp_path / "a.safetensors", "detector")) == "detector"
    with pytest.raises(ValueError, match="b.safetensors.*no training half"):
        weights_role(_weights(tmp_path / "b.safetensors", None))
    with pytest.raises(ValueError, match="missing.safetensors"):
        weights_role(tmp_path / "missing.safetensors")


def test_light_config_takes_both_out_of_fold_files_or_neither():
    with pytest.raises(ValueError, match="set together"):
        LightConfig(oof_anomaly_weights="a.safetensors")
    assert LightConfig.from_dict(LightConfig().to_dict()).oof_detector_weights == ""


@pytest.fixture()
def oof_files(tmp_path):
    return (
        _weights(tmp_path / "ano_oof.safetensors", "detector", "anomaly"),
        _weights(tmp_path / "det_oof.safetensors", "anomaly", "detector"),
    )


def _fake_stages(monkeypatch, oof_ano, oof_det):
    """Anomaly maps and detectors that tell which weights file their config named:
    x_ano 0.25 (out of fold) or 0.75 (shipped); a box of confidence 0.3 or 0.9."""

    def anomaly(cfg):
        value = 0.25 if cfg.anomaly.builtin_weights == oof_ano else 0.75
        return lambda x, edit, lungs: np.full(x.shape, value, np.float32) * lungs

    def detector(cfg):
        conf = 0.3 if cfg.detection.builtin_weights == oof_det else 0.9
        return lambda x: [LesionBox(0, 0, x.shape[1] - 1, x.shape[0] - 1, conf, "Lung Opacity")]

    monkeypatch.setattr(prior_folds, "default_anomaly", anomaly)
    monkeypatch.setattr(prior_folds, "default_detector", detector)


def test_each_half_gets_the_models_that_did_not_train_on_it(monkeypatch, oof_files):
    ano, det = oof_files
    _fake_stages(monkeypatch, ano, det)
    cfg = LightConfig(oof_anomaly_weights=ano, oof_detector_weights=det)
    oof = OutOfFoldPriors(cfg, block_anatomy)
    ids = {
        role: next(f"cqx-covid_{k}" for k in range(50) if source_role(f"cqx-covid_{k}") == role)
        for role in ("anomaly", "detector")
    }
    x = np.full((64, 64), 90, np.uint8)
    seen_by_anomaly = oof(ids["anomaly"], x)
    seen_by_detector = oof(ids["detector"], x)
    assert seen_by_anomaly is not None and seen_by_detector is not None
    # the anomaly map's own training image: the other map, the shipped detector
    assert float(seen_by_anomaly.x_ano.max()) == pytest.approx(0.25)
    assert float(seen_by_anomaly.boxes.max()) == pytest.approx(0.9, abs=1e-3)
    # the detector's own training image: the shipped map, the other detector
    assert float(seen_by_detector.x_ano.max()) == pytest.approx(0.75)
    assert float(seen_by_detector.boxes.max()) == pytest.approx(0.3, abs=1e-3)
    assert oof("covid-19-pneumonia-7.jpg", x) is None


def test_out_of_fold_files_of_the_wrong_half_are_refused(oof_files):
    ano, det = oof_files
    with pytest.raises(ValueError, match="ano_oof.safetensors"):
        OutOfFoldPriors(LightConfig(oof_anomaly_weights=ano, oof_detector_weights=ano), block_anatomy)
    with pytest.raises(ValueError, match="det_oof.safetensors"):
        OutOfFoldPriors(LightConfig(oof_anomaly_weights=det, oof_detector_weights=det), block_anatomy)


def test_dataset_inputs_take_given_priors_and_fall_back_to_the_segmenters(tmp_path):
    ds_dir = make_tiny_dataset(tmp_path / "ds", n_train=4, n_val=2, n_test=1)
    from cxrils.dataset import ILSDataset

    cfg = LightConfig(ensemble=1, image_size=32, features=(4, 8, 8, 16, 16, 8), box_prior=False)
    seg = LightSegmenter(cfg, anatomy=block_anatomy, anomaly=lambda x, e, lungs: np.zeros(x.shape, np.float32))
    ds = ILSDataset(ds_dir, "train", size=32)
    ids = [str(i) for i in ds.records["image_id"]]
    given_id = ids[0]
    given = dataclasses.replace(seg.image_priors(np.zeros((64, 64), np.uint8)), ctr=0.61)
    cache: dict = {}
    dataset_inputs(seg, ds, list(range(len(ids))), cache, lambda iid, x: given if iid == given_id else None)
    assert cache[given_id] is given
    assert all(cache[i] is not given for i in set(ids) - {given_id})


def test_train_light_refuses_out_of_fold_files_of_the_wrong_half(tmp_path, oof_files):
    ano, _ = oof_files
    ds_dir = make_tiny_dataset(tmp_path / "ds", n_train=4, n_val=2, n_test=1)
    cfg = LightConfig(ensemble=1, image_size=32, steps=1, oof_anomaly_weights=ano, oof_detector_weights=ano)
    with pytest.raises(TrainError, match="out-of-fold priors.*ano_oof.safetensors"):
        train_light(ds_dir, tmp_path / "run", cfg, progress=False, anatomy=block_anatomy)


@pytest.mark.parametrize("command", ["train-anomaly", "train-detector"])
def test_cli_refuses_an_unknown_half(tmp_path, command):
    from typer.testing import CliRunner

    from cxrils.cli import app
    from lesion_fixtures import write_covid_qu_ex

    root = write_covid_qu_ex(tmp_path, n_covid=4, n_normal=2)
    res = CliRunner().invoke(
        app, [command, "--data", str(root), "-o", str(tmp_path / "w.safetensors"), "--role", "both"]
    )
    assert res.exit_code != 0 and "role must be one of" in res.output
    assert not (tmp_path / "w.safetensors").exists()


def test_a_file_of_the_other_kind_or_fine_tuned_from_the_other_half_is_refused(tmp_path, oof_files):
    from cxrils.training.prior_folds import check_out_of_fold_weights

    ano, det = oof_files
    # a detector trained on the detector half named as the anomaly map: right half, wrong kind
    wrong_kind = _weights(tmp_path / "det_on_det.safetensors", "detector", "detector")
    with pytest.raises(ValueError, match="det_on_det.safetensors: not a builtin anomaly"):
        check_out_of_fold_weights(LightConfig(oof_anomaly_weights=wrong_kind, oof_detector_weights=det))
    # a detector of the anomaly half fine-tuned from the shipped detector (detector half)
    leaked = _weights(
        tmp_path / "det_ft.safetensors",
        "anomaly",
        "detector",
        init={"file": "detector_builtin.safetensors", "role": None},
    )
    with pytest.raises(ValueError, match="det_ft.safetensors: fine-tuned from detector_builtin"):
        check_out_of_fold_weights(LightConfig(oof_anomaly_weights=ano, oof_detector_weights=leaked))
    # fine-tuned from a file of its own half: still out of fold
    own = _weights(tmp_path / "det_r2.safetensors", "anomaly", "detector", init={"file": "r1", "role": "anomaly"})
    check_out_of_fold_weights(LightConfig(oof_anomaly_weights=ano, oof_detector_weights=own))


def test_init_record_names_the_file_its_hash_and_half(tmp_path):
    from cxrils.training.lesion_train import init_record

    path = _weights(tmp_path / "r1.safetensors", "anomaly", "detector")
    rec = init_record(path)
    assert rec["file"] == "r1.safetensors" and rec["role"] == "anomaly"
    assert rec["sha256"] == hashlib.sha256((tmp_path / "r1.safetensors").read_bytes()).hexdigest()
    assert init_record(None) is None


def test_a_run_records_its_out_of_fold_files_and_refuses_to_resume_on_others(tmp_path, monkeypatch, oof_files):
    ano, det = oof_files
    _fake_stages(monkeypatch, ano, det)
    ds_dir = make_tiny_dataset(tmp_path / "ds", n_train=4, n_val=2, n_test=1)
    stages = dict(anatomy=block_anatomy, anomaly=lambda x, e, lungs: np.zeros(x.shape, np.float32))
    small = dict(ensemble=1, image_size=32, features=(4, 8, 8, 16, 16, 8), text_hidden=16, batch_size=4)
    cfg = LightConfig(**small, steps=2, calibrate=False, oof_anomaly_weights=ano, oof_detector_weights=det)
    run = tmp_path / "run"
    result = train_light(ds_dir, run, cfg, progress=False, evaluate=False, checkpoint_every=1, **stages)
    assert result["oof_priors"]["anomaly_sha256"] == hashlib.sha256(open(ano, "rb").read()).hexdigest()
    # retrained in place: same half and kind, other weights
    meta = {"training": json.dumps({"role": "detector", "p_star": 0.2})}
    save_file({"w": torch.ones(1)}, ano, metadata=meta)
    with pytest.raises(TrainError, match="other out-of-fold weights"):
        train_light(ds_dir, run, dataclasses.replace(cfg, steps=3), progress=False, evaluate=False, **stages)
