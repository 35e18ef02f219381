"""The rules structurer on small sentences written for these tests (issue 3 cases)."""

import pytest

from cxrils.config import Config
from cxrils.report import structure_report
from cxrils.report.rules import RulesStructurer


@pytest.fixture(scope="module")
def rules():
    return RulesStructurer()


def run(rules, text):
    return [
        (f.entity, f.presence, f.certainty, f.locations, f.lesion_type, f.predicted_lesion_type)
        for f in rules.structure(text)
    ]


def by_type(rules, text):
    return {f.lesion_type: f for f in rules.structure(text)}


def presences(rules, text):
    """Presence of each lesion type the sentence names (findings of no type left out)."""
    return {f.lesion_type: f.presence for f in rules.structure(text) if f.lesion_type is not None}


def test_negation_scope_ends_at_but(rules):
    fs = by_type(rules, "No effusion, but right lower lobe consolidation.")
    assert fs["effusion"].presence == "negative"
    assert fs["consolidation"].presence == "positive"
    assert fs["consolidation"].locations == ["right lower lobe"]


def test_negation_scope_spans_a_list(rules):
    out = run(rules, "No pneumothorax, pleural effusion, or focal consolidation.")
    assert [o[1] for o in out] == ["negative", "negative", "negative"]
    assert [o[4] for o in out] == [None, "effusion", "consolidation"]


def test_pseudo_negation_is_positive_and_stable(rules):
    (f,) = rules.structure("No interval change in the small left effusion.")
    assert (f.lesion_type, f.presence, f.locations) == ("effusion", "positive", ["left"])


@pytest.mark.parametrize(
    "text",
    [
        "Cannot exclude pneumonia.",
        "Findings may represent pneumonia.",
        "Possible pneumonia.",
        "Pneumonia cannot be excluded.",
    ],
)
def test_hedging_is_tentative_not_negative(rules, text):
    (f,) = rules.structure(text)
    assert (f.lesion_type, f.presence, f.certainty) == ("pneumonia", "positive", "tentative")


@pytest.mark.parametrize(
    "text, presence",
    [
        ("The pneumonia has resolved.", "negative"),
        ("Left effusion has cleared.", "negative"),
        ("Interval resolution of the left effusion.", "negative"),
        ("Resolved right pneumonia.", "negative"),
        # "seen", "noted", "present" end a cue's scope; after "previously" they are adjectives
        ("Interval resolution of the previously seen left upper lobe consolidation.", "negative"),
        ("Resolution of the previously noted right effusion.", "negative"),
        # partly resolved: still there; "near complete" too (the NLM indexers' MeSH terms of
        # IU CXR465, CXR2973 and CXR3847 name the finding as present)
        ("Near complete resolution of previously present left basilar atelectasis.", "positive"),
        ("Near-complete resolution of right-sided pleural effusion with XXXX residual.", "positive"),
        ("Almost completely resolved right apical pleural effusion.", "positive"),
        ("The left lower lobe consolidation has largely cleared.", "negative"),
        ("The pneumonia has nearly completely resolved.", "positive"),
        ("Partially resolved right lower lobe pneumonia.", "positive"),
        ("Right effusion has nearly resolved.", "positive"),
        ("Complete resolution of the left lower lobe pneumonia.", "negative"),
        ("Partial resolution of the previously noted pneumonia.", "positive"),
        ("Incomplete resolution of previously seen right effusion.", "positive"),
        ("Partial resolution of the right effusion.", "positive"),
    ],
)
def test_resolved_is_negative_partly_resolved_is_not(rules, text, presence):
    (f,) = rules.structure(text)
    assert f.presence == presence


@pytest.mark.parametrize(
    "text, presence",
    [
        # one view of the exam does not show the finding: the other does (second review:
        # naming one view says so); both views named, or the single AP film: no view does
        ("Small bilateral effusions are not seen on the frontal view but seen on the lateral.", "positive"),
        ("The effusion is not visible on the lateral view, though it is seen on the frontal.", "positive"),
        ("The left effusion is not identified on the frontal view.", "positive"),
        ("The retrocardiac opacity is not visible on the lateral view.", "positive"),
        ("There is a left retrocardiac opacity that is not seen on the lateral view.", "positive"),
        ("The effusion is not seen on the PA or lateral views.", "negative"),
        ("Consolidation is not visible on the frontal and lateral views.", "negative"),
        ("Small effusions are not seen on the AP radiograph.", "negative"),
        # third review: the other views listed in other forms, "either"; a view said to show it
        ("The effusion is not seen on the frontal view or the lateral view.", "negative"),
        ("The effusion is not seen on the frontal view, nor on the lateral view.", "negative"),
        ("The effusion is not visible on the frontal, lateral, or oblique views.", "negative"),
        ("The effusion is not evident on the lateral radiograph either.", "negative"),
        ("A small right pleural effusion is not seen on the PA view and is seen only on the lateral view.", "positive"),
        ("The left lower lobe opacity is not seen on the frontal view; it is seen on the lateral view.", "positive"),
    ],
)
def test_a_finding_one_view_does_not_show(rules, text, presence):
    (f,) = [f for f in rules.structure(text) if f.lesion_type is not None]
    assert f.presence == presence


def test_a_previously_seen_finding_after_a_negated_one_stays_positive(rules):
    found = {f.lesion_type: f.presence for f in rules.structure("No effusion, previously seen opacity persists.")}
    assert found == {"effusion": "negative", "opacity": "positive"}


@pytest.mark.parametrize(
    "text",
    [
        "Right lower lobe opacity seen previously has cleared.",
        "Left effusion noted on the prior study has resolved.",
        "Consolidation, previously seen at the right base, has resolved.",
        "Opacity previously seen in the right lung base is no longer seen.",
    ],
)
def test_a_finding_seen_before_then_resolved_is_negative(rules, text):
    (f,) = [f for f in rules.structure(text) if f.lesion_type is not None]
    assert f.presence == "negative"


@pytest.mark.parametrize(
    "text, expected",
    [
        # a change denied after "there is": the finding stays (IU CXR240's form)
        ("There is no change in the left effusion.", {"effusion": "positive"}),
        ("There has been no improvement in the left lower lobe pneumonia.", {"pneumonia": "positive"}),
        ("No significant improvement in pulmonary edema.", {"edema": "positive"}),
        ("No resolution of the left effusion.", {"effusion": "positive"}),
        ("There is no other focal consolidation.", {"consolidation": "negative"}),
        # new since the prior film (IU CXR2715's form)
        ("Right basilar atelectasis, not seen before, has developed.", {"atelectasis": "positive"}),
        ("New right effusion, not seen previously.", {"effusion": "positive"}),
        ("Pneumonia is not seen.", {"pneumonia": "negative"}),
        ("Opacity seen previously is not visible.", {"opacity": "negative"}),
        ("The previously noted right effusion is not apparent.", {"effusion": "negative"}),
        # a negation ends where a clause with its own subject starts
        (
            "There is no evidence of consolidation, and the left effusion has increased.",
            {"consolidation": "negative", "effusion": "positive"},
        ),
        (
            "Without consolidation, the right effusion is unchanged.",
            {"consolidation": "negative", "effusion": "positive"},
        ),
        ("No effusion, consolidation, or pneumothorax.", {"effusion": "negative", "consolidation": "negative"}),
    ],
)
def test_presence_after_denied_change_new_finding_and_new_clause(rules, text, expected):
    assert presences(rules, text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "It is not possible to exclude a small left pleural effusion.",
        "It is not possible to rule out pneumonia.",
        "There is a suggestion of a small left effusion.",
        "We cannot entirely exclude a small left effusion.",
    ],
)
def test_more_hedges_are_tentative(rules, text):
    (f,) = [f for f in rules.structure(text) if f.lesion_type is not None]
    assert (f.presence, f.certainty) == ("positive", "tentative")


def test_the_clinical_question_is_not_a_finding(rules):
    (f, _) = rules.structure("Clinical concern for pneumonia; no consolidation is seen.")
    assert (f.lesion_type, f.presence, f.certainty) == ("pneumonia", "negative", "tentative")


@pytest.mark.parametrize(
    "text",
    ["Opacity previously seen, effusion has resolved.", "Opacity seen previously, but effusion has cleared."],
)
def test_a_finding_seen_before_another_resolved_one_stays_positive(rules, text):
    assert presences(rules, text) == {"opacity": "positive", "effusion": "negative"}


@pytest.mark.parametrize(
    "text",
    ["Without evidence of pneumonia.", "Negative for pneumonia.", "There is no pneumonia.", "Pneumonia is not seen."],
)
def test_negation_cues(rules, text):
    (f,) = rules.structure(text)
    assert (f.lesion_type, f.presence) == ("pneumonia", "negative")


def test_per_location_polarity(rules):
    a, b = rules.structure("No right effusion; small left effusion.")
    assert (a.presence, a.locations) == ("negative", ["right"])
    assert (b.presence, b.locations) == ("positive", ["left"])


def test_multiword_located_negative(rules):
    (f,) = rules.structure("No left lower lobe consolidation.")
    assert (f.entity, f.presence, f.locations) == ("consolidation", "negative", ["left lower lobe"])


def test_location_after_the_finding(rules):
    (f,) = rules.structure("There is patchy opacity in the right upper lobe and left midlung.")
    assert f.locations == ["right upper lobe and left midlung"]


def test_devices_are_ignored(rules):
    assert rules.structure("Endotracheal tube, right IJ central line and pacemaker leads in place.") == []


def test_clear_normal_unremarkable_make_no_negative_finding(rules):
    assert rules.structure("The lungs are clear. Heart size is normal. The mediastinum is unremarkable.") == []


def test_predicted_lesion_type(rules):
    (f,) = rules.structure("Left basilar opacity likely reflecting pneumonia.")
    # the opacity is stated (definitive); only the inference is hedged (split certainty)
    assert (f.lesion_type, f.predicted_lesion_type, f.certainty, f.inference_certainty) == (
        "opacity",
        "pneumonia",
        "definitive",
        "tentative",
    )
    assert f.type_certainty == "tentative"
    assert f.locations == ["left basilar"]
    (g,) = rules.structure("Right lower lobe opacity consistent with atelectasis.")
    assert (g.predicted_lesion_type, g.certainty, g.inference_certainty) == ("atelectasis", "definitive", "definitive")


def test_location_moved_out_of_entity(rules):
    (f,) = rules.structure("Hilar adenopathy.")
    assert (f.entity, f.locations, f.lesion_type) == ("adenopathy", ["hilar"], None)


def test_cardiomegaly_phrasings(rules):
    for text in [
        "The heart is mildly enlarged.",
        "Stable cardiomegaly.",
        "Enlarged cardiac silhouette.",
        "Borderline heart size.",
        "The cardiac silhouette size is borderline enlarged.",
    ]:
        (f,) = rules.structure(text)
        assert (f.lesion_type, f.presence) == ("cardiomegaly", "positive")


def test_coordinated_findings_share_location(rules):
    a, b = rules.structure("Bibasilar atelectasis and effusions.")
    assert a.locations == b.locations == ["bibasilar"]


def test_sentence_index_is_one_based(rules):
    fs = rules.structure("Heart size normal. No effusion. Mild pulmonary edema.")
    assert [(f.lesion_type, f.sentence_index) for f in fs] == [("effusion", 2), ("edema", 3)]


def test_structure_report_maps_labels(rules):
    rep = structure_report(
        "s1", "FINDINGS: Bibasilar atelectasis. No right effusion; small left effusion.", structurer=rules
    )
    assert rep.section_used == "findings"
    labels = {(f.lesion_type, f.presence): f.labels for f in rep.findings}
    assert labels[("atelectasis", "positive")] == ["right lung base", "left lung base"]
    assert labels[("effusion", "negative")] == ["right lung"]
    assert labels[("effusion", "positive")] == ["left lung"]


def test_structure_many_matches_structure(rules):
    texts = ["No effusion.", "", "Mild edema."]
    many = rules.structure_many(texts)
    assert [[f.to_dict() for f in fs] for fs in many] == [[f.to_dict() for f in rules.structure(t)] for t in texts]


def test_alternatives_are_tentative_unless_asked_otherwise(rules):
    f, scar = rules.structure("Left basilar atelectasis versus scar.")
    assert (f.lesion_type, f.certainty, scar.certainty) == ("atelectasis", "tentative", "tentative")
    cfg = Config()
    cfg.report.differential_certainty = "definitive"
    mesh_like = RulesStructurer(cfg)
    g = mesh_like.structure("Left basilar atelectasis versus pneumonia.")[0]
    assert (g.lesion_type, g.certainty) == ("atelectasis", "definitive")
    (h,) = mesh_like.structure("May represent pneumonia.")
    assert h.certainty == "tentative"


def test_pericardial_effusion_is_not_pleural_effusion(rules):
    (f,) = rules.structure("Small pericardial effusion.")
    assert f.lesion_type is None


def test_same_category_cues_do_not_cut_each_other(rules):
    fs = rules.structure("Findings may indicate edema or atypical infection.")
    assert [f.certainty for f in fs] == ["tentative", "tentative"]


@pytest.mark.parametrize(
    "text, labels",
    [
        ("Consolidation in the RLL.", ["lung lower lobe right"]),
        ("LLL atelectasis.", ["lung lower lobe left"]),
        ("RUL and RML opacities.", ["lung upper lobe right", "lung middle lobe right"]),
        ("Opacity in the LUL.", ["lung upper lobe left"]),
    ],
)
def test_lobe_abbreviations_are_located_as_the_lobes(text, labels):
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: " + text).findings
    assert f.presence == "positive" and f.labels == labels


