"""PNG encodings the service returns: the 8-bit image, the mask and an overlay."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

#: Overlay colour of the mask (RGB) and its default opacity in [0, 1].
OVERLAY_RGB = (255, 64, 32)
OVERLAY_ALPHA = 0.45


def png_bytes(array: np.ndarray) -> bytes:
    """Encode a uint8 (H, W) or (H, W, 3) array as PNG bytes."""
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def overlay(x: np.ndarray, mask: np.ndarray, alpha: float = OVERLAY_ALPHA) -> np.ndarray:
    """Blend ``mask`` onto the gray image ``x``.

    Parameters
    ----------
    x : uint8 (H, W)
    mask : bool (H, W)
    alpha : float in [0, 1]

    Returns
    -------
    uint8 (H, W, 3) RGB image.
    """
    rgb = np.repeat(x[:, :, None], 3, axis=2).astype(np.float32)
    colour = np.array(OVERLAY_RGB, dtype=np.float32)
    rgb[mask] = (1 - alpha) * rgb[mask] + alpha * colour
    return np.clip(rgb + 0.5, 0, 255).astype(np.uint8)


def b64_png(array: np.ndarray) -> str:
    """PNG of ``array`` as base64 text (for JSON responses)."""
    return base64.b64encode(png_bytes(array)).decode("ascii")
