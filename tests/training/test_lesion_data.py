"""Human lesion labels: the fixed split, the training halves, component boxes, the
network input and the near-duplicate rule."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from cxrils.config import LesionDataConfig
from cxrils.training import lesion_data as ld
from cxrils.vision.lesion_nets import network_input
from lesion_fixtures import write_covid_qu_ex


def test_parts_and_roles_follow_the_hash_rules():
    for iid in ("covid_1", "covid_2", "Normal_11766", "covid_4062"):
        h = int(hashlib.sha256(f"covid_qu_ex:{iid}".encode()).hexdigest(), 16)
        assert ld.part_of(iid) == ("report" if h % 100 < 20 else "tuning")
        r = int(hashlib.sha256(f"covid_qu_ex-role:{iid}".encode()).hexdigest(), 16)
        assert ld.tuning_role(iid) == ("detector", "anomaly")[r % 2]


def test_training_samples_are_disjoint_halves_of_the_tuning_part(tmp_path):
    root = write_covid_qu_ex(tmp_path, n_covid=40, n_normal=20)
    det = ld.training_samples(root, "detector")
    ano = ld.training_samples(root, "anomaly")
    assert det and ano
    assert not {s.image_id for s in det} & {s.image_id for s in ano}
    assert all(s.part == "tuning" for s in det + ano)
    report = {s.image_id for s in ld.covid_qu_ex_samples(root, "report")}
    assert not report & {s.image_id for s in det + ano}
    with pytest.raises(ValueError, match="role"):
        ld.training_samples(root, "light")
    with pytest.raises(FileNotFoundError, match="images.csv"):
        ld.covid_qu_ex_samples(tmp_path / "nowhere")


def test_lesion_boxes_one_per_component_specks_dropped():
    m = np.zeros((100, 100), bool)
    m[10:30, 5:25] = True  # 400 px
    m[50:90, 60:70] = True  # 400 px
    m[95:97, 95:97] = True  # 4 px speck
    lungs = np.ones((100, 100), bool)
    boxes = ld.lesion_boxes(m, 0.01, lungs)  # 1% of 10,000 = 100 px
    assert sorted(boxes) == [(5.0, 10.0, 25.0, 30.0), (60.0, 50.0, 70.0, 90.0)]
    assert len(ld.lesion_boxes(m, 0.0, lungs)) == 3


def test_network_input_ignores_monotone_grey_level_changes():
    rng = np.random.default_rng(0)
    x = np.clip(rng.normal(120, 40, (300, 200)), 0, 255).astype(np.uint8)
    a = network_input(x, 64)
    assert a.shape == (64, 64) and a.dtype == np.float32 and 0 <= a.min() and a.max() <= 1
    gamma = (255 * (x / 255.0) ** 0.6).astype(np.uint8)
    assert np.abs(network_input(gamma, 64) - a).mean() < 0.03
    assert np.abs(network_input(255 - x, 64) - a).mean() > 0.2  # an inversion is not monotone increasing


def test_random_affine_without_ranges_is_the_identity():
    m = ld.random_affine(np.random.default_rng(0), 64, 0.0, 0.0, 0.0)
    assert np.allclose(m, [[1, 0, 0], [0, 1, 0]])
    a = np.random.default_rng(1).random((64, 64)).astype(np.float32)
    assert np.allclose(ld.warp(a, m, 64), a, atol=1e-5)


def test_near_duplicates_find_recropped_reexposed_copies_not_lookalikes(tmp_path):
    import cv2
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:260, 0:260] / 260.0
    base = 128 + 50 * np.sin(3 * xx) * np.cos(2 * yy)

    def texture():  # structure a few pixels wide, like ribs and vessels
        return cv2.GaussianBlur(rng.normal(0, 1, (260, 260)), (0, 0), 5) * 300

    original = np.clip(base + texture(), 0, 255).astype(np.uint8)
    copy = np.clip(1.2 * original[4:256, 3:257].astype(float) - 20, 0, 255).astype(np.uint8)  # cropped, brighter
    lookalike = np.clip(base + texture(), 0, 255).astype(np.uint8)  # same layout, other structure
    paths = []
    for name, img in (("a", original), ("b", copy), ("c", lookalike)):
        p = tmp_path / f"{name}.png"
        Image.fromarray(img).save(p)
        paths.append(p)
    pairs = ld.near_duplicate_pairs(paths[:1], paths[1:], LesionDataConfig())
    assert [(i, j) for i, j, _ in pairs] == [(0, 0)]
    same = ld.near_duplicate_pairs(paths, paths, LesionDataConfig(), same_list=True)
    assert [(i, j) for i, j, _ in same] == [(0, 1)]


@pytest.mark.slow
def test_covid_qu_ex_copies_of_held_back_images_are_never_trained_on(shared_data):
    """COVID-QU-Ex holds images of the COVID-19 collection: the copy of the xrv_tests
    image covid-19-pneumonia-58-prior and every copy of a severity-scored image found by
    the rule stay out of both training halves."""
    import csv

    rep = ld.find_duplicates(shared_data)
    assert rep.cross, "COVID-QU-Ex is known to hold images of covid_ieee8023"
    assert any(other.endswith("covid-19-pneumonia-58-prior.png") for _, other, _ in rep.cross)
    part = {s.image_id: s.part for s in ld.covid_qu_ex_samples(shared_data)}
    train = {s.image_id for role in ld.ROLES for s in ld.training_samples(shared_data, role)}
    with open(shared_data / "covid_ieee8023" / "metadata.csv", newline="", encoding="utf-8", errors="replace") as fh:
        ids = {r["orig_filename"]: r["image_id"] for r in csv.DictReader(fh)}
    with open(shared_data / "covid_ieee8023" / "severity_scores.csv", newline="") as fh:
        scored = {f"covid_ieee8023/images/{ids[r['filename']]}.png" for r in csv.DictReader(fh) if r["filename"] in ids}
    copies = {iid for iid, other, _ in rep.cross if other in scored}
    assert copies and not copies & train
    assert all(part[t] == "tuning" and t not in train for t, _, _ in rep.within)