@pytest.mark.parametrize(
    "text, labels",
    [
        ("L base opacity.", ["left lung base"]),
        ("Small R pleural effusion.", ["right lung"]),
        ("R and L lower lobe atelectasis.", ["lung lower lobe right", "lung lower lobe left"]),
        # a letter before no place word is no side
        ("2 L of fluid was drained, small effusion at the left base.", ["left lung base"]),
        ("Approximately 1.2 L pleural fluid removed.", []),  # a litre after a number
        ("1 L pleural fluid was drained.", []),
        # after a full stop the letter is a side again (second review)
        ("Heart size is normal. R lung base opacity.", ["right lung base"]),
        # two sides compared by a sign name both (third review)
        ("R > L lower lobe opacities.", ["lung lower lobe right", "lung lower lobe left"]),
        ("L>R basilar opacities.", ["right lung base", "left lung base"]),
        ("Right > left lower lobe opacities.", ["lung lower lobe right", "lung lower lobe left"]),
    ],
)
def test_side_letters_before_a_place_word_are_sides(text, labels):
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: " + text).findings
    assert f.presence == "positive" and f.labels == labels


@pytest.mark.parametrize(
    "text, labels",
    [
        # a place the same sentence rules out is no place of the finding (new-user trial, stop 53)
        ("Consolidation in the right lung, none in the left lung.", ["right lung"]),
        ("Pleural effusion on the right, none on the left.", ["right lung"]),
        ("Effusion on the left, none on the right.", ["left lung"]),
        ("Right-sided pleural effusion, not left.", ["right lung"]),
        ("Right upper lobe consolidation, sparing the left lung.", ["lung upper lobe right"]),
        ("Small right pleural effusion, none seen on the left.", ["right lung"]),
        ("Right lower lobe consolidation does not involve the left lung.", ["lung lower lobe right"]),
        ("Right lower lobe consolidation which does not extend into the left lung.", ["lung lower lobe right"]),
    ],
)
def test_a_place_ruled_out_is_not_the_findings(text, labels):
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: " + text).findings
    assert f.presence == "positive" and f.labels == labels


def test_a_place_ruled_out_before_a_comma_is_not_the_next_findings():
    # second review: "none on the left, small pneumothorax" gave the pneumothorax the left lung
    from cxrils.report import structure_report

    fs = structure_report("s", "FINDINGS: Moderate right pleural effusion, none on the left, small pneumothorax.")
    assert all("left lung" not in f.labels for f in fs.findings)


@pytest.mark.parametrize(
    "text, labels",
    [
        # review of the first version: "except" and these "not"s name the finding's own place
        ("The lungs are clear except for left basilar atelectasis.", ["left lung base"]),
        ("Lungs are clear except for L base atelectasis.", ["left lung base"]),
        ("Pulmonary edema has improved except at the bases.", ["right lung base", "left lung base"]),
        (
            "Opacity in the right lower lobe, if not the right middle lobe.",
            ["lung lower lobe right", "lung middle lobe right"],
        ),
    ],
)
def test_a_place_after_except_or_if_not_is_the_findings(text, labels):
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: " + text).findings
    assert f.presence == "positive" and f.labels == labels


def test_whether_or_not_denies_nothing(rules):
    fs = rules.structure("It is unclear whether or not the right lower lobe opacity represents pneumonia.")
    assert {f.presence for f in fs} == {"positive"} and fs[0].locations == ["right lower lobe"]


@pytest.mark.parametrize(
    "text, entity",
    [
        # second review: "whether or not" and "if not" hedge what follows
        ("It is not clear whether or not there is a left pleural effusion.", "pleural effusion"),
        ("Whether or not there is a small left pleural effusion is difficult to determine.", "pleural effusion"),
        ("Left lower lobe atelectasis, if not consolidation.", "consolidation"),
    ],
)
def test_whether_or_not_and_if_not_hedge(rules, text, entity):
    (f,) = [f for f in rules.structure(text) if f.entity == entity]
    assert (f.presence, f.certainty) == ("positive", "tentative")


@pytest.mark.parametrize(
    "text",
    [
        # third review: a bare "whether or not" hedges nothing, "if not" only the next words
        "It is difficult to say whether or not the left basilar opacity has changed.",
        "If not already performed, CT is recommended to further evaluate the right upper lobe opacity.",
    ],
)
def test_whether_or_not_and_if_not_leave_other_findings_definite(rules, text):
    (f,) = [f for f in rules.structure(text) if f.lesion_type is not None]
    assert (f.presence, f.certainty) == ("positive", "definitive")


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("Consolidation in the RLL.", ["Consolidation in the RLL."]),
        ("RUL and  RML\nopacities.. LLL atelectasis", ["RUL and RML opacities..", "LLL atelectasis"]),
    ],
)
def test_a_finding_quotes_the_reports_own_sentence(rules, text, sentences):
    # the rules read "right lower lobe"; the record must quote what the radiologist wrote
    assert sorted({f.sentence for f in rules.structure(text)}) == sorted(sentences)


def test_a_lowercase_word_is_no_lobe_abbreviation():
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: Opacity, rll not named.").findings
    assert f.labels == []


def test_a_comma_and_new_end_a_negation_but_no_evidence_of_new_does_not():
    from cxrils.report import structure_report

    def found(text):
        return {f.lesion_type: f.presence for f in structure_report("s", "FINDINGS: " + text).findings}

    resolved_new = "Interval resolution of the previously seen right effusion, new left lower lobe consolidation."
    assert found(resolved_new) == {"effusion": "negative", "consolidation": "positive"}
    assert found("No evidence of new consolidation.") == {"consolidation": "negative"}


def test_a_letter_whose_lower_case_is_longer_keeps_the_offsets(rules):
    # "İ".lower() is two characters; the offsets after it drifted and the quote ran past the text
    (f,) = rules.structure("Patient transferred from İzmir. Small right pleural effusion.")
    assert f.sentence == "Small right pleural effusion." and f.labels == [] and f.locations == ["right"]


@pytest.mark.parametrize(
    "text",
    [
        "Right pleural effusion, evaluate for pneumonia, with adjacent atelectasis.",
        "Right pleural effusion, rule out pneumonia, with adjacent atelectasis.",
    ],
)
def test_a_question_between_two_findings_does_not_cut_the_shared_place(text):
    from cxrils.report import structure_report

    fs = structure_report("s", "FINDINGS: " + text).findings
    got = {(f.lesion_type, f.presence, f.certainty): f.labels for f in fs}
    assert got == {
        ("effusion", "positive", "definitive"): ["right lung"],
        ("pneumonia", "negative", "tentative"): [],
        ("atelectasis", "positive", "definitive"): ["right lung"],
    }


@pytest.mark.parametrize(
    "text",
    [
        "Bibasilar, right greater than left atelectasis.",  # IU CXR1919's wording (new-user trial)
        "Bibasilar atelectasis, right greater than left.",
        "Bibasilar atelectasis, left slightly greater than right.",
        "There is bibasilar, right greater than left atelectasis.",  # third review: an opener before the place
        "Bibasilar atelectasis, left worse than right.",
        "Bibasilar atelectasis, right larger than left.",
        "Bibasilar atelectasis, worse on the left.",
        "Bibasilar atelectasis, more pronounced on the right than the left.",
    ],
)
def test_a_comparison_of_the_sides_does_not_add_the_whole_lungs(text):
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: " + text).findings
    assert f.labels == ["right lung base", "left lung base"]


def test_a_comparison_of_the_sides_alone_still_names_both_lungs():
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: Opacities right greater than left.").findings
    assert f.labels == ["right lung", "left lung"]
    # "worse on the right than the left" is one comparison, not a comparison and a left lung
    (g,) = structure_report("s", "FINDINGS: Edema, more pronounced on the right than the left.").findings
    assert g.labels == ["right lung", "left lung"]


@pytest.mark.parametrize(
    "text, first, second",
    [
        (
            "Opacity at the left base, right greater than left pleural effusions.",
            ["left lung base"],
            ["right lung", "left lung"],
        ),
        (
            "Atelectasis in the left lower lobe, right greater than left effusions.",
            ["lung lower lobe left"],
            ["right lung", "left lung"],
        ),
    ],
)
def test_a_side_comparison_never_takes_the_place_of_the_finding_before_it(text, first, second):
    # review: the merge of "place, right greater than left" joined the earlier finding's place
    from cxrils.report import structure_report

    a, b = structure_report("s", "FINDINGS: " + text).findings
    assert (a.labels, b.labels) == (first, second)


def test_a_question_keeps_its_own_place():
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS: Evaluate for right lower lobe pneumonia.").findings
    assert (f.presence, f.certainty, f.labels) == ("negative", "tentative", ["lung lower lobe right"])


# Read errors found by an audit of the shared IU and COVID-19 reports (stop 51); each
# expectation is what the sentence says, as a radiologist reads it.


@pytest.mark.parametrize(
    "text, kind",
    [
        ("No other infiltrates or masses in the lungs.", "opacity"),  # IU CXR728
        ("Pleural effusion not recognizable.", "effusion"),
        ("No further consolidation.", "consolidation"),
    ],
)
def test_more_negation_cues(rules, text, kind):
    assert {f.presence for f in rules.structure(text) if f.lesion_type == kind} == {"negative"}


def test_no_other_finding_after_a_positive_one_denies_only_the_other(rules):
    a, b = rules.structure("Right lower lobe consolidation. No other focal consolidation.")
    assert (a.presence, a.locations) == ("positive", ["right lower lobe"])
    assert (b.presence, b.locations) == ("negative", [])


@pytest.mark.parametrize(
    "text",
    [
        # a change denied, the finding still there (review of the first version)
        "No further change in the small left effusion.",
        "No further worsening of the right pleural effusion.",
        "No further progression of pneumonia.",
        "No other change in the bibasilar atelectasis.",
        "No additional change in the bilateral opacities.",
        "Lack of interval improvement in the bilateral opacities.",
        "Lack of resolution of the left effusion.",
        # an anatomic subject of its own after the comma
        "Retrocardiac opacity, the left hemidiaphragm is not seen.",
        "Left basilar opacity, the left costophrenic angle is excluded from the field of view.",
        "Excluding the known right lower lobe consolidation, the lungs are clear.",
        # third review: a structure after the comma that no list names, a change "to" or
        # "since", a view that does not show it, a finding of its own after the comma
        "Heart size is enlarged, pulmonary XXXX are within normal limits.",
        "Cardiomegaly, pulmonary vessels within normal limits.",
        "No further change to the left pleural effusion.",
        "No further significant change in the left pleural effusion.",
        "Small bilateral effusions are not visible on the frontal view but seen on the lateral.",
        "Small bilateral effusions are not seen on the frontal view but seen on the lateral.",
        # IU CXR3848's form: the view that does not show it is named
        "There is persistent left basilar airspace opacity with blunting which is not evident on the lateral exam.",
        "Right pleural effusion, left pneumothorax not seen.",
        # a denial of something else (regression check: "no further" and "lack of" alone)
        "No further follow-up is needed for the left lower lobe opacity.",
        "No other abnormality, the left lower lobe atelectasis persists.",
        "No other acute findings besides the known right lower lobe pneumonia.",
        "Small left effusion and the left costophrenic angle is excluded from the image.",
    ],
)
def test_stability_and_other_subjects_leave_a_finding_present(rules, text):
    fs = [f for f in rules.structure(text) if f.lesion_type is not None]
    assert fs and {f.presence for f in fs} == {"positive"}


@pytest.mark.parametrize(
    "text",
    [
        # "no" still covers a finding after "or" (second review)
        "No further worsening or new effusion.",
        "No other interval change or new opacity.",
        "No other changes to suggest pneumonia.",
        # a list before a plural verb, an aside that names a finding (regression check)
        "Pneumothorax, effusion have resolved.",
        "Small left effusion, trace right effusion have resolved.",
        "Right basilar atelectasis, left basilar atelectasis have resolved.",  # the cue's own "have"
        "Bilateral pleural effusions, right larger than left have resolved.",
        "Right basilar consolidation, concerning for pneumonia has cleared.",
        "Left lower lobe opacity, possibly pneumonia is no longer seen.",
        "There is no residual pneumothorax, residual effusion, or residual consolidation.",
        "No other evidence of pneumonia.",
        # an aside after the comma is no subject of its own
        "Left effusion, small on the prior study has resolved.",
        "Right lower lobe opacity on the prior study, it has resolved.",
        "Retrocardiac opacity, behind the heart has resolved.",
        "Bilateral effusions, right greater than left, have resolved.",
    ],
)
def test_negations_that_reach_their_finding(rules, text):
    fs = [f for f in rules.structure(text) if f.lesion_type is not None]
    assert fs and {f.presence for f in fs} == {"negative"}


def test_a_hedge_after_lack_of_stays_a_hedge(rules):
    (f,) = rules.structure("Due to lack of a lateral view, a small effusion cannot be excluded.")
    assert (f.presence, f.certainty) == ("positive", "tentative")


def test_an_adjective_before_a_comma_stays_its_own_finding(rules):
    fs = rules.structure("Hazy right base, left lower lobe opacity.")
    assert sorted(tuple(f.locations) for f in fs) == [("left lower lobe",), ("right base",)]


def test_a_resolved_finding_before_a_comma_and_verb_is_still_negated(rules):
    (f,) = rules.structure("The effusion, on the left, has resolved.")
    assert f.presence == "negative"
    # a list runs on past its commas (IU CXR1909)
    fs = rules.structure("Consolidation, atelectasis, and costophrenic blunting in the left lower lobe have cleared.")
    assert {f.lesion_type: f.presence for f in fs} == {"consolidation": "negative", "atelectasis": "negative"}


@pytest.mark.parametrize(
    "text",
    [
        # the normal-limits clause after the comma has its own subject (IU CXR266, CXR800 ...)
        "Heart size is mildly enlarged, pulmonary vascularity within normal limits.",
        "Heart size is enlarged, pulmonary vascularity within normal limits.",
        "Heart size is mildly enlarged, mediastinal contours and pulmonary vascularity are within normal limits.",
    ],
)
def test_a_later_clause_about_another_subject_does_not_negate_the_finding(rules, text):
    (f,) = rules.structure(text)
    assert (f.lesion_type, f.presence) == ("cardiomegaly", "positive")
    (f,) = rules.structure("Pneumonia is not excluded.")
    assert (f.presence, f.certainty) == ("positive", "tentative")


def test_residual_finding_after_a_resolved_one_is_present(rules):
    a, b = rules.structure("Resolution of central consolidation and residual peripheral consolidation.")
    assert (a.presence, b.presence) == ("negative", "positive")
    (f,) = rules.structure("No residual effusion.")
    assert f.presence == "negative"


