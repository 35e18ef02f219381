"""A light model's weights record the prior stages they learned from, and refuse others.

The versions are restated here from the shipped weights files themselves (``"builtin "``
+ the stage's prefix + the first 12 hex digits of the file's SHA-256, the version string
the pipeline's provenance records), not read from cxrils.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from light_synthetic import block_anatomy, bright_anomaly, make_tiny_dataset
from safetensors import safe_open

import cxrils
from cxrils.models import Segmenter
from cxrils.models.base import ModelLoadError, default_model_dir
from cxrils.models.light import LightConfig
from cxrils.models.light.segmenter import LightSegmenter
from cxrils.training.light_train import TrainError, train_light

TINY = dict(ensemble=1, image_size=32, features=(4, 8, 8, 16, 16, 8), text_hidden=32, batch_size=8, lr=3e-3)
WEIGHTS = Path(cxrils.__file__).parent / "weights"


def _shipped(prefix: str, name: str) -> str:
    return f"builtin {prefix}-" + hashlib.sha256((WEIGHTS / name).read_bytes()).hexdigest()[:12]


SHIPPED = {
    "anatomy": _shipped("unet", "anatomy_builtin.safetensors"),
    "anomaly": _shipped("lesionseg", "anomaly_builtin.safetensors"),
    "detector": _shipped("centernet", "detector_builtin.safetensors"),
}


def _recorded(run: Path) -> dict | None:
    with safe_open(str(run / "model.safetensors"), framework="pt") as fh:
        raw = (fh.metadata() or {}).get("prior_stages")
    return None if raw is None else json.loads(raw)


def _with_version(fn, version: str):
    def call(*args):
        return fn(*args)

    call.stage_version = version
    return call


def test_the_shipped_model_records_the_shipped_stages_and_loads():
    run = default_model_dir()
    assert _recorded(run) == SHIPPED
    assert Segmenter.from_pretrained(run).prior_stages == SHIPPED


def test_training_records_the_stages_and_a_resume_refuses_others(tmp_path):
    ds = make_tiny_dataset(tmp_path / "ds", n_train=6, n_val=2, n_test=2)
    run = tmp_path / "run"
    v1 = _with_version(block_anatomy, "test anatomy v1")
    kw = dict(progress=False, evaluate=False, checkpoint_every=2, anomaly=bright_anomaly)
    train_light(ds, run, LightConfig(**TINY, steps=2, calibrate=False), anatomy=v1, **kw)
    # the hand-made anomaly stage has no version; the detector is the shipped default
    assert _recorded(run) == {"anatomy": "test anatomy v1", "detector": SHIPPED["detector"]}
    v2 = _with_version(block_anatomy, "test anatomy v2")
    with pytest.raises(TrainError, match="other prior stages"):
        train_light(ds, run, LightConfig(**TINY, steps=4, calibrate=False), anatomy=v2, **kw)


def test_loading_with_other_installed_stages_is_refused_with_both_versions(tmp_path):
    seg = LightSegmenter(LightConfig(**TINY), anatomy=block_anatomy, anomaly=bright_anomaly)
    seg.prior_stages = {"anomaly": "builtin lesionseg-000000000000", "detector": SHIPPED["detector"]}
    seg.save(tmp_path / "run")
    with pytest.raises(ModelLoadError) as err:
        Segmenter.from_pretrained(tmp_path / "run")
    msg = str(err.value)
    assert "lesionseg-000000000000" in msg and SHIPPED["anomaly"] in msg and "model.safetensors" in msg
    # a stage the caller passes in is the caller's choice: not checked
    loaded = Segmenter.from_pretrained(tmp_path / "run", anomaly=bright_anomaly)
    assert loaded.prior_stages == seg.prior_stages
    # weights saved without a record (runs before it existed) load as before
    seg.prior_stages = {}
    seg.save(tmp_path / "old")
    assert _recorded(tmp_path / "old") is None
    assert Segmenter.from_pretrained(tmp_path / "old").prior_stages == {}


def test_training_counts_implausible_images_in_one_warning(tmp_path, caplog):
    # block_anatomy's right lung covers half the image: no frontal chest radiograph to QC
    ds = make_tiny_dataset(tmp_path / "ds", n_train=6, n_val=2, n_test=2)
    with caplog.at_level("WARNING", logger="cxrils"):
        train_light(
            ds,
            tmp_path / "run",
            LightConfig(**TINY, steps=2, calibrate=False),
            progress=False,
            evaluate=False,
            anatomy=block_anatomy,
            anomaly=bright_anomaly,
        )
    per_image = [r for r in caplog.records if "does not look like a frontal chest radiograph" in r.getMessage()]
    summary = [
        r for r in caplog.records if "training images do not look like frontal chest radiographs" in r.getMessage()
    ]
    assert per_image == [] and len(summary) == 1
    assert "right lung covers 0.500 of the image" in summary[0].getMessage()


def test_a_resume_from_a_checkpoint_without_the_record_records_nothing(tmp_path, caplog):
    import torch

    ds = make_tiny_dataset(tmp_path / "ds", n_train=6, n_val=2, n_test=2)
    run = tmp_path / "run"
    v1 = _with_version(block_anatomy, "test anatomy v1")
    kw = dict(progress=False, evaluate=False, checkpoint_every=2, anomaly=bright_anomaly, anatomy=v1)
    train_light(ds, run, LightConfig(**TINY, steps=2, calibrate=False), **kw)
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=False)
    del state["prior_stages"]  # as a checkpoint written before the record existed
    torch.save(state, run / "checkpoint.pt")
    with caplog.at_level("WARNING", logger="cxrils"):
        train_light(ds, run, LightConfig(**TINY, steps=4, calibrate=False), **kw)
    assert _recorded(run) is None  # today's stages are not vouched for on weights partly trained before
    assert "does not record its prior stages" in caplog.text
