"""cxrils.sources.nih and cxrils.sources.xrv_tests on the real ``nih_bbox/`` and
``xrv_tests/`` folders (counts from the shared data's README) and on malformed tables."""

from __future__ import annotations

from collections import Counter

import pytest
from corpus_helpers import image_size, raw_rows

from cxrils.sources import InputError
from cxrils.sources.nih import FOLDER as NIH
from cxrils.sources.nih import read_nih_boxes, read_nih_images
from cxrils.sources.xrv_tests import FOLDER as XRV
from cxrils.sources.xrv_tests import read_xrv_boxes, read_xrv_images


@pytest.mark.needs_data
def test_nih_one_expert_box_per_image(corpus):
    root = corpus(NIH)
    boxes, images = read_nih_boxes(root), read_nih_images(root)
    # README: 12 images, one box each (cardiomegaly 3, pneumonia 3, nodule 3, atelectasis,
    # mass, infiltrate), in original 1024 and stored pixels
    assert len(boxes) == len(images) == 12
    assert {b.image_id for b in boxes} == {r.image_id for r in images}
    assert Counter(b.finding for b in boxes) == {
        "Cardiomegaly": 3,
        "Pneumonia": 3,
        "Nodule": 3,
        "Atelectasis": 1,
        "Mass": 1,
        "Infiltrate": 1,
    }
    size = {r.image_id: (r.width, r.height) for r in images}
    for b in boxes:
        w, h = image_size(b.image_path)
        assert (w, h) == size[b.image_id] == (512, 512)
        x0, y0, x1, y1 = b.xyxy
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h, b.image_id
        # 1024 px originals stored at 512: the stored box is half the original's
        orig = (b.x_1024, b.y_1024, b.w_1024, b.h_1024)
        assert all(o is not None and abs(v - o / 2) <= 0.01 for v, o in zip((b.x, b.y, b.w, b.h), orig))
    raw = raw_rows(root / NIH / "images.csv")
    assert [r.labels for r in images] == [tuple(x["nih_finding_labels"].split("|")) for x in raw]
    assert all(r.image_path.is_file() for r in images)


@pytest.mark.needs_data
def test_xrv_tests_images_and_tbx11k_boxes(corpus):
    root = corpus(XRV)
    images, boxes = read_xrv_images(root), read_xrv_boxes(root)
    assert len(images) == 8  # README: 8 test images
    assert all(image_size(r.image_path) == (r.width, r.height) for r in images)
    ids = {r.image_id for r in images}
    for b in boxes:
        assert b.image_id in ids and b.image_id.startswith("tbx11k_"), b.image_id
        x0, y0, x1, y1 = b.xyxy
        w, h = image_size(root / XRV / "images" / f"{b.image_id}.png")
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h


def test_nih_malformed_box_table_names_the_file_and_row(tmp_path):
    (tmp_path / NIH).mkdir()
    table = tmp_path / NIH / "bboxes.csv"
    with pytest.raises(FileNotFoundError, match=r"nih_bbox/bboxes\.csv"):
        read_nih_boxes(tmp_path)
    table.write_text("image_id,finding,x,y,w,h\na.png,Mass,1,2,3,4\nb.png,Mass,1,2,-3,4\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bboxes\.csv: row 2 \(line 3\): box of negative size") as err:
        read_nih_boxes(tmp_path)
    assert err.value.path == table
    table.write_text("image_id,finding,x,y,w,h\na.png,Mass,1,2,3,4\n", encoding="utf-8")
    (box,) = read_nih_boxes(tmp_path)
    assert (box.image_id, box.image_path, box.xyxy) == ("a", tmp_path / NIH / "images" / "a.png", (1.0, 2.0, 4.0, 6.0))


def test_xrv_malformed_box_table_names_the_file_and_row(tmp_path):
    (tmp_path / XRV).mkdir()
    table = tmp_path / XRV / "tbx11k_boxes.csv"
    table.write_text("image_id,category,x,y,w,h\nt1,ActiveTuberculosis,1,2,3,x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"tbx11k_boxes\.csv: row 1 \(line 2\): column 'h' holds 'x'"):
        read_xrv_boxes(tmp_path)
