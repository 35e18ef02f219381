"""Training, resume, evaluation and the CLI of the light model on a tiny synthetic dataset."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from light_synthetic import block_anatomy, bright_anomaly, make_tiny_dataset
from PIL import Image
from typer.testing import CliRunner

from cxrils import templates
from cxrils.cli import app
from cxrils.dataset import read_records
from cxrils.masks import decode_rle
from cxrils.models import Segmenter
from cxrils.models.light import LightConfig
from cxrils.training.light_train import TrainError, train_light

TINY = dict(ensemble=1, image_size=32, features=(4, 8, 8, 16, 16, 8), text_hidden=32, batch_size=8, lr=3e-3)

#: Hand-made anatomy and anomaly stages of the synthetic images (light_synthetic.py).
STAGES = dict(anatomy=block_anatomy, anomaly=bright_anomaly)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: the tiny networks gain nothing from more, and CI shares 2 cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("light") / "ds")


@pytest.fixture(scope="module")
def trained(tiny_dataset, tmp_path_factory):
    run = tmp_path_factory.mktemp("light") / "run"
    result = train_light(
        tiny_dataset, run, LightConfig(**TINY, steps=150), progress=False, log_every=10, checkpoint_every=50, **STAGES
    )
    return run, result


def _lines(path):
    return [json.loads(s) for s in path.read_text().splitlines()]


@pytest.mark.slow
def test_training_reduces_loss_and_writes_run(trained):
    run, result = trained
    lines = _lines(run / "metrics.jsonl")
    assert [ln["step"] for ln in lines] == list(range(10, 151, 10))
    assert lines[-1]["loss"] < 0.5 * lines[0]["loss"]
    assert lines[-1]["bce"] < lines[0]["bce"] and lines[-1]["dice"] < lines[0]["dice"]
    for name in (
        "config.json",
        "model.safetensors",
        "checkpoint.pt",
        "eval_validate.json",
        "predictions_validate.parquet",
        "train_summary.json",
    ):
        assert (run / name).is_file(), name
    assert result["steps"] == 150 and result["train_seconds"] > 0


@pytest.mark.slow
def test_trained_model_separates_present_from_absent(trained, tiny_dataset):
    run, result = trained
    seg = Segmenter.from_pretrained(run, **STAGES)
    recs = read_records(tiny_dataset, "validate")
    glob = recs[(recs["instruction_type"] == "global") & (recs["target"] == "effusion")]
    score = {}
    for r in glob.itertuples():
        x = np.asarray(Image.open(tiny_dataset / r.image_path))
        score[r.polarity] = score.get(r.polarity, []) + [seg.predict(x, r.instruction).presence_score]
    assert min(score["positive"]) > max(score["negative"])  # negatives: images without a disc
    preds = pq.read_table(run / "predictions_validate.parquet").to_pylist()
    val = result["validate"]
    assert val["n_positive"] == int((recs["polarity"] == "positive").sum())
    assert val["gIoU"] > 0.15  # discs are learnable; an untrained model scores ~0.05
    cal = json.loads((run / "calibration.json").read_text())  # thresholds chosen on validate, stored
    stored = json.loads((run / "config.json").read_text())
    assert (stored["tau_presence"], stored["tau_mask"]) == (cal["tau_presence"], cal["tau_mask"])
    assert cal["split"] == "validate" and cal["constraint_met"] == (cal["n_acc_lower"] >= 0.90)
    assert cal["n_acc_lower"] <= cal["n_acc"]  # a confidence bound (calib_confidence 0.95 by default)
    for p, r in zip(sorted(preds, key=lambda p: p["record_id"]), recs.sort_values("record_id").itertuples()):
        templates.parse_answer(p["answer"], r.instruction_type)  # every answer follows the templates
        assert decode_rle(p["mask"]).shape == (r.height, r.width)
    # an image without a disc: no type is present (edema is not asked of a disc image: the
    # tiny network does not learn reliably in 150 steps to tell edema from effusion there)
    free = glob[glob["polarity"] == "negative"].iloc[0]
    x = np.asarray(Image.open(tiny_dataset / free["image_path"]))
    assert seg.predict(x, "Segment the edema.").answer == "[SEG] There is no edema."
    assert seg.predict(x, "Segment the effusion.").answer == "[SEG] There is no effusion."


def test_ensemble_trains_each_member(tiny_dataset, tmp_path):
    res = train_light(
        tiny_dataset,
        tmp_path / "ens",
        LightConfig(**{**TINY, "ensemble": 2}, steps=4),
        progress=False,
        evaluate=False,
        **STAGES,
    )
    assert res["steps"] == 4
    from safetensors.torch import load_file

    state = load_file(str(tmp_path / "ens" / "model.safetensors"))
    a = state["members.0.presence.weight"]
    b = state["members.1.presence.weight"]
    assert a.shape == b.shape and not torch.equal(a, b)  # two members, different initialisations


def test_resume_continues_from_checkpoint(tiny_dataset, tmp_path):
    run = tmp_path / "run"
    cfg = LightConfig(**TINY, steps=6)
    train_light(tiny_dataset, run, cfg, progress=False, log_every=2, checkpoint_every=3, evaluate=False, **STAGES)
    assert [ln["step"] for ln in _lines(run / "metrics.jsonl")] == [2, 4, 6]
    res = train_light(
        tiny_dataset, run, LightConfig(**TINY, steps=8), progress=False, log_every=2, evaluate=False, **STAGES
    )
    assert res["steps"] == 8
    assert [ln["step"] for ln in _lines(run / "metrics.jsonl")] == [2, 4, 6, 8]
    with pytest.raises(TrainError, match=r"another configuration exists \(differs in \['lr'\];"):
        train_light(tiny_dataset, run, LightConfig(**{**TINY, "lr": 1e-2}, steps=8), progress=False, **STAGES)


def test_a_resume_that_trains_on_drops_the_earlier_models_scores(tiny_dataset, tmp_path):
    # a new user's trial (stop 62): resumed with more steps and --no-evaluate, the folder
    # kept eval_validate.json of the earlier weights beside the new model
    run = tmp_path / "run"
    train_light(tiny_dataset, run, LightConfig(**TINY, steps=2), progress=False, evaluate=True, **STAGES)
    assert (run / "eval_validate.json").is_file() and (run / "predictions_validate.parquet").is_file()
    train_light(tiny_dataset, run, LightConfig(**TINY, steps=2), progress=False, evaluate=False, **STAGES)
    assert (run / "eval_validate.json").is_file()  # nothing trained: the scores still describe the weights
    train_light(tiny_dataset, run, LightConfig(**TINY, steps=3), progress=False, evaluate=False, **STAGES)
    assert not (run / "eval_validate.json").exists() and not (run / "predictions_validate.parquet").exists()


@pytest.mark.slow
def test_cli_train_and_predict(tiny_dataset, tmp_path, monkeypatch):
    import cxrils.models.light.segmenter as segmod

    monkeypatch.setattr(segmod, "default_anatomy", lambda: block_anatomy)
    monkeypatch.setattr(segmod, "default_anomaly", lambda: bright_anomaly)
    runner = CliRunner()
    run = tmp_path / "run"
    sets = [
        "--set",
        "ensemble=1",
        "--set",
        "image_size=32",
        "--set",
        "features=4,8,8,16,16,8",
        "--set",
        "batch_size=8",
        "--set",
        "steps=6",
    ]
    res = runner.invoke(app, ["train", "--model", "light", "--dataset", str(tiny_dataset), "-o", str(run), *sets])
    assert res.exit_code == 0, res.output
    assert "validate: gIoU" in res.output and (run / "model.safetensors").is_file()

    bad = runner.invoke(app, ["train", "--model", "light", "--dataset", str(tmp_path), "-o", str(run)])
    assert bad.exit_code == 2 and "manifest.json" in bad.output
    bad = runner.invoke(app, ["train", "--dataset", str(tiny_dataset), "-o", str(tmp_path / "r2"), "--set", "nope=1"])
    assert bad.exit_code == 2 and "unknown light model setting" in bad.output
    bad = runner.invoke(
        app, ["train", "--dataset", str(tiny_dataset), "-o", str(tmp_path / "r3"), "--set", "consistent_answers=ture"]
    )  # a typo is no silent False
    assert bad.exit_code == 2 and "consistent_answers='ture'" in bad.output and "true/false" in bad.output
    assert not (tmp_path / "r3").exists()

    image = tiny_dataset / "images" / "img000.png"
    out = tmp_path / "pred"
    res = runner.invoke(
        app, ["predict", "--model", str(run), str(image), "Segment the effusion in the left lung base.", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    info = json.loads((out / "prediction.json").read_text())
    templates.parse_answer(info["answer"], "basic")
    stored = json.loads((run / "config.json").read_text())
    assert info["presence_threshold"] == stored["tau_presence_by_target"].get("effusion", stored["tau_presence"])
    assert f"(a mask from {info['presence_threshold']:.3f})" in res.output
    mask = np.asarray(Image.open(out / "mask.png"))
    assert mask.shape == (80, 96) and np.array_equal(mask > 0, decode_rle(info["mask"]))
    assert np.asarray(Image.open(out / "overlay.png")).shape == (80, 96, 3)

    preds = tmp_path / "preds.jsonl"
    res = runner.invoke(
        app, ["predict", "--model", str(run), "--dataset", str(tiny_dataset), "--split", "test", "-o", str(preds)]
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(s) for s in preds.read_text().splitlines()]
    assert sorted(r["record_id"] for r in rows) == sorted(read_records(tiny_dataset, "test")["record_id"])
    # each answer says how it was decided: a mask exactly where the score reaches its threshold
    # (no rule overrules it unless a note says so)
    for r in rows:
        assert 0.0 <= r["presence_score"] <= 1.0 and r["presence_threshold"] in (
            stored["tau_presence"],
            *stored["tau_presence_by_target"].values(),
        )
        has_mask = decode_rle(r["mask"]).any()
        # the synthetic anatomy is no frontal chest radiograph: every note ends with that
        # warning (tests/models/test_light_plausibility.py); what precedes it overrules the score
        warning = "this image does not look like a frontal chest radiograph"
        assert r["note"] is not None and warning in r["note"]
        overrule = r["note"].split(warning)[0].rstrip("; ")
        if not overrule:
            assert has_mask == (r["presence_score"] >= r["presence_threshold"])
        else:
            assert not has_mask and overrule.startswith("answered absent")
    from cxrils.evaluation.io import read_predictions

    # the evaluation reads past the score columns
    assert sorted(read_predictions(preds).column("record_id").to_pylist()) == sorted(r["record_id"] for r in rows)
    parquet = tmp_path / "preds.parquet"
    res = runner.invoke(
        app, ["predict", "--model", str(run), "--dataset", str(tiny_dataset), "--split", "test", "-o", str(parquet)]
    )
    assert res.exit_code == 0, res.output
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    assert {"presence_score", "presence_threshold", "note"} <= set(table.column_names)
    assert table.column("presence_score").to_pylist() == [
        r["presence_score"] for r in sorted(rows, key=lambda r: r["record_id"])
    ]
    assert read_predictions(parquet).num_rows == len(rows)

    res = runner.invoke(
        app, ["predict", "--model", str(tmp_path / "nope"), str(image), "Segment the edema.", "-o", str(out)]
    )
    assert res.exit_code == 2 and "not found" in res.output
    res = runner.invoke(app, ["predict", "--model", str(run), str(image), "  ", "-o", str(out)])
    assert res.exit_code == 2 and "instruction is empty" in res.output
    res = runner.invoke(app, ["predict", "--model", str(run), str(image), "Segment the lungs.", "-o", str(out)])
    assert res.exit_code == 2 and "instruction 'Segment the lungs.'" in res.output
    res = runner.invoke(app, ["predict", "--model", str(run), str(image), "Segment the edema.", "-o", str(image)])
    assert res.exit_code == 2 and "exists and is not a folder" in res.output  # never overwrites a file
    res = runner.invoke(
        app, ["predict", "--model", str(run), str(image), "Segment the edema.", "-o", str(tmp_path / "mask.png")]
    )
    assert res.exit_code == 2 and "output folder" in res.output and not (tmp_path / "mask.png").exists()


def test_cached_items_equal_uncached_items(tiny_dataset):
    """The training cache (decoded, resized image per image id; mask per record) changes
    nothing: same tensors, same equalisation decisions per (epoch, record), across epochs."""
    from cxrils.dataset import HistogramEqualization, ILSDataset

    kw = dict(augment=HistogramEqualization(0.5, seed=1), size=32)
    plain = ILSDataset(tiny_dataset, "train", **kw)
    cached = ILSDataset(tiny_dataset, "train", cache=True, **kw)
    equalised = 0
    for epoch in (0, 1, 0):  # epoch 0 again: served from the cache
        plain.set_epoch(epoch)
        cached.set_epoch(epoch)
        for i in range(len(plain)):
            a, b = plain[i], cached[i]
            assert torch_equal(a["image"], b["image"]) and torch_equal(a["mask"], b["mask"])
            assert {k: v for k, v in a.items() if isinstance(v, str)} == {
                k: v for k, v in b.items() if isinstance(v, str)
            }
            equalised += int(kw["augment"].decide(f"{epoch}:{a['record_id']}"))
    assert 0 < equalised < 3 * len(plain)  # the augmentation actually ran on some items, not all
    assert len(cached._images) == cached.records["image_id"].nunique()
    assert len(cached._masks) == len(cached)
    # cached arrays are not modified by equalisation (a copy is augmented)
    cached.set_epoch(5)
    before = {k: v.copy() for k, v in cached._images.items()}
    for i in range(len(cached)):
        cached[i]
    assert all(np.array_equal(before[k], v) for k, v in cached._images.items())


def torch_equal(a, b) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.equal(a, b))


def test_resuming_a_finished_run_only_calibrates_and_keeps_its_loss(tiny_dataset, tmp_path):
    run = tmp_path / "run"
    cfg = LightConfig(**TINY, steps=4, calib_target_min_positives=1, calib_target_min_negatives=1)
    first = train_light(tiny_dataset, run, cfg, progress=False, log_every=2, evaluate=False, **STAGES)
    assert isinstance(first["final_loss"], float) and np.isfinite(first["final_loss"])
    again = train_light(tiny_dataset, run, cfg, progress=False, log_every=2, evaluate=False, **STAGES)
    assert again["steps"] == 4 and again["final_loss"] == first["final_loss"]
    assert [ln["step"] for ln in _lines(run / "metrics.jsonl")] == [2, 4]  # no step trained again
    text = (run / "train_summary.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"train_summary.json holds {c}"))  # strict JSON
    cal = json.loads((run / "calibration.json").read_text())
    stored = json.loads((run / "config.json").read_text())
    assert cal["by_target"]  # every target of the tiny set has a positive and a negative
    assert stored["tau_presence_by_target"] == {
        t: c["tau_presence"] for t, c in cal["by_target"].items() if c["constraint_met"]
    }
    seg = Segmenter.from_pretrained(run, **STAGES)
    assert seg.config.tau_presence_by_target == stored["tau_presence_by_target"]
    # a setting of the answers only may change on resume; one of the weights may not
    later = LightConfig(
        **TINY, steps=4, calib_target_min_positives=1, calib_target_min_negatives=1, cardiomegaly_min_ctr=0.6
    )
    train_light(tiny_dataset, run, later, progress=False, evaluate=False, **STAGES)
    assert json.loads((run / "config.json").read_text())["cardiomegaly_min_ctr"] == 0.6
    with pytest.raises(TrainError, match="another configuration"):
        train_light(
            tiny_dataset,
            run,
            LightConfig(**{**TINY, "text_hidden": 16}, steps=4),
            progress=False,
            evaluate=False,
            **STAGES,
        )


def test_cli_resume_keeps_answer_settings_it_was_not_given(tiny_dataset, tmp_path, monkeypatch):
    import cxrils.models.light.segmenter as segmod
    from cxrils.training.light_train import cli_train

    monkeypatch.setattr(segmod, "default_anatomy", lambda: block_anatomy)
    monkeypatch.setattr(segmod, "default_anomaly", lambda: bright_anomaly)
    sets = {
        "ensemble": "1",
        "image_size": "32",
        "features": "4,8,8,16,16,8",
        "text_hidden": "32",
        "batch_size": "8",
        "lr": "0.003",
        "steps": "4",
    }
    run = tmp_path / "run"
    first = cli_train(
        tiny_dataset, run, {**sets, "tau_location": "0.2", "cardiomegaly_min_ctr": "0"}, evaluate=False, progress=False
    )
    again = cli_train(tiny_dataset, run, sets, evaluate=False, progress=False)  # resumes, trains nothing
    stored = json.loads((run / "config.json").read_text())
    assert (stored["tau_location"], stored["cardiomegaly_min_ctr"]) == (0.2, 0.0)  # not reset to defaults
    assert again["train_seconds"] == first["train_seconds"]  # no step ran: the training time stays
    cli_train(tiny_dataset, run, {**sets, "cardiomegaly_min_ctr": "0.5"}, evaluate=False, progress=False)
    stored = json.loads((run / "config.json").read_text())
    assert (stored["tau_location"], stored["cardiomegaly_min_ctr"]) == (0.2, 0.5)
    assert stored["cardiomegaly_needs_score"] is True  # the default
    # the score gate is an inference setting too: a resume may switch it off, and it stays off
    cli_train(tiny_dataset, run, {**sets, "cardiomegaly_needs_score": "false"}, evaluate=False, progress=False)
    cli_train(tiny_dataset, run, sets, evaluate=False, progress=False)
    assert json.loads((run / "config.json").read_text())["cardiomegaly_needs_score"] is False
    # review (stop 58): one --set alone on a resume compared the run against every default
    # ("--steps 600 is fewer", or "another configuration" for its architecture)
    cli_train(tiny_dataset, run, {"lung_answer_min_zones": "2"}, evaluate=False, progress=False)
    stored = json.loads((run / "config.json").read_text())
    assert (stored["lung_answer_min_zones"], stored["steps"], stored["image_size"]) == (2, 4, 32)


def test_light_members_scores_each_member_on_the_ensembles_priors(tiny_dataset, tmp_path):
    """benchmarks.light_members: the members alone are the ensemble's own networks (its
    presence is their mean probability), scored on priors computed once per image."""
    from benchmarks.light_members import candidates
    from cxrils.models.light.calibrate import validation_scores

    run = tmp_path / "run"
    train_light(
        tiny_dataset, run, LightConfig(**{**TINY, "ensemble": 2}, steps=20), progress=False, evaluate=False, **STAGES
    )
    calls = []

    def counting_anatomy(x):
        calls.append(1)
        return block_anatomy(x)

    seg = Segmenter.from_pretrained(run, anatomy=counting_anatomy, anomaly=bright_anomaly)
    named = candidates(seg)
    assert named[1][1].members() == [named[1][1]], "a single network is its own only member"
    assert [n for n, _ in named] == ["ensemble of 2", "member 0 alone", "member 1 alone"]
    assert all(s.config.ensemble == 1 for _, s in named[1:])
    cache: dict = {}
    scores = [validation_scores(s, tiny_dataset, "validate", prior_cache=cache)[0] for _, s in named]
    n_images = read_records(tiny_dataset, "validate")["image_id"].nunique()
    # the members have the ensemble's (counting) anatomy: without the shared cache it
    # would run three times per image
    assert len(calls) == n_images == len(cache), "priors computed once per image for the three networks"
    assert not np.allclose(scores[1], scores[2]), "the two members differ"
    np.testing.assert_allclose(scores[0], (scores[1] + scores[2]) / 2, rtol=1e-4, atol=1e-6)


def test_light_members_main_prints_one_row_per_network(tiny_dataset, tmp_path, monkeypatch, capsys):
    """benchmarks.light_members.main: the ensemble and each member get a row in both
    tables, each with the scores of its own calibration on the validate split."""
    from benchmarks import light_members
    from cxrils.models.light.calibrate import calibrate

    per_target = dict(calib_per_target=True, calib_target_min_positives=1, calib_target_min_negatives=1)
    run = tmp_path / "run"
    train_light(
        tiny_dataset,
        run,
        LightConfig(**{**TINY, "ensemble": 2}, steps=20, **per_target),
        progress=False,
        evaluate=False,
        **STAGES,
    )
    real = Segmenter.from_pretrained.__func__

    def with_stages(cls, path, **kw):
        return real(cls, path, **{**STAGES, **kw})

    monkeypatch.setattr(Segmenter, "from_pretrained", classmethod(with_stages))
    assert light_members.main(["--run", str(run), "--dataset", str(tiny_dataset), "--threads", "1"]) == 0
    out = capsys.readouterr().out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ("ensemble of 2", "member 0 alone", "member 1 alone"):
            rows[cells[0]] = cells
    assert set(rows) == {"ensemble of 2", "member 0 alone", "member 1 alone"}
    seg = Segmenter.from_pretrained(run)
    member = seg.members()[1]
    cal = calibrate(member, tiny_dataset, "validate")
    assert float(rows["member 1 alone"][1]) == pytest.approx(100 * cal["gIoU"], abs=0.051)
    assert float(rows["member 1 alone"][3]) == pytest.approx(100 * cal["n_acc"], abs=0.051)
    targets = [line for line in out.splitlines() if line.startswith("| member 1 alone |") and line.count("|") == 9]
    assert len(targets) == len(cal["by_target"]) > 0, "one per-target row per calibrated target"
    whole = calibrate(Segmenter.from_pretrained(run), tiny_dataset, "validate")
    assert float(rows["ensemble of 2"][1]) == pytest.approx(100 * whole["gIoU"], abs=0.051)


def test_a_consistent_answers_n_acc_under_the_calibrated_bound_is_warned(caplog, tmp_path):
    # a new user's trial: calibration said the constraint was met (94.9%) while the saved
    # model's answers, with consistent_answers, gave 87.0% on the same validate records
    from cxrils.models.light.config import LightConfig
    from cxrils.training.light_train import _warn_consistency_n_acc

    result = {"calibration": {"constraint_met": True, "n_acc": 0.949}, "validate": {"n_acc": 0.87}}
    with caplog.at_level("WARNING", logger="cxrils.training.light_train"):
        _warn_consistency_n_acc(LightConfig(calib_min_n_acc=0.90), result, tmp_path)
    assert "87.0%" in caplog.text and "94.9%" in caplog.text and '"consistent_answers": false' in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="cxrils.training.light_train"):
        _warn_consistency_n_acc(LightConfig(calib_min_n_acc=0.90, consistent_answers=False), result, tmp_path)
        _warn_consistency_n_acc(LightConfig(calib_min_n_acc=0.85), result, tmp_path)
    assert caplog.text == ""


def test_a_calibration_that_cannot_reach_the_n_acc_target_is_warned(caplog, tmp_path):
    # a new user's trial (stop 58): a small dataset's run ended at N-Acc 0 % on validate,
    # and the only hint was constraint_met False inside an INFO line
    from cxrils.models.light.config import LightConfig
    from cxrils.training.light_train import _warn_consistency_n_acc

    result = {"calibration": {"constraint_met": False, "n_acc": 0.0}, "validate": {"n_acc": 0.0}}
    for consistent in (True, False):
        caplog.clear()
        with caplog.at_level("WARNING", logger="cxrils.training.light_train"):
            _warn_consistency_n_acc(LightConfig(calib_min_n_acc=0.90, consistent_answers=consistent), result, tmp_path)
        assert "N-Acc of the saved model is 0.0%, under calib_min_n_acc 90.0%: no thresholds" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="cxrils.training.light_train"):
        _warn_consistency_n_acc(LightConfig(calib_min_n_acc=0.90), {"validate": {"n_acc": 0.5}}, tmp_path)
    assert "no calibration chose its thresholds" in caplog.text and "no thresholds on" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="cxrils.training.light_train"):
        ok = {"calibration": {"constraint_met": False}, "validate": {"n_acc": 0.93}}
        _warn_consistency_n_acc(LightConfig(calib_min_n_acc=0.90), ok, tmp_path)
    assert caplog.text == ""


def test_fewer_steps_than_a_run_was_started_with_is_refused(tmp_path):
    # a new user's trial (stop 58): --steps 100 on a finished 140-step run resumed "at
    # step 140" and rewrote config.json to 100 steps, which no longer described the weights
    import json

    from cxrils.models.base import CONFIG_NAME
    from cxrils.models.light.config import LightConfig
    from cxrils.training.light_train import CHECKPOINT_NAME, TrainError, _resolve_config

    (tmp_path / CONFIG_NAME).write_text(json.dumps(LightConfig(steps=140).to_dict()))
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"")
    with pytest.raises(TrainError, match=r"started for 140 steps; --steps 100 is fewer"):
        _resolve_config(tmp_path, LightConfig(steps=100), resume=True)
    assert json.loads((tmp_path / CONFIG_NAME).read_text())["steps"] == 140
    cfg, resumed = _resolve_config(tmp_path, LightConfig(steps=200), resume=True)
    assert (cfg.steps, resumed) == (200, True)


def test_a_resume_drops_the_metrics_logged_after_its_checkpoint(tmp_path):
    # a new user's trial (stop 58): killed at step 110 (checkpoint 100), resumed, and
    # metrics.jsonl listed step 110 twice
    import json

    from cxrils.training.light_train import _keep_metrics_up_to

    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in (10, 100, 110)) + '{"step": 12')
    _keep_metrics_up_to(path, 100)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [10, 100]
