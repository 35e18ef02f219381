"""Training pieces: the fixed split, lung splitting, the masked loss, and a tiny run of
``cxrils train-anatomy`` on a synthetic data folder with the real folder layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.vision.anatomy.builtin import BuiltinSegmenter
from cxrils.vision.anatomy.data import TEST_PERCENT, load_samples, split_both_lungs, split_of
from cxrils.vision.anatomy.train import _loss, is_validation, one_cycle_lr


def test_split_is_fixed_and_patient_level():
    ids = [f"P{i:04d}" for i in range(2000)]
    splits = [split_of("jsrt_scr", p) for p in ids]
    assert splits == [split_of("jsrt_scr", p) for p in ids]  # deterministic
    share = splits.count("test") / len(ids)
    assert abs(share - TEST_PERCENT / 100) < 0.03
    assert set(splits) == {"train", "test"}


def test_split_both_lungs_cuts_at_mediastinum():
    m = np.zeros((50, 100), dtype=bool)
    m[5:45, 10:40] = True
    m[5:45, 55:90] = True
    right, left = split_both_lungs(m)
    assert right[:, :40].sum() == m[:, :40].sum() and not right[:, 50:].any()
    assert left[:, 55:].sum() == m[:, 55:].sum() and not left[:, :45].any()
    assert not split_both_lungs(np.zeros_like(m))[0].any()


def test_loss_ignores_heart_where_weight_is_zero():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 8, 8)
    targets = (torch.rand(2, 3, 8, 8) > 0.5).float()
    w = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    other = targets.clone()
    other[0, 2] = 1 - other[0, 2]  # change the masked heart target only
    assert torch.isclose(_loss(logits, targets, w), _loss(logits, other, w))
    other[1, 2] = 1 - other[1, 2]  # an unmasked heart target does count
    assert not torch.isclose(_loss(logits, targets, w), _loss(logits, other, w))


def test_one_cycle_lr_warms_up_then_anneals():
    lrs = [one_cycle_lr(f, 3e-3) for f in np.linspace(0, 1, 101)]
    assert lrs[0] == pytest.approx(3e-3 / 25) and lrs[10] == pytest.approx(3e-3)
    assert lrs[-1] == pytest.approx(3e-3 / 25 / 1e4)
    assert all(a < b for a, b in zip(lrs[:10], lrs[1:11]))
    assert all(a > b for a, b in zip(lrs[10:-1], lrs[11:]))


def test_validation_part_is_fixed_and_disjoint_from_the_split_rule():
    ids = [f"P{i:04d}" for i in range(2000)]
    val = [is_validation("jsrt_scr", p, 10) for p in ids]
    assert val == [is_validation("jsrt_scr", p, 10) for p in ids]
    assert abs(sum(val) / len(ids) - 0.10) < 0.03
    assert not any(is_validation("jsrt_scr", p, 0) for p in ids)
    # an independent hash: the validation share is the same inside train and test patients
    train = [p for p, v in zip(ids, val) if split_of("jsrt_scr", p) == "train"]
    assert abs(sum(is_validation("jsrt_scr", p, 10) for p in train) / len(train) - 0.10) < 0.04


def _save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _synthetic_root(tmp_path):
    """A data folder with the layout of ../shared/data: 4 JSRT-like + 3 COVID-like images."""
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    rr, cc = np.mgrid[:64, :64]

    def organ(cy, cx, ry, rx):
        return (((rr - cy) / ry) ** 2 + ((cc - cx) / rx) ** 2 <= 1)

    right, left, heart = organ(30, 18, 20, 10), organ(30, 46, 20, 10), organ(44, 36, 8, 10)
    img = (60 + 120 * (right | left) - 40 * heart + rng.integers(0, 20, (64, 64))).astype(np.uint8)
    ids = [f"SYN{i:03d}" for i in range(40)]
    train_ids = [i for i in ids if split_of("jsrt_scr", i) == "train"][:4]
    test_id = next(i for i in ids if split_of("jsrt_scr", i) == "test")
    for iid in train_ids + [test_id]:
        _save(root / "jsrt_scr" / "images" / f"{iid}.png", img)
        for name, m in (("right_lung", right), ("left_lung", left), ("heart", heart)):
            _save(root / "jsrt_scr" / "masks" / name / f"{iid}.png", m.astype(np.uint8) * 255)
    rows = ["image_id,patientid"]
    covid = [i for i in ids if split_of("covid_ieee8023", i) == "train"][:3]
    for iid in covid:
        _save(root / "covid_ieee8023" / "images" / f"{iid}.png", img)
        _save(root / "covid_ieee8023" / "masks_lung_v7labs" / f"{iid}.png", (right | left).astype(np.uint8) * 255)
        rows.append(f"{iid},{iid}")
    (root / "covid_ieee8023" / "metadata.csv").write_text("\n".join(rows) + "\n")
    return root, test_id


def test_train_anatomy_command_writes_loadable_weights(tmp_path, monkeypatch):
    root, test_id = _synthetic_root(tmp_path)
    train = load_samples(root, "train")
    assert test_id not in {s.image_id for s in train}
    assert {s.source for s in train} == {"jsrt_scr", "covid_ieee8023"}
    assert all(s.heart is None for s in train if s.source == "covid_ieee8023")
    tiny = {"channels": [4, 8, 8, 8, 8], "strides": [2, 2, 2, 2], "num_res_units": 1, "input_size": 32}
    monkeypatch.setattr("cxrils.vision.anatomy.train.DEFAULT_ARCH", tiny)
    out = tmp_path / "w.safetensors"
    res = CliRunner().invoke(app, ["train-anatomy", "--data", str(root), "-o", str(out), "--epochs", "2",
                                   "--covid-per-epoch", "2"])
    assert res.exit_code == 0, res.output
    assert "epoch 2/2" in res.output
    from safetensors import safe_open

    with safe_open(str(out), framework="pt") as fh:
        meta = fh.metadata()
    summary = json.loads(meta["training"])
    used = {k: summary["train_images"][k] + summary["validation_images"][k] for k in summary["train_images"]}
    assert used == {"jsrt_scr": 4, "covid_ieee8023": 3}  # every train-split image, none of the test split
    assert 1 <= summary["best_epoch"] <= summary["epochs_run"] == 2
    seg = BuiltinSegmenter(out)
    m = seg.segment(np.zeros((50, 70), dtype=np.uint8))
    assert m.shape == (50, 70) and m["heart"].shape == (50, 70)

    # fine-tuning starts from the given weights and keeps their architecture
    out2 = tmp_path / "w2.safetensors"
    res = CliRunner().invoke(app, ["train-anatomy", "--data", str(root), "-o", str(out2), "--epochs", "1",
                                   "--covid-per-epoch", "2", "--init", str(out), "--lr", "1e-9",
                                   "--val-percent", "0"])
    assert res.exit_code == 0, res.output
    from safetensors.torch import load_file

    a, b = load_file(str(out)), load_file(str(out2))
    assert a.keys() == b.keys()
    weights = [k for k in a if k.endswith("conv.weight")]
    assert weights and all(torch.allclose(a[k], b[k], atol=1e-5) for k in weights)  # lr ~0: unchanged


def test_train_anatomy_command_missing_data(tmp_path):
    res = CliRunner().invoke(app, ["train-anatomy", "--data", str(tmp_path), "-o", str(tmp_path / "w.safetensors")])
    assert res.exit_code == 2
    assert "jsrt_scr" in res.output and "not found" in res.output
    res = CliRunner().invoke(app, ["train-anatomy", "--data", str(tmp_path), "-o", str(tmp_path / "w.safetensors"),
                                   "--init", str(tmp_path / "absent.safetensors")])
    assert res.exit_code == 2 and "absent.safetensors" in res.output


def test_train_anatomy_channels_option(tmp_path):
    root, _ = _synthetic_root(tmp_path)
    out = tmp_path / "w.safetensors"
    res = CliRunner().invoke(app, ["train-anatomy", "--data", str(root), "-o", str(out), "--epochs", "1",
                                   "--covid-per-epoch", "1", "--channels", "2,4,4", "--val-percent", "0"])
    assert res.exit_code == 0, res.output
    from safetensors import safe_open

    with safe_open(str(out), framework="pt") as fh:
        arch = json.loads(fh.metadata()["arch"])
    assert arch["channels"] == [2, 4, 4] and arch["strides"] == [2, 2]
    assert BuiltinSegmenter(out).segment(np.zeros((40, 40), dtype=np.uint8)).shape == (40, 40)
    for bad in ("a,b", "8", ",".join(["2"] * 10)):
        res = CliRunner().invoke(app, ["train-anatomy", "--data", str(root), "-o", str(out), "--channels", bad])
        assert res.exit_code == 2 and "--channels" in res.output
