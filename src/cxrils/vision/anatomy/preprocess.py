"""Image preparation shared by training and inference of the builtin anatomy model.

The network sees a square ``size`` x ``size`` canvas: the image is scaled so that its
longer side fits (aspect ratio kept), contrast-equalised with CLAHE (JSRT images are
low contrast), and padded with zeros ("letterbox"). :class:`Letterbox` remembers the
geometry so that network outputs can be mapped back to the input's own size.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from cxrils.config import AnatomyConfig


@dataclass(frozen=True)
class Letterbox:
    """Geometry of an image placed on a square canvas.

    Attributes
    ----------
    shape : (int, int)
        (H, W) of the original image, pixels.
    size : int
        Side of the square canvas, pixels.
    top, left : int
        Offset of the scaled image on the canvas (rows, columns).
    height, width : int
        Size of the scaled image on the canvas.
    """

    shape: tuple[int, int]
    size: int
    top: int
    left: int
    height: int
    width: int

    @classmethod
    def fit(cls, shape: tuple[int, int], size: int) -> Letterbox:
        """Geometry that fits an (H, W) image into a ``size`` canvas, centred."""
        h, w = int(shape[0]), int(shape[1])
        if h < 1 or w < 1:
            raise ValueError(f"image shape must be positive, got {shape}")
        scale = size / max(h, w)
        height, width = max(1, round(h * scale)), max(1, round(w * scale))
        return cls((h, w), size, (size - height) // 2, (size - width) // 2, height, width)

    def forward(self, image: np.ndarray, interpolation: int = cv2.INTER_AREA) -> np.ndarray:
        """Place an (H, W) array on the canvas; returns (size, size) of the same dtype,
        zeros outside the image."""
        scaled = cv2.resize(image, (self.width, self.height), interpolation=interpolation)
        out = np.zeros((self.size, self.size), dtype=image.dtype)
        out[self.top : self.top + self.height, self.left : self.left + self.width] = scaled
        return out

    def inverse(self, canvas: np.ndarray) -> np.ndarray:
        """Map a (C, size, size) float32 array back to (C, H, W) of the original image
        (bilinear)."""
        crop = canvas[:, self.top : self.top + self.height, self.left : self.left + self.width]
        h, w = self.shape
        return np.stack([cv2.resize(c, (w, h), interpolation=cv2.INTER_LINEAR) for c in crop])


def equalise(x: np.ndarray, cfg: AnatomyConfig | None = None) -> np.ndarray:
    """CLAHE contrast equalisation of a uint8 (H, W) image (returns uint8 (H, W)) with
    ``cfg.clahe_clip_limit`` and a ``cfg.clahe_tile_grid`` x ``cfg.clahe_tile_grid`` grid
    (:class:`cxrils.config.AnatomyConfig`, ours; defaults when ``cfg`` is None)."""
    cfg = cfg or AnatomyConfig()
    grid = int(cfg.clahe_tile_grid)
    clahe = cv2.createCLAHE(clipLimit=float(cfg.clahe_clip_limit), tileGridSize=(grid, grid))
    return clahe.apply(np.ascontiguousarray(x))


def prepare(x: np.ndarray, size: int, cfg: AnatomyConfig | None = None) -> tuple[np.ndarray, Letterbox]:
    """Network input for one image.

    Parameters
    ----------
    x : numpy.ndarray, uint8, shape (H, W)
        Grayscale image, [0, 255].
    size : int
        Canvas side in pixels (the model's input size).
    cfg : AnatomyConfig, optional
        CLAHE settings (:func:`equalise`); the defaults, which the shipped weights were
        trained with, when None.

    Returns
    -------
    canvas : numpy.ndarray, float32, shape (size, size)
        Equalised image in [0, 1], letterboxed with zeros.
    box : Letterbox
        Geometry to map outputs back to (H, W).

    Raises
    ------
    ValueError
        If ``x`` is not a non-empty 2-D uint8 array.
    """
    if not isinstance(x, np.ndarray) or x.ndim != 2 or x.dtype != np.uint8 or x.size == 0:
        raise ValueError(f"prepare() needs a non-empty uint8 (H, W) array, got {getattr(x, 'shape', x)!r}")
    box = Letterbox.fit(x.shape, size)
    scaled = cv2.resize(x, (box.width, box.height), interpolation=cv2.INTER_AREA)
    canvas = np.zeros((size, size), dtype=np.float32)
    canvas[box.top : box.top + box.height, box.left : box.left + box.width] = equalise(scaled, cfg) / 255.0
    return canvas, box
