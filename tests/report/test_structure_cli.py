import csv
import json

import pytest
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.sources.reports import ReportInputError, read_reports

runner = CliRunner()


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def test_structure_generic_csv(tmp_path):
    src = tmp_path / "r.csv"
    write_csv(
        src,
        ["study_id", "report"],
        [
            ["s1", "FINDINGS: No right effusion; small left effusion.\n\nIMPRESSION: Effusion."],
            ["s2", "INDICATION: cough\n\nCOMPARISON:"],
        ],
    )
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["structure", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["study_id"] for r in rows] == ["s1", "s2"]
    f = rows[0]["findings"]
    assert rows[0]["section_used"] == "findings"
    assert [(x["presence"], x["labels"], x["lesion_type"]) for x in f] == [
        ("negative", ["right lung"], "effusion"),
        ("positive", ["left lung"], "effusion"),
    ]
    assert set(f[0]) >= {
        "entity",
        "sentence_index",
        "presence",
        "certainty",
        "locations",
        "labels",
        "lesion_type",
        "predicted_lesion_type",
    }
    assert rows[1]["excluded"] and rows[1]["findings"] == []
    assert "excluded" in res.output


def test_structure_iu_csv_and_folder(tmp_path):
    iu = tmp_path / "iu.csv"
    write_csv(iu, ["report_id", "findings", "impression", "mesh_major"], [["CXR1", "", "Bibasilar atelectasis.", "x"]])
    out = tmp_path / "o.jsonl"
    assert runner.invoke(app, ["structure", str(iu), "-o", str(out)]).exit_code == 0
    row = json.loads(out.read_text())
    assert row["section_used"] == "impression"
    assert row["findings"][0]["labels"] == ["right lung base", "left lung base"]
    folder = tmp_path / "files" / "p10"
    folder.mkdir(parents=True)
    (folder / "s5.txt").write_text("FINAL REPORT\n FINDINGS: Mild pulmonary edema.\n", encoding="utf-8")
    assert runner.invoke(app, ["structure", str(tmp_path / "files"), "-o", str(out)]).exit_code == 0
    row = json.loads(out.read_text())
    assert row["study_id"] == "s5" and row["findings"][0]["lesion_type"] == "edema"


