"""Synthetic findings drawn on frontal chest radiographs, for training-time augmentation.

The public data with human lesion masks (``../shared/data``) holds COVID-19 airspace
opacity only, on mostly AP portable films, and its only hearts are JSRT's normal PA
hearts. To make the built-in networks respond to what an ordinary adult radiograph shows
(a pleural effusion blunting a costophrenic angle, a lobar consolidation, plate
atelectasis, an enlarged heart, tubes and wires), training draws such findings onto real
images whose anatomy is known, with the drawn region as the target. Nothing here is used
at inference, and no measurement of quality is taken on synthetic images: the benchmarks
score the networks on real expert labels (``benchmarks/human_masks.py``,
``benchmarks/anatomy.py``). All parameters are ours and live in
:class:`cxrils.config.SyntheticConfig`.

Images are float32 (H, W) in [0, 1] (the networks' canvases), brighter = denser, as a
MONOCHROME2 display. Masks are bool (H, W). "right"/"left" are the patient's sides: on
a frontal image the patient's right lung lies on the image's left (small column
indices), so its lateral side is towards column 0 and the left lung's towards the last
column.
"""

from __future__ import annotations

import cv2
import numpy as np

from cxrils.config import SyntheticConfig


def _rows_cols(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))


def effusion_region(lung: np.ndarray, side: str, rng: np.random.Generator, cfg: SyntheticConfig) -> np.ndarray:
    """The part of one lung that a free pleural effusion of an upright film fills.

    The fluid surface lies ``h`` of the lung's height above the lung's lowest row and
    rises towards the chest wall (the meniscus) by ``m`` of the height at the lateral
    edge, quadratically in the distance from the lung's medial edge; the region is the
    lung below that surface. A small ``h`` blunts only the costophrenic angle. ``h`` is
    drawn from ``cfg.effusion_height``, ``m`` from ``cfg.effusion_meniscus``.

    Parameters
    ----------
    lung : numpy.ndarray, bool, shape (H, W)
        The full extent of the patient's ``side`` lung.
    side : {"right", "left"}
        Patient side (the right lung is on the image's left, lateral = column 0).
    rng : numpy.random.Generator
    cfg : SyntheticConfig

    Returns
    -------
    numpy.ndarray, bool, shape (H, W)
        Inside ``lung``; empty when the lung is empty.

    Raises
    ------
    ValueError
        If ``side`` is not "right" or "left".
    """
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    rows, cols = _rows_cols(lung)
    if rows.size == 0:
        return np.zeros(lung.shape, dtype=bool)
    top, bottom = int(rows[0]), int(rows[-1])
    height = bottom - top + 1
    h = rng.uniform(*cfg.effusion_height) * height
    m = rng.uniform(*cfg.effusion_meniscus) * height
    c0, c1 = int(cols[0]), int(cols[-1])
    c = np.arange(lung.shape[1], dtype=np.float32)
    lateral = (c1 - c) / max(c1 - c0, 1) if side == "right" else (c - c0) / max(c1 - c0, 1)
    surface = bottom - h - m * np.clip(lateral, 0.0, 1.0) ** 2
    r = np.arange(lung.shape[0], dtype=np.float32)[:, None]
    return lung & (r >= surface[None, :])


