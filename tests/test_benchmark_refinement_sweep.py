"""The refinement sweep's summary and choice rule, on hand-made numbers."""

from __future__ import annotations

import math

import pytest

from benchmarks.refinement_sweep import GRID, RECALL_SLACK, choose, summarise


def test_summarise_by_hand():
    # three images: two generated (IoU 0.5 and 0.7; whole lung 0.4 and 0.6), one not (whole lung 0.9)
    row = summarise(GRID[0], [(0.5, 0.4), (0.7, 0.6), (None, 0.9)])
    assert row["n"] == 3 and row["generated"] == 2
    assert math.isclose(row["recall"], 200 / 3)
    assert math.isclose(row["iou"], 60.0) and math.isclose(row["wl"], 50.0) and math.isclose(row["margin"], 10.0)
    assert math.isclose(row["iou_all"], 40.0)  # (0.5 + 0.7 + 0) / 3


def test_choice_keeps_recall_within_one_point_of_the_shipped_setting():
    assert RECALL_SLACK == 1.0 and len(set(GRID)) == len(GRID)
    shipped = {"recall": 85.0, "margin": 4.0}
    lossy = {"recall": 83.9, "margin": 9.0}  # more than one point of recall lost: not eligible
    within = {"recall": 84.0, "margin": 5.0}
    assert choose([shipped, lossy, within]) is within
    assert choose([shipped, lossy]) is shipped
    with pytest.raises(ValueError, match="no settings"):
        choose([])
