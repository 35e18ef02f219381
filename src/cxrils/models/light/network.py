"""The light ILS network: a MONAI BasicUNet conditioned on the instruction by FiLM.

Image side: MONAI's 2-D ``BasicUNet`` (no pretrained weights) on the image in [0, 1],
with ``config.priors`` the three prior channels of :mod:`cxrils.models.light.priors`
(region named by the instruction, lungs, x_ano), plus two coordinate channels (row
and column in [-1, 1]) so the network can relate locations named in the instruction
("left lung base") to positions. Instruction side: a vector from :class:`~cxrils.models.light.text.InstructionEncoder`
goes through a learned MLP that gives FiLM parameters (gamma, beta) for the output
of every encoder level and of every decoder level (Perez et al. 2018, FiLM).

Heads, from the pooled, conditioned bottleneck and decoder features, the instruction
features and two summaries of the mask probabilities (maximum and mean), so that the
presence decision sees the mask decoder's evidence:

* presence: one logit, "the requested lesion is present" (the mask is emptied when
  it says absent);
* lesion type: logits over :data:`cxrils.vocab.INFERENCE_LESION_TYPES` for the
  lesion-inference answer;
* certainty: one logit, definitive vs tentative (same answer);
* mask: one logit per pixel at the input resolution.
"""

from __future__ import annotations

import torch
from monai.networks.nets import BasicUNet
from torch import nn

from cxrils import vocab
from cxrils.models.light.config import LightConfig
from cxrils.models.light.priors import PRIOR_CHANNELS


