"""Builtin anomaly mapper: a classical, contrast-standardised healthy-lung ceiling.

The paper (section 3.1 step 2) removes lesions with RadEdit, a diffusion editor.
Without a GPU or its weights, this backend estimates the healthy image by the
simplest model that ranked COVID-19 severity well (docs/grounding.md):

1. ``x_s`` = ``x`` smoothed by a Gaussian (``smooth_sigma_px``, scaled to the image)
   within the edit region only (normalised convolution, :func:`masked_blur`);
2. the aerated-lung reference ``dark`` = the ``dark_percentile`` of ``x_s`` in the
   lungs (the edit region when no lung mask is given), and the soft-tissue reference ``soft`` = the median of ``x_s`` in the
   mediastinum, i.e. the pixels between the lungs (a horizontal closing of the edit
   region minus the region); ``c = soft - dark`` is the image's own lung-to-mediastinum
   contrast in grey levels;
3. a healthy lung is no brighter than ``H = dark + healthy_level * c``; the removed
   hyperintensity is ``max(x_s - H, 0)`` expressed in units of ``c`` and written back on
   the 8-bit scale: ``x_hat = x - 255 * max(x_s - H, 0) / c`` inside the lungs. The
   heart, part of the paper's edit region, is left as it is (``x_hat == x``): this
   model of healthy *lung* says nothing about the heart, which is normally bright.

So ``x_ano = max(x - x_hat, 0) / 255`` is the excess brightness as a fraction of the
lung-to-mediastinum contrast, which makes ``tau_ano`` mean the same on images of very
different contrast. ``x_hat`` is therefore a contrast-standardised pseudo-healthy
image, not a realistic edited radiograph (the ``radedit`` backend gives one).
"""

from __future__ import annotations

import cv2
import numpy as np

from cxrils.config import AnomalyConfig, Config
from cxrils.types import AnomalyResult
from cxrils.vision.anomaly.base import I_MAX, anomaly_result, check_inputs

#: Reference image size for pixel parameters (longest side, pixels).
REFERENCE_SIZE = 512
#: Width of the horizontal closing that bridges the lungs, fraction of image width (ours).
MEDIASTINUM_BRIDGE_FRAC = 0.3
#: Fewest mediastinum pixels for a reliable soft-tissue reference (ours).
MIN_REFERENCE_PX = 50


def masked_blur(x: np.ndarray, region: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing of ``x`` inside ``region`` only (normalised convolution:
    ``blur(x * region) / blur(region)``), so bright tissue outside the lungs does not
    leak into the lung edges; outside the region, the plain blur.

    Parameters
    ----------
    x : numpy.ndarray, shape (H, W)
        Any real dtype (grey levels, or x_ano).
    region : numpy.ndarray, bool, shape (H, W)
    sigma : float
        Gaussian sigma in pixels; <= 0 returns ``x`` as float32.

    Returns
    -------
    numpy.ndarray, float32, shape (H, W)
    """
    xf = x.astype(np.float32)
    if sigma <= 0:
        return xf
    w = region.astype(np.float32)
    num = cv2.GaussianBlur(xf * w, (0, 0), sigma)
    den = cv2.GaussianBlur(w, (0, 0), sigma)
    plain = cv2.GaussianBlur(xf, (0, 0), sigma)
    return np.where(region & (den > 1e-3), num / np.maximum(den, 1e-3), plain).astype(np.float32)


def soft_tissue_reference(xs: np.ndarray, region: np.ndarray) -> float:
    """Median grey level of the mediastinum: pixels between the lungs.

    Parameters
    ----------
    xs : numpy.ndarray, float32, shape (H, W)
        Smoothed image.
    region : numpy.ndarray, bool, shape (H, W)
        Lungs (+ heart).

    Returns
    -------
    float
        Grey level in [0, 255]. Falls back to the median of the region's bounding box
        outside the region when fewer than 50 mediastinum pixels exist.

    Raises
    ------
    ValueError
        If no pixel outside the region lies within its bounding box.
    """
    width = max(3, int(MEDIASTINUM_BRIDGE_FRAC * region.shape[1]) | 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (width, 1))
    bridged = cv2.morphologyEx(region.astype(np.uint8), cv2.MORPH_CLOSE, kernel) > 0
    between = bridged & ~region
    if between.sum() >= MIN_REFERENCE_PX:
        return float(np.median(xs[between]))
    rows, cols = np.nonzero(region)
    box = np.zeros_like(region)
    box[rows.min():rows.max() + 1, cols.min():cols.max() + 1] = True
    around = box & ~region
    if not around.any():
        raise ValueError("no soft-tissue reference: the edit region fills its whole bounding box")
    return float(np.median(xs[around]))


class BuiltinAnomalyMapper:
    """CPU anomaly mapper (see module docstring for the method).

    Parameters
    ----------
    cfg : AnomalyConfig
        ``smooth_sigma_px``, ``dark_percentile``, ``healthy_level``, ``min_contrast``.
    """

    name = "builtin"
    version = "classical-1"

    def __init__(self, cfg: AnomalyConfig | None = None) -> None:
        self.cfg = cfg or AnomalyConfig()

    @classmethod
    def from_config(cls, cfg: Config) -> "BuiltinAnomalyMapper":
        """Build from the ``anomaly`` section of a :class:`~cxrils.config.Config`."""
        return cls(cfg.anomaly)

    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        """See :meth:`cxrils.vision.anomaly.AnomalyMapper.map`. Only ``lungs`` (default:
        the whole edit region) is modelled and edited; the heart keeps ``x_hat == x``.

        Raises
        ------
        ValueError
            On bad inputs, or when the lung-to-mediastinum contrast is below
            ``min_contrast`` grey levels (a blank or saturated image).
        """
        edit = check_inputs(x, edit_region)
        region = edit if lungs is None else edit & check_inputs(x, lungs)
        if not region.any():
            raise ValueError("lungs and edit_region do not overlap")
        sigma = self.cfg.smooth_sigma_px * max(x.shape) / REFERENCE_SIZE
        xs = masked_blur(x, region, sigma)
        dark = float(np.percentile(xs[region], self.cfg.dark_percentile))
        contrast = soft_tissue_reference(xs, region) - dark
        if contrast < self.cfg.min_contrast:
            raise ValueError(f"lung-to-mediastinum contrast {contrast:.1f} grey levels is below "
                             f"anomaly.min_contrast={self.cfg.min_contrast}: image too flat for the builtin mapper")
        healthy = dark + self.cfg.healthy_level * contrast
        excess = np.clip((xs - healthy) / contrast, 0.0, 1.0)
        x_hat = np.clip(np.rint(x.astype(np.float32) - I_MAX * excess), 0, 255).astype(np.uint8)
        x_hat = np.where(region, x_hat, x)
        return anomaly_result(x, x_hat, edit, self.name, self.version)
