"""Zones and lobes of the geometric rule: partitions, order, patient sides."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import AnatomyConfig
from cxrils.vision.anatomy import lung_regions
from cxrils.vocab import LEFT_ZONES, LUNG_REGION_LABELS, RIGHT_ZONES


def _ellipse(shape, centre, axes):
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    return ((rr - centre[0]) / axes[0]) ** 2 + ((cc - centre[1]) / axes[1]) ** 2 <= 1


@pytest.fixture()
def lungs():
    shape = (240, 200)
    right = _ellipse(shape, (120, 55), (90, 35))  # patient right = image left
    left = _ellipse(shape, (130, 145), (80, 30))
    return right, left


def _is_partition(parts, whole):
    total = np.zeros(whole.shape, dtype=int)
    for p in parts:
        total += p.astype(int)
    return bool(np.all(total == whole.astype(int)))


def test_every_label_present_and_bool(lungs):
    regions = lung_regions(*lungs, AnatomyConfig())
    assert set(regions) == set(LUNG_REGION_LABELS)
    for label, mask in regions.items():
        assert mask.dtype == bool and mask.shape == lungs[0].shape, label


def test_zones_and_lobes_partition_each_lung(lungs):
    right, left = lungs
    r = lung_regions(right, left, AnatomyConfig())
    assert _is_partition([r[z] for z in RIGHT_ZONES], right)
    assert _is_partition([r[z] for z in LEFT_ZONES], left)
    assert _is_partition([r["lung upper lobe right"], r["lung middle lobe right"], r["lung lower lobe right"]], right)
    assert _is_partition([r["lung upper lobe left"], r["lung lower lobe left"]], left)
    for z in RIGHT_ZONES + LEFT_ZONES:
        assert r[z].any(), z


def test_zones_ordered_apex_to_base(lungs):
    r = lung_regions(*lungs, AnatomyConfig())
    for zones in (RIGHT_ZONES, LEFT_ZONES):
        mean_rows = [np.nonzero(r[z])[0].mean() for z in zones]
        assert mean_rows == sorted(mean_rows)
        # bands do not interleave: each zone lies wholly below the previous one
        for upper, lower in zip(zones, zones[1:]):
            assert np.nonzero(r[upper])[0].max() < np.nonzero(r[lower])[0].min()


def test_zone_bounds_follow_config(lungs):
    right, left = lungs
    rows = np.flatnonzero(right.any(axis=1))
    height = rows[-1] - rows[0] + 1
    cfg = AnatomyConfig(zone_apical_end=0.25, zone_upper_end=0.5, zone_mid_end=0.75)
    r = lung_regions(right, left, cfg)
    apical_rows = np.flatnonzero(r["right apical zone lung"].any(axis=1))
    assert abs(len(apical_rows) - 0.25 * height) <= 1


def test_middle_lobe_is_medial_and_lingula_in_upper_lobe(lungs):
    right, left = lungs
    r = lung_regions(right, left, AnatomyConfig())
    middle_cols = np.nonzero(r["lung middle lobe right"])[1]
    lower_cols = np.nonzero(r["lung lower lobe right"] & ~r["right lung base"])[1]
    # medial side of the patient's right lung is towards the image's right (midline)
    assert middle_cols.mean() > lower_cols.mean()
    # the left upper lobe reaches below its horizontal band on the medial side (lingula)
    cfg = AnatomyConfig()
    rows = np.flatnonzero(left.any(axis=1))
    band_end = rows[0] + cfg.left_upper_lobe_end * (rows[-1] - rows[0] + 1)
    ling = r["lung upper lobe left"].copy()
    ling[: int(np.ceil(band_end))] = False
    assert ling.any()
    assert np.nonzero(ling)[1].mean() < np.nonzero(left)[1].mean()


def test_empty_lung_gives_empty_regions(lungs):
    right, _ = lungs
    r = lung_regions(right, np.zeros_like(right), AnatomyConfig())
    for label in LEFT_ZONES + ("lung upper lobe left", "lung lower lobe left", "left lung"):
        assert not r[label].any()
    assert r["right lung"].any()


def test_shape_mismatch_raises(lungs):
    with pytest.raises(ValueError, match="same shape|one shape"):
        lung_regions(lungs[0], lungs[1][:100], AnatomyConfig())
