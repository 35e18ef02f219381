"""Input readers: MIMIC-CXR layout, IU X-ray (CSV and XML), generic CSV."""

from __future__ import annotations

import csv
import gzip
import hashlib
import shutil
from pathlib import Path

import pytest
from PIL import Image

from cxrils.sources import InputError, detect_input_kind, read_inputs, read_iu_reports


def _write_csv(path: Path, rows: list[dict], gz: bool = False) -> None:
    opener = (lambda: gzip.open(path, "wt", newline="")) if gz else (lambda: open(path, "w", newline=""))
    with opener() as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.fixture()
def mimic_tree(tmp_path, shared_data):
    """A MIMIC-CXR-shaped tree (layout only) from public IU images, IU report texts
    and a public DICOM: 2 patients, 3 studies, 5 images, a report without images."""
    iu = shared_data / "iu_xray"
    reports = {rid: text for rid, _, text in read_iu_reports(iu)}
    root = tmp_path / "mimic"
    plan = {  # patient -> study -> [(dicom_id, source image)]
        "p10000032": {
            "s50414267": [
                ("02aa804e-bde0afdd", iu / "images/CXR1900_IM-0584-1001.png"),
                ("174413ec-4ec4c1f7", iu / "images/CXR1900_IM-0584-2001.png"),
            ],
            "s53189527": [("2a2277a9-b0ded155", shared_data / "dicom/RG1_UNCR.dcm")],
        },
        "p11000011": {
            "s50000001": [
                ("aa000001-00000001", iu / "images/CXR7_IM-2263-1001.png"),
                ("aa000001-00000002", iu / "images/CXR7_IM-2263-2001.png"),
            ],
            "s50000002": [],
        },
    }
    texts = iter(["CXR1900", "CXR7", "CXR3", "CXR25"])
    for patient, studies in plan.items():
        pdir = root / "files" / patient[:3] / patient
        for study, images in studies.items():
            pdir.mkdir(parents=True, exist_ok=True)
            (pdir / f"{study}.txt").write_text("FINAL REPORT\n" + reports[next(texts)])
            if images:
                (pdir / study).mkdir()
            for dicom_id, src in images:
                if src.suffix == ".dcm":
                    shutil.copy(src, pdir / study / f"{dicom_id}.dcm")
                else:  # MIMIC-CXR-JPG style
                    Image.open(src).convert("L").save(pdir / study / f"{dicom_id}.jpg", quality=95)
    views = {
        "02aa804e-bde0afdd": "PA",
        "174413ec-4ec4c1f7": "LATERAL",
        "2a2277a9-b0ded155": "AP",
        "aa000001-00000001": "PA",
        "aa000001-00000002": "LL",
    }
    _write_csv(
        root / "mimic-cxr-2.0.0-metadata.csv.gz",
        [{"dicom_id": d, "subject_id": "1", "study_id": "5", "ViewPosition": v} for d, v in views.items()],
        gz=True,
    )
    _write_csv(
        root / "mimic-cxr-2.0.0-split.csv.gz",
        [
            {"dicom_id": d, "study_id": "5", "subject_id": "1", "split": "test" if d.startswith("aa") else "train"}
            for d in views
        ],
        gz=True,
    )
    return root, reports


def test_mimic_layout(mimic_tree):
    root, reports = mimic_tree
    assert detect_input_kind(root) == "mimic"
    assert detect_input_kind(root / "files") == "mimic"
    items = list(read_inputs(root))
    assert [(s.patient_id, s.study_id, s.image_id) for s in items] == [
        ("p10000032", "s50414267", "02aa804e-bde0afdd"),
        ("p10000032", "s50414267", "174413ec-4ec4c1f7"),
        ("p10000032", "s53189527", "2a2277a9-b0ded155"),
        ("p11000011", "s50000001", "aa000001-00000001"),
        ("p11000011", "s50000001", "aa000001-00000002"),
    ]
    assert [s.view for s in items] == ["PA", "LATERAL", "AP", "PA", "LL"]
    assert [s.split for s in items] == ["train", "train", "train", "test", "test"]
    assert items[0].report == items[1].report == "FINAL REPORT\n" + reports["CXR1900"]
    assert items[3].report.endswith(reports["CXR3"])
    assert items[2].image_path.suffix == ".dcm" and items[2].image_path.is_file()
    assert all(s.image_path.is_absolute() for s in items)
    assert list(read_inputs(root / "files")) == items


