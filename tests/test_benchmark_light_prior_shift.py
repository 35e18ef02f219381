"""benchmarks.light_prior_shift: which questions count as lung-level and the per-half counts."""

from __future__ import annotations

from benchmarks.light_prior_shift import is_lung_level, tally


def test_lung_level_questions_are_global_and_whole_lungs_only():
    assert is_lung_level([])  # the global question
    assert is_lung_level(["right lung"])
    assert is_lung_level(["right lung", "left lung"])
    assert not is_lung_level(["left lower zone"])
    assert not is_lung_level(["right lung", "left upper zone"])


def test_tally_counts_each_half_apart():
    rows = [
        # (half, positive, normal-image lung-level question, answered present)
        ("anomaly", False, True, False),  # normal lung question, absent: correct
        ("anomaly", False, True, True),  # normal lung question, present: wrong
        ("anomaly", False, False, False),  # a zone negative on a COVID image, absent
        ("anomaly", True, False, True),  # positive found
        ("detector", True, False, False),  # positive missed
        ("detector", False, True, True),
    ]
    got = tally(rows)
    assert got["anomaly"] == (1, 2, 2, 3, 1, 1)
    assert got["detector"] == (0, 1, 0, 1, 0, 1)
