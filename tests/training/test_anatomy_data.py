"""The anatomy training data on the real shared sources: COVID-QU-Ex loading, the
right/left split of its both-lungs masks, the fixed split and the near-duplicate rule."""

from __future__ import annotations

import csv

import cv2
import numpy as np
import pytest

from cxrils.config import AnatomyDataConfig
from cxrils.training.anatomy_data import (
    covid_qu_ex_samples,
    fingerprint,
    held_back_images,
    load_split,
    read_gray,
    split_of,
)

SPLIT = AnatomyDataConfig()  # the split and near-duplicate rule under test


@pytest.fixture(scope="module")
def qu_ex(shared_data):
    if not (shared_data / "covid_qu_ex").is_dir():
        pytest.skip("../shared/data/covid_qu_ex not found")
    return covid_qu_ex_samples(shared_data)


@pytest.fixture(scope="module")
def split(shared_data):
    return load_split(shared_data)


def test_covid_qu_ex_loads_every_lung_mask(qu_ex, shared_data):
    # the dataset's README: 2,796 images, all 256 x 256 with a both-lungs mask, no heart
    assert len(qu_ex) == 2796
    assert {s.image_id.split("_")[0] for s in qu_ex} == {"covid", "Normal"}
    s = qu_ex[0]
    assert s.source == "covid_qu_ex" and s.patient_id == s.image_id and s.heart is None
    assert s.right_lung.shape == s.left_lung.shape == read_gray(s.image_path).shape == (256, 256)
    assert s.right_lung.dtype == bool


def test_both_lungs_mask_is_cut_into_its_two_lungs_patient_right_on_image_left(qu_ex, shared_data):
    """On real COVID-QU-Ex masks whose two lungs are separate blobs, the cut gives each
    blob whole to one lung, and the blob on the image's left is the patient's right."""
    checked = 0
    for s in qu_ex[::50]:
        both = read_gray(shared_data / "covid_qu_ex" / "lung_masks" / f"{s.image_id}.png") > 127
        assert np.array_equal(s.right_lung | s.left_lung, both) and not (s.right_lung & s.left_lung).any()
        n, labels = cv2.connectedComponents(both.astype(np.uint8))
        if n != 3:
            continue
        blobs = sorted((labels == k for k in (1, 2)), key=lambda b: np.nonzero(b)[1].mean())
        assert np.array_equal(s.right_lung, blobs[0]) and np.array_equal(s.left_lung, blobs[1])
        assert np.nonzero(s.right_lung)[1].mean() < 128 < np.nonzero(s.left_lung)[1].mean()
        checked += 1
    assert checked >= 50


@pytest.mark.slow
def test_split_never_trains_on_a_held_back_image(split, shared_data):
    held = held_back_images(shared_data)
    held_keys = {(src, iid) for src, iid, _ in held}
    train_keys = {(s.source, s.image_id) for s in split.train}
    assert not held_keys & train_keys
    assert all(split_of(s.source, s.patient_id) == "train" for s in split.train)
    assert all(split_of(s.source, s.patient_id) == "test" for s in split.test)
    assert {(s.source, s.image_id) for s in split.test} <= held_keys
    # COVID-QU-Ex: the image id stands in for the patient; about TEST_PERCENT % are held back
    qu_test = sum(s.source == "covid_qu_ex" for s in split.test)
    assert 0.17 < qu_test / 2796 < 0.23
    # a COVID-19 image held back without a v7labs mask still counts as held back
    with open(shared_data / "covid_ieee8023" / "metadata.csv", newline="", encoding="utf-8") as fh:
        held_ieee = [r["image_id"] for r in csv.DictReader(fh) if split_of("covid_ieee8023", r["patientid"]) == "test"]
    assert {iid for src, iid in held_keys if src == "covid_ieee8023"} == {
        i for i in held_ieee if (shared_data / "covid_ieee8023" / "images" / f"{i}.png").is_file()
    }


@pytest.mark.slow
def test_copy_of_a_held_back_covid19_image_in_covid_qu_ex_is_not_trained_on(split, shared_data):
    """COVID-QU-Ex's covid_150 is the COVID-19 collection's b9673e89 (checked by eye),
    a held-back patient there; covid_150 itself falls in COVID-QU-Ex's train split."""
    assert split_of("covid_qu_ex", "covid_150") == "train"
    with open(shared_data / "covid_ieee8023" / "metadata.csv", newline="", encoding="utf-8") as fh:
        patient = {r["image_id"]: r["patientid"] for r in csv.DictReader(fh)}
    assert split_of("covid_ieee8023", patient["b9673e89"]) == "test"
    a = read_gray(shared_data / "covid_qu_ex" / "images" / "covid_150.png")
    b = read_gray(shared_data / "covid_ieee8023" / "images" / "b9673e89.png")
    assert a.shape != b.shape  # the copy was re-scaled
    assert float(fingerprint(a) @ fingerprint(b)) >= SPLIT.dup_min_correlation
    assert "covid_150" not in {s.image_id for s in split.train if s.source == "covid_qu_ex"}
    excluded = {(s.source, s.image_id): m for s, m in split.excluded}
    assert ("covid_ieee8023", "b9673e89") in {m[:2] for m in excluded[("covid_qu_ex", "covid_150")]}
    # every left-out image is a train-split image matched to held-back images, never
    # only to other JSRT images (JSRT's distinct patients look alike)
    held_keys = {(src, iid) for src, iid, _ in held_back_images(shared_data)}
    for s, matches in split.excluded:
        assert split_of(s.source, s.patient_id) == "train" and matches
        assert all((src, iid) in held_keys and corr >= SPLIT.dup_min_correlation for src, iid, corr in matches)
        assert not all(src == s.source == "jsrt_scr" for src, _, _ in matches)


def test_reference_masks_by_label_and_missing_heart(tmp_path):
    from cxrils.training.anatomy_data import Sample

    right, left, heart = (np.zeros((4, 6), bool) for _ in range(3))
    right[:, :2], left[:, 4:], heart[2:, 2:4] = True, True, True
    s = Sample("jsrt_scr", "JPCLN001", "JPCLN001", tmp_path / "x.png", right, left, heart)
    masks = s.reference_masks()
    assert list(masks) == ["right lung", "left lung", "heart"]
    assert masks["right lung"] is right and masks["left lung"] is left and masks["heart"] is heart
    with pytest.raises(ValueError, match="no reference heart"):
        Sample("covid_qu_ex", "c1", "c1", tmp_path / "x.png", right, left, None).reference_masks()
