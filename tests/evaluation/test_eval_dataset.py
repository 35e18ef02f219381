"""evaluate_predictions, baselines and the CLI on small datasets built in tmp_path."""

from __future__ import annotations

import importlib.util
import json
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eval_data import H, W, hand_anatomy
from PIL import Image
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.evaluation import EvaluationError, evaluate_predictions, write_predictions
from cxrils.evaluation.baselines import baseline_predictions
from cxrils.masks import encode_rle, rle_to_uncompressed_counts

runner = CliRunner()


def _cli(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    try:
        text = result.output + (result.stderr or "")
    except ValueError:  # older click: stderr mixed into output
        text = result.output
    return result.exit_code, text


def _rows(dataset: Path, name: str = "oracle", split: str | None = "test") -> list[dict]:
    return list(baseline_predictions(name, dataset, split=split, anatomy_fn=lambda x: hand_anatomy(x.shape)))


def _no_meta(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "metadata"}


def test_oracle_scores_one_everywhere(dataset: Path, tmp_path: Path) -> None:
    pred = tmp_path / "oracle.parquet"
    assert write_predictions(pred, _rows(dataset)) == 10
    report = evaluate_predictions(dataset, pred)
    t4 = report.table4()
    assert (t4["gIoU"], t4["cIoU"], t4["n_acc"], t4["text_accuracy"]) == (1.0, 1.0, 1.0, 1.0)
    assert (t4["n_positive"], t4["n_negative"], t4["n_text"]) == (6, 4, 10)
    for row in report.table5().values():
        assert row["gIoU"] in (1.0, None) and row["n_acc"] in (1.0, None)
    for pols in report.table6().values():
        assert all(v["accuracy"] in (1.0, None) for v in pols.values())


def test_always_empty_baseline(dataset: Path, tmp_path: Path) -> None:
    pred = tmp_path / "empty.jsonl"
    write_predictions(pred, _rows(dataset, "always-empty"))
    report = evaluate_predictions(dataset, pred)
    t4 = report.table4()
    assert (t4["gIoU"], t4["cIoU"], t4["n_acc"]) == (0.0, 0.0, 1.0)
    # its answers are the instructions' negative templates: right on all 4 negatives, wrong on 6 positives
    assert (t4["n_text_correct"], t4["n_text"]) == (4, 10)
    t6 = report.table6()
    assert t6["basic"]["negative"]["accuracy"] == 1.0 and t6["basic"]["positive"]["accuracy"] == 0.0
    assert t6["lesion_inference"]["negative"]["accuracy"] == 1.0
    assert t6["global"]["negative"]["n"] == 1


def test_whole_lung_baseline_hand_computed(dataset: Path, tmp_path: Path) -> None:
    pred = tmp_path / "lung.parquet"
    rows = _rows(dataset, "whole-lung")
    assert all(r["answer"] is None for r in rows)
    write_predictions(pred, rows, with_answers=False)
    report = evaluate_predictions(dataset, pred)
    # (intersection, union) per positive with the hand-built anatomy (see eval_data.hand_anatomy):
    pairs = [(48, 128), (192, 792), (24, 128), (30, 96), (96, 816), (600, 848)]
    t4 = report.table4()
    assert (t4["intersection"], t4["union"]) == (990, 2808)
    assert t4["cIoU"] == 990 / 2808
    assert t4["gIoU"] == float(sum(Fraction(i / u) for i, u in pairs) / len(pairs))
    assert t4["n_acc"] == 0.0 and t4["text_accuracy"] is None and not report.text_scored
    assert report.table5()["cardiomegaly"]["gIoU"] == 96 / 816
    assert report.table5()["cardiomegaly"]["n_acc"] == 0.0


def test_shuffling_batch_size_and_format_change_nothing(dataset: Path, tmp_path: Path) -> None:
    rows = _rows(dataset, "whole-lung")
    rng = np.random.default_rng(0)
    for r in rows:  # make the answers a mix of right and wrong
        r["answer"] = "[SEG]" if rng.random() < 0.5 else None
    write_predictions(tmp_path / "a.parquet", rows)
    base = evaluate_predictions(dataset, tmp_path / "a.parquet").to_dict()
    for seed, batch_size in ((0, 1), (1, 3), (2, 1000)):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        write_predictions(tmp_path / f"s{seed}.jsonl", shuffled)
        got = evaluate_predictions(dataset, tmp_path / f"s{seed}.jsonl", batch_size=batch_size).to_dict()
        assert _no_meta(got) == _no_meta(base)


def test_split_selection(dataset: Path, tmp_path: Path) -> None:
    write_predictions(tmp_path / "all.parquet", _rows(dataset, split=None))
    assert evaluate_predictions(dataset, tmp_path / "all.parquet", split=None).n_samples == 12
    # "all", as the commands' --split all (the Python API refused it: new-user trial, stop 53)
    assert evaluate_predictions(dataset, tmp_path / "all.parquet", split="All").n_samples == 12
    with pytest.raises(
        EvaluationError, match=r"unknown split name 'every'; expected one of train, validate, test, all"
    ):
        evaluate_predictions(dataset, tmp_path / "all.parquet", split="every")
    # The message names the split asked for and where the other ids are.
    with pytest.raises(
        EvaluationError,
        match=r"2 record ids are not records of split 'test' of .* "
        r"\(2 in split 'train'\), e\.g\. \['img2:0', 'img2:1'\]; evaluate "
        r"another split with --split",
    ):
        evaluate_predictions(dataset, tmp_path / "all.parquet")
    frame = pq.read_table(tmp_path / "all.parquet").to_pandas()
    train = evaluate_predictions(dataset, frame[frame.record_id.str.startswith("img2:")], split="train")
    assert train.n_samples == 2 and train.table4()["gIoU"] == 1.0
    with pytest.raises(EvaluationError, match="no records in split 'validate'"):
        evaluate_predictions(dataset, tmp_path / "all.parquet", split="val")
    # a new user's trial (stop 58): "no records in any split" for a dataset without paraphrases
    with pytest.raises(EvaluationError, match=r"no paraphrased records in any split \(--paraphrases only"):
        evaluate_predictions(dataset, tmp_path / "all.parquet", split="all", paraphrases="only")
    with pytest.raises(EvaluationError, match="unknown split name 'tset'"):
        evaluate_predictions(dataset, tmp_path / "all.parquet", split="tset")
    train_rows = frame[frame.record_id.str.startswith("img2:")]
    assert evaluate_predictions(dataset, train_rows, split="Training").n_samples == 2


def test_report_files(dataset: Path, tmp_path: Path) -> None:
    pred = tmp_path / "empty.parquet"
    write_predictions(pred, _rows(dataset, "always-empty"))
    files = evaluate_predictions(dataset, pred).write(tmp_path / "rep")
    names = sorted(f.name for f in files)
    assert names == ["report.json", "report.md", "table14.csv", "table4.csv", "table5.csv", "table6.csv"]
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["table4_overall"]["n_acc"] == 1.0
    assert data["table5_per_lesion_type"]["cardiomegaly"]["gIoU"] == 0.0
    t5 = (tmp_path / "rep" / "table5.csv").read_text().splitlines()
    assert t5[0].startswith("lesion_type,gIoU,cIoU,n_acc") and len(t5) == 1 + 7
    t14 = (tmp_path / "rep" / "table14.csv").read_text()
    assert "cardiomegaly,basic,positive,n/a,0,0" in t14 and "nan" not in t14.lower()
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Table 4" in md and "| 0.0 | 0.0 | 100.0 | 40.0 | 6 | 4 |" in md


# ---------------------------------------------------------------- CLI -------------------------------------------


def test_cli_baseline_then_evaluate(dataset: Path, tmp_path: Path) -> None:
    code, out = _cli("baseline", "oracle", "--dataset", dataset, "-o", tmp_path / "p.parquet")
    assert code == 0, out
    code, out = _cli("evaluate", "--dataset", dataset, "--predictions", tmp_path / "p.parquet", "-o", tmp_path / "rep")
    assert code == 0, out
    assert "gIoU 100.0  cIoU 100.0  N-Acc 100.0  text accuracy 100.0" in out
    assert json.loads((tmp_path / "rep" / "report.json").read_text())["table4_overall"]["gIoU"] == 1.0


@pytest.mark.parametrize(
    "command",
    [
        ["baseline", "oracle", "-o", "q.parquet"],
        ["evaluate", "-p", "p.parquet", "-o", "rep"],
        ["predict", "-o", "q.parquet"],
    ],
)
def test_cli_unknown_split_names_all_among_the_choices(dataset: Path, tmp_path: Path, command: list[str]) -> None:
    # Each of these commands documents --split as train, validate, test or all.
    code, out = _cli("baseline", "oracle", "--dataset", dataset, "--split", "all", "-o", tmp_path / "p.parquet")
    assert code == 0, out
    args = [str(tmp_path / a) if a.endswith((".parquet", "rep")) else a for a in command]
    code, out = _cli(*args, "--dataset", dataset, "--split", "nosuch")
    assert code == 2 and "unknown split name 'nosuch'" in out, out
    choices = out.split("expected one of ", 1)[1].split("(")[0]
    assert [c.strip() for c in choices.split(",")] == ["train", "validate", "test", "all"], out


def test_cli_predict_refuses_an_image_or_instruction_with_dataset(dataset: Path, tmp_path: Path) -> None:
    # Batch mode would predict the whole split and drop them without a word.
    image = tmp_path / "x.png"
    Image.fromarray(np.full((64, 64), 128, np.uint8)).save(image)
    out = tmp_path / "p.parquet"
    for positional in ([image, "Segment the cardiomegaly."], [image]):
        code, text = _cli("predict", "--dataset", dataset, *positional, "-o", out)
        assert code == 2, text
        assert "IMAGE" in text and "INSTRUCTION" in text and "--dataset" in text and "not both" in text
        assert "Traceback" not in text and not out.exists()


def test_cli_unknown_baseline_and_missing_anatomy(dataset: Path, tmp_path: Path) -> None:
    code, out = _cli("baseline", "random", "--dataset", dataset, "-o", tmp_path / "p.parquet")
    assert code == 2 and "unknown baseline 'random'" in out
    if importlib.util.find_spec("cxrils.vision.anatomy") is None:
        code, out = _cli("baseline", "whole-lung", "--dataset", dataset, "-o", tmp_path / "p.parquet")
        assert code == 2 and "anatomy stage" in out and "Traceback" not in out


def test_cli_baseline_refuses_a_suffix_it_would_not_write_and_evaluate_names_the_formats(
    dataset: Path, tmp_path: Path
) -> None:
    code, out = _cli("baseline", "oracle", "--dataset", dataset, "-o", tmp_path / "p.csv")
    assert code == 2 and "must end in .parquet or .jsonl" in out and not (tmp_path / "p.csv").exists()
    (tmp_path / "q.csv").write_text("record_id,mask\nx,y\n")
    code, out = _cli("evaluate", "--dataset", dataset, "--predictions", tmp_path / "q.csv", "-o", tmp_path / "rep")
    assert code == 2 and "predictions are .parquet or JSON Lines" in out and "Traceback" not in out


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "duplicate",
        "extra",
        "wrong_size",
        "truncated_rle",
        "bad_json",
        "control_character",
        "no_mask_field",
        "null_mask",
        "array_line",
        "mask_without_size",
        "garbage_parquet",
        "no_file",
        "a_folder",
        "no_mask_column",
        "empty_file",
    ],
)
def test_cli_evaluate_errors(case: str, dataset: Path, tmp_path: Path) -> None:
    rows = _rows(dataset)
    pred = tmp_path / "p.jsonl"
    expect: str
    if case == "missing":
        _write_jsonl(pred, rows[1:])
        expect = "1 of 10 test records have no prediction, e.g. ['img0:0']"
    elif case == "empty_file":  # new-user trial (stop 58): "10 of 10 test records have no prediction"
        pred.write_text("")
        expect = "p.jsonl: holds no prediction (an empty file or table)"
    elif case == "duplicate":
        _write_jsonl(pred, rows + [rows[3]])
        expect = "1 duplicate record ids, e.g. ['img0:3']"
    elif case == "extra":
        _write_jsonl(pred, rows + [{**rows[0], "record_id": "nope:0"}])
        expect = "1 record ids are not records of split 'test' of"
    elif case == "wrong_size":
        rows[2]["mask"] = encode_rle(np.zeros((16, 16), bool))
        _write_jsonl(pred, rows)
        expect = f"record 'img0:2': mask is 16x16 (HxW) but the reference image is {H}x{W}"
    elif case == "truncated_rle":
        rows[0]["mask"] = {**rows[0]["mask"], "counts": rows[0]["mask"]["counts"][:-1]}
        _write_jsonl(pred, rows)
        expect = "record 'img0:0': mask: RLE"
    elif case == "bad_json":
        _write_jsonl(pred, rows)
        with open(pred, "a") as fh:
            fh.write("{not json\n")
        expect = "line 11: not a prediction {record_id, mask: {size, counts}, answer?}: not valid JSON ("
    elif case == "control_character":
        _write_jsonl(pred, rows)
        with open(pred, "a") as fh:
            fh.write('{"record_id": "a\tb"}\n')  # a raw tab inside a JSON string
        expect = "not valid JSON (Invalid control character at column 17)"
    elif case == "no_mask_field":
        _write_jsonl(pred, rows[:3] + [{"record_id": rows[3]["record_id"]}])
        expect = "line 4: not a prediction {record_id, mask: {size, counts}, answer?}: it has no 'mask' field"
    elif case == "array_line":
        pred.write_text("[1, 2]\n")
        expect = "line 1: not a prediction {record_id, mask: {size, counts}, answer?}: a JSON list, not an object"
    elif case == "mask_without_size":
        _write_jsonl(pred, [{**rows[0], "mask": {"counts": rows[0]["mask"]["counts"]}}])
        expect = "line 1: not a prediction {record_id, mask: {size, counts}, answer?}: its mask has no 'size' field"
    elif case == "null_mask":
        _write_jsonl(pred, [{**rows[0], "mask": None}])
        expect = "line 1: not a prediction {record_id, mask: {size, counts}, answer?}: its mask is not an object"
    elif case == "garbage_parquet":
        pred = tmp_path / "p.parquet"
        pred.write_bytes(b"not a parquet file at all")
        expect = "unreadable Parquet file"
    elif case == "no_file":
        pred = tmp_path / "absent.parquet"
        expect = "predictions file not found"
    elif case == "a_folder":
        pred = tmp_path / "preds"
        pred.mkdir()
        expect = "is a folder; give the predictions file (.parquet or .jsonl) in it"
    else:
        pred = tmp_path / "p.parquet"
        pq.write_table(pa.table({"record_id": [r["record_id"] for r in rows]}), pred)
        expect = "missing column 'mask'"
    code, out = _cli("evaluate", "--dataset", dataset, "--predictions", pred, "-o", tmp_path / "rep")
    assert code == 2, out
    assert str(pred) in out and expect in out, out
    assert "Traceback" not in out
    assert not (tmp_path / "rep").exists()


