"""Constants that change the generated dataset live in Config: overridable (and so
recorded with the run and part of the resume check), not module literals."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import ConfigError, load_config
from cxrils.grounding.algorithm import algorithm1, refine
from cxrils.types import LesionBox
from cxrils.vision.anatomy.preprocess import prepare


def _lungs(shape=(200, 200)):
    right = np.zeros(shape, bool)
    left = np.zeros(shape, bool)
    right[20:180, 10:95] = True  # patient's right lung on the image's left
    left[20:180, 105:190] = True
    return right, left


def test_refinement_pixel_sizes_scale_from_config_reference_size() -> None:
    # A 3 x 3 speck survives an opening of radius 1 but not of radius 2 (disk of 5 x 5).
    # At reference_size_px = 512 on a 200 px image, open_radius_px = 2 scales to
    # round(2 * 200 / 512) = 1; at reference_size_px = 100 it scales to 4.
    x = np.full((200, 200), 100, np.uint8)
    right, left = _lungs()
    speck = np.zeros((200, 200), bool)
    speck[100:103, 50:53] = True
    cfg = load_config(None, ["grounding.grow_iterations=0"]).grounding
    assert refine(speck, x, right, left, "opacity", cfg).any()
    small = load_config(None, ["grounding.grow_iterations=0", "grounding.reference_size_px=100"]).grounding
    assert not refine(speck, x, right, left, "opacity", small).any()


def test_connectivity_is_a_config_choice() -> None:
    # Two anomaly pixels that touch only diagonally: one component with 8-connectivity,
    # two with 4-connectivity; the box touches only the first pixel.
    x = np.full((200, 200), 100, np.uint8)
    right, left = _lungs()
    anomaly = np.zeros((200, 200), bool)
    anomaly[60:70, 40:50] = True
    anomaly[70:80, 50:60] = True  # meets the first block at one corner
    box = LesionBox(38.0, 58.0, 50.0, 70.0, 0.9, "Lung Opacity")
    overrides = ["grounding.grow_iterations=0", "grounding.open_radius_px=0", "grounding.tau_size=0.0",
                 "grounding.tau_anatomy=0.0"]
    eight = load_config(None, overrides).grounding
    four = load_config(None, overrides + ["grounding.connectivity=4"]).grounding
    m8 = algorithm1(x, anomaly, right, right, left, [box], "opacity", eight).mask
    m4 = algorithm1(x, anomaly, right, right, left, [box], "opacity", four).mask
    assert int(m8.sum()) == 200 and int(m4.sum()) == 100
    with pytest.raises(ConfigError, match="connectivity"):
        load_config(None, ["grounding.connectivity=6"])


def test_anatomy_clahe_settings_come_from_config() -> None:
    rng = np.random.default_rng(0)
    # Tiles of 50 x 60 pixels: large enough for the clip limit to matter (OpenCV clips at
    # max(1, clip_limit * tile pixels / 256)).
    x = (rng.random((400, 480)) * 60 + 80).astype(np.uint8)
    default, _ = prepare(x, 400)
    same, _ = prepare(x, 400, load_config().anatomy)
    np.testing.assert_array_equal(default, same)  # the defaults are the shipped weights' settings
    other, _ = prepare(x, 400, load_config(None, ["anatomy.clahe_clip_limit=8.0"]).anatomy)
    grid, _ = prepare(x, 400, load_config(None, ["anatomy.clahe_tile_grid=2"]).anatomy)
    assert not np.array_equal(default, other) and not np.array_equal(default, grid)
    with pytest.raises(ConfigError, match="clahe_tile_grid"):
        load_config(None, ["anatomy.clahe_tile_grid=0"])
