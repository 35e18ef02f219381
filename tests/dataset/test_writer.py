"""Dataset folder: atomic per-study commits, resume, deterministic shards, readers."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from cxrils.dataset import (
    DatasetError,
    DatasetWriter,
    ILSDataset,
    ProvenanceMismatch,
    read_manifest,
    read_records,
    shard_paths,
)
from cxrils.dataset.schema import COLUMNS
from cxrils.masks import decode_rle, encode_rle

PROV = {"backends": {"anatomy": "builtin 0.1"}, "code_version": "0.1.0"}


def write_all(out, studies, order=None, shard_size=7):
    w = DatasetWriter(out, PROV, shard_size=shard_size)
    for image_id in order or list(studies):
        x, recs = studies[image_id]
        w.commit_study(image_id, x, recs)
    w.commit_study("bad1", None, None, excluded="lung_crosscheck")
    w.commit_study("bad2", None, [], excluded="lung_crosscheck")
    w.commit_study("bad3", None, None, excluded="not_frontal")
    return w, w.finalize()


def test_round_trip_with_our_reader_datasets_and_torch(tmp_path, studies):
    w, manifest_path = write_all(tmp_path / "ds", studies)
    all_records = {r["record_id"]: r for _, recs in studies.values() for r in recs}
    df = read_records(tmp_path / "ds")
    assert list(df.columns) == list(COLUMNS)
    assert sorted(df["record_id"]) == sorted(all_records)
    for row in df.itertuples():
        orig = all_records[row.record_id]
        assert row.instruction == orig["instruction"] and row.answer == orig["answer"]
        assert list(row.locations) == orig["locations"]
        assert np.array_equal(decode_rle(row.mask), decode_rle(orig["mask"]))
        assert row.image_path == f"images/{row.image_id}.png"
    train = read_records(tmp_path / "ds", "train")
    assert set(train["split"]) == {"train"} and len(train) == sum(r["split"] == "train" for r in all_records.values())

    import datasets

    data_files = {s: [str(p) for p in shard_paths(tmp_path / "ds", s)] for s in ("train", "validate", "test")}
    hf = datasets.load_dataset("parquet", data_files=data_files, cache_dir=str(tmp_path / "hf_cache"))
    assert {s: hf[s].num_rows for s in hf} == {s: int((df["split"] == s).sum()) for s in data_files}
    ex = hf["test"][0]
    assert np.array_equal(decode_rle(ex["mask"]), decode_rle(all_records[ex["record_id"]]["mask"]))

    ds = ILSDataset(tmp_path / "ds", "train")
    assert len(ds) == len(train)
    for i in range(len(ds)):
        item = ds[i]
        orig = all_records[item["record_id"]]
        x = studies[orig["image_id"]][0]
        assert item["image"].shape == (1, 64, 64) and item["image"].dtype.is_floating_point
        assert np.allclose(item["image"][0].numpy(), x / 255.0)
        assert np.array_equal(item["mask"].numpy() > 0, decode_rle(orig["mask"]))
        assert item["instruction"] == orig["instruction"] and item["polarity"] == orig["polarity"]
    small = ILSDataset(tmp_path / "ds", "train", size=32)[0]
    assert small["image"].shape == (1, 32, 32) and small["mask"].shape == (32, 32)


def test_manifest_counts_checksums_and_exclusions(tmp_path, studies):
    _, manifest_path = write_all(tmp_path / "ds", studies, shard_size=7)
    m = read_manifest(tmp_path / "ds")
    df = read_records(tmp_path / "ds")
    assert m["n_records"] == len(df) and m["n_images"] == len(studies)
    assert m["counts"]["by_split"] == df["split"].value_counts().to_dict()
    assert m["counts"]["by_polarity"] == df["polarity"].value_counts().to_dict()
    n_lesion_basic_neg = sum(
        v.get("basic", {}).get("negative", 0)
        for s in m["counts"]["by_split_type_instruction_polarity"].values()
        for v in s.values()
    )
    assert n_lesion_basic_neg == int(((df["instruction_type"] == "basic") & (df["polarity"] == "negative")).sum())
    assert m["exclusions"] == {"n": 3, "by_reason": {"lung_crosscheck": 2, "not_frontal": 1}}
    assert m["provenance"] == PROV
    import hashlib

    for shard in m["shards"]:
        path = tmp_path / "ds" / shard["path"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == shard["sha256"]
        assert pq.read_metadata(path).num_rows == shard["rows"] <= 7
    train_ids = [r for s in shard_paths(tmp_path / "ds", "train") for r in pq.read_table(s)["record_id"].to_pylist()]
    keys = [(r.rsplit(":", 1)[0], int(r.rsplit(":", 1)[1])) for r in train_ids]
    assert keys == sorted(keys)  # sorted by (image_id, index) across shards


def test_finalize_is_deterministic_whatever_the_commit_order(tmp_path, studies):
    _, m1 = write_all(tmp_path / "a", studies)
    _, m2 = write_all(tmp_path / "b", studies, order=list(reversed(list(studies))))
    j1, j2 = json.loads(m1.read_text()), json.loads(m2.read_text())
    assert j1["shards"] == j2["shards"]  # same names, rows and sha256
    assert j1 == j2


def test_resume_after_interruption(tmp_path, studies, monkeypatch):
    out = tmp_path / "ds"
    ids = list(studies)
    w = DatasetWriter(out, PROV)
    w.commit_study(ids[0], *studies[ids[0]])

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(KeyboardInterrupt):
        w.commit_study(ids[1], *studies[ids[1]])
    monkeypatch.undo()
    # a half-written temporary file left by a hard kill is ignored
    (out / "parts" / f".{ids[2]}.parquet.abc.parquet").write_bytes(b"PAR1 truncated")
    assert w.done_ids() == {ids[0]}
    w.close()  # a killed process's lock goes with it

    w2 = DatasetWriter(out, PROV)  # the rerun
    assert w2.done_ids() == {ids[0]}
    for image_id in ids:
        if image_id not in w2.done_ids():
            w2.commit_study(image_id, *studies[image_id])
    w2.finalize()
    assert not list((out / "parts").glob(".*"))
    _, ref = write_all(tmp_path / "ref", studies)
    got = read_records(out).sort_values("record_id").reset_index(drop=True)
    want = read_records(tmp_path / "ref").sort_values("record_id").reset_index(drop=True)
    assert got["record_id"].tolist() == want["record_id"].tolist()
    assert got["instruction"].tolist() == want["instruction"].tolist()


def test_interrupted_refinalize_keeps_the_last_complete_dataset(tmp_path, studies, monkeypatch):
    out = tmp_path / "ds"
    ids = list(studies)
    w = DatasetWriter(out, PROV)
    for image_id in ids[:-1]:
        w.commit_study(image_id, *studies[image_id])
    w.finalize()
    before = read_records(out).sort_values("record_id")["record_id"].tolist()
    w.commit_study(ids[-1], *studies[ids[-1]])
    calls = []
    real = pq.write_table

    def crash_on_second_shard(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed mid-finalize")
        return real(*args, **kwargs)

    monkeypatch.setattr(pq, "write_table", crash_on_second_shard)
    with pytest.raises(KeyboardInterrupt):
        w.finalize()
    monkeypatch.undo()
    # the old shards and manifest are untouched: no mix of old and new shards
    assert read_records(out).sort_values("record_id")["record_id"].tolist() == before
    # killed after the swap, before the manifest: readers refuse the mix instead of reading it
    import cxrils.dataset.writer as writer_module

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed before the manifest")

    monkeypatch.setattr(writer_module, "atomic_write_json", crash)
    with pytest.raises(KeyboardInterrupt):
        w.finalize()
    monkeypatch.undo()
    with pytest.raises(DatasetError, match="finalize"):
        read_records(out)
    w.finalize()  # recovers
    assert len(read_records(out)) > len(before)
    # an interruption between the two renames leaves records.old/ only: the next finalize restores it
    (out / "records").rename(out / "records.old")
    w.finalize()
    assert not (out / "records.old").exists() and not (out / "records.new").exists()
    ref = DatasetWriter(tmp_path / "ref", PROV)
    for image_id in ids:
        ref.commit_study(image_id, *studies[image_id])
    assert (
        json.loads((out / "manifest.json").read_text())["shards"] == json.loads(ref.finalize().read_text())["shards"]
    )  # same names, rows and sha256


def test_bad_input_is_refused_with_a_clear_error(tmp_path, studies):
    w = DatasetWriter(tmp_path / "ds", PROV)
    x, recs = studies["im0"]
    with pytest.raises(DatasetError, match="safe file name"):
        w.commit_study("../evil", x, recs)
    with pytest.raises(DatasetError, match="belongs to image"):
        w.commit_study("im9", x, recs)
    with pytest.raises(DatasetError, match="uint8"):
        w.commit_study("im0", x.astype(np.float32), recs)
    with pytest.raises(DatasetError, match="image is 32x32"):
        w.commit_study("im0", x[:32, :32], recs)
    with pytest.raises(DatasetError, match="excluded"):
        w.commit_study("im0", x, recs, excluded="qc")
    with pytest.raises(DatasetError, match="lacks columns"):
        w.commit_study("im0", x, [{k: v for k, v in recs[0].items() if k != "answer"}])
    # a mask that is not the record's (review: a transposed mask was committed)
    pos = next(r for r in recs if r["polarity"] == "positive")
    neg = next(r for r in recs if r["polarity"] == "negative")
    h, w_ = pos["height"], pos["width"]
    wrong = np.zeros((w_ + 1, h), bool)
    with pytest.raises(DatasetError, match=rf"mask is {w_ + 1}x{h} \(H x W\) but the record is {h}x{w_}"):
        w.commit_study("im0", x, [{**pos, "mask": encode_rle(wrong)}])
    with pytest.raises(DatasetError, match=rf"mask_area {pos['mask_area'] + 1} but its mask {pos['mask_area']}"):
        w.commit_study("im0", x, [{**pos, "mask_area": pos["mask_area"] + 1}])
    with pytest.raises(DatasetError, match=r"negative with a non-empty mask \(4 pixels\)"):
        full = np.zeros((h, w_), bool)
        full[:2, :2] = True
        w.commit_study("im0", x, [{**neg, "mask": encode_rle(full), "mask_area": 4}])
    assert w.done_ids() == set()
    with pytest.raises(DatasetError, match="no manifest"):
        read_records(tmp_path / "ds")
    w.commit_study("im0", x, [])  # done, no rows
    w.commit_study("covid (1) PA", None, None, excluded="not_frontal")  # file-name-like ids are fine
    assert w.done_ids() == {"im0", "covid (1) PA"}


def test_a_corrupt_or_replaced_shard_is_refused_naming_it(tmp_path, studies):
    write_all(tmp_path / "ds", studies, shard_size=7)
    m = read_manifest(tmp_path / "ds")
    shard = tmp_path / "ds" / m["shards"][1]["path"]
    good = shard.read_bytes()
    # One flipped byte inside the data pages: pyarrow may still read it, our check does not.
    shard.write_bytes(good[:100] + bytes([good[100] ^ 0xFF]) + good[101:])
    for read in (
        lambda: read_records(tmp_path / "ds"),
        lambda: shard_paths(tmp_path / "ds"),
        lambda: ILSDataset(tmp_path / "ds", m["shards"][1]["split"]),
    ):
        with pytest.raises(DatasetError, match=rf"{shard.name}: records shard is corrupt or was replaced"):
            read()
    # A valid Parquet file with the same row count but other rows (replaced by hand).
    table = pq.read_table(tmp_path / "ds" / m["shards"][0]["path"]).slice(0, m["shards"][1]["rows"])
    pq.write_table(table, shard)
    with pytest.raises(DatasetError, match="corrupt or was replaced: its SHA-256 is"):
        read_records(tmp_path / "ds")
    shard.write_bytes(good)
    assert len(read_records(tmp_path / "ds")) == m["n_records"]
    if m["shards"][0]["split"] != m["shards"][1]["split"]:  # the other split's shards are not read
        assert len(read_records(tmp_path / "ds", m["shards"][0]["split"])) > 0


def test_one_writer_per_folder_and_the_provenance_it_was_started_with(tmp_path, studies):
    out = tmp_path / "ds"
    w = DatasetWriter(out, PROV)
    with pytest.raises(DatasetError, match="another process is writing this dataset"):
        DatasetWriter(out, PROV)
    w.commit_study("first", None, None, excluded="qc")  # committed under PROV
    w.close()
    changed = {"backends": {"anatomy": "builtin 0.2"}, "code_version": "0.1.0", "weights": {"a": "1"}}
    with pytest.raises(
        DatasetError,
        match=r"started with another provenance .*: backends\.anatomy: "
        r"\"builtin 0\.1\", now \"builtin 0\.2\"; weights: absent, now",
    ):
        DatasetWriter(out, changed)
    assert json.loads((out / "provenance.json").read_text()) == PROV  # not overwritten
    with DatasetWriter(out, PROV) as again:  # the lock went with the failed attempts
        again.commit_study("bad1", None, None, excluded="qc")
    DatasetWriter(out, PROV).close()


def test_a_study_grounding_file_is_committed_before_its_records(tmp_path, studies, monkeypatch):
    from cxrils.dataset import read_grounding

    out = tmp_path / "ds"
    ids = list(studies)
    doc = {
        "image_id": ids[0],
        "findings": [{"finding": {"entity": "effusion"}, "boxes": [{"box": [1.5, 2, 3, 4]}]}],
        "report": {"section_used": "findings", "section_text": "Small left effusion."},
    }
    w = DatasetWriter(out, PROV)
    w.commit_study(ids[0], *studies[ids[0]], grounding=doc)
    assert read_grounding(out, ids[0]) == doc
    assert read_grounding(out, ids[1]) is None  # not committed: nothing, and no error

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed between the grounding file and the part file")

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(KeyboardInterrupt):
        w.commit_study(ids[1], *studies[ids[1]], grounding={"image_id": ids[1], "findings": []})
    monkeypatch.undo()
    assert (out / "grounding" / f"{ids[1]}.json").is_file()
    assert w.done_ids() == {ids[0]}  # the part file is the commit: the study is redone on resume
    w.commit_study("gone", None, None, excluded="qc_anatomy", grounding={"image_id": "gone"})
    assert read_grounding(out, "gone") is None  # an excluded study keeps only its marker
    w.commit_study(ids[1], None, None, excluded="error:commit: the records did not fit")
    assert read_grounding(out, ids[1]) is None  # the failed attempt's file goes with the exclusion
    w.commit_study(ids[0], *studies[ids[0]])  # committed again without one: the old file would mislead
    assert read_grounding(out, ids[0]) is None
    w.close()

    (out / "grounding" / "broken.json").write_text("[1, 2")
    with pytest.raises(DatasetError, match=r"broken\.json: unreadable grounding file"):
        read_grounding(out, "broken")
    (out / "grounding" / "list.json").write_text("[1, 2]")
    with pytest.raises(DatasetError, match="not a JSON object"):
        read_grounding(out, "list")
    with pytest.raises(DatasetError, match="not a safe file name"):
        read_grounding(out, "../images/x")


@pytest.mark.parametrize("alias", ["val", "validation", "Validate"])
def test_split_aliases_read_the_validate_split(tmp_path, studies, alias):
    # docs/dataset.md: "val"/"validation" are accepted and normalised; one study (im3) is validate
    write_all(tmp_path / "ds", studies)
    want = sorted(r["record_id"] for r in studies["im3"][1])
    assert sorted(read_records(tmp_path / "ds", alias)["record_id"]) == want
    assert len(ILSDataset(tmp_path / "ds", alias)) == len(want)
    with pytest.raises(DatasetError, match="unknown split name 'vald'"):
        read_records(tmp_path / "ds", "vald")


def test_a_resume_that_differs_only_in_an_informative_key_keeps_the_first_value(tmp_path):
    # the pipeline passes informative=("git_commit",): an unrelated commit must not block a resume
    out = tmp_path / "ds"
    first = {**PROV, "git_commit": "aaa", "code_sha256": "c1"}
    with DatasetWriter(out, first, informative=("git_commit",)) as w:
        w.commit_study("first", None, None, excluded="qc")  # committed under it
    w = DatasetWriter(out, {**first, "git_commit": "bbb"}, informative=("git_commit",))
    assert w.provenance["git_commit"] == "aaa"  # as the folder was started
    w.close()
    assert json.loads((out / "provenance.json").read_text())["git_commit"] == "aaa"
    # other keys still count, with or without the informative one changing too
    with pytest.raises(ProvenanceMismatch, match=r"code_sha256: \"c1\", now \"c2\""):
        DatasetWriter(out, {**first, "git_commit": "bbb", "code_sha256": "c2"}, informative=("git_commit",))
    with pytest.raises(DatasetError, match=r"git_commit: \"aaa\", now \"bbb\""):
        DatasetWriter(out, {**first, "git_commit": "bbb"})  # not informative for this writer


def test_an_output_path_that_is_a_file_is_refused_with_its_name(tmp_path):
    # new-user trial: `cxrils generate ... -o existing.png` ended in a FileExistsError traceback
    afile = tmp_path / "fake.png"
    afile.write_bytes(b"x")
    with pytest.raises(DatasetError, match="fake.png: exists and is not a folder"):
        DatasetWriter(afile, {"v": 1})
    assert afile.read_bytes() == b"x"
    with pytest.raises(DatasetError, match="cannot create the dataset folder"):
        DatasetWriter(afile / "sub", {"v": 1})


def test_a_folder_of_other_files_gets_a_warning_and_a_resumed_dataset_none(tmp_path, caplog):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with caplog.at_level("WARNING", logger="cxrils.dataset.writer"):
        DatasetWriter(out, {"v": 1}).close()
    assert "holds files of no cxrils dataset (notes.txt)" in caplog.text
    assert (out / "notes.txt").read_text() == "mine"
    caplog.clear()
    with caplog.at_level("WARNING", logger="cxrils.dataset.writer"):
        DatasetWriter(out, {"v": 1}).close()  # its own dataset now: a resume, no warning
    assert "holds files" not in caplog.text


def test_a_folder_with_nothing_committed_takes_the_new_provenance(tmp_path):
    # new-user trial: a run that stopped while loading its stages (a bad --set) left its
    # provenance behind, and the corrected rerun was refused as a resume of another run
    DatasetWriter(tmp_path / "ds", {"config": "bad"}).close()
    w = DatasetWriter(tmp_path / "ds", {"config": "good"})
    w.close()
    assert json.loads((tmp_path / "ds" / "provenance.json").read_text()) == {"config": "good"}
    # once an image is committed, another provenance is refused as before
    w = DatasetWriter(tmp_path / "ds", {"config": "good"})
    w.commit_study("im0", None, None, excluded="not_frontal")
    w.close()
    with pytest.raises(ProvenanceMismatch, match='config: "good", now "bad"'):
        DatasetWriter(tmp_path / "ds", {"config": "bad"})
