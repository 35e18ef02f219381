"""benchmarks/report_audit.py: its sentence file and its side reading."""

from __future__ import annotations

import json

import pytest

from benchmarks.report_audit import SENTENCES, side
from cxrils.vocab import LESION_TYPES


def test_every_audit_sentence_has_readings_of_the_seven_types():
    items = [json.loads(line) for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(items) == 329
    for item in items:
        assert item["text"] and set(item["expect"]) <= set(LESION_TYPES)
        for want in item["expect"].values():
            assert want["presence"] in ("positive", "negative")
            assert want["certainty"] in ("definitive", "tentative")
            assert want["side"] in ("right", "left", "both", "none")


@pytest.mark.parametrize(
    "labels, locations, expected",
    [
        (["right lung base"], [], "right"),
        ([], ["lingula"], "left"),
        (["right lung base", "left lung base"], ["bibasilar"], "both"),
        ([], ["bilateral"], "both"),
        ([], [], "none"),
    ],
)
def test_side_reads_patient_sides(labels, locations, expected):
    assert side(labels, locations) == expected
