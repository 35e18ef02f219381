"""cxrils.sources.covid_qu_ex on the real ``covid_qu_ex/`` folder (counts and sizes from
its README) and on malformed tables."""

from __future__ import annotations

import numpy as np
import pytest
from corpus_helpers import image_size, raw_rows
from PIL import Image

from cxrils.sources import InputError
from cxrils.sources.covid_qu_ex import FOLDER, read_covid_qu_ex


@pytest.mark.needs_data
def test_every_image_of_the_readme_with_its_masks(corpus):
    root = corpus(FOLDER)
    images = read_covid_qu_ex(root)
    # README: 2,796 frontal 256x256 images (1,864 COVID-19, 932 Normal); infection masks for
    # the 1,864 COVID-19 images only, lung masks for all
    assert len(images) == 2796
    assert sum(r.cls == "COVID-19" for r in images) == 1864 and sum(r.cls == "Normal" for r in images) == 932
    assert all(r.positive == (r.cls == "COVID-19") for r in images)
    assert [r.image_id for r in images] == [row["image_id"] for row in raw_rows(root / FOLDER / "images.csv")]
    for r in images:
        assert image_size(r.image_path) == (256, 256) == (r.width, r.height), r.image_id
        assert image_size(r.lung_mask_path) == (256, 256), r.image_id
        if r.infection_mask_path is not None:
            assert image_size(r.infection_mask_path) == (256, 256), r.image_id
    assert len({r.image_path for r in images}) == 2796


@pytest.mark.needs_data
def test_masks_are_0_255_and_infection_lies_mostly_in_the_lungs(corpus):
    images = read_covid_qu_ex(corpus(FOLDER))
    for r in [r for r in images if r.positive][::100]:
        lungs = np.asarray(Image.open(r.lung_mask_path).convert("L"))
        assert r.infection_mask_path is not None
        lesion = np.asarray(Image.open(r.infection_mask_path).convert("L"))
        assert set(np.unique(lungs)) <= {0, 255} and set(np.unique(lesion)) <= {0, 255}
        if lesion.any():  # infection of the lungs: most of it inside the lung mask
            assert (lungs[lesion > 0] > 0).mean() > 0.5, r.image_id


def _table(tmp_path, text: str):
    d = tmp_path / FOLDER
    d.mkdir()
    (d / "images.csv").write_text(text, encoding="utf-8")
    return d / "images.csv"


def test_missing_table_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"covid_qu_ex/images\.csv"):
        read_covid_qu_ex(tmp_path)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("image_id,cls\nc1,COVID-19\n", r"missing column\(s\) \['lung_mask'\]"),
        ("image_id,cls,lung_mask\nc1,Covid,lung_masks/c1.png\n", r"row 1 \(line 2\): cls 'Covid'"),
        (
            "image_id,cls,lung_mask\nc1,Normal,m/c1.png\nc1,Normal,m/c1.png\n",
            r"row 2 \(line 3\): duplicate image_id 'c1'",
        ),
        ("image_id,cls,lung_mask,w,h\nc1,Normal,m/c1.png,256,wide\n", r"row 1 \(line 2\): column 'h' holds 'wide'"),
        ("image_id,cls,lung_mask\nc1,Normal,\n", r"row 1 \(line 2\): image c1 has no lung_mask"),
    ],
)
def test_malformed_table_names_the_file_and_row(tmp_path, body, problem):
    table = _table(tmp_path, body)
    with pytest.raises(InputError, match=problem) as err:
        read_covid_qu_ex(tmp_path)
    assert err.value.path == table and str(table) in str(err.value)


def test_paths_join_the_corpus_folder(tmp_path):
    _table(
        tmp_path,
        "image_id,cls,lung_mask,infection_mask\nc1,COVID-19,lung_masks/c1.png,infection_masks/c1.png\n"
        "n1,Normal,lung_masks/n1.png,\n",
    )
    c1, n1 = read_covid_qu_ex(tmp_path)
    d = tmp_path / FOLDER
    assert (c1.image_path, c1.lung_mask_path, c1.infection_mask_path) == (
        d / "images" / "c1.png",
        d / "lung_masks" / "c1.png",
        d / "infection_masks" / "c1.png",
    )
    assert n1.infection_mask_path is None and not n1.positive and (n1.width, n1.height) == (None, None)
