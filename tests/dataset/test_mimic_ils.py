"""MIMIC-CXR-Ext-ILS import/export on a fixture folder in the release layout.

What is compared against outside truth: the fixture's JSON, images and 0/255 masks are
written here in the released layout, and :func:`mimic_ils_fixture.reason_seg_samples`
restates how the authors' ReasonSegDataset reads them (keys, path joins, mask == 255);
the importer's records must be exactly those pairs, and an export must read back the
same way.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from mimic_ils_fixture import authors_mask, make_release, reason_seg_samples
from PIL import Image
from typer.testing import CliRunner

from cxrils import vocab
from cxrils.cli import app
from cxrils.config import MimicIlsConfig
from cxrils.dataset import DatasetError, read_records
from cxrils.dataset.mimic_ils import export_mimic_ils, import_mimic_ils
from cxrils.dataset.mimic_ils.format import iter_samples
from cxrils.dataset.mimic_ils.importer import PROBLEMS_NAME, REPORT_NAME
from cxrils.masks import decode_rle

SPLITS = {"train": "train", "val": "validate", "test": "test"}


def _mask(rec) -> np.ndarray:
    return decode_rle({"size": [int(v) for v in rec["mask"]["size"]], "counts": rec["mask"]["counts"]})


def _problems(ds: Path) -> list[dict]:
    return [json.loads(line) for line in (ds / PROBLEMS_NAME).read_text().splitlines()]


@pytest.fixture
def release(tmp_path):
    return make_release(tmp_path / "physionet")


@pytest.fixture
def imported(release, tmp_path):
    ds = tmp_path / "ds"
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), progress=False)
    return ds


def test_records_are_the_pairs_the_authors_dataset_class_reads(release, imported):
    recs = read_records(imported)
    problems = _problems(imported)
    kinds = sorted(p["kind"] for p in problems)
    assert kinds == ["mask_size_differs", "missing_image", "missing_mask", "not_template"]
    missing_image = next(p for p in problems if p["kind"] == "missing_image")
    missing_mask = next(p for p in problems if p["kind"] == "missing_mask")
    n_expected = 0
    for rsplit, split in SPLITS.items():
        for s in reason_seg_samples(release.json, release.images, release.masks, rsplit):
            image_file = Path(s["image_path"])
            if not image_file.exists():  # the authors' loader would crash here; we list it
                assert missing_image["sample_key"] == image_file.stem
                continue
            if s["mask_path"] is not None and not Path(s["mask_path"]).exists():
                assert missing_mask["sample_key"] == image_file.stem
                continue
            n_expected += 1
            rows = recs[
                (recs["image_id"] == image_file.stem)
                & (recs["instruction"] == s["question"])
                & (recs["answer"] == s["answer"])
            ]
            assert len(rows) == 1, s
            rec = rows.iloc[0]
            assert rec["split"] == split and rec["lesion_type"] == s["disease"]
            assert rec["polarity"] == ("negative" if s["mask_path"] is None else "positive")
            x = np.asarray(Image.open(image_file).convert("L"))
            stored = np.asarray(Image.open(imported / rec["image_path"]))
            assert np.array_equal(stored, x) and (rec["height"], rec["width"]) == x.shape
            ref = authors_mask(s["mask_path"], x.shape)
            if ref.shape != x.shape:  # a mask stored at another size: by its own aspect in the image's frame
                ref = own_aspect_in_frame(ref, x.shape, max(x.shape))
            assert np.array_equal(_mask(rec), ref), s
            assert rec["patient_id"] == Path(s["image_path"]).parts[-3]
            assert rec["study_id"] == Path(s["image_path"]).parts[-2]
    assert len(recs) == n_expected == 17
    report = json.loads((imported / REPORT_NAME).read_text())
    assert report["records_in_dataset"] == 17 and report["n_problems"] == 4


def own_aspect_in_frame(mask, shape, side):
    """reason_seg_dataset.py, restated on a frame of ``side``: image and mask each through
    ``ResizeLongestSide(side)`` (the mask with PIL nearest, ``transforms.py`` ``apply_mask``)
    and zero-padded at the bottom right; the image's part of the frame is ``shape`` when
    ``side = max(shape)``."""

    def preprocess_shape(h, w):
        scale = side * 1.0 / max(h, w)
        return int(h * scale + 0.5), int(w * scale + 0.5)

    mh, mw = preprocess_shape(*mask.shape)
    frame = np.zeros((max(side, mh), max(side, mw)), bool)
    frame[:mh, :mw] = np.asarray(Image.fromarray(mask.astype(np.uint8) * 255).resize((mw, mh), Image.NEAREST)) > 0
    h, w = preprocess_shape(*shape)
    return frame[:h, :w]


def test_a_mask_of_another_size_keeps_its_own_aspect(release, imported):
    """The fixture's 64 x 64 mask of a 90 x 72 image: the authors' loader resizes it by its
    own aspect (not onto the image). Scored in their 1024 frame, our stored mask is
    theirs up to nearest-neighbour rounding; the old stretched one is far off."""
    recs = read_records(imported)
    rec = recs[recs["instruction"] == "Segment the opacity in the left mid zone lung."].iloc[0]
    path = release.masks / json.loads(rec["provenance"])["seg_mask_path"]
    png = authors_mask(str(path), (64, 64))
    assert png.shape == (64, 64) and (rec["height"], rec["width"]) == (90, 72)
    ours = _mask(rec)
    authors_1024 = own_aspect_in_frame(png, (90, 72), 1024)  # 1024 x 819: the frame the authors train on
    ours_1024 = (
        np.asarray(Image.fromarray(ours.astype(np.uint8) * 255).resize(authors_1024.shape[::-1], Image.NEAREST)) > 0
    )
    stretched = np.asarray(Image.fromarray(png.astype(np.uint8) * 255).resize((72, 90), Image.NEAREST)) > 0
    stretched_1024 = (
        np.asarray(Image.fromarray(stretched.astype(np.uint8) * 255).resize(authors_1024.shape[::-1], Image.NEAREST))
        > 0
    )

    def iou(a, b):
        return (a & b).sum() / (a | b).sum()

    assert iou(ours_1024, authors_1024) > 0.9 and iou(stretched_1024, authors_1024) < 0.5
    problem = next(p for p in _problems(imported) if p["kind"] == "mask_size_differs")
    assert "own aspect" in problem["detail"]


def test_location_lists_in_any_order_are_template_texts(release, tmp_path):
    """The released test set writes location lists in the grounded order ("left lung and
    right lung", "left upper zone lung, right lung base and left mid zone lung"): read as
    templates, not ``not_template``."""
    data = json.loads(release.json.read_text())
    key = next(k for k in data["train"] if k.startswith("096052b7"))
    data["train"][key]["instruction_answer_pairs"]["negative_pairs"] += [
        {
            "instruction": "Segment the consolidation in the left lung and right lung.",
            "answer": "[SEG] There is no consolidation in the left lung and right lung.",
            "target": "consolidation",
        },
        {
            "instruction": "Segment the opacity in the left upper zone lung, right lung base and left mid zone lung "
            "and predict its type.",
            "answer": "[SEG] There is no opacity in the left upper zone lung, right lung base and left mid zone lung.",
            "target": "pneumonia",
        },
    ]
    release.json.write_text(json.dumps(data))
    ds = tmp_path / "ds"
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), progress=False)
    recs = read_records(ds)
    basic = recs[recs["instruction"].str.startswith("Segment the consolidation in")].iloc[0]
    assert basic["instruction_type"] == "basic" and list(basic["locations"]) == ["right lung", "left lung"]
    li = recs[recs["instruction"].str.contains("predict its type") & recs["image_id"].str.startswith("096052b7")].iloc[
        0
    ]
    assert li["instruction_type"] == "lesion_inference"
    assert list(li["locations"]) == ["right lung base", "left upper zone lung", "left mid zone lung"]
    assert [p["kind"] for p in _problems(ds) if p["sample_key"] == key] == ["not_template"]  # only the free text


def test_fields_parsed_from_the_template_texts(imported):
    recs = read_records(imported)
    by_ins = {(r.image_id[:8], r.instruction): r for r in recs.itertuples()}
    li = by_ins[("02aa804e", "Segment the opacity in the left mid zone lung and predict its type.")]
    assert (li.instruction_type, li.polarity, li.lesion_type, li.target, li.certainty) == (
        "lesion_inference",
        "positive",
        "atelectasis",
        "opacity",
        "tentative",
    )
    assert list(li.locations) == ["left mid zone lung"]
    tent = by_ins[("02aa804e", "Segment the opacity in the left mid zone lung.")]
    assert (tent.instruction_type, tent.lesion_type, tent.target, tent.certainty) == (
        "basic",
        "atelectasis",
        "opacity",
        "tentative",
    )
    glob = by_ins[("02aa804e", "Segment the effusion.")]
    assert (glob.instruction_type, glob.polarity, list(glob.locations), glob.certainty) == (
        "global",
        "positive",
        ["right lung base"],
        "",
    )  # the global texts do not say the certainty
    basic = by_ins[("02aa804e", "Segment the effusion in the right lung base.")]
    assert basic.certainty == "definitive"
    neg = by_ins[("02aa804e", "Segment the effusion in the left upper zone lung.")]
    assert (neg.polarity, neg.certainty, int(neg.mask_area)) == ("negative", "", 0)
    free = by_ins[("096052b7", "Is there any consolidation?")]  # kept, unparsed fields empty
    assert (free.instruction_type, free.lesion_type, list(free.locations)) == ("", "consolidation", [])


def test_an_import_too_small_for_the_models_is_refused_before_writing(release, tmp_path):
    # the Python API refuses as the CLI does (the models answer no image under 32 px a side)
    with pytest.raises(DatasetError, match="max_side 8: images need at least 32 px"):
        import_mimic_ils(release.json, release.images, release.masks, tmp_path / "t", cfg=MimicIlsConfig(max_side=8))
    assert not (tmp_path / "t").exists()


def test_an_image_stored_under_32_px_a_side_is_skipped_and_named(release, tmp_path):
    ds = tmp_path / "tiny"
    report = import_mimic_ils(
        release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=32), progress=False
    )
    recs = read_records(ds)
    assert len(recs) and (recs["height"] >= 32).all() and (recs["width"] >= 32).all()
    small = sorted(p["sample_key"] for p in _problems(ds) if p["kind"] == "image_too_small")
    # 90 x 72 -> 32 x 26, 64 x 80 -> 26 x 32, 70 x 60 -> 32 x 27; 60 x 60 -> 32 x 32 and 50 x 50 -> 32 x 32 stay
    assert [k[:8] for k in small] == ["02aa804e", "096052b7", "174413ec"]
    assert report["problems_by_kind"]["image_too_small"] == 3


def test_stored_size_follows_sams_resize_longest_side(release, tmp_path):
    ds = tmp_path / "small"
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=40), progress=False)
    recs = read_records(ds)
    rec = recs[recs["image_id"].str.startswith("02aa804e") & (recs["polarity"] == "positive")].iloc[0]
    h, w = release.image_sizes[rec["image_id"]]  # 90 x 72
    scale = 40 / max(h, w)
    expected = (int(h * scale + 0.5), int(w * scale + 0.5))  # get_preprocess_shape of segment-anything
    assert (rec["height"], rec["width"]) == expected == (40, 32)
    full = authors_mask(str(release.masks / json.loads(rec["provenance"])["seg_mask_path"]), (h, w))
    ref = np.asarray(Image.fromarray(full.astype(np.uint8) * 255).resize(expected[::-1], Image.NEAREST)) > 0
    assert np.array_equal(_mask(rec), ref)


def test_resume_skips_done_samples_and_keeps_the_report(release, imported, tmp_path):
    first = json.loads((imported / REPORT_NAME).read_text())
    again = import_mimic_ils(
        release.json, release.images, release.masks, imported, cfg=MimicIlsConfig(max_side=0), progress=False
    )
    assert again["samples_imported_this_run"] == 0 and again["samples_already_done"] == 4
    assert again["problems_by_kind"] == first["problems_by_kind"]
    assert again["records_in_dataset"] == first["records_in_dataset"]
    # the missing image arrives: only that sample is imported on the next run
    src = next(release.images.rglob("*.jpg"))
    dest = release.images / "p10/p10003019/s59003314/deadbeef-00000000-00000000-00000000-00000000.jpg"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(src.read_bytes())
    third = import_mimic_ils(
        release.json, release.images, release.masks, imported, cfg=MimicIlsConfig(max_side=0), progress=False
    )
    assert third["samples_imported_this_run"] == 1 and third["records_in_dataset"] == 18
    assert "missing_image" not in third["problems_by_kind"]
    with pytest.raises(DatasetError, match=r"started with another provenance .*max_side: 0, now 64.*to start over"):
        import_mimic_ils(
            release.json, release.images, release.masks, imported, cfg=MimicIlsConfig(max_side=64), progress=False
        )


def test_the_json_is_streamed_not_loaded():
    """Samples come out before the end of the file is read: a stream cut after the first
    sample still yields it, then fails naming the file."""
    text = json.dumps(
        {
            "train": {
                "a": {"image_path": "x.jpg", "instruction_answer_pairs": {}},
                "b": {"image_path": "y.jpg", "instruction_answer_pairs": {}},
            }
        }
    )
    cut = text[: text.index('"b"') + 10].encode()
    got = []
    with pytest.raises(DatasetError, match="release.json: malformed JSON"):
        for split, key, item in iter_samples(io.BytesIO(cut), "release.json"):
            got.append((split, key, item["image_path"]))
    assert got == [("train", "a", "x.jpg")]


def test_workers_give_the_same_dataset(release, imported, tmp_path):
    ds = tmp_path / "par"
    import_mimic_ils(
        release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), workers=2, progress=False
    )
    a = read_records(imported).drop(columns=["provenance"])
    b = read_records(ds).drop(columns=["provenance"])
    assert a.astype(str).equals(b.astype(str))
    for shard in sorted((imported / "records").glob("*.parquet")):
        assert (ds / "records" / shard.name).read_bytes() == shard.read_bytes()


def test_cli_names_what_to_fetch(release, tmp_path):
    runner = CliRunner()
    r = runner.invoke(
        app,
        [
            "import-mimic-ils",
            "--json",
            str(tmp_path / "nope.json"),
            "--images",
            str(release.images),
            "--masks",
            str(release.masks),
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "PhysioNet" in r.output and "mimic_ils_instruction_answer.json" in r.output
    r = runner.invoke(
        app,
        [
            "import-mimic-ils",
            "--json",
            str(release.json),
            "--images",
            str(tmp_path / "none"),
            "--masks",
            str(release.masks),
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "MIMIC-CXR-JPG 2.1.0" in r.output
    r = runner.invoke(
        app,
        [
            "import-mimic-ils",
            "--json",
            str(release.json),
            "--images",
            str(release.images),
            "--masks",
            str(release.masks),
            "-o",
            str(tmp_path / "o2"),
            "--max-side",
            "0",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "17 records of 4 images" in r.output and "missing_mask" in r.output
    assert "download MIMIC-CXR-JPG 2.1.0" in r.output


def _carried(df):
    """The columns the release format carries, one row per pair, in a stable order."""
    cols = [
        "split",
        "image_id",
        "patient_id",
        "study_id",
        "instruction",
        "answer",
        "lesion_type",
        "target",
        "instruction_type",
        "polarity",
        "certainty",
        "height",
        "width",
        "mask_area",
    ]
    out = df[cols].copy()
    out["locations"] = [tuple(v) for v in df["locations"]]
    out["mask"] = [
        decode_rle({"size": [int(v) for v in m["size"]], "counts": m["counts"]}).tobytes() for m in df["mask"]
    ]
    return out.sort_values(["image_id", "instruction", "answer"]).reset_index(drop=True)


def test_export_reads_like_the_release_and_round_trips(imported, tmp_path):
    out = tmp_path / "export"
    counts = export_mimic_ils(imported, out)
    js = out / "mimic_ils_instruction_answer.json"
    assert sorted(json.loads(js.read_text())) == ["test", "train", "val"]
    recs = read_records(imported)
    n = 0
    for rsplit, split in SPLITS.items():
        for s in reason_seg_samples(js, out / "files", out / "lesion_mask", rsplit):
            n += 1
            assert Path(s["image_path"]).is_file()
            rows = recs[
                (recs["split"] == split)
                & (recs["instruction"] == s["question"])
                & (recs["answer"] == s["answer"])
                & (recs["image_id"] == Path(s["image_path"]).stem)
            ]
            assert len(rows) == 1
            x = np.asarray(Image.open(s["image_path"]))
            assert np.array_equal(authors_mask(s["mask_path"], x.shape), _mask(rows.iloc[0]))
            if s["mask_path"]:
                assert set(np.unique(np.asarray(Image.open(s["mask_path"])))) <= {0, 255}
    assert n == len(recs) == 17 and counts["masks"] == 4
    back = tmp_path / "back"
    import_mimic_ils(js, out / "files", out / "lesion_mask", back, progress=False)
    again = read_records(back)
    assert _carried(again).equals(_carried(recs))
    for image_id in recs["image_id"].unique():
        a = np.asarray(Image.open(imported / "images" / f"{image_id}.png"))
        b = np.asarray(Image.open(back / "images" / f"{image_id}.png"))
        assert np.array_equal(a, b)


def test_generated_dataset_round_trips_with_certainty_and_ids(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from light_synthetic import make_tiny_dataset

    ds = make_tiny_dataset(tmp_path / "gen", n_train=4, n_val=2, n_test=2)
    out = tmp_path / "export"
    r = CliRunner().invoke(app, ["export", str(ds), "--format", "mimic-ils", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "--base_mask_dir" in r.output
    back = tmp_path / "back"
    import_mimic_ils(
        out / "mimic_ils_instruction_answer.json", out / "files", out / "lesion_mask", back, progress=False
    )
    assert _carried(read_records(back)).equals(_carried(read_records(ds)))
    bad = CliRunner().invoke(app, ["export", str(ds), "--format", "coco", "-o", str(out)])
    assert bad.exit_code == 2 and "unknown format" in bad.output


def test_stats_count_every_imported_pair_also_one_of_no_template(imported):
    # review: the release fixture's train split has 9 pairs; the table printed 8
    from cxrils.dataset.stats import TOTAL, count_table

    recs = read_records(imported)
    for split in vocab.SPLITS:
        table = count_table(recs, split)
        rows = recs[recs["split"] == split]
        assert table.loc[TOTAL, (TOTAL, TOTAL)] == len(rows)
        assert table.attrs["no_template"] == (rows["instruction_type"] == "").sum()
    assert count_table(recs).attrs["no_template"] == 1
    r = CliRunner().invoke(app, ["stats", str(imported), "--no-plot"], terminal_width=100)
    assert r.exit_code == 0, r.output
    assert "1 pair whose instruction follows none of the paper's templates" in " ".join(r.output.split())


@pytest.mark.slow
def test_commands_work_on_an_imported_dataset(imported, tmp_path, monkeypatch):
    """stats, baseline, evaluate (both protocols), train and predict --dataset."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from light_synthetic import block_anatomy, bright_anomaly

    import cxrils.models.light.segmenter as segmod

    runner = CliRunner()
    r = runner.invoke(app, ["stats", str(imported), "--no-plot"])
    assert r.exit_code == 0, r.output
    assert "effusion" in r.output
    oracle = tmp_path / "oracle.jsonl"
    r = runner.invoke(app, ["baseline", "oracle", "-d", str(imported), "-o", str(oracle), "--split", "all"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app, ["evaluate", "-d", str(imported), "-p", str(oracle), "-o", str(tmp_path / "ev"), "--split", "all"]
    )
    assert r.exit_code == 0, r.output  # the oracle answers every record, the unparsed instruction too
    assert "gIoU 100.0" in r.output and "N-Acc 100.0" in r.output and "giou_neg 100.0" in r.output
    empty = tmp_path / "empty.jsonl"
    r = runner.invoke(app, ["baseline", "always-empty", "-d", str(imported), "-o", str(empty), "--split", "test"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", "-d", str(imported), "-p", str(empty), "-o", str(tmp_path / "ev2")])
    assert r.exit_code == 0, r.output
    assert "giou_pos 0.0" in r.output and "N-Acc 100.0" in r.output

    monkeypatch.setattr(segmod, "default_anatomy", lambda: block_anatomy)
    monkeypatch.setattr(segmod, "default_anomaly", lambda: bright_anomaly)
    run = tmp_path / "run"
    sets = [
        "--set",
        "ensemble=1",
        "--set",
        "image_size=32",
        "--set",
        "features=4,8,8,16,16,8",
        "--set",
        "batch_size=4",
        "--set",
        "steps=2",
    ]
    r = runner.invoke(app, ["train", "--model", "light", "--dataset", str(imported), "-o", str(run), *sets])
    assert r.exit_code == 0, r.output
    preds = tmp_path / "pred.jsonl"
    r = runner.invoke(
        app, ["predict", "--model", str(run), "--dataset", str(imported), "--split", "test", "-o", str(preds)]
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", "-d", str(imported), "-p", str(preds), "-o", str(tmp_path / "ev4")])
    assert r.exit_code == 0, r.output
    assert "giou_pos" in r.output


def _negatives_only(imported: Path, out: Path) -> Path:
    """The imported dataset's negative records, written as a dataset of their own."""
    from cxrils.dataset import DatasetWriter

    recs = read_records(imported)
    recs = recs[recs["polarity"] == "negative"]
    with DatasetWriter(out, {"source": "test: negatives only"}) as w:
        for image_id, group in recs.groupby("image_id"):
            rows = []
            for r in group.to_dict("records"):
                r["locations"] = list(r["locations"])
                r["mask"] = {"size": [int(v) for v in r["mask"]["size"]], "counts": r["mask"]["counts"]}
                rows.append(r)
            x = np.asarray(Image.open(imported / "images" / f"{image_id}.png"))
            w.commit_study(str(image_id), x, rows)
        w.finalize()
    return out


def test_an_export_without_positive_pairs_round_trips_and_never_writes_into_the_dataset(imported, tmp_path):
    ds = _negatives_only(imported, tmp_path / "neg")
    out = tmp_path / "export"
    counts = export_mimic_ils(ds, out)
    assert counts["masks"] == 0 and (out / "lesion_mask").is_dir()  # train_ds.py's --base_mask_dir exists
    back = tmp_path / "back"
    import_mimic_ils(
        out / "mimic_ils_instruction_answer.json", out / "files", out / "lesion_mask", back, progress=False
    )
    assert len(read_records(back)) == len(read_records(ds)) > 0
    for target in (ds, ds / "sub"):
        with pytest.raises(DatasetError, match="inside the dataset"):
            export_mimic_ils(ds, target)
    with pytest.raises(DatasetError, match="its images would be written inside the dataset"):
        export_mimic_ils(ds, tmp_path / "e2", images_dir=ds / "images")


def test_an_export_refuses_a_damaged_dataset_image_by_name(imported, tmp_path):
    # a new user's trial (stop 62): a truncated image was copied into the export, which
    # the importer (and train_ds.py) then could not read
    damaged = sorted((imported / "images").rglob("*.png"))[0]
    damaged.write_bytes(damaged.read_bytes()[:200])
    with pytest.raises(DatasetError, match=re.escape(f"{damaged}: the dataset's image is damaged")):
        export_mimic_ils(imported, tmp_path / "export")


def test_an_export_of_a_folder_that_is_no_dataset_writes_nothing(tmp_path):
    out = tmp_path / "export"
    with pytest.raises(DatasetError, match="no such dataset folder"):
        export_mimic_ils(tmp_path / "nope", out)
    assert not out.exists()


def test_a_re_export_removes_the_masks_of_an_export_that_stopped_before_its_json(imported, tmp_path, monkeypatch):
    from cxrils.dataset.mimic_ils import exporter

    out = tmp_path / "export"
    real = exporter._write_mask
    written = []

    def crash_on_third(path, mask):
        if len(written) == 2:
            raise OSError("disk full")
        written.append(path.name)
        real(path, mask)

    monkeypatch.setattr(exporter, "_write_mask", crash_on_third)
    with pytest.raises(OSError, match="disk full"):
        export_mimic_ils(imported, out)
    monkeypatch.setattr(exporter, "_write_mask", real)
    assert not (out / "mimic_ils_instruction_answer.json").exists()
    assert sorted(p.name for p in (out / "lesion_mask").iterdir()) == sorted(written)
    counts = export_mimic_ils(_negatives_only(imported, tmp_path / "neg"), out)
    assert counts["stale_masks_removed"] == 2 and not any((out / "lesion_mask").iterdir())
    assert sorted(p.name for p in out.iterdir()) == ["files", "lesion_mask", "mimic_ils_instruction_answer.json"]


def test_a_re_export_leaves_only_its_own_masks_and_images(imported, tmp_path):
    out = tmp_path / "export"
    (out / "lesion_mask").mkdir(parents=True)
    (out / "lesion_mask" / "figure_1.png").write_bytes(b"the user's own PNG, named like a mask")
    assert export_mimic_ils(imported, out)["masks"] == 4
    assert len(list((out / "lesion_mask").glob("*.png"))) == 5
    (out / "lesion_mask" / "README.txt").write_text("the user's own file")
    # an image of the same size but other bytes under an exported name: replaced, not kept
    some = sorted((out / "files").rglob("*.png"))[0]
    size = some.stat().st_size
    some.write_bytes(b"\0" * size)
    ds = _negatives_only(imported, tmp_path / "neg")
    counts = export_mimic_ils(ds, out)
    assert counts["masks"] == 0 and counts["stale_masks_removed"] == 4 and counts["other_files_kept"] == 2
    assert sorted(p.name for p in (out / "lesion_mask").iterdir()) == ["README.txt", "figure_1.png"]
    assert some.read_bytes() != b"\0" * size
    image_id = some.stem
    assert some.read_bytes() == (ds / "images" / f"{image_id}.png").read_bytes()
    with pytest.raises(DatasetError, match="inside the mask folder"):
        export_mimic_ils(ds, out, images_dir=out / "lesion_mask")


@pytest.mark.parametrize(
    "pairs, kinds",
    [
        (None, ["malformed_sample"]),  # no pairs object: one problem, not also "no_pairs"
        ({"positive_pairs": []}, ["malformed_sample"]),  # the negative list missing
        ({"positive_pairs": [], "negative_pairs": []}, ["no_pairs"]),
    ],
)
def test_a_sample_without_pairs_is_one_problem(pairs, kinds, tmp_path):
    from cxrils.dataset.mimic_ils.importer import PAIRS_KEY, _Job, process_sample

    item = {"image_path": "p10/x.jpg"} | ({} if pairs is None else {PAIRS_KEY: pairs})
    job = _Job("train", "train", "s1", item, str(tmp_path), str(tmp_path), 1024, 255)
    _, _, x, records, problems = process_sample(job)
    assert x is None and records == []
    assert [p["kind"] for p in problems] == kinds


def _edit_release(release, edit) -> None:
    data = json.loads(release.json.read_text())
    edit(data)
    release.json.write_text(json.dumps(data))


def test_paths_that_leave_their_folder_a_negative_with_a_mask_and_an_image_twice(release, tmp_path):
    # a new user's trial (stop 58): a seg_mask_path of ../../etc/passwd was opened, a
    # negative's mask file passed unnoticed, one image under two keys went into two splits
    secret = release.masks.parent / "outside.png"
    Image.fromarray(np.full((90, 72), 255, np.uint8)).save(secret)

    def edit(data):
        (key, item), *_ = data["train"].items()
        pos = item["instruction_answer_pairs"]["positive_pairs"]
        pos[0]["seg_mask_path"] = "../outside.png"
        neg = item["instruction_answer_pairs"]["negative_pairs"]
        neg[0]["seg_mask_path"] = pos[1]["seg_mask_path"]
        data["test"]["copy-of-" + key] = json.loads(json.dumps(item))

    _edit_release(release, edit)
    ds = tmp_path / "ds"
    report = import_mimic_ils(
        release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), progress=False
    )
    problems = _problems(ds)
    outside = [p for p in problems if p["kind"] == "malformed_pair"]
    assert len(outside) == 1 and "'../outside.png' leads outside --masks" in outside[0]["detail"]
    assert [p["kind"] for p in problems if p["kind"] == "negative_with_mask"] == ["negative_with_mask"]
    (twice,) = [p for p in problems if p["kind"] == "duplicate_image"]
    assert twice["sample_key"].startswith("copy-of-") and twice["split"] == "test"
    recs = read_records(ds)
    assert not recs["image_id"].str.startswith("copy-of-").any()
    assert report["records_by_split"].get("test", 0) == len(recs[recs["split"] == "test"])
    assert int(recs[recs["polarity"] == "negative"]["mask_area"].max()) == 0


def test_an_image_whose_first_sample_imports_nothing_comes_with_its_next_sample(release, tmp_path):
    # review (stop 58): the first sample claimed the image before it failed, and the
    # later sample with good pairs was skipped, so the image was in no split
    def edit(data):
        (key, item), *_ = data["train"].items()
        data["test"]["then-good"] = json.loads(json.dumps(item))
        data["train"][key] = {**item, "instruction_answer_pairs": {"positive_pairs": [], "negative_pairs": []}}

    _edit_release(release, edit)
    ds = tmp_path / "ds"
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), progress=False)
    kinds = sorted(p["kind"] for p in _problems(ds) if p["kind"] in ("no_pairs", "duplicate_image"))
    assert kinds == ["no_pairs"]
    first = read_records(ds)
    good = first[first["image_id"].str.startswith("then-good")]
    assert len(good) and set(good["split"]) == {"test"}
    # resumed, the same sample is done and skipped
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), progress=False)
    assert read_records(ds).astype(str).equals(first.astype(str))


