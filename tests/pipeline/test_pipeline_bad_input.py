"""One bad input row never stops a batch, and splits keep a patient's images together:
`cxrils generate` on the real stages and real public pairs, and on the fake stages
(fake_stages.py) where only the runner's wiring matters."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from pipeline_helpers import FAKE, config, make_input
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.dataset import read_manifest, read_records
from cxrils.instructions import generate_records
from cxrils.pipeline.runner import generate
from cxrils.pipeline.study import Pipeline
from cxrils.sources import InputError, read_inputs

HUGE = "There is a small left pleural effusion. " * 25_000  # 1.0 MB, one sentence repeated


def _exclusions(dataset: Path) -> dict[str, str]:
    return {p.stem: json.loads(p.read_text())["reason"] for p in (dataset / "excluded").glob("*.json")}


def _iu_rows(shared_data: Path, n: int) -> list[dict]:
    pairs = shared_data / "pairs" / "iu_pairs.csv"
    with open(pairs, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))[:n]
    for r in rows:
        r["image_path"] = str((pairs.parent / r["image_path"]).resolve())
    return rows


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.mark.slow
@pytest.mark.needs_data
def test_bad_rows_become_their_own_exclusions_and_the_good_rows_all_produce_records(tmp_path, shared_data):
    good = [dict(r, image_id=Path(r["image_path"]).stem) for r in _iu_rows(shared_data, 3)]
    bad = [
        dict(good[0], study_id="huge", patient_id="p-huge", image_id="huge", report=HUGE),
        dict(good[0], study_id="latin1", patient_id="p-latin1", image_id="latin1", report="Mild cardiomegaly BADBYTE."),
        dict(good[0], study_id="textonly", patient_id="p-textonly", image_id="textonly", image_path=""),
    ]
    rows = [good[0], bad[0], good[1], bad[1], bad[2], good[2]]  # lines 2..7
    path = tmp_path / "pairs.csv"
    _write(path, rows)
    path.write_bytes(path.read_bytes().replace(b"BADBYTE", b"caf\xe9"))  # one Latin-1 byte
    out = tmp_path / "ds"
    result = CliRunner().invoke(app, ["generate", str(path), "-o", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    excluded = _exclusions(out)
    lines = [2]  # first line of each row: the IU reports span several lines
    for r in rows[:-1]:
        lines.append(lines[-1] + r["report"].count("\n") + 1)
    # The 1 MB report is read (csv's default limit is 131,072) and excluded by the length cap.
    assert excluded["huge"] == (
        "report: too long: 1000000 characters, more than inputs.report_max_chars = "
        f"20000; more than inputs.report_max_sentences = 200 sentences (study huge, "
        f"row 2 (line {lines[1]}))"
    )
    assert excluded["row-4"] == (
        f"input: row 4 (line {lines[3]}), study latin1: column 'report' holds a byte "
        "that is not UTF-8 (0xe9 at character 21)"
    )
    assert excluded["row-5"] == (
        f"input: row 5 (line {lines[4]}), study textonly: no image_path: a report-only row has no image to segment"
    )
    assert len(excluded) == 3
    records = read_records(out)
    for row in good:
        assert (records["study_id"] == row["study_id"]).sum() > 0, row["study_id"]
    assert set(records["study_id"]) == {r["study_id"] for r in good}


def test_a_too_long_report_is_excluded_or_cut_with_the_reason_recorded(tmp_path):
    path = make_input(tmp_path / "in", n=2, bad=False)
    text = path.read_text()
    path.write_text(text.replace("Small left effusion. No pneumonia.", "Small left effusion. " + "No edema. " * 30))
    cfg = config()
    cfg.inputs.report_max_sentences = 10
    summary = generate(path, tmp_path / "ex", cfg, stages=FAKE)
    assert summary["studies"]["excluded_by_reason"] == {"report": 1}
    (reason,) = _exclusions(tmp_path / "ex").values()
    assert reason == (
        "report: too long: more than inputs.report_max_sentences = 10 sentences (study s0, row 1 (line 2))"
    )
    cfg.inputs.report_over_cap = "truncate"
    generate(path, tmp_path / "cut", cfg, stages=FAKE)
    assert len(read_records(tmp_path / "cut").query("image_id == 'im000'")) > 0  # structured from 10 sentences
    # The cut is recorded in the grounding's provenance, which every record carries.
    pipe = Pipeline(cfg, FAKE)
    study = next(iter(read_inputs(path)))
    state = pipe.start(study, pipe.structure([study])[(study.study_id, study.report)])
    assert state.report.section_text.count(".") == 10
    for step in pipe.image_steps:
        state = step(state)
    grounding = pipe.ground(state)
    note = "truncated: more than inputs.report_max_sentences = 10 sentences (study s0, row 1 (line 2)); cut to "
    assert grounding.provenance["report"].startswith(note)
    records = generate_records(grounding, split="train", patient_id="p0", image_path="images/im000.png", cfg=cfg)
    assert all(json.loads(r["provenance"])["grounding"]["report"].startswith(note) for r in records)


def test_two_images_of_one_patient_without_patient_id_are_refused(tmp_path, shared_data):
    """The generic input's two images of one patient (one study, two views): without a
    patient id a hash split could put them in two splits; the run is refused with how
    to fix it, or runs by study when asked, and the manifest records the choice."""
    rows = _iu_rows(shared_data, 1)
    second = dict(rows[0], image_path=rows[0]["image_path"].replace("-1001.png", "-2001.png"))
    for r in (rows[0], second):
        del r["patient_id"]
    path = tmp_path / "pairs.csv"
    _write(path, [rows[0], second])
    with pytest.raises(
        InputError,
        match=r"pairs\.csv: 2 image\(s\) have no patient_id and no split .*"
        r"Add a patient_id column.*--split-by study",
    ):
        generate(path, tmp_path / "ds", config(), stages=FAKE)
    result = CliRunner().invoke(
        app, ["generate", str(path), "-o", str(tmp_path / "cli"), "--no-progress", "--stages", FAKE]
    )
    assert result.exit_code == 2 and "have no patient_id" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(
        app,
        [
            "generate",
            str(path),
            "-o",
            str(tmp_path / "by-study"),
            "--no-progress",
            "--stages",
            FAKE,
            "--split-by",
            "study",
        ],
    )
    assert result.exit_code == 0, result.output
    assert read_manifest(tmp_path / "by-study")["provenance"]["config"]["split"]["by"] == "study"
    assert len(set(read_records(tmp_path / "by-study")["split"])) == 1


@pytest.mark.slow
def test_a_patients_images_always_share_a_split(tmp_path):
    """The real split wiring (not a provider's): 40 patients with 2 images in 2 studies
    each. Split per image or per study, about a third of the patients would straddle
    two splits (validate and test are 10% each)."""
    path = make_input(tmp_path / "in", n=80, bad=False)
    rows = list(csv.DictReader(open(path, newline="")))
    for i, r in enumerate(rows):
        r["study_id"], r["patient_id"] = f"s{i}", f"p{i // 2}"
    _write(path, rows)
    generate(path, tmp_path / "ds", config(), stages=FAKE)
    records = read_records(tmp_path / "ds")
    per_patient = records.groupby("patient_id")["split"].nunique()
    assert len(per_patient) == 40 and (per_patient == 1).all()
    assert set(records["split"]) == {"train", "validate", "test"}  # the hash split did split
    # A split given for one image of a patient is the patient's split; two different ones are refused.
    rows[0]["split"], rows[1]["split"] = "test", ""
    _write(path, rows)
    generate(path, tmp_path / "given", config(), stages=FAKE)
    given = read_records(tmp_path / "given")
    assert set(given[given["patient_id"] == "p0"]["split"]) == {"test"}
    rows[1]["split"] = "train"
    _write(path, rows)
    with pytest.raises(InputError, match="patient 'p0' is in two splits: test .* and train"):
        generate(path, tmp_path / "two", config(), stages=FAKE)
