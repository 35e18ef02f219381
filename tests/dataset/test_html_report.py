"""``cxrils stats --html``: one self-contained page, opened in headless Chromium."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from cxrils import vocab
from cxrils.cli import app
from cxrils.dataset import DatasetWriter, read_records
from cxrils.dataset.html_report import sample_records, thumbnail, write_html_report


@pytest.fixture
def dataset(tmp_path, studies):
    w = DatasetWriter(tmp_path / "ds", {"run": "test"})
    for image_id, (x, recs) in studies.items():
        w.commit_study(image_id, x, recs)
    w.finalize()
    return tmp_path / "ds"


def test_sampling_covers_each_type_and_polarity_and_is_seeded(dataset):
    records = read_records(dataset)
    picked = sample_records(records, 2, seed=0)
    assert set(picked) == {(t, p) for t in vocab.LESION_TYPES for p in vocab.POLARITIES}
    for (lesion, pol), rows in picked.items():
        have = ((records["lesion_type"] == lesion) & (records["polarity"] == pol)).sum()
        assert len(rows) == min(2, have)
        assert all(records.iloc[i]["lesion_type"] == lesion and records.iloc[i]["polarity"] == pol for i in rows)
    assert picked == sample_records(records, 2, seed=0)


def test_thumbnail_tints_the_mask(tmp_path):
    x = np.full((400, 300), 100, np.uint8)
    mask = np.zeros_like(x, bool)
    mask[200:300, 50:150] = True
    from io import BytesIO

    rgb = np.asarray(Image.open(BytesIO(thumbnail(x, mask, side=200))).convert("RGB")).astype(int)
    assert rgb.shape == (200, 150, 3)
    inside, outside = rgb[125, 50], rgb[60, 75]  # (row, col) at half scale
    assert inside[0] > inside[2] + 40  # red tint
    assert abs(int(outside[0]) - int(outside[2])) < 10  # gray


def test_report_is_self_contained_and_renders_in_chromium(dataset, tmp_path, chromium):
    res = CliRunner().invoke(app, ["stats", str(dataset), "--no-plot", "--html", str(tmp_path / "r" / "report.html")])
    assert res.exit_code == 0, res.output
    page_path = tmp_path / "r" / "report.html"
    text = page_path.read_text(encoding="utf-8")
    srcs = re.findall(r"<img [^>]*src='([^']+)'", text)
    assert srcs and all(s.startswith("data:image/") for s in srcs)  # nothing fetched from elsewhere
    assert "http://" not in text and "https://" not in text
    records = read_records(dataset)
    n_gallery = sum(len(v) for v in sample_records(records, 2).values())
    assert len(srcs) == n_gallery + 1  # the gallery and the chart
    for phrase in ("lesion inference", "Figure 4", "Tables 10-12"):
        assert phrase in text
    page = chromium.new_page(viewport={"width": 1200, "height": 900})
    page.goto(page_path.as_uri())
    loaded = page.evaluate("() => Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
    assert loaded and all(loaded), "an image did not render"
    assert page.evaluate("() => document.images.length") == len(srcs)
    page.locator("figure").first.scroll_into_view_if_needed()
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape[0] > 900  # a long page, not a blank one
    red = (pixels[..., 0] > pixels[..., 2] + 60).sum()
    assert red > 100  # tinted reference masks are on screen


def test_report_of_a_missing_dataset_fails_in_one_line(tmp_path):
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "nope"), "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "no such dataset folder" in res.output and "Traceback" not in res.output
    with pytest.raises(Exception, match="no such dataset folder"):
        write_html_report(tmp_path / "nope", tmp_path / "r.html")


def test_the_report_of_one_split_holds_only_that_split(dataset, tmp_path):
    # new-user trial (stop 58): --split was printed on the console but the HTML held every split
    records = read_records(dataset)
    split = str(records["split"].iloc[0])
    out = tmp_path / "one.html"
    res = CliRunner().invoke(app, ["stats", str(dataset), "--no-plot", "--split", split, "--html", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    n = int((records["split"] == split).sum())
    assert f"split {split}: {n} records" in text
    others = [s for s in vocab.SPLITS if s != split and (records["split"] == s).any()]
    assert others and not any(f"<h3>{s}</h3>" in text for s in others)
    assert f"<h3>{split}</h3>" in text
    assert str(tmp_path) not in text  # no folder of this machine in a page meant to be shared