def test_cli_evaluate_split_all_names_all_splits(dataset: Path, tmp_path: Path) -> None:
    rows = _rows(dataset, split=None)
    pred = _write_jsonl(tmp_path / "p.jsonl", rows[1:])
    code, out = _cli("evaluate", "--dataset", dataset, "--predictions", pred, "--split", "all", "-o", tmp_path / "r")
    assert code == 2 and f"1 of {len(rows)} records (all splits) have no prediction" in out, out
    assert "any" not in out


def test_cli_evaluate_bad_dataset(tmp_path: Path) -> None:
    pred = tmp_path / "p.jsonl"
    _write_jsonl(pred, [])
    code, out = _cli("evaluate", "--dataset", tmp_path / "nowhere", "--predictions", pred, "-o", tmp_path / "r")
    assert code == 2 and "dataset folder not found" in out
    (tmp_path / "empty_ds").mkdir()
    code, out = _cli("evaluate", "--dataset", tmp_path / "empty_ds", "--predictions", pred, "-o", tmp_path / "r")
    assert code == 2 and "no records/*.parquet shards" in out


def test_paraphrased_rows(tmp_path: Path) -> None:
    from eval_data import box, make_record, standard_records, write_dataset

    para = make_record(
        "img0:9",
        lesion="pneumonia",
        itype="basic",
        mask=box(20, 26, 4, 12),
        paraphrase_of="img0:0",
        instruction="Could you outline the pneumonia at the bottom of the right lung?",
    )
    ds = write_dataset(tmp_path / "ds", standard_records() + [para])
    counts = {}
    for mode in ("exclude", "include", "only"):
        pred = tmp_path / f"{mode}.parquet"
        write_predictions(pred, baseline_predictions("oracle", ds, paraphrases=mode))
        report = evaluate_predictions(ds, pred, paraphrases=mode)
        counts[mode] = report.n_samples
        assert report.table4()["gIoU"] == 1.0 and report.metadata["paraphrases"] == mode
    assert counts == {"exclude": 10, "include": 11, "only": 1}
    with pytest.raises(
        EvaluationError,
        match=r"1 record ids are not records of split 'test' of .*\(1 "
        r"paraphrased-instruction rows, left out by --paraphrases exclude\)",
    ):
        evaluate_predictions(ds, tmp_path / "include.parquet")
    with pytest.raises(EvaluationError, match=r"10 template rows, left out by --paraphrases only"):
        evaluate_predictions(ds, tmp_path / "include.parquet", paraphrases="only")
    # always-empty builds the negative answer of a paraphrase from the record's columns
    rows = {r["record_id"]: r for r in baseline_predictions("always-empty", ds, paraphrases="only")}
    assert rows["img0:9"]["answer"] == "[SEG] There is no pneumonia in the right lung base."
    code, out = _cli(
        "evaluate",
        "--dataset",
        ds,
        "--predictions",
        tmp_path / "only.parquet",
        "-o",
        tmp_path / "r",
        "--paraphrases",
        "only",
    )
    assert code == 0 and "1 records" in out, out
    code, out = _cli(
        "evaluate",
        "--dataset",
        ds,
        "--predictions",
        tmp_path / "only.parquet",
        "-o",
        tmp_path / "r",
        "--paraphrases",
        "sometimes",
    )
    assert code == 2 and "paraphrases must be one of" in out


