"""A tiny synthetic stand-in of ``../shared/data/covid_qu_ex`` for the training tests:
chest-like images (two dark lungs in a bright body) with bright opacities whose
masks are the "expert" infection masks, and normal images without."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image


def write_covid_qu_ex(root: Path, n_covid: int = 24, n_normal: int = 12, size: int = 64, seed: int = 0) -> Path:
    """Write ``root/covid_qu_ex`` (images/, infection_masks/, lung_masks/, images.csv)
    and return ``root``. Opacities: one bright ellipse per affected lung."""
    rng = np.random.default_rng(seed)
    d = root / "covid_qu_ex"
    for sub in ("images", "infection_masks", "lung_masks"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    rows = []
    yy, xx = np.mgrid[0:size, 0:size]
    for k in range(n_covid + n_normal):
        covid = k < n_covid
        iid = f"covid_{k}" if covid else f"Normal_{k}"
        x = np.full((size, size), 170.0) + rng.normal(0, 12, (size, size))
        lungs = np.zeros((size, size), bool)
        top, bottom = (int(f * size) + int(rng.integers(-3, 4)) for f in (0.12, 0.88))
        lungs[top:bottom, size // 8 + int(rng.integers(-2, 3)) : size * 7 // 16] = True
        lungs[top:bottom, size * 9 // 16 : size * 7 // 8 + int(rng.integers(-2, 3))] = True
        x[lungs] = 60 + rng.normal(0, 12, lungs.sum())
        lesion = np.zeros((size, size), bool)
        if covid:
            for cx in (size * 9 // 32, size * 23 // 32):
                if rng.random() < 0.75 or not lesion.any():
                    cy = rng.uniform(0.4, 0.7) * size
                    ell = ((xx - cx) / (size * 0.08)) ** 2 + ((yy - cy) / (size * 0.14)) ** 2 <= 1
                    lesion |= ell & lungs
            x[lesion] = 150 + rng.normal(0, 4, lesion.sum())
        Image.fromarray(np.clip(x, 0, 255).astype(np.uint8)).save(d / "images" / f"{iid}.png")
        Image.fromarray(lungs.astype(np.uint8) * 255).save(d / "lung_masks" / f"{iid}.png")
        row = {
            "image_id": iid,
            "cls": "COVID-19" if covid else "Normal",
            "w": size,
            "h": size,
            "lung_mask": f"lung_masks/{iid}.png",
            "infection_mask": "",
        }
        if covid:
            Image.fromarray(lesion.astype(np.uint8) * 255).save(d / "infection_masks" / f"{iid}.png")
            row["infection_mask"] = f"infection_masks/{iid}.png"
        rows.append(row)
    with open(d / "images.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return root
