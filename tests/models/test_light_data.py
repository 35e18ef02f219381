"""The light model's training dataset: generated records with held-back images' train
records dropped, plus records written from human masks of the COVID-QU-Ex tuning part
(both halves, ``LightDataConfig.covid_qu_ex_roles``)."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest
from light_synthetic import make_tiny_dataset
from PIL import Image

from cxrils.config import LightDataConfig
from cxrils.dataset import DatasetError, read_records
from cxrils.training.lesion_data import covid_qu_ex_samples, near_duplicate_pairs, training_samples
from cxrils.training.lesion_train import split_validation
from cxrils.training.light_data import HUMAN_PREFIX, SYNTHETIC_PREFIX, build_training_dataset, validation_images
from lesion_fixtures import write_covid_qu_ex


@pytest.mark.slow
def test_training_dataset_merges_generated_and_human_records(tmp_path):
    gen = make_tiny_dataset(tmp_path / "gen", n_train=6, n_val=2, n_test=2)
    root = write_covid_qu_ex(tmp_path / "data", n_covid=20, n_normal=10)
    cov = root / "covid_ieee8023"
    (cov / "images").mkdir(parents=True)
    # a severity-scored image that is a copy of a generated train image, and one of a test image
    shutil.copy(gen / "images" / "img000.png", cov / "images" / "s1.png")
    shutil.copy(gen / "images" / "img008.png", cov / "images" / "s2.png")
    with open(cov / "metadata.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerows([["image_id", "orig_filename"], ["s1", "s1.jpeg"], ["s2", "s2.jpeg"]])
    with open(cov / "severity_scores.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerows([["filename", "geographic_mean", "opacity_mean"], ["s1.jpeg", "3", "2"], ["s2.jpeg", "1", "1"]])
    out = tmp_path / "light_data"
    summary = build_training_dataset(gen, root, out)
    recs = read_records(out)
    before = read_records(gen)
    assert summary["held_back_images"] == 2
    assert not len(recs[(recs.image_id == "img000")]), "train records of a held-back image are dropped"
    assert len(recs[recs.image_id == "img008"]) == len(before[before.image_id == "img008"]), "test records stay"
    human = recs[recs.image_id.str.startswith(HUMAN_PREFIX)]
    tuning = training_samples(root, "detector") + training_samples(root, "anomaly")
    assert training_samples(root, "detector") and training_samples(root, "anomaly")
    want = {HUMAN_PREFIX + s.image_id for s in tuning}
    # every record comes from the tuning part, both halves; an image whose human mask reaches no
    # location of the (synthetic-image) anatomy yields no record, so not all must appear
    assert set(human.image_id) <= want and len(set(human.image_id)) >= 0.9 * len(want)
    assert set(human.split) <= {"train", "validate"}
    reported = {HUMAN_PREFIX + s.image_id for s in covid_qu_ex_samples(root, "report")}
    assert not reported & set(recs.image_id)
    pos = human[human.polarity == "positive"]
    assert len(pos) and set(pos.lesion_type) == {"opacity"} and (pos.mask_area > 0).all()
    normals = {HUMAN_PREFIX + s.image_id for s in tuning if not s.positive}
    assert not set(pos.image_id) & normals
    # COVID-19 images get no absent-type lung negatives ("There is no pneumonia" could be
    # false); cardiomegaly only by the CTR rule
    covid_neg = human[(human.polarity == "negative") & ~human.image_id.isin(normals)]
    assert set(covid_neg.lesion_type) <= {"opacity", "cardiomegaly"}
    assert not len(covid_neg[(covid_neg.lesion_type == "cardiomegaly") & (covid_neg.instruction_type != "global")])
    # a Normal image is asked the global and both whole-lung questions of every lung type
    normal_recs = human[human.image_id.isin(normals)]
    assert set(normal_recs.polarity) == {"negative"}
    for image_id, group in normal_recs.groupby("image_id"):
        asked = set(zip(group.lesion_type, group.instruction))
        for t in ("pneumonia", "atelectasis", "opacity", "consolidation", "edema", "effusion"):
            assert (t, f"Segment the {t}.") in asked, (image_id, t)
            assert (t, f"Segment the {t} in the right lung.") in asked, (image_id, t)
            assert (t, f"Segment the {t} in the left lung.") in asked, (image_id, t)
            assert (t, f"Segment the {t} in the right lung and left lung.") in asked, (image_id, t)
    # a synthetic study is in the split of the Normal image it is drawn on
    syn = recs[recs.image_id.str.startswith(SYNTHETIC_PREFIX)]
    assert len(syn)
    split_of = human.groupby("image_id").split.first()
    for image_id, group in syn.groupby("image_id"):
        assert set(group.split) == {split_of[HUMAN_PREFIX + image_id[len(SYNTHETIC_PREFIX) :]]}, image_id
    # a folder begun with other settings is never resumed into
    with pytest.raises(DatasetError, match="another provenance.*validate_fraction"):
        build_training_dataset(gen, root, out, data=LightDataConfig(validate_fraction=0.3))
    assert len(read_records(out)) == len(recs), "the finished folder is untouched"


def test_normal_forms_ask_global_whole_lungs_and_seeded_zones():
    from cxrils import vocab
    from cxrils.config import LightDataConfig
    from cxrils.training.light_data import normal_forms

    a, b = normal_forms("cqx-a"), normal_forms("cqx-a")
    assert a == b  # same id, same questions
    assert a[:3] == [("global", None), ("basic", "right lung"), ("basic", "left lung")]
    zones = [loc for _, loc in a[3:]]
    assert len(set(zones)) == len(zones) == LightDataConfig().normal_absent_zones
    assert all(z in vocab.INSTRUCTION_LOCATIONS and z not in ("right lung", "left lung") for z in zones)
    drawn = {tuple(normal_forms(f"cqx-{k}")[3:]) for k in range(40)}
    assert len(drawn) > 5  # zones vary between images


def test_both_lungs_negatives_copy_each_right_lung_negative():
    from cxrils.training.light_data import both_lungs_negatives

    def row(k, polarity, form, locs, lesion="edema"):
        return {
            "record_id": f"im:{k}",
            "image_id": "im",
            "polarity": polarity,
            "instruction_type": form,
            "locations": locs,
            "lesion_type": lesion,
            "instruction": "x",
            "answer": "y",
            "mask_area": 0,
        }

    rows = [
        row(0, "negative", "global", []),
        row(1, "negative", "basic", ["right lung"]),
        row(2, "negative", "basic", ["left lung"]),
        row(3, "negative", "basic", ["right lung"], "effusion"),
        row(7, "negative", "basic", ["right lung base"]),
        row(4, "positive", "basic", ["right lung"], "opacity"),
    ]
    out = both_lungs_negatives(rows)
    assert [r["record_id"] for r in out] == ["im:8", "im:9"]  # numbering continues after the highest
    assert [r["lesion_type"] for r in out] == ["edema", "effusion"]
    assert out[0]["instruction"] == "Segment the edema in the right lung and left lung."
    assert out[1]["answer"] == "[SEG] There is no effusion in the right lung and left lung."
    assert all(r["locations"] == ["right lung", "left lung"] and r["polarity"] == "negative" for r in out)
    assert rows[1]["locations"] == ["right lung"]  # the source rows are not changed
    assert both_lungs_negatives([row(0, "positive", "basic", ["right lung"])]) == []


def test_cardiomegaly_positives_repeated_or_dropped_by_the_ctr():
    from cxrils.config import Config, LightDataConfig
    from cxrils.training.light_data import _cardiomegaly_rows

    def row(k, split, polarity, lesion):
        return {"record_id": f"im:{k}", "image_id": "im", "split": split, "polarity": polarity, "lesion_type": lesion}

    rows = [
        row(0, "train", "positive", "cardiomegaly"),
        row(1, "train", "negative", "effusion"),
        row(2, "test", "positive", "cardiomegaly"),
    ]
    out, rep, drop = _cardiomegaly_rows(rows, 0.58, Config())
    assert (rep, drop) == (1, 0) and len(out) == len(rows) + LightDataConfig().cardiomegaly_repeat - 1
    assert len({r["record_id"] for r in out}) == len(out)  # new ids, no clash
    assert sum(r["split"] == "test" for r in out) == 1  # test rows untouched
    out, rep, drop = _cardiomegaly_rows(rows, 0.40, Config())  # CTR <= 0.45: report and measure disagree
    assert (rep, drop) == (0, 1) and [r["record_id"] for r in out] == ["im:1", "im:2"]
    assert _cardiomegaly_rows(rows, None, Config())[2] == 1


@pytest.mark.needs_data
def test_jsrt_records_follow_the_radiologists_masks_and_nodules(shared_data):
    """JSRT nodule images of the anatomy's train split: the CTR of the SCR masks
    (restated here: widest heart row span / widest span of the two lungs) decides
    cardiomegaly by Appendix D.3's cut-offs, a positive's answer mask is the SCR heart;
    the nodule of ``nodules.csv`` gives opacity negatives in the other lung only."""
    import numpy as np
    from pycocotools import mask as mask_utils

    from cxrils.config import Config
    from cxrils.training.anatomy_data import split_of
    from cxrils.training.light_data import _jsrt_rows, jsrt_training_samples
    from cxrils.vision.anatomy import get_segmenter

    def width(m):
        cols = np.flatnonzero(m.any(axis=0))
        return cols[-1] - cols[0] + 1

    cfg = Config()
    picked = jsrt_training_samples(shared_data, cfg)
    assert sum(cm is not None for _, _, cm, _ in picked) > 40
    for s, ctr, cm, _side in picked:
        assert s.image_id.startswith("JPCLN") and split_of("jsrt_scr", s.image_id) == "train"
        ref = width(s.heart) / width(s.right_lung | s.left_lung)
        assert abs(ctr - ref) < 0.01
        assert cm is (True if ref > 0.5 else False if ref <= 0.45 else None)
    # JSRT's own words for two nodules (nodules.csv, "l.upper lobe", "r.lower lobe"...):
    # the side from the mask must agree with the lobe the radiologists wrote
    import csv

    with open(shared_data / "jsrt_scr" / "nodules.csv", newline="") as fh:
        lobe = {r["image_id"]: r["location_and_diagnosis_raw"].strip().lower() for r in csv.DictReader(fh)}
    sided = [(s.image_id, side) for s, _, _, side in picked if side]
    assert len(sided) > 80
    agree = sum(lobe[i].startswith(side[0] + ".") for i, side in sided if lobe[i][:2] in ("l.", "r."))
    named = sum(lobe[i][:2] in ("l.", "r.") for i, _ in sided)
    assert named > 50 and agree >= 0.95 * named
    segment = get_segmenter("builtin", cfg).segment
    s, _, _, side = next(p for p in picked if p[2] is True)
    _, rows = _jsrt_rows(s, True, None, "train", segment, cfg)
    assert {r["lesion_type"] for r in rows} == {"cardiomegaly"} and {r["polarity"] for r in rows} == {"positive"}
    assert len({r["record_id"] for r in rows}) == len(rows) > 1
    got = mask_utils.decode({"size": rows[0]["mask"]["size"], "counts": rows[0]["mask"]["counts"]}).astype(bool)
    assert (got == s.heart).all()
    s, _, _, side = next(p for p in picked if p[2] is False and p[3])
    _, rows = _jsrt_rows(s, False, side, "train", segment, cfg)
    assert [(r["lesion_type"], r["polarity"]) for r in rows if r["lesion_type"] == "cardiomegaly"] == [
        ("cardiomegaly", "negative")
    ]
    opacity = [r for r in rows if r["lesion_type"] == "opacity"]
    other = "left" if side == "right" else "right"
    assert {r["polarity"] for r in opacity} == {"negative"} and len(opacity) == 5
    assert all(r["locations"][0].startswith(other) for r in opacity)  # never the nodule's lung
    assert f"Segment the opacity in the {other} lung." in {r["instruction"] for r in opacity}


def test_zone_rows_ask_each_lesion_zone_and_the_untouched_zones():
    import numpy as np

    from cxrils import vocab
    from cxrils.config import Config
    from cxrils.masks import decode_rle
    from cxrils.training.light_data import zone_rows
    from cxrils.types import AnatomyMasks

    h = w = 100

    def rect(r0, r1, c0, c1):
        m = np.zeros((h, w), bool)
        m[r0:r1, c0:c1] = True
        return m

    # the patient's right lung is the image's left half; zones by rows
    bands = ((0, 15), (15, 40), (40, 70), (70, 100))
    masks = {"right lung": rect(0, h, 0, 50), "left lung": rect(0, h, 50, w), "heart": rect(60, 90, 40, 60)}
    for zones, (c0, c1) in ((vocab.RIGHT_ZONES, (0, 50)), (vocab.LEFT_ZONES, (50, w))):
        for z, (r0, r1) in zip(zones, bands):
            masks[z] = rect(r0, r1, c0, c1)
    for lobe in vocab.LOBES:
        masks[lobe] = masks["right lung"] if "right" in lobe else masks["left lung"]
    anat = AnatomyMasks(masks, (h, w), "hand")
    # 500 px in the right mid zone, 1,250 in the right base, 45 (2.5 %, under 10 %) in the left base
    lesion = rect(60, 95, 0, 50) | rect(70, 85, 50, 53)
    earlier = [{"record_id": "cqx-a:0"}, {"record_id": "cqx-a:3"}]
    rows = zone_rows("cqx-a", lesion, anat, earlier, "train", Config())
    pos = {r["locations"][0]: r for r in rows if r["polarity"] == "positive"}
    assert set(pos) == {"right mid zone lung", "right lung base"}
    assert pos["right lung base"]["instruction"] == "Segment the opacity in the right lung base."
    for z, r in pos.items():
        assert np.array_equal(decode_rle(r["mask"]).astype(bool), lesion & masks[z]), z
    neg = {r["locations"][0] for r in rows if r["polarity"] == "negative"}
    # every zone the mask does not touch; the left base holds 45 lesion pixels: no negative
    assert neg == set(vocab.LUNG_ZONES) - {"right mid zone lung", "right lung base", "left lung base"}
    assert {r["instruction_type"] for r in rows} == {"basic"} and {r["lesion_type"] for r in rows} == {"opacity"}
    assert len(rows) == 2 + 5  # two zones asked, five negatives
    assert sorted(r["record_id"] for r in rows) == sorted(f"cqx-a:{k}" for k in range(4, 4 + len(rows)))
    assert zone_rows("cqx-a", np.zeros((h, w), bool), anat, earlier, "train", Config()) == []


def _hand_anatomy(h: int = 100, w: int = 100):
    """Rectangular lungs (the patient's right lung on the image's left), zones by rows."""
    import numpy as np

    from cxrils import vocab
    from cxrils.types import AnatomyMasks

    def rect(r0, r1, c0, c1):
        m = np.zeros((h, w), bool)
        m[r0:r1, c0:c1] = True
        return m

    bands = ((0, 15), (15, 40), (40, 70), (70, 100))
    masks = {"right lung": rect(0, h, 5, 45), "left lung": rect(0, h, 55, w - 5), "heart": rect(60, 90, 40, 60)}
    for zones, (c0, c1) in ((vocab.RIGHT_ZONES, (5, 45)), (vocab.LEFT_ZONES, (55, w - 5))):
        for z, (r0, r1) in zip(zones, bands):
            masks[z] = rect(r0, r1, c0, c1)
    for lobe in vocab.LOBES:
        masks[lobe] = masks["right lung"] if "right" in lobe else masks["left lung"]
    return AnatomyMasks(masks, (h, w), "hand")


@pytest.mark.parametrize("lesion_type", ["pneumonia", "atelectasis", "opacity", "consolidation", "edema", "effusion"])
def test_draw_type_draws_inside_the_lungs(lesion_type):
    import numpy as np

    from cxrils.config import SyntheticConfig
    from cxrils.training.light_data import draw_type

    anat = _hand_anatomy()
    right, left = anat["right lung"], anat["left lung"]
    x = np.full((100, 100), 50, np.uint8)
    x[:, 45:55] = x[:, :5] = x[:, 95:] = 220  # mediastinum and chest wall: the soft tissue drawn towards
    image, region = draw_type(x, right, left, lesion_type, np.random.default_rng(3), SyntheticConfig())
    assert region.any() and not (region & ~(right | left)).any()
    assert image[region].mean() > x[region].mean() + 40
    if lesion_type == "edema":
        assert (region & right).any() and (region & left).any()  # bilateral
    if lesion_type == "effusion":
        lung = right if (region & right).any() else left
        assert region[99][lung[99]].all()  # the whole lowest row: the costophrenic angle


def test_synthetic_rows_give_lung_and_zone_positives_of_the_drawn_type_only():
    import numpy as np

    from cxrils import vocab
    from cxrils.config import Config
    from cxrils.masks import decode_rle
    from cxrils.training.light_data import SYNTHETIC_TYPES, synthetic_rows, synthetic_type

    anat = _hand_anatomy()
    x = np.full((100, 100), 50, np.uint8)
    x[:, 45:55] = x[:, :5] = x[:, 95:] = 220
    seen = set()
    for k in range(12):
        image_id = f"syn-{k}"
        t = synthetic_type(image_id)
        seen.add(t)
        image, rows = synthetic_rows(
            image_id, x, anat["right lung"], anat["left lung"], "train", lambda _img: anat, Config()
        )
        assert rows and {r["lesion_type"] for r in rows} == {t}, image_id
        pos = [r for r in rows if r["polarity"] == "positive"]
        kinds = {(r["instruction_type"], tuple(r["locations"])) for r in pos}
        assert any(kind == "basic" and set(locs) <= set(vocab.WHOLE_LUNGS) for kind, locs in kinds), kinds
        assert any(kind == "basic" and len(locs) == 1 and locs[0] in vocab.LUNG_ZONES for kind, locs in kinds), kinds
        drawn = image.astype(int) - x.astype(int) > 10
        for r in pos:  # every answer mask lies in what was drawn (the lung part of it)
            m = decode_rle(r["mask"]).astype(bool)
            assert m.any() and (m & ~drawn).sum() <= 0.05 * m.sum(), (image_id, r["instruction"])
    assert synthetic_type("syn-3") == synthetic_type("syn-3")
    assert len(seen) >= 4 and seen <= set(SYNTHETIC_TYPES)


def _in_validation(image_id, fraction, salt):
    return bool(split_validation([image_id], fraction, salt)[1])


def test_validation_images_keep_copies_in_one_split(tmp_path):
    """Copies of an image (with a little noise) go where the cluster's
    smallest id goes, whichever way their own hash points, also along a chain of
    copies; other images keep the split their hash gives."""
    salt, fraction = "t", 0.5
    names = [f"img{k:03d}" for k in range(200)]
    in_val = [n for n in names if _in_validation(n, fraction, salt)]
    in_train = [n for n in names if not _in_validation(n, fraction, salt)]
    # cluster 1: smallest id in validation, its copy hashed to train
    a = in_val[0]
    b = next(n for n in in_train if n > a)
    # cluster 2, a chain c ~ d ~ e: smallest id in train, the others hashed to validation
    c = next(n for n in in_train if n > b)
    d, e = [n for n in in_val if n > c][:2]
    rng = np.random.default_rng(0)

    def cells():  # iid Gaussian texture, 64 x 64 cells of 4 x 4 pixels
        return np.kron(rng.normal(size=(64, 64)), np.ones((4, 4)))

    def to_image(x):
        return np.clip(128 + 30 * (x - x.mean()) / x.std(), 0, 255).astype(np.uint8)

    # a chain: correlation(c, d) ~ 0.90, (d, e) ~ 0.88, (c, e) ~ 0.79, under the copy
    # test's 0.85 (coarse); a ~ b at ~ 0.99
    first, chain = cells(), cells()
    d_cells = chain + 0.484 * cells()
    e_cells = d_cells + 0.6 * cells()
    images = {
        a: to_image(first),
        b: to_image(first + 0.1 * cells()),
        c: to_image(chain),
        d: to_image(d_cells),
        e: to_image(e_cells),
    }
    images.update({f"other{k}": to_image(cells()) for k in range(6)})
    paths = {}
    for name, x in images.items():
        paths[name] = tmp_path / f"{name}.png"
        Image.fromarray(x).save(paths[name])
    ids = sorted(paths)
    pairs = {
        (ids[i], ids[j])
        for i, j, _ in near_duplicate_pairs([paths[i] for i in ids], [paths[i] for i in ids], same_list=True)
    }
    assert (c, e) not in pairs and {(a, b), (c, d), (d, e)} <= pairs, "the fixture: two clusters, one a chain"
    val = validation_images(ids, [paths[i] for i in ids], fraction, salt)
    assert a in val and b in val, "the copy follows the smaller id into validation"
    assert not {c, d, e} & val, "the chain follows its smallest id into train"
    for i in ids:
        if i.startswith("other"):
            assert (i in val) == _in_validation(i, fraction, salt), i
    with pytest.raises(ValueError, match="unique ids"):
        validation_images([a, a], [paths[a], paths[a]], fraction, salt)
    with pytest.raises(ValueError, match="one path each"):
        validation_images([a, b], [paths[a]], fraction, salt)
