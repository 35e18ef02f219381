"""Encodings the service returns: PNGs of the image, the mask and an overlay, base64."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from cxrils.overlay import mask_overlay


def png_bytes(array: np.ndarray) -> bytes:
    """Encode a uint8 (H, W) or (H, W, 3) array as PNG bytes."""
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def overlay(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``x`` uint8 (H, W) with ``mask`` bool (H, W) tinted, a legend and R/L side
    markers (:func:`cxrils.overlay.mask_overlay`); uint8 (H, W, 3) RGB."""
    return mask_overlay(x, mask, label="predicted mask")


def b64(data: bytes) -> str:
    """Bytes as base64 text (for JSON responses)."""
    return base64.b64encode(data).decode("ascii")


def b64_png(array: np.ndarray) -> str:
    """PNG of ``array`` as base64 text (for JSON responses)."""
    return b64(png_bytes(array))