def test_a_test_asked_for_is_no_finding_stated(rules):
    (f,) = rules.structure("He was tested for COVID-19 infection.")
    assert (f.presence, f.certainty) == ("negative", "tentative")


@pytest.mark.parametrize(
    "text",
    ["Adult female with positive HIV infection.", "Recent upper airway infection.", "Urinary tract infection."],
)
def test_infections_outside_the_lung_are_no_pneumonia(rules, text):
    assert "pneumonia" not in {f.lesion_type for f in rules.structure(text)}


@pytest.mark.parametrize(
    "text, places",
    [
        ("Hazy opacities in the right lower lobe.", ["right lower lobe"]),
        ("Hazy right basilar opacity.", ["right basilar"]),  # a place between (review)
        ("Hazy bilateral opacities.", ["bilateral"]),
    ],
)
def test_an_adjective_of_the_same_type_is_no_second_finding(rules, text, places):
    (f,) = rules.structure(text)
    assert (f.lesion_type, f.locations) == ("opacity", places)


def test_an_adjective_of_another_type_lies_where_its_noun_does(rules):
    fs = rules.structure("Consolidative opacities in the left lower lobe.")
    assert {(f.lesion_type, tuple(f.locations)) for f in fs} == {
        ("consolidation", ("left lower lobe",)),
        ("opacity", ("left lower lobe",)),
    }


def test_a_place_outside_the_lung_is_not_shared_with_a_lung_lesion(rules):
    fs = by_type(rules, "Healing left rib fractures and small pleural effusion.")
    assert fs["effusion"].locations == []  # anywhere in the lungs, not in the rib
    assert fs[None].locations == ["left rib"]
    fs = by_type(rules, "No displaced rib fractures, pneumothorax, or pleural effusion.")
    assert fs["effusion"].locations == []


def test_both_alone_names_no_place(rules):
    (f,) = rules.structure("Opacity in the left upper lung, identified both on PA and lateral views.")
    assert f.locations == ["left upper lung"]  # IU CXR2205: no right lung
    (f,) = rules.structure("Peripheral ground glass opacities on both sides.")
    assert f.locations == ["both"]
    (f,) = rules.structure("Effusions are seen on both.")  # at the sentence's end
    assert f.locations == ["both"]


@pytest.mark.parametrize(
    "text, places",
    [
        ("Minimal right sided perihilar atelectasis.", ["right perihilar"]),  # IU CXR2206
        ("Minimal basilar atelectasis on the left.", ["left basilar"]),  # IU CXR78
    ],
)
def test_a_side_named_with_a_region_of_that_side_adds_no_whole_lung(rules, text, places):
    (f,) = rules.structure(text)
    assert f.locations == places


def test_a_side_beside_a_place_outside_the_lung_is_kept(rules):
    (f,) = rules.structure("Large left effusion extending up to the level of the aortic knob.")
    assert "left" in f.locations  # the aortic knob has no lung region: the effusion keeps its lung


@pytest.mark.parametrize(
    "text, sides",
    [
        ("Moderate right and small left pleural effusions.", [["left lung"], ["right lung"]]),
        ("Small left and trace right pleural effusions.", [["left lung"], ["right lung"]]),
        # "versus" shares the place as "or" does (IU CXR813's form)
        ("Subsegmental atelectasis versus scarring at the left base.", [["left lung base"]]),
        # "the right clinical setting" names no side
        ("Pneumonia would be difficult to exclude in the right clinical setting.", [[]]),
    ],
)
def test_sides_of_split_lists_alternatives_and_idioms(rules, text, sides):
    rep = structure_report("x", "FINDINGS: " + text, structurer=rules)
    got = sorted(list(f.labels) for f in rep.findings if f.lesion_type is not None)
    assert got == sorted(sides)


@pytest.mark.parametrize("text", ["The heart may be mildly enlarged.", "The heart is likely enlarged."])
def test_a_hedged_enlarged_heart_is_tentative_cardiomegaly(rules, text):
    (f,) = rules.structure(text)
    assert (f.lesion_type, f.presence, f.certainty) == ("cardiomegaly", "positive", "tentative")


@pytest.mark.parametrize(
    "text",
    [
        "Blunting of the right costophrenic angle may reflect a small effusion.",
        "Right costophrenic angle blunting is consistent with a small effusion.",
        "Minimal blunting of the right costophrenic angle could be due to a trace effusion.",
    ],
)
def test_an_effusion_inferred_from_a_blunted_angle_takes_its_side(rules, text):
    rep = structure_report("x", "FINDINGS: " + text, structurer=rules)
    (f,) = rep.findings
    assert (f.lesion_type, list(f.labels)) == ("effusion", ["right lung base"])


def test_favored_is_a_hedge_for_both_alternatives(rules):
    fs = rules.structure("Atelectasis is favored over pneumonia.")
    assert {(f.lesion_type, f.presence, f.certainty) for f in fs} == {
        ("atelectasis", "positive", "tentative"),
        ("pneumonia", "positive", "tentative"),
    }


def test_favored_to_represent_hedges_the_reading_not_the_finding(rules):
    # IU CXR1750
    (f, _) = rules.structure("Streaky left basilar opacities are favored to represent scarring.")
    assert (f.lesion_type, f.presence, f.certainty) == ("opacity", "positive", "definitive")


@pytest.mark.parametrize(
    "text, expected",
    [
        # review of the audit fixes: a place after its own finding stays there
        (
            "Consolidation at the right base and a small left effusion.",
            [("consolidation", ["right lung base"]), ("effusion", ["left lung"])],
        ),
        (
            "Opacity in the right lower lobe and small left pleural effusion.",
            [("effusion", ["left lung"]), ("opacity", ["lung lower lobe right"])],
        ),
    ],
)
def test_a_place_after_its_finding_is_not_the_next_findings_side(rules, text, expected):
    rep = structure_report("x", "FINDINGS: " + text, structurer=rules)
    assert sorted((f.lesion_type, list(f.labels)) for f in rep.findings) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # ", the" opens a clause only with a verb of its own and no backward cue after it
        ("Bilateral pleural effusions, the left larger than the right, have resolved.", {"effusion": "negative"}),
        (
            "Interval resolution of the right pleural effusion, the left basilar atelectasis, and the pulmonary edema.",
            {"effusion": "negative", "atelectasis": "negative", "edema": "negative"},
        ),
        (
            "The right pleural effusion, the left basilar atelectasis, and the pulmonary edema have resolved.",
            {"effusion": "negative", "atelectasis": "negative", "edema": "negative"},
        ),
        ("Right lower lobe opacity, the pneumonia, has resolved.", {"opacity": "negative", "pneumonia": "negative"}),
        (
            "No evidence of pneumothorax, the pleural effusion, or pulmonary edema.",
            {"effusion": "negative", "edema": "negative"},
        ),
        (
            "There is no focal consolidation, the left effusion has increased.",
            {"consolidation": "negative", "effusion": "positive"},
        ),
        # "not seen previously or currently" is a negation again
        ("Pleural effusion is not seen previously or currently.", {"effusion": "negative"}),
        ("A pleural effusion is not identified before or after thoracentesis.", {"effusion": "negative"}),
        # a denied change, then "or new X": X is denied; "or" without "new" lists the unchanged ones
        ("No significant improvement or new focal consolidation.", {"consolidation": "negative"}),
        (
            "There is no increase in the small effusion or new consolidation.",
            {"effusion": "positive", "consolidation": "negative"},
        ),
        ("No change in the effusion or atelectasis.", {"effusion": "positive", "atelectasis": "positive"}),
    ],
)
def test_review_of_the_audit_fixes_presence(rules, text, expected):
    assert presences(rules, text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # the clinical question reaches its first finding only; a finding that raises it is hedged
        (
            "In the setting of clinical concern for pneumonia, right lower lobe opacity likely represents pneumonia.",
            {("pneumonia", "negative", "tentative"), ("opacity", "positive", "definitive")},
        ),
        (
            "Right lower lobe opacity raising clinical concern for pneumonia.",
            {("opacity", "positive", "definitive"), ("pneumonia", "positive", "tentative")},
        ),
        # "is favored over" hedges the two alternatives, not the observation before them
        (
            "Left lower lobe opacity, atelectasis is favored over pneumonia.",
            {
                ("opacity", "positive", "definitive"),
                ("atelectasis", "positive", "tentative"),
                ("pneumonia", "positive", "tentative"),
            },
        ),
        ("Effusion is not unlikely.", {("effusion", "positive", "tentative")}),
        ("It is unclear whether there is a small left effusion.", {("effusion", "positive", "tentative")}),
    ],
)
def test_review_of_the_audit_fixes_certainty(rules, text, expected):
    assert {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type} == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # a clause boundary ends a backward cue's scope even when max_scope limited it
        # (medspaCy 1.3.1 does not: cxrils.report.context)
        (
            "Left basilar opacity noted previously is unchanged; the right effusion has resolved.",
            {"opacity": "positive", "effusion": "negative"},
        ),
        # "and the" after a clause with its own verb, or before a subject of the cue's own
        (
            "Right pleural effusion noted previously is now small and the pneumothorax has resolved.",
            {"effusion": "positive"},
        ),
        (
            "Moderate cardiomegaly is present as before and the mediastinal contours are within normal limits.",
            {"cardiomegaly": "positive"},
        ),
        (
            "The heart is mildly enlarged and the mediastinal contours are within normal limits.",
            {"cardiomegaly": "positive"},
        ),
        (
            "The right effusion, the left atelectasis and the edema have resolved.",
            {"effusion": "negative", "atelectasis": "negative", "edema": "negative"},
        ),
        # "with" and "which" inside a long subject do not cut its negation (second review)
        (
            "Small bilateral pleural effusions with adjacent compressive atelectasis at both lung bases are not seen.",
            {"effusion": "negative", "atelectasis": "negative"},
        ),
        (
            "Residual right upper lobe consolidation which was present on the prior radiograph has largely cleared.",
            {"consolidation": "negative"},
        ),
        ("The small right pleural effusion seen in the prior study has resolved.", {"effusion": "negative"}),
        # a clinical question about a list asks about all of it
        ("Clinical concern for pneumonia or pulmonary edema.", {"pneumonia": "negative", "edema": "negative"}),
    ],
)
def test_terminators_end_limited_backward_scopes(rules, text, expected):
    assert presences(rules, text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Mild pulmonary edema and moderate right and small left effusions.",
        "Mild cardiomegaly, small right and trace left pleural effusions.",
    ],
)
def test_a_side_list_after_another_finding_is_the_next_findings(rules, text):
    rep = structure_report("x", "FINDINGS: " + text, structurer=rules)
    effusions = sorted(list(f.labels) for f in rep.findings if f.lesion_type == "effusion")
    assert effusions == [["left lung"], ["right lung"]]
    assert all(not f.labels for f in rep.findings if f.lesion_type in ("edema", "cardiomegaly"))


# The cases below come from an outside review of the reader with new sentences (stop 54).
@pytest.mark.parametrize(
    "text, expected",
    [
        # a finding with a size, change or side word of its own after a negated one
        ("No pneumothorax, small left effusion.", {"effusion": "positive"}),
        ("No focal consolidation, left basilar atelectasis.", {"consolidation": "negative", "atelectasis": "positive"}),
        ("No effusion, mild edema.", {"effusion": "negative", "edema": "positive"}),
        ("No effusion or pneumothorax, moderate cardiomegaly.", {"effusion": "negative", "cardiomegaly": "positive"}),
        ("Negative for pneumonia, mild bibasilar atelectasis.", {"pneumonia": "negative", "atelectasis": "positive"}),
        # one negated list all through
        ("No effusion, pneumothorax, or focal consolidation.", {"effusion": "negative", "consolidation": "negative"}),
        ("No pneumothorax, small effusion, or consolidation.", {"effusion": "negative", "consolidation": "negative"}),
        (
            "No evidence of pulmonary consolidation, large pleural effusion/pneumothorax.",
            {"consolidation": "negative", "effusion": "negative"},
        ),
        # a change of its own after a resolution
        (
            "Clearing of the left base opacity and increased right effusion.",
            {"opacity": "negative", "effusion": "positive"},
        ),
        # a backward negation whose subject comes right after the comma
        ("Left lower lobe opacity, pneumonia is unlikely.", {"opacity": "positive", "pneumonia": "negative"}),
        (
            "Right basilar consolidation, concerning for pneumonia has cleared.",
            {"consolidation": "negative", "pneumonia": "negative"},
        ),
        # readings that lean against the finding, or say it has not come back
        ("Pneumonia is not favored.", {"pneumonia": "negative"}),
        ("Doubt pneumonia.", {"pneumonia": "negative"}),
        ("Effusion has not reaccumulated.", {"effusion": "negative"}),
        # no pleural effusion
        ("No knee joint effusion.", {}),
    ],
)
def test_review_presence_cases(rules, text, expected):
    assert presences(rules, text) == expected


def test_resolution_and_a_new_finding_are_two_findings(rules):
    fs = structure_report(
        "x", "FINDINGS: Resolution of right effusion and new small left effusion.", structurer=rules
    ).findings
    assert sorted((f.presence, tuple(f.labels)) for f in fs) == [
        ("negative", ("right lung",)),
        ("positive", ("left lung",)),
    ]


@pytest.mark.parametrize(
    "text, labels",
    [
        # abbreviated and misspelt sides ("B/L" was read as "B/left")
        ("B/L pleural effusions.", ["right lung", "left lung"]),
        ("Small bilat. effusions.", ["right lung", "left lung"]),
        ("Atelectasis in the lft lower lobe.", ["lung lower lobe left"]),
        ("Rt. pleural effusion.", ["right lung"]),
        ("Atelectasis in the rigth lower lobe.", ["lung lower lobe right"]),
        # places a finding shares: a size word after "and", a feature after "with"
        ("Consolidation and some atelectasis are present in the left lower lobe.", ["lung lower lobe left"]),
        ("Consolidation with air bronchograms in the right upper lobe.", ["lung upper lobe right"]),
        ("Patchy opacity with volume loss in the left lower lobe.", ["lung lower lobe left"]),
        ("Left midzone consolidation.", ["left mid zone lung"]),
        # a rib named by an ordinal word is the rib, as "5th rib" is
        ("Density overlying the right first rib.", ["rib"]),
    ],
)
def test_review_place_cases(rules, text, labels):
    f = next(
        f
        for f in structure_report("x", "FINDINGS: " + text, structurer=rules).findings
        if f.entity not in ("volume loss",)
    )
    assert list(f.labels) == labels


