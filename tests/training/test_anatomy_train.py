"""Training pieces: the fixed split, lung splitting, the masked loss, and a tiny run of
``cxrils train-anatomy`` on a synthetic data folder with the real folder layout."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.config import AnatomyDataConfig
from cxrils.training.anatomy_data import (
    fingerprint,
    load_samples,
    load_split,
    split_both_lungs,
    split_of,
)
from cxrils.training.anatomy_train import _loss, _val_dice, is_validation, load_overlapping, medial_gap, one_cycle_lr
from cxrils.vision.anatomy.builtin import BuiltinSegmenter

SPLIT = AnatomyDataConfig()  # the split and near-duplicate rule under test


def test_split_is_fixed_and_patient_level():
    ids = [f"P{i:04d}" for i in range(2000)]
    splits = [split_of("jsrt_scr", p) for p in ids]
    assert splits == [split_of("jsrt_scr", p) for p in ids]  # deterministic
    share = splits.count("test") / len(ids)
    assert abs(share - SPLIT.test_percent / 100) < 0.03
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
    w = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])[:, :, None, None].expand(2, 3, 8, 8)
    other = targets.clone()
    other[0, 2] = 1 - other[0, 2]  # change the masked heart target only
    assert torch.isclose(_loss(logits, targets, w), _loss(logits, other, w))
    other[1, 2] = 1 - other[1, 2]  # an unmasked heart target does count
    assert not torch.isclose(_loss(logits, targets, w), _loss(logits, other, w))


def test_loss_ignores_pixels_of_weight_zero_only():
    torch.manual_seed(1)
    logits = torch.randn(1, 2, 8, 8)
    targets = (torch.rand(1, 2, 8, 8) > 0.5).float()
    w = torch.ones(1, 2, 8, 8)
    w[0, 1, :, :4] = 0  # the left half of channel 1 is unknown (a medial gap)
    other = targets.clone()
    other[0, 1, :, :4] = 1 - other[0, 1, :, :4]
    assert torch.isclose(_loss(logits, targets, w), _loss(logits, other, w))
    other[0, 1, 0, 5] = 1 - other[0, 1, 0, 5]  # a known pixel counts
    assert not torch.isclose(_loss(logits, targets, w), _loss(logits, other, w))


def test_medial_gap_covers_the_space_between_the_lungs_and_the_heart():
    right = np.zeros((40, 60), dtype=bool)
    left = np.zeros_like(right)
    right[5:35, 5:25] = True
    left[5:35, 35:55] = True
    heart = np.zeros_like(right)
    heart[25:38, 20:40] = True  # reaches below the lungs
    gap = medial_gap(right, left, heart)
    assert gap[20, 27:33].all() and gap[37, 30]  # between the lungs, and the heart's lowest rows
    assert not gap[20, 5:22].any() and not gap[20, 38:55].any()  # lungs away from the border stay known
    assert not gap[2, 30]  # above the lungs' hull: known (not lung)
    assert not medial_gap(right, left, None)[37, 30]


def test_load_overlapping_keeps_shared_channels_of_an_older_output_layer():
    from cxrils.vision.anatomy.network import CHANNELS, build_network

    tiny = {"channels": [4, 8], "strides": [2], "num_res_units": 1, "input_size": 16}
    new = build_network(tiny)
    n = len(CHANNELS)
    # an older file with 3 output channels: every dimension of size n cut to 3, filled with 7
    old = {k: torch.full(tuple(3 if d == n else d for d in v.shape), 7.0) for k, v in new.state_dict().items()}
    partial = load_overlapping(new, old)
    assert partial == [k for k, v in new.state_dict().items() if n in tuple(v.shape)]
    state = new.state_dict()
    weight = state["model.2.1.conv.unit0.conv.weight"]  # (n, n, 3, 3)
    assert torch.all(weight[:3, :3] == 7.0) and not torch.all(weight[3:] == 7.0)
    assert torch.all(state["model.0.conv.unit0.conv.weight"] == 7.0)  # same shape: loaded whole
    with pytest.raises(ValueError, match="other tensors"):
        load_overlapping(new, {k: v for k, v in old.items() if "bias" not in k})


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
    """A data folder with the layout of ../shared/data: 4 JSRT-like + 3 COVID-19-like +
    3 COVID-QU-Ex-like training images, a held-back JSRT and COVID-QU-Ex image, and a
    COVID-19 training image that is a re-scaled, brighter copy of the held-back
    COVID-QU-Ex image (returned: ids of the held-back JSRT image, the held-back
    COVID-QU-Ex image and the copy)."""
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    rr, cc = np.mgrid[:64, :64]

    def organ(cy, cx, ry, rx):
        return ((rr - cy) / ry) ** 2 + ((cc - cx) / rx) ** 2 <= 1

    right, left, heart = organ(30, 18, 20, 10), organ(30, 46, 20, 10), organ(44, 36, 8, 10)

    def image():  # every image its own noise, so only the planted copy is a near-duplicate
        return (60 + 120 * (right | left) - 40 * heart + rng.integers(0, 80, (64, 64))).astype(np.uint8)

    image()  # the first draw of rng, as before
    ids = [f"SYN{i:03d}" for i in range(40)]
    train_ids = [i for i in ids if split_of("jsrt_scr", i) == "train"][:4]
    test_id = next(i for i in ids if split_of("jsrt_scr", i) == "test")
    for iid in train_ids + [test_id]:
        _save(root / "jsrt_scr" / "images" / f"{iid}.png", image())
        for name, m in (("right_lung", right), ("left_lung", left), ("heart", heart)):
            _save(root / "jsrt_scr" / "masks" / name / f"{iid}.png", m.astype(np.uint8) * 255)
    rows = ["image_id,patientid"]
    covid = [i for i in ids if split_of("covid_ieee8023", i) == "train"][:3]
    for iid in covid:
        _save(root / "covid_ieee8023" / "images" / f"{iid}.png", image())
        _save(root / "covid_ieee8023" / "masks_lung_v7labs" / f"{iid}.png", (right | left).astype(np.uint8) * 255)
        rows.append(f"{iid},{iid}")
    qu_rows = ["image_id,cls,lung_mask"]
    qu_train = [i for i in ids if split_of("covid_qu_ex", i) == "train"][:3]
    qu_test = next(i for i in ids if split_of("covid_qu_ex", i) == "test")
    held_back = image()
    for iid in qu_train + [qu_test]:
        _save(root / "covid_qu_ex" / "images" / f"{iid}.png", held_back if iid == qu_test else image())
        _save(root / "covid_qu_ex" / "lung_masks" / f"{iid}.png", (right | left).astype(np.uint8) * 255)
        qu_rows.append(f"{iid},Normal,lung_masks/{iid}.png")
    (root / "covid_qu_ex" / "images.csv").write_text("\n".join(qu_rows) + "\n")
    # the copy: another (train-split) COVID-19 patient, stored larger and brighter
    copy_id = [i for i in ids if split_of("covid_ieee8023", i) == "train"][3]
    big = cv2.resize(held_back, (96, 80), interpolation=cv2.INTER_LINEAR)
    _save(root / "covid_ieee8023" / "images" / f"{copy_id}.png", np.clip(big * 0.8 + 40, 0, 255).astype(np.uint8))
    _save(
        root / "covid_ieee8023" / "masks_lung_v7labs" / f"{copy_id}.png",
        cv2.resize((right | left).astype(np.uint8) * 255, (96, 80), interpolation=cv2.INTER_NEAREST),
    )
    rows.append(f"{copy_id},{copy_id}")
    (root / "covid_ieee8023" / "metadata.csv").write_text("\n".join(rows) + "\n")
    return root, test_id, qu_test, copy_id


def test_split_leaves_out_copies_of_held_back_images(tmp_path):
    root, test_id, qu_test, copy_id = _synthetic_root(tmp_path)
    split = load_split(root)
    assert {s.image_id for s in split.test} == {test_id, qu_test}
    assert all(split_of(s.source, s.patient_id) == "train" for s in split.train)
    # the COVID-19 training image that copies the held-back COVID-QU-Ex image is not trained on
    assert copy_id not in {s.image_id for s in split.train}
    [(left_out, matches)] = split.excluded
    assert left_out.image_id == copy_id and [m[:2] for m in matches] == [("covid_qu_ex", qu_test)]
    assert matches[0][2] > 0.95
    assert [s.image_id for s in load_samples(root, "train")] == [s.image_id for s in split.train]
    with pytest.raises(ValueError, match="split"):
        load_samples(root, "validation")


def test_fingerprint_matches_rescaled_copies_not_other_images():
    rng = np.random.default_rng(1)
    x = cv2.GaussianBlur(rng.integers(0, 255, (300, 240)).astype(np.uint8), (0, 0), 6)
    x = cv2.normalize(x, None, 0, 255, cv2.NORM_MINMAX)
    squashed = cv2.resize(x, (256, 256), interpolation=cv2.INTER_AREA)  # like COVID-QU-Ex's square copies
    darker = (squashed * 0.7 + 10).astype(np.uint8)
    other = cv2.normalize(
        cv2.GaussianBlur(rng.integers(0, 255, (300, 240)).astype(np.uint8), (0, 0), 6), None, 0, 255, cv2.NORM_MINMAX
    )
    f = fingerprint(x)
    assert f.shape == (SPLIT.dup_size**2,) and f.dtype == np.float32
    assert float(f @ f) == pytest.approx(1.0, abs=1e-5)
    assert float(f @ fingerprint(darker)) > 0.98
    assert float(f @ fingerprint(other)) < 0.5
    assert not fingerprint(np.full((20, 20), 7, dtype=np.uint8)).any()


def test_validation_dice_is_the_mean_over_sources():
    import torch

    class Perfect:  # logits reproducing the targets of the first two images, nothing for the others
        def eval(self):
            return self

        def __call__(self, x):
            return torch.where(x > 0.5, 20.0, -20.0).repeat(1, 3, 1, 1)

    images = np.zeros((4, 1, 8, 8), dtype=np.uint8)
    images[:2, :, 2:6, 2:6] = 255
    targets = np.zeros((4, 3, 8, 8), dtype=np.uint8)
    targets[:, :, 2:6, 2:6] = 255
    weights = np.array([[1, 1, 0]] * 4, dtype=np.float32)
    groups = np.array(["a", "a", "b", "b"])
    score, per_source = _val_dice(Perfect(), images, targets, weights, groups)
    assert per_source == {"a": pytest.approx(1.0), "b": pytest.approx(0.0)}
    assert score == pytest.approx(0.5)
    # three images of "a" and one of "b": still the mean of the two sources, not of the images
    score, _ = _val_dice(Perfect(), images[[0, 1, 0, 2]], targets, weights, np.array(["a", "a", "a", "b"]))
    assert score == pytest.approx(0.5)


def test_train_anatomy_command_writes_loadable_weights(tmp_path, monkeypatch):
    root, test_id, qu_test, copy_id = _synthetic_root(tmp_path)
    train = load_samples(root, "train")
    assert not {test_id, qu_test, copy_id} & {s.image_id for s in train}
    assert {s.source for s in train} == {"jsrt_scr", "covid_ieee8023", "covid_qu_ex"}
    assert all(s.heart is None for s in train if s.source != "jsrt_scr")
    tiny = {"channels": [4, 8, 8, 8, 8], "strides": [2, 2, 2, 2], "num_res_units": 1, "input_size": 32}
    monkeypatch.setattr("cxrils.training.anatomy_train.DEFAULT_ARCH", tiny)
    out = tmp_path / "w.safetensors"
    res = CliRunner().invoke(
        app,
        [
            "train-anatomy",
            "--data",
            str(root),
            "-o",
            str(out),
            "--epochs",
            "2",
            "--covid-per-epoch",
            "2",
            "--qu-ex-per-epoch",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "epoch 2/2" in res.output
    from safetensors import safe_open

    with safe_open(str(out), framework="pt") as fh:
        meta = fh.metadata()
    summary = json.loads(meta["training"])
    used = {k: summary["train_images"][k] + summary["validation_images"][k] for k in summary["train_images"]}
    # every train-split image, none of the test split, not the copy of a held-back image
    assert used == {"jsrt_scr": 4, "covid_ieee8023": 3, "covid_qu_ex": 3}
    assert summary["near_duplicates_left_out"] == {"jsrt_scr": 0, "covid_ieee8023": 1, "covid_qu_ex": 0}
    assert summary["per_epoch"] == {
        "jsrt_scr": summary["train_images"]["jsrt_scr"],
        "covid_ieee8023": 2,
        "covid_qu_ex": 2,
    }
    assert 1 <= summary["best_epoch"] <= summary["epochs_run"] == 2
    seg = BuiltinSegmenter(out)
    m = seg.segment(np.zeros((50, 70), dtype=np.uint8))
    assert m.shape == (50, 70) and m["heart"].shape == (50, 70)

    # fine-tuning starts from the given weights and keeps their architecture
    out2 = tmp_path / "w2.safetensors"
    res = CliRunner().invoke(
        app,
        [
            "train-anatomy",
            "--data",
            str(root),
            "-o",
            str(out2),
            "--epochs",
            "1",
            "--covid-per-epoch",
            "2",
            "--init",
            str(out),
            "--lr",
            "1e-9",
            "--val-percent",
            "0",
        ],
    )
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
    res = CliRunner().invoke(
        app,
        [
            "train-anatomy",
            "--data",
            str(tmp_path),
            "-o",
            str(tmp_path / "w.safetensors"),
            "--init",
            str(tmp_path / "absent.safetensors"),
        ],
    )
    assert res.exit_code == 2 and "absent.safetensors" in res.output


def test_train_anatomy_channels_option(tmp_path):
    root, *_ = _synthetic_root(tmp_path)
    out = tmp_path / "w.safetensors"
    res = CliRunner().invoke(
        app,
        [
            "train-anatomy",
            "--data",
            str(root),
            "-o",
            str(out),
            "--epochs",
            "1",
            "--covid-per-epoch",
            "1",
            "--channels",
            "2,4,4",
            "--val-percent",
            "0",
        ],
    )
    assert res.exit_code == 0, res.output
    from safetensors import safe_open

    with safe_open(str(out), framework="pt") as fh:
        arch = json.loads(fh.metadata()["arch"])
    assert arch["channels"] == [2, 4, 4] and arch["strides"] == [2, 2]
    assert BuiltinSegmenter(out).segment(np.zeros((40, 40), dtype=np.uint8)).shape == (40, 40)
    for bad in ("a,b", "8", ",".join(["2"] * 10)):
        res = CliRunner().invoke(app, ["train-anatomy", "--data", str(root), "-o", str(out), "--channels", bad])
        assert res.exit_code == 2 and "--channels" in res.output