def test_a_rerun_never_adds_a_second_sample_of_an_image_the_dataset_holds(release, tmp_path):
    # review (stop 59): sample A (train) imported nothing while its mask was missing; B
    # (test, later in the JSON, the same image spelled "./...") was imported; after the
    # mask came back the rerun imported A too: one image in train and test
    names = {}

    def edit(data):
        (key, item), *_ = data["train"].items()
        pairs = item["instruction_answer_pairs"]
        names["mask"] = pairs["positive_pairs"][0]["seg_mask_path"]
        data["train"][key] = {
            **item,
            "instruction_answer_pairs": {"positive_pairs": pairs["positive_pairs"][:1], "negative_pairs": []},
        }
        later = json.loads(json.dumps(item))
        later["image_path"] = "./" + item["image_path"]
        later["instruction_answer_pairs"]["positive_pairs"] = []
        data["test"]["later-" + key] = later

    _edit_release(release, edit)
    hidden = release.masks / (names["mask"] + ".hidden")
    (release.masks / names["mask"]).rename(hidden)
    ds = tmp_path / "ds"
    cfg = MimicIlsConfig(max_side=0)
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=cfg, progress=False)
    first = read_records(ds)
    assert set(first[first["image_id"].str.startswith("later-")]["split"]) == {"test"}
    hidden.rename(release.masks / names["mask"])
    report = import_mimic_ils(release.json, release.images, release.masks, ds, cfg=cfg, progress=False)
    assert read_records(ds).astype(str).equals(first.astype(str))
    assert report["problems_by_kind"].get("duplicate_image") == 1


