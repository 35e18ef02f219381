"""benchmarks.light_cardiomegaly: the source of a light-dataset record and the counts
behind its table (hand-counted)."""

from __future__ import annotations

from benchmarks.light_cardiomegaly import source_of, tally


def test_source_of_reads_the_light_datasets_image_id_prefixes():
    assert source_of("cqx-Normal_11782") == "COVID-QU-Ex Normal films"
    assert source_of("cqx-covid_123") == "COVID-QU-Ex COVID-19 films"
    assert source_of("jsrt-JPCLN001") == "JSRT (SCR CTR)"
    assert source_of("covid-19-pneumonia-53") == "generated (demo reports)"


def test_tally_counts_positives_present_and_negatives_absent_per_source_and_pooled():
    rows = [
        ("a", "positive", True),
        ("a", "positive", False),
        ("a", "negative", False),  # answered absent: correct
        ("a", "negative", True),
        ("b", "negative", False),
        ("b", "negative", False),
    ]
    t = tally(rows)
    assert t["a"] == (1, 2, 1, 2)
    assert t["b"] == (0, 0, 2, 2)
    assert t["all"] == (1, 2, 3, 4)
