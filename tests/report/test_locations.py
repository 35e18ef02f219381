import pytest

from cxrils.report import get_location_mapper
from cxrils.report.locations import LexiconLocationMapper
from cxrils.vocab import BROAD_CATEGORIES, LUNG_REGION_LABELS

m = LexiconLocationMapper()


@pytest.mark.parametrize(
    "phrase,labels",
    [
        ("bibasilar", ["right lung base", "left lung base"]),
        ("right lower lobe", ["lung lower lobe right"]),
        ("left midlung", ["left mid zone lung"]),
        ("left mid lung", ["left mid zone lung"]),
        ("retrocardiac", ["left lung base"]),
        ("left", ["left lung"]),
        ("bilateral", ["right lung", "left lung"]),
        ("right-sided", ["right lung"]),
        ("lingula", ["lung upper lobe left"]),
        ("right apex", ["right apical zone lung"]),
        ("left upper and lower lobes", ["lung upper lobe left", "lung lower lobe left"]),
        ("right and left lower lobes", ["lung lower lobe right", "lung lower lobe left"]),
        ("right upper and middle lobes", ["lung upper lobe right", "lung middle lobe right"]),
        ("lung bases", ["right lung base", "left lung base"]),
        ("right costophrenic angle", ["right lung base"]),
        ("superior segment of the right lower lobe", ["lung lower lobe right"]),
        ("bilateral perihilar", ["right mid zone lung", "left mid zone lung"]),
        # a zone or lobe without a side overlaps both sides' labels (Appendix A.2: choose all)
        ("basilar", ["right lung base", "left lung base"]),
        ("the base", ["right lung base", "left lung base"]),
        ("lower lobes", ["lung lower lobe right", "lung lower lobe left"]),
        ("apical", ["right apical zone lung", "left apical zone lung"]),
        ("right basilar", ["right lung base"]),
        ("left basilar", ["left lung base"]),
        # comparatives and slashes keep both parts
        ("right greater than left", ["right lung", "left lung"]),
        ("left greater than right basilar", ["right lung base", "left lung base"]),
        ("retrocardiac/left base", ["left lung base"]),
        ("right/left lower lobes", ["lung lower lobe right", "lung lower lobe left"]),
        # a de-identified word inside a phrase keeps the side
        ("right XXXX lobe", ["right lung"]),
        ("left heart border", ["lung upper lobe left"]),
        # only the right lung has a minor (horizontal) fissure; a major fissure needs its side
        ("minor fissure", ["right lung"]),
        ("horizontal fissure", ["right lung"]),
        ("left major fissure", ["left lung"]),
    ],
)
def test_lung_phrases(phrase, labels):
    assert m.categories(phrase) == ["lung"]
    assert m.map(phrase) == labels


@pytest.mark.parametrize("phrase", ["retrosternal", "posterior costophrenic sulcus", "on the lateral view"])
def test_lateral_only_terms(phrase):
    assert m.map(phrase) == ["lateral view location"]


@pytest.mark.parametrize(
    "phrase,cat",
    [
        ("hilar", "mediastinum"),
        ("thoracic spine", "thoracic spine"),
        ("left hemidiaphragm", "diaphragm"),
        ("right clavicle", "clavicle"),
        ("left 5th rib", "rib"),
        ("substernal", "sternum"),
        ("heart", "heart"),
        ("right glenoid", "scapula"),
    ],
)
def test_non_lung_categories(phrase, cat):
    assert m.map(phrase) == [cat]


@pytest.mark.parametrize("phrase", ["somewhere odd", "lung", "", "zone", "parenchyma"])
def test_unknown_or_unspecific_maps_to_none(phrase):
    assert m.map(phrase) == []


def test_outputs_are_in_the_vocabulary():
    for p in ["bibasilar", "hilar", "left upper and lower lobes", "retrosternal", "mid and lower lungs"]:
        assert all(lab in LUNG_REGION_LABELS or lab in BROAD_CATEGORIES for lab in m.map(p))


def test_registry():
    assert get_location_mapper("lexicon").map("left base") == ["left lung base"]
    with pytest.raises(ValueError, match="unknown location mapper"):
        get_location_mapper("nope")


def test_lobe_abbreviations_in_a_location_phrase_as_the_llm_backend_gives_them():
    from cxrils.report.locations import LexiconLocationMapper

    m = LexiconLocationMapper()
    assert m.map("RLL") == ["lung lower lobe right"] == m.map("rll")
    assert m.map("RUL and RML") == ["lung upper lobe right", "lung middle lobe right"]
    assert m.map("left base") == ["left lung base"]  # no abbreviation inside a word


@pytest.mark.parametrize(
    "phrase, labels",
    [
        # one coordinated phrase, one side (COVID-19 note ciaa199: no right upper lobe)
        ("upper and lower lobes of the left lung", ["lung upper lobe left", "lung lower lobe left"]),
        ("upper and lower zones of the right lung", ["right upper zone lung", "right lung base"]),
        # a part with its own head keeps both sides
        (
            "upper lobes and the left lower lobe",
            ["lung upper lobe right", "lung upper lobe left", "lung lower lobe left"],
        ),
    ],
)
def test_a_part_that_borrows_its_head_borrows_its_side(phrase, labels):
    assert sorted(LexiconLocationMapper().map(phrase)) == sorted(labels)
