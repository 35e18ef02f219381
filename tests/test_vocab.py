"""cxrils.vocab: the lesion types a phrase names."""

from __future__ import annotations

import pytest

from cxrils.vocab import lesion_types_named


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("atelectasis or pneumonia", {"atelectasis", "pneumonia"}),
        ("Atelectasis versus Pulmonary Edema", {"atelectasis", "edema"}),
        ("an infectious process", {"pneumonia"}),
        ("tuberculosis", set()),
        ("", set()),
        # whole words only: "effusions" is a synonym, "effusional" is not a word of any type
        ("effusional", set()),
        ("small effusions", {"effusion"}),
    ],
)
def test_lesion_types_named(text, expected):
    assert lesion_types_named(text) == expected


@pytest.mark.parametrize(("name", "expected"), [(None, None), ("all", None), (" ALL ", None), ("val", "validate")])
def test_split_filter(name, expected):
    from cxrils.vocab import split_filter

    assert split_filter(name) == expected


def test_split_filter_names_all_among_the_choices():
    from cxrils.vocab import SplitError, split_filter

    with pytest.raises(SplitError, match="expected one of train, validate, test, all"):
        split_filter("dev")