def test_a_dicom_uid_file_name_in_the_mimic_layout_is_hashed_into_the_id(mimic_tree):
    # third new-user trial: a PACS export in the MIMIC layout put the SOP Instance UID into
    # the image ids and file names (the CSV reader hashed it)
    root, _ = mimic_tree
    src = next(root.rglob("2a2277a9-b0ded155.dcm"))
    uid = "1.2.276.0.7230010.3.1.4.8323329.6904.1517875201.850819"
    src.rename(src.with_name(f"{uid}.dcm"))
    ids = [s.image_id for s in read_inputs(root)]
    assert not any(uid in i or "8323329" in i for i in ids)
    (hashed,) = [i for i in ids if i.startswith("uid-")]
    assert len(hashed) == len("uid-") + 12
    assert "02aa804e-bde0afdd" in ids  # MIMIC's own de-identified dicom_ids stay


def test_hide_uids_hashes_uids_standing_alone_not_the_standards_own():
    from cxrils.sources.base import hide_uids

    assert hide_uids("a/1.2.840.113619.2.55.3.6.320/x.dcm") == "a/uid-0e50a53a7ce2/x.dcm"
    assert hide_uids("JPEG Baseline (1.2.840.10008.1.2.4.50)") == "JPEG Baseline (1.2.840.10008.1.2.4.50)"
    assert hide_uids("x1.2.3.4.5y") == "x1.2.3.4.5y"


def test_a_repeated_image_s_reason_names_no_folder_of_this_machine_nor_a_uid(tmp_path):
    # review: "names image /abs/<uid folder>/<uid>.dcm again" went into excluded/*.json
    folder = tmp_path / "1.2.840.113619.2.55.3.604688119.969.1268071029.320"
    folder.mkdir()
    img = folder / "1.2.840.113619.2.55.3.604688119.969.1268071029.321.dcm"
    img.write_bytes(b"x")
    csv_path = tmp_path / "in.csv"
    csv_path.write_text(f"image_path,report\n{img},FINDINGS: a\n{img},FINDINGS: a\n")
    first, second = read_inputs(csv_path)
    assert first.problem is None and second.problem is not None
    assert str(tmp_path) not in second.problem and "113619" not in second.problem


def test_mimic_without_metadata_and_split(mimic_tree):
    root, _ = mimic_tree
    for p in root.glob("*.csv.gz"):
        p.unlink()
    items = list(read_inputs(root))
    assert len(items) == 5 and all(s.view is None and s.split is None for s in items)


def test_mimic_bad_split_value(mimic_tree):
    root, _ = mimic_tree
    _write_csv(root / "mimic-cxr-2.0.0-split.csv.gz", [{"dicom_id": "02aa804e-bde0afdd", "split": "holdout"}], gz=True)
    with pytest.raises(InputError, match=r"split\.csv\.gz: dicom_id 02aa804e-bde0afdd: split 'holdout'"):
        list(read_inputs(root))


def test_iu_folder_and_reports(shared_data):
    iu = shared_data / "iu_xray"
    assert detect_input_kind(iu) == "iu"
    items = list(read_inputs(iu))
    assert len(items) == 13
    assert sum(s.view == "FRONTAL" for s in items) == 9 and sum(s.view == "LATERAL" for s in items) == 4
    first = items[0]
    assert first.image_id == "CXR1900_IM-0584-1001" and first.study_id == "iu-CXR1900"
    assert "FINDINGS: There are XXXX sternotomy" in first.report and "IMPRESSION: 1. Stable" in first.report
    reports = list(read_iu_reports(iu))
    assert len(reports) == 3955
    assert reports[0][1] == ["CXR1_1_IM-0001-3001", "CXR1_1_IM-0001-4001"]


