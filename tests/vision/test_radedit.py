"""The RadEdit adapter against a restatement of the upstream algorithm, with tiny
randomly initialised diffusers components (the real RadEdit / SDXL VAE / BioViL-T
weights are not available here).

Upstream, restated (never imported): inbarhub/DDPM_inversion
``ddm_inversion/inversion_utils.py`` at 6b73448 (``sample_xts_from_x0``, ``get_variance``,
``inversion_forward_process``, ``reverse_step``, ``inversion_reverse_process``) and the
way microsoft/radedit's pipeline calls them: ``skip = int(N * skip_ratio)``, inversion
with ``etas=1`` and the empty prompt, editing from the inverted latent at
``timesteps[skip]`` with the noise maps of the steps ``skip .. N-1``.
"""

from __future__ import annotations

import numpy as np
import pytest

from cxrils.config import AnomalyConfig, Config
from cxrils.vision.anomaly import AnomalyBackendError, get_anomaly_mapper

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers", reason="radedit extra (diffusers) not installed")
pytest.importorskip("transformers", reason="radedit extra (transformers) not installed")

from diffusers import DDIMScheduler  # noqa: E402

from cxrils.vision.anomaly.radedit import RadEditAnomalyMapper, edit_schedule, unet_evaluations  # noqa: E402


def model_card_scheduler():
    """The scheduler of the microsoft/radedit model card."""
    return DDIMScheduler(
        beta_schedule="linear",
        clip_sample=False,
        prediction_type="epsilon",
        timestep_spacing="trailing",
        steps_offset=1,
    )


def tiny_components(tmp_path):
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=2,
        norm_num_groups=4,
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        block_out_channels=(8, 8),
        latent_channels=4,
        norm_num_groups=4,
        layers_per_block=1,
    )
    text = BertModel(
        BertConfig(
            vocab_size=16,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=128,
        )
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "no", "acute", "cardiopulmonary", "process"]) + "\n"
    )
    tok = BertTokenizer(str(vocab), model_max_length=12)
    return unet, vae, text, tok, model_card_scheduler()


def small_cfg(**kw):
    base = dict(radedit_size=32, radedit_steps=6, radedit_skip_ratio=0.3)  # skip = 1: 5 steps
    return AnomalyConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def components(tmp_path_factory):
    return tiny_components(tmp_path_factory.mktemp("radedit"))


def phantom(size=48):
    x = np.full((size, size), 170, np.uint8)
    region = np.zeros((size, size), bool)
    region[8:40, 6:20] = region[8:40, 28:42] = True
    x[region] = 50
    x[28:36, 9:17] = 200
    return x, region


def mapper(components, **kw):
    unet, vae, text, tok, _ = components
    return RadEditAnomalyMapper(unet, vae, text, tok, model_card_scheduler(), cfg=small_cfg(**kw), device="cpu")