def test_pna_is_pneumonia(rules):
    (f,) = rules.structure("RLL consolidation consistent with PNA.")
    assert (f.lesion_type, f.predicted_lesion_type) == ("consolidation", "pneumonia")
    assert presences(rules, "LLL atelectasis vs PNA.") == {"atelectasis": "positive", "pneumonia": "positive"}


def test_rt_after_s_p_is_radiation_therapy(rules):
    rep = structure_report("x", "FINDINGS: Status post RT, left pleural effusion.", structurer=rules)
    assert [list(f.labels) for f in rep.findings if f.lesion_type == "effusion"] == [["left lung"]]


# Sentences a second review found the first version of the cases above got wrong.
@pytest.mark.parametrize(
    "text, expected",
    [
        # "and new" ends a denial only, not a question or a hedge
        ("Evaluate for pneumonia and new left pleural effusion.", {"pneumonia": "negative", "effusion": "negative"}),
        ("No new and increased opacity.", {"opacity": "negative"}),
        # a comma with no finding before it, or a list going on, keeps the negation
        ("There is no large, left-sided pleural effusion.", {"effusion": "negative"}),
        (
            "No evidence of pneumonia, bilateral pleural effusions, pulmonary edema.",
            {"pneumonia": "negative", "effusion": "negative", "edema": "negative"},
        ),
        (
            "No pneumothorax, pleural effusion, left lower lobe consolidation.",
            {"effusion": "negative", "consolidation": "negative"},
        ),
        (
            "Resolution of the left pneumothorax, right effusion and left basilar atelectasis.",
            {"effusion": "negative", "atelectasis": "negative"},
        ),
        # the reading is denied, the finding before it stays
        ("Left basilar opacity, not favored to represent pneumonia.", {"opacity": "positive", "pneumonia": "negative"}),
        ("Left basilar opacity, doubtful pneumonia.", {"opacity": "positive", "pneumonia": "negative"}),
        ("Tiny nodular opacity in the left lower lobe of doubtful clinical significance.", {"opacity": "positive"}),
        # a bare list before a backward negation is all denied
        ("Pleural effusion, pneumothorax not seen.", {"effusion": "negative"}),
        (
            "The previously seen pneumonia has largely resolved, with no residual consolidation.",
            {"pneumonia": "negative", "consolidation": "negative"},
        ),
    ],
)
def test_second_review_presence_cases(rules, text, expected):
    assert presences(rules, text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Pneumonia is doubtful but cannot be excluded.", {("pneumonia", "positive", "tentative")}),
        ("An effusion is unlikely but not entirely excluded.", {("effusion", "positive", "tentative")}),
        # a bare "possible" after the "but" opens the next finding
        (
            "Effusion is doubtful but possible small pneumothorax at the apex.",
            {("effusion", "negative", "definitive"), (None, "positive", "tentative")},
        ),
        # the denial alone, or a hedge of another finding after "but", still denies
        ("Pneumonia is doubtful.", {("pneumonia", "negative", "definitive")}),
        (
            "Pneumonia is unlikely, but the effusion cannot be excluded.",
            {("pneumonia", "negative", "definitive"), ("effusion", "positive", "tentative")},
        ),
    ],
)
def test_a_denial_taken_back_is_a_hedge(rules, text, expected):
    assert {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text)} == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # a two-way cue right before a finding reads forward only
        (
            "Moderate cardiomegaly and suspected right lower lobe pneumonia.",
            {("cardiomegaly", "positive", "definitive"), ("pneumonia", "positive", "tentative")},
        ),
        (
            "Residual small left effusion and questionable small right pleural effusion.",
            {("effusion", "positive", "definitive"), ("effusion", "positive", "tentative")},
        ),
        (
            "Moderate cardiomegaly, resolved pulmonary edema.",
            {("cardiomegaly", "positive", "definitive"), ("edema", "negative", "definitive")},
        ),
        (
            "Unchanged small right effusion, resolved left effusion.",
            {("effusion", "positive", "definitive"), ("effusion", "negative", "definitive")},
        ),
        # right after one, backward only (and the comma ends it)
        (
            "Right basilar atelectasis, pneumonia not excluded.",
            {("atelectasis", "positive", "definitive"), ("pneumonia", "positive", "tentative")},
        ),
        (
            "Pneumonia resolved, small left effusion.",
            {("pneumonia", "negative", "definitive"), ("effusion", "positive", "definitive")},
        ),
        # with no finding next to it, both ways as before
        (
            "Pneumothorax and effusion, resolved.",
            {("effusion", "negative", "definitive")},
        ),
        ("Right lower lobe pneumonia, suspected.", {("pneumonia", "positive", "tentative")}),
        # after a list, over the whole list (the lexicon's reach is 4 words)
        (
            "Effusion, pneumothorax and consolidation resolved.",
            {
                ("effusion", "negative", "definitive"),
                ("consolidation", "negative", "definitive"),
            },
        ),
        (
            "Moderate cardiomegaly, pneumonia resolved.",
            {("cardiomegaly", "positive", "definitive"), ("pneumonia", "negative", "definitive")},
        ),
        # a clause of its own before the list's comma is not in the list (review of this rule)
        (
            "Moderate cardiomegaly, small left effusion and right lower lobe pneumonia resolved.",
            {
                ("cardiomegaly", "positive", "definitive"),
                ("effusion", "negative", "definitive"),
                ("pneumonia", "negative", "definitive"),
            },
        ),
        # a finding on each side: the cue is the first one's predicate (second review)
        (
            "Pneumonia resolved small residual effusion.",
            {("pneumonia", "negative", "definitive"), ("effusion", "positive", "definitive")},
        ),
    ],
)
def test_a_two_way_cue_reads_toward_the_finding_next_to_it(rules, text, expected):
    got = {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type}
    assert got == expected


@pytest.mark.parametrize(
    "text, lesion_type, labels",
    [
        ("Bilateral small to moderate pleural effusions.", "effusion", {"right lung", "left lung"}),
        ("The right costophrenic angle is blunted, likely from a small effusion.", "effusion", {"right lung base"}),
        ("The left costophrenic angle is blunted, consistent with a small effusion.", "effusion", {"left lung base"}),
        ("Atelectasis versus early pneumonia at the left base.", "atelectasis", {"left lung base"}),
        ("Atelectasis or small consolidation in the right lower lobe.", "atelectasis", {"lung lower lobe right"}),
        # IU CXR3687
        (
            "There is minimal patchy atelectasis or early infiltrate in left lung base.",
            "atelectasis",
            {"left lung base"},
        ),
        # edema is no focal lesion: an alternative's place is not its place
        ("Mild pulmonary edema or small effusion at the right base.", "edema", set()),
        (
            "Perihilar and lower lobe opacities consistent with pulmonary edema.",
            "opacity",
            {"right mid zone lung", "left mid zone lung", "lung lower lobe right", "lung lower lobe left"},
        ),
        ("Patchy right perihilar/upper lobe opacities.", "opacity", {"right mid zone lung", "lung upper lobe right"}),
        # both whole lungs yield to a nearer place (IU CXR2177, CXR804); a side does not
        ("The lungs demonstrate right basilar atelectasis.", "atelectasis", {"right lung base"}),
        ("Lungs demonstrate bibasilar airspace opacities.", "opacity", {"right lung base", "left lung base"}),
        ("Bilateral perihilar consolidation.", "consolidation", {"right mid zone lung", "left mid zone lung"}),
        ("Interval improvement of right patchy lateral base opacity.", "opacity", {"right lung base"}),
    ],
)
def test_third_review_places(rules, text, lesion_type, labels):
    (f,) = [
        f for f in structure_report("s", "FINDINGS: " + text, structurer=rules).findings if f.lesion_type == lesion_type
    ]
    assert set(f.labels) == labels


@pytest.mark.parametrize(
    "text, expected",
    [
        ("No effusion and mild cardiomegaly.", {"effusion": "negative", "cardiomegaly": "positive"}),
        (
            "No focal consolidation and mild bibasilar atelectasis.",
            {"consolidation": "negative", "atelectasis": "positive"},
        ),
        (
            "There is no evidence of pulmonary edema or pleural effusion, and mild cardiomegaly is stable.",
            {"edema": "negative", "effusion": "negative", "cardiomegaly": "positive"},
        ),
        (
            "There is no pleural effusion, and bibasilar atelectasis has increased.",
            {"effusion": "negative", "atelectasis": "positive"},
        ),
        # a change word after a bare "and", a list going on, or no opener: still denied
        ("No evidence of pneumothorax and worsening effusion.", {"effusion": "negative"}),
        (
            "No effusion and mild cardiomegaly and atelectasis.",
            {"effusion": "negative", "cardiomegaly": "negative", "atelectasis": "negative"},
        ),
        (
            "No consolidation, pneumonia, and small left effusion.",
            {"consolidation": "negative", "pneumonia": "negative", "effusion": "negative"},
        ),
        ("No pneumonia and effusion.", {"pneumonia": "negative", "effusion": "negative"}),
        # a list closed by "or" ends the denial; a predicate after the finding lists nothing
        (
            "No evidence of consolidation, effusion, or pneumonia and mild cardiomegaly.",
            {"consolidation": "negative", "effusion": "negative", "pneumonia": "negative", "cardiomegaly": "positive"},
        ),
        ("No pneumonia and trace bilateral effusions, unchanged.", {"pneumonia": "negative", "effusion": "positive"}),
        # sizes and features joined by a comma ("mild, patchy") still open the finding
        (
            "No pneumothorax and mild, patchy atelectasis at the left base.",
            {"atelectasis": "positive"},
        ),
        ("No pneumonia, small, patchy left basilar atelectasis.", {"pneumonia": "negative", "atelectasis": "positive"}),
        (
            "No consolidation, effusion, pneumonia, small left effusion.",
            {"consolidation": "negative", "effusion": "negative", "pneumonia": "negative"},
        ),
    ],
)
def test_a_sized_finding_after_and_is_stated(rules, text, expected):
    assert presences(rules, text) == expected


@pytest.mark.parametrize(
    "text, predicted",
    [
        ("Right basilar opacity may represent atelectasis or early pneumonia.", "atelectasis"),
        ("Bibasilar airspace disease may represent infection or mild edema.", "pneumonia"),
        ("Left lower lobe opacity, atelectasis versus early pneumonia.", "atelectasis"),
        ("Left lower lobe opacity is either atelectasis or pneumonia.", "atelectasis"),
    ],
)
def test_an_alternative_with_a_size_word_keeps_the_opacity_seen(rules, text, predicted):
    """The opacity is seen; only what it represents is hedged (outside review, pattern C)."""
    (f,) = rules.structure(text)
    assert (f.lesion_type, f.presence, f.certainty) == ("opacity", "positive", "definitive")
    assert (f.predicted_lesion_type, f.inference_certainty) == (predicted, "tentative")


def test_an_effusion_among_the_alternatives_stays_a_finding(rules):
    """An opacity represents no effusion: "... or small effusion" keeps its tentative
    effusion (it was absorbed into the opacity's inference, and lost)."""
    fs = rules.structure("Hazy opacity in the right lower lobe may represent early pneumonia or small effusion.")
    got = {(f.lesion_type, f.presence, f.certainty, f.predicted_lesion_type) for f in fs}
    assert got == {("opacity", "positive", "definitive", "pneumonia"), ("effusion", "positive", "tentative", None)}


@pytest.mark.parametrize(
    "text, expected",
    [
        # a negation nearer the finding than "history of" denies it (IU CXR2755)
        (
            "Elevation of the right hemidiaphragm consistent with history of lobectomy, without focal "
            "consolidation or effusion.",
            {("consolidation", "negative", "definitive"), ("effusion", "negative", "definitive")},
        ),
        # "history of" alone, or nearer than the negation, still asks
        ("History of pneumonia.", {("pneumonia", "negative", "tentative")}),
        ("Without history of pneumonia.", {("pneumonia", "negative", "tentative")}),
    ],
)
def test_a_nearer_negation_denies_what_a_history_asks(rules, text, expected):
    got = {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type}
    assert got == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # ", and" after a clause with its verb starts a clause: the backward "is absent" stops there
        (
            "Pneumonia is unlikely but not excluded, and effusion is absent.",
            {("pneumonia", "positive", "tentative"), ("effusion", "negative", "definitive")},
        ),
        # ", and" after a finding with a size, side or verb of its own starts a clause
        (
            "Small left effusion, and pneumonia is not seen.",
            {("effusion", "positive", "definitive"), ("pneumonia", "negative", "definitive")},
        ),
        (
            "The heart is enlarged, and effusion is not seen.",
            {("cardiomegaly", "positive", "definitive"), ("effusion", "negative", "definitive")},
        ),
        (
            "Small left effusion, and pneumonia is not excluded.",
            {("effusion", "positive", "definitive"), ("pneumonia", "positive", "tentative")},
        ),
        (
            "Mild cardiomegaly, and pleural effusion has resolved.",
            {("cardiomegaly", "positive", "definitive"), ("effusion", "negative", "definitive")},
        ),
        # a bare list still shares its backward negation or hedge
        (
            "Consolidation, pneumonia, and effusion is not seen.",
            {
                ("consolidation", "negative", "definitive"),
                ("pneumonia", "negative", "definitive"),
                ("effusion", "negative", "definitive"),
            },
        ),
        (
            "Atelectasis, and pneumonia is not excluded.",
            {("atelectasis", "positive", "tentative"), ("pneumonia", "positive", "tentative")},
        ),
        (
            "Consolidation, atelectasis, and effusion have resolved.",
            {
                ("consolidation", "negative", "definitive"),
                ("atelectasis", "negative", "definitive"),
                ("effusion", "negative", "definitive"),
            },
        ),
    ],
)
def test_comma_and_after_a_clause_ends_a_backward_scope(rules, text, expected):
    got = {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type}
    assert got == expected


