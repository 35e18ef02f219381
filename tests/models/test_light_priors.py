"""Anatomy and anomaly priors of the light model (cxrils.models.light.priors)."""

from __future__ import annotations

import numpy as np
import pytest
from light_synthetic import H, W, block_anatomy, bright_anomaly, disc_mask

from cxrils import templates
from cxrils.models.light.config import LightConfig
from cxrils.models.light.priors import (
    PRIOR_CHANNELS,
    PRIOR_LABELS,
    WORK_SIDE,
    PackedMasks,
    PriorComputer,
    prior_channels,
    reduce_image,
    region_labels,
)
from cxrils.types import AnatomyMasks


def _parsed(text: str) -> templates.ParsedText:
    return templates.parse_instruction(text)


def test_region_labels_follow_the_instruction():
    assert region_labels(_parsed("Segment the effusion in the left lung base.")) == ("left lung base",)
    assert set(region_labels(_parsed("Segment the opacity in the right lung base and left mid zone lung."))) == {
        "right lung base",
        "left mid zone lung",
    }
    assert region_labels(_parsed("Segment the edema.")) == ("right lung", "left lung")
    assert region_labels(_parsed("Segment the cardiomegaly.")) == ("heart",)
    assert region_labels(None) == ("right lung", "left lung")


def test_reduce_image_keeps_aspect_and_small_images():
    x = np.zeros((1000, 800), np.uint8)
    assert reduce_image(x).shape == (WORK_SIDE, round(800 * WORK_SIDE / 1000))
    small = np.zeros((H, W), np.uint8)
    assert reduce_image(small) is small


def test_prior_channels_mark_the_named_region_and_the_anomaly():
    x = np.zeros((H, W), np.uint8)
    disc = disc_mask("left lung base")
    x[disc] = 255
    priors = PriorComputer(block_anatomy, bright_anomaly).priors(x)
    maps = prior_channels(priors, _parsed("Segment the effusion in the left lung base."), 32)
    assert maps.shape == (len(PRIOR_CHANNELS) - 1, 32, 32) and maps.dtype == np.float32  # no boxes asked
    region, lungs, x_ano = maps
    with_boxes = prior_channels(priors, _parsed("Segment the effusion in the left lung base."), 32, boxes=True)
    assert with_boxes.shape == (len(PRIOR_CHANNELS), 32, 32) and with_boxes[3].max() == 0.0  # no detector: zeros
    # block anatomy: patient left lung = image right half, base = bottom quarter
    assert region[28:, 20:].min() == pytest.approx(1.0) and region[:20].max() == 0.0 and region[:, :12].max() == 0.0
    assert lungs.min() == pytest.approx(1.0)
    assert x_ano[28, 24] > 0.9 and x_ano[4, 4] == 0.0
    other = prior_channels(priors, _parsed("Segment the effusion in the right lung base."), 32)[0]
    assert other[28:, :12].min() == pytest.approx(1.0) and other[:, 20:].max() == 0.0


def test_priors_are_cached_per_image():
    calls = []

    def anatomy(x):
        calls.append(x.shape)
        return block_anatomy(x)

    pc = PriorComputer(anatomy, bright_anomaly)
    x = np.zeros((H, W), np.uint8)
    a = pc.priors(x)
    assert pc.priors(x.copy()) is a  # same pixels, same key
    assert pc.priors(x, key="img1") is not a
    assert len(calls) == 2
    assert pc.priors(x, with_anomaly=False) is a  # anatomy-only requests reuse full priors
    for i in range(20):  # a hit is "recently used": it survives while others are added
        pc.priors(x)
        pc.priors(np.full((H, W), i + 1, np.uint8))
    assert pc.priors(x) is a


def test_packed_masks_round_trip_and_failing_anomaly_stage():
    m = block_anatomy(np.zeros((H, W), np.uint8))
    packed = PackedMasks({lb: m[lb] for lb in PRIOR_LABELS}, m.shape)
    for lb in PRIOR_LABELS:
        assert np.array_equal(packed[lb], m[lb])
    assert np.array_equal(packed.union(("right lung base", "heart")), m.union(("right lung base", "heart")))
    assert "right lung" in packed and "spine" not in packed
    with pytest.raises(KeyError, match="spine"):
        packed["spine"]

    def refusing(x, edit_region, lungs):
        raise ValueError("no soft-tissue reference")

    priors = PriorComputer(block_anatomy, refusing).priors(np.full((H, W), 50, np.uint8))
    assert priors.x_ano.shape == (H, W) and not priors.x_ano.any()  # zeros, logged, no exception


def test_old_run_configs_load_without_priors():
    d = LightConfig().to_dict()
    del d["priors"], d["ensemble"]
    old = LightConfig.from_dict(d)
    assert old.priors is False and old.ensemble == 1
    assert LightConfig.from_dict(LightConfig().to_dict()).priors is True
    with pytest.raises(ValueError, match="calib_confidence"):
        LightConfig(calib_confidence=0.3)


def test_bad_anatomy_is_reported():
    def no_heart(x):
        m = block_anatomy(x)
        return AnatomyMasks({k: v for k, v in m.masks.items() if k != "heart"}, m.shape, "test")

    with pytest.raises(ValueError, match="heart"):
        PriorComputer(no_heart, bright_anomaly).priors(np.zeros((H, W), np.uint8))
    with pytest.raises(ValueError, match="anomaly mapper"):
        PriorComputer(block_anatomy, None).priors(np.zeros((H, W), np.uint8))
