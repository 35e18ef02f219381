"""The authors' protocol (ROSALIA train_ds.py validate()) against an independent re-computation.

The re-computation below restates validate() directly on numpy masks, one sample at a
time, the way the authors' loop runs: per sample I = |P & R|, U = |P | R| of the
foreground class, acc_iou = I / (U + 1e-5) (+1 when U == 0); positives are samples
whose reference mask is non-empty; giou_* = sum(acc_iou) / (count + 1e-5) (the
AverageMeter.all_reduce epsilon), ciou_* = sum(I) / (sum(U) + 1e-10). It shares no code
with cxrils.evaluation.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from cxrils.evaluation import evaluate, evaluate_predictions, write_predictions
from cxrils.evaluation.official import OfficialAccumulator
from cxrils.evaluation.report import EvaluationReport
from cxrils.masks import decode_rle, encode_rle


def validate_restated(pairs):
    """(pred bool (H, W), ref bool (H, W)) pairs -> the authors' five numbers."""
    acc = {"pos": [0.0, 0], "neg": [0.0, 0]}
    inter = {"pos": 0, "neg": 0}
    union = {"pos": 0, "neg": 0}
    for pred, ref in pairs:
        i = int(np.logical_and(pred, ref).sum())
        u = int(np.logical_or(pred, ref).sum())
        a = i / (u + 1e-5)
        if u == 0:
            a += 1.0
        g = "pos" if ref.sum() != 0 else "neg"
        acc[g][0] += a
        acc[g][1] += 1
        inter[g] += i
        union[g] += u
    n = acc["pos"][1] + acc["neg"][1]
    return {
        "giou_pos": acc["pos"][0] / (acc["pos"][1] + 1e-5),
        "ciou_pos": inter["pos"] / (union["pos"] + 1e-10),
        "giou_neg": acc["neg"][0] / (acc["neg"][1] + 1e-5),
        "giou": (acc["pos"][0] + acc["neg"][0]) / (n + 1e-5),
        "ciou": (inter["pos"] + inter["neg"]) / (union["pos"] + union["neg"] + 1e-10),
    }


def _refs(rng, n_pos=12, n_neg=9, shape=(24, 20)):
    refs = []
    for k in range(n_pos):
        m = np.zeros(shape, bool)
        r, c = rng.integers(0, 14), rng.integers(0, 10)
        m[r : r + 3 + k % 7, c : c + 2 + k % 9] = True
        refs.append(m)
    return refs + [np.zeros(shape, bool) for _ in range(n_neg)]


def _perturb(rng, refs):
    out = []
    for k, m in enumerate(refs):
        p = m.copy()
        flip = rng.random(m.shape) < (0.08 if k % 3 else 0.3)
        p ^= flip
        if k % 5 == 0:
            p[:] = False  # some empty predictions, on positives and negatives
        out.append(p)
    return out


@pytest.mark.parametrize("kind", ["oracle", "empty", "perturbed"])
def test_official_numbers_match_restated_validate(kind):
    rng = np.random.default_rng(7)
    refs = _refs(rng)
    preds = {
        "oracle": [m.copy() for m in refs],
        "empty": [np.zeros_like(m) for m in refs],
        "perturbed": _perturb(rng, refs),
    }[kind]
    expected = validate_restated(list(zip(preds, refs)))
    got = evaluate(list(zip(preds, refs))).official_protocol()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert got["n_pos"] == 12 and got["n_neg"] == 9
    if kind == "oracle":  # positives score U / (U + 1e-5); negatives 0 / 1e-5 + 1 = 1 exactly
        assert 1 - 1e-5 < got["giou_pos"] < 1.0
        assert got["giou_neg"] == pytest.approx(9 / (9 + 1e-5), rel=1e-12)
    if kind == "empty":
        assert got["giou_pos"] == 0.0 and got["ciou_pos"] == 0.0


def test_giou_neg_is_n_acc_up_to_the_epsilon_and_giou_pos_near_ours():
    rng = np.random.default_rng(3)
    refs = _refs(rng)
    preds = _perturb(rng, refs)
    report = evaluate(list(zip(preds, refs)))
    ours, theirs = report.table4(), report.official_protocol()
    assert theirs["giou_neg"] == pytest.approx(ours["n_acc"] * 9 / (9 + 1e-5), rel=1e-12)
    assert theirs["ciou_pos"] == pytest.approx(ours["cIoU"], rel=1e-9)
    assert theirs["giou_pos"] == pytest.approx(ours["gIoU"], rel=1e-4)
    assert theirs["giou_pos"] < ours["gIoU"]  # the epsilons only ever lower it


