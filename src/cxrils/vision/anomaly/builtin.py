"""Builtin anomaly mapper: a lesion map learned from expert-verified lesion masks.

The paper (section 3.1 step 2) removes lesions with RadEdit, a diffusion editor, and
takes ``x_ano = (x - x_hat) / I_max``. Without a GPU or RadEdit's weights this backend
estimates what to remove with a small segmentation network
(:class:`cxrils.vision.lesion_nets.LesionSegNet`; it reads the image, and the lung mask
when trained with ``AnomalyTrainConfig.lung_input``) trained by ``cxrils train-anomaly``
(:mod:`cxrils.training.anomaly_train`) on the expert-verified COVID-19 infection masks
and the normal images of one half of the COVID-QU-Ex tuning part. With ``p`` its lesion
probability (resized to the image) and ``p_star`` its best-IoU threshold on the
training role's validation images (stored with the weights)::

    x_hat = x - 255 * clip(builtin_reference_tau * p / p_star, 0, 1)   inside the lungs
    x_ano = max(x - x_hat, 0) / 255

so ``A = x_ano >= tau_ano`` is ``{p >= p_star}`` at Table 7's ``tau_ano`` = 0.10
(edema's 0.01: ``p >= p_star / 10``). ``x_hat`` is the image with the predicted lesion
brightness taken out (about ``0.1 / p_star * 255`` grey levels where the network is
sure), a pseudo-healthy image in the paper's sense but not a realistic radiograph;
``x_ano`` is a scaled lesion probability, not a measured intensity difference. The
heart and the mediastinum are never edited, so the normal heart border cannot light
up. Weights ship in the package (``cxrils/weights/anomaly_builtin.safetensors``, model
card ``anomaly_builtin.md``).

Independence from the detector (Algorithm 1's c3 against c2): the detector
(:mod:`cxrils.vision.detection.builtin`) is another network with another target (box
centres and sizes), trained on the other half of the tuning images; neither reads the
other's output (docs/grounding.md).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import cv2
import numpy as np

from cxrils.config import AnomalyConfig, Config
from cxrils.fsutil import sha256_file
from cxrils.types import AnomalyResult
from cxrils.vision.anomaly.base import I_MAX, AnomalyBackendError, AnomalyMapper, anomaly_result, check_inputs
from cxrils.vision.lesion_nets import LesionSegNet, load_weights, network_input, network_mask

#: File name of the shipped weights inside ``cxrils/weights``.
WEIGHTS_NAME = "anomaly_builtin.safetensors"


def default_weights() -> Path:
    """Path of the anomaly-map weights shipped in the package."""
    return Path(str(resources.files("cxrils") / "weights" / WEIGHTS_NAME))


def _build(meta: dict) -> LesionSegNet:
    return LesionSegNet(tuple(meta["arch"]["widths"]), in_channels=int(meta["arch"].get("in_channels", 1)))


class BuiltinAnomalyMapper(AnomalyMapper):
    """The learned lesion map (see module docstring).

    Parameters
    ----------
    cfg : AnomalyConfig
        ``builtin_weights`` (empty: shipped) and ``builtin_reference_tau``.

    Raises
    ------
    AnomalyBackendError
        If the weights are missing, do not fit the network or lack ``p_star``.
    """

    name = "builtin"

    def __init__(self, cfg: AnomalyConfig | None = None) -> None:
        import torch

        self.cfg = cfg or AnomalyConfig()
        path = Path(self.cfg.builtin_weights) if self.cfg.builtin_weights else default_weights()
        self.net, meta = load_weights(path, _build, AnomalyBackendError)
        try:
            self.input_size = int(meta["arch"]["input_size"])
            self.p_star = float(meta["training"]["p_star"])
        except (KeyError, TypeError, ValueError) as err:
            raise AnomalyBackendError(f"{path}: weights lack their input size or p_star: {err}") from err
        if not 0 < self.p_star < 1:
            raise AnomalyBackendError(f"{path}: p_star {self.p_star} is not in (0, 1)")
        self.version = "lesionseg-" + sha256_file(path)[:12]
        self._torch = torch

    @classmethod
    def from_config(cls, cfg: Config) -> BuiltinAnomalyMapper:
        """Build from the ``anomaly`` section of a :class:`~cxrils.config.Config`."""
        return cls(cfg.anomaly)

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The file :meth:`from_config` loads: ``anomaly.builtin_weights``, else the shipped one."""
        return [cfg.anomaly.builtin_weights or str(default_weights())]

    def probability(self, x: np.ndarray, lungs: np.ndarray | None = None) -> np.ndarray:
        """Lesion probability ``p`` of every pixel of ``x`` uint8 (H, W): float32 (H, W)
        in [0, 1] (network output at ``input_size / 2``, bilinearly resized). A network
        with a lung channel reads ``lungs`` (bool (H, W); required for it)."""
        torch = self._torch
        s = self.input_size
        channels = [network_input(x, s)]
        if self.net.in_channels == 2:
            if lungs is None:
                raise ValueError("this lesion map reads the lung mask: pass lungs")
            channels.append(network_mask(lungs, s))
        with torch.inference_mode():
            logits = self.net(torch.from_numpy(np.stack(channels))[None])[0, 0]
        p = torch.sigmoid(logits).numpy().astype(np.float32)
        return cv2.resize(p, (x.shape[1], x.shape[0]), interpolation=cv2.INTER_LINEAR)

    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        """See :meth:`cxrils.vision.anomaly.AnomalyMapper.map`. Only ``lungs`` (default:
        the whole edit region) is edited; the heart keeps ``x_hat == x``.

        Raises
        ------
        ValueError
            On bad inputs, or when ``lungs`` and ``edit_region`` do not overlap.
        """
        edit = check_inputs(x, edit_region)
        region = edit if lungs is None else edit & check_inputs(x, lungs)
        if not region.any():
            raise ValueError("lungs and edit_region do not overlap")
        removed = np.clip(self.cfg.builtin_reference_tau * self.probability(x, region) / self.p_star, 0.0, 1.0)
        x_hat = np.clip(np.rint(x.astype(np.float32) - I_MAX * np.where(region, removed, 0.0)), 0, 255)
        return anomaly_result(x, x_hat.astype(np.uint8), edit, self.name, self.version)
