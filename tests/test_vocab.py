"""cxrils.vocab: reading a split filter."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("name", "expected"), [(None, None), ("all", None), (" ALL ", None), ("val", "validate")])
def test_split_filter(name, expected):
    from cxrils.vocab import split_filter

    assert split_filter(name) == expected


def test_split_filter_names_all_among_the_choices():
    from cxrils.vocab import SplitError, split_filter

    with pytest.raises(SplitError, match="expected one of train, validate, test, all"):
        split_filter("dev")