class LightILSNet(nn.Module):
    """FiLM-conditioned U-Net with presence, lesion-type and certainty heads.

    Parameters
    ----------
    config : LightConfig
    text_dim : int
        Dimension of the instruction vectors.

    Notes
    -----
    ``forward(x, t)`` takes ``x`` float32 (B, C, S, S) in [0, 1] (S = image_size;
    C = 1 + 3 prior channels with ``config.priors`` (1 + 4 with ``config.box_prior`` too), else 1, see :attr:`in_channels`)
    and ``t`` float32 (B, text_dim); it returns a dict with ``mask`` (B, 1, S, S),
    ``presence`` (B,), ``lesion`` (B, 3) and ``certainty`` (B,), all logits.
    """

    def __init__(self, config: LightConfig, text_dim: int) -> None:
        super().__init__()
        f = config.features
        #: Image (and prior) channels expected by :meth:`forward` (coordinates are added inside).
        self.in_channels = 1 + (len(PRIOR_CHANNELS) - (0 if config.box_prior else 1) if config.priors else 0)
        self.unet = BasicUNet(spatial_dims=2, in_channels=self.in_channels + 2, out_channels=1, features=f)
        # FiLM targets: encoder outputs x0..x4 (f0..f4), decoder outputs u4, u3, u2 (f3, f2, f1), u1 (f5).
        self._film_channels = [f[0], f[1], f[2], f[3], f[4], f[3], f[2], f[1], f[5]]
        h = config.text_hidden
        self.text_mlp = nn.Sequential(nn.Linear(text_dim, h), nn.GELU(), nn.Linear(h, h), nn.GELU())
        self.film = nn.Linear(h, 2 * sum(self._film_channels))
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)
        pooled = 2 * (f[4] + f[3]) + h + 2
        self.head = nn.Sequential(nn.Linear(pooled, h), nn.GELU())
        self.presence = nn.Linear(h, 1)
        self.lesion = nn.Linear(h, len(vocab.INFERENCE_LESION_TYPES))
        self.certainty = nn.Linear(h, 1)

    @staticmethod
    def _coords(x: torch.Tensor) -> torch.Tensor:
        b, _, hgt, wid = x.shape
        rows = torch.linspace(-1.0, 1.0, hgt, device=x.device, dtype=x.dtype).view(1, 1, hgt, 1).expand(b, 1, hgt, wid)
        cols = torch.linspace(-1.0, 1.0, wid, device=x.device, dtype=x.dtype).view(1, 1, 1, wid).expand(b, 1, hgt, wid)
        return torch.cat([x, rows, cols], dim=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the network; see the class notes for shapes.

        Raises
        ------
        ValueError
            If ``x`` does not have :attr:`in_channels` channels.
        """
        if x.shape[1] != self.in_channels:
            raise ValueError(
                f"the light network expects {self.in_channels} input channels "
                f"(image{' + priors' if self.in_channels > 1 else ''}), got {x.shape[1]}"
            )
        e = self.text_mlp(t)
        params = self.film(e).split([2 * c for c in self._film_channels], dim=1)
        film = iter(params)

        def cond(h: torch.Tensor) -> torch.Tensor:
            gamma, beta = next(film).chunk(2, dim=1)
            return h * (1.0 + gamma[:, :, None, None]) + beta[:, :, None, None]

        u = self.unet
        x0 = cond(u.conv_0(self._coords(x)))
        x1 = cond(u.down_1(x0))
        x2 = cond(u.down_2(x1))
        x3 = cond(u.down_3(x2))
        x4 = cond(u.down_4(x3))
        u4 = cond(u.upcat_4(x4, x3))
        u3 = cond(u.upcat_3(u4, x2))
        u2 = cond(u.upcat_2(u3, x1))
        u1 = cond(u.upcat_1(u2, x0))
        mask = u.final_conv(u1)
        prob = torch.sigmoid(mask.flatten(1))
        evidence = torch.stack([prob.amax(1), prob.mean(1)], dim=1)
        pooled = torch.cat([x4.mean((2, 3)), x4.amax((2, 3)), u4.mean((2, 3)), u4.amax((2, 3)), e, evidence], dim=1)
        z = self.head(pooled)
        return {
            "mask": mask,
            "presence": self.presence(z).squeeze(1),
            "lesion": self.lesion(z),
            "certainty": self.certainty(z).squeeze(1),
        }


class LightEnsemble(nn.Module):
    """``config.ensemble`` :class:`LightILSNet` members from different random
    initialisations, trained side by side on the same batches (each on its own loss,
    see :meth:`member_outputs`); :meth:`forward` averages their probabilities.

    Averaging members is a standard way to cut the variance of a small model trained
    on little data (the paper does not use it; ours). Outputs keep the
    :class:`LightILSNet` layout and are logits of the averaged probabilities
    (``logit(mean(sigmoid))`` for mask, presence and certainty, ``log(mean(softmax))``
    for the lesion type), so thresholds apply unchanged.
    """

    def __init__(self, config: LightConfig, text_dim: int) -> None:
        super().__init__()
        self.members = nn.ModuleList(LightILSNet(config, text_dim) for _ in range(config.ensemble))
        #: Image (and prior) channels expected by :meth:`forward`.
        self.in_channels = self.members[0].in_channels

    def member_outputs(self, x: torch.Tensor, t: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """Each member's own outputs (logits), for training."""
        return [m(x, t) for m in self.members]

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> dict[str, torch.Tensor]:
        """Averaged outputs; shapes as :meth:`LightILSNet.forward`."""
        outs = self.member_outputs(x, t)
        eps = 1e-6

        def mean_logit(key: str) -> torch.Tensor:
            p = torch.stack([torch.sigmoid(o[key]) for o in outs]).mean(0).clamp(eps, 1 - eps)
            return torch.log(p) - torch.log1p(-p)

        lesion = torch.stack([torch.softmax(o["lesion"], dim=1) for o in outs]).mean(0)
        return {
            "mask": mean_logit("mask"),
            "presence": mean_logit("presence"),
            "lesion": torch.log(lesion.clamp(min=eps)),
            "certainty": mean_logit("certainty"),
        }


def build_light_network(config: LightConfig, text_dim: int) -> nn.Module:
    """:class:`LightILSNet`, or :class:`LightEnsemble` when ``config.ensemble > 1``."""
    return LightEnsemble(config, text_dim) if config.ensemble > 1 else LightILSNet(config, text_dim)
