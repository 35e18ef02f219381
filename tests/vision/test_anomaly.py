"""Anomaly mappers: the x_ano contract, the learned builtin map (formula, weights, and
against expert masks) and the atlas method's behaviour (the RadEdit adapter is tested in
test_radedit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import AnomalyConfig, Config
from cxrils.vision.anomaly import AnomalyBackendError, anomaly_result, get_anomaly_mapper


def phantom(size=128, lesion=True):
    """A chest-like phantom: bright body (170), two dark lungs (50), mediastinum
    between them; optionally a dense opacity (200) in the lower patient-right lung
    (image left)."""
    x = np.full((size, size), 170, np.uint8)
    right = np.zeros((size, size), bool)
    left = np.zeros((size, size), bool)
    right[20:110, 15:55] = True
    left[20:110, 73:113] = True
    x[right | left] = 50
    if lesion:
        x[80:100, 25:45] = 200
    return x, right, left


def test_atlas_marks_the_opacity_and_keeps_the_outside():
    x, right, left = phantom()
    res = get_anomaly_mapper("atlas", Config()).map(x, right | left)
    assert res.x_hat.dtype == np.uint8 and res.x_ano.dtype == np.float32
    assert np.array_equal(res.x_hat[~(right | left)], x[~(right | left)])
    expected = np.clip(x.astype(int) - res.x_hat.astype(int), 0, None) / 255.0
    assert np.allclose(res.x_ano, expected)
    a = res.anomaly_set(0.10)
    assert a[85:95, 30:40].all()  # the opacity's core
    assert not a[25:60, 20:50].any() and not a[:, 73:].any()  # healthy lung


def test_atlas_healthy_phantom_has_no_anomaly_and_is_contrast_invariant():
    x, right, left = phantom(lesion=False)
    assert not get_anomaly_mapper("atlas", Config()).map(x, right | left).anomaly_set(0.10).any()
    # halving the contrast leaves the anomaly set of the lesion phantom unchanged
    x, right, left = phantom()
    low = (x.astype(np.float32) * 0.5 + 60).astype(np.uint8)
    m = get_anomaly_mapper("atlas", Config())
    a_full, a_low = m.map(x, right | left).anomaly_set(0.10), m.map(low, right | left).anomaly_set(0.10)
    assert (a_full ^ a_low).sum() <= 0.05 * a_full.sum()


def test_atlas_leaves_the_heart_alone_when_told_where_the_lungs_are():
    x, right, left = phantom(lesion=False)
    heart = np.zeros_like(right)
    heart[70:105, 55:73] = True  # soft-tissue bright, inside the edit region
    region = right | left | heart
    m = get_anomaly_mapper("atlas", Config())
    res = m.map(x, region, lungs=right | left)
    assert np.array_equal(res.x_hat[heart], x[heart]) and not res.anomaly_set(0.10).any()


def test_atlas_rejects_bad_input():
    x, right, left = phantom()
    m = get_anomaly_mapper("atlas", Config())
    with pytest.raises(ValueError, match="uint8"):
        m.map(x.astype(np.float32), right)
    with pytest.raises(ValueError, match="shape"):
        m.map(x, right[:10])
    with pytest.raises(ValueError, match="empty"):
        m.map(x, np.zeros_like(right))
    with pytest.raises(ValueError, match="contrast"):
        m.map(np.full_like(x, 90), right | left)
    # a new user's trial (stop 58): the anatomy masks themselves gave "edit_region shape ()"
    from cxrils.types import AnatomyMasks

    masks = AnatomyMasks({"right lung": right, "left lung": left}, right.shape, "test")
    with pytest.raises(ValueError, match=r"not the anatomy masks: pass anatomy\.union"):
        m.map(x, masks)  # type: ignore[arg-type]
    with pytest.raises(AnomalyBackendError, match="unknown"):
        get_anomaly_mapper("nope", Config())


def test_atlas_coordinates_and_loading(tmp_path):
    from cxrils.vision.anomaly.atlas import HealthyLungAtlas, lung_coordinates

    _, right, left = phantom()
    u, v = lung_coordinates(right | left)
    assert u[20, 30] == 0 and u[109, 30] == 1  # apex -> base
    assert v[50, 15] == 1 and v[50, 54] == 0  # patient right: lateral = image left
    assert v[50, 73] == 0 and v[50, 112] == 1  # patient left: lateral = image right
    atlas = HealthyLungAtlas.load()
    assert atlas.mu.shape == atlas.sd.shape and (atlas.sd > 0).all()
    # normal lungs are brighter at the bases and the lateral edge than mid-medially
    assert atlas.mu[-1].mean() > atlas.mu[2, 2] and atlas.mu[3, -1] > atlas.mu[3, 3]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(AnomalyBackendError, match="bad.json"):
        get_anomaly_mapper("atlas", Config(anomaly=AnomalyConfig(atlas_path=str(tmp_path / "bad.json"))))


def test_fit_atlas_recovers_a_known_brightness_pattern():
    from cxrils.vision.anomaly.atlas import fit_atlas, lung_coordinates

    _, right, left = phantom()
    lungs = right | left
    u, v = lung_coordinates(lungs)
    maps = [np.where(lungs, 0.2 + 0.5 * u + k * 0.01, 0).astype(np.float32) for k in range(5)]
    atlas = fit_atlas(maps, [lungs] * 5, n=4)
    assert atlas.mu[3].mean() > atlas.mu[0].mean() + 0.3  # brighter towards the base
    assert np.allclose(atlas.mu[:, 0], atlas.mu[:, 3], atol=1e-3)  # no medial-lateral trend
    assert np.isfinite(atlas.mu).all() and (atlas.sd > 0).all()
    mu, sd = atlas.lookup(lungs)
    assert mu[~lungs].max() == 0 and mu[100, 30] > mu[25, 30]


def _random_weights(tmp_path, p_star=0.5, size=64):
    import torch

    from cxrils.training.lesion_train import save_weights
    from cxrils.vision.lesion_nets import LesionSegNet

    torch.manual_seed(0)
    net = LesionSegNet((4, 4, 8, 8, 8), in_channels=2)
    with torch.no_grad():
        net.head.bias.fill_(0.5)
    meta = {"arch": {"widths": [4, 4, 8, 8, 8], "input_size": size, "in_channels": 2}}
    if p_star is not None:
        meta["training"] = {"p_star": p_star}
    return save_weights(net, tmp_path / "ano.safetensors", meta)


def test_builtin_x_ano_is_the_scaled_lesion_probability_inside_the_lungs(tmp_path):
    """x_hat = x - 255 * min(1, 0.10 * p / p_star) in the lungs, x elsewhere; x_ano
    follows from x_hat; A(0.10) = {p >= p_star} up to the 8-bit rounding."""
    cfg = Config(anomaly=AnomalyConfig(builtin_weights=str(_random_weights(tmp_path, p_star=0.4))))
    m = get_anomaly_mapper("builtin", cfg)
    x, right, left = phantom()
    heart = np.zeros_like(right)
    heart[70:105, 55:73] = True
    res = m.map(x, right | left | heart, lungs=right | left)
    lungs = right | left
    p = m.probability(x, lungs)
    assert p.shape == x.shape and 0 <= p.min() and p.max() <= 1
    with pytest.raises(ValueError, match="lungs"):
        m.probability(x)
    want = np.where(lungs, np.clip(np.rint(x - 255 * np.minimum(1, 0.10 * p / 0.4)), 0, 255), x)
    assert np.array_equal(res.x_hat, want.astype(np.uint8))
    assert np.allclose(res.x_ano, np.clip(x.astype(int) - res.x_hat.astype(int), 0, None) / 255.0)
    assert res.x_ano[~lungs].max() == 0.0  # heart and body untouched
    sure = lungs & (np.abs(p - 0.4) > 0.02) & (x >= 26)  # away from the threshold, bright enough
    assert np.array_equal(res.anomaly_set(0.10)[sure], (p >= 0.4)[sure])


def test_builtin_weights_errors(tmp_path):
    with pytest.raises(AnomalyBackendError, match="not found"):
        get_anomaly_mapper("builtin", Config(anomaly=AnomalyConfig(builtin_weights=str(tmp_path / "none.st"))))
    bad = _random_weights(tmp_path, p_star=None)
    with pytest.raises(AnomalyBackendError, match="p_star"):
        get_anomaly_mapper("builtin", Config(anomaly=AnomalyConfig(builtin_weights=str(bad))))
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(AnomalyBackendError, match="junk"):
        get_anomaly_mapper("builtin", Config(anomaly=AnomalyConfig(builtin_weights=str(tmp_path / "junk.safetensors"))))


def test_shipped_builtin_map_follows_expert_lesion_masks(shared_data):
    """On held-back COVID-QU-Ex images (report part, never trained on), the shipped map
    is higher on the expert infection mask than on the rest of the expert lungs, and low
    on normal images."""
    from cxrils.training.lesion_data import covid_qu_ex_samples

    m = get_anomaly_mapper("builtin", Config())
    samples = covid_qu_ex_samples(shared_data, "report")
    covid = [s for s in samples if s.positive][:8]
    normal = [s for s in samples if not s.positive][:8]
    inside, outside, normal_mean = [], [], []
    for s in covid + normal:
        right, left = s.lungs()
        lungs = right | left
        xa = m.map(s.image(), lungs, lungs=lungs).x_ano
        lesion = s.lesion() & lungs
        if s.positive:
            inside.append(xa[lesion].mean())
            outside.append(xa[lungs & ~lesion].mean() if (lungs & ~lesion).any() else 0.0)
        else:
            normal_mean.append(xa[lungs].mean())
    assert np.mean(inside) > 3 * np.mean(outside)
    assert np.mean(normal_mean) < 0.5 * np.mean(inside)


def test_anomaly_result_clips_negative_differences():
    x = np.array([[100, 100]], np.uint8)
    res = anomaly_result(x, np.array([[80, 130]], np.uint8), np.ones((1, 2), bool), "t")
    assert res.x_ano.tolist() == [[pytest.approx(20 / 255), 0.0]]
