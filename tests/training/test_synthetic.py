"""Synthetic findings of :mod:`cxrils.training.synthetic`: geometry checked against what
the finding is radiologically (an upright effusion fills the base and rises at the chest
wall; an enlarged heart widens while the thorax does not), on simple lungs whose answer
is known by construction."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from cxrils.config import SyntheticConfig
from cxrils.training import synthetic

H, W = 120, 160


def _lungs() -> tuple[np.ndarray, np.ndarray]:
    """Two rectangular lungs; the patient's right lung on the image's left."""
    right = np.zeros((H, W), dtype=bool)
    left = np.zeros((H, W), dtype=bool)
    right[10:100, 15:70] = True
    left[10:100, 90:145] = True
    return right, left


def _surface(region: np.ndarray, col: int) -> int:
    """Top row of the region in one column."""
    return int(np.flatnonzero(region[:, col])[0])


@pytest.mark.parametrize("side", ["right", "left"])
def test_effusion_fills_the_base_and_rises_at_the_chest_wall(side):
    right, left = _lungs()
    lung = right if side == "right" else left
    cfg = SyntheticConfig(effusion_height=(0.2, 0.2), effusion_meniscus=(0.1, 0.1))
    region = synthetic.effusion_region(lung, side, np.random.default_rng(0), cfg)
    assert region.any() and not (region & ~lung).any()
    cols = np.flatnonzero(lung.any(axis=0))
    lateral, medial = (cols[0], cols[-1]) if side == "right" else (cols[-1], cols[0])
    # lung rows 10..99 (90 rows): surface 0.2 * 90 = 18 rows above the base at the medial
    # edge, and a further 0.1 * 90 = 9 rows higher at the lateral edge (the meniscus)
    assert _surface(region, medial) == pytest.approx(99 - 18, abs=1.5)
    assert _surface(region, lateral) == pytest.approx(99 - 27, abs=1.5)
    assert region[99, cols].all()  # the whole base row, costophrenic angle included


def test_small_effusion_blunts_only_the_costophrenic_angle():
    right, _ = _lungs()
    cfg = SyntheticConfig(effusion_height=(0.0, 0.0), effusion_meniscus=(0.1, 0.1))
    region = synthetic.effusion_region(right, "right", np.random.default_rng(0), cfg)
    depth = region.sum(axis=0)
    assert depth[15] >= 9 and depth[69] <= 1  # 0.1 * 90 rows at the chest wall, none medially
    assert not region[:90].any()  # nothing above the surface at the chest wall (row 99 - 9)


def test_effusion_of_an_empty_lung_is_empty_and_side_is_checked():
    cfg = SyntheticConfig()
    assert not synthetic.effusion_region(np.zeros((H, W), bool), "left", np.random.default_rng(0), cfg).any()
    with pytest.raises(ValueError, match="side"):
        synthetic.effusion_region(_lungs()[0], "image left", np.random.default_rng(0), cfg)


def test_blob_and_band_stay_in_the_lung_with_the_drawn_area():
    right, _ = _lungs()
    cfg = SyntheticConfig(blob_area=(0.2, 0.2))
    for seed in range(5):
        blob = synthetic.blob_region(right, np.random.default_rng(seed), cfg)
        assert not (blob & ~right).any()
        assert blob.sum() / right.sum() == pytest.approx(0.2, abs=0.02)
        band = synthetic.band_region(right, np.random.default_rng(seed), cfg)
        assert band.any() and not (band & ~right).any()
        assert np.flatnonzero(band.any(axis=1))[0] >= 10 + 0.5 * 90 - 0.08 * 90 - 10  # lower half


def test_add_density_brightens_the_region_only():
    image = np.full((H, W), 0.2, dtype=np.float32)
    image[100:] = 0.9  # the abdomen below the lungs sets the soft-tissue level (90th percentile)
    right, _ = _lungs()
    region = np.zeros_like(right)
    region[60:90, 30:60] = True
    out = synthetic.add_density(image, region, np.random.default_rng(0), SyntheticConfig())
    assert out.dtype == np.float32 and out.min() >= 0 and out.max() <= 1
    assert out[75, 45] > 0.5  # inside: drawn towards 0.9
    assert np.allclose(out[:40], image[:40]) and np.allclose(out[:, 100:], image[:, 100:])  # far away: unchanged
    assert np.array_equal(image[0, 10], np.float32(0.2))  # the input is not modified


def test_heart_warp_widens_the_heart_and_keeps_the_thorax():
    heart = np.zeros((H, W), dtype=bool)
    heart[50:90, 65:95] = True
    map_x, map_y = synthetic.heart_warp((H, W), heart, 1.3)
    warped = cv2.remap(heart.astype(np.float32), map_x, map_y, cv2.INTER_LINEAR) > 0.5
    cols = np.flatnonzero(warped[70])
    assert cols[-1] - cols[0] + 1 == pytest.approx(30 * 1.3, abs=2)  # widest row: x 1.3
    assert map_x[70, 0] == pytest.approx(0, abs=1e-3) and map_x[70, -1] == pytest.approx(W - 1, abs=1e-3)
    assert np.all(np.diff(map_x, axis=1) > 0)  # monotone: nothing folds over
    assert np.allclose(map_y, np.arange(H)[:, None])  # rows do not move
    same_x, _ = synthetic.heart_warp((H, W), heart, 1.0)
    assert np.allclose(same_x, np.arange(W)[None, :])


def test_draw_lesions_returns_the_drawn_region_inside_the_lungs():
    right, left = _lungs()
    image = np.full((H, W), 0.3, dtype=np.float32)
    image[100:] = 0.9  # the abdomen
    for seed in range(6):
        out, region = synthetic.draw_lesions(image, right, left, np.random.default_rng(seed), SyntheticConfig())
        assert region.any() and not (region & ~(right | left)).any()
        assert out[region].mean() > image[region].mean() + 0.1
