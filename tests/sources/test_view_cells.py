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


def test_a_study_input_of_the_python_api_reads_its_view_as_a_cell():
    # a trial (stop 62): StudyInput(view="pa") was excluded as "view_not_frontal: pa"
    from pathlib import Path

    from cxrils.sources.base import StudyInput

    def view(v):
        return StudyInput(
            study_id="s", image_id="i", patient_id="", image_path=Path("x"), report="", view=v, split=None
        ).view

    assert [view(v) for v in ("pa", "PA", "p.a.", "Left lateral", None)] == ["PA", "PA", "PA", "LEFT LATERAL", None]
