"""What the reviewer sees of a record's chain, and the export of the accepted subset:
records unchanged, as a cxrils dataset and in the MIMIC-ILS layout; the source never
modified."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cxrils.dataset import read_grounding, read_records
from cxrils.dataset.mimic_ils.format import JSON_NAME
from cxrils.fsutil import sha256_file
from cxrils.masks import decode_rle
from cxrils.review import open_review
from cxrils.review.chain import record_chain
from cxrils.review.export import accepted_ids, export_accepted


def _rec(df, **match):
    sel = np.ones(len(df), bool)
    for k, v in match.items():
        sel &= (df[k] == v).to_numpy()
    return df[sel].iloc[0].to_dict()


def test_positive_chain_from_sentence_to_boxes_and_locations(dataset):
    df = read_records(dataset)
    rec = _rec(df, image_id="im0", lesion_type="atelectasis", polarity="positive", instruction_type="basic")
    chain = record_chain(rec, read_grounding(dataset, "im0"))
    assert chain["recorded"] and len(chain["findings"]) == 1
    f = chain["findings"][0]
    # ils_studies.multi_lesion_study: bibasilar atelectasis grounded on the right base only
    assert (f["entity"], f["sentence"], f["presence"]) == ("atelectasis", "Bibasilar atelectasis.", "positive")
    assert f["labels"] == ["right lung base", "left lung base"] and f["reported"] == f["labels"]
    assert f["grounded"] == ["right lung base"] and f["mask_area"] == 160
    kept = [b for b in f["boxes"] if b["kept"]]
    dropped = [b for b in f["boxes"] if not b["kept"]]
    assert kept[0]["box"] == [6.0, 44.0, 22.0, 54.0] and all(kept[0][c] for c in ("c1", "c2", "c3", "c4"))
    assert dropped[0]["failed"] == ["c1", "c3"] and dropped[0]["c2"] and not dropped[0]["c1"]
    assert chain["empty_locations"] == ["left apical zone lung", "lung upper lobe left"]
    assert chain["report"]["section_text"].startswith("Possible right upper zone pneumonia.")
    assert chain["thresholds"]["tau_anatomy"] == 0.25 and "c3" in chain["conditions"]


def test_negative_chains_say_why_the_lesion_is_absent(dataset):
    df = read_records(dataset)
    absent = _rec(df, image_id="im0", lesion_type="edema", polarity="negative")  # edema is not in the report
    c = record_chain(absent, read_grounding(dataset, "im0"))
    assert c["findings"] == [] and "no edema finding in the report" in c["note"]
    negated = _rec(df, image_id="im0", lesion_type="effusion", polarity="negative")  # "No pleural effusion."
    c = record_chain(negated, read_grounding(dataset, "im0"))
    assert [f["sentence"] for f in c["findings"]] == ["No pleural effusion."] and "states effusion absent" in c["note"]
    elsewhere = _rec(df, image_id="im1", lesion_type="effusion", polarity="negative", instruction_type="basic")
    c = record_chain(elsewhere, read_grounding(dataset, "im1"))  # effusion is reported in the right base
    assert c["findings"][0]["grounded"] == ["right lung base"] and "is empty" in c["note"]
    assert "left lung" in c["note"]
    c = record_chain(elsewhere, None)
    assert not c["recorded"] and c["findings"] == [] and "no grounding file" in c["note"]


def test_identical_duplicate_findings_are_shown_once(dataset):
    doc = read_grounding(dataset, "im0")
    doc["findings"].append(json.loads(json.dumps(doc["findings"][1])))  # "atelectasis" named twice in a sentence
    rec = _rec(read_records(dataset), image_id="im0", lesion_type="atelectasis", polarity="positive")
    assert len(record_chain(rec, doc)["findings"]) == 1


def test_export_writes_the_accepted_records_unchanged_and_never_touches_the_source(dataset, tmp_path):
    before = {p.relative_to(dataset): sha256_file(p) for p in dataset.rglob("*") if p.is_file()}
    r = open_review(dataset)
    ids = [r.record(i)["record_id"] for i in range(12)]
    for i, rid in enumerate(ids):
        r.store.decide("ann", rid, "reject" if i % 4 == 0 else "accept", "wrong_extent" if i % 4 == 0 else None)
    r.store.decide("bob", ids[1], "reject", "wrong_side")  # one reviewer's rejection removes a record
    r.store.decide("bob", ids[2], "skip")
    keep = {rid for i, rid in enumerate(ids) if i % 4 and i != 1}
    assert accepted_ids(r.store) == keep
    out = tmp_path / "accepted"
    res = export_accepted(dataset, r.store, out)
    assert res["records"] == len(keep)

    src = read_records(dataset).set_index("record_id")
    got = read_records(out / "cxrils").set_index("record_id")
    assert set(got.index) == keep
    for rid, row in got.iterrows():
        for col in (
            "instruction",
            "answer",
            "split",
            "lesion_type",
            "polarity",
            "locations",
            "sentence",
            "source_findings",
            "provenance",
            "image_path",
        ):
            assert np.array_equal(np.asarray(row[col]), np.asarray(src.loc[rid, col])), (rid, col)
        assert np.array_equal(decode_rle(row["mask"]), decode_rle(src.loc[rid, "mask"]))
    for image_id in got["image_id"].unique():
        assert read_grounding(out / "cxrils", image_id) == read_grounding(dataset, image_id)
    prov = json.loads((out / "cxrils" / "provenance.json").read_text())
    assert prov["reviewed_subset_of"]["review_plan"] == r.store.plan() and prov["reviewers"] == ["ann", "bob"]

    release = json.loads((out / "mimic-ils" / JSON_NAME).read_text())
    pairs = [
        p
        for split in release.values()
        for s in split.values()
        for p in s["instruction_answer_pairs"]["positive_pairs"] + s["instruction_answer_pairs"]["negative_pairs"]
    ]
    assert sorted(p["instruction"] for p in pairs) == sorted(src.loc[sorted(keep), "instruction"])
    after = {p.relative_to(dataset): sha256_file(p) for p in dataset.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k in before} == before  # nothing the dataset held changed
    assert {str(k) for k in set(after) - set(before)} <= {"review.sqlite", "review.sqlite-wal", "review.sqlite-shm"}

    # a second export replaces the first as a whole
    r.store.undo("bob")  # bob's skip; then his rejection
    r.store.undo("bob")
    res2 = export_accepted(dataset, r.store, out)
    assert res2["records"] == len(keep) + 1 and not list(tmp_path.glob(".accepted*"))
    r.close()


def test_the_exported_images_have_the_same_pixels(dataset, tmp_path):
    from PIL import Image

    r = open_review(dataset)
    r.store.decide("ann", r.record(0)["record_id"], "accept")
    export_accepted(dataset, r.store, tmp_path / "acc")
    image_id = r.record(0)["image_id"]
    a = np.asarray(Image.open(dataset / "images" / f"{image_id}.png"))
    b = np.asarray(Image.open(tmp_path / "acc" / "cxrils" / "images" / f"{image_id}.png"))
    assert a.dtype == b.dtype == np.uint8 and np.array_equal(a, b)
    r.close()


def test_an_image_id_that_is_not_a_file_name_is_never_served(dataset):
    from cxrils.review import ReviewError

    r = open_review(dataset)
    r._records[r.record(0)["record_id"]]["image_id"] = "../manifest"
    with pytest.raises(ReviewError, match="not a file name"):
        r.image_path(0)
    r.close()


def test_the_export_replaces_only_an_earlier_export(dataset, tmp_path):
    from cxrils.review import ReviewError

    r = open_review(dataset)
    r.store.decide("ann", r.record(0)["record_id"], "accept")
    before = {
        p.relative_to(dataset): sha256_file(p) for p in dataset.rglob("*") if p.is_file() and "review" not in p.name
    }
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("mine")
    (tmp_path / "file.txt").write_text("mine too")
    refused = [
        (dataset, "outside the reviewed dataset"),
        (dataset / "accepted", "outside the reviewed dataset"),
        (tmp_path, "outside the reviewed dataset"),  # the folder that holds the dataset
        (notes, "not an earlier export"),
        (tmp_path / "file.txt", "not an earlier export"),
    ]
    for out, words in refused:
        with pytest.raises(ReviewError, match=words):
            export_accepted(dataset, r.store, out)
    (notes / "cxrils").mkdir()  # a folder named like an export's part is still not an export
    with pytest.raises(ReviewError, match="not an earlier export"):
        export_accepted(dataset, r.store, notes)
    assert (notes / "keep.txt").read_text() == "mine" and (tmp_path / "file.txt").read_text() == "mine too"
    after = {
        p.relative_to(dataset): sha256_file(p) for p in dataset.rglob("*") if p.is_file() and "review" not in p.name
    }
    assert after == before and not (dataset / "accepted").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_accepted(dataset, r.store, empty)["records"] == 1  # an empty folder may be used
    assert export_accepted(dataset, r.store, empty)["records"] == 1  # and then it is an export: replaced
    assert sorted(p.name for p in empty.iterdir()) == ["cxrils", "mimic-ils"]
    r.close()