def test_cannot_exclude_and_increasing_stays_tentative(rules):
    fs = rules.structure("Cannot exclude pneumonia and increasing effusion.")
    assert {(f.lesion_type, f.presence, f.certainty) for f in fs} == {
        ("pneumonia", "positive", "tentative"),
        ("effusion", "positive", "tentative"),
    }


@pytest.mark.parametrize(
    "text, entity, labels",
    [
        ("Cardiomegaly with mild pulmonary edema and small effusion at the right base.", "pulmonary edema", []),
        ("Right upper lobe pneumonia and mild cardiomegaly.", "cardiomegaly", []),
        ("Right upper lobe pneumonia and cardiomegaly.", "cardiomegaly", []),
        ("Pulmonary edema with volume loss in the right lower lobe.", "pulmonary edema", []),
        (
            "Radiation fibrosis in the left upper lobe after RT for breast cancer.",
            "fibrosis",
            ["lung upper lobe left", "breast"],
        ),
    ],
)
def test_second_review_place_cases(rules, text, entity, labels):
    rep = structure_report("x", "FINDINGS: " + text, structurer=rules)
    assert [list(f.labels) for f in rep.findings if f.entity == entity] == [labels]


@pytest.mark.parametrize(
    "text, expected",
    [
        # "cannot be completely excluded", "is also possible", "possibly with": hedges
        ("Pneumonia cannot be completely excluded.", {("pneumonia", "positive", "tentative")}),
        (
            "Right lower lobe opacity, which could be atelectasis, but pneumonia is also possible.",
            {("opacity", "positive", "definitive"), ("pneumonia", "positive", "tentative")},
        ),
        (
            "Mild left base atelectasis, possibly with a small effusion.",
            {("atelectasis", "positive", "definitive"), ("effusion", "positive", "tentative")},
        ),
        # "unlikely to be X" denies X, not the finding before it
        (
            "Left basilar opacity, unlikely to be pneumonia.",
            {("opacity", "positive", "definitive"), ("pneumonia", "negative", "definitive")},
        ),
        ("The findings are unlikely to represent pneumonia.", {("pneumonia", "negative", "definitive")}),
        ("Findings are less likely to represent pneumonia.", {("pneumonia", "positive", "tentative")}),
        # ... and with no finding after it, it reads the finding before it
        ("Pneumonia is unlikely to be present.", {("pneumonia", "negative", "definitive")}),
        ("A small effusion is unlikely to be present.", {("effusion", "negative", "definitive")}),
        ("Edema is less likely to be the cause.", {("edema", "positive", "tentative")}),
        # a bare "and" after a clause with its verb ends a backward hedge or denial
        (
            "The heart is enlarged and a small effusion is also possible.",
            {("cardiomegaly", "positive", "definitive"), ("effusion", "positive", "tentative")},
        ),
        (
            "The heart is enlarged and effusion is not seen.",
            {("cardiomegaly", "positive", "definitive"), ("effusion", "negative", "definitive")},
        ),
        # not after a bare list item
        (
            "Consolidation and effusion are possible.",
            {("consolidation", "positive", "tentative"), ("effusion", "positive", "tentative")},
        ),
        # "no X is seen to suggest Y" denies Y too
        (
            "No focal opacity is seen to suggest pneumonia.",
            {("opacity", "negative", "definitive"), ("pneumonia", "negative", "definitive")},
        ),
        # a hedge before a comma ends there when a sized finding follows
        (
            "Bibasilar opacities, likely atelectasis, and small bilateral effusions.",
            {("opacity", "positive", "definitive"), ("effusion", "positive", "definitive")},
        ),
        # "with no A and a small B" states B
        (
            "Left chest tube has been removed, with no pneumothorax and a small residual left effusion.",
            {("effusion", "positive", "definitive")},
        ),
    ],
)
def test_mimic_style_hedges_and_denials(rules, text, expected):
    got = {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type}
    assert got == expected


@pytest.mark.parametrize(
    "text, predicted",
    [
        ("Patchy left basilar opacity, without effusion, likely atelectasis.", "atelectasis"),
        ("Left basilar opacity without effusion may reflect pneumonia.", "pneumonia"),
        ("Right lower lobe consolidation without effusion, consistent with pneumonia.", "pneumonia"),
        ("Without evidence of pneumonia, the left basilar opacity is likely atelectasis.", "atelectasis"),
    ],
)
def test_a_finding_denied_with_without_leaves_the_reading_to_the_opacity(rules, text, predicted):
    """The reading after "opacity without effusion" is the opacity's: it keeps its place and
    the predicted type; only the effusion (or the pneumonia before ", the") is denied."""
    fs = rules.structure(text)
    (lesion,) = [f for f in fs if f.presence == "positive"]
    assert lesion.predicted_lesion_type == predicted and lesion.locations
    assert not [f for f in fs if f.lesion_type == predicted and f.presence == "negative"]


@pytest.mark.parametrize(
    "text, places",
    [
        ("Small left pleural effusion and mild pulmonary edema.", []),
        ("Right pleural effusion, right basilar atelectasis, and mild pulmonary edema.", []),
        ("Bibasilar atelectasis and edema.", ["bibasilar"]),
        ("Mild pulmonary edema at the right base.", ["right base"]),
    ],
)
def test_edema_takes_no_one_sided_place_from_another_finding(rules, text, places):
    (edema,) = [f for f in rules.structure(text) if f.lesion_type == "edema"]
    assert edema.locations == places


@pytest.mark.parametrize(
    "text, lesion_type",
    [
        ("Focal opacity in the right mid lung is likely a nipple shadow.", None),
        ("Rounded opacity at the right base is likely a confluence of shadows.", None),
        ("An area of increased density at the left base likely represents overlapping vessels.", None),
        # a lesion reading, or a nipple named as the alternative ruled against, keeps the opacity
        ("Left basilar opacity is likely atelectasis rather than a nipple shadow.", "opacity"),
        ("Opacity at the left base; a nipple marker is recommended.", "opacity"),
        # so does a denied no-lesion reading
        ("Opacity at the right base, not likely artifact.", "opacity"),
        ("Patchy opacity in the right lower lobe is not due to overlapping vessels.", "opacity"),
        ("Right mid lung nodular opacity, less likely a nipple shadow, recommend CT.", "opacity"),
    ],
)
def test_an_opacity_read_as_no_lesion_has_no_lesion_type(rules, text, lesion_type):
    (f,) = rules.structure(text)
    assert f.lesion_type == lesion_type


@pytest.mark.parametrize(
    "text",
    [
        # the reading is the other finding's
        "Left basilar opacity and right mid lung nodular density, likely a nipple shadow.",
        # a lesion is offered beside the no-lesion reading
        "Increased opacity at the right base, which may be due to overlapping soft tissues or early pneumonia.",
        "Opacity at the left base is likely due to overlapping soft tissue, although consolidation cannot be excluded.",
    ],
)
def test_an_opacity_with_a_lesion_offered_or_another_reading_keeps_its_type(rules, text):
    assert rules.structure(text)[0].lesion_type == "opacity"


@pytest.mark.parametrize(
    "text",
    [
        "Small left effusion without consolidation concerning for pneumonia.",
        "Right lower lobe opacity without consolidation suggestive of pneumonia.",
    ],
)
def test_a_reading_of_the_denied_finding_is_denied_with_it(rules, text):
    """With no comma, "concerning for" reads the finding "without" denies."""
    (pneumonia,) = [f for f in rules.structure(text) if f.lesion_type == "pneumonia"]
    assert pneumonia.presence == "negative"
    assert not [f for f in rules.structure(text) if f.predicted_lesion_type == "pneumonia"]


@pytest.mark.parametrize(
    "text, places",
    [
        ("Opacity at the left base may be due to atelectasis, but pneumonia cannot be excluded.", ["left base"]),
        ("Left base opacity is likely atelectasis; however, infection cannot be excluded.", ["left base"]),
        ("Left lower lobe atelectasis, but pneumonia is not excluded.", ["left lower lobe"]),
        # a denial, or a place of its own, takes nothing
        ("Left basilar atelectasis, but no pneumonia.", []),
        ("Right lower lobe opacity, but pneumonia in the left lung cannot be excluded.", ["left lung"]),
    ],
)
def test_a_second_reading_after_but_lies_where_the_opacity_does(rules, text, places):
    (pneumonia,) = [f for f in rules.structure(text) if f.lesion_type == "pneumonia"]
    assert pneumonia.locations == places


def test_whitespace_is_collapsed_and_quotes_keep_the_reports_words(rules):
    """Tabs, newlines, runs of spaces and the ends collapse as one space (or none); a
    finding's sentence quotes the report's own words, whitespace collapsed."""
    (f,) = rules.structure("  \tSmall\tleft \n\n pleural   effusion.\n")
    assert (f.lesion_type, f.presence, f.locations) == ("effusion", "positive", ["left"])
    assert f.sentence == "Small left pleural effusion."
    (g,) = rules.structure("No RLL\nconsolidation.")
    assert (g.presence, g.locations, g.sentence) == ("negative", ["right lower lobe"], "No RLL consolidation.")