def test_order_and_batching_do_not_change_the_sums_and_json_round_trip():
    rng = np.random.default_rng(5)
    refs = _refs(rng)
    pairs = list(zip(_perturb(rng, refs), refs))
    a = evaluate(pairs, batch_size=4)
    b = evaluate(pairs[::-1], batch_size=7)
    assert a.official.to_dict() == b.official.to_dict()
    again = EvaluationReport.from_dict(json.loads(json.dumps(a.to_dict())))
    assert again.official_protocol() == a.official_protocol()
    with pytest.raises(ValueError):
        OfficialAccumulator.from_dict({"n_pos": "x"})


def test_evaluate_predictions_file_and_cli_print_both_protocols(dataset, tmp_path):
    """On a dataset folder: the report's official block equals the restated validate()
    over the same (prediction, reference) masks, and `cxrils evaluate` prints it."""
    import pandas as pd
    from typer.testing import CliRunner

    from cxrils.cli import app

    recs = pd.concat([pd.read_parquet(p) for p in sorted((dataset / "records").glob("*.parquet"))])
    recs = recs[recs["split"] == "test"]
    rng = np.random.default_rng(11)
    rows, pairs = [], []
    for rid, rle in zip(recs["record_id"], recs["mask"]):
        ref = decode_rle({"size": [int(v) for v in rle["size"]], "counts": rle["counts"]})
        pred = ref ^ (rng.random(ref.shape) < 0.05)
        rows.append({"record_id": rid, "mask": dict(encode_rle(pred))})
        pairs.append((pred, ref))
    path = tmp_path / "pred.parquet"
    write_predictions(path, rows, with_answers=False)
    report = evaluate_predictions(dataset, path, split="test")
    expected = validate_restated(pairs)
    got = report.official_protocol()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    out = CliRunner().invoke(app, ["evaluate", "-d", str(dataset), "-p", str(path), "-o", str(tmp_path / "rep")])
    assert out.exit_code == 0, out.output
    assert f"giou_pos {100 * expected['giou_pos']:.1f}" in out.output
    assert f"giou_neg {100 * expected['giou_neg']:.1f}" in out.output
    saved = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert saved["official_protocol"]["ciou_pos"] == pytest.approx(expected["ciou_pos"], rel=1e-12)
    assert "authors' protocol" in (tmp_path / "rep" / "report.md").read_text()


# --- SAM's padded square: validate() compares 1024 x 1024 frames ------------------------


