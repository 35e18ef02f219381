"""Builtin anomaly mapper: contrast-standardised brightness against a healthy-lung atlas.

The paper (section 3.1 step 2) removes lesions with RadEdit, a diffusion editor.
Without a GPU or its weights, this backend estimates the healthy image from a
statistical model of normal lungs (docs/grounding.md):

1. ``x_s`` = ``x`` smoothed by a Gaussian (``smooth_sigma_px``, scaled to the image)
   within the lungs only (normalised convolution, :func:`masked_blur`);
2. the aerated-lung reference ``dark`` = the ``dark_percentile`` of ``x_s`` in the
   lungs, and the soft-tissue reference ``soft`` = the median of ``x_s`` in the
   mediastinum, i.e. the pixels between the lungs (a horizontal closing of the lung
   mask minus the lungs); ``c = soft - dark`` is the image's own lung-to-mediastinum
   contrast and ``z = (x_s - dark) / c`` the standardised brightness;
3. a healthy lung at lung coordinates p is no brighter than ``mu(p) + healthy_sd *
   sd(p)`` (the atlas of :mod:`cxrils.vision.anomaly.atlas`, fitted on normal JSRT
   images); the excess ``e = clip(z - mu - healthy_sd * sd, 0, 1)`` is removed:
   ``x_hat = x - 255 * e`` inside the lungs.

So ``x_ano = max(x - x_hat, 0) / 255`` is the brightness above the healthy ceiling as
a fraction of the lung-to-mediastinum contrast, which makes ``tau_ano`` mean the same
on images of very different contrast. ``x_hat`` is therefore a contrast-standardised
pseudo-healthy image, not a realistic edited radiograph (the ``radedit`` backend gives
one). The heart, part of the paper's edit region, is left as it is.
"""

from __future__ import annotations

import cv2
import numpy as np

from cxrils.config import AnomalyConfig, Config
from cxrils.types import AnomalyResult
from cxrils.vision.anomaly.atlas import HealthyLungAtlas
from cxrils.vision.anomaly.base import I_MAX, AnomalyBackendError, anomaly_result, check_inputs

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


def standardised_brightness(x: np.ndarray, lungs: np.ndarray, cfg: AnomalyConfig) -> tuple[np.ndarray, float]:
    """``z = (x_s - dark) / c`` (float32 (H, W)) and the contrast ``c`` in grey levels
    (module docstring, steps 1-2).

    Raises
    ------
    ValueError
        When ``c`` is below ``cfg.min_contrast`` (a blank or saturated image, or a
        failed lung mask).
    """
    xs = masked_blur(x, lungs, cfg.smooth_sigma_px * max(x.shape) / REFERENCE_SIZE)
    dark = float(np.percentile(xs[lungs], cfg.dark_percentile))
    contrast = soft_tissue_reference(xs, lungs) - dark
    if contrast < cfg.min_contrast:
        raise ValueError(f"lung-to-mediastinum contrast {contrast:.1f} grey levels is below "
                         f"anomaly.min_contrast={cfg.min_contrast}: image too flat for the builtin mapper")
    return ((xs - dark) / contrast).astype(np.float32), contrast


class BuiltinAnomalyMapper:
    """CPU anomaly mapper (see module docstring for the method).

    Parameters
    ----------
    cfg : AnomalyConfig
        ``smooth_sigma_px``, ``dark_percentile``, ``healthy_sd``, ``min_contrast``,
        ``atlas_path`` (empty: the atlas shipped in the package).

    Raises
    ------
    AnomalyBackendError
        If the atlas cannot be loaded.
    """

    name = "builtin"
    version = "atlas-1"

    def __init__(self, cfg: AnomalyConfig | None = None) -> None:
        self.cfg = cfg or AnomalyConfig()
        try:
            self.atlas = HealthyLungAtlas.load(self.cfg.atlas_path or None)
        except ValueError as err:
            raise AnomalyBackendError(f"builtin anomaly mapper: {err}") from err

    @classmethod
    def from_config(cls, cfg: Config) -> "BuiltinAnomalyMapper":
        """Build from the ``anomaly`` section of a :class:`~cxrils.config.Config`."""
        return cls(cfg.anomaly)

    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        """See :meth:`cxrils.vision.anomaly.AnomalyMapper.map`. Only ``lungs`` (default:
        the whole edit region) is modelled and edited; the heart keeps ``x_hat == x``.
        The lungs are split into the patient's right (image left) and left lung at the
        middle column of their extent, for the atlas coordinates.

        Raises
        ------
        ValueError
            On bad inputs, or when the lung-to-mediastinum contrast is below
            ``min_contrast`` grey levels.
        """
        edit = check_inputs(x, edit_region)
        region = edit if lungs is None else edit & check_inputs(x, lungs)
        if not region.any():
            raise ValueError("lungs and edit_region do not overlap")
        z, _ = standardised_brightness(x, region, self.cfg)
        mu, sd = self.atlas.lookup(region)
        excess = np.where(region, np.clip(z - mu - self.cfg.healthy_sd * sd, 0.0, 1.0), 0.0)
        x_hat = np.clip(np.rint(x.astype(np.float32) - I_MAX * excess), 0, 255).astype(np.uint8)
        return anomaly_result(x, x_hat, edit, self.name, self.version)