@pytest.mark.parametrize(
    "text, expected",
    [
        # a reading against a finding denies the first one after it only
        (
            "Left basilar opacity, unlikely to represent pneumonia, likely atelectasis.",
            {
                ("opacity", "positive", "definitive"),
                ("pneumonia", "negative", "definitive"),
                ("atelectasis", "positive", "tentative"),
            },
        ),
        # a finding stated between two denials
        (
            "Mild cardiomegaly, no edema, small right effusion, no pneumothorax.",
            {
                ("cardiomegaly", "positive", "definitive"),
                ("edema", "negative", "definitive"),
                ("effusion", "positive", "definitive"),
            },
        ),
        ("No pneumothorax and a new small right apical opacity.", {("opacity", "positive", "definitive")}),
        # "lack of" denies; "due to lack of" gives a reason
        ("Lack of pleural effusion.", {("effusion", "negative", "definitive")}),
        (
            "Due to lack of a lateral view, a small effusion cannot be excluded.",
            {("effusion", "positive", "tentative")},
        ),
    ],
)
def test_icu_style_denials_and_readings(rules, text, expected):
    got = {(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type}
    assert got == expected


def test_an_r_or_l_before_effusion_is_a_side(rules):
    (f,) = rules.structure("Small R effusion.")
    assert f.locations == ["right"]


@pytest.mark.parametrize(
    "text, places",
    [
        ("Right pleural effusion; underlying consolidation cannot be excluded.", ["right"]),
        ("Right effusion; left lower lobe consolidation cannot be excluded.", ["left lower lobe"]),
    ],
)
def test_a_hedged_consolidation_after_a_semicolon_lies_under_the_effusion(rules, text, places):
    (c,) = [f for f in rules.structure(text) if f.lesion_type == "consolidation"]
    assert (c.certainty, c.locations) == ("tentative", places)


def test_an_opacity_read_as_a_hiatal_hernia_has_no_lesion_type(rules):
    (opacity,) = [
        f for f in rules.structure("Retrocardiac opacity likely reflects a hiatal hernia.") if f.entity == "opacity"
    ]
    assert opacity.lesion_type is None


@pytest.mark.parametrize(
    "text, places",
    [
        ("Elevation of the right hemidiaphragm with adjacent atelectasis.", ["right base"]),
        ("The left hemidiaphragm is elevated with adjacent atelectasis.", ["left base"]),
        ("Blunting of the left costophrenic angle with a small effusion.", ["left costophrenic angle"]),
        ("Improved aeration at the left base with persistent small effusion.", ["left base"]),
        # a finding before the place keeps it ("with" after a finding shares as before)
        ("Right pleural effusion with adjacent atelectasis.", ["right"]),
    ],
)
def test_a_place_before_with_goes_to_the_finding_after_it(rules, text, places):
    f = rules.structure(text)[-1]
    assert f.locations == places


def test_a_findings_own_place_does_not_count_in_the_sharing_distance(rules):
    """The unlocated finding shares the located one's place within share_place_words words,
    not counting that finding's own place after it."""
    fs = rules.structure("Atelectasis in the right lower lobe is seen, with possible superimposed pneumonia.")
    (pneumonia,) = [f for f in fs if f.lesion_type == "pneumonia"]
    assert (pneumonia.certainty, pneumonia.locations) == ("tentative", ["right lower lobe"])
    # still bounded: a long clause between keeps them apart
    far = rules.structure(
        "Left pleural effusion has slightly decreased since the prior examination and is now moderate in size, "
        "with adjacent atelectasis."
    )
    assert [f.locations for f in far if f.lesion_type == "atelectasis"] == [[]]


@pytest.mark.parametrize(
    "text, places",
    [
        ("The right lung base opacity has resolved, with minimal residual atelectasis.", ["right lung base"]),
        ("Right lower lobe pneumonia has resolved, with a small residual effusion.", ["right lower lobe"]),
        # a plain denial leaves nothing behind
        ("No left effusion, with residual atelectasis.", []),
    ],
)
def test_what_is_left_of_a_resolved_finding_lies_where_it_was(rules, text, places):
    (left,) = [f for f in rules.structure(text) if f.presence == "positive"]
    assert left.locations == places


@pytest.mark.parametrize(
    "text, places",
    [
        # a templated report's "label: place" and "place: finding" lines; before, the
        # colon kept the place from its finding and these came out unlocated
        ("Consolidation: left lower lobe.", ["left lower lobe"]),
        ("Pleural effusion: small right.", ["right"]),
        ("Atelectasis: bibasilar.", ["bibasilar"]),
        ("Left lung: small effusion.", ["left lung"]),
        ("Left base: atelectasis.\nRight base: clear.", ["left base"]),
        # a denied value keeps its place from the finding
        ("Effusion: none on the right.", []),
    ],
)
def test_a_template_label_and_its_place_are_one_finding(rules, text, places):
    (finding,) = rules.structure(text)
    assert finding.locations == places


@pytest.mark.parametrize(
    "text, expected",
    [
        # a templated report's "label: value" lines (new-user trial: read as present)
        ("Effusion: none.", ("effusion", "negative", "definitive")),
        ("Effusion: none seen.", ("effusion", "negative", "definitive")),
        ("Pleural effusion: None identified; heart normal.", ("effusion", "negative", "definitive")),
        ("Pleural effusion: absent.", ("effusion", "negative", "definitive")),
        ("Pneumonia - none.", ("pneumonia", "negative", "definitive")),
        ("Edema: absent; heart size is normal.", ("edema", "negative", "definitive")),
        # the value does not end the clause: no denial (final review)
        ("Right pleural effusion - none on the left.", ("effusion", "positive", "definitive")),
        ("Right pleural effusion - nil change from prior.", ("effusion", "positive", "definitive")),
        ("Large right effusion - absent on the prior radiograph.", ("effusion", "positive", "definitive")),
        ("Consolidation: no.", ("consolidation", "negative", "definitive")),
        ("Edema: negative.", ("edema", "negative", "definitive")),
        ("Pneumonia excluded.", ("pneumonia", "negative", "definitive")),
        ("Pneumonia has been excluded.", ("pneumonia", "negative", "definitive")),
        # hedges, not denials
        ("Pneumonia could not be excluded.", ("pneumonia", "positive", "tentative")),
        ("Pneumonia could not be ruled out.", ("pneumonia", "positive", "tentative")),
        ("We could not exclude pneumonia.", ("pneumonia", "positive", "tentative")),
        ("Can't rule out edema.", ("edema", "positive", "tentative")),
        # what stays as it was: a value that is not a denial, a part of the film left out
        ("Effusion: present.", ("effusion", "positive", "definitive")),
        ("Effusion - no change.", ("effusion", "positive", "definitive")),
        (
            "Left effusion; the left costophrenic angle is excluded from the film.",
            ("effusion", "positive", "definitive"),
        ),
    ],
)
def test_label_value_lines_and_exclusions(rules, text, expected):
    assert _typed(rules, text) == [expected]


def test_a_label_denial_reaches_only_its_own_finding(rules):
    fs = rules.structure("Left lower lobe atelectasis, pneumothorax: none.")
    assert [(f.entity, f.presence) for f in fs] == [("atelectasis", "positive"), ("pneumothorax", "negative")]


@pytest.mark.parametrize(
    "text, expected",
    [
        # stop 60's trial: read as nothing, or (full-width "No") as a present pneumonia
        ("Cardiomégaly.", [("cardiomegaly", "positive", "definitive")]),
        ("Pulmonary œdema.", [("edema", "positive", "definitive")]),
        ("Ｌａｒｇｅ ｌｅｆｔ ｐｌｅｕｒａｌ ｅｆｆｕｓｉｏｎ.", [("effusion", "positive", "definitive")]),
        ("Ｎｏ pneumonia.", [("pneumonia", "negative", "definitive")]),
        # a word processor's apostrophe hedges as the typewriter's does
        ("Pneumonia can’t be excluded.", [("pneumonia", "positive", "tentative")]),
        ("Pneumonia can´t be excluded.", [("pneumonia", "positive", "tentative")]),  # an accent for the apostrophe
        # review: compatibility folding spells "№" as "No", which would deny
        ("Case № 2: bilateral pneumonia.", [("pneumonia", "positive", "definitive")]),
        ("Can’t rule out edema.", [("edema", "positive", "tentative")]),
        # the same apostrophe, UTF-8 read as cp1252 ("canâ€™t") and as Latin-1
        ("Pneumonia can\u00e2\u20ac\u2122t be excluded.", [("pneumonia", "positive", "tentative")]),
        ("Pneumonia can\u00e2\u0080\u0099t be excluded.", [("pneumonia", "positive", "tentative")]),
        # a mended quote does not glue a letter to the word it stands by
        ("Multifocal \u00e2\u0080\u009cpatchy opacities\u00e2\u0080\u009d.", [("opacity", "positive", "definitive")]),
    ],
)
def test_reports_are_read_with_their_characters_folded(rules, text, expected):
    assert _typed(rules, text) == expected
    assert all(f.sentence == " ".join(text.split()) for f in rules.structure(text))  # quoted as written


def test_white_space_after_a_lengthening_fold_is_kept():
    # review: the whitespace step measured the text's end before the folds lengthened it,
    # so a space in the middle could be dropped ("...No\neffusion" -> "Noeffusion")
    from cxrils.report.rules import _prepare

    text = "ﬁ" * 9 + " figures. No\neffusion."
    assert _prepare(text).text.endswith("figures. No effusion.")


def test_a_character_without_an_ascii_spelling_stays():
    from cxrils.report.tokens import fold_char

    assert [fold_char(c) for c in "é½°Ｎ’œ–"] == ["e", "½", "°", "N", "'", "oe", "-"]


@pytest.mark.parametrize(
    "text, expected",
    [
        # stop 60's trial: "Pneumonia?" was a definitive pneumonia
        ("Pneumonia?", [("pneumonia", "positive", "tentative")]),
        ("? pneumonia.", [("pneumonia", "positive", "tentative")]),
        # a sentence that opens as a question asks (as "evaluate for" does): no positive
        ("Is there pneumonia in the right lower lobe?", [("pneumonia", "negative", "tentative")]),
        ("Any effusion?", [("effusion", "negative", "tentative")]),
        # the question mark hedges its own finding only
        (
            "Right lower lobe opacity, ?pneumonia.",
            [("opacity", "positive", "definitive"), ("pneumonia", "positive", "tentative")],
        ),
        (
            "Right lower lobe opacity, ? early right lower lobe pneumonia.",
            [("opacity", "positive", "definitive"), ("pneumonia", "positive", "tentative")],
        ),
        (
            "Consolidation in the right lower lobe (pneumonia?).",
            [("consolidation", "positive", "definitive"), ("pneumonia", "positive", "tentative")],
        ),
        (
            "Pneumonia? Small left effusion.",
            [("pneumonia", "positive", "tentative"), ("effusion", "positive", "definitive")],
        ),
        # a template's question with a one-word denial for its answer
        ("Effusion? No.", [("effusion", "negative", "definitive")]),
        (
            "Pleural effusion? None; edema? no.",
            [("effusion", "negative", "definitive"), ("edema", "negative", "definitive")],
        ),
        ("No pneumonia?", [("pneumonia", "negative", "definitive")]),
        ("Effusion? Yes.", [("effusion", "positive", "definitive")]),
        # review: a denial after a question mark is the next finding's, not an answer
        ("? No pneumothorax.", [("pneumothorax", "negative", "definitive")]),
        (
            "Right lower lobe pneumonia? no effusion.",
            [("pneumonia", "positive", "tentative"), ("effusion", "negative", "definitive")],
        ),
        # review: a "?" standing for a character lost in an encoding questions nothing
        ("Diagnosed with SARS?CoV?2 pneumonia.", [("pneumonia", "positive", "definitive")]),
        ("Follow-up after 2?days showed bilateral consolidation.", [("consolidation", "positive", "definitive")]),
        ("The patient?s pneumonia has worsened.", [("pneumonia", "positive", "definitive")]),
        ("Left pleural effusion?500 mL was drained.", [("effusion", "positive", "definitive")]),
        (
            "Right pneumothorax ? 2 cm. Left effusion ? 3 cm.",
            [("pneumothorax", "positive", "definitive"), ("effusion", "positive", "definitive")],
        ),
        # a lost bullet before each line of an impression
        (
            "IMPRESSION:\n? Bilateral consolidation.\n? No pneumothorax.\n? No pleural effusion.",
            [
                ("consolidation", "positive", "definitive"),
                ("pneumothorax", "negative", "definitive"),
                ("effusion", "negative", "definitive"),
            ],
        ),
    ],
)
def test_a_question_mark_hedges_the_finding_it_questions(rules, text, expected):
    fs = [f for f in rules.structure(text) if f.lesion_type is not None or f.entity == "pneumothorax"]
    assert [(f.lesion_type or f.entity, f.presence, f.certainty) for f in fs] == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # reader trial (stop 61): a finding the film cannot show was read as present; it is
        # asked, as "evaluation for effusion is limited" was
        ("Effusion cannot be assessed.", [("effusion", "negative", "tentative")]),
        (
            "Bilateral pleural effusions are not well evaluated on this semi-upright study.",
            [("effusion", "negative", "tentative")],
        ),
        ("Assessment for pleural effusion is limited by patient positioning.", [("effusion", "negative", "tentative")]),
        (
            "The left costophrenic angle is excluded from the field of view, limiting assessment for effusion.",
            [("effusion", "negative", "tentative")],
        ),
        # what is said of something else stays: the heart cannot be assessed, the effusion is stated
        ("Heart size cannot be assessed due to the effusion.", [("effusion", "positive", "definitive")]),
        # "X is likely Y": the reading is hedged, the opacity stated (the other way round before)
        (
            "Opacity in the RLL is likely consolidation.",
            [("opacity", "positive", "definitive"), ("consolidation", "positive", "tentative")],
        ),
        ("Pneumonia is likely.", [("pneumonia", "positive", "tentative")]),
    ],
)
def test_reader_trial_presence_and_certainty(rules, text, expected):
    assert _typed(rules, text) == expected


@pytest.mark.parametrize(
    "text, labels",
    [
        # reader trial: "suggesting" links a place to the finding it infers, as "consistent with" does
        ("Blunting of the left costophrenic angle, suggesting a small effusion.", ["left lung base"]),
        ("Blunting of the right costophrenic angle, indicating a small effusion.", ["right lung base"]),
    ],
)
def test_a_place_infers_its_finding_after_suggesting(rules, text, labels):
    from cxrils.report import structure_report

    (f,) = [f for f in structure_report("s", text).findings if f.lesion_type == "effusion"]
    assert f.labels == labels


@pytest.mark.parametrize(
    "text",
    [
        # reader trial: soft or breast tissue over the lung is no lesion
        "Hazy opacity in the left mid lung likely represents overlying soft tissue.",
        "Opacity at the right base likely represents overlying breast tissue.",
        "Opacity at the left base likely represents breast shadow.",
    ],
)
def test_an_opacity_read_as_soft_tissue_is_no_lesion(rules, text):
    assert [f.lesion_type for f in rules.structure(text) if f.entity == "opacity"] == [None]


@pytest.mark.parametrize(
    "text, expected",
    [
        # second review: "not evaluated" said of another subject, or after a comma, leaves a
        # stated finding stated
        (
            "Small right pleural effusion, left costophrenic angle not well evaluated.",
            [("effusion", "positive", "definitive")],
        ),
        (
            "There is a large right pleural effusion and the underlying lung cannot be assessed.",
            [("effusion", "positive", "definitive")],
        ),
        ("Large right effusion, underlying parenchyma cannot be evaluated.", [("effusion", "positive", "definitive")]),
        ("Left basilar opacity, not well evaluated on this portable study.", [("opacity", "positive", "definitive")]),
        (
            "Right lower lobe pneumonia, not well evaluated on the frontal view but clearly seen on the lateral.",
            [("pneumonia", "positive", "definitive")],
        ),
        # what limits an evaluation is stated; what it is assessed for is asked
        (
            "Assessment for consolidation is limited by the large left pleural effusion.",
            [("consolidation", "negative", "tentative"), ("effusion", "positive", "definitive")],
        ),
        ("The left lung base cannot be assessed for consolidation.", [("consolidation", "negative", "tentative")]),
        (
            "Large left pleural effusion obscures the left lung base, which cannot be assessed for consolidation.",
            [("effusion", "positive", "definitive"), ("consolidation", "negative", "tentative")],
        ),
        # the UK shorthand: a "?" glued to the next word questions that word
        (
            "Right basal consolidation ?infection.",
            [("consolidation", "positive", "definitive"), ("pneumonia", "positive", "tentative")],
        ),
        (
            "Left lower zone opacity ? consolidation.",
            [("opacity", "positive", "definitive"), ("consolidation", "positive", "tentative")],
        ),
        (
            "Opacity at the left base, ?atelectasis ?consolidation.",
            [
                ("opacity", "positive", "definitive"),
                ("atelectasis", "positive", "tentative"),
                ("consolidation", "positive", "tentative"),
            ],
        ),
        (
            "Right lower lobe opacity, ? Pneumonia.",
            [("opacity", "positive", "definitive"), ("pneumonia", "positive", "tentative")],
        ),
        # a question answered "yes" states its finding
        (
            "Does the patient have pneumonia? Yes, right lower lobe consolidation.",
            [("pneumonia", "positive", "definitive"), ("consolidation", "positive", "definitive")],
        ),
        # a soft-tissue mass is a lesion reading, not soft tissue
        (
            "Opacity in the left upper lobe likely represents a soft tissue mass.",
            [("opacity", "positive", "definitive")],
        ),
        # "is likely" reads forward over the findings right after it only
        (
            "Right lower lobe opacity is likely aspiration pneumonia.",
            [("opacity", "positive", "definitive"), ("pneumonia", "positive", "tentative")],
        ),
        (
            "Pneumonia is likely given the consolidation.",
            [("pneumonia", "positive", "tentative"), ("consolidation", "positive", "definitive")],
        ),
    ],
)
def test_second_review_of_the_reader_fixes(rules, text, expected):
    assert _typed(rules, text) == expected


def test_what_a_film_cannot_show_is_asked_for(rules):
    fs = rules.structure("Lung bases are not well evaluated for pneumothorax.")
    assert [(f.entity, f.presence, f.certainty) for f in fs] == [("pneumothorax", "negative", "tentative")]