def test_an_unreadable_report_file_is_one_excluded_study_not_the_end_of_the_folder(tmp_path):
    # new-user trial: one non-UTF-8 file stopped the whole folder with no output
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "s1.txt").write_text("FINDINGS: Mild pulmonary edema.", encoding="utf-8")
    (folder / "s2.txt").write_bytes("FINDINGS: Épanchement \xe9".encode("latin-1"))
    (folder / "s3.txt").write_text("FINDINGS: Small left pleural effusion.", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["structure", str(folder), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = {r["study_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(rows) == ["s1", "s2", "s3"]
    assert rows["s2"]["excluded"].startswith("s2.txt: cannot read report text") and rows["s2"]["findings"] == []
    assert [f["lesion_type"] for f in rows["s1"]["findings"]] == ["edema"]
    assert [f["lesion_type"] for f in rows["s3"]["findings"]] == ["effusion"]
    assert "excluded: cannot read report text" in res.output  # one row, whatever the file


def test_bad_inputs_exit_2_with_file_named(tmp_path):
    bad = tmp_path / "bad.csv"
    write_csv(bad, ["id", "text"], [["1", "x"]])
    res = runner.invoke(app, ["structure", str(bad), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "bad.csv" in res.output and "study_id" in res.output
    assert not (tmp_path / "o.jsonl").exists()
    res = runner.invoke(app, ["structure", str(tmp_path / "nope.csv"), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "no such file" in res.output
    res = runner.invoke(app, ["structure", str(bad), "-o", str(tmp_path / "o.jsonl"), "--structurer", "x"])
    assert res.exit_code == 2 and "unknown report structurer" in res.output


def test_repeated_study_id_rejected(tmp_path):
    src = tmp_path / "r.csv"
    write_csv(src, ["study_id", "report"], [["s1", "a"], ["s1", "a"], ["s2", "c"]])
    assert list(read_reports(src)) == [("s1", "a"), ("s2", "c")]  # one row per image
    write_csv(src, ["study_id", "report"], [["s1", "a"], ["s1", "b"]])
    with pytest.raises(ReportInputError, match="repeated with a different report"):
        list(read_reports(src))


def test_the_progress_total_counts_studies_not_rows(tmp_path):
    # stop 60's trial: the bar of a CSV with one row per image counted rows against studies
    from cxrils.sources.reports import count_reports

    src = tmp_path / "r.csv"
    write_csv(src, ["study_id", "report"], [["s1", "a"], ["s1", "a"], ["s2", "c"], ["s3", "a"], ["s3", "a"]])
    assert count_reports(src) == 3
    write_csv(src, ["study_id", "report"], [["s1", "a"], ["s1", "b"]])
    assert count_reports(src) is None  # refused by the reader: no total
    assert count_reports(tmp_path / "nope.csv") is None


def test_structure_reads_the_differential_key(tmp_path):
    """One rule set for the command and the benchmark: report.differential_certainty."""
    src = tmp_path / "r.csv"
    write_csv(src, ["study_id", "report"], [["s1", "FINDINGS: Left basilar atelectasis versus scar."]])
    certs = {}
    for value in ("tentative", "definitive"):
        out = tmp_path / f"{value}.jsonl"
        res = runner.invoke(
            app, ["structure", str(src), "-o", str(out), "--set", f"report.differential_certainty={value}"]
        )
        assert res.exit_code == 0, res.output
        certs[value] = [x["certainty"] for x in json.loads(out.read_text())["findings"]]
    assert certs == {"tentative": ["tentative", "tentative"], "definitive": ["definitive", "definitive"]}
    res = runner.invoke(
        app,
        ["structure", str(src), "-o", str(tmp_path / "x.jsonl"), "--set", "report.differential_certainty=sometimes"],
    )
    assert res.exit_code == 2 and "report.differential_certainty" in res.output


def test_structure_caps_long_reports_as_generate_does(tmp_path):
    # 150,000 characters: over csv's default field limit (131,072) and inputs.report_max_chars (20,000)
    long = "FINDINGS: " + "Small left effusion. " * 7143
    assert len(long) > 150_000
    src = tmp_path / "r.csv"
    write_csv(src, ["study_id", "report"], [["s1", long], ["s2", "FINDINGS: Small left effusion."]])
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["structure", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["excluded"].startswith("too long:") and "inputs.report_max_chars = 20000" in rows[0]["excluded"]
    assert rows[0]["findings"] == [] and rows[1]["excluded"] is None and rows[1]["findings"]
    res = runner.invoke(app, ["structure", str(src), "-o", str(out), "--set", "inputs.report_over_cap=truncate"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["excluded"] is None and rows[0]["findings"]  # cut at the cap, then structured
    # the cut is said on the study's line (as generate flags it), and only on that study's
    assert [f for f in rows[0]["flags"] if f.startswith("truncated:")] and "study s1" in rows[0]["flags"][-1]
    assert not [f for f in rows[1]["flags"] if f.startswith("truncated")]
    assert "cut at the report-length cap" in res.output


def test_report_text_given_as_input_is_named(tmp_path):
    # a new user's trial (stop 58): the text read as "FINDINGS:...: no such file or folder"
    text = "FINDINGS: Small left pleural effusion. No pneumothorax. The heart is normal in size."
    res = CliRunner().invoke(app, ["structure", text, "-o", str(tmp_path / "s.jsonl")])
    assert res.exit_code == 2
    assert "for one report's text, put it in a .txt file inside a folder" in res.output, res.output
    assert "'FINDINGS: Small left pleural effusion. No pneumothorax. T...'" in res.output  # 57 characters + ...
    assert not (tmp_path / "s.jsonl").exists()
