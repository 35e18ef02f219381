"""The table `cxrils generate` prints keeps full, aligned headers (readable in a log)."""

from __future__ import annotations

from cxrils import vocab
from cxrils.pipeline.summary import format_summary, summarize


def test_summary_table_has_full_headers_and_aligned_rows():
    stats = [
        {
            "excluded": None,
            "reported": {"effusion": 2},
            "grounded": {"effusion": 1},
            "records": {"effusion|basic|positive": 1, "edema|global|negative": 3},
            "n_findings": 2,
        },
        {"excluded": "qc_grounding: no lungs", "reported": {}, "grounded": {}, "records": {}, "n_findings": 0},
    ]
    text = format_summary(summarize(stats))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("lesion type"))
    for word in ("reported", "grounded", "recall", "positive records", "negative records"):
        assert word in header
    rows = [line for line in lines if line.split() and line.split()[0] in vocab.LESION_TYPES]
    assert len(rows) == len(vocab.LESION_TYPES) and {len(r) for r in rows} == {len(header)}
    eff = next(r for r in rows if r.startswith("effusion")).split()
    assert eff[1:] == ["2", "1", "50.0%", "1", "0"]
    assert "excluded qc_grounding: 1" in text and "lesion inference" in text