@pytest.mark.parametrize(
    "report, expected",
    [
        # stop 60's trial: one finding per line without full stops carried the negation on
        (
            "FINDINGS:\nNo pneumothorax\nLarge left pleural effusion\nNo consolidation",
            [("pneumothorax", "negative"), ("effusion", "positive"), ("consolidation", "negative")],
        ),
        ("FINDINGS:\nLungs: clear\nPleura: small left effusion", [("effusion", "positive")]),
        # a line wrapped inside a sentence stays in it: after a joining word ...
        (
            "FINDINGS:\nModerate pulmonary edema with bilateral perihilar haziness and\nKerley B lines.",
            [("edema", "positive"), ("opacity", "positive")],
        ),
        # ... or a line as long as MIMIC-CXR's wrapped lines
        (
            "FINDINGS:\nThere is no focal consolidation, pleural effusion, or pneumothorax to\n"
            "suggest acute process. No pneumothorax or effusion is seen on the lateral view\nLarge hiatal hernia.",
            [
                ("consolidation", "negative"),
                ("effusion", "negative"),
                ("pneumothorax", "negative"),
                ("pneumothorax", "negative"),
                ("effusion", "negative"),
            ],
        ),
    ],
)
def test_a_short_line_without_a_full_stop_ends_its_statement(report, expected):
    _check_lines(report, expected)


@pytest.mark.parametrize(
    "report, expected",
    [
        # third review: a full-stop line before the bare lines, or sentences before on one line
        (
            "FINDINGS:\nThe cardiomediastinal silhouette is normal.\nNo pneumothorax\nLarge left pleural effusion",
            [("pneumothorax", "negative"), ("effusion", "positive")],
        ),
        (
            "FINDINGS:\nLungs are clear. Heart size is normal. No pneumothorax\nSmall left pleural effusion",
            [("pneumothorax", "negative"), ("effusion", "positive")],
        ),
        # a blank line, CRLF and bullets between the statements
        (
            "FINDINGS:\nNo pneumothorax\n\nLarge left pleural effusion",
            [("pneumothorax", "negative"), ("effusion", "positive")],
        ),
        (
            "FINDINGS:\r\nNo pneumothorax\r\nLarge left pleural effusion",
            [("pneumothorax", "negative"), ("effusion", "positive")],
        ),
        (
            "FINDINGS:\n- No pneumothorax\n- Large left pleural effusion",
            [("pneumothorax", "negative"), ("effusion", "positive")],
        ),
        # a template's list under one cue stays one denial
        (
            "FINDINGS:\nNegative for:\nPneumothorax\nPleural effusion\nConsolidation",
            [("pneumothorax", "negative"), ("effusion", "negative"), ("consolidation", "negative")],
        ),
        (
            "FINDINGS:\nThere is no evidence of\nPneumothorax\nPleural effusion",
            [("pneumothorax", "negative"), ("effusion", "negative")],
        ),
        # a sentence going on over a capitalised word after a joining word
        ("FINDINGS:\nNo definite\nKerley B lines or pulmonary edema.", [("edema", "negative")]),
        ("FINDINGS:\nNo radiographic findings to suggest\nPneumocystis pneumonia.", [("pneumonia", "negative")]),
    ],
)
def test_line_statements_third_review(report, expected):
    _check_lines(report, expected)


def _check_lines(report, expected):
    from cxrils.report import structure_report

    fs = structure_report("s", report).findings
    assert [
        (f.lesion_type or f.entity, f.presence) for f in fs if f.lesion_type or f.entity == "pneumothorax"
    ] == expected


def test_the_line_rule_can_be_turned_off_and_keeps_the_break_in_the_section_text():
    from cxrils.config import load_config
    from cxrils.report import select_section, structure_reports

    report = "FINDINGS:\nNo pneumothorax\nLarge left pleural effusion"
    assert select_section(report).text == "No pneumothorax\nLarge left pleural effusion"
    assert select_section(report, 0).text == "No pneumothorax Large left pleural effusion"
    cfg = load_config(None, ["report.line_statement_max_chars=0"])
    (off,) = structure_reports([("s", report)], cfg)
    assert [f.presence for f in off.findings if f.lesion_type == "effusion"] == ["negative"]  # as before the rule


@pytest.mark.parametrize(
    "report, expected",
    [
        # reader trial 2 (stop 61): a bullet list, one "No" cancelled the items after it
        (
            "Impression:\n- Bilateral lower lobe consolidation\n- No effusion\n- Cardiomegaly\n- Pulmonary oedema",
            [
                ("consolidation", "positive"),
                ("effusion", "negative"),
                ("cardiomegaly", "positive"),
                ("edema", "positive"),
            ],
        ),
        # the British noun of clearing
        ("Interval clearance of the right basal consolidation.", [("consolidation", "negative")]),
        ("Partial clearance of the left lower lobe consolidation.", [("consolidation", "positive")]),
        # "shadowing" is the British opacity
        (
            "Patchy airspace shadowing right lower zone. No effusion.",
            [("opacity", "positive"), ("effusion", "negative")],
        ),
        # a template's "Heart: Enlarged"
        ("Heart: Enlarged.", [("cardiomegaly", "positive")]),
        ("Cardiac silhouette: Mildly enlarged.", [("cardiomegaly", "positive")]),
        ("Heart: not enlarged.", [("cardiomegaly", "negative")]),
        # a label line ends the line before it; an unpunctuated last value reads as punctuated
        (
            "Lungs: Hazy opacity left lower zone\nHeart: Enlarged",
            [("opacity", "positive"), ("cardiomegaly", "positive")],
        ),
        (
            "Consolidation: Left upper lobe\nPneumothorax: None",
            [("consolidation", "positive"), ("pneumothorax", "negative")],
        ),
    ],
)
def test_reader_trial_two(report, expected):
    _check_lines(report, expected)


def test_a_label_line_keeps_the_place_of_the_line_before():
    from cxrils.report import structure_report

    (f,) = [
        f
        for f in structure_report("s", "Lungs: Hazy opacity left lower zone\nHeart: Enlarged").findings
        if f.lesion_type == "opacity"
    ]
    assert "heart" not in f.labels and f.labels  # was ['heart']


def test_a_question_mark_glued_to_a_word_that_is_no_finding_questions_that_word(rules):
    fs = rules.structure("Right upper zone shadowing ?TB ?malignancy.")
    assert [(f.lesion_type, f.certainty) for f in fs] == [("opacity", "definitive")]


@pytest.mark.parametrize(
    "report, expected",
    [
        # review of the second trial's fixes: shadowing of the pleura, breast, hila is no opacity
        ("FINDINGS:\nApical pleural shadowing.", []),
        ("FINDINGS:\nBreast shadowing over both lower zones.", []),
        ("FINDINGS:\nNormal hilar shadowing.", []),
        ("FINDINGS:\nIncreased density at both bases likely due to overlying breast shadowing.", []),
        # a "?" doubting the finding itself still hedges it
        ("FINDINGS:\nLeft lower zone opacity ?nipple shadow.", [("opacity", "positive")]),
        # partial or bare clearance is no denial
        ("FINDINGS:\nSome interval clearance of the right basal consolidation.", [("consolidation", "positive")]),
        ("FINDINGS:\nImpaired clearance of secretions and left lower lobe atelectasis.", [("atelectasis", "positive")]),
        # a cue before a dash on its line still ends the line's statement
        (
            "FINDINGS:\nNo pneumothorax - small left effusion\nRight basal consolidation",
            [("pneumothorax", "negative"), ("effusion", "negative"), ("consolidation", "positive")],
        ),
        (
            "FINDINGS:\nNo focal consolidation - heart size normal\nSmall left effusion",
            [("consolidation", "negative"), ("effusion", "positive")],
        ),
        # a label line's value ends at its line: no cardiomegaly from "normal\nLarge ..."
        ("FINDINGS:\nHeart: Normal\nLarge hiatus hernia", []),
        ("FINDINGS:\nHeart size: normal\nLarge left pleural effusion", [("effusion", "positive")]),
    ],
)
def test_review_of_reader_trial_two(report, expected):
    _check_lines(report, expected)


@pytest.mark.parametrize(
    "report, expected",
    [
        # third review: lung places before "shadowing" are lung shadowing
        ("FINDINGS:\nBilateral peri-hilar shadowing.", [("opacity", "positive")]),
        ("FINDINGS:\nLeft retro-cardiac shadowing.", [("opacity", "positive")]),
        ("FINDINGS:\nBilateral sub-pleural shadowing.", [("opacity", "positive")]),
        # a bare "clearance of" denies; near-complete clearance leaves some
        ("FINDINGS:\nThere has been clearance of the right basal consolidation.", [("consolidation", "negative")]),
        ("FINDINGS:\nNear complete clearance of the right basal consolidation.", [("consolidation", "positive")]),
        ("FINDINGS:\nImpaired clearance of secretions and left lower lobe atelectasis.", [("atelectasis", "positive")]),
        # a bulleted list under a cue on the line before stays one denial
        (
            "FINDINGS:\nNo evidence of\n- Pneumothorax\n- Pleural effusion\n- Consolidation",
            [("pneumothorax", "negative"), ("effusion", "negative"), ("consolidation", "negative")],
        ),
        # a long label line's sentence goes on over the break
        (
            "FINDINGS:\nLungs: The lungs are hyperexpanded but there is no evidence of focal consolidation\n"
            "Pneumothorax or pleural effusion.",
            [("consolidation", "negative"), ("pneumothorax", "negative"), ("effusion", "negative")],
        ),
        # final read: a line opening with an all-caps word is a new line too
        ("FINDINGS:\nNo effusion\nCT shows consolidation", [("effusion", "negative"), ("consolidation", "positive")]),
        (
            "FINDINGS:\nNo pneumothorax\nRLL consolidation",
            [("pneumothorax", "negative"), ("consolidation", "positive")],
        ),
    ],
)
def test_third_review_of_line_statements_and_words(report, expected):
    _check_lines(report, expected)


def test_structure_report_keeps_its_structurers_line_rule():
    # final read: with the rule off in the structurer, section_text kept the break and the findings did not
    from cxrils.config import load_config
    from cxrils.report import structure_report
    from cxrils.report.rules import RulesStructurer

    off = RulesStructurer(load_config(None, ["report.line_statement_max_chars=0"]))
    r = structure_report("s", "FINDINGS:\nNo pneumothorax\nLarge left pleural effusion", structurer=off)
    assert "\n" not in r.section_text
    assert [f.presence for f in r.findings if f.lesion_type == "effusion"] == ["negative"]


@pytest.mark.parametrize(
    "report, expected",
    [
        # fourth review: the plain spellings keep their places; the hyphenated read as them
        ("FINDINGS:\nBilateral peri-hilar shadowing.", ["right mid zone lung", "left mid zone lung"]),
        ("FINDINGS:\nLeft retro-cardiac shadowing.", ["left lung base"]),
        ("FINDINGS:\nRetrocardiac shadowing.", ["left lung base"]),
        # a COVID-19 case note of the shared data: "left peri-hilar" is the left lung's
        (
            "FINDINGS:\nThere is mild left peri-hilar and upper lobe interstitial opacity.",
            ["left mid zone lung", "lung upper lobe left"],
        ),
    ],
)
def test_hyphenated_lung_places_are_read_as_places(report, expected):
    from cxrils.report import structure_report

    (f,) = [f for f in structure_report("s", report).findings if f.lesion_type == "opacity"]
    assert f.labels == expected


@pytest.mark.parametrize(
    "report, expected",
    [
        # a report written in capitals wraps before "OR": the sentence goes on
        ("FINDINGS:\nNO PLEURAL EFFUSION\nOR PNEUMOTHORAX.", [("effusion", "negative"), ("pneumothorax", "negative")]),
        # an abbreviation alone on the next line ends no statement
        (
            "FINDINGS:\nOpacity at the right base, possible multifocal\nPNA.",
            [("opacity", "positive"), ("pneumonia", "positive")],
        ),
        ("FINDINGS:\nDelayed clearance of the left lower lobe pneumonia.", [("pneumonia", "positive")]),
    ],
)
def test_fourth_review_of_line_statements(report, expected):
    _check_lines(report, expected)


@pytest.mark.parametrize(
    "text, certainty",
    [
        ("Left lower zone opacity ?breast shadow.", "tentative"),
        ("Opacity ?vessel on end.", "tentative"),
        ("Right mid zone shadowing ?significant.", "tentative"),
        ("Small left effusion ?significant change.", "definitive"),
        ("Left lower zone opacity ?nipple shadow.", "tentative"),
        # a "?" naming a cause leaves the finding stated
        ("Large left pleural effusion ?breast malignancy.", "definitive"),
    ],
)
def test_a_question_mark_doubting_the_findings_reality_hedges_it(rules, text, certainty):
    (f,) = [f for f in rules.structure(text) if f.lesion_type]
    assert f.certainty == certainty


def _typed(rules, text):
    """``(lesion_type, presence, certainty)`` of the findings of a lesion type, in order."""
    return [(f.lesion_type, f.presence, f.certainty) for f in rules.structure(text) if f.lesion_type is not None]


@pytest.mark.parametrize(
    "report, expected",
    [
        # stop 62's trial of templated reports: each of these came out reversed
        (
            "FINDINGS:\nConsolidation - no\nEffusion - yes, small right\nOedema - no\nCardiomegaly - yes",
            [
                ("consolidation", "negative"),
                ("effusion", "positive"),
                ("edema", "negative"),
                ("cardiomegaly", "positive"),
            ],
        ),
        ("FINDINGS:\nPneumothorax: No\nEffusion: Small left", [("pneumothorax", "negative"), ("effusion", "positive")]),
        (
            "FINDINGS:\nConsolidation - none\nEffusion - small right",
            [("consolidation", "negative"), ("effusion", "positive")],
        ),
        # lower-case bullets, and a report in capitals of one statement per line
        (
            "FINDINGS:\n* no effusion\n* no pneumothorax\n* patchy LLL opacity",
            [("effusion", "negative"), ("pneumothorax", "negative"), ("opacity", "positive")],
        ),
        (
            "FINDINGS:\nNO PNEUMOTHORAX\nMODERATE RIGHT PLEURAL EFFUSION\nNO CONSOLIDATION",
            [("pneumothorax", "negative"), ("effusion", "positive"), ("consolidation", "negative")],
        ),
        # "Nil" before the finding denies it (UK, Australia); "nil change" does not
        (
            "FINDINGS:\nNil effusion. Nil focal consolidation.",
            [("effusion", "negative"), ("consolidation", "negative")],
        ),
        ("FINDINGS:\nRight pleural effusion - nil change from prior.", [("effusion", "positive")]),
        # an organ label in capitals is a label inside the findings, not a section: the
        # atelectasis after "LUNGS:" was lost
        (
            "FINDINGS:\nHEART: ENLARGED\nLUNGS: BIBASILAR ATELECTASIS",
            [("cardiomegaly", "positive"), ("atelectasis", "positive")],
        ),
        # still one sentence: a list under a cue, and a line wrapped after a joining word
        (
            "FINDINGS: No evidence of:\n- pneumothorax\n- effusion",
            [("pneumothorax", "negative"), ("effusion", "negative")],
        ),
        ("FINDINGS: There is no\nEffusion or pneumothorax.", [("effusion", "negative"), ("pneumothorax", "negative")]),
    ],
)
def test_templated_reports_of_one_statement_per_line(report, expected):
    _check_lines(report, expected)


