"""RadEdit anomaly mapper: edit-friendly DDPM inversion, then editing inside an edit
mask with the rest pasted back from the inversion, as microsoft/radedit's pipeline
runs it (paper section 3.1 step 2, Appendix A.3).

Components, all from local folders (nothing is downloaded at run time), as the
microsoft/radedit model card assembles them:

- UNet: ``UNet2DConditionModel`` from the user's copy of ``microsoft/radedit``
  (``backends.radedit_dir``, its ``unet`` subfolder when present);
- VAE: the SDXL VAE ``stabilityai/sdxl-vae`` (``anomaly.radedit_vae_dir``);
- text encoder and tokenizer: ``microsoft/BiomedVLP-BioViL-T``
  (``anomaly.radedit_text_encoder_dir``; ``trust_remote_code``; 128 tokens);
- scheduler: DDIM (linear betas, epsilon prediction, trailing spacing); only its
  timesteps and cumulative alphas are used.

The algorithm (restated from inbarhub/DDPM_inversion's ``inversion_forward_process``
and ``inversion_reverse_process`` at commit 6b73448, which RadEdit's pipeline builds
on; see docs/adapters.md for what was verified against what), per image:

1. ``x`` is resized to ``radedit_size`` (512), scaled to [-1, 1], replicated to 3
   channels and encoded: ``z0`` = a sample of the VAE posterior x ``scaling_factor``.
2. ``N = radedit_steps`` timesteps ``t_0 > ... > t_{N-1}``; ``skip = int(N *
   radedit_skip_ratio)``; editing runs ``t_skip .. t_{N-1}``.
3. Inversion (unconditional, empty prompt, as the model card's ``invert_prompt=""``,
   always with ``eta = 1``: RadEdit's pipeline calls ``inversion_forward_process(...,
   etas=1.0)`` whatever the editing eta, :data:`INVERSION_ETA`):
   ``x_{t_i} = sqrt(abar_i) z0 + sqrt(1 - abar_i) e_i`` with independent noise ``e_i``
   drawn for ``i = N-1, ..., skip`` in that order (increasing ``t``, as upstream); for
   each such ``i`` the UNet's noise estimate (one evaluation) gives the DDPM posterior
   mean ``mu_i(x_{t_i})`` (eta 1) and the noise term
   ``n_i = x_{t_{i+1}} - mu_i`` (``x_{t_N} = z0``). Upstream stores ``z_i = n_i /
   sigma_i`` and its reverse step adds ``eta sigma_i z_i``; for every step with
   ``sigma_i > 0`` that is ``eta n_i``.
4. Editing with ``eta = radedit_eta``: from ``x = x_{t_skip}``, for ``i = skip .. N-1``:
   the guided estimate ``eps_u + w (eps_c - eps_u)`` (prompt "No acute cardiopulmonary
   process", ``w = radedit_guidance``), ``x = mu_i^eta(x) + eta n_i`` (DDPM_inversion's
   ``reverse_step``: ``mu^eta`` uses ``sqrt(1 - abar_prev - eta sigma^2)``), then outside
   the edit mask (the keep mask, the complement of lungs + heart) ``x`` is replaced by
   ``x_{t_{i+1}}``, the inverted latent of the timestep just reached.
5. ``x`` is decoded; the grey level is the mean of the 3 channels; ``x_hat`` is resized
   back to the input grid and ``x_ano = max(x - x_hat, 0) / 255``.

The last step has ``sigma = 0`` (``abar_prev = 1``; there ``mu`` does not depend on
eta). Upstream divides by it there,
so its noise map is inf/NaN and its "latent after the last step" is NaN; it then
zeroes that noise map and, in the keep mask, pastes the latent of the step just done
instead of the next one, which leaves one step of noise outside the edit mask (the
known issue of the hub pipeline, discussion #12). Here the stored term is the exact
residual ``z0 - mu_{N-1}`` (added whole, whatever eta), nothing is divided by
``sigma``, and the keep mask
receives ``x_{t_{i+1}}`` (``z0`` at the end): the inversion is exact (the reverse
process with the inversion's own conditioning returns ``z0``) and the keep region
ends as the image's own latent.

UNet evaluations per image: ``N - skip`` (inversion) + ``2 (N - skip)`` (guided
editing) = 210 for 100 steps and skip ratio 0.3 (upstream also inverts the ``skip``
steps it never uses: 240); see :func:`unet_evaluations`.

The paper fed images derived from the original MIMIC-CXR DICOMs, not the
histogram-equalised MIMIC-CXR-JPG files, which "significantly degraded the quality
of the edited image" (Appendix A.3): give this backend DICOM-derived pixels.

Only the code path is tested here, with tiny randomly initialised components
(tests/vision/test_radedit.py); the real weights were not available to this project.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cxrils.config import AnomalyConfig, Config
from cxrils.extras import install_command
from cxrils.types import AnomalyResult
from cxrils.vision.anomaly.base import AnomalyBackendError, AnomalyMapper, anomaly_result, check_inputs
from cxrils.vision.batching import check_lengths, inference, stacked_groups, torch_device

#: Eta of the inversion (the forward process): RadEdit's pipeline calls
#: ``inversion_forward_process(..., etas=1.0)``, independent of the editing eta
#: ``anomaly.radedit_eta`` (docs/adapters.md).
INVERSION_ETA = 1.0


def _require_dir(path: str, key: str, what: str) -> Path:
    if not path:
        raise AnomalyBackendError(f"radedit backend: set {key} to a local copy of {what}")
    p = Path(path).expanduser()
    if not p.is_dir():
        raise AnomalyBackendError(f"radedit backend: {key}={path!r} is not a folder; download {what} there")
    return p


@dataclass(frozen=True)
class EditSchedule:
    """Which timesteps RadEdit's inversion and editing run.

    Attributes
    ----------
    timesteps : tuple of int
        The scheduler's ``N`` timesteps, descending (``t_0 > ... > t_{N-1}``).
    skip : int
        ``int(N * skip_ratio)``: editing starts at ``timesteps[skip]``.
    """

    timesteps: tuple[int, ...]
    skip: int

    @property
    def steps(self) -> tuple[int, ...]:
        """Indices ``i`` of the editing steps, ``skip .. N-1`` (the reverse order is
        the inversion's)."""
        return tuple(range(self.skip, len(self.timesteps)))

    @property
    def unet_evaluations(self) -> int:
        """UNet evaluations per image: one per inversion step, two (unconditional and
        conditional) per editing step."""
        return 3 * len(self.steps)


def edit_schedule(scheduler: Any, steps: int, skip_ratio: float) -> EditSchedule:
    """Set ``scheduler`` to ``steps`` timesteps and return the editing schedule.

    Raises
    ------
    AnomalyBackendError
        If ``steps < 1`` or the skip ratio leaves no step to run.
    """
    if steps < 1:
        raise AnomalyBackendError(f"radedit backend: anomaly.radedit_steps must be >= 1, got {steps}")
    scheduler.set_timesteps(steps)
    timesteps = tuple(int(t) for t in scheduler.timesteps)
    skip = int(steps * skip_ratio)
    if skip >= len(timesteps):
        raise AnomalyBackendError(f"radedit backend: skip ratio {skip_ratio} skips all {steps} steps")
    return EditSchedule(timesteps, skip)


def unet_evaluations(steps: int, skip_ratio: float) -> dict[str, int]:
    """UNet evaluations per image of the editing algorithm (module docstring).

    Returns
    -------
    dict
        ``inversion`` (``N - skip``), ``editing`` (``2 (N - skip)``), ``total``, and
        ``upstream_total`` (``N + 2 (N - skip)``: the hub pipeline inverts all ``N``
        steps, ``skip`` of them unused).
    """
    skip = int(steps * skip_ratio)
    run = steps - skip
    return {"inversion": run, "editing": 2 * run, "total": 3 * run, "upstream_total": steps + 2 * run}


class RadEditAnomalyMapper(AnomalyMapper):
    """RadEdit editing by DDPM inversion with an edit mask and a keep mask (see the
    module docstring).

    Parameters
    ----------
    unet, vae, text_encoder, tokenizer, scheduler
        diffusers / transformers components (a ``UNet2DConditionModel``, an
        ``AutoencoderKL``, a BERT-like text model whose first output is the token
        embeddings, its tokenizer, a scheduler with ``set_timesteps``,
        ``timesteps``, ``alphas_cumprod`` and ``final_alpha_cumprod`` such as
        ``DDIMScheduler``).
    cfg : AnomalyConfig
        ``radedit_size`` (512, Appendix A.3), ``radedit_prompt``, ``radedit_steps``,
        ``radedit_guidance``, ``radedit_skip_ratio``, ``radedit_eta``, ``radedit_seed``.
    device : str, optional
        Torch device; default CUDA when available, else CPU.
    precision : {"fp32", "fp16", "bf16"}
        UNet arithmetic on CUDA (autocast); the VAE and text encoder stay fp32 (the
        SDXL VAE overflows in fp16). CPU always computes in fp32.
    """

    name = "radedit"
    version = "ddpm-inversion-1"

    def __init__(
        self,
        unet: Any,
        vae: Any,
        text_encoder: Any,
        tokenizer: Any,
        scheduler: Any,
        cfg: AnomalyConfig | None = None,
        device: str | None = None,
        precision: str = "fp32",
    ) -> None:
        self.cfg = cfg or AnomalyConfig()
        self.device = torch_device(device)
        self.precision = precision
        self.unet = unet.to(self.device).eval()
        self.vae = vae.to(self.device).eval()
        self.text_encoder = text_encoder.to(self.device).eval()
        self.tokenizer = tokenizer
        self.scheduler = scheduler
        self.schedule = edit_schedule(scheduler, self.cfg.radedit_steps, self.cfg.radedit_skip_ratio)
        self._embeddings: tuple[Any, Any] | None = None

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The folders :meth:`from_config` loads, those set of ``backends.radedit_dir``,
        ``anomaly.radedit_vae_dir``, ``anomaly.radedit_text_encoder_dir``; imports
        neither diffusers nor transformers."""
        return [
            p
            for p in [cfg.backends.radedit_dir, cfg.anomaly.radedit_vae_dir, cfg.anomaly.radedit_text_encoder_dir]
            if p
        ]

    @classmethod
    def from_config(cls, cfg: Config) -> RadEditAnomalyMapper:
        """Load the components from the local folders named in ``cfg``.

        Raises
        ------
        AnomalyBackendError
            If diffusers/transformers are missing or a folder is unset or absent.
        """
        try:
            from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
            from transformers import AutoModel, AutoTokenizer
        except ImportError as err:
            raise AnomalyBackendError(
                f"radedit backend needs diffusers and transformers: {install_command('radedit')} ({err})"
            ) from err
        unet_dir = _require_dir(cfg.backends.radedit_dir, "backends.radedit_dir", "microsoft/radedit")
        vae_dir = _require_dir(cfg.anomaly.radedit_vae_dir, "anomaly.radedit_vae_dir", "stabilityai/sdxl-vae")
        text_dir = _require_dir(
            cfg.anomaly.radedit_text_encoder_dir, "anomaly.radedit_text_encoder_dir", "microsoft/BiomedVLP-BioViL-T"
        )
        if (unet_dir / "unet").is_dir():
            unet_dir = unet_dir / "unet"
        unet = UNet2DConditionModel.from_pretrained(unet_dir)
        vae = AutoencoderKL.from_pretrained(vae_dir)
        text_encoder = AutoModel.from_pretrained(text_dir, trust_remote_code=True)
        tokenizer = AutoTokenizer.from_pretrained(text_dir, model_max_length=128, trust_remote_code=True)
        scheduler = DDIMScheduler(
            beta_schedule="linear",
            clip_sample=False,
            prediction_type="epsilon",
            timestep_spacing="trailing",
            steps_offset=1,
        )
        return cls(unet, vae, text_encoder, tokenizer, scheduler, cfg.anomaly, precision=cfg.backends.precision)

    # ------------------------------------------------------------------ pieces

    def embed(self, prompts: Sequence[str]):
        """Token embeddings (len(prompts), L, D) float32 of ``prompts``, padded to the
        tokenizer's ``model_max_length``, as diffusers' ``StableDiffusionPipeline.
        encode_prompt`` computes them: the text encoder is called with
        ``attention_mask=`` the tokenizer's mask when its config sets
        ``use_attention_mask``, else ``attention_mask=None`` (BioViL-T's ``CXRBertConfig``
        does not set it, so padding tokens are attended to). The keyword is always
        passed: BioViL-T's ``CXRBertModel.forward(input_ids, attention_mask, ...)`` has
        no default for it (hi-ml-multimodal ``modelling_cxrbert.py``)."""
        import torch

        tok = self.tokenizer(
            list(prompts),
            padding="max_length",
            truncation=True,
            max_length=self.tokenizer.model_max_length,
            return_tensors="pt",
        )
        mask = (
            tok.attention_mask.to(self.device)
            if getattr(self.text_encoder.config, "use_attention_mask", False)
            else None
        )
        with torch.inference_mode():
            return self.text_encoder(tok.input_ids.to(self.device), attention_mask=mask)[0].float()

    def _prompt_embeddings(self):
        """(unconditional, conditional) embeddings, each (1, L, D), computed once."""
        if self._embeddings is None:
            both = self.embed(["", self.cfg.radedit_prompt])
            self._embeddings = (both[:1], both[1:])
        return self._embeddings

    def _unet(self, latents, t: int, context):
        """The UNet's noise estimate (float32) under the configured precision."""
        with inference(self.device, self.precision):
            return self.unet(latents, t, encoder_hidden_states=context).sample.float()

    def _coefficients(self, t: int) -> tuple[float, float, float]:
        """``(abar_t, abar_prev, variance)`` of DDPM_inversion's ``get_variance`` with
        ``prev = t - num_train_timesteps // N`` (``abar_prev = final_alpha_cumprod``
        below 0)."""
        sched = self.scheduler
        prev = t - sched.config.num_train_timesteps // len(self.schedule.timesteps)
        abar_t = float(sched.alphas_cumprod[t])
        abar_prev = float(sched.alphas_cumprod[prev]) if prev >= 0 else float(sched.final_alpha_cumprod)
        variance = (1 - abar_prev) / (1 - abar_t) * (1 - abar_t / abar_prev)
        return abar_t, abar_prev, variance

    def _mean(self, x, eps, t: int, eta: float):
        """Posterior mean ``mu(x_t)`` of DDPM_inversion's ``reverse_step`` (without its
        added noise): ``sqrt(abar_prev) x0_hat + sqrt(1 - abar_prev - eta var) eps``."""
        abar_t, abar_prev, variance = self._coefficients(t)
        x0_hat = (x - (1 - abar_t) ** 0.5 * eps) / abar_t**0.5
        direction = max(1 - abar_prev - eta * variance, 0.0) ** 0.5
        return abar_prev**0.5 * x0_hat + direction * eps

    def encode(self, images: np.ndarray):
        """VAE latents of ``images`` (B, S, S) in [-1, 1]: one posterior sample per image
        from its own generator seeded with ``radedit_seed`` (so a batch does not change
        any image's noise), times ``scaling_factor``. Returns (latents, generators)."""
        import torch

        pixels = torch.from_numpy(images)[:, None].repeat(1, 3, 1, 1).to(self.device)
        with torch.inference_mode():
            dist = self.vae.encode(pixels).latent_dist
        gens = [torch.Generator(device="cpu").manual_seed(self.cfg.radedit_seed) for _ in range(len(images))]
        noise = torch.stack([torch.randn(dist.mean.shape[1:], generator=g) for g in gens]).to(self.device)
        return (dist.mean + dist.std * noise) * self.vae.config.scaling_factor, gens

    def invert(self, z0, generators) -> tuple[dict[int, Any], dict[int, Any]]:
        """Edit-friendly DDPM inversion of ``z0`` (B, C, h, w) over the editing steps.

        Returns
        -------
        latents : dict of int to tensor
            ``i -> x_{t_i}`` for ``i = skip .. N`` (``N`` holds ``z0``).
        noise : dict of int to tensor
            ``i -> n_i = x_{t_{i+1}} - mu_i(x_{t_i})`` for the editing steps.
        """
        import torch

        sched, ts = self.scheduler, self.schedule.timesteps
        latents = {len(ts): z0}
        for i in reversed(self.schedule.steps):  # increasing t, the draw order upstream uses
            abar = float(sched.alphas_cumprod[ts[i]])
            e = torch.stack([torch.randn(z0.shape[1:], generator=g) for g in generators]).to(self.device)
            latents[i] = abar**0.5 * z0 + (1 - abar) ** 0.5 * e
        uncond, _ = self._prompt_embeddings()
        noise = {}
        for i in self.schedule.steps:  # decreasing t, as upstream's loop (independent steps)
            eps = self._unet(latents[i], ts[i], uncond.expand(len(z0), -1, -1))
            noise[i] = latents[i + 1] - self._mean(latents[i], eps, ts[i], INVERSION_ETA)
        return latents, noise

    def edit(self, latents: dict[int, Any], noise: dict[int, Any], edit_mask):
        """The guided reverse process with ``eta = radedit_eta`` from ``latents[skip]``:
        each step adds ``eta`` times the inversion's noise term (its whole residual on
        the last, ``sigma = 0``, step); outside ``edit_mask`` (B, 1, h, w in {0, 1}) every
        step ends on the inverted latent of the timestep it reached. Returns the final
        latents (B, C, h, w)."""
        import torch

        uncond, cond = self._prompt_embeddings()
        ts, w, eta = self.schedule.timesteps, self.cfg.radedit_guidance, self.cfg.radedit_eta
        x = latents[self.schedule.skip]
        b = len(x)
        context = torch.cat([uncond.expand(b, -1, -1), cond.expand(b, -1, -1)])
        for i in self.schedule.steps:
            eps_u, eps_c = self._unet(torch.cat([x, x]), ts[i], context).chunk(2)
            scale = eta if self._coefficients(ts[i])[2] > 0 else 1.0
            x = self._mean(x, eps_u + w * (eps_c - eps_u), ts[i], eta) + scale * noise[i]
            x = edit_mask * x + (1 - edit_mask) * latents[i + 1]
        return x

    def decode(self, z):
        """Grey images (B, S, S) in [-1, 1]: the mean of the decoded RGB channels."""
        import torch

        with torch.inference_mode():
            return self.vae.decode(z / self.vae.config.scaling_factor).sample.mean(dim=1).clamp(-1, 1)

    # ------------------------------------------------------------------ public

    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        """See :meth:`cxrils.vision.anomaly.AnomalyMapper.map` (``lungs`` is not used:
        RadEdit edits the whole edit region, as in the paper)."""
        return self.map_batch([x], [edit_region])[0]

    def map_batch(
        self,
        xs: Sequence[np.ndarray],
        edit_regions: Sequence[np.ndarray],
        *,
        lungs: Sequence[np.ndarray | None] | None = None,
    ) -> list[AnomalyResult]:
        """See :meth:`cxrils.vision.anomaly.AnomalyMapper.map_batch`: stacked on CUDA,
        image by image on CPU (:mod:`cxrils.vision.batching`); each image gets its own
        noise, so its result does not depend on the batch."""
        check_lengths("map_batch", len(xs), edit_regions, lungs)
        regions = [check_inputs(x, r) for x, r in zip(xs, edit_regions)]
        out: list[AnomalyResult] = []
        for group in stacked_groups(len(xs), self.device):
            out.extend(self._map_stacked([xs[i] for i in group], [regions[i] for i in group]))
        return out

    def _map_stacked(self, xs: list[np.ndarray], regions: list[np.ndarray]) -> list[AnomalyResult]:
        """Edit ``xs`` in one stacked batch (validated inputs)."""
        import torch

        size = self.cfg.radedit_size
        factor = 2 ** (len(self.vae.config.block_out_channels) - 1)
        images = np.stack([cv2.resize(x, (size, size), interpolation=cv2.INTER_AREA) for x in xs])
        masks = np.stack(
            [
                cv2.resize(r.astype(np.uint8), (size // factor, size // factor), interpolation=cv2.INTER_NEAREST)
                for r in regions
            ]
        )
        with torch.inference_mode():
            edit_mask = torch.from_numpy(masks.astype(np.float32))[:, None].to(self.device)
            z0, generators = self.encode(images.astype(np.float32) / 127.5 - 1.0)
            latents, noise = self.invert(z0, generators)
            decoded = self.decode(self.edit(latents, noise, edit_mask)).cpu().numpy()
        results = []
        for x, region, grey in zip(xs, regions, decoded):
            edited = np.rint((grey + 1.0) * 127.5).astype(np.uint8)
            x_hat = cv2.resize(edited, (x.shape[1], x.shape[0]), interpolation=cv2.INTER_LINEAR)
            results.append(anomaly_result(x, x_hat, region, self.name, self.version))
        return results
