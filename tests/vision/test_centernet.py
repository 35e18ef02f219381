"""CenterNet targets, decoding, NMS and average precision, checked by hand."""

from __future__ import annotations

import math

import pytest

from cxrils.vision.detection import centernet as cn


def test_targets_put_the_centre_size_and_offset_in_the_centre_cell():
    t = cn.targets([(8.0, 12.0, 40.0, 28.0)], grid=16)  # centre (24, 20) px = cell (6, 5); 8 x 4 cells
    assert t["heatmap"].shape == (1, 16, 16)
    assert t["heatmap"][0, 5, 6] == 1.0 and (t["heatmap"] == 1.0).sum() == 1
    assert t["heatmap"][0, 5, 7] < 1.0 and t["heatmap"][0, 5, 7] > t["heatmap"][0, 5, 10] > t["heatmap"][0, 0, 0]
    assert t["mask"][5, 6] == 1.0 and t["mask"].sum() == 1
    assert t["size"][:, 5, 6] == pytest.approx([math.log(8), math.log(4)])
    assert t["offset"][:, 5, 6] == pytest.approx([0.0, 0.0])
    t2 = cn.targets([(8.0, 12.0, 42.0, 30.0)], grid=16)  # centre (25, 21) px = (6.25, 5.25) cells
    assert t2["offset"][:, 5, 6] == pytest.approx([0.25, 0.25])


def test_decode_recovers_the_boxes_of_perfect_outputs():
    boxes = [(8.0, 12.0, 40.0, 28.0), (30.0, 36.0, 60.0, 62.0)]
    t = cn.targets(boxes, grid=16)
    found = cn.decode(t["heatmap"], t["size"], t["offset"], min_score=0.99, max_boxes=10)
    assert len(found) == 2
    for got in found:
        assert max(cn.box_iou(got, b) for b in boxes) == pytest.approx(1.0)
    assert cn.decode(t["heatmap"] * 0.5, t["size"], t["offset"], min_score=0.6, max_boxes=10) == []
    assert len(cn.decode(t["heatmap"], t["size"], t["offset"], min_score=0.99, max_boxes=1)) == 1


def test_loss_is_lower_for_the_right_prediction():
    import torch

    t = cn.targets([(8.0, 12.0, 40.0, 28.0)], grid=16)
    tgt = {k: torch.from_numpy(v)[None] for k, v in t.items()}
    good = {
        "heatmap": torch.logit(torch.from_numpy(t["heatmap"]).clamp(1e-3, 1 - 1e-3))[None],
        "size": tgt["size"].clone(),
        "offset": tgt["offset"].clone(),
    }
    bad = {"heatmap": torch.zeros(1, 1, 16, 16), "size": torch.zeros(1, 2, 16, 16), "offset": torch.zeros(1, 2, 16, 16)}
    assert float(cn.loss(good, tgt)) < 0.1 * float(cn.loss(bad, tgt))


def test_box_iou_and_nms():
    a, b, c = (0, 0, 10, 10, 0.9, 0), (5, 0, 15, 10, 0.8, 0), (0, 0, 10, 10, 0.7, 1)
    assert cn.box_iou(a, b) == pytest.approx(50 / 150)
    assert cn.nms([a, b, c], 0.3) == [a, c]  # b overlaps a by 1/3; c is another class
    assert cn.nms([a, b, c], 0.5) == [a, b, c]


def test_average_precision_by_hand():
    truth = [[(0, 0, 10, 10)], [(0, 0, 10, 10)], []]
    perfect = [[(0, 0, 10, 10, 0.9)], [(0, 0, 10, 10, 0.8)], []]
    assert cn.average_precision(perfect, truth) == pytest.approx(1.0)
    # a false positive on the normal image ranked first: precision 0, 1/2, 2/3 at recall
    # 0, .5, 1; the all-point envelope lifts recall .5 to the best precision beyond, 2/3
    fp_first = [[(0, 0, 10, 10, 0.9)], [(0, 0, 10, 10, 0.8)], [(0, 0, 10, 10, 0.95)]]
    assert cn.average_precision(fp_first, truth) == pytest.approx(2 / 3)
    # ranked last it costs nothing: recall 1 is reached at precision 1
    fp_last = [[(0, 0, 10, 10, 0.9)], [(0, 0, 10, 10, 0.8)], [(0, 0, 10, 10, 0.1)]]
    assert cn.average_precision(fp_last, truth) == pytest.approx(1.0)
    # a duplicate detection of one truth counts once
    dup = [[(0, 0, 10, 10, 0.9), (0, 0, 10, 10, 0.85)], [], []]
    assert cn.average_precision(dup, truth) == pytest.approx(0.5)
    assert cn.average_precision(perfect, [[], [], []]) == 0.0
