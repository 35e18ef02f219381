"""Drawing helpers shared by every overlay cxrils writes: tints, legends, side markers.

Images are uint8 gray (H, W) as :func:`cxrils.io.load_image` returns them, in the
standard frontal display orientation: the **patient's right is on the image's left**.
:func:`draw_side_markers` writes that convention onto the picture ("R" near the
image's left edge, "L" near its right edge), as radiographs carry a side marker.
Colours are RGB tuples; every function returns a new array and never changes its input.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

#: Colour (RGB) and opacity of a predicted or reference lesion mask (ours).
LESION_RGB: tuple[int, int, int] = (255, 64, 32)
LESION_ALPHA = 0.45
#: Text colour of legends and side markers, and the backing box (RGB, opacity).
TEXT_RGB: tuple[int, int, int] = (255, 255, 255)
BOX_RGB: tuple[int, int, int] = (0, 0, 0)
BOX_ALPHA = 0.6
#: Opacity of a coloured label's backing box (darker: coloured text on a light film).
LABEL_ALPHA = 0.85

_FONT = cv2.FONT_HERSHEY_SIMPLEX


def gray_to_rgb(x: np.ndarray) -> np.ndarray:
    """uint8 (H, W) -> uint8 (H, W, 3), a copy.

    Raises
    ------
    ValueError
        If ``x`` is not a 2-D uint8 array.
    """
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype != np.uint8:
        raise ValueError(f"expected a uint8 (H, W) image, got {x.dtype} {x.shape}")
    return np.repeat(x[:, :, None], 3, axis=2)


def tint(rgb: np.ndarray, mask: np.ndarray, colour: Sequence[int], alpha: float) -> np.ndarray:
    """Blend ``colour`` with opacity ``alpha`` in [0, 1] into ``rgb`` uint8 (H, W, 3)
    where ``mask`` bool (H, W) is set; returns a new uint8 array."""
    out = rgb.astype(np.float32)
    m = np.asarray(mask, dtype=bool)
    out[m] = (1 - alpha) * out[m] + alpha * np.asarray(colour, dtype=np.float32)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def text_scale(shape: tuple[int, ...]) -> tuple[float, int]:
    """Font scale and line thickness readable at an image's size (``shape`` (H, W, ...)):
    about 1/40 of the shorter side per text line, at least cv2 scale 0.35."""
    side = min(shape[0], shape[1])
    scale = max(0.35, side / 900.0)
    return scale, max(1, int(round(scale * 1.6)))


def _boxed_text(
    out: np.ndarray,
    text: str,
    org: tuple[int, int],
    scale: float,
    thick: int,
    colour: Sequence[int] = TEXT_RGB,
    alpha: float = BOX_ALPHA,
) -> None:
    (tw, th), base = cv2.getTextSize(text, _FONT, scale, thick)
    x, y = org
    pad = max(2, thick * 2)
    x0, y0 = max(0, x - pad), max(0, y - th - pad)
    x1, y1 = min(out.shape[1], x + tw + pad), min(out.shape[0], y + base + pad)
    region = out[y0:y1, x0:x1].astype(np.float32)
    out[y0:y1, x0:x1] = ((1 - alpha) * region + alpha * np.asarray(BOX_RGB, np.float32)).astype(np.uint8)
    cv2.putText(out, text, (x, y), _FONT, scale, tuple(int(c) for c in colour), thick, cv2.LINE_AA)


def draw_labels(rgb: np.ndarray, labels: Sequence[tuple[str, tuple[int, int], Sequence[int]]]) -> np.ndarray:
    """Write short labels in their colours on dark backing boxes, each kept whole
    inside the image (moved left or up from where it would leave it).

    Parameters
    ----------
    rgb : uint8 (H, W, 3)
    labels : sequence of (text, (x, y), colour RGB)
        ``(x, y)``: the label's top-left corner in pixels (x = column, y = row).

    Returns
    -------
    uint8 (H, W, 3), a new array.
    """
    out = np.ascontiguousarray(rgb.copy())
    scale, thick = text_scale(out.shape)
    scale *= 0.8
    for text, (x, y), colour in labels:
        (tw, th), base = cv2.getTextSize(text, _FONT, scale, thick)
        pad = max(2, thick * 2)
        x = int(min(max(pad, x + pad), out.shape[1] - tw - pad))
        y = int(min(max(th + pad, y + th + pad), out.shape[0] - base - pad))
        _boxed_text(out, text, (max(0, x), y), scale, thick, colour, alpha=LABEL_ALPHA)
    return out


def draw_side_markers(rgb: np.ndarray) -> np.ndarray:
    """Write "R" at the top of the image's left edge and "L" at the top of its right edge.

    The image must be in the standard frontal display orientation (patient's right on
    the image's left), which is how cxrils loads frontal radiographs.

    Parameters
    ----------
    rgb : uint8 (H, W, 3)

    Returns
    -------
    uint8 (H, W, 3), a new array.
    """
    out = np.ascontiguousarray(rgb.copy())
    scale, thick = text_scale(out.shape)
    scale *= 1.4
    (tw, th), _ = cv2.getTextSize("L", _FONT, scale, thick)
    margin = max(4, out.shape[1] // 60)
    _boxed_text(out, "R", (margin, margin + th), scale, thick)
    _boxed_text(out, "L", (out.shape[1] - margin - tw, margin + th), scale, thick)
    return out


def draw_legend(rgb: np.ndarray, items: Sequence[tuple[str, Sequence[int], str]]) -> np.ndarray:
    """Draw a legend box at the top centre, between the R/L side markers: over the
    trachea, not over a costophrenic angle or a lung base (where effusion and
    atelectasis are judged; the bottom-left corner held the patient's right base).

    Parameters
    ----------
    rgb : uint8 (H, W, 3)
    items : sequence of (label, colour RGB, kind)
        ``kind`` is ``"fill"`` (a filled swatch: a tinted region) or ``"line"`` (a
        short line: a drawn border).

    Returns
    -------
    uint8 (H, W, 3), a new array.
    """
    out = np.ascontiguousarray(rgb.copy())
    if not items:
        return out
    scale, thick = text_scale(out.shape)
    (_, th), base = cv2.getTextSize("Hg", _FONT, scale, thick)
    line_h = th + base + max(3, th // 2)
    swatch = th + base
    width = swatch + 3 * thick + max(cv2.getTextSize(label, _FONT, scale, thick)[0][0] for label, _, _ in items)
    pad = max(3, th // 2)
    box_w = width + 2 * pad
    x0 = max(0, (out.shape[1] - box_w) // 2)
    y0 = pad
    y1 = min(out.shape[0], y0 + len(items) * line_h + pad)
    region = out[y0:y1, x0 : min(out.shape[1], x0 + box_w)].astype(np.float32)
    out[y0:y1, x0 : min(out.shape[1], x0 + box_w)] = (
        (1 - BOX_ALPHA) * region + BOX_ALPHA * np.asarray(BOX_RGB, np.float32)
    ).astype(np.uint8)
    for i, (label, colour, kind) in enumerate(items):
        top = y0 + pad + i * line_h
        c = tuple(int(v) for v in colour)
        sx = x0 + pad
        if kind == "line":
            cv2.line(out, (sx, top + swatch // 2), (sx + swatch, top + swatch // 2), c, max(2, thick + 1))
        else:
            cv2.rectangle(out, (sx, top), (sx + swatch, top + swatch), c, -1)
        cv2.putText(out, label, (sx + swatch + 3 * thick, top + th), _FONT, scale, TEXT_RGB, thick, cv2.LINE_AA)
    return out


def mask_overlay(
    x: np.ndarray,
    mask: np.ndarray,
    *,
    label: str | None = "lesion mask",
    colour: Sequence[int] = LESION_RGB,
    alpha: float = LESION_ALPHA,
    markers: bool = True,
) -> np.ndarray:
    """The image with one mask tinted, a legend naming it and the R/L side markers.

    Parameters
    ----------
    x : uint8 (H, W)
    mask : bool (H, W)
    label : str or None
        Legend text for the mask (None: no legend).
    colour, alpha
        Tint colour (RGB) and opacity in [0, 1].
    markers : bool
        Draw the side markers (:func:`draw_side_markers`).

    Returns
    -------
    uint8 (H, W, 3)

    Raises
    ------
    ValueError
        If the shapes differ or ``x`` is not uint8 (H, W).
    """
    m = np.asarray(mask, dtype=bool)
    if m.shape != np.shape(x):
        raise ValueError(f"mask shape {m.shape} differs from image shape {np.shape(x)}")
    out = tint(gray_to_rgb(x), m, colour, alpha)
    if label:
        out = draw_legend(out, [(label, colour, "fill")])
    return draw_side_markers(out) if markers else out