def test_a_rerun_does_not_count_the_image_of_a_repeated_key_as_held(release, tmp_path):
    # review (stop 59): the pre-pass took the image of a repeated key (skipped as
    # duplicate_sample, so never imported) as held, and refused the sample that has it
    names = {}

    def edit(data):
        k_train = next(iter(data["train"]))
        k_val, val_item = next(iter(data["val"].items()))
        names["image"] = val_item["image_path"]
        data["test"][k_train] = json.loads(json.dumps(val_item))

    _edit_release(release, edit)
    cfg = MimicIlsConfig(max_side=0)
    clean = tmp_path / "clean"
    import_mimic_ils(release.json, release.images, release.masks, clean, cfg=cfg, progress=False)
    want = set(read_records(clean).query("split == 'validate'")["image_id"])
    assert want
    image = release.images / names["image"]
    image.rename(image.with_suffix(".away"))  # first run without the validate image
    ds = tmp_path / "ds"
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=cfg, progress=False)
    image.with_suffix(".away").rename(image)
    report = import_mimic_ils(release.json, release.images, release.masks, ds, cfg=cfg, progress=False)
    assert set(read_records(ds).query("split == 'validate'")["image_id"]) == want
    assert "duplicate_image" not in report["problems_by_kind"]


def test_cli_exits_2_when_nothing_is_imported(release, tmp_path):
    # a new user's trial (stop 58): a JSON of {} and a wrong --images both exited 0
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    args = ["--images", str(release.images), "--masks", str(release.masks)]
    r = CliRunner().invoke(app, ["import-mimic-ils", "--json", str(empty), *args, "-o", str(tmp_path / "a")])
    assert r.exit_code == 2 and "no sample under 'train', 'val' or 'test'" in r.output, r.output
    wrong = ["--images", str(release.images.parent), "--masks", str(release.masks)]
    r = CliRunner().invoke(app, ["import-mimic-ils", "--json", str(release.json), *wrong, "-o", str(tmp_path / "b")])
    assert r.exit_code == 2 and "no record imported" in r.output and "give its files/ folder" in r.output, r.output


