"""cxrils.overlay: side markers on the right sides, legends, mask tints; the anatomy overlay uses them."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from cxrils import overlay
from cxrils.overlay import LESION_RGB, draw_legend, draw_side_markers, mask_overlay


def _glyph(patch: np.ndarray) -> np.ndarray:
    """Binary glyph of a marker box: its bright pixels, cropped to their bounding box."""
    on = patch[..., 0] > 200
    rows, cols = np.flatnonzero(on.any(1)), np.flatnonzero(on.any(0))
    return on[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def _letter(letter: str, shape: tuple[int, int]) -> np.ndarray:
    canvas = np.zeros((200, 200), np.uint8)
    cv2.putText(canvas, letter, (40, 150), cv2.FONT_HERSHEY_SIMPLEX, 4, 255, 8)
    g = _glyph(np.repeat(canvas[..., None], 3, axis=2))
    return cv2.resize(g.astype(np.uint8), (shape[1], shape[0]), interpolation=cv2.INTER_NEAREST).astype(bool)


def _closer_to(glyph: np.ndarray) -> str:
    return min("RL", key=lambda c: np.mean(_letter(c, glyph.shape) != glyph))


def test_patient_right_marker_is_on_the_image_left():
    rgb = np.full((600, 500, 3), 60, np.uint8)
    out = draw_side_markers(rgb)
    assert np.array_equal(rgb, np.full_like(rgb, 60))  # input untouched
    h, w = out.shape[:2]
    left, right = out[: h // 6, : w // 5], out[: h // 6, -w // 5 :]
    assert _closer_to(_glyph(left)) == "R"
    assert _closer_to(_glyph(right)) == "L"
    assert (out[h // 3 :] == 60).all()  # nothing drawn below the top band


def test_legend_shows_each_colour_at_the_top_centre_off_the_lung_bases():
    # new-user trial (stop 58): the bottom-left legend covered the patient's right base
    rgb = np.full((400, 400, 3), 128, np.uint8)
    items = [("right lung", (230, 60, 60), "fill"), ("zone borders", (255, 220, 0), "line")]
    out = draw_legend(rgb, items)
    top = out[:100, 100:300].reshape(-1, 3)
    for _, colour, _ in items:
        assert (top == colour).all(1).any(), colour
    assert (out[200:] == 128).all()  # both lung bases and costophrenic angles untouched
    assert (out[:, :60] == 128).all() and (out[:, -60:] == 128).all()  # the R/L marker corners too


def test_mask_overlay_tints_only_the_mask():
    x = np.full((300, 300), 100, np.uint8)
    mask = np.zeros_like(x, bool)
    mask[100:200, 100:200] = True
    out = mask_overlay(x, mask, label=None, markers=False)
    expected = np.round(0.55 * 100 + 0.45 * np.array(LESION_RGB)).astype(int)
    assert (np.abs(out[150, 150].astype(int) - expected) <= 1).all()
    assert (out[~mask] == 100).all()
    with pytest.raises(ValueError, match="shape"):
        mask_overlay(x, mask[:10])
    with pytest.raises(ValueError, match="uint8"):
        overlay.gray_to_rgb(x.astype(np.float32))


def test_anatomy_overlay_has_legend_and_side_markers():
    from cxrils.types import AnatomyMasks
    from cxrils.vision.anatomy.render import ORGAN_COLOURS
    from cxrils.vision.anatomy.render import overlay as anatomy_overlay
    from cxrils.vocab import ANATOMY_LABELS

    h, w = 512, 512
    masks = {label: np.zeros((h, w), bool) for label in ANATOMY_LABELS}
    masks["right lung"][100:400, 60:230] = True  # image left = patient right
    masks["left lung"][100:400, 280:450] = True
    masks["heart"][250:400, 200:330] = True
    out = anatomy_overlay(np.full((h, w), 90, np.uint8), AnatomyMasks(masks=masks, shape=(h, w), backend="test"))
    corner = out[: h // 4, w // 8 : -w // 8].reshape(-1, 3)  # the top centre, off the lung bases
    for colour in ORGAN_COLOURS.values():
        assert (corner == colour).all(1).any(), f"legend swatch {colour} missing"
    assert _closer_to(_glyph(out[: h // 8, : w // 8])) == "R"
    assert _closer_to(_glyph(out[: h // 8, -w // 8 :])) == "L"


@pytest.mark.parametrize("corner", [(0, 0), (480, 500), (-30, -30)])
def test_a_label_stays_whole_inside_the_image_in_its_colour(corner):
    rgb = np.full((512, 512, 3), 230, np.uint8)  # a light film
    colour = (235, 50, 50)
    out = overlay.draw_labels(rgb, [("0.02 F2,F3:c1,c2,c3,c4", corner, colour)])
    assert not np.shares_memory(out, rgb) and (rgb == 230).all()
    changed = (out != 230).any(axis=2)
    rows, cols = np.flatnonzero(changed.any(1)), np.flatnonzero(changed.any(0))
    # a backing box with margin on every side: the label was moved in, not cut at an edge
    assert rows[0] >= 0 and cols[0] >= 0 and rows[-1] <= 511 and cols[-1] <= 511
    text = (np.abs(out.astype(int) - colour).sum(axis=2) < 60) & changed
    assert text.sum() > 50  # the glyphs are drawn in the label's colour
    t_rows, t_cols = np.flatnonzero(text.any(1)), np.flatnonzero(text.any(0))
    assert 0 < t_cols[0] and t_cols[-1] < 511 and 0 < t_rows[0] and t_rows[-1] < 511
    assert t_rows[-1] - t_rows[0] >= 8  # readable: glyphs at least 8 px high on a 512 px film
