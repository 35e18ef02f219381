"""Healthy-lung brightness atlas of the builtin anomaly mapper.

The brightness of a normal lung depends on where one looks: bases, apices and the
lateral edge are brighter than the mid-lung (soft tissue, diaphragm, ribs overlap).
The atlas stores, on an ``n x n`` grid of lung coordinates, the mean ``mu`` and the
spread ``sd`` over normal images of the median *standardised brightness*

    z = (x_s - dark) / (soft - dark)

where ``x_s`` is the image smoothed inside the lungs, ``dark`` the 1st percentile of
``x_s`` in the lungs (aerated lung) and ``soft`` the median of the mediastinum
(:mod:`cxrils.vision.anomaly.builtin`). Lung coordinates, per lung: ``u`` = row
fraction from the lung's apex (0) to its base (1); ``v`` = column fraction from its
medial (0) to its lateral (1) edge. The patient's right lung is the image-left one.

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

import numpy as np
from scipy import ndimage as ndi

#: File name of the shipped atlas inside ``cxrils/weights``.
ATLAS_NAME = "anomaly_atlas.json"


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
    def load(cls, path: str | Path | None = None) -> "HealthyLungAtlas":
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


def main() -> None:  # pragma: no cover - writes the shipped file
    import argparse

    import cv2
    import pandas as pd
    from PIL import Image

    from cxrils.config import AnomalyConfig
    from cxrils.vision.anomaly.builtin import standardised_brightness

    ap = argparse.ArgumentParser(description="Fit the healthy-lung atlas on normal JSRT images.")
    ap.add_argument("--data", type=Path, required=True, help="../shared/data")
    ap.add_argument("--out", type=Path, default=Path(str(resources.files("cxrils") / "weights" / ATLAS_NAME)))
    args = ap.parse_args()
    d = args.data / "jsrt_scr"
    cfg = AnomalyConfig()
    zs, masks = [], []
    for image_id in pd.read_csv(d / "non_nodules.csv").image_id:
        x = cv2.equalizeHist(np.asarray(Image.open(d / "images" / f"{image_id}.png").convert("L")))
        lungs = sum(np.asarray(Image.open(d / "masks" / s / f"{image_id}.png").convert("L")) > 127
                    for s in ("right_lung", "left_lung")) > 0
        zs.append(standardised_brightness(x, lungs, cfg)[0])
        masks.append(lungs)
    atlas = fit_atlas(zs, masks)
    atlas.source = f"JSRT non-nodule images (n={len(zs)}), SCR lung masks, histogram-equalised"
    args.out.write_text(atlas.to_json() + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":  # pragma: no cover
    main()