def test_jsonl_mask_variants_and_partial_answers(dataset: Path, tmp_path: Path) -> None:
    rows = _rows(dataset)
    lines = []
    for k, r in enumerate(rows):
        obj = {"record_id": r["record_id"], "mask": r["mask"]}
        if k == 0:  # mask as JSON text
            obj["mask"] = json.dumps(r["mask"])
        if k == 1:  # uncompressed COCO RLE (column-major runs)
            obj["mask"] = {"size": r["mask"]["size"], "counts": rle_to_uncompressed_counts(r["mask"])}
        if k < 5:
            obj["answer"] = r["answer"]  # the other five lines have no answer: scored wrong
        lines.append(obj)
    pred = _write_jsonl(tmp_path / "p.jsonl", lines)
    t4 = evaluate_predictions(dataset, pred).table4()
    assert (t4["gIoU"], t4["cIoU"], t4["n_acc"]) == (1.0, 1.0, 1.0)
    assert (t4["n_text_correct"], t4["n_text"]) == (5, 10)


def test_cli_whole_lung_with_the_configured_anatomy_backend(dataset: Path, tmp_path: Path, monkeypatch) -> None:
    import sys
    import types

    calls = []

    class Segmenter:
        def segment(self, x: np.ndarray):
            calls.append(x.shape)
            return hand_anatomy(x.shape)

    def get_segmenter(name, cfg):
        if name != "builtin":
            raise RuntimeError(f"unknown anatomy backend {name!r}")
        return Segmenter()

    fake = types.ModuleType("cxrils.vision.anatomy")
    fake.get_segmenter = get_segmenter
    monkeypatch.setitem(sys.modules, "cxrils.vision.anatomy", fake)
    code, out = _cli("baseline", "whole-lung", "--dataset", dataset, "-o", tmp_path / "lung.parquet")
    assert code == 0, out
    assert calls == [(H, W), (H, W)]  # once per image, not per record
    report = evaluate_predictions(dataset, tmp_path / "lung.parquet")
    assert (report.table4()["intersection"], report.table4()["union"]) == (990, 2808)
    code, out = _cli(
        "baseline", "whole-lung", "--dataset", dataset, "-o", tmp_path / "x.parquet", "--set", "backends.anatomy=cxas"
    )
    assert code == 2 and "cannot build the anatomy backend 'cxas'" in out and "Traceback" not in out


