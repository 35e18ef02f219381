"""Files written by ``cxrils ground``: overlays for a person to check a case, the
anomaly images, one PNG per grounded lesion mask, and ``grounding.json``.

Every overlay carries R/L side markers (the patient's right on the image's left) and
a legend of its colours (:mod:`cxrils.overlay`)."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from cxrils.fsutil import atomic_path
from cxrils.overlay import draw_labels, draw_legend, draw_side_markers, gray_to_rgb, tint
from cxrils.types import AnomalyResult, LesionBox, StudyGrounding

KEPT_COLOUR = (40, 220, 40)  # RGB
REJECTED_COLOUR = (235, 50, 50)
MASK_COLOURS = ((255, 140, 0), (0, 200, 255), (255, 0, 200), (160, 255, 0), (255, 255, 0), (120, 120, 255))


def write_png(path: Path, image: np.ndarray) -> None:
    """Write uint8 (H, W) or (H, W, 3) RGB atomically as PNG."""
    with atomic_path(path, suffix=".png") as tmp:
        Image.fromarray(np.ascontiguousarray(image)).save(tmp, format="PNG")


def _thickness(shape: tuple[int, int]) -> int:
    return max(1, round(max(shape) / 400))


def anomaly_overlay(x: np.ndarray, anomaly: AnomalyResult, tau_ano: float) -> np.ndarray:
    """RGB uint8: x_ano as a heat map over the image inside the edit region, the
    anomaly set A = x_ano >= tau_ano outlined in white."""
    heat = cv2.applyColorMap(np.clip(anomaly.x_ano * 255 * 2, 0, 255).astype(np.uint8), cv2.COLORMAP_JET)
    heat = cv2.cvtColor(heat, cv2.COLOR_BGR2RGB)
    out = gray_to_rgb(x)
    region = anomaly.edit_region
    out[region] = (0.55 * out[region] + 0.45 * heat[region]).astype(np.uint8)
    contours, _ = cv2.findContours(
        anomaly.anomaly_set(tau_ano).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    cv2.drawContours(out, contours, -1, (255, 255, 255), _thickness(x.shape))
    legend = [
        ("x_ano low", (0, 0, 255), "fill"),
        ("x_ano high", (255, 0, 0), "fill"),
        (f"A: x_ano >= {tau_ano:g}", (255, 255, 255), "line"),
    ]
    return draw_side_markers(draw_legend(out, legend))


def boxes_overlay(x: np.ndarray, sg: StudyGrounding, boxes: list[LesionBox]) -> np.ndarray:
    """RGB uint8: every detector box; green if some finding kept it, red otherwise,
    labelled with its confidence and, for each finding that rejected it, the failed
    conditions (e.g. ``F1:c1,c3``; findings that failed the same ones share a label
    part: ``F2,F3:c1,c2``)."""
    out = gray_to_rgb(x)
    t = _thickness(x.shape)
    labels = []
    for b in boxes:
        kept, failed = False, []
        for i, gf in enumerate(sg.findings, start=1):
            for rec in gf.box_checks:
                if rec["box"] == [b.x0, b.y0, b.x1, b.y1] and rec["confidence"] == b.confidence:
                    kept |= rec["kept"]
                    if not rec["kept"]:
                        failed.append((i, ",".join(rec["failed"])))
        by_conditions: dict[str, list[str]] = {}
        for i, conditions in failed:
            by_conditions.setdefault(conditions, []).append(f"F{i}")
        parts = [f"{','.join(fs)}:{conditions}" for conditions, fs in by_conditions.items()]
        label = f"{b.confidence:.2f}" + ("" if kept or not parts else " " + " ".join(parts))
        colour = KEPT_COLOUR if kept else REJECTED_COLOUR
        p0 = (int(round(b.x0)), int(round(b.y0)))
        cv2.rectangle(out, p0, (int(round(b.x1)) - 1, int(round(b.y1)) - 1), colour, t)
        labels.append((label, p0, colour))
    out = draw_labels(out, labels)  # after every box, so that no box line crosses a label
    legend = [
        ("box kept by a finding", KEPT_COLOUR, "line"),
        ("box rejected (failed conditions)", REJECTED_COLOUR, "line"),
    ]
    return draw_side_markers(draw_legend(out, legend))


def masks_overlay(x: np.ndarray, sg: StudyGrounding, alpha: float = 0.45) -> np.ndarray:
    """RGB uint8: each grounded lesion mask tinted in its own colour and outlined, with
    a legend ``F<i> <type>`` at the top centre (finding numbers as in
    grounding.json, 1-based) and R/L side markers."""
    out = gray_to_rgb(x)
    labels = []  # (finding number, lesion type, mask, colour)
    for i, gf in enumerate(sg.findings, start=1):
        if gf.mask is None:
            continue
        colour = MASK_COLOURS[(i - 1) % len(MASK_COLOURS)]
        out = tint(out, gf.mask, colour, alpha)
        labels.append((i, gf.lesion_type, gf.mask, colour))
    out = np.ascontiguousarray(out)
    t = _thickness(x.shape)
    for _, _, mask, colour in labels:
        contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(out, contours, -1, colour, t)
    legend = [(f"F{i} {lesion_type}", colour, "fill") for i, lesion_type, _, colour in labels]
    return draw_side_markers(draw_legend(out, legend))


def mask_filename(index: int, lesion_type: str) -> str:
    """``lesion_<index>_<type>.png`` with a 1-based, two-digit finding index."""
    return f"lesion_{index:02d}_{re.sub(r'[^a-z0-9]+', '_', lesion_type.lower())}.png"
