"""cxrils.sources.jsrt on the real ``jsrt_scr/`` folder (the whole JSRT database, per the
shared data's README) and on malformed tables."""

from __future__ import annotations

import pytest
from corpus_helpers import image_size, raw_rows

from cxrils.sources import InputError
from cxrils.sources.jsrt import FOLDER, MASKS, read_jsrt_images, read_jsrt_nodules, read_jsrt_non_nodules


@pytest.mark.needs_data
def test_the_whole_database_with_every_scr_mask(corpus):
    root = corpus(FOLDER)
    images = read_jsrt_images(root)
    # README: 247 PA images, 154 with a nodule (JPCLN), 93 without (JPCNN); SCR masks of
    # heart, lungs and clavicles; JSRT's 2048 px originals stored at 512 px
    assert len(images) == 247
    assert sum(r.image_id.startswith("JPCLN") for r in images) == 154
    assert sum(r.image_id.startswith("JPCNN") for r in images) == 93
    assert [r.image_id for r in images] == sorted(r.image_id for r in images)
    table = {row["image_id"]: row for row in raw_rows(root / FOLDER / "images.csv")}
    assert set(table) == {r.image_id for r in images}
    for r in images:
        assert image_size(r.image_path) == (512, 512) == (int(table[r.image_id]["w"]), int(table[r.image_id]["h"]))
        for name in MASKS:
            mask = getattr(r, name)
            assert mask is not None and mask == root / FOLDER / "masks" / name / f"{r.image_id}.png", (r.image_id, name)
            assert image_size(mask) == (512, 512), mask


@pytest.mark.needs_data
def test_nodules_and_non_nodules_split_the_database(corpus):
    root = corpus(FOLDER)
    nodules, normals = read_jsrt_nodules(root), read_jsrt_non_nodules(root)
    ids = {r.image_id for r in read_jsrt_images(root)}
    assert {n.image_id for n in nodules} == {i for i in ids if i.startswith("JPCLN")}
    assert {n.image_id for n in normals} == {i for i in ids if i.startswith("JPCNN")}
    raw = raw_rows(root / FOLDER / "nodules.csv")
    assert [n.image_id for n in nodules] == [row["image_id"] for row in raw]
    for n, row in zip(nodules, raw):
        # the stored images are the 2048 px originals at a quarter: the two centres agree
        assert n.x_2048 is not None and n.y_2048 is not None
        assert abs(n.x_512 - n.x_2048 / 4) <= 0.5 and abs(n.y_512 - n.y_2048 / 4) <= 0.5, n.image_id
        assert 0 <= n.x_512 < 512 and 0 <= n.y_512 < 512
        assert n.malignancy in ("malignant", "benign") and 1 <= (n.subtlety or 0) <= 5
        assert (n.age is None) == (row["age"] == "?"), n.image_id  # JSRT writes '?' for an unknown age
    assert all(n.finding == "non-nodule" for n in normals)


def test_missing_folder_and_tables_name_them(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"jsrt_scr/images"):
        read_jsrt_images(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"jsrt_scr/nodules\.csv"):
        read_jsrt_nodules(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"jsrt_scr/non_nodules\.csv"):
        read_jsrt_non_nodules(tmp_path)


def test_masks_that_are_absent_are_none(tmp_path):
    d = tmp_path / FOLDER
    for sub in ("images", "masks/heart"):
        (d / sub).mkdir(parents=True)
    for name in ("B2.png", "A1.png"):
        (d / "images" / name).write_bytes(b"")
    (d / "masks" / "heart" / "A1.png").write_bytes(b"")
    a, b = read_jsrt_images(tmp_path)
    assert (a.image_id, a.heart, a.right_lung) == ("A1", d / "masks" / "heart" / "A1.png", None)
    assert (b.image_id, b.heart) == ("B2", None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("image_id,x_512\nJPCLN001,1\n", r"missing column\(s\) \['y_512'\]"),
        ("image_id,x_512,y_512\nJPCLN001,408.5,\n", r"row 1 \(line 2\): no value in column 'y_512'"),
        ("image_id,x_512,y_512,size_mm\nJPCLN001,408.5,173,big\n", r"row 1 \(line 2\): column 'size_mm' holds 'big'"),
        ("image_id,x_512,y_512,age\nJPCLN001,408.5,173,53.5\n", r"row 1 \(line 2\): column 'age' holds '53.5'"),
        ("image_id,x_512,y_512\nJPCLN001,1,1\nJPCLN001,2,2\n", r"row 2 \(line 3\): duplicate image_id"),
    ],
)
def test_malformed_nodule_table_names_the_file_and_row(tmp_path, body, problem):
    (tmp_path / FOLDER).mkdir()
    table = tmp_path / FOLDER / "nodules.csv"
    table.write_text(body, encoding="utf-8")
    with pytest.raises(InputError, match=problem) as err:
        read_jsrt_nodules(tmp_path)
    assert err.value.path == table


def test_unknown_age_is_none(tmp_path):
    (tmp_path / FOLDER).mkdir()
    (tmp_path / FOLDER / "non_nodules.csv").write_text(
        "image_id,age,sex,finding\nJPCNN001,?,male,non-nodule\n", encoding="utf-8"
    )
    (n,) = read_jsrt_non_nodules(tmp_path)
    assert (n.image_id, n.age, n.sex, n.finding) == ("JPCNN001", None, "male", "non-nodule")