def _square(mask, side):
    """reason_seg_dataset.py preprocess_mask: zero padding at the bottom and right."""
    out = np.zeros((side, side), bool)
    out[: mask.shape[0], : mask.shape[1]] = mask
    return out


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_predicted_pixels_in_the_padding_count_as_validate_counts_them(dataset, tmp_path, fmt):
    """The restated validate() compares whole squares (the reference zero-padded, the
    prediction reaching into the padding); a predictions file holds the image part and
    ``padding_pixels``. Both give the same five numbers; ours (gIoU, N-Acc) ignore the
    padding; a file without the column gives the image-only numbers and says so."""
    import pandas as pd

    recs = pd.concat([pd.read_parquet(p) for p in sorted((dataset / "records").glob("*.parquet"))])
    recs = recs[recs["split"] == "test"]
    rng = np.random.default_rng(13)
    rows, rows_bare, square_pairs, image_pairs = [], [], [], []
    for k, (rid, rle) in enumerate(zip(recs["record_id"], recs["mask"])):
        ref = decode_rle({"size": [int(v) for v in rle["size"]], "counts": rle["counts"]})
        side = max(ref.shape) + 6  # the square is larger than either side: padding on both
        noise = rng.random(ref.shape) < 0.05 if ref.any() else np.zeros(ref.shape, bool)
        pred_square = _square(ref ^ noise, side)  # an empty answer on every negative
        if k % 2 == 0:  # a blob in the padding below and right of the image
            pred_square[ref.shape[0] : ref.shape[0] + 3, 2:9] = True
            pred_square[1:4, ref.shape[1] : ref.shape[1] + 2] = True
        pred = pred_square[: ref.shape[0], : ref.shape[1]]
        padding = int(pred_square.sum() - pred.sum())
        rows.append({"record_id": rid, "mask": dict(encode_rle(pred)), "padding_pixels": padding})
        rows_bare.append({"record_id": rid, "mask": dict(encode_rle(pred))})
        square_pairs.append((pred_square, _square(ref, side)))
        image_pairs.append((pred, ref))
    assert sum(r["padding_pixels"] > 0 for r in rows) >= 2
    path, bare = tmp_path / f"pred.{fmt}", tmp_path / f"bare.{fmt}"
    write_predictions(path, rows, with_answers=False, with_padding=True)
    write_predictions(bare, rows_bare, with_answers=False)
    report = evaluate_predictions(dataset, path, split="test")
    got, expected = report.official_protocol(), validate_restated(square_pairs)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert got["padding_pixels"] == sum(r["padding_pixels"] for r in rows)
    negatives = [r["padding_pixels"] for r, (_, ref) in zip(rows, image_pairs) if not ref.any()]
    assert 0 < sum(p > 0 for p in negatives) < len(negatives)
    # a negative with a pixel in the padding scores 0, the others 1 (up to the epsilon)
    assert got["giou_neg"] == pytest.approx(sum(p == 0 for p in negatives) / (len(negatives) + 1e-5), rel=1e-12)
    without = evaluate_predictions(dataset, bare, split="test")
    assert without.table4() == report.table4()  # ours: on the image only
    image_only = validate_restated(image_pairs)
    for key, value in image_only.items():
        assert without.official_protocol()[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    report.write(tmp_path / "rep")
    without.write(tmp_path / "rep_bare")
    assert "counted as false positives" in (tmp_path / "rep" / "report.md").read_text()
    assert "no padding_pixels column" in (tmp_path / "rep_bare" / "report.md").read_text()
    from typer.testing import CliRunner

    from cxrils.cli import app

    out = CliRunner().invoke(app, ["evaluate", "-d", str(dataset), "-p", str(path), "-o", str(tmp_path / "cli")])
    assert out.exit_code == 0, out.output
    assert f"giou_neg {100 * expected['giou_neg']:.1f}" in out.output
    assert f"false positives: {got['padding_pixels']} in {got['n_padded']} samples (padding_pixels)" in (out.output)


def test_padding_pixels_column_is_checked(dataset, tmp_path):
    import pandas as pd

    from cxrils.evaluation import EvaluationError

    recs = pd.concat([pd.read_parquet(p) for p in sorted((dataset / "records").glob("*.parquet"))])
    recs = recs[recs["split"] == "test"]
    rows = [
        {"record_id": rid, "mask": {"size": [int(v) for v in rle["size"]], "counts": rle["counts"]}}
        for rid, rle in zip(recs["record_id"], recs["mask"])
    ]
    for bad, message in ((-3, "must be >= 0"), (1.5, "must be an integer"), (True, "must be an integer")):
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join(json.dumps({**r, "padding_pixels": bad}) for r in rows) + "\n")
        with pytest.raises(EvaluationError, match=message):
            evaluate_predictions(dataset, path, split="test")
    table = pd.DataFrame([{**r, "padding_pixels": -1} for r in rows])
    with pytest.raises(EvaluationError, match="must be >= 0"):
        evaluate_predictions(dataset, table, split="test")
    # pandas stores an integer column with a null as floats: whole numbers and NaN are read
    floats = pd.DataFrame([{**r, "padding_pixels": None if k == 0 else 7} for k, r in enumerate(rows)])
    assert floats["padding_pixels"].dtype.kind == "f"
    got = evaluate_predictions(dataset, floats, split="test").official_protocol()
    assert (got["padding_pixels"], got["n_padded"]) == (7 * (len(rows) - 1), len(rows) - 1)
    with pytest.raises(EvaluationError, match="must be an integer"):
        evaluate_predictions(dataset, floats.assign(padding_pixels=2.5), split="test")
    huge = tmp_path / "huge.jsonl"
    huge.write_text("\n".join(json.dumps({**r, "padding_pixels": 10**20}) for r in rows) + "\n")
    with pytest.raises(EvaluationError, match="out of range"):
        evaluate_predictions(dataset, huge, split="test")
    nulls = tmp_path / "nulls.jsonl"
    nulls.write_text("\n".join(json.dumps({**r, "padding_pixels": None}) for r in rows) + "\n")
    assert evaluate_predictions(dataset, nulls, split="test").official_protocol()["padding_pixels"] == 0
    whole = tmp_path / "whole.jsonl"  # 3.0 reads as 3, as from Parquet or pandas
    whole.write_text("\n".join(json.dumps({**r, "padding_pixels": 3.0}) for r in rows) + "\n")
    assert evaluate_predictions(dataset, whole, split="test").official_protocol()["padding_pixels"] == 3 * len(rows)


def test_reports_written_before_the_padding_fields_still_load(tmp_path):
    acc = OfficialAccumulator()
    old = {k: v for k, v in acc.to_dict().items() if not k.endswith(("_padding", "_n_padded"))}
    assert len(old) == 8  # n, acc, inter, union of each group: a report written before the fields
    assert OfficialAccumulator.from_dict(old).metrics()["padding_pixels"] == 0
    # in-memory samples say what they carried, never that a column was missing
    report = evaluate([(np.zeros((2, 2), bool), np.zeros((2, 2), bool))])
    report.write(tmp_path / "mem")
    text = (tmp_path / "mem" / "report.md").read_text()
    assert "0 in 0 samples, those the samples carried" in text and "no padding_pixels column" not in text
    counted, bare = EvaluationReport({"padding_counted": True}), EvaluationReport({"padding_counted": False})
    counted.merge(bare)
    assert counted.metadata["padding_counted"] is False
    from cxrils.evaluation.counts import MaskCounts

    with pytest.raises(ValueError, match="padding_pixels must be >= 0"):
        acc.add(MaskCounts(0, 0, 0, 0), -1)
