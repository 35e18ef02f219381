"""Files of one prediction: mask PNG, mask RLE JSON, answer, overlay."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cxrils.fsutil import atomic_path, atomic_write_json
from cxrils.masks import encode_rle
from cxrils.models.base import Prediction

#: Overlay colour (RGB) and opacity of the mask on the image (ours).
OVERLAY_RGB = (255, 64, 64)
OVERLAY_ALPHA = 0.45


def overlay(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Blend the mask in :data:`OVERLAY_RGB` over the gray image.

    Parameters
    ----------
    x : ndarray of uint8, shape (H, W)
    mask : ndarray of bool, shape (H, W)

    Returns
    -------
    ndarray of uint8, shape (H, W, 3)
    """
    rgb = np.repeat(x[:, :, None], 3, axis=2).astype(np.float32)
    colour = np.asarray(OVERLAY_RGB, dtype=np.float32)
    rgb[mask] = (1 - OVERLAY_ALPHA) * rgb[mask] + OVERLAY_ALPHA * colour
    return rgb.round().astype(np.uint8)


def write_prediction(out_dir: str | Path, x: np.ndarray, instruction: str, pred: Prediction) -> Path:
    """Write ``mask.png`` (0/255), ``prediction.json`` (instruction, answer,
    presence_score, mask as COCO RLE) and ``overlay.png`` into ``out_dir`` atomically."""
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "mask.png", suffix=".png") as tmp:
        Image.fromarray(pred.mask.astype(np.uint8) * 255).save(tmp, format="PNG")
    with atomic_path(out / "overlay.png", suffix=".png") as tmp:
        Image.fromarray(overlay(x, pred.mask)).save(tmp, format="PNG")
    atomic_write_json(out / "prediction.json", {
        "instruction": instruction, "answer": pred.answer, "presence_score": float(pred.presence_score),
        "mask": dict(encode_rle(pred.mask)), "mask_area": int(pred.mask.sum()),
    })
    return out
