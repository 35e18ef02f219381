"""`cxrils stats`: Tables 10-12 layout and the Figure 4 chart."""

from __future__ import annotations

from typer.testing import CliRunner

from cxrils import vocab
from cxrils.cli import app
from cxrils.dataset import DatasetWriter, read_records
from cxrils.dataset.stats import TOTAL, count_table


def make(tmp_path, studies):
    w = DatasetWriter(tmp_path / "ds", {"run": "test"})
    for image_id, (x, recs) in studies.items():
        w.commit_study(image_id, x, recs)
    w.commit_study("ex1", None, None, excluded="not_frontal")
    w.finalize()
    return tmp_path / "ds"


def test_count_table_layout_and_numbers(tmp_path, studies):
    df = read_records(make(tmp_path, studies))
    t = count_table(df, "train")
    train = df[df["split"] == "train"]
    assert list(t.index) == list(vocab.LESION_TYPES) + [TOTAL]
    for lesion in vocab.LESION_TYPES:
        for itype in vocab.INSTRUCTION_TYPES:
            for pol in vocab.POLARITIES:
                n = ((train["lesion_type"] == lesion) & (train["instruction_type"] == itype)
                     & (train["polarity"] == pol)).sum()
                assert t.loc[lesion, (itype, pol)] == n
    assert t.loc[TOTAL, (TOTAL, TOTAL)] == len(train)
    assert t.loc["cardiomegaly", ("basic", "positive")] == 0


def test_stats_command_prints_tables_and_writes_chart(tmp_path, studies):
    ds = make(tmp_path, studies)
    res = CliRunner().invoke(app, ["stats", str(ds), "--plot", str(tmp_path / "fig4.png")])
    assert res.exit_code == 0, res.output
    for word in ("train", "validate", "test", "cardiomegaly", "effusion", "not_frontal"):
        assert word in res.output
    assert (tmp_path / "fig4.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no manifest" in res.output
    res = CliRunner().invoke(app, ["stats", str(ds), "--split", "dev", "--no-plot"])
    assert res.exit_code == 2 and "unknown split" in res.output
