"""Cardiothoracic ratio and the Appendix D.2 cross-check on hand-made masks."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import AnatomyConfig, QCConfig
from cxrils.vision.anatomy import cardiothoracic_ratio, cross_check
from cxrils.vision.anatomy.base import assemble


def _masks(shape=(200, 200), right=(40, 160, 20, 90), left=(40, 160, 110, 180), heart=(100, 170, 70, 130), backend="a"):
    def box(r0, r1, c0, c1):
        m = np.zeros(shape, dtype=bool)
        m[r0:r1, c0:c1] = True
        return m

    return assemble(box(*right), box(*left), box(*heart), AnatomyConfig(), backend, "test")


def test_ctr_is_heart_width_over_thoracic_width():
    m = _masks()
    # heart columns 70..129 (60 px); lungs from 20 to 179 (160 px)
    assert cardiothoracic_ratio(m) == pytest.approx(60 / 160)


def test_ctr_uses_maximal_widths_on_different_rows():
    m = _masks()
    m.masks["heart"][160, 60] = True  # a wider heart row elsewhere
    m.masks["left lung"][50, 190] = True  # a wider thoracic row elsewhere
    assert cardiothoracic_ratio(m) == pytest.approx(70 / 171)


def test_ctr_rule_threshold_comes_from_config():
    assert QCConfig().ctr_max_cardiomegaly_negative == 0.45
    big = _masks(heart=(100, 170, 40, 150))
    assert cardiothoracic_ratio(big) > QCConfig().ctr_max_cardiomegaly_negative


def test_ctr_empty_heart_or_lungs_raises():
    m = _masks()
    m.masks["heart"][:] = False
    with pytest.raises(ValueError, match="heart"):
        cardiothoracic_ratio(m)
    m = _masks()
    m.masks["right lung"][:] = False
    m.masks["left lung"][:] = False
    with pytest.raises(ValueError, match="lung"):
        cardiothoracic_ratio(m)


def test_cross_check_consistent_and_resolution_independent():
    a = _masks()
    b = _masks(
        shape=(400, 400), right=(80, 320, 42, 180), left=(80, 320, 220, 358), heart=(200, 342, 140, 260), backend="b"
    )
    assert cross_check(a, b, QCConfig()) is None


def test_cross_check_flags_lung_x_and_heart_y():
    a = _masks()
    wide = _masks(left=(40, 160, 110, 198), backend="b")  # outer left edge moves 18 px = 0.09
    reason = cross_check(a, wide, QCConfig())
    assert reason is not None and "left lung outermost x" in reason and "'b'" in reason
    low = _masks(heart=(100, 190, 70, 130), backend="b")  # heart bottom moves 20 px = 0.10
    reason = cross_check(a, low, QCConfig())
    assert reason is not None and "heart lowest y" in reason
    # a looser tolerance accepts the same pair
    assert cross_check(a, low, QCConfig(crosscheck_heart_y_tol=0.2)) is None


def test_cross_check_empty_mask_is_a_reason():
    a = _masks()
    b = _masks(backend="b")
    b.masks["heart"][:] = False
    assert "heart mask empty in 'b'" in cross_check(a, b, QCConfig())


def test_lungs_sharing_columns_are_not_frontal():
    """Side-by-side boxes pass; the same lungs shifted to overlap in 30 of their 70
    columns (as the two lung fields of a lateral view) fail on the column check, whose
    bound is qc.plausible_lung_column_overlap_max_fraction."""
    from cxrils.vision.anatomy import frontal_plausibility

    qc = QCConfig()
    assert frontal_plausibility(_masks(), qc) is None
    overlapping = _masks(right=(40, 160, 20, 90), left=(40, 160, 60, 130), heart=(100, 170, 58, 92))
    reason = frontal_plausibility(overlapping, qc)
    assert reason is not None and reason.startswith("the lungs overlap in 0.43 of their columns"), reason
    qc.plausible_lung_column_overlap_max_fraction = 0.5
    assert not (frontal_plausibility(overlapping, qc) or "").startswith("the lungs overlap")
