"""RadEdit anomaly mapper over diffusers (paper section 3.1 step 2, Appendix A.3).

Components, all from local folders (nothing is downloaded at run time):

- UNet: ``UNet2DConditionModel`` from the user's copy of ``microsoft/radedit``
  (``cfg.backends.radedit_dir``, its ``unet`` subfolder when present);
- VAE: the SDXL VAE ``stabilityai/sdxl-vae`` (``cfg.anomaly.radedit_vae_dir``);
- text encoder and tokenizer: ``microsoft/BiomedVLP-BioViL-T``
  (``cfg.anomaly.radedit_text_encoder_dir``; it needs ``trust_remote_code``);
- scheduler: DDIM (linear betas, epsilon prediction, trailing spacing).

Editing (our reading of RadEdit's masked editing): the image is resized to
512 x 512, encoded, noised to the step ``radedit_skip_ratio`` of the way into the
DDIM schedule, then denoised with the prompt "No acute cardiopulmonary process"
and classifier-free guidance; after every step the latent outside the edit mask
(the keep mask, the complement of lungs + heart) is reset to the equally noised
latent of the original image, so only the edit region changes. The decoded image is
resized back to the input grid before the difference x - x_hat.

The paper fed images derived from the original MIMIC-CXR DICOMs, not the
histogram-equalised MIMIC-CXR-JPG files, which "significantly degraded the quality
of the edited image" (Appendix A.3): give this backend DICOM-derived pixels.

Only the code path is tested here, with tiny randomly initialised components
(tests/vision/test_anomaly.py); the real weights were not available to this project.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cxrils.config import AnomalyConfig, Config
from cxrils.types import AnomalyResult
from cxrils.vision.anomaly.base import AnomalyBackendError, anomaly_result, check_inputs


def _require_dir(path: str, key: str, what: str) -> Path:
    if not path:
        raise AnomalyBackendError(f"radedit backend: set {key} to a local copy of {what}")
    p = Path(path).expanduser()
    if not p.is_dir():
        raise AnomalyBackendError(f"radedit backend: {key}={path!r} is not a folder; download {what} there")
    return p


class RadEditAnomalyMapper:
    """RadEdit editing with an edit mask and a keep mask (see module docstring).

    Parameters
    ----------
    unet, vae, text_encoder, tokenizer, scheduler
        diffusers / transformers components (a ``UNet2DConditionModel``, an
        ``AutoencoderKL``, a BERT-like text model whose first output is the token
        embeddings, its tokenizer, a ``DDIMScheduler``).
    cfg : AnomalyConfig
        ``radedit_size`` (512, Appendix A.3), ``radedit_prompt``, ``radedit_steps``,
        ``radedit_guidance``, ``radedit_skip_ratio``, ``radedit_seed``.
    device : str, optional
        Torch device; default CUDA when available, else CPU.
    """

    name = "radedit"
    version = "diffusers-ddim-1"

    def __init__(self, unet: Any, vae: Any, text_encoder: Any, tokenizer: Any, scheduler: Any,
                 cfg: AnomalyConfig | None = None, device: str | None = None) -> None:
        import torch

        self.cfg = cfg or AnomalyConfig()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.unet = unet.to(self.device).eval()
        self.vae = vae.to(self.device).eval()
        self.text_encoder = text_encoder.to(self.device).eval()
        self.tokenizer = tokenizer
        self.scheduler = scheduler

    @classmethod
    def from_config(cls, cfg: Config) -> "RadEditAnomalyMapper":
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
            raise AnomalyBackendError(f"radedit backend needs diffusers and transformers: "
                                      f"pip install 'cxrils[radedit]' ({err})") from err
        unet_dir = _require_dir(cfg.backends.radedit_dir, "backends.radedit_dir", "microsoft/radedit")
        vae_dir = _require_dir(cfg.anomaly.radedit_vae_dir, "anomaly.radedit_vae_dir", "stabilityai/sdxl-vae")
        text_dir = _require_dir(cfg.anomaly.radedit_text_encoder_dir, "anomaly.radedit_text_encoder_dir",
                                "microsoft/BiomedVLP-BioViL-T")
        if (unet_dir / "unet").is_dir():
            unet_dir = unet_dir / "unet"
        unet = UNet2DConditionModel.from_pretrained(unet_dir)
        vae = AutoencoderKL.from_pretrained(vae_dir)
        text_encoder = AutoModel.from_pretrained(text_dir, trust_remote_code=True)
        tokenizer = AutoTokenizer.from_pretrained(text_dir, model_max_length=128, trust_remote_code=True)
        scheduler = DDIMScheduler(beta_schedule="linear", clip_sample=False, prediction_type="epsilon",
                                  timestep_spacing="trailing", steps_offset=1)
        return cls(unet, vae, text_encoder, tokenizer, scheduler, cfg.anomaly)

    def _embed(self, prompts: list[str]):
        import torch

        tok = self.tokenizer(prompts, padding="max_length", truncation=True,
                             max_length=self.tokenizer.model_max_length, return_tensors="pt")
        with torch.no_grad():
            out = self.text_encoder(input_ids=tok.input_ids.to(self.device),
                                    attention_mask=tok.attention_mask.to(self.device))
        return out[0]

    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        """See :meth:`cxrils.vision.anomaly.AnomalyMapper.map` (``lungs`` is not used:
        RadEdit edits the whole edit region, as in the paper)."""
        import torch

        region = check_inputs(x, edit_region)
        h, w = x.shape
        size = self.cfg.radedit_size
        img = cv2.resize(x, (size, size), interpolation=cv2.INTER_AREA).astype(np.float32) / 127.5 - 1.0
        factor = 2 ** (len(self.vae.config.block_out_channels) - 1)
        latent_size = size // factor
        edit = cv2.resize(region.astype(np.uint8), (latent_size, latent_size), interpolation=cv2.INTER_NEAREST)
        edit_t = torch.from_numpy(edit.astype(np.float32))[None, None].to(self.device)
        keep_t = 1.0 - edit_t  # keep mask: everything outside lungs + heart
        generator = torch.Generator(device="cpu").manual_seed(self.cfg.radedit_seed)
        with torch.no_grad():
            pixels = torch.from_numpy(img)[None, None].repeat(1, 3, 1, 1).to(self.device)
            scale = self.vae.config.scaling_factor
            z0 = self.vae.encode(pixels).latent_dist.mean * scale
            emb = self._embed(["", self.cfg.radedit_prompt])
            self.scheduler.set_timesteps(self.cfg.radedit_steps)
            timesteps = self.scheduler.timesteps[int(round(self.cfg.radedit_skip_ratio * len(self.scheduler.timesteps))):]
            noise = torch.randn(z0.shape, generator=generator).to(self.device)
            z = self.scheduler.add_noise(z0, noise, timesteps[:1])
            for i, t in enumerate(timesteps):
                eps_u, eps_c = self.unet(torch.cat([z, z]), t, encoder_hidden_states=emb).sample.chunk(2)
                eps = eps_u + self.cfg.radedit_guidance * (eps_c - eps_u)
                z = self.scheduler.step(eps, t, z).prev_sample
                known = z0 if i + 1 == len(timesteps) else self.scheduler.add_noise(z0, noise, timesteps[i + 1:i + 2])
                z = edit_t * z + keep_t * known
            decoded = self.vae.decode(z / scale).sample
        out = decoded.mean(dim=1)[0].clamp(-1, 1).cpu().numpy()
        edited = np.rint((out + 1.0) * 127.5).astype(np.uint8)
        x_hat = cv2.resize(edited, (w, h), interpolation=cv2.INTER_LINEAR)
        return anomaly_result(x, x_hat, region, self.name, self.version)
