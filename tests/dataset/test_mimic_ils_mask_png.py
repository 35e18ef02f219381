"""read_mask_png reads a release mask PNG in every PNG mode as cv2.imread would (the
authors' loader, ``utils/reason_seg_dataset.py``, then ``== 255``)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from cxrils.dataset.mimic_ils.format import read_mask_png


def _mask() -> np.ndarray:
    m = np.zeros((30, 40), bool)
    m[5:17, 10:25] = True  # 180 pixels
    return m


def _save(path, m: np.ndarray, mode: str) -> None:
    grey = Image.fromarray(m.astype(np.uint8) * 255)
    if mode == "1":
        Image.fromarray(m).save(path)  # Pillow writes a bool array as a 1-bit PNG
    elif mode == "P":
        grey.convert("P").save(path)
    elif mode == "LA":
        grey.convert("LA").save(path)
    elif mode == "RGBA":
        grey.convert("RGBA").save(path)
    elif mode == "I;16":
        Image.fromarray(m.astype(np.uint16) * 65535).save(path)
    else:
        grey.save(path)


@pytest.mark.parametrize("mode", ["L", "1", "P", "LA", "RGBA", "I;16"])
def test_every_png_mode_gives_the_same_mask(tmp_path, mode):
    m = _mask()
    path = tmp_path / f"m_{mode.replace(';', '')}.png"
    _save(path, m, mode)
    with Image.open(path) as im:
        assert im.mode.startswith(mode[0])  # the file really is in that mode
    got, differs = read_mask_png(path, m.shape)
    assert not differs
    assert int(got.sum()) == 180 and np.array_equal(got, m)


def test_a_palette_whose_colour_is_not_white_is_background(tmp_path):
    # index 1 drawn in red: cv2 reads (0, 0, 255) in BGR, never 255 on every channel
    m = _mask()
    for name, colour in (("red", [255, 0, 0]), ("white", [255, 255, 255])):
        im = Image.new("P", (40, 30))
        im.putdata(m.astype(np.uint8).ravel().tolist())  # indices 0 and 1
        im.putpalette([0, 0, 0] + colour + [0] * (256 * 3 - 6))
        im.save(tmp_path / f"{name}.png")
    assert not read_mask_png(tmp_path / "red.png", m.shape)[0].any()
    assert np.array_equal(read_mask_png(tmp_path / "white.png", m.shape)[0], m)