def test_iu_xml_reports(tmp_path):
    folder = tmp_path / "iu"
    (folder / "ecgen-radiology").mkdir(parents=True)
    (folder / "images").mkdir()
    (folder / "ecgen-radiology" / "12.xml").write_text(
        "<eCitation><MedlineCitation><Article><Abstract>"
        '<AbstractText Label="COMPARISON">None.</AbstractText>'
        '<AbstractText Label="FINDINGS">Left basilar atelectasis.</AbstractText>'
        '<AbstractText Label="IMPRESSION"/></Abstract></Article></MedlineCitation>'
        '<parentImage id="CXR12_IM-0001-1001"/><parentImage id="CXR12_IM-0001-2001"/></eCitation>'
    )
    (folder / "ecgen-radiology" / "13.xml").write_text("<eCitation><broken>")
    (folder / "images" / "CXR12_IM-0001-1001.png").write_bytes(b"")
    assert detect_input_kind(folder) == "iu"
    with pytest.raises(InputError, match=r"13\.xml: cannot parse IU report XML"):
        list(read_inputs(folder))
    (folder / "ecgen-radiology" / "13.xml").unlink()
    (item,) = read_inputs(folder)
    assert item.image_id == "CXR12_IM-0001-1001" and item.study_id == "iu-CXR12" and item.view is None
    assert item.report == "COMPARISON: None.\n\nFINDINGS: Left basilar atelectasis.\n"


def test_generic_csv(tmp_path, shared_data):
    pairs = shared_data / "pairs" / "all_pairs.csv"
    assert detect_input_kind(pairs) == "csv"
    items = list(read_inputs(pairs))
    assert len(items) == 391 and all(s.image_path.is_file() for s in items)
    assert items[0].study_id == "iu-CXR1900" and items[0].view == "FRONTAL"
    assert {s.view for s in items} == {"FRONTAL", "PA", "AP", "AP SUPINE"}
    # Same file name in two folders, defaults for optional columns, split aliases.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = tmp_path / "in.csv"
    _write_csv(
        path,
        [
            {"image_path": "a/x.png", "report": "r1", "split": "val"},
            {"image_path": "b/x.png", "report": "r2", "split": ""},
            {"image_path": str(tmp_path / "c.png"), "report": "r3", "split": "test"},
        ],
    )
    a, b, c = read_inputs(path)
    assert a.image_id.startswith("x-") and b.image_id.startswith("x-") and a.image_id != b.image_id
    assert a.study_id == a.image_id and a.patient_id == "" and a.view is None
    assert (a.split, b.split, c.split) == ("validate", None, "test")
    assert c.image_path == tmp_path / "c.png" and c.image_id == "c"


def test_generic_csv_repeated_stem_ids_do_not_depend_on_how_the_path_is_spelled(tmp_path):
    # The id of a repeated file stem is told apart by the file's place below the CSV's
    # folder, so a CSV rewritten with "./" or absolute paths resumes onto the same ids.
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    spellings = [("a/x.png", "b/x.png"), ("./a/x.png", "b//x.png"), (str(tmp_path / "a/x.png"), "a/../b/x.png")]
    ids = []
    for k, (first, second) in enumerate(spellings):
        path = tmp_path / f"in{k}.csv"
        _write_csv(path, [{"image_path": first, "report": "r1"}, {"image_path": second, "report": "r2"}])
        ids.append(tuple(s.image_id for s in read_inputs(path)))
    assert ids[0][0] != ids[0][1] and ids[0][0].startswith("x-")
    assert ids[1] == ids[0] and ids[2] == ids[0]
    assert ids[0][0] == f"x-{hashlib.sha1(b'a/x.png').hexdigest()[:8]}"
    # a file beside the CSV's folder keeps a relative key, not this machine's absolute path
    (tmp_path / "csvs").mkdir()
    path = tmp_path / "csvs" / "up.csv"
    _write_csv(path, [{"image_path": "../a/x.png", "report": "r1"}, {"image_path": "../b/x.png", "report": "r2"}])
    assert next(iter(read_inputs(path))).image_id == f"x-{hashlib.sha1(b'../a/x.png').hexdigest()[:8]}"
    # links are not followed: a folder of links to a store gives the same ids wherever the store lies
    (tmp_path / "store" / "p1").mkdir(parents=True)
    (tmp_path / "store" / "p2").mkdir(parents=True)
    (tmp_path / "proj" / "links").mkdir(parents=True)
    for d in ("p1", "p2"):
        (tmp_path / "store" / d / "x.png").write_bytes(b"")
        (tmp_path / "proj" / "links" / d).symlink_to(tmp_path / "store" / d)
    path = tmp_path / "proj" / "in.csv"
    _write_csv(
        path, [{"image_path": "links/p1/x.png", "report": "r1"}, {"image_path": "links/p2/x.png", "report": "r2"}]
    )
    assert next(iter(read_inputs(path))).image_id == f"x-{hashlib.sha1(b'links/p1/x.png').hexdigest()[:8]}"


