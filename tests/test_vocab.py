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


def test_view_positions_hold_dicom_defined_terms():
    """PS3.3 C.8.11.5 (DX Positioning), View Position (0018,5101) defined terms for chest
    radiographs: AP, PA, LL, RL, RLD, LLD, RLO, LLO; a reviewer found the decubitus and
    oblique ones refused by ``cxrils ground --view``."""
    from cxrils.vocab import FRONTAL_VIEWS, VIEW_POSITIONS

    assert {"AP", "PA", "LL", "RL", "RLD", "LLD", "RLO", "LLO"} <= VIEW_POSITIONS
    assert FRONTAL_VIEWS <= VIEW_POSITIONS and "SIDEWAYS" not in VIEW_POSITIONS