@pytest.mark.parametrize(
    ("rel", "leaves"),
    [
        ("p10/p10000032/s50414267/02aa804e.jpg", False),
        ("files/p10/x..jpg", False),  # dots inside a name
        ("../outside.png", True),
        ("a/../../x.png", True),
        ("/etc/passwd", True),
        ("\\\\server\\share\\x.png", True),  # review (stop 58): Windows forms
        ("C:x.jpg", True),
        ("D:/a.jpg", True),
        ("a\\..\\..\\x.png", True),
    ],
)
def test_release_paths_that_leave_their_folder(rel, leaves):
    from cxrils.dataset.mimic_ils.importer import _leaves_folder

    assert _leaves_folder(rel) is leaves


def test_a_masks_folder_holding_none_of_the_masks_is_refused_before_anything_is_written(release, tmp_path):
    # new-user trial (stop 61): --masks one level too high imported every positive as
    # missing_mask, a dataset of negatives, and a rerun with the right folder skipped them as done
    from cxrils.dataset.writer import DatasetError

    out = tmp_path / "wrong"
    with pytest.raises(DatasetError) as err:
        import_mimic_ils(release.json, release.images, release.masks.parent, out, progress=False)
    assert f"the masks are under {release.masks}" in str(err.value)
    assert not (out / "manifest.json").exists()
    with pytest.raises(DatasetError, match="give the lesion_mask/ folder"):
        import_mimic_ils(release.json, release.images, tmp_path, tmp_path / "wrong2", progress=False)


