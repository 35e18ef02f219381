"""benchmarks.human_masks: the JSRT cardiomegaly-by-CTR table separates the images the
builtin anatomy trained on from its held-out ones (its CTR decides the light model's
cardiomegaly answer), and the sweep of the light model's cardiomegaly CTR cut-off counts
hand-worked cases."""

from __future__ import annotations

from pathlib import Path

from benchmarks.human_masks import Case, ctr_cardiomegaly_lines, jsrt_held_out


def test_held_out_jsrt_images_are_those_the_anatomy_training_leaves_out(shared_data):
    from cxrils.sources.jsrt import read_jsrt_non_nodules
    from cxrils.training.anatomy_data import held_back_images

    held = {i for s, i, _ in held_back_images(shared_data) if s == "jsrt_scr"}
    ids = [n.image_id for n in read_jsrt_non_nodules(shared_data)]
    assert 0 < sum(map(jsrt_held_out, ids)) < len(ids)
    assert {i for i in ids if jsrt_held_out(i)} == held & set(ids)


def test_ctr_table_counts_the_held_out_images_apart(shared_data):
    from cxrils.sources.jsrt import read_jsrt_non_nodules

    ids = [n.image_id for n in read_jsrt_non_nodules(shared_data)]
    held = [i for i in ids if jsrt_held_out(i)][:1]
    trained = [i for i in ids if not jsrt_held_out(i)][:3]
    cases = []
    for i, found in zip(held + trained, (False, True, True, True), strict=True):
        c = Case("jsrt_normals", i, Path(f"{i}.png"), "normal", reference_ctr=0.6)
        c.out["light_cardiomegaly"] = found
        cases.append(c)
    row = next(line for line in ctr_cardiomegaly_lines(cases) if line.startswith("| > 0.5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "4"
    assert cells[2].startswith("3/4 = ")  # all four images
    assert cells[3].startswith("0/1 = ")  # the one held-out image
    note = ctr_cardiomegaly_lines(cases)[-1]
    assert "3 of these 4 images are its training images" in note and "only the 1 held-out ones" in note


def _sweep_case(i, ref, ctr, found, enlarged):
    c = Case("jsrt_normals", i, Path(f"{i}.png"), "normal", reference_ctr=ref)
    c.out.update(
        light_ctr=ctr,
        light_cm_score_ok=True,
        light_cardiomegaly=found,
        light_neg={"opacity": [True, False], "cardiomegaly": [] if enlarged else [not found]},
    )
    return c


def _rows(lines):
    return {
        line.split("|")[1].strip(): [x.strip() for x in line.strip("|").split("|")]
        for line in lines
        if line.startswith("| 0.")
    }


def test_ctr_cutoff_sweep_counts_answers_at_each_cutoff():
    from benchmarks.human_masks import ctr_cutoff_lines

    case = _sweep_case
    cases = [
        case("a", 0.55, 0.505, True, True),  # expert enlarged, our CTR just above 0.5
        case("b", 0.40, 0.47, False, False),  # expert small heart
        case("c", 0.48, None, False, False),  # no CTR: never present
    ]
    lines = ctr_cutoff_lines(cases, 0.5)
    rows = _rows(lines)
    # columns: cut-off, enlarged found, the same by the CTR alone, small found, normals present, N-Acc
    assert rows["0.46"][1:5] == ["1", "1", "1", "1"]  # a and b present; b is an asked normal
    assert rows["0.50 (shipped)"][1:5] == ["1", "1", "0", "0"]
    assert rows["0.51"][1:5] == ["0", "0", "0", "0"]
    # N-Acc: 3 of 6 opacity questions empty, plus the two cardiomegaly questions (b, c)
    assert rows["0.46"][5].startswith("4/8 = ") and rows["0.50 (shipped)"][5].startswith("5/8 = ")
    assert lines[-1].endswith("reproduces the model's answer on 3 of 3 normal images.")
    bound = next(line for line in lines if line.startswith("With no cardiomegaly question"))
    assert "would be 5/8 = " in bound and "answer 3 of 6 present" in bound
    assert ctr_cutoff_lines(cases, None) == []


def test_ctr_cutoff_sweep_names_the_images_where_the_rule_is_not_the_answer():
    """A CTR above the cut-off answered absent (e.g. an empty heart mask): the sweep says
    so and names the image instead of counting it as reproduced."""
    from benchmarks.human_masks import ctr_cutoff_lines

    cases = [
        _sweep_case("a", 0.55, 0.505, True, True),
        _sweep_case("b", 0.40, 0.47, False, False),
        _sweep_case("d", 0.52, 0.53, False, True),  # above 0.5 but answered absent
    ]
    last = ctr_cutoff_lines(cases, 0.5)[-1]
    assert "on 2 of 3 normal images" in last and "differs on jsrt_normals/d:" in last


def test_ctr_cutoff_sweep_counts_at_the_exact_shipped_cutoff():
    """A shipped cut-off with three decimals gets its own row, counted at that value (not
    at a rounded one); one that only equals a tried cut-off up to float error is one row;
    a CTR exactly at the cut-off is absent (the model's rule is CTR > cut-off)."""
    from benchmarks.human_masks import ctr_cutoff_lines

    cases = [
        _sweep_case("a", 0.55, 0.507, True, True),
        _sweep_case("e", 0.55, 0.50, False, True),  # at the cut-off: absent
    ]
    lines = ctr_cutoff_lines(cases, 0.505)
    rows = _rows(lines)
    assert rows["0.505 (shipped)"][1] == "1" and rows["0.50"][1] == "1" and rows["0.51"][1] == "0"
    assert rows["0.49"][1] == "2"  # e's CTR 0.50 counts below its value only
    assert lines[-1] == "At the shipped cut-off 0.505 the rule reproduces the model's answer on 2 of 2 normal images."
    rows = _rows(ctr_cutoff_lines(cases, 0.7 - 0.2))  # 0.49999999999999994
    assert "0.50" not in rows and rows["0.50 (shipped)"][1] == "2"  # exact: 0.50 > 0.4999...
    assert sum(k.startswith("0.50") for k in rows) == 1


def test_ctr_cutoff_sweep_applies_the_score_gate():
    """With cardiomegaly_needs_score, an image whose network score fails is absent at
    every cut-off, whatever its CTR; the rule then reproduces the answers."""
    from benchmarks.human_masks import ctr_cutoff_lines

    cases = [
        _sweep_case("a", 0.55, 0.60, True, True),
        _sweep_case("f", 0.48, 0.60, False, False),  # CTR 0.60 but the score fails: absent
    ]
    cases[0].out["light_cm_score_ok"], cases[1].out["light_cm_score_ok"] = True, False
    lines = ctr_cutoff_lines(cases, 0.5)
    rows = _rows(lines)
    assert rows["0.46"][1:5] == ["1", "1", "0", "0"] and rows["0.50 (shipped)"][4] == "0"
    assert lines[-1].endswith("reproduces the model's answer on 2 of 2 normal images.")
    cases[0].out["light_cm_score_ok"] = False  # a enlarged, gated out: found by the CTR alone only
    assert _rows(ctr_cutoff_lines(cases, 0.5))["0.50 (shipped)"][1:3] == ["0", "1"]
    cases[1].out["light_cm_score_ok"] = True  # without the gate f is a false positive
    assert _rows(ctr_cutoff_lines(cases, 0.5))["0.50 (shipped)"][4] == "1"


def test_ctr_cutoff_sweep_shipped_row_is_the_targets_n_acc():
    """The sweep's shipped row and the targets table count the same questions the same way."""
    from benchmarks.human_masks import ctr_cutoff_lines, targets_table

    cases = [
        _sweep_case("a", 0.55, 0.505, True, True),
        _sweep_case("b", 0.40, 0.47, False, False),
        _sweep_case("c", 0.48, 0.52, True, False),  # a false positive
    ]
    shipped = _rows(ctr_cutoff_lines(cases, 0.5))["0.50 (shipped)"][5]
    row = next(line for line in targets_table(cases) if "N-Acc on normal images" in line)
    assert shipped.split(" = ")[0] == "4/8"
    this_run = [x.strip() for x in row.strip("|").split("|")][2]
    assert this_run == "50.0" and shipped.split(" = ")[1].startswith(this_run)


def test_segmenter_answers_cardiomegaly_by_ctr_only_with_priors():
    """The sweep runs where the model answers by the CTR rule: the flag on and an anatomy
    input (priors or the CTR input) to take the CTR from."""
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.segmenter import LightSegmenter

    def seg(**kw):
        s = LightSegmenter.__new__(LightSegmenter)  # the property reads only the config
        s.config = LightConfig(**kw)
        return s

    assert seg(cardiomegaly_by_ctr=True, priors=True).answers_cardiomegaly_by_ctr
    assert seg(cardiomegaly_by_ctr=True, priors=False, ctr_input=True).answers_cardiomegaly_by_ctr
    assert not seg(cardiomegaly_by_ctr=True, priors=False, ctr_input=False).answers_cardiomegaly_by_ctr
    assert not seg(cardiomegaly_by_ctr=False, priors=True).answers_cardiomegaly_by_ctr
