"""The ``atlas`` anomaly mapper: contrast-standardised brightness against a healthy-lung atlas.

A healthy-image estimate learned only from normal images (no lesion label), kept as
the alternative to the default learned map (:mod:`cxrils.vision.anomaly.builtin`);
docs/grounding.md gives both measured against human lesion masks. The method:

1. ``x_s`` = ``x`` smoothed by a Gaussian (``smooth_sigma_px``, scaled to the image)
   within the lungs only (normalised convolution, :func:`masked_blur`);
2. the aerated-lung reference ``dark`` = the ``dark_percentile`` of ``x_s`` in the
   lungs, and the soft-tissue reference ``soft`` = the median of ``x_s`` in the
   mediastinum, i.e. the pixels between the lungs (a horizontal closing of the lung
   mask minus the lungs); ``c = soft - dark`` is the image's own lung-to-mediastinum
   contrast and ``z = (x_s - dark) / c`` the standardised brightness;
3. a healthy lung at lung coordinates p is no brighter than ``mu(p) + healthy_sd *
   sd(p)`` (the atlas, below); the excess ``e = clip(z - mu - healthy_sd * sd, 0, 1)``
   is removed: ``x_hat = x - 255 * e`` inside the lungs.

So ``x_ano = max(x - x_hat, 0) / 255`` is the brightness above the healthy ceiling as
a fraction of the lung-to-mediastinum contrast. ``x_hat`` is a contrast-standardised
pseudo-healthy image, not a realistic edited radiograph. The heart is left as it is.

The atlas: the brightness of a normal lung depends on where one looks (bases, apices
and the lateral edge are brighter than the mid-lung). It stores, on an ``n x n`` grid
of lung coordinates, the mean ``mu`` and the spread ``sd`` over normal images of the
median standardised brightness ``z``. Lung coordinates, per lung: ``u`` = row fraction
from the lung's apex (0) to its base (1); ``v`` = column fraction from its medial (0)
to its lateral (1) edge. The patient's right lung is the image-left one.

Fitted by ``python -m cxrils.vision.anomaly.atlas --data ../shared/data`` on the 93
normal (non-nodule) JSRT images with their SCR lung masks, histogram-equalised as the
data README advises; the result ships as ``cxrils/weights/anomaly_atlas.json`` (model
card ``anomaly_atlas.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import cv2
import numpy as np
from scipy import ndimage as ndi

from cxrils.config import AnomalyConfig, Config
from cxrils.types import AnomalyResult
from cxrils.vision.anomaly.base import I_MAX, AnomalyBackendError, AnomalyMapper, anomaly_result, check_inputs

#: File name of the shipped atlas inside ``cxrils/weights``.
ATLAS_NAME = "anomaly_atlas.json"


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


def soft_tissue_reference(xs: np.ndarray, region: np.ndarray, cfg: AnomalyConfig) -> float:
    """Median grey level of the mediastinum: pixels between the lungs.

    Parameters
    ----------
    xs : numpy.ndarray, float32, shape (H, W)
        Smoothed image.
    region : numpy.ndarray, bool, shape (H, W)
        Lungs (+ heart).
    cfg : AnomalyConfig
        ``atlas_bridge_fraction`` (closing width, share of the image width) and
        ``atlas_min_reference_px``.

    Returns
    -------
    float
        Grey level in [0, 255]. Falls back to the median of the region's bounding box
        outside the region when fewer than ``atlas_min_reference_px`` mediastinum
        pixels exist.

    Raises
    ------
    ValueError
        If no pixel outside the region lies within its bounding box.
    """
    width = max(3, int(cfg.atlas_bridge_fraction * region.shape[1]) | 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (width, 1))
    bridged = cv2.morphologyEx(region.astype(np.uint8), cv2.MORPH_CLOSE, kernel) > 0
    between = bridged & ~region
    if between.sum() >= cfg.atlas_min_reference_px:
        return float(np.median(xs[between]))
    rows, cols = np.nonzero(region)
    box = np.zeros_like(region)
    box[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1] = True
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
    xs = masked_blur(x, lungs, cfg.smooth_sigma_px * max(x.shape) / cfg.reference_size_px)
    dark = float(np.percentile(xs[lungs], cfg.dark_percentile))
    contrast = soft_tissue_reference(xs, lungs, cfg) - dark
    if contrast < cfg.min_contrast:
        raise ValueError(
            f"lung-to-mediastinum contrast {contrast:.1f} grey levels is below "
            f"anomaly.min_contrast={cfg.min_contrast}: image too flat for the atlas mapper"
        )
    return ((xs - dark) / contrast).astype(np.float32), contrast


def split_lungs(lungs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a two-lung mask at the middle column of its horizontal extent.

    Returns
    -------
    right, left : numpy.ndarray, bool, shape (H, W)
        The patient's right lung (image left) and left lung (image right).
    """
    cols = np.flatnonzero(lungs.any(axis=0))
    mid = int((cols[0] + cols[-1] + 1) // 2) if cols.size else lungs.shape[1] // 2
    right = lungs.copy()
    right[:, mid:] = False
    return right, lungs & ~right


def lung_coordinates(lungs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel lung coordinates ``(u, v)`` (float32 (H, W), NaN outside the lungs):
    ``u`` apex (0) to base (1), ``v`` medial (0) to lateral (1), per lung (patient
    right = image left, whose lateral edge is its leftmost column)."""
    u = np.full(lungs.shape, np.nan, np.float32)
    v = np.full(lungs.shape, np.nan, np.float32)
    for mask, lateral_is_image_left in zip(split_lungs(lungs), (True, False)):
        rows, cols = np.nonzero(mask)
        if rows.size == 0:
            continue
        u[mask] = (rows - rows.min()) / max(1, rows.max() - rows.min())
        frac = (cols - cols.min()) / max(1, cols.max() - cols.min())
        v[mask] = 1 - frac if lateral_is_image_left else frac
    return u, v


@dataclass
class HealthyLungAtlas:
    """``mu`` and ``sd``: float32 (n, n) grids indexed by (u bin, v bin)."""

    mu: np.ndarray
    sd: np.ndarray
    source: str = ""

    def lookup(self, lungs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``mu`` and ``sd`` at every lung pixel (bilinear between bin centres), as
        float32 (H, W) arrays, 0 outside the lungs."""
        n = self.mu.shape[0]
        u, v = lung_coordinates(lungs)
        coords = np.stack([u[lungs] * n - 0.5, v[lungs] * n - 0.5])
        out = []
        for grid in (self.mu, self.sd):
            full = np.zeros(lungs.shape, np.float32)
            full[lungs] = ndi.map_coordinates(grid, coords, order=1, mode="nearest")
            out.append(full)
        return out[0], out[1]

    def to_json(self) -> str:
        """JSON text: ``{"mu": [[...]], "sd": [[...]], "source": "..."}``, 4 decimals."""

        def rows(grid: np.ndarray) -> list[list[float]]:
            return [[round(float(v), 4) for v in row] for row in grid]

        return json.dumps({"mu": rows(self.mu), "sd": rows(self.sd), "source": self.source})

    @classmethod
    def load(cls, path: str | Path | None = None) -> HealthyLungAtlas:
        """Load the atlas (default: the one shipped in the package).

        Raises
        ------
        ValueError
            If the file is missing or malformed.
        """
        p = Path(path) if path else Path(str(resources.files("cxrils") / "weights" / ATLAS_NAME))
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            mu, sd = np.asarray(d["mu"], np.float32), np.asarray(d["sd"], np.float32)
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"{p}: not a usable healthy-lung atlas: {err}") from err
        if mu.ndim != 2 or mu.shape[0] != mu.shape[1] or sd.shape != mu.shape or not np.isfinite(mu).all():
            raise ValueError(f"{p}: atlas grids must be finite, square and of equal shape")
        return cls(mu, sd, d.get("source", ""))


def fit_atlas(z_maps: list[np.ndarray], lung_masks: list[np.ndarray], n: int = 8) -> HealthyLungAtlas:
    """Fit the atlas from standardised-brightness maps of normal images.

    Per image and bin the median ``z`` is taken; ``mu`` / ``sd`` are the mean and
    standard deviation of these medians over images. Empty bins take the value of
    their nearest filled bin; ``sd`` is floored at half its median (few samples).
    """
    per_bin: list[list[float]] = [[] for _ in range(n * n)]
    for z, lungs in zip(z_maps, lung_masks):
        u, v = lung_coordinates(lungs)
        b = np.clip((u[lungs] * n).astype(int), 0, n - 1) * n + np.clip((v[lungs] * n).astype(int), 0, n - 1)
        zl = z[lungs]
        for i in np.unique(b):
            per_bin[i].append(float(np.median(zl[b == i])))
    mu = np.array([np.mean(s) if s else np.nan for s in per_bin], np.float32).reshape(n, n)
    sd = np.array([np.std(s) if len(s) > 1 else np.nan for s in per_bin], np.float32).reshape(n, n)
    for grid in (mu, sd):
        missing = ~np.isfinite(grid)
        if missing.any():
            idx = ndi.distance_transform_edt(missing, return_distances=False, return_indices=True)
            grid[...] = grid[tuple(idx)]
    sd = np.maximum(sd, 0.5 * float(np.median(sd)))
    return HealthyLungAtlas(mu, sd)


class AtlasAnomalyMapper(AnomalyMapper):
    """CPU anomaly mapper (see module docstring for the method).

    Parameters
    ----------
    cfg : AnomalyConfig
        ``smooth_sigma_px``, ``dark_percentile``, ``healthy_sd``, ``min_contrast``,
        ``atlas_bridge_fraction``, ``atlas_min_reference_px``, ``atlas_path`` (empty:
        the atlas shipped in the package).

    Raises
    ------
    AnomalyBackendError
        If the atlas cannot be loaded.
    """

    name = "atlas"
    version = "atlas-1"

    def __init__(self, cfg: AnomalyConfig | None = None) -> None:
        self.cfg = cfg or AnomalyConfig()
        try:
            self.atlas = HealthyLungAtlas.load(self.cfg.atlas_path or None)
        except ValueError as err:
            raise AnomalyBackendError(f"atlas anomaly mapper: {err}") from err

    @classmethod
    def from_config(cls, cfg: Config) -> AtlasAnomalyMapper:
        """Build from the ``anomaly`` section of a :class:`~cxrils.config.Config`."""
        return cls(cfg.anomaly)

    @classmethod
    def weight_files(cls, cfg: Config) -> list[str]:
        """The file :meth:`from_config` loads: ``anomaly.atlas_path``, else the shipped atlas."""
        return [cfg.anomaly.atlas_path or str(resources.files("cxrils") / "weights" / ATLAS_NAME)]

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


def main() -> None:  # pragma: no cover - writes the shipped file
    """Fit the shipped healthy-lung atlas on the normal JSRT images (``--data``) and
    write it to ``--out``."""
    import argparse

    from PIL import Image

    from cxrils.sources.jsrt import read_jsrt_images, read_jsrt_non_nodules

    ap = argparse.ArgumentParser(description="Fit the healthy-lung atlas on normal JSRT images.")
    ap.add_argument("--data", type=Path, required=True, help="../shared/data")
    ap.add_argument("--out", type=Path, default=Path(str(resources.files("cxrils") / "weights" / ATLAS_NAME)))
    args = ap.parse_args()
    cfg = AnomalyConfig()
    zs, masks = [], []
    images = {r.image_id: r for r in read_jsrt_images(args.data)}
    for n in read_jsrt_non_nodules(args.data):
        r = images[n.image_id]
        x = cv2.equalizeHist(np.asarray(Image.open(r.image_path).convert("L")))
        lungs = sum(np.asarray(Image.open(p).convert("L")) > 127 for p in (r.right_lung, r.left_lung)) > 0
        zs.append(standardised_brightness(x, lungs, cfg)[0])
        masks.append(lungs)
    atlas = fit_atlas(zs, masks)
    atlas.source = f"JSRT non-nodule images (n={len(zs)}), SCR lung masks, histogram-equalised"
    args.out.write_text(atlas.to_json() + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":  # pragma: no cover
    main()
