"""cxrils.sources.covid19 on the real ``covid_ieee8023/`` folder (counts from the shared
data's README) and on malformed tables."""

from __future__ import annotations

import pytest
from corpus_helpers import image_size, raw_rows

from cxrils.sources import InputError
from cxrils.sources.covid19 import FOLDER, read_covid19_images, read_covid19_severity


@pytest.mark.needs_data
def test_images_and_lung_masks_as_the_readme_counts_them(corpus):
    root = corpus(FOLDER)
    images = read_covid19_images(root)
    # README: 527 frontal images (PA, AP, AP supine); 427 v7labs masks, 192 VAE masks
    assert len(images) == 527
    assert {r.view for r in images} <= {"PA", "AP", "AP Supine"}
    assert sum(r.v7labs_mask_path is not None for r in images) == 427
    assert sum(r.vae_mask_path is not None for r in images) == 192
    # every mask file of the folders is found, none is lost for want of a metadata row
    for sub, attr in (("masks_lung_v7labs", "v7labs_mask_path"), ("masks_lung_vae", "vae_mask_path")):
        assert {p.stem for p in (root / FOLDER / sub).glob("*.png")} == {
            r.image_id for r in images if getattr(r, attr) is not None
        }
    raw = raw_rows(root / FOLDER / "metadata.csv")
    assert [(r.image_id, r.patient_id) for r in images] == [(x["image_id"], x["patientid"]) for x in raw]
    for r in images:
        size = image_size(r.image_path)
        assert max(size) <= 512 and size == (r.width, r.height), r.image_id
        for mask in (r.v7labs_mask_path, r.vae_mask_path):
            if mask is not None:
                assert image_size(mask) == size, mask


@pytest.mark.needs_data
def test_severity_scores_of_93_images_in_their_ranges(corpus):
    root = corpus(FOLDER)
    scores = read_covid19_severity(root)
    # README: severity scores for 93 images; geographic extent 0-8, opacity 0-6
    with_image = [s for s in scores if s.image_path is not None and s.image_path.is_file()]
    assert len(with_image) == 93
    assert len(scores) == len(raw_rows(root / FOLDER / "severity_scores.csv"))
    assert all(0 <= s.geographic_mean <= 8 and 0 <= s.opacity_mean <= 6 for s in scores)
    by_id = {r.image_id: r for r in read_covid19_images(root)}
    assert all(by_id[s.image_id].orig_filename == s.filename for s in with_image if s.image_id)


def test_missing_tables_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"covid_ieee8023/metadata\.csv"):
        read_covid19_images(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"covid_ieee8023/severity_scores\.csv"):
        read_covid19_severity(tmp_path)


def test_severity_matches_images_by_file_name_and_rejects_a_bad_score(tmp_path):
    d = tmp_path / FOLDER
    d.mkdir()
    (d / "metadata.csv").write_text("image_id,orig_filename,patientid\na,a.jpeg,7\n", encoding="utf-8")
    (d / "severity_scores.csv").write_text(
        "filename,geographic_mean,opacity_mean\na.jpeg,3.5,2\nzz.png,1,1\n", encoding="utf-8"
    )
    a, zz = read_covid19_severity(tmp_path)
    assert (a.image_id, a.image_path, a.geographic_mean, a.opacity_mean) == ("a", d / "images" / "a.png", 3.5, 2.0)
    assert (zz.image_id, zz.image_path) == (None, None)
    (d / "severity_scores.csv").write_text("filename,geographic_mean,opacity_mean\na.jpeg,high,2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"severity_scores\.csv: row 1 \(line 2\): column 'geographic_mean'"):
        read_covid19_severity(tmp_path)
    (d / "metadata.csv").write_text("patientid\n7\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"metadata\.csv: missing column\(s\) \['image_id'\]"):
        read_covid19_images(tmp_path)
