"""The runner with small deterministic stages (fake_stages.py): exclusions, workers,
model loading, resume, limits, summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from pipeline_helpers import (
    ABSENT_OF_REPORT_0,
    FAKE,
    REAL_RECORDS,
    REPORTS,
    X_HAT,
    absent_negatives_by_image,
    config,
    make_input,
    snapshot,
    study_of_three,
)

from cxrils.pipeline.runner import SUMMARY_NAME, RunError, generate
from cxrils.pipeline.stages import StageLoadError
from cxrils.pipeline.study import Pipeline
from cxrils.sources import read_inputs


@pytest.fixture()
def pairs(tmp_path):
    return make_input(tmp_path / "in")


def test_process_study_bad_studies_become_exclusions(pairs):
    pipe = Pipeline(config(), FAKE)
    studies = {s.image_id: s for s in read_inputs(pairs)}
    reports = pipe.structure(list(studies.values()))
    res = {i: pipe.process_study(s, reports[(s.study_id, s.report)]) for i, s in studies.items()}
    assert res["broken"].excluded.startswith("error:image: ")
    assert "broken.png" in res["broken"].excluded or "cannot identify" in res["broken"].excluded
    assert res["empty"].excluded == "report: no findings, impression or last paragraph"
    assert res["lat"].excluded == "view_not_frontal: LATERAL"
    assert res["black"].excluded == (
        "qc_anatomy: no right lung found: not a frontal chest view, or a failed segmentation"
    )
    assert res["bright"].excluded == "qc_crosscheck: lung x-extent differs"
    assert res["nogrounding"].excluded == "error:grounding: ValueError: grounding failed on purpose"
    for bad in ("broken", "empty", "lat", "black", "bright", "nogrounding"):
        assert res[bad].records is None and res[bad].x is None
    good = res["im000"]
    assert good.excluded is None and good.x.dtype == np.uint8 and good.x.shape == (48, 48)
    assert {r["image_path"] for r in good.records} == {"images/im000.png"}
    # Report 0: positive effusion (left) and a negative pneumonia.
    assert good.stats["reported"] == {"effusion": 1}
    assert sum(good.stats["records"].values()) == len(good.records) == 2


def test_an_image_too_small_to_be_a_radiograph_is_excluded_as_such(pairs):
    # new-user trial: a 1 x 1 image was excluded as "no right lung found"; predict and the
    # service name its size (cxrils.io.base.image_too_small)
    Image.fromarray(np.zeros((1, 1), np.uint8)).save(pairs.parent / "img" / "tiny.png")
    rows = pd.read_csv(pairs)
    rows.loc[0, "image_path"] = "img/tiny.png"
    rows.iloc[:1].to_csv(pairs, index=False)
    pipe = Pipeline(config(), FAKE)
    (study,) = read_inputs(pairs)
    state = pipe.process_study(study, pipe.structure([study])[(study.study_id, study.report)])
    assert state.excluded == "image_too_small: the image is 1 x 1 pixels; a chest X-ray needs at least 32 on each side"


def test_an_exclusion_reason_names_the_file_not_its_folder_nor_a_uid(pairs):
    # third new-user trial: the reason, written into the dataset, held this machine's
    # absolute path and the DICOM UIDs of the folder and file names
    uid = "1.2.840.113619.2.55.3.604688119.969.1268071029.321"
    folder = pairs.parent / "img" / "1.2.840.113619.2.55.3.604688119.969.1268071029.320"
    folder.mkdir()
    (folder / f"{uid}.dcm").write_bytes(b"DICM not really")
    rows = pd.read_csv(pairs)
    rows.loc[0, "image_path"] = f"img/{folder.name}/{uid}.dcm"
    rows.iloc[:1].to_csv(pairs, index=False)
    pipe = Pipeline(config(), FAKE)
    (study,) = read_inputs(pairs)
    state = pipe.process_study(study, pipe.structure([study])[(study.study_id, study.report)])
    assert state.excluded.startswith("error:image: ")
    assert str(pairs.parent) not in state.excluded and "113619" not in state.excluded
    assert ".dcm" in state.excluded  # the file is still named, by its hashed name


def test_structure_falls_back_per_report_when_the_batch_fails(tmp_path):
    path = make_input(tmp_path / "in", n=3, bad=False)
    text = path.read_text().replace("No acute process.", "STRUCTURER-CRASH")
    text = text.replace("Right opacity and right consolidation.", "STRUCTURER-CRASH")
    path.write_text(text)
    pipe = Pipeline(config(), FAKE)
    studies = list(read_inputs(path))
    reports = pipe.structure(studies)
    crashed = reports[(studies[1].study_id, studies[1].report)]
    assert crashed.excluded == "error:report: RuntimeError: structurer crashed"
    assert reports[(studies[0].study_id, studies[0].report)].excluded is None
    result = pipe.process_study(studies[1], crashed)
    assert result.excluded == crashed.excluded


def test_generate_summary_and_json(pairs, tmp_path):
    out = tmp_path / "ds"
    summary = generate(pairs, out, config(), stages=FAKE)
    assert summary["studies"]["total"] == 19
    assert summary["studies"]["excluded"] == 7
    assert summary["studies"]["excluded_by_reason"] == {
        "error:commit": 1,
        "error:grounding": 1,
        "error:image": 1,
        "qc_anatomy": 1,
        "qc_crosscheck": 1,
        "report": 1,
        "view_not_frontal": 1,
    }
    from cxrils.dataset import read_exclusions

    reasons = read_exclusions(out)
    assert reasons["badrecords"].startswith("error:commit: DatasetError: study badrecords: record 'badrecords:0'")
    assert not (out / "images" / "badrecords.png").exists()
    on_disk = json.loads((out / SUMMARY_NAME).read_text())
    assert on_disk == json.loads(json.dumps(summary))
    f = summary["findings"]
    assert f["all"]["reported"] == sum(v["reported"] for k, v in f.items() if k != "all") > 0
    for v in f.values():
        assert 0 <= v["grounded"] <= v["reported"]
        if v["reported"]:
            assert v["recall"] == pytest.approx(v["grounded"] / v["reported"], abs=1e-4)
    rec = summary["records"]
    assert rec["total"] == sum(p for t in rec["by_lesion_type"].values() for p in t.values())
    assert rec["total"] == sum(p for t in rec["by_instruction_type"].values() for p in t.values())
    from cxrils.dataset import read_records

    df = read_records(out)
    assert len(df) == rec["total"]
    assert (df["polarity"] == "positive").sum() == sum(t["positive"] for t in rec["by_lesion_type"].values())
    assert set(df["image_id"]) <= {s.image_id for s in read_inputs(pairs)}


def test_each_image_with_records_keeps_how_it_was_grounded(pairs, tmp_path):
    from cxrils.dataset import read_exclusions, read_grounding, read_records

    out = tmp_path / "ds"
    generate(pairs, out, config(), stages=FAKE)
    df = read_records(out)
    excluded = read_exclusions(out)
    assert excluded and not any((out / "grounding" / f"{image_id}.json").exists() for image_id in excluded)
    reports = {s.image_id: s.report for s in read_inputs(pairs)}
    n_positive = 0
    for image_id, group in df.groupby("image_id"):
        doc = read_grounding(out, image_id)
        assert doc["image_id"] == image_id and doc["excluded"] is None
        assert doc["report"]["section_text"] == reports[image_id]  # the fake structurer uses the whole text
        assert doc["empty_locations"] == ["left upper zone lung"] and doc["ctr"] == 0.4
        by_key = {
            (f["finding"]["entity"], f["finding"]["sentence_index"], f["finding"]["sentence"]): f
            for f in doc["findings"]
        }
        for r in group.itertuples():  # the finding each record came from is in the file, as grounded
            f = by_key[(r.finding_entity, r.sentence_index, r.sentence)]
            if r.polarity == "positive":
                n_positive += 1
                assert f["grounded"] == list(r.locations) and f["mask_area"] == r.mask_area > 0
                assert f["drop_reason"] is None
    assert n_positive > 0


def test_a_grounding_account_that_fails_excludes_its_image_not_the_run(pairs, tmp_path, monkeypatch):
    import cxrils.grounding
    from cxrils.dataset import read_exclusions, read_records

    real, calls = cxrils.grounding.grounding_to_dict, []

    def first_fails(sg):
        calls.append(sg.image_id)
        if len(calls) == 1:
            raise TypeError("a value JSON cannot hold")
        return real(sg)

    monkeypatch.setattr(cxrils.grounding, "grounding_to_dict", first_fails)
    out = tmp_path / "ds"
    generate(pairs, out, config(), stages=FAKE)
    reasons = read_exclusions(out)
    assert reasons[calls[0]] == "error:records: TypeError: a value JSON cannot hold"
    assert not (out / "grounding" / f"{calls[0]}.json").exists()
    images = set(read_records(out)["image_id"])
    assert calls[0] not in images and set(calls[1:]) & images  # the others went on


@pytest.mark.slow
def test_workers_give_the_same_dataset_and_load_models_once(pairs, tmp_path, monkeypatch):
    loads = tmp_path / "loads"
    loads.mkdir()
    monkeypatch.setenv("CXRILS_FAKE_LOADS", str(loads))
    generate(pairs, tmp_path / "one", config(), stages=FAKE, workers=1)
    one_loads = sorted(p.name.split("-")[0] for p in loads.iterdir())
    assert one_loads == ["anatomy", "anomaly", "detector"]  # 19 images, each model once
    for p in loads.iterdir():
        p.unlink()
    generate(pairs, tmp_path / "two", config(), stages=FAKE, workers=2)
    by_pid: dict[str, list[str]] = {}
    for p in loads.iterdir():
        name, pid, _ = p.name.split("-")
        by_pid.setdefault(pid, []).append(name)
    assert 1 <= len(by_pid) <= 2
    for names in by_pid.values():
        assert sorted(names) == ["anatomy", "anomaly", "detector"]
    assert snapshot(tmp_path / "one") == snapshot(tmp_path / "two")


def test_resume_after_partial_run_equals_full_run(pairs, tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    generate(pairs, full, config(), stages=FAKE)
    first = generate(pairs, part, config(), stages=FAKE, limit=6)
    assert first["studies"]["total"] == 6
    seen = []
    generate(pairs, part, config(), stages=FAKE, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (6, 19) and seen[-1] == (19, 19) and len(seen) == 14
    assert snapshot(part) == snapshot(full)


def test_limit_takes_the_first_studies_in_input_order(pairs, tmp_path):
    summary = generate(pairs, tmp_path / "a", config(), stages=FAKE, limit=4)
    from cxrils.dataset import read_records

    first4 = [s.image_id for s in read_inputs(pairs)][:4]
    assert summary["studies"]["total"] == 4
    assert set(read_records(tmp_path / "a")["image_id"]) <= set(first4)
    assert summary["studies"]["excluded_by_reason"] == {"error:image": 1}  # broken.png is 4th


def test_resume_with_another_config_is_refused(pairs, tmp_path):
    generate(pairs, tmp_path / "ds", config(), stages=FAKE, limit=2)
    cfg = config()
    cfg.grounding.tau_ano = 0.3
    with pytest.raises(
        RunError,
        match=r"cannot resume: .* config\.grounding\.tau_ano: 0\.1, now 0\.3\. "
        r"Resume only with .* to start over, delete",
    ):
        generate(pairs, tmp_path / "ds", cfg, stages=FAKE)


def _rows(pairs):
    """The rows of the generic CSV ``pairs``, as dicts."""
    import csv

    with open(pairs, newline="") as fh:
        return list(csv.DictReader(fh))


def _input_with(pairs, folder, rows):
    """A copy of the input folder of ``pairs`` at ``folder`` whose CSV holds ``rows``."""
    import csv
    import shutil

    path = folder / pairs.name
    shutil.copytree(pairs.parent, folder)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_resume_needs_every_done_image_unchanged_in_the_input_more_images_are_fine(pairs, tmp_path):
    import shutil

    ds = tmp_path / "ds"
    generate(pairs, ds, config(), stages=FAKE, limit=3)
    rows = _rows(pairs)

    def write(name, rows_):
        return _input_with(pairs, tmp_path / name, rows_)

    with pytest.raises(RunError, match=r"cannot resume: .* holds 3 images this input does not have"):
        generate(write("other", rows[3:]), ds, config(), stages=FAKE)
    edited = write("edited", [{**rows[0], "report": rows[0]["report"] + " Edited."}, *rows[1:]])
    with pytest.raises(RunError, match=r"1 images already done .* have another study in this input"):
        generate(edited, ds, config(), stages=FAKE)
    moved = tmp_path / "moved" / pairs.name  # the same input elsewhere, and more of it than the first run's 3
    shutil.copytree(pairs.parent, moved.parent)
    assert generate(moved, ds, config(), stages=FAKE)["studies"]["total"] == 19


def test_resume_refuses_a_new_first_image_of_a_done_study_and_a_damaged_counts_file(pairs, tmp_path):
    # Appendix C.2: the study's first image alone gets its absent-type negatives; a grown
    # input whose new image comes first would give them twice
    rows = _rows(pairs)
    b = rows[0]
    a = {**rows[1], "study_id": b["study_id"], "patient_id": b["patient_id"], "report": b["report"]}

    def write(name, rows_):
        return _input_with(pairs, tmp_path / name, rows_)

    ds = tmp_path / "ds"
    generate(write("one", [b]), ds, config(), stages=FAKE)
    with pytest.raises(RunError, match="another image of its study now comes before it"):
        generate(write("grown", [a, b]), ds, config(), stages=FAKE)
    assert generate(write("grown_after", [b, a]), ds, config(), stages=FAKE)["studies"]["total"] == 2
    (counts,) = [
        p for p in (ds / "pipeline" / "studies").glob("*.json") if b["image_path"].split("/")[-1][:5] in p.name
    ]
    for bad in ('{"records": {}', "[1]"):
        counts.write_text(bad)
        with pytest.raises(RunError, match="unreadable counts file"):
            generate(write(f"again{len(bad)}", [b, a]), ds, config(), stages=FAKE)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_study_s_absent_negatives_go_to_its_first_image_that_is_not_excluded(pairs, tmp_path, workers):
    # review (stop 59): the study's first image took its absent-type negatives with it
    # when its pixels excluded it; the next image of the study must carry them
    from cxrils.dataset import read_records

    inp = study_of_three(tmp_path / "in")
    assert [s.first_of_study for s in read_inputs(inp)] == [True, False, False]  # the input cannot know
    summary = generate(inp, tmp_path / "ds", config(), stages=REAL_RECORDS, workers=workers)
    assert summary["studies"]["excluded_by_reason"] == {"error:image": 1}
    # one per type, on im000 alone
    assert absent_negatives_by_image(tmp_path / "ds") == {"im000": list(ABSENT_OF_REPORT_0)}
    assert summary["records"]["total"] == len(read_records(tmp_path / "ds"))  # the counts follow the records
    # a first image that is not excluded keeps them
    inp = study_of_three(tmp_path / "in_ok", first="img/im002.png")
    generate(inp, tmp_path / "ds_ok", config(), stages=REAL_RECORDS, workers=workers)
    assert absent_negatives_by_image(tmp_path / "ds_ok") == {"im002": list(ABSENT_OF_REPORT_0)}


@pytest.mark.parametrize("limit", [1, 2])
def test_a_resumed_run_gives_a_study_s_absent_negatives_to_the_same_image(pairs, tmp_path, limit):
    inp = study_of_three(tmp_path / "in")
    generate(inp, tmp_path / "whole", config(), stages=REAL_RECORDS)
    generate(inp, tmp_path / "parts", config(), stages=REAL_RECORDS, limit=limit)
    generate(inp, tmp_path / "parts", config(), stages=REAL_RECORDS)
    assert snapshot(tmp_path / "parts") == snapshot(tmp_path / "whole")
    assert absent_negatives_by_image(tmp_path / "parts") == {"im000": list(ABSENT_OF_REPORT_0)}


def test_resume_refuses_a_new_image_before_a_done_image_of_its_study(pairs, tmp_path):
    # which image carries the study's negatives depends on the images before it
    rows = [
        {"image_path": f"img/im00{i}.png", "report": REPORTS[0], "study_id": "sx", "patient_id": "px", "view": "PA"}
        for i in range(3)
    ]
    ds = tmp_path / "ds"
    generate(_input_with(pairs, tmp_path / "a", [rows[0], rows[2]]), ds, config(), stages=REAL_RECORDS)
    with pytest.raises(RunError, match="another image of its study now comes before it"):
        generate(_input_with(pairs, tmp_path / "b", rows), ds, config(), stages=REAL_RECORDS)
    grown = _input_with(pairs, tmp_path / "c", [rows[0], rows[2], rows[1]])
    assert generate(grown, ds, config(), stages=REAL_RECORDS)["studies"]["total"] == 3
    # review: an image the input excludes (a lateral under qc.frontal_only) never carries
    # them, so a grown download that lists a new lateral first resumes
    lateral = {**rows[1], "image_path": "img/lat.png", "view": "LATERAL"}
    grown = _input_with(pairs, tmp_path / "d", [rows[0], lateral, rows[2], rows[1]])
    assert generate(grown, ds, config(), stages=REAL_RECORDS)["studies"]["total"] == 4
    # and a done lateral never carries them, so a new image may come before it
    ds = tmp_path / "ds_lateral"
    generate(_input_with(pairs, tmp_path / "e", [rows[0], lateral]), ds, config(), stages=REAL_RECORDS)
    grown = _input_with(pairs, tmp_path / "f", [rows[0], rows[1], lateral])
    generate(grown, ds, config(), stages=REAL_RECORDS)
    generate(grown, tmp_path / "fresh", config(), stages=REAL_RECORDS)
    assert snapshot(ds) == snapshot(tmp_path / "fresh")


def test_a_later_image_is_paraphrased_once_and_the_carrier_with_its_negatives(tmp_path, monkeypatch):
    # review: the records of a later image with the study's negatives were paraphrased
    # too, almost always for nothing (the LLM asked twice as often)
    from collections import Counter

    from cxrils.config import load_config
    from cxrils.dataset import read_records
    from cxrils.instructions.paraphrase import PERSONAS

    asked = []

    def complete(prompt):
        asked.append(prompt)
        return "Please segment it.\nShow it.\nOutline it."

    monkeypatch.setattr(Pipeline, "paraphrase_complete", property(lambda self: complete))
    cfg = load_config(None, [*X_HAT, "instructions.paraphrase=true"])
    # im001's records without the negatives are not empty: they share the carrier's
    # records but its absent negatives, which are asked once
    for first, rest, carrier in (
        ("img/im002.png", ("img/im000.png", "img/im001.png"), "im002"),
        ("img/broken.png", ("img/im000.png", "img/im001.png"), "im000"),
        ("img/broken.png", ("img/im001.png",), "im001"),
    ):
        asked.clear()
        ds = tmp_path / f"ds_{carrier}"
        generate(study_of_three(tmp_path / f"in_{carrier}", first, rest), ds, cfg, stages=REAL_RECORDS)
        df = read_records(ds)
        originals = df[df["paraphrase_of"] == ""]
        # one prompt per persona for each record written, none for a dropped variant's
        asked_for = Counter(prompt.rsplit("Instruction: ", 1)[1] for prompt in asked)
        assert asked_for == Counter({t: n * len(PERSONAS) for t, n in Counter(originals["instruction"]).items()})
        assert set(df.loc[df["paraphrase_of"] != "", "paraphrase_of"]) <= set(originals["record_id"])
        # the carrier's negatives, each with its paraphrases (the stub gives 3 per persona)
        each = 1 + len(PERSONAS) * min(3, cfg.instructions.paraphrase_variants_per_persona)
        assert Counter(absent_negatives_by_image(ds)[carrier]) == dict.fromkeys(ABSENT_OF_REPORT_0, each)
        assert set(absent_negatives_by_image(ds)) == {carrier}


@pytest.mark.parametrize("workers", [1, 2])
def test_paraphrasing_without_an_llm_stops_the_run_with_any_number_of_workers(tmp_path, workers):
    # review: with 2 workers every image was excluded as error:records instead
    from cxrils.config import load_config

    cfg = load_config(None, [*X_HAT, "instructions.paraphrase=true"])
    with pytest.raises(StageLoadError, match="llm"):
        generate(study_of_three(tmp_path / "in"), tmp_path / "ds", cfg, stages=REAL_RECORDS, workers=workers)


def test_a_study_whose_done_image_lost_its_counts_file_keeps_one_set_of_negatives(tmp_path):
    # review: a done image without its counts file was taken for an excluded one
    inp = study_of_three(tmp_path / "in", first="img/im002.png")
    ds = tmp_path / "ds"
    generate(inp, ds, config(), stages=REAL_RECORDS, limit=1)
    (ds / "pipeline" / "studies" / "im002.json").unlink()
    generate(inp, ds, config(), stages=REAL_RECORDS)
    assert absent_negatives_by_image(ds) == {"im002": list(ABSENT_OF_REPORT_0)}


def test_unknown_runner_and_stage_provider(pairs, tmp_path):
    with pytest.raises(RunError, match="unknown runner"):
        generate(pairs, tmp_path / "ds", config(), runner="spark", stages=FAKE)
    with pytest.raises(ValueError, match="cannot import stage provider"):
        Pipeline(config(), "no_such_module:Stages")
    with pytest.raises(ValueError, match="package.module:Name"):
        Pipeline(config(), "nocolon")


class _NoWeights:
    """Fake stages whose anatomy model cannot be built."""

    def __getattr__(self, name):
        from fake_stages import FakeStages

        return getattr(FakeStages(), name)

    def make_anatomy(self, cfg):
        raise FileNotFoundError("weights/anatomy.safetensors not found")


NO_WEIGHTS = _NoWeights()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stage_that_cannot_load_stops_the_run(tmp_path, workers):
    from cxrils.pipeline.stages import StageLoadError

    pairs = make_input(tmp_path / "in", n=3, bad=False)
    with pytest.raises(
        StageLoadError,
        match=r"cannot load the anatomy stage \(backend 'builtin'\): "
        r"FileNotFoundError: weights/anatomy.safetensors not found",
    ):
        generate(pairs, tmp_path / "ds", config(), stages="test_pipeline_runner:NO_WEIGHTS", workers=workers)
    assert not list((tmp_path / "ds" / "excluded").glob("*.json"))


@pytest.fixture()
def through_step_6(tmp_path):
    """Run steps 1-6 of one image of the synthetic input; return (pipeline, state)."""
    studies = {s.image_id: s for s in read_inputs(make_input(tmp_path / "in"))}

    def run(cfg, image_id="bright"):
        pipe = Pipeline(cfg, FAKE)
        pipe.load_models()
        state = pipe.start(studies[image_id], None)
        for step in (pipe.run_anatomy_x, pipe.run_anomaly, pipe.run_anatomy_x_hat):
            state = step(state)
        return pipe, state

    return run


def test_default_builtin_chain_segments_once_without_crosscheck(through_step_6):
    from cxrils.config import Config

    pipe, state = through_step_6(Config(), "im000")  # anomaly "builtin": x_hat is not a radiograph
    assert pipe.anatomy_on_x_hat is False
    assert state.excluded is None and state.anatomy is state.anatomy_x
    assert pipe.anatomy_segmenter.calls == 1 and pipe.edit_region_segmenter is pipe.anatomy_segmenter


def test_x_hat_chain_segments_twice_and_crosschecks(through_step_6):
    pipe, state = through_step_6(config())
    assert pipe.anatomy_segmenter.calls == 2
    assert state.excluded == "qc_crosscheck: lung x-extent differs"
    _, good = through_step_6(config(), "im000")
    assert good.excluded is None and good.anatomy is not good.anatomy_x


def test_auto_uses_x_hat_with_radedit():
    from cxrils.config import load_config

    assert Pipeline(load_config(None, ["backends.anomaly=radedit"]), FAKE).anatomy_on_x_hat is True
    with pytest.raises(Exception, match="anatomy_on_x_hat must be yes, no or auto"):
        Pipeline(load_config(None, ["backends.anatomy_on_x_hat=maybe"]), FAKE).load_models()


def test_edit_region_backend_of_its_own(through_step_6):
    from cxrils.config import load_config

    cfg = load_config(None, ["backends.anatomy_edit_region=hybridgnet", "backends.anatomy=cxas"])
    pipe, state = through_step_6(cfg, "im001")
    assert state.anatomy_x.backend == "fake-hybridgnet" and state.anatomy.backend == "fake-cxas"
    assert pipe.edit_region_segmenter.calls == 1 and pipe.anatomy_segmenter.calls == 1
    assert state.excluded is None
    _, black = through_step_6(cfg, "black")  # the edit-region backend's organs are checked
    assert black.excluded == "qc_anatomy: no right lung found: not a frontal chest view, or a failed segmentation"


def test_a_structurer_failing_on_every_report_stops_the_run(tmp_path):
    from cxrils.pipeline.stages import StageLoadError

    path = make_input(tmp_path / "in", n=3, bad=False)
    df = path.read_text()
    for text in (
        "Small left effusion. No pneumonia.",
        "Right opacity and right consolidation.",
        "Heart is normal. Left atelectasis.",
    ):
        df = df.replace(text, "STRUCTURER-CRASH")
    path.write_text(df)
    with pytest.raises(StageLoadError, match="failed for every report, e.g. error:report: RuntimeError"):
        generate(path, tmp_path / "ds", config(), stages=FAKE)
    assert not list((tmp_path / "ds" / "excluded").glob("*.json"))


def test_paraphrasing_is_wired_through_the_llm_backend(pairs):
    """instructions.paraphrase=true: without an LLM the run stops before anything is
    committed; with one, each record gets persona paraphrases linked to it (App. C.3)."""
    cfg = config()
    cfg.instructions.paraphrase = True
    with pytest.raises(StageLoadError, match="llm_base_url"):
        Pipeline(cfg, FAKE).load_models()
    pipe = Pipeline(cfg, FAKE)
    pipe.paraphrase_complete = lambda prompt: "Outline it, please.\nShow me where it is.\nMark it."
    studies = {s.image_id: s for s in read_inputs(pairs)}
    reports = pipe.structure([studies["im000"]])
    res = pipe.process_study(studies["im000"], reports[(studies["im000"].study_id, studies["im000"].report)])
    originals = [r for r in res.records if not r.get("paraphrase_of")]
    copies = [r for r in res.records if r.get("paraphrase_of")]
    assert originals and len(copies) == 9 * len(originals)
    assert {r["paraphrase_of"] for r in copies} == {r["record_id"] for r in originals}


def test_runner_and_ray_runner_import_one_way_at_module_level():
    """runner -> ray_runner -> stages (RunError), never back, and no function-level
    import of either (which would only hide a cycle)."""
    import ast
    import inspect

    import cxrils.pipeline.ray_runner as ray_runner
    import cxrils.pipeline.runner as runner

    def imports(module):
        tree = ast.parse(inspect.getsource(module))
        top = {node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))}
        out = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cxrils.pipeline"):
                out.append((node.module, node in top))
        return out

    assert ("cxrils.pipeline.ray_runner", True) in imports(runner)
    assert all(top for _, top in imports(runner)) and all(top for _, top in imports(ray_runner))
    assert not any(mod == "cxrils.pipeline.runner" for mod, _ in imports(ray_runner))


def test_resume_with_a_lower_limit_counts_every_image_held(pairs, tmp_path, caplog):
    ds = tmp_path / "ds"
    first = generate(pairs, ds, config(), stages=FAKE, limit=6)
    with caplog.at_level("WARNING", logger="cxrils"):
        again = generate(pairs, ds, config(), stages=FAKE, limit=3)
    assert again["studies"]["total"] == 6
    assert again["studies"] == first["studies"]
    assert "holds 3 images beyond the first 3" in caplog.text


def test_the_summary_names_input_and_dataset_without_their_folders(pairs, tmp_path):
    ds = tmp_path / "deep" / "ds"
    summary = generate(pairs, ds, config(), stages=FAKE, limit=2)
    written = json.loads((ds / "generate_summary.json").read_text())
    assert (written["input"], written["dataset"]) == (Path(pairs).name, "ds") == (summary["input"], summary["dataset"])
    assert str(tmp_path) not in (ds / "generate_summary.json").read_text()


def test_a_config_of_another_kind_is_refused(pairs, tmp_path):
    # a new user's trial (stop 58): cfg={} gave a bare AttributeError
    with pytest.raises(RunError, match=r"cfg must be a cxrils\.config\.Config .*got dict"):
        generate(pairs, tmp_path / "ds", {}, stages=FAKE)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [-1, 2.5])
def test_a_negative_or_fractional_limit_is_refused(pairs, tmp_path, limit):
    # a new user's trial (stop 58): limit=-1 in Python dropped the last image silently
    with pytest.raises(RunError, match=r"limit must be an integer >= 0"):
        generate(pairs, tmp_path / "ds", config(), stages=FAKE, limit=limit)
    assert not (tmp_path / "ds").exists()


def test_the_summary_names_a_dataset_written_to_the_current_folder(pairs, tmp_path, monkeypatch):
    # review (stop 58): "." gave an empty name; an integer of numpy is a limit too
    ds = tmp_path / "here"
    ds.mkdir()
    monkeypatch.chdir(ds)
    summary = generate(pairs, ".", config(), stages=FAKE, limit=np.int64(2))
    assert summary["dataset"] == "here" and summary["studies"]["total"] == 2
