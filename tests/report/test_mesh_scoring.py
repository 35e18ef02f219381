"""The MeSH yardstick of ``python -m benchmarks.report_mesh`` (benchmarks/mesh_scoring.py),
written apart from the structurer: its mappings, its reading of findings and its split."""

import benchmarks.mesh_scoring as ms
from cxrils.types import Finding


def f(lesion_type, presence="positive", certainty="definitive", labels=(), predicted=None, inference=None):
    return Finding(
        entity="x",
        sentence_index=1,
        presence=presence,
        certainty=certainty,
        labels=list(labels),
        lesion_type=lesion_type,
        predicted_lesion_type=predicted,
        inference_certainty=inference,
    )


def test_split_rule_is_the_sha256_parity_of_the_report_id():
    import hashlib

    for rid in ("CXR1", "CXR2", "CXR3999"):
        even = hashlib.sha256(rid.encode()).digest()[0] % 2 == 0
        assert ms.half(rid) == ("tuning" if even else "untuned")
    halves = [ms.half(f"CXR{i}") for i in range(1, 4000)]
    assert 0.45 < halves.count("tuning") / len(halves) < 0.55


def test_strict_maps_headings_only_to_their_own_type():
    mesh = "Volume Loss/lung/left|Density/lung/base/right|Pulmonary Congestion|Heart Failure/mild"
    assert ms.mesh_types(mesh, ms.STRICT_MESH) == {}
    assert set(ms.mesh_types(mesh, ms.LENIENT_MESH)) == {"atelectasis", "opacity", "edema"}
    got = ms.mesh_types("Opacity/lung/base/left|Opacity/lung/upper lobe/right|Cardiac Shadow/enlarged", ms.STRICT_MESH)
    assert got == {"opacity": {"left", "right"}, "cardiomegaly": None}
    assert ms.mesh_types("Pleural Effusion/bilateral/small", ms.STRICT_MESH) == {"effusion": {"left", "right"}}


def test_strict_counts_definitive_present_findings_and_definitive_inferences():
    got = ms.strict_types(
        [
            f("opacity", labels=["left lung base"], predicted="atelectasis", inference="tentative"),
            f("effusion", certainty="tentative", labels=["right lung"]),
            f("edema", presence="negative"),
            f("consolidation", labels=["right lung base"], predicted="pneumonia", inference="definitive"),
        ]
    )
    assert got == {"opacity": {"left"}, "consolidation": {"right"}, "pneumonia": {"right"}}
    assert ms.any_types([f("effusion", certainty="tentative")]) == {"effusion"}
    # dicts (cxrils structure's JSON lines) read the same
    assert ms.strict_types([f("effusion", labels=["left lung"]).to_dict()]) == {"effusion": {"left"}}


def test_strict_sides_count_a_missing_side_as_a_disagreement():
    gold = {"effusion": {"left"}, "opacity": {"right", "left"}, "edema": None}
    ours = {"effusion": set(), "opacity": {"right", "left"}, "edema": {"left"}}
    assert ms.side_agreement(gold, ours, strict=True) == {"effusion": (True, False), "opacity": (True, True)}
    assert ms.side_agreement(gold, ours, strict=False) == {"opacity": (True, True)}


def test_score_counts_and_disagreement_indices():
    rows = [
        ("Pleural Effusion/left", [f("effusion", labels=["left lung"])]),
        ("normal", [f("effusion", labels=["left lung"])]),
        ("Pulmonary Atelectasis/right", [f("atelectasis", certainty="tentative")]),
        ("Volume Loss/left", [f("atelectasis", labels=["left lung"])]),
    ]
    s, wrong = ms.score(rows, strict=True)
    assert (s.tp["effusion"], s.fp["effusion"], s.fn["atelectasis"], s.fp["atelectasis"]) == (1, 1, 1, 1)
    assert wrong["FP effusion"] == [1] and wrong["FN atelectasis"] == [2] and wrong["FP atelectasis"] == [3]
    assert s.sides() == (1, 1)
    lenient, _ = ms.score(rows, strict=False)
    assert lenient.tp["atelectasis"] == 1 and lenient.fp["atelectasis"] == 0
    assert "| effusion | 1 | 2 |" in ms.table(s, "t")


def test_certainty_classes_count_what_mesh_indexes_per_class():
    from types import SimpleNamespace as R

    import benchmarks.report_mesh as rm

    mesh = ["Pulmonary Atelectasis", "Pulmonary Atelectasis", "normal", "Pneumonia"]
    # report 1: definitive; 2: a differential item (definitive only when lists are); 3: hedged; 4: absent
    tentative = [
        R(findings=[f("atelectasis")]),
        R(findings=[f("atelectasis", certainty="tentative")]),
        R(findings=[f("atelectasis", certainty="tentative")]),
        R(findings=[]),
    ]
    definitive = [
        R(findings=[f("atelectasis")]),
        R(findings=[f("atelectasis")]),
        R(findings=[f("atelectasis", certainty="tentative")]),
        R(findings=[]),
    ]
    text = rm.certainty_classes(mesh, tentative, definitive, ["tuning"] * 4)
    row = next(line for line in text.splitlines() if line.startswith("| tuning | atelectasis |"))
    assert row == "| tuning | atelectasis | 1/1 | 1/1 | 0/1 | 0/1 |"
    row = next(line for line in text.splitlines() if line.startswith("| tuning | pneumonia |"))
    assert row == "| tuning | pneumonia | 0/0 | 0/0 | 0/0 | 1/4 |"


def test_targets_table_marks_misses():
    from types import SimpleNamespace as R

    import benchmarks.report_mesh as rm

    mesh = ["Cardiomegaly", "Cardiomegaly", "normal"]
    reps = [R(findings=[f("cardiomegaly")]), R(findings=[]), R(findings=[])]  # F1 = 2/3
    text = rm.targets_table(mesh, {"tentative": reps}, ["untuned"] * 3)
    row = text.splitlines()[-1]
    assert row.startswith("| tentative | 0.667 (missed) |")
