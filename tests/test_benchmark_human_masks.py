"""benchmarks.human_masks: the JSRT cardiomegaly-by-CTR table separates the images the
builtin anatomy trained on from its held-out ones (its CTR decides the light model's
cardiomegaly answer)."""

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
    held = [i for i in ids if jsrt_held_out(i)][:2]
    trained = [i for i in ids if not jsrt_held_out(i)][:2]
    cases = []
    for i, found in zip(held + trained, (True, False, True, True), strict=True):
        c = Case("jsrt_normals", i, Path(f"{i}.png"), "normal", reference_ctr=0.6)
        c.out["light_cardiomegaly"] = found
        cases.append(c)
    row = next(line for line in ctr_cardiomegaly_lines(cases) if line.startswith("| > 0.5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "4"
    assert cells[2].startswith("3/4 = ")  # all four images
    assert cells[3].startswith("1/2 = ")  # the two held-out ones