@pytest.mark.parametrize(
    "report, labels",
    [
        # the section label "Lungs:" names no place (the first template-label change gave
        # these both lungs as well)
        ("FINDINGS:\nLungs: Patchy opacity in the right mid zone.", ["right mid zone lung"]),
        ("FINDINGS:\nLungs: Possible subtle consolidation at the left base.", ["left lung base"]),
        ("FINDINGS:\nEffusion - yes, small right\nOedema - no", ["right lung"]),
        ("FINDINGS:\nEffusion: small left\nPneumothorax: none", ["left lung"]),
        # the heart's line ends before "LUNGS:": the cardiomegaly takes no lung (it took
        # both lungs while the lines were one statement)
        ("FINDINGS:\nHEART: ENLARGED\nLUNGS: BIBASILAR ATELECTASIS", []),
    ],
)
def test_templated_reports_place_the_labels_finding(report, labels):
    from cxrils.report import structure_report

    first = next(f for f in structure_report("s", report).findings if f.lesion_type)
    assert first.labels == labels


@pytest.mark.parametrize(
    "report, expected",
    [
        # a review of the templated-report rules: sentences wrapped over lines in a report in
        # capitals, or before a line that looks like a label, stay whole
        (
            "FINDINGS:\nTHE HEART SIZE IS NORMAL. NO FOCAL CONSOLIDATION, PLEURAL\nEFFUSION OR PNEUMOTHORAX IS SEEN.",
            [("consolidation", "negative"), ("effusion", "negative"), ("pneumothorax", "negative")],
        ),
        (
            "FINDINGS:\nTHERE IS NO EVIDENCE OF PNEUMONIA, PULMONARY\nEDEMA OR PLEURAL EFFUSION.",
            [("pneumonia", "negative"), ("edema", "negative"), ("effusion", "negative")],
        ),
        (
            "FINDINGS:\nSTABLE CARDIOMEGALY. NO EVIDENCE OF LEFT LOWER LOBE\nCONSOLIDATION OR EFFUSION.",
            [("cardiomegaly", "positive"), ("consolidation", "negative"), ("effusion", "negative")],
        ),
        (
            "FINDINGS:\nMILD CARDIOMEGALY. NO FOCAL AIRSPACE\nCONSOLIDATION IS SEEN.",
            [("cardiomegaly", "positive"), ("consolidation", "negative")],
        ),
        ("FINDINGS:\nTHERE IS NO\nPLEURAL EFFUSION - THE LUNGS ARE CLEAR.", [("effusion", "negative")]),
        (
            "FINDINGS:\nThere is no pleural effusion or\nPneumothorax: the lines are unchanged.",
            [("effusion", "negative"), ("pneumothorax", "negative")],
        ),
        ("FINDINGS:\nThere is no\nEffusion - the lungs are clear.", [("effusion", "negative")]),
        ("FINDINGS:\nLungs: no\nConsolidation in the right base is seen.", [("consolidation", "negative")]),
        # a finding's own label answered "No" ends its line before an unlabelled one
        ("FINDINGS:\nPneumothorax: No\nSmall left effusion.", [("pneumothorax", "negative"), ("effusion", "positive")]),
    ],
)
def test_wrapped_sentences_stay_whole_beside_the_template_rules(report, expected):
    _check_lines(report, expected)


def test_a_wrapped_sentence_in_capitals_keeps_its_side():
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS:\nTHERE IS A SMALL LEFT\nPLEURAL EFFUSION - UNCHANGED.").findings
    assert (f.presence, f.labels) == ("positive", ["left lung"])


@pytest.mark.parametrize(
    "text, expected",
    [
        # stop 62's trial: no cardiomegaly and no pneumonia were read from these
        ("Cardiothoracic ratio is increased.", {"cardiomegaly": "positive"}),
        ("CTR is increased.", {"cardiomegaly": "positive"}),
        ("The cardiothoracic ratio is not increased.", {"cardiomegaly": "negative"}),
        ("Patchy changes, likely infective.", {"pneumonia": "positive"}),
        ("No infective consolidation.", {"pneumonia": "negative", "consolidation": "negative"}),
        # an airways flare is no pneumonia, nor are these (a review)
        ("Infective exacerbation of COPD.", {}),
        ("Frequent infective exacerbations of COPD.", {}),
        ("Known infective endocarditis. Lungs clear.", {}),
        ("Non-infective changes at the left base.", {}),
        ("Old infective change at the right apex.", {}),
    ],
)
def test_cardiothoracic_ratio_and_infective(rules, text, expected):
    assert presences(rules, text) == expected


@pytest.mark.parametrize(
    "text, certainty, places",
    [
        # stop 62's trial: a label's value before its place ("Minor, right base") kept the
        # place from the finding, and a hedged value ("possible") stated it
        ("Atelectasis: Minor, right base.", "definitive", ["right base"]),
        ("Pneumonia: Not excluded, left lower zone.", "tentative", ["left lower zone"]),
        ("Effusion: possible, left.", "tentative", ["left"]),
        ("Consolidation - likely.", "tentative", []),
        # a reading of its cause hedges no finding before it
        ("Right effusion - likely due to CHF.", "definitive", ["right"]),
    ],
)
def test_a_template_labels_value_before_its_place(rules, text, certainty, places):
    f = next(f for f in rules.structure(text) if f.lesion_type)
    assert (f.presence, f.certainty, f.locations) == ("positive", certainty, places)


@pytest.mark.parametrize(
    "report, expected",
    [
        # an adversarial review of the line rules (stop 62): MIMIC-CXR's lines open with a
        # space, and an abbreviation after it read as a report in capitals
        (
            " FINDINGS:\n No pneumothorax, no effusion\n LLL atelectasis",
            [("pneumothorax", "negative"), ("effusion", "negative"), ("atelectasis", "positive")],
        ),
        (
            " FINDINGS:\n Small right pleural effusion. No pneumothorax, no consolidation\n LUL nodule measures 8 mm.",
            [("effusion", "positive"), ("pneumothorax", "negative"), ("consolidation", "negative")],
        ),
        # an organ label of three words in capitals
        (
            "FINDINGS:\nLungs: No pneumothorax\nHEART AND MEDIASTINUM: Mild cardiomegaly",
            [("pneumothorax", "negative"), ("cardiomegaly", "positive")],
        ),
        # a place's label answered "no" is a sentence wrapped after "no"
        (
            "FINDINGS:\nLung bases: no\nConsolidation or effusion",
            [("consolidation", "negative"), ("effusion", "negative")],
        ),
        ("FINDINGS:\nRight lung: no\nConsolidation", [("consolidation", "negative")]),
        # organ labels that are no section: inside the findings, or opening them after a
        # section of another kind
        (
            "FINDINGS:\nLUNGS: No consolidation.\nCARDIAC SILHOUETTE: Enlarged.\nPLEURAL SPACES: Small left effusion.\n"
            "IMPRESSION: Cardiomegaly.",
            [("consolidation", "negative"), ("cardiomegaly", "positive"), ("effusion", "positive")],
        ),
        (
            "INDICATION: Cough.\nLUNGS: Left lower lobe consolidation.\nPLEURA: Small left effusion.",
            [("consolidation", "positive"), ("effusion", "positive")],
        ),
        (
            "FINDINGS:\nLUNG BASES: Bibasilar atelectasis.\nHEART: Normal.\nIMPRESSION: No acute process.",
            [("atelectasis", "positive")],
        ),
    ],
)
def test_line_rules_second_review(report, expected):
    _check_lines(report, expected)


@pytest.mark.parametrize(
    "report, expected",
    [
        # a third review (stop 62): an organ label after a header of another kind opened a
        # findings section that won over the report's impression or findings
        (
            " FINAL REPORT\n EXAMINATION:  CHEST AND ABDOMEN\n INDICATION:  Fever.\n CHEST: Patchy right lower lobe "
            "opacity.\n ABDOMEN: Nonobstructive bowel gas pattern.\n IMPRESSION: Right lower lobe pneumonia.",
            [("pneumonia", "positive")],
        ),
        (
            " INDICATION:  SOB.\n COMPARISON:  None.\n OTHER:  Portable film, patient rotated.\n IMPRESSION:  Moderate "
            "right pleural effusion.",
            [("effusion", "positive")],
        ),
        (
            " FINAL REPORT\n CHEST RADIOGRAPH\n There is a new large right pneumothorax.\n BONES: No acute fracture.",
            [("pneumothorax", "positive")],
        ),
        (
            " FINDINGS: Large left pleural effusion with adjacent atelectasis.\n NOTE: Study limited by motion.\n BONES: "
            "Degenerative changes of the spine.\n IMPRESSION: Large left effusion.",
            [("effusion", "positive"), ("atelectasis", "positive")],
        ),
        (
            " TECHNIQUE: Portable AP.\n TUBES: ET tube 4 cm above carina.\n IMPRESSION: Worsening bilateral pulmonary edema.",
            [("edema", "positive")],
        ),
        # a reading of the line before goes on with it, in capitals too
        (
            "FINDINGS:\nNO FOCAL CONSOLIDATION\nSUSPICIOUS FOR PNEUMONIA. NO EFFUSION.",
            [("consolidation", "negative"), ("pneumonia", "negative"), ("effusion", "negative")],
        ),
        (
            "IMPRESSION:\nNO FOCAL CONSOLIDATION\nCONCERNING FOR PNEUMONIA.",
            [("consolidation", "negative"), ("pneumonia", "negative")],
        ),
    ],
)
def test_line_rules_third_review(report, expected):
    _check_lines(report, expected)


@pytest.mark.parametrize(
    "report, expected",
    [
        # a fourth review (stop 62): "suspicious", "worrisome", "concerning" open a sentence
        # as adjectives; only "suspicious for" and the like go on with the line before
        (
            " FINDINGS:\n No pleural effusion\n Suspicious nodule in the right upper lobe.",
            [("effusion", "negative"), ("nodule", "positive")],
        ),
        (
            " FINDINGS:\n No pneumothorax\n Worrisome opacity in the left lower lobe.",
            [("pneumothorax", "negative"), ("opacity", "positive")],
        ),
        # the rest of a list wrapped without its comma, in capitals
        (
            " IMPRESSION:\n NO FOCAL CONSOLIDATION\n PLEURAL EFFUSION OR PNEUMOTHORAX.",
            [("consolidation", "negative"), ("effusion", "negative"), ("pneumothorax", "negative")],
        ),
    ],
)
def test_line_rules_fourth_review(report, expected):
    from cxrils.report import structure_report

    fs = structure_report("s", report).findings
    assert [(f.lesion_type or f.entity, f.presence) for f in fs] == expected


def test_a_reading_on_the_next_line_is_the_lines_inference():
    # "suspicious for" goes on with the line before (the fourth review's rule)
    from cxrils.report import structure_report

    (f,) = structure_report("s", "FINDINGS:\nRight lower lobe opacity\nSuspicious for pneumonia.").findings
    assert (f.lesion_type, f.presence, f.predicted_lesion_type) == ("opacity", "positive", "pneumonia")


@pytest.mark.parametrize(
    "report, expected",
    [
        # a fifth review (stop 62): in mixed case a capitalised reading opens a statement of
        # its own; only in capitals does it go on with the line before
        (
            " IMPRESSION:\n No pneumothorax\n Concerning for pneumonia in the right lower lobe.",
            [("pneumothorax", "negative"), ("pneumonia", "positive")],
        ),
        (
            " IMPRESSION:\n No effusion\n Suggestive of mild pulmonary edema.",
            [("effusion", "negative"), ("edema", "positive")],
        ),
        (
            " IMPRESSION:\n - No pneumothorax\n - Compatible with right lower lobe pneumonia",
            [("pneumothorax", "negative"), ("pneumonia", "positive")],
        ),
    ],
)
def test_line_rules_fifth_review(report, expected):
    from cxrils.report import structure_report

    fs = structure_report("s", report).findings
    assert [(f.lesion_type or f.entity, f.presence) for f in fs] == expected


@pytest.mark.parametrize(
    "report, expected",
    [
        # the fifth review's readings wrong before this stop too: a template in capitals,
        # a finding's label answered in one word, read the wrong way round
        (
            " FINDINGS:\n PLEURAL EFFUSION - NO\n PNEUMOTHORAX - YES\n",
            [("effusion", "negative"), ("pneumothorax", "positive")],
        ),
        (
            " FINDINGS:\n PNEUMOTHORAX: NO\n SMALL LEFT PLEURAL EFFUSION",
            [("pneumothorax", "negative"), ("effusion", "positive")],
        ),
        (
            " FINDINGS:\n - PNEUMOTHORAX - NO\n - CARDIOMEGALY - YES",
            [("pneumothorax", "negative"), ("cardiomegaly", "positive")],
        ),
        # still one sentence: no label's line before the dash label
        ("FINDINGS:\nTHERE IS NO\nPLEURAL EFFUSION - THE LUNGS ARE CLEAR.", [("effusion", "negative")]),
    ],
)
def test_templates_in_capitals_with_one_word_answers(report, expected):
    from cxrils.report import structure_report

    fs = structure_report("s", report).findings
    assert [(f.lesion_type or f.entity, f.presence) for f in fs] == expected
