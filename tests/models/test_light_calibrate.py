"""Threshold choice of the light model on the validation split (calibrate.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.models.light.calibrate import choose_thresholds, n_acc_lower_bound


def _case():
    """4 positives (a 4x4 square, probabilities 0.9 inside, 0.35 on a ring around it) and
    6 negatives (one blob of 0.8); presence scores overlap between the classes."""
    s = 16
    ref = np.zeros((10, s, s), bool)
    prob = np.full((10, s, s), 0.05, np.float32)
    for i in range(4):
        ref[i, 4:8, 4:8] = True
        prob[i, 3:9, 3:9] = 0.35
        prob[i, 4:8, 4:8] = 0.9
    for i in range(4, 10):
        prob[i, 10:12, 10:12] = 0.8
    presence = np.array([0.9, 0.8, 0.7, 0.3, 0.75, 0.2, 0.1, 0.1, 0.05, 0.05], np.float32)
    return presence, prob, ref


def test_choice_meets_n_acc_and_maximises_giou():
    presence, prob, ref = _case()
    c = choose_thresholds(presence, prob, ref, min_n_acc=0.80)
    # N-Acc >= 0.8 allows one negative above tau_presence (the 0.75 one), so tau_presence in
    # (0.2, 0.3] keeps all four positives; the best tau_mask excludes the 0.35 ring
    assert 0.2 < c["tau_presence"] <= 0.3 and c["tau_mask"] > 0.35
    assert c["constraint_met"] and c["n_acc"] == pytest.approx(5 / 6)
    assert c["gIoU"] == pytest.approx(1.0) and c["cIoU"] == pytest.approx(1.0)
    strict = choose_thresholds(presence, prob, ref, min_n_acc=1.0)  # every negative must be empty
    assert strict["tau_presence"] > 0.75 and strict["n_acc"] == 1.0
    assert strict["gIoU"] == pytest.approx(2 / 4)


def test_unreachable_target_falls_back_to_giou_plus_n_acc():
    presence, prob, ref = _case()
    presence[4:] = 0.95  # every negative scores above every positive
    c = choose_thresholds(presence, prob, ref, min_n_acc=1.01)
    assert not c["constraint_met"]
    assert c["gIoU"] + c["n_acc"] >= 1.0  # at least as good as calling everything absent


def test_needs_both_classes():
    presence, prob, ref = _case()
    with pytest.raises(ValueError, match="positive and negative"):
        choose_thresholds(presence[4:], prob[4:], ref[4:], 0.9)


def test_ties_in_giou_go_to_the_higher_n_acc():
    presence, prob, ref = _case()
    presence[4:] = [0.15, 0.12, 0.05, 0.05, 0.05, 0.05]
    c = choose_thresholds(presence, prob, ref, min_n_acc=0.5)
    # every tau_presence <= 0.3 keeps the four positives (gIoU 1.0); those <= 0.15 also let
    # negatives through, so of the tied pairs the one above 0.15 must win
    assert c["gIoU"] == pytest.approx(1.0) and c["n_acc"] == pytest.approx(1.0)
    assert 0.15 < c["tau_presence"] <= 0.3


def test_wilson_lower_bound_and_confident_constraint():
    # hand-computed Wilson score bound: p = 0.9, n = 100, z = 1.6449 (one-sided 95 %)
    z, n, p = 1.6448536, 100, 0.9
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert n_acc_lower_bound(90, 100, 0.95) == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-6)
    assert n_acc_lower_bound(90, 100, 0.0) == pytest.approx(0.9)
    presence, prob, ref = _case()
    loose = choose_thresholds(presence, prob, ref, min_n_acc=0.60)
    strict = choose_thresholds(presence, prob, ref, min_n_acc=0.60, confidence=0.95)
    # 6 negatives: the bound is 0.69 for 6/6 and 0.49 for 5/6, so only all 6 empty pass
    assert strict["n_acc"] == 1.0 and strict["n_acc_lower"] == pytest.approx(0.689, abs=1e-3)
    assert loose["constraint_met"] and loose["n_acc"] < 1.0