def blob_region(lung: np.ndarray, rng: np.random.Generator, cfg: SyntheticConfig) -> np.ndarray:
    """An airspace opacity (consolidation-like) inside one lung: a smooth random blob.

    A Gaussian bump at a random lung pixel, roughened by low-frequency noise, is cut at
    the level that gives an area of ``a`` of the lung (``a`` from ``cfg.blob_area``),
    inside the lung.

    Parameters
    ----------
    lung : numpy.ndarray, bool, shape (H, W)
    rng : numpy.random.Generator
    cfg : SyntheticConfig

    Returns
    -------
    numpy.ndarray, bool, shape (H, W)
        Inside ``lung``, about ``a`` of its area; empty when the lung is empty.
    """
    pix = np.argwhere(lung)
    if pix.size == 0:
        return np.zeros(lung.shape, dtype=bool)
    h, w = lung.shape
    r0, c0 = pix[int(rng.integers(len(pix)))]
    rows, cols = _rows_cols(lung)
    scale = float(max(rows[-1] - rows[0], cols[-1] - cols[0], 1))
    rr, cc = np.mgrid[0:h, 0:w].astype(np.float32)
    sigma = rng.uniform(0.12, 0.35) * scale
    aspect = rng.uniform(0.6, 1.6)
    bump = np.exp(-(((rr - r0) / (sigma * aspect)) ** 2 + ((cc - c0) / sigma) ** 2) / 2)
    noise = cv2.resize(rng.random((6, 6)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    field = bump * (0.6 + 0.8 * noise)
    level = np.quantile(field[lung], 1.0 - rng.uniform(*cfg.blob_area))
    return lung & (field >= level)


def band_region(lung: np.ndarray, rng: np.random.Generator, cfg: SyntheticConfig) -> np.ndarray:
    """Plate (discoid) atelectasis inside one lung: a thick, nearly horizontal band in the
    lower half of the lung, ``cfg.band_thickness`` of the lung's height thick.

    Parameters
    ----------
    lung : numpy.ndarray, bool, shape (H, W)
    rng : numpy.random.Generator
    cfg : SyntheticConfig

    Returns
    -------
    numpy.ndarray, bool, shape (H, W)
        Inside ``lung``; empty when the lung is empty.
    """
    rows, cols = _rows_cols(lung)
    if rows.size == 0:
        return np.zeros(lung.shape, dtype=bool)
    top, bottom = int(rows[0]), int(rows[-1])
    height = bottom - top + 1
    centre = top + rng.uniform(0.5, 0.85) * height
    slope = np.tan(np.deg2rad(rng.uniform(-15, 15)))
    thick = rng.uniform(*cfg.band_thickness) * height
    r = np.arange(lung.shape[0], dtype=np.float32)[:, None]
    c = np.arange(lung.shape[1], dtype=np.float32)[None, :]
    mid = (cols[0] + cols[-1]) / 2
    line = centre + slope * (c - mid)
    wave = 0.3 * thick * np.sin(c / max(cols[-1] - cols[0], 1) * np.pi * rng.uniform(1, 3))
    return lung & (np.abs(r - line - wave) <= thick / 2)


def add_density(
    image: np.ndarray,
    region: np.ndarray,
    rng: np.random.Generator,
    cfg: SyntheticConfig,
    level: float | None = None,
    edge_sigma: float | None = None,
    patchy: bool = False,
) -> np.ndarray:
    """Make ``region`` denser (brighter), as fluid or airless lung is.

    ``x' = x + s * soft * (level - x)`` with ``soft`` the region blurred by a Gaussian of
    ``edge_sigma`` (default ``cfg.edge_sigma``) of the image side, ``s`` from
    ``cfg.density_strength`` modulated by low-frequency texture (by a coarser and stronger
    one when ``patchy``, as airspace disease is), and ``level`` (default: the 90th
    percentile of the image, the brightness of soft tissue below the diaphragm) the
    density drawn towards.

    Parameters
    ----------
    image : numpy.ndarray, float32, shape (H, W), in [0, 1]
    region : numpy.ndarray, bool, shape (H, W)
    rng : numpy.random.Generator
    cfg : SyntheticConfig
    level : float, optional
        Target brightness in [0, 1].
    edge_sigma : float, optional
        Edge blur, fraction of the image's longer side.
    patchy : bool
        Patchy density (consolidation) instead of a homogeneous one (fluid).

    Returns
    -------
    numpy.ndarray, float32, shape (H, W), in [0, 1]
        A new array; ``image`` is unchanged. Equal to ``image`` where the blurred
        region is 0.
    """
    if not region.any():
        return image.astype(np.float32, copy=True)
    h, w = image.shape
    level = float(np.quantile(image, 0.9)) if level is None else float(level)
    sigma = max(0.5, (cfg.edge_sigma if edge_sigma is None else edge_sigma) * max(h, w))
    soft = cv2.GaussianBlur(region.astype(np.float32), (0, 0), sigma)
    cells, spread = (12, 0.6) if patchy else (8, 0.3)
    texture = cv2.resize(rng.random((cells, cells)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    strength = rng.uniform(*cfg.density_strength) * (1.0 - spread / 2 + spread * np.clip(texture, 0, 1))
    out = image + strength * soft * (max(level, 0.0) - image)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def heart_warp(shape: tuple[int, int], heart: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    """``cv2.remap`` maps that widen the heart by ``factor`` and push the lungs outwards.

    Columns are stretched about the heart's centre column by ``factor`` within the
    heart's half-width (times 1.2), and compressed linearly between there and the image
    edges, which stay fixed; the stretch fades with the distance from the heart's centre
    row (Gaussian, sigma = the heart's height). The thorax keeps its width while the
    heart grows, so the cardiothoracic ratio grows by about ``factor``.

    Parameters
    ----------
    shape : (int, int)
        (H, W) of the image.
    heart : numpy.ndarray, bool, shape (H, W)
    factor : float
        Widening, >= 1.

    Returns
    -------
    map_x, map_y : numpy.ndarray, float32, shape (H, W)
        Source coordinates for ``cv2.remap`` (identity when the heart is empty).
    """
    h, w = shape
    rr, cc = np.mgrid[0:h, 0:w].astype(np.float32)
    rows, cols = _rows_cols(heart)
    if rows.size == 0 or factor <= 1.0:
        return cc, rr
    centre_r, centre_c = float(rows.mean()), float(cols[0] + cols[-1]) / 2
    half = 1.2 * (cols[-1] - cols[0] + 1) / 2
    fade = np.exp(-(((rr - centre_r) / max(rows[-1] - rows[0] + 1, 1)) ** 2))
    s = 1.0 + (factor - 1.0) * fade  # stretch per row
    u = cc - centre_c  # destination offset
    edge = np.where(u < 0, centre_c, (w - 1) - centre_c)  # distance to the fixed edge
    a = np.minimum(half, 0.8 * edge / np.maximum(s, 1.0))  # keep s * a < edge
    inner = np.abs(u) <= s * a
    src_inner = u / s
    src_outer = np.sign(u) * (a + (np.abs(u) - s * a) * (edge - a) / np.maximum(edge - s * a, 1e-3))
    src = np.where(inner, src_inner, src_outer) + centre_c
    return src.astype(np.float32), rr


def draw_lines(image: np.ndarray, rng: np.random.Generator, cfg: SyntheticConfig) -> np.ndarray:
    """Tubes, catheters and ECG leads of a portable film: 1-3 bright smooth curves.

    Parameters
    ----------
    image : numpy.ndarray, float32, shape (H, W), in [0, 1]
    rng : numpy.random.Generator
    cfg : SyntheticConfig

    Returns
    -------
    numpy.ndarray, float32, shape (H, W)
        A new array with the curves drawn.
    """
    out = image.copy()
    h, w = image.shape
    for _ in range(int(rng.integers(1, 4))):
        p = rng.uniform(0, 1, (4, 2)) * [w, h]
        t = np.linspace(0, 1, 60)[:, None]
        curve = (1 - t) ** 3 * p[0] + 3 * (1 - t) ** 2 * t * p[1] + 3 * (1 - t) * t**2 * p[2] + t**3 * p[3]
        layer = np.zeros((h, w), dtype=np.uint8)
        width = max(1, int(round(rng.uniform(*cfg.line_width) * max(h, w))))
        cv2.polylines(layer, [np.round(curve).astype(np.int32)], False, 255, width)
        out[layer > 0] = float(rng.uniform(0.75, 1.0))
    return out


def draw_lesions(
    image: np.ndarray, right: np.ndarray, left: np.ndarray, rng: np.random.Generator, cfg: SyntheticConfig
) -> tuple[np.ndarray, np.ndarray]:
    """One to ``cfg.lesions_max`` synthetic lesions of the seven types' look, for the
    built-in lesion networks' training: a pleural effusion (:func:`effusion_region`,
    homogeneous, sharp surface), an airspace opacity (:func:`blob_region`, patchy,
    ill-defined) or plate atelectasis (:func:`band_region`), each in a random lung, kinds
    drawn with the weights ``cfg.lesion_kind_weights`` (effusion, opacity, band).

    Parameters
    ----------
    image : numpy.ndarray, float32, shape (H, W), in [0, 1]
        Not equalised (the networks equalise their input afterwards).
    right, left : numpy.ndarray, bool, shape (H, W)
        The lungs, patient sides (right lung on the image's left).
    rng : numpy.random.Generator
    cfg : SyntheticConfig

    Returns
    -------
    image : numpy.ndarray, float32, shape (H, W)
        A new array with the lesions drawn.
    region : numpy.ndarray, bool, shape (H, W)
        Their union, the lesion target.
    """
    region = np.zeros(image.shape, dtype=bool)
    out = image.astype(np.float32, copy=True)
    weights = np.asarray(cfg.lesion_kind_weights, dtype=float)
    for _ in range(int(rng.integers(1, cfg.lesions_max + 1))):
        side = "right" if rng.random() < 0.5 else "left"
        lung = right if side == "right" else left
        if not lung.any():
            continue
        kind = int(rng.choice(3, p=weights / weights.sum()))
        if kind == 0:
            part = effusion_region(lung, side, rng, cfg)
            out = add_density(out, part, rng, cfg)
        else:
            part = (blob_region if kind == 1 else band_region)(lung, rng, cfg)
            out = add_density(out, part, rng, cfg, edge_sigma=cfg.blob_edge_sigma, patchy=True)
        region |= part
    return out, region
