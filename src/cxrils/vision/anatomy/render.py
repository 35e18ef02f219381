"""Files written by ``cxrils anatomy``: label PNGs, an overlay, and ``anatomy.json``."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from cxrils.fsutil import atomic_path, atomic_write_json
from cxrils.io.base import ImageMeta, source_frame_shape, to_source_frame
from cxrils.overlay import draw_legend, draw_side_markers, gray_to_rgb, text_scale, tint
from cxrils.types import AnatomyMasks
from cxrils.vocab import LOBES, LUNG_ZONES

#: Overlay colours (RGB) of the organs; zone borders are drawn in yellow, lobe
#: borders in magenta.
ORGAN_COLOURS = {"right lung": (230, 60, 60), "left lung": (60, 110, 240), "heart": (60, 200, 90)}
ZONE_COLOUR = (255, 220, 0)
LOBE_COLOUR = (230, 0, 230)
#: Border of the visible lungs (where a backend gives both conventions, docs/anatomy.md).
VISIBLE_COLOUR = (255, 255, 255)


def label_filename(label: str) -> str:
    """PNG file name of a label: spaces -> underscores (``right lung`` -> ``right_lung.png``)."""
    return label.replace(" ", "_") + ".png"


def visible_filename(label: str) -> str:
    """PNG file name of a visible lung (``right lung`` -> ``right_lung_visible.png``)."""
    return label.replace(" ", "_") + "_visible.png"


def overlay(x: np.ndarray, masks: AnatomyMasks, alpha: float = 0.35) -> np.ndarray:
    """RGB uint8 (H, W, 3): the image with organs tinted (the whole lungs, behind the
    heart included), zone and lobe borders drawn, the visible lungs' border in white
    where the backend gives them (:attr:`AnatomyMasks.visible`), a legend of the colours
    (top centre) and R/L side markers (the patient's right on the image's left, see
    :mod:`cxrils.overlay`).

    Parameters
    ----------
    x : numpy.ndarray, uint8, shape (H, W)
    masks : AnatomyMasks at the same (H, W)
    alpha : float
        Tint opacity in [0, 1].
    """
    out = gray_to_rgb(x)
    for label, colour in ORGAN_COLOURS.items():
        out = tint(out, masks[label], colour, alpha)
    out = np.ascontiguousarray(out)
    thick = max(1, text_scale(x.shape)[1])
    visible = masks.visible or {}
    borders = (
        (LOBES, LOBE_COLOUR, masks.masks),
        (LUNG_ZONES, ZONE_COLOUR, masks.masks),
        (tuple(visible), VISIBLE_COLOUR, visible),
    )
    for labels, colour, source in borders:
        for label in labels:
            contours, _ = cv2.findContours(source[label].astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            cv2.drawContours(out, contours, -1, colour, thick)
    legend = [(label, colour, "fill") for label, colour in ORGAN_COLOURS.items()]
    legend += [("zone borders", ZONE_COLOUR, "line"), ("lobe borders", LOBE_COLOUR, "line")]
    if visible:
        legend.append(("visible lung borders", VISIBLE_COLOUR, "line"))
    return draw_side_markers(draw_legend(out, legend))


def _save_png(path: Path, array: np.ndarray) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        Image.fromarray(array).save(tmp, format="PNG")


def write_outputs(out_dir: Path, x: np.ndarray, masks: AnatomyMasks, info: dict, meta: ImageMeta | None = None) -> None:
    """Write ``overlay.png``, one 0/255 PNG per label, the visible lungs where the
    backend gives them (``right_lung_visible.png``, ``left_lung_visible.png``; the
    label PNGs ``right_lung.png``/``left_lung.png`` are then the whole lungs) and
    ``anatomy.json`` into ``out_dir`` (created), each atomically. ``info`` is merged
    into the JSON (``labels``: file and area per label; ``visible``: the same for the
    visible lungs, absent for a one-convention backend; ``shape``: (H, W) of the mask
    PNGs).

    ``x`` uint8 (H, W) and ``masks`` are in the display frame; with the image's ``meta``
    each mask is written in the source file's frame (:func:`cxrils.io.base.to_source_frame`;
    None: as given). The overlay stays in the display frame (for people: the patient's
    right on the image's left)."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def turn(a: np.ndarray) -> np.ndarray:
        return a if meta is None else to_source_frame(a, meta)

    def save(items, naming) -> dict:
        files = {}
        for label, mask in items:
            name = naming(label)
            _save_png(out_dir / name, turn(mask).astype(np.uint8) * 255)
            files[label] = {"file": name, "area_px": int(mask.sum())}
        return files

    shape = masks.shape if meta is None else source_frame_shape(masks.shape, meta)
    doc = {**info, "shape": list(shape), "labels": save(masks.masks.items(), label_filename)}
    if masks.visible:
        doc["visible"] = save(masks.visible.items(), visible_filename)
    _save_png(out_dir / "overlay.png", overlay(x, masks))
    atomic_write_json(out_dir / "anatomy.json", doc)