def _written_by_the_dataset_writer(root: Path) -> Path:
    from eval_data import standard_records

    from cxrils.dataset import DatasetWriter

    with DatasetWriter(root, {"test": "evaluation"}, shard_size=4) as writer:
        by_image: dict[str, list[dict]] = {}
        for rec in standard_records():
            by_image.setdefault(rec["image_id"], []).append(rec)
        for image_id, recs in by_image.items():
            writer.commit_study(image_id, np.full((H, W), 90, np.uint8), recs)
        return writer.finalize().parent


def test_dataset_written_by_the_dataset_writer(tmp_path: Path) -> None:
    ds = _written_by_the_dataset_writer(tmp_path / "ds")
    for name in ("oracle", "always-empty"):
        write_predictions(tmp_path / f"{name}.parquet", baseline_predictions(name, ds))
    oracle = evaluate_predictions(ds, tmp_path / "oracle.parquet").table4()
    empty = evaluate_predictions(ds, tmp_path / "always-empty.parquet").table4()
    assert (oracle["gIoU"], oracle["cIoU"], oracle["n_acc"], oracle["text_accuracy"]) == (1.0, 1.0, 1.0, 1.0)
    assert (empty["gIoU"], empty["cIoU"], empty["n_acc"], empty["n_positive"]) == (0.0, 0.0, 1.0, 6)