def test_a_mask_saved_as_0_1_is_named_as_such(release, tmp_path):
    # new-user trial: a 0/1 PNG was "no foreground pixel"; the release's masks are 0/255
    rel = next(p for p in release.masks_by_path if (release.masks / p).is_file())
    arr = np.asarray(Image.open(release.masks / rel).convert("L"))
    Image.fromarray((arr > 0).astype(np.uint8), mode="L").save(release.masks / rel)
    ds = tmp_path / "ds01"
    import_mimic_ils(release.json, release.images, release.masks, ds, cfg=MimicIlsConfig(max_side=0), progress=False)
    empty = [p for p in _problems(ds) if p["kind"] == "empty_positive_mask"]
    assert empty and all("its largest value is 1" in p["detail"] and "0/1" in p["detail"] for p in empty)


def test_the_masks_check_counts_distinct_files_not_pairs(tmp_path):
    # review: 20 pairs sharing the first (missing) mask refused a release whose other masks were there
    from cxrils.dataset.mimic_ils.importer import _check_masks_folder

    masks = tmp_path / "lesion_mask"
    masks.mkdir()
    data = {"train": {}}
    for i in range(5):
        rel = f"p1/s{i}/m.png"
        if i > 0:
            (masks / rel).parent.mkdir(parents=True)
            Image.fromarray(np.zeros((4, 4), np.uint8)).save(masks / rel)
        pairs = [{"instruction": "x", "answer": "[SEG]", "target": "effusion", "seg_mask_path": rel}] * 20
        data["train"][f"k{i}"] = {"image_path": f"p1/x{i}.jpg", "instruction_answer_pairs": {"positive_pairs": pairs}}
    js = tmp_path / "ils.json"
    js.write_text(json.dumps(data))
    _check_masks_folder(js, masks)  # the first mask is missing, the second is there: no refusal