def test_generic_csv_errors(tmp_path):
    path = tmp_path / "in.csv"
    _write_csv(
        path,
        [
            {"image_path": "a.png", "report": "r", "image_id": "k"},
            {"image_path": "b.png", "report": "r", "image_id": "k"},
        ],
    )
    first, again = read_inputs(path)  # the later row is that row's exclusion, the run goes on
    assert first.problem is None and first.image_id == "k"
    assert again.image_id == "row-2" and again.problem == (
        "row 2 (line 3): image id 'k' is also that of row 1 (line 2) (a.png); each image needs its own id"
    )
    path.write_text("image_path,view\na.png,PA\n")
    with pytest.raises(InputError, match=r"in\.csv: CSV has columns"):
        list(read_inputs(path))


def test_generic_csv_one_image_in_two_rows_names_both_rows_and_the_image(tmp_path):
    # The file name repeats, so the reader derives ids with a hash suffix: the later row's
    # exclusion names the rows and the file, which the user can find in the CSV; one bad
    # row does not stop the run (new-user trial, stop 53: it did).
    path = tmp_path / "mixed.csv"
    _write_csv(
        path,
        [
            {"study_id": "s1", "image_path": "img/x.png", "report": "Two\nlines."},
            {"study_id": "s2", "image_path": "other.png", "report": "r"},
            {"study_id": "s3", "image_path": "img/x.png", "report": "r"},
        ],
    )
    items = list(read_inputs(path))
    assert [s.problem is None for s in items] == [True, True, False]
    assert items[2].image_id == "row-3" and items[2].study_id == "s3"
    assert (
        items[2].problem
        == "row 3 (line 5), study s3: names image img/x.png again (row 1 (line 2) does); list each image once"
    )


def test_generic_csv_bad_rows_are_problems_not_errors(tmp_path):
    """A huge field, bytes that are not UTF-8, a report-only row and a bad split each
    spoil only their own row: it comes back with the reason (line, study id)."""
    path = tmp_path / "in.csv"
    huge = "Small left effusion. " * 50_000  # 1.05 MB, over csv's default field limit of 131,072
    rows = [
        {"study_id": "s1", "image_path": "a.png", "report": "No acute process.", "split": ""},
        {"study_id": "s2", "image_path": "b.png", "report": huge, "split": ""},
        {"study_id": "s3", "image_path": "c.png", "report": "BADBYTE here.", "split": ""},
        {"study_id": "s4", "image_path": "", "report": "Report only.", "split": ""},
        {"study_id": "s5", "image_path": "e.png", "report": "r", "split": "dev"},
        {"study_id": "s6", "image_path": "f.png", "report": "Multi\nline report.", "split": "val"},
    ]
    _write_csv(path, rows)
    path.write_bytes(path.read_bytes().replace(b"BADBYTE", b"caf\xe9"))  # Latin-1 e-acute
    items = list(read_inputs(path))
    assert [s.problem is None for s in items] == [True, True, False, False, False, True]
    assert items[1].report == huge and items[1].where == "row 2 (line 3)"
    assert items[2].problem == (
        "row 3 (line 4), study s3: column 'report' holds a byte that is not UTF-8 (0xe9 at character 3)"
    )
    assert items[3].problem == ("row 4 (line 5), study s4: no image_path: a report-only row has no image to segment")
    assert items[4].problem == "row 5 (line 6), study s5: split 'dev' is not one of ['train', 'validate', 'test']"
    assert [s.image_id for s in items[2:5]] == ["row-3", "row-4", "row-5"]
    assert items[5].split == "validate" and items[5].where == "row 6 (line 7)"