@pytest.mark.parametrize("bad", ["NaN", "Infinity", '"7"'])
def test_cli_evaluate_uncompressed_counts_that_are_not_integers(bad: str, dataset: Path, tmp_path: Path) -> None:
    """The same clear error as the in-memory evaluate(), not a traceback."""
    from cxrils.evaluation import evaluate
    from cxrils.masks import MaskError

    rows = _rows(dataset)
    counts = rle_to_uncompressed_counts(rows[0]["mask"])
    lines = [json.dumps(r) for r in rows]
    first = dict(rows[0], mask={"size": rows[0]["mask"]["size"], "counts": [0] * len(counts)})
    lines[0] = json.dumps(first).replace(", ".join(["0"] * len(counts)), ", ".join([bad] + [str(c) for c in counts]), 1)
    assert bad in lines[0]
    pred = tmp_path / "p.jsonl"
    pred.write_text("\n".join(lines) + "\n")
    value = json.loads(lines[0])["mask"]
    reason = "uncompressed RLE counts must be non-negative integers; run 0 is"
    with pytest.raises(MaskError, match=reason):
        evaluate([(value, rows[0]["mask"])])
    code, out = _cli("evaluate", "--dataset", dataset, "--predictions", pred, "-o", tmp_path / "rep")
    assert code == 2 and f"{pred}: record 'img0:0': mask: {reason}" in out, out
    assert "Traceback" not in out


