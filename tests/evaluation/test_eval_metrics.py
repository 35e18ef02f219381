"""Metric definitions with hand-computed values (paper section 5)."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from cxrils.evaluation import (
    EvaluationReport,
    InvalidRLE,
    MaskSizeError,
    evaluate,
    mask_counts,
    rle_areas,
    rle_mask_counts,
)
from cxrils.masks import MaskError, encode_rle, rle_to_uncompressed_counts


def _pairs_10_exact_1000_half() -> list[tuple[np.ndarray, np.ndarray]]:
    ref_a = np.zeros((64, 64), bool)
    ref_a[3, 0:10] = True  # area 10, predicted exactly
    ref_b = np.zeros((64, 64), bool)
    ref_b[10:30, 0:50] = True  # area 1000
    pred_b = np.zeros((64, 64), bool)
    pred_b[10:20, 0:50] = True  # covers half of it, nothing outside
    return [(ref_a.copy(), ref_a), (pred_b, ref_b)]


@pytest.mark.parametrize("as_rle", [False, True])
def test_two_positives_hand_computed(as_rle: bool) -> None:
    pairs = _pairs_10_exact_1000_half()
    if as_rle:
        pairs = [(encode_rle(p), encode_rle(r)) for p, r in pairs]
    t4 = evaluate(pairs).table4()
    # IoUs 10/10 and 500/1000 -> gIoU (1 + 0.5) / 2; cIoU (10 + 500) / (10 + 1000)
    assert t4["gIoU"] == 0.75
    assert t4["cIoU"] == 510 / 1010
    assert (t4["intersection"], t4["union"]) == (510, 1010)
    assert (t4["n_positive"], t4["n_negative"], t4["n_acc"]) == (2, 0, None)


def test_always_empty_scores_zero_iou_and_full_n_acc() -> None:
    pos = _pairs_10_exact_1000_half()
    neg = [np.zeros((64, 64), bool)] * 3
    items = [(np.zeros_like(r), r) for _, r in pos] + [(np.zeros_like(n), n) for n in neg]
    t4 = evaluate(items).table4()
    assert (t4["gIoU"], t4["cIoU"], t4["n_acc"]) == (0.0, 0.0, 1.0)
    assert (t4["n_positive"], t4["n_negative"]) == (2, 3)


def test_any_foreground_pixel_on_a_negative_is_wrong() -> None:
    one = np.zeros((8, 8), bool)
    one[7, 7] = True
    t4 = evaluate([(one, np.zeros((8, 8), bool)), (np.zeros((8, 8)), np.zeros((8, 8)))]).table4()
    assert t4["n_acc"] == 0.5


def test_both_empty_is_never_nan() -> None:
    report = evaluate([(np.zeros((4, 4), bool), np.zeros((4, 4), bool))])
    t4 = report.table4()
    assert t4["gIoU"] is None and t4["cIoU"] is None and t4["n_acc"] == 1.0
    assert mask_counts(np.zeros((4, 4)), np.zeros((4, 4))).iou is None
    text = json.dumps(report.to_dict(), allow_nan=False)  # raises on NaN/inf
    assert "NaN" not in text and "nan" not in report.to_markdown().lower().replace("n/a", "")
    empty = EvaluationReport().table4()
    assert (empty["gIoU"], empty["cIoU"], empty["n_acc"], empty["text_accuracy"]) == (None, None, None, None)


def test_large_mask_counts_are_exact() -> None:
    # 4500 x 4500: counts beyond float32's exact range (2**24), summed over several pairs.
    ref = np.zeros((4500, 4500), bool)
    ref[:, :3000] = True  # 13,500,000 pixels
    pred = np.zeros((4500, 4500), bool)
    pred[:, 1500:] = True
    pred[0, 0] = True  # one extra pixel inside ref
    c = mask_counts(pred, ref)
    assert c.intersection == 4500 * 1500 + 1
    assert c.union == 4500 * 4500
    assert c.pred_area == 4500 * 3000 + 1 and c.ref_area == 4500 * 3000
    assert rle_mask_counts(encode_rle(pred), encode_rle(ref)) == c
    t4 = evaluate([(pred, ref)] * 3).table4()
    assert (t4["intersection"], t4["union"]) == (3 * (6_750_001), 3 * 20_250_000)
    assert t4["cIoU"] == 6_750_001 / 20_250_000


def test_rle_counts_match_array_counts_on_random_masks() -> None:
    rng = np.random.default_rng(0)
    for t in range(200):
        h, w = (int(v) for v in rng.integers(1, 50, 2))
        a = rng.random((h, w)) < rng.random()
        b = rng.random((h, w)) < rng.random()
        if t % 4 == 0:
            a[:] = False
        if t % 7 == 0:
            b[:] = True
        assert rle_mask_counts(encode_rle(a), encode_rle(b)) == mask_counts(a, b)
        c = mask_counts(a, b)
        assert c.intersection == int((a & b).sum()) and c.union == int((a | b).sum())
    masks = [rng.random((13, 17)) < p for p in np.linspace(0, 1, 30)]
    areas = rle_areas([encode_rle(m)["counts"] for m in masks], [13] * 30, [17] * 30)
    assert areas.tolist() == [int(m.sum()) for m in masks]


def test_mixed_rle_and_array_and_uncompressed_rle() -> None:
    a = np.zeros((5, 6), bool)
    a[1:3, 2:5] = True
    uncompressed = {"size": [5, 6], "counts": rle_to_uncompressed_counts(encode_rle(a))}
    assert sum(uncompressed["counts"]) == 30
    assert mask_counts(encode_rle(a), a) == mask_counts(a, a)
    assert rle_mask_counts(uncompressed, encode_rle(a)) == mask_counts(a, a)


def test_malformed_rle_is_an_error_not_a_hang() -> None:
    m = np.zeros((512, 512), bool)
    m[100:300, 50:200] = True
    good = encode_rle(m)
    truncated = {"size": [512, 512], "counts": good["counts"][:-2]}  # pycocotools' merge never returns on this
    with pytest.raises(MaskError, match="predicted mask"):
        rle_mask_counts(truncated, good)
    with pytest.raises(MaskError, match="characters"):
        rle_mask_counts({"size": [512, 512], "counts": "ab~"}, good)
    with pytest.raises(MaskError, match="ASCII"):
        rle_mask_counts({"size": [512, 512], "counts": good["counts"] + "é"}, good)
    with pytest.raises(InvalidRLE, match="ASCII"):
        rle_areas(["0", "é"], [0, 1], [0, 1])
    with pytest.raises(MaskError, match="cover"):
        rle_mask_counts({"size": [512, 511], "counts": good["counts"]}, {"size": [512, 511], "counts": good["counts"]})
    with pytest.raises(MaskSizeError):
        rle_mask_counts(encode_rle(np.zeros((4, 5), bool)), encode_rle(np.zeros((5, 4), bool)))
    with pytest.raises(MaskSizeError):
        mask_counts(np.zeros((4, 5), bool), np.zeros((5, 4), bool))
    with pytest.raises(MaskError):
        mask_counts(np.zeros((2, 2, 2)), np.zeros((2, 2, 2)))
    with pytest.raises(InvalidRLE) as info:
        rle_areas([good["counts"], good["counts"][:-2]], [512, 512], [512, 512])
    assert info.value.index == 1


def test_order_and_grouping_change_nothing_and_gIoU_is_the_exact_mean() -> None:
    rng = np.random.default_rng(1)
    items = []
    for _ in range(120):
        ref = rng.random((9, 11)) < 0.4
        pred = rng.random((9, 11)) < 0.4
        if rng.random() < 0.3:
            ref[:] = False
        items.append((pred, ref))
    base = evaluate(items)
    exact = [Fraction(c.intersection / c.union) for c in (mask_counts(p, r) for p, r in items) if c.ref_area]
    assert base.table4()["gIoU"] == float(sum(exact) / len(exact))
    for seed in range(5):
        shuffled = items[:]
        random.Random(seed).shuffle(shuffled)
        assert evaluate(shuffled).to_dict() == base.to_dict()
        # split into arbitrary batches, evaluate separately and merge
        cut = sorted(random.Random(seed).sample(range(1, len(items)), 4))
        merged = EvaluationReport()
        for lo, hi in zip([0, *cut], [*cut, len(items)]):
            merged.merge(evaluate(shuffled[lo:hi]))
        assert merged.to_dict() == base.to_dict()
    naive = math.fsum(float(f) for f in exact) / len(exact)
    assert abs(naive - base.table4()["gIoU"]) < 1e-12


def test_batch_size_changes_nothing_and_errors_name_the_item() -> None:
    rng = np.random.default_rng(2)
    items = []
    for k in range(40):
        ref = rng.random((12, 10)) < (0.5 if k % 3 else 0.0)
        pred = rng.random((12, 10)) < 0.3
        items.append((encode_rle(pred), encode_rle(ref)) if k % 2 else (pred, ref))
    base = evaluate(items).to_dict()
    for batch_size in (1, 3, 7, 1000):
        assert evaluate(items, batch_size=batch_size).to_dict() == base
    bad = items[:]
    bad[5] = (bad[5][0], {"size": [12, 10], "counts": bad[5][1]["counts"][:-1]})
    for batch_size in (2, 1000):
        with pytest.raises(MaskError, match="item 5: reference mask"):
            evaluate(bad, batch_size=batch_size)
    with pytest.raises(MaskSizeError, match="item 1:"):
        evaluate([items[0], (encode_rle(np.zeros((3, 3))), encode_rle(np.zeros((4, 3))))])


def test_report_json_round_trip_and_merge() -> None:
    rng = np.random.default_rng(3)
    items = [(rng.random((6, 6)) < 0.5, rng.random((6, 6)) < (0.5 if k % 4 else 0.0)) for k in range(30)]
    whole = evaluate(items)
    halves = [
        EvaluationReport.from_dict(json.loads(json.dumps(evaluate(part).to_dict())))
        for part in (items[:11], items[11:])
    ]
    halves[0].merge(halves[1])
    assert halves[0].to_dict() == whole.to_dict()
    with pytest.raises(ValueError, match="not a cxrils-evaluation/1 report"):
        EvaluationReport.from_dict({"cells": []})


def test_probability_maps_are_refused_not_binarised() -> None:
    from cxrils.evaluation.counts import mask_counts

    ref = np.zeros((4, 4), bool)
    with pytest.raises(MaskError, match="probability map"):
        mask_counts(np.full((4, 4), 0.2, np.float32), ref)
    assert mask_counts(np.zeros((4, 4), np.float32), ref).pred_area == 0


def _rect(r0: int, r1: int, c0: int, c1: int, shape=(10, 10)) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[r0:r1, c0:c1] = True
    return m


def test_pair_scores_hand_computed() -> None:
    from cxrils.evaluation import mask_dice, mask_iou, mask_precision

    p = _rect(0, 4, 0, 5)  # 20 px
    r = _rect(2, 6, 0, 5)  # 20 px, rows 2-3 shared: 10 px; union 30
    assert mask_iou(p, r) == 10 / 30
    assert mask_dice(p, r) == 2 * 10 / 40
    assert mask_precision(p, r) == 10 / 20
    inner = _rect(0, 2, 0, 2)  # 4 px inside p
    assert (mask_iou(inner, p), mask_precision(inner, p), mask_precision(p, inner)) == (4 / 20, 1.0, 4 / 20)
    assert mask_dice(inner, p) == 8 / 24
    # disjoint masks score 0, whichever is empty
    far = _rect(8, 10, 8, 10)
    assert (mask_iou(p, far), mask_dice(p, far), mask_precision(p, far)) == (0.0, 0.0, 0.0)
    none = np.zeros((10, 10), bool)
    assert (mask_iou(none, r), mask_dice(none, r), mask_precision(none, r), mask_precision(r, none)) == (0, 0, 0, 0)
    # both empty: the stated convention, 0.0 unless asked otherwise
    assert (mask_iou(none, none), mask_dice(none, none), mask_precision(none, none)) == (0.0, 0.0, 0.0)
    assert (mask_iou(none, none, empty=1.0), mask_dice(none, none, empty=1.0)) == (1.0, 1.0)
    # numeric masks (non-zero = foreground) and RLE give the same counts
    assert mask_iou(p.astype(np.uint8) * 255, encode_rle(r)) == 10 / 30
    with pytest.raises(MaskSizeError):
        mask_iou(p, np.zeros((10, 11), bool))


def test_histogram_auroc_hand_computed() -> None:
    from cxrils.evaluation import histogram_auroc

    # positives at bins 1, 2, 2; negatives at bins 0, 1: pairs (pos > neg) count 1, ties 1/2
    # bin 1 vs {0: win, 1: tie} = 1.5; each bin 2 vs both = 2 -> (1.5 + 2 + 2) / (3 * 2)
    assert histogram_auroc([0, 1, 2], [1, 1, 0]) == 5.5 / 6
    assert histogram_auroc([0, 0, 3], [2, 0, 0]) == 1.0
    assert histogram_auroc([3, 0, 0], [0, 0, 2]) == 0.0
    assert histogram_auroc([1, 1], [1, 1]) == 0.5  # same distribution
    assert histogram_auroc([0, 0], [1, 1]) == 0.0 and histogram_auroc([1, 1], [0, 0]) == 0.0  # no pair
    # equals the AUROC over the scores themselves (every positive-negative pair)
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 256, 500), rng.integers(0, 256, 700)
    pairs = (pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()
    got = histogram_auroc(np.bincount(pos, minlength=256), np.bincount(neg, minlength=256))
    assert got == pytest.approx(pairs / (500 * 700), abs=1e-12)


def test_region_pixel_auroc_hand_computed() -> None:
    from cxrils.evaluation import region_pixel_auroc

    score = np.array([[0.9, 0.5, 0.5, 0.2, 0.95]])
    lesion = np.array([[True, True, False, False, True]])
    region = np.array([[True, True, True, True, False]])  # the last pixel (a lesion) lies outside
    # lesion 0.9, 0.5 against other 0.5, 0.2: pairs (0.9 > 0.5), (0.9 > 0.2), (0.5 = 0.5: 1/2), (0.5 > 0.2)
    assert region_pixel_auroc(score, lesion, region) == 3.5 / 4
    # two bins ([0, 0.5) and [0.5, 1]): 0.9 and 0.5 share a bin with the other 0.5 -> 2 ties
    assert region_pixel_auroc(score, lesion, region, n_bins=2) == 3.0 / 4
    assert region_pixel_auroc(score, lesion & False, region) == 0.0  # no lesion pixel in the region


def test_region_pixel_auroc_refuses_bad_input() -> None:
    from cxrils.evaluation import region_pixel_auroc

    score, mask = np.array([[0.9, 0.1]]), np.array([[True, False]])
    with pytest.raises(ValueError, match="differ in shape"):
        region_pixel_auroc(score, mask, np.ones((1, 3), bool))
    with pytest.raises(ValueError, match="n_bins must be at least 1"):
        region_pixel_auroc(score, mask, mask | True, n_bins=0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        region_pixel_auroc(np.array([[0.9, np.nan]]), mask, mask | True)
    # a NaN outside the region is not scored
    assert (
        region_pixel_auroc(
            np.array([[0.9, 0.1, np.nan]]), np.array([[True, False, False]]), np.array([[True, True, False]])
        )
        == 1.0
    )


def test_a_malformed_item_is_named_with_its_index_and_length():
    # a trial (stop 62): "got tuple" named neither the item nor what was wrong with it
    m = np.zeros((4, 4), bool)
    with pytest.raises(TypeError, match=r"item 1: .*got a tuple of 3"):
        evaluate([(m, m), (m, m, "[SEG]")])
