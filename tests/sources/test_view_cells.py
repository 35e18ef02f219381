"""The view cell of an input table (``cxrils.sources.base.read_view``)."""

import logging

import pytest

from cxrils.sources.base import read_view


@pytest.mark.parametrize(
    "cell, view",
    [
        ("pa", "PA"),
        (" AP ", "AP"),
        ("P.A.", "PA"),
        ("PA VIEW", "PA"),
        ("AP PORTABLE", "AP"),  # new-user trial: excluded as "not frontal"
        ("postero-anterior", "PA"),
        ("POSTERO_ANTERIOR", "PA"),
        ("Lateral view", "LATERAL"),
        ("AP supine", "AP SUPINE"),
        ("xtable lateral", "XTABLE LATERAL"),
        ("", None),
        (None, None),
    ],
)
def test_a_view_cell_is_read_as_its_view_position(cell, view):
    assert read_view(cell) == view


def test_a_cell_that_names_no_view_is_unknown_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert read_view("WEIRD") is None
    assert "view 'WEIRD' is not a view position" in caplog.text


@pytest.mark.parametrize("cell", ["Left lateral", "Lateral decubitus", "PA/LAT", "Oblique", "Cross-table lateral"])
def test_a_cell_naming_a_view_that_is_not_frontal_stays_not_frontal(cell):
    # final review: these were excluded as not frontal before read_view, then read as unknown
    from cxrils import vocab

    view = read_view(cell)
    assert view is not None and view not in vocab.FRONTAL_VIEWS


def test_a_not_frontal_cell_keeps_only_its_view_words():
    # a name typed beside the view never travels into exclusion reasons or the manifest
    assert read_view("Doe John lateral") == "LATERAL"
    assert read_view("left-lateral") == "LEFT LATERAL"


def test_ll_and_rl_with_another_word_stay_not_frontal():
    # final read: "LAT JOHN" was not frontal but "LL JOHN" unknown
    assert read_view("LL JOHN") == "LL" and read_view("rl view") == "RL"