def latents_and_generators(m, n=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    z0 = torch.randn(n, 4, 16, 16, generator=g)
    return z0, [torch.Generator().manual_seed(m.cfg.radedit_seed) for _ in range(n)]


# --- restatement of upstream (inbarhub/DDPM_inversion), for comparison ------------


def upstream_inversion(m, z0, generator):
    """inversion_forward_process of DDPM_inversion at 6b73448 with etas=1 and prompt "":
    xts[0] = x0 and xts[k] the latent at the k-th smallest timestep, drawn for
    increasing t; the loop visits the timesteps in decreasing order, z = (x_{t-1} - mu)
    / sigma, the 'correction' x_{t-1} = mu + sigma z written back into xts, zs[0] = 0.
    RadEdit then edits from xts[N - skip] with zs[:N - skip]."""
    sched = m.scheduler
    ts = list(m.schedule.timesteps)
    n = len(ts)
    t_to_idx = {t: k for k, t in enumerate(ts)}
    abar = sched.alphas_cumprod
    xts = [None] * (n + 1)
    xts[0] = z0
    for t in reversed(ts):  # sample_xts_from_x0
        noise = torch.randn(z0.shape[1:], generator=generator)[None]
        xts[n - t_to_idx[t]] = z0 * abar[t] ** 0.5 + noise * (1 - abar[t]) ** 0.5
    uncond = m.embed([""])
    zs = [None] * n
    with torch.inference_mode():
        for t in ts:
            idx = n - t_to_idx[t] - 1
            xt = xts[idx + 1]
            eps = m.unet(xt, t, encoder_hidden_states=uncond).sample
            x0_pred = (xt - (1 - abar[t]) ** 0.5 * eps) / abar[t] ** 0.5
            prev = t - sched.config.num_train_timesteps // n
            abar_prev = abar[prev] if prev >= 0 else sched.final_alpha_cumprod
            var = (1 - abar_prev) / (1 - abar[t]) * (1 - abar[t] / abar_prev)
            mu = abar_prev**0.5 * x0_pred + (1 - abar_prev - var) ** 0.5 * eps
            z = (xts[idx] - mu) / var**0.5
            zs[idx] = z
            xts[idx] = mu + var**0.5 * z
    zs[0] = torch.zeros_like(zs[0])
    return xts, zs


def old_single_noise_edit(m, z0, edit_mask, seed=0):
    """The adapter before this change: one noise sample added at timesteps[skip], DDIM
    steps, the keep region reset to z0 noised with that same sample."""
    sched = m.scheduler
    timesteps = sched.timesteps[m.schedule.skip :]
    noise = torch.randn(z0.shape, generator=torch.Generator().manual_seed(seed))
    uncond, cond = m._prompt_embeddings()
    emb = torch.cat([uncond, cond])
    z = sched.add_noise(z0, noise, timesteps[:1])
    with torch.inference_mode():
        for i, t in enumerate(timesteps):
            eps_u, eps_c = m.unet(torch.cat([z, z]), t, encoder_hidden_states=emb).sample.chunk(2)
            z = sched.step(eps_u + m.cfg.radedit_guidance * (eps_c - eps_u), t, z).prev_sample
            known = z0 if i + 1 == len(timesteps) else sched.add_noise(z0, noise, timesteps[i + 1 : i + 2])
            z = edit_mask * z + (1 - edit_mask) * known
    return z


# --- schedule ------------------------------------------------------------------------


def test_schedule_pins_timesteps_and_skip_against_upstream():
    s = edit_schedule(model_card_scheduler(), 100, 0.3)
    # trailing spacing: round(arange(1000, 0, -10)) - 1, written out independently
    assert s.timesteps == tuple(range(999, 0, -10))
    assert s.skip == 30 and s.timesteps[s.skip] == 699  # editing starts at t = 699
    # upstream's reverse loop runs timesteps[-len(zs[skip:]):] = timesteps[skip:]
    assert [s.timesteps[i] for i in s.steps] == list(range(699, 0, -10))
    assert s.unet_evaluations == 210 == unet_evaluations(100, 0.3)["total"]
    assert unet_evaluations(100, 0.3) == {"inversion": 70, "editing": 140, "total": 210, "upstream_total": 240}
    # skip = int(N * ratio), not round(): 10 * 0.35 = 3.5 -> 3
    assert edit_schedule(model_card_scheduler(), 10, 0.35).skip == 3
    with pytest.raises(AnomalyBackendError, match="skips all"):
        edit_schedule(model_card_scheduler(), 10, 1.0)


def test_unet_calls_follow_the_schedule(components):
    """Recorded UNet calls: the inversion's (one latent per image, the empty prompt),
    then the editing steps' (unconditional + conditional), both in decreasing t as
    upstream's loops; upstream also inverts the first `skip` steps, whose noise maps it
    never uses."""
    m = mapper(components)
    calls = []
    real = m.unet.forward

    def spy(sample, timestep, encoder_hidden_states=None, **kw):
        calls.append((int(timestep), sample.shape[0]))
        return real(sample, timestep, encoder_hidden_states=encoder_hidden_states, **kw)

    m.unet.forward = spy
    x, region = phantom()
    try:
        m.map(x, region)
    finally:
        del m.unet.forward
    ts = m.schedule.timesteps  # 6 steps: 999, 832, 666, 499, 332, 166; skip = int(1.8) = 1
    assert ts == (999, 832, 666, 499, 332, 166)
    edit_ts = list(ts[1:])
    assert calls == [(t, 1) for t in edit_ts] + [(t, 2) for t in edit_ts]
    assert sum(b for _, b in calls) == unet_evaluations(6, 0.3)["total"] == 15


# --- inversion properties -----------------------------------------------------------


def test_inversion_with_the_same_conditioning_reconstructs_the_latents(components):
    m = mapper(components, radedit_prompt="")  # the editing prompt = the inversion's (empty)
    z0, gens = latents_and_generators(m, n=2)
    latents, noise = m.invert(z0, gens)
    out = m.edit(latents, noise, torch.ones(2, 1, 16, 16))  # all-edit mask: nothing pasted back
    assert torch.allclose(out, z0, atol=1e-4), (out - z0).abs().max()
    # every intermediate latent is retraced too


def test_keep_region_ends_as_the_input_and_the_edit_region_changes(components):
    m = mapper(components, radedit_guidance=7.5)
    z0, gens = latents_and_generators(m)
    latents, noise = m.invert(z0, gens)
    mask = torch.zeros(1, 1, 16, 16)
    mask[..., 4:12, 2:8] = 1
    out = m.edit(latents, noise, mask)
    keep = (mask == 0).expand_as(out)
    assert torch.equal(out[keep], z0[keep])  # exactly the input latents
    assert (out[~keep] - z0[~keep]).abs().mean() > 1e-3  # the prompt changed the edit region
    # and on images: x_hat equals x outside the edit region
    x, region = phantom()
    res = m.map(x, region)
    assert np.array_equal(res.x_hat[~region], x[~region]) and res.backend == "radedit"
    assert np.allclose(res.x_ano, np.clip(x.astype(int) - res.x_hat.astype(int), 0, None) / 255.0)


def test_old_single_noise_code_is_measurably_different(components):
    m = mapper(components, radedit_prompt="")
    z0, gens = latents_and_generators(m)
    ones = torch.ones(1, 1, 16, 16)
    latents, noise = m.invert(z0, gens)
    new_err = (m.edit(latents, noise, ones) - z0).abs().mean()
    old_err = (old_single_noise_edit(m, z0, ones) - z0).abs().mean()
    assert new_err < 1e-5 and old_err > 0.1 * z0.abs().mean() and old_err > 1e4 * new_err


def test_matches_upstream_inversion_and_handles_its_last_step(components):
    """Given the same draws (the restatement is handed our CPU generator; upstream draws
    from the device's global one, so no seed reproduces its edits: docs/adapters.md),
    the same numbers as upstream on every step it can represent; its
    last step divides by sigma = 0 (hub discussion #12: the x0 slot turns NaN), ours
    keeps z0 and the exact residual. (10 steps divide 1000: the last step, t = 99,
    reaches t - 100 < 0, i.e. abar_prev = 1.)"""
    m = mapper(components, radedit_steps=10, radedit_skip_ratio=0.5)
    z0, gens = latents_and_generators(m)
    xts, zs = upstream_inversion(m, z0, torch.Generator().manual_seed(m.cfg.radedit_seed))
    latents, noise = m.invert(z0, gens)
    n, skip = len(m.schedule.timesteps), m.schedule.skip
    # ours: latents[i] / noise[i] at timesteps[i] (decreasing); upstream: xts[n - i] / zs[n - i - 1]
    assert torch.allclose(latents[skip], xts[n - skip], atol=1e-6)  # RadEdit's start, xts[N - skip]
    for i in range(skip, n):
        assert torch.allclose(latents[i], xts[n - i], atol=1e-6)  # same per-timestep noise draws
    for i in range(skip, n - 1):  # sigma_i > 0: n_i = sigma_i z_i
        _, _, var = m._coefficients(m.schedule.timesteps[i])
        assert var > 0 and torch.allclose(noise[i], var**0.5 * zs[n - i - 1], atol=1e-5)
    _, _, var_last = m._coefficients(m.schedule.timesteps[-1])
    assert var_last == 0.0
    assert torch.isnan(xts[0]).all()  # upstream's x0 slot after the last inversion step
    assert torch.equal(latents[n], z0) and torch.isfinite(noise[n - 1]).all()
    # upstream pastes the keep region one step late: it ends on x_{t_{N-1}}, not z0
    assert (latents[n - 1] - z0).abs().mean() > 1e-3


def upstream_reverse_step(m, eps, t, x, eta, z):
    """DDPM_inversion 6b73448 ``reverse_step``: ``sqrt(abar_prev) x0_hat + sqrt(1 - abar_prev
    - eta var) eps + eta sqrt(var) z``."""
    sched = m.scheduler
    n = len(m.schedule.timesteps)
    prev = t - sched.config.num_train_timesteps // n
    abar, abar_prev = sched.alphas_cumprod[t], (sched.alphas_cumprod[prev] if prev >= 0 else sched.final_alpha_cumprod)
    var = (1 - abar_prev) / (1 - abar) * (1 - abar / abar_prev)
    x0 = (x - (1 - abar) ** 0.5 * eps) / abar**0.5
    return abar_prev**0.5 * x0 + (1 - abar_prev - eta * var) ** 0.5 * eps + eta * var**0.5 * z


def test_inversion_runs_with_eta_one_whatever_the_editing_eta(components):
    """RadEdit's pipeline inverts with ``etas=1.0`` and edits with its own ``eta``: the
    inverted latents and noise maps do not depend on ``radedit_eta``, and every editing
    step with sigma > 0 is upstream's ``reverse_step`` with that eta on the eta-1 noise
    maps (the last, sigma = 0, step adds our exact residual, docs/adapters.md)."""
    m1 = mapper(components, radedit_steps=10, radedit_skip_ratio=0.5)
    mh = mapper(components, radedit_steps=10, radedit_skip_ratio=0.5, radedit_eta=0.5)
    z0, gens = latents_and_generators(m1)
    lat1, noise1 = m1.invert(z0, gens)
    z0, gens = latents_and_generators(mh)
    lath, noiseh = mh.invert(z0, gens)
    assert all(torch.equal(noise1[i], noiseh[i]) for i in noise1)  # the old code inverted with eta 0.5
    xts, zs = upstream_inversion(mh, z0, torch.Generator().manual_seed(mh.cfg.radedit_seed))
    ones = torch.ones(1, 1, 16, 16)  # all-edit mask: nothing pasted back
    out = mh.edit(lath, noiseh, ones)
    uncond, cond = mh._prompt_embeddings()
    n, skip, w = 10, mh.schedule.skip, mh.cfg.radedit_guidance
    x = xts[n - skip]
    with torch.inference_mode():
        for i in range(skip, n):
            t = mh.schedule.timesteps[i]
            eps_u = mh.unet(x, t, encoder_hidden_states=uncond).sample
            eps_c = mh.unet(x, t, encoder_hidden_states=cond).sample
            eps = eps_u + w * (eps_c - eps_u)
            if i < n - 1:
                x = upstream_reverse_step(mh, eps, t, x, 0.5, zs[n - i - 1])
            else:
                x = upstream_reverse_step(mh, eps, t, x, 0.5, torch.zeros_like(x)) + noiseh[i]
    assert torch.allclose(out, x, atol=1e-4), (out - x).abs().max()
    assert (m1.edit(lat1, noise1, ones) - out).abs().max() > 1e-3  # eta matters to the edit


def test_text_encoding_passes_no_attention_mask(components):
    m = mapper(components)
    tok = m.tokenizer(
        ["no acute cardiopulmonary process"],
        padding="max_length",
        truncation=True,
        max_length=m.tokenizer.model_max_length,
        return_tensors="pt",
    )
    with torch.inference_mode():
        plain = m.text_encoder(tok.input_ids)[0]
        masked = m.text_encoder(tok.input_ids, attention_mask=tok.attention_mask)[0]
    got = m.embed(["no acute cardiopulmonary process"])
    assert got.shape == (1, 12, 16) and torch.equal(got, plain)
    assert not torch.allclose(plain, masked, atol=1e-4)  # the choice matters: padding is attended to


# --- batching ------------------------------------------------------------------------


def test_batch_of_four_equals_four_singles_bit_for_bit_on_cpu(components):
    m = mapper(components, radedit_steps=4, radedit_skip_ratio=0.5)
    rng = np.random.default_rng(0)
    xs, regions = [], []
    for k, shape in enumerate([(48, 48), (40, 56), (64, 36), (48, 48)]):
        x = rng.integers(30, 220, shape, dtype=np.uint8)
        r = np.zeros(shape, bool)
        r[5 + k : shape[0] - 5, 4 : shape[1] - 4 - k] = True
        xs.append(x)
        regions.append(r)
    batch = m.map_batch(xs, regions)
    singles = [m.map(x, r) for x, r in zip(xs, regions)]
    for b, s in zip(batch, singles):
        assert np.array_equal(b.x_hat, s.x_hat) and np.array_equal(b.x_ano, s.x_ano)
    # the stacked path CUDA takes agrees to float tolerance (one grey level after rounding)
    stacked = m._map_stacked(xs, [r.astype(bool) for r in regions])
    for b, s in zip(stacked, singles):
        assert np.abs(b.x_hat.astype(int) - s.x_hat.astype(int)).max() <= 1
    with pytest.raises(ValueError, match="3 items given for 4 images"):
        m.map_batch(xs, regions[:3])


@pytest.mark.slow
def test_radedit_from_config_loads_local_folders(tmp_path):
    unet, vae, text, tok, _ = tiny_components(tmp_path)
    unet.save_pretrained(tmp_path / "radedit" / "unet")
    vae.save_pretrained(tmp_path / "vae")
    text.save_pretrained(tmp_path / "biovil")
    tok.save_pretrained(tmp_path / "biovil")
    cfg = Config()
    cfg.anomaly = small_cfg(radedit_steps=4)
    with pytest.raises(AnomalyBackendError, match="backends.radedit_dir"):
        get_anomaly_mapper("radedit", cfg)
    cfg.backends.radedit_dir = str(tmp_path / "radedit")
    cfg.anomaly.radedit_vae_dir = str(tmp_path / "missing")
    with pytest.raises(AnomalyBackendError, match="not a folder"):
        get_anomaly_mapper("radedit", cfg)
    cfg.anomaly.radedit_vae_dir = str(tmp_path / "vae")
    cfg.anomaly.radedit_text_encoder_dir = str(tmp_path / "biovil")
    m = get_anomaly_mapper("radedit", cfg)
    x, region = phantom(32)
    res = m.map(x, region)
    assert res.x_hat.shape == (32, 32)
    assert np.array_equal(res.x_hat, m.map(x, region).x_hat)  # seeded, deterministic