def test_cli_evaluate_refuses_a_corrupt_shard(tmp_path: Path) -> None:
    ds = _written_by_the_dataset_writer(tmp_path / "ds")
    write_predictions(tmp_path / "oracle.parquet", baseline_predictions("oracle", ds))
    shard = sorted((ds / "records").glob("test-*.parquet"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    code, out = _cli("evaluate", "--dataset", ds, "--predictions", tmp_path / "oracle.parquet", "-o", tmp_path / "r")
    assert code == 2 and f"{shard}: records shard is corrupt or was replaced" in out, out


def test_score_columns_are_written_with_null_for_nan_and_read_past(tmp_path):
    import json

    from cxrils.evaluation.io import read_predictions, write_predictions

    rows = [
        {
            "record_id": "a",
            "mask": {"size": [2, 2], "counts": "04"},
            "answer": "[SEG]",
            "presence_score": 0.7,
            "presence_threshold": 0.5,
            "note": None,
        },
        {
            "record_id": "b",
            "mask": {"size": [2, 2], "counts": "4"},
            "answer": "[SEG] There is no edema.",
            "presence_score": float("nan"),
            "presence_threshold": None,
            "note": "a reason",
        },
    ]
    path = tmp_path / "p.jsonl"
    write_predictions(path, rows, with_scores=True)
    lines = path.read_text().splitlines()
    assert "NaN" not in path.read_text()  # JSON has no NaN: a null
    assert [json.loads(line)["presence_score"] for line in lines] == [0.7, None]
    assert json.loads(lines[1])["note"] == "a reason"
    for p in (path, tmp_path / "p.parquet"):
        write_predictions(p, rows, with_scores=True)
        table = read_predictions(p)
        assert table.column("record_id").to_pylist() == ["a", "b"] and "presence_score" not in table.column_names
    write_predictions(path, rows)  # without scores: the columns of the evaluation only
    assert "presence_score" not in json.loads(path.read_text().splitlines()[0])


@pytest.mark.parametrize("text", ['{"size": [1e30, 5], "counts": "x"}', '{"size": [-3, 5], "counts": "x"}', None])
def test_a_text_mask_column_with_an_impossible_size_is_an_evaluation_error(text):
    from cxrils.evaluation.io import EvaluationError, mask_column

    with pytest.raises(EvaluationError, match=r"p\.parquet: row 0: mask is not a COCO RLE JSON text"):
        mask_column(pa.array([text], pa.string()), "p.parquet")


def test_evaluate_refuses_an_output_that_is_a_file_before_scoring(tmp_path):
    # a new user's trial (stop 58): "afile: cannot write the report: [Errno 17] File exists"
    from typer.testing import CliRunner

    from cxrils.cli import app

    afile = tmp_path / "afile"
    afile.write_text("kept")
    res = CliRunner().invoke(
        app, ["evaluate", "-d", str(tmp_path), "-p", str(tmp_path / "p.parquet"), "-o", str(afile)]
    )
    assert res.exit_code == 2 and "afile: exists and is not a folder" in res.output, res.output
    assert afile.read_text() == "kept"


@pytest.mark.parametrize("value", [3, None, [("a", "b")]])
def test_predictions_of_no_known_kind_are_named(value):
    # a new user's trial (stop 58): evaluate_predictions(3, ...) gave a bare AttributeError
    from cxrils.evaluation.io import predictions_from_table

    with pytest.raises(
        EvaluationError, match="expected a predictions file path, a pandas DataFrame or a pyarrow Table"
    ):
        predictions_from_table(value)