def test_unknown_layouts(tmp_path):
    with pytest.raises(InputError, match="input not found"):
        detect_input_kind(tmp_path / "nope")
    with pytest.raises(InputError, match="unknown input layout"):
        detect_input_kind(tmp_path)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(InputError, match="expected a generic CSV"):
        detect_input_kind(tmp_path / "x.txt")
    (tmp_path / "y.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"y\.csv: CSV has columns \['a', 'b'\]"):
        detect_input_kind(tmp_path / "y.csv")
    with pytest.raises(InputError, match="unknown input kind"):
        list(read_inputs(tmp_path / "y.csv", kind="dicomweb"))


def test_only_the_first_image_of_a_study_is_first_of_study(tmp_path):
    import csv

    from cxrils.sources import read_inputs

    for name in "abc":
        (tmp_path / f"{name}.png").write_bytes(b"x")
    path = tmp_path / "pairs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["study_id", "image_path", "report"])
        w.writerows([["s1", "a.png", "r"], ["s2", "b.png", "r"], ["s1", "c.png", "r"]])
    items = list(read_inputs(path, "csv"))
    assert [(s.study_id, s.first_of_study) for s in items] == [("s1", True), ("s2", True), ("s1", False)]


def test_a_study_s_absent_negatives_skip_images_the_input_already_excludes(tmp_path):
    # review: a lateral listed first (MIMIC orders a study's images by dicom_id) took the
    # study's absent-type negatives to an image the view QC then excluded (Appendix C.2)
    import csv

    from cxrils.sources import read_inputs

    for name in "abcd":
        (tmp_path / f"{name}.png").write_bytes(b"x")
    path = tmp_path / "pairs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["study_id", "image_path", "view", "report"])
        w.writerows(
            [
                ["s1", "a.png", "lateral", "r"],
                ["s1", "", "PA", "r"],  # a row with a problem (no image_path)
                ["s1", "b.png", "AP", "r"],
                ["s1", "c.png", "", "r"],
                ["s2", "d.png", "LL", "r"],  # no frontal image: no image takes them
            ]
        )
    items = list(read_inputs(path, "csv"))
    assert [(s.view, s.problem is not None, s.first_of_study) for s in items] == [
        ("LATERAL", False, False),
        (None, True, False),  # a problem row keeps no fields but its place
        ("AP", False, True),
        (None, False, False),
        ("LL", False, False),
    ]
    # with the view QC off (QCConfig.frontal_only = False) a lateral is processed, and is first
    items = list(read_inputs(path, "csv", frontal_only=False))
    assert [s.first_of_study for s in items] == [True, False, False, False, True]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_a_utf16_csv_gets_an_encoding_hint_not_garbled_columns(tmp_path, encoding):
    path = tmp_path / "in.csv"
    path.write_text("image_path,report\na.png,No acute process.\n", encoding=encoding)  # Excel's "Unicode text"
    with pytest.raises(InputError, match=r"in\.csv: the CSV is not UTF-8 \(it looks like UTF-16") as err:
        list(read_inputs(path))
    assert "save it as UTF-8" in str(err.value) and "\n" not in str(err.value)


def test_generic_csv_keeps_a_dicom_uid_in_a_file_name_out_of_the_ids(tmp_path):
    # PACS exports name files by their SOP Instance UID (the SIIM sample of ../shared/data
    # is "siim_sample_1.2.276.0.7230010.3.1.4.8323329.6904.1517875201.850819.dcm"): a UID
    # is a DICOM header field, which never leaves the loader (docs/io.md)
    uid = "1.2.276.0.7230010.3.1.4.8323329.6904.1517875201.850819"
    path = tmp_path / "in.csv"
    _write_csv(
        path,
        [
            {"image_path": f"siim_sample_{uid}.dcm", "report": "r", "image_id": ""},
            {"image_path": "CXR7_IM-2263-1001.png", "report": "r", "image_id": ""},  # no UID: the stem
            {"image_path": f"{uid}.dcm", "report": "r", "image_id": "mine"},  # the user's own id is kept
        ],
    )
    a, b, c = read_inputs(path)
    digest = hashlib.sha1(uid.encode()).hexdigest()[:12]
    assert a.image_id == a.study_id == f"siim_sample_uid-{digest}"
    assert b.image_id == "CXR7_IM-2263-1001" and c.image_id == "mine"
    assert all(uid not in s.image_id and uid not in s.study_id for s in (a, b))


def test_generic_csv_warns_when_one_study_has_two_reports(tmp_path, caplog):
    path = tmp_path / "in.csv"
    _write_csv(
        path,
        [
            {"study_id": "s1", "image_path": "a.png", "report": "Left  effusion."},
            {"study_id": "s1", "image_path": "b.png", "report": "Left effusion."},  # same text, other spacing
            {"study_id": "s1", "image_path": "c.png", "report": "No effusion."},
        ],
    )
    with caplog.at_level("WARNING", logger="cxrils.sources.generic_csv"):
        items = list(read_inputs(path))
    assert [s.report for s in items] == ["Left  effusion.", "Left effusion.", "No effusion."]  # each row keeps its own
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "row 3 (line 4) gives study s1 another report than row 1 (line 2) does" in warnings[0]


def test_generic_csv_a_repeated_row_renames_nothing_and_one_file_runs_once(tmp_path):
    # review of the first version: "./a.png" escaped the repeat check, and counting the
    # repeated row renamed the first row's image "a" to "a-<hash>" (breaking a resume)
    path = tmp_path / "in.csv"
    _write_csv(
        path,
        [
            {"image_path": "a.png", "report": "r"},
            {"image_path": "./a.png", "report": "r"},
            {"image_path": "a.png", "report": "r"},
        ],
    )
    first, again, third = read_inputs(path)
    assert first.problem is None and first.image_id == "a"
    assert again.problem == "row 2 (line 3): names image ./a.png again (row 1 (line 2) does); list each image once"
    assert third.problem == "row 3 (line 4): names image a.png again (row 1 (line 2) does); list each image once"


def test_generic_csv_one_file_under_two_given_ids_is_two_items(tmp_path):
    path = tmp_path / "in.csv"
    _write_csv(
        path,
        [
            {"image_path": "a.png", "report": "Left effusion.", "image_id": "a-v1"},
            {"image_path": "a.png", "report": "No effusion.", "image_id": "a-v2"},
            {"image_path": "a.png", "report": "r", "image_id": ""},  # no id of its own: a repeat
        ],
    )
    one, two, three = read_inputs(path)
    assert (one.image_id, two.image_id) == ("a-v1", "a-v2") and one.problem is None and two.problem is None
    assert three.problem == "row 3 (line 4): names image a.png again (row 1 (line 2) does); list each image once"


def test_an_image_id_that_is_no_safe_file_name_never_stops_the_run(tmp_path):
    # new-user trial: ".hidden.png", a 250-character file name or image_id "../evil" made
    # the dataset writer refuse the commit, which stopped the run at that row on every rerun
    import numpy as np
    from PIL import Image

    from cxrils.fsutil import SAFE_IMAGE_ID
    from cxrils.pipeline.runner import generate
    from cxrils.sources import read_inputs

    long = "x" * 250
    for name in (".hidden", long, "ok"):
        Image.fromarray(np.full((64, 64), 90, np.uint8)).save(tmp_path / f"{name}.png")
    path = tmp_path / "pairs.csv"
    _write_csv(
        path,
        [
            {"image_path": ".hidden.png", "report": "Left effusion.", "image_id": ""},
            {"image_path": f"{long}.png", "report": "Left effusion.", "image_id": ""},
            {"image_path": "ok.png", "report": "Left effusion.", "image_id": "../evil"},
            {"image_path": "ok.png", "report": "Left effusion.", "image_id": "a/b"},
            {"image_path": "ok.png", "report": "Left effusion.", "image_id": "fine"},
        ],
    )
    items = list(read_inputs(path))
    assert all(SAFE_IMAGE_ID.match(s.image_id) for s in items)
    hidden, longer, evil, slash, fine = items
    assert hidden.problem is None and hidden.image_id.startswith("hidden-")
    assert longer.problem is None and len(longer.image_id) <= 200
    assert "image_id '../evil' is not a safe file name" in evil.problem and "'a/b'" in slash.problem
    assert fine.problem is None and fine.image_id == "fine"
    from cxrils.config import load_config

    summary = generate(path, tmp_path / "ds", load_config(None, ["split.by=study"]), stages="fake_stages:FakeStages")
    assert summary["studies"]["total"] == 5 and summary["studies"]["excluded_by_reason"]["input"] == 2


def test_a_quote_never_closed_is_named_not_the_rest_of_the_file_read_as_one_report(tmp_path):
    # new-user trial: an unclosed quote in row 1 made the two rows after it part of its
    # report, silently (the parser read to the file's end)
    path = tmp_path / "pairs.csv"
    path.write_text('image_path,report,study_id\na.png,"Left effusion.,s1\nb.png,Cardiomegaly.,s2\nc.png,Edema.,s3\n')
    with pytest.raises(InputError, match=r"row 1 \(line 2\): a quoted field opened in this row is never closed"):
        list(read_inputs(path))
    # a quote closed too early spoils its own row only, with the parser's reason
    path.write_text('image_path,report,study_id\na.png,"Left effusion." noted,s1\nb.png,Cardiomegaly.,s2\n')
    first, second = read_inputs(path)
    assert "the CSV parser rejects the row" in first.problem and second.problem is None


def test_the_row_after_a_rejected_row_is_named_by_its_own_line(tmp_path):
    # final review: DictReader's line count stops at a rejected row, so the next row was
    # named by the rejected row's line
    path = tmp_path / "pairs.csv"
    path.write_text('image_path,report\na.png,"No" effusion\nb.png,"unclosed\n')
    with pytest.raises(InputError, match=r"row 2 \(line 3\): a quoted field opened in this row is never closed"):
        list(read_inputs(path))


def test_rows_joined_by_a_quote_that_a_later_quote_closes_are_named(tmp_path):
    # stop 60's trial: the rows between were lost in one rejected row, and not named
    path = tmp_path / "pairs.csv"
    path.write_text(
        "image_path,report,study_id\n"
        'a.png,"Left effusion.",s1\n'
        'b.png,"Right effusion.,s2\n'
        "c.png,Normal.,s3\n"
        'd.png,"Normal.",s4\n'
        'e.png,"Cardiomegaly.",s5\n'
    )
    items = list(read_inputs(path))
    assert [i.problem is None for i in items] == [True, False, True]
    assert items[1].problem.startswith("row 2 (line 3): the CSV parser rejects the row")
    assert "lines 3-5 were read as this one row (if a quote was left open on line 3" in items[1].problem
    assert items[2].study_id == "s5"
    # a row rejected on its own line says nothing of joined lines
    path.write_text('image_path,report,study_id\na.png,"Left effusion." noted,s1\nb.png,Cardiomegaly.,s2\n')
    first, _ = read_inputs(path)
    assert "were read as this one row" not in first.problem


def test_a_rejected_row_after_a_blank_line_is_named_by_its_own_line(tmp_path):
    # final read: the blank line before it was counted as the row's first, and the message
    # said two lines were joined
    path = tmp_path / "pairs.csv"
    path.write_text('image_path,report\na.png,Edema.\n\nb.png,"No" effusion\nc.png,Normal.\n')
    items = list(read_inputs(path))
    bad = next(i for i in items if i.problem is not None)
    assert bad.problem.startswith("row 2 (line 4)") and "were read as this one row" not in bad.problem
