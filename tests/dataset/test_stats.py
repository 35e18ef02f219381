"""`cxrils stats`: Tables 10-12 layout and the Figure 4 chart."""

from __future__ import annotations

from typer.testing import CliRunner

from cxrils import vocab
from cxrils.cli import app
from cxrils.dataset import DatasetWriter, read_records
from cxrils.dataset.stats import TOTAL, count_figure, count_table, image_counts


def make(tmp_path, studies, *, empty_image=False):
    w = DatasetWriter(tmp_path / "ds", {"run": "test"})
    for image_id, (x, recs) in studies.items():
        w.commit_study(image_id, x, recs)
    w.commit_study("ex1", None, None, excluded="not_frontal")
    w.commit_study("ex2", None, None, excluded="qc_grounding: lungs not found")
    if empty_image:
        x = next(iter(studies.values()))[0]
        w.commit_study("norec", x, [])  # processed, but no record came out
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
                n = (
                    (train["lesion_type"] == lesion) & (train["instruction_type"] == itype) & (train["polarity"] == pol)
                ).sum()
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
    assert res.exit_code == 2 and "no such dataset folder" in res.output
    res = CliRunner().invoke(app, ["stats", str(ds), "--split", "dev", "--no-plot"])
    assert res.exit_code == 2 and "unknown split" in res.output
    every = CliRunner().invoke(app, ["stats", str(ds), "--split", "all", "--no-plot"])  # as evaluate's --split all
    whole = CliRunner().invoke(app, ["stats", str(ds), "--no-plot"])
    assert every.exit_code == 0 and every.output == whole.output
    res = CliRunner().invoke(app, ["stats", str(ds), "--plot", str(tmp_path / "p.png"), "--no-plot"])
    assert res.exit_code == 2 and "not both" in res.output and not (tmp_path / "p.png").exists()
    res = CliRunner().invoke(app, ["stats", str(ds), "--plot", str(tmp_path / "s.jpg")])
    assert res.exit_code == 2 and "ending in .png" in res.output and not (tmp_path / "s.jpg").exists()


def test_stats_tables_have_full_headers_and_image_counts(tmp_path, studies):
    ds = make(tmp_path, studies, empty_image=True)
    res = CliRunner().invoke(app, ["stats", str(ds), "--no-plot"])
    assert res.exit_code == 0, res.output
    assert "\u2026" not in res.output  # rich's ellipsis: no header or cell is cut
    for header in ("lesion", "inference", "basic", "global", "+ / -", "all +", "all -", "pairs", "positive / negative"):
        assert header in res.output
    assert "{" not in res.output  # no Python dict printed
    rows = {}
    for line in res.output.splitlines():
        for label in ("processed", "with records", "done, no records", "excluded"):
            if line.strip().startswith(label + " "):
                rows[label] = line.strip()[len(label) :].split()[0]
    assert rows == {
        "processed": str(len(studies) + 3),
        "with records": str(len(studies)),
        "done, no records": "1",
        "excluded": "2",
    }
    assert "norec" in res.output and "qc_grounding" in res.output


def test_count_table_fits_80_columns_without_cutting(tmp_path, studies):
    from rich.console import Console

    from cxrils.dataset.stats import rich_count_table

    console = Console(width=80, record=True)
    console.print(rich_count_table(count_table(read_records(make(tmp_path, studies)), "train"), "ds / train"))
    text = console.export_text()
    assert "\u2026" not in text and max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert "inference" in text and "consolidation" in text
    # the title stays on one line beside a small table (the demo's validate split)
    console = Console(width=80, record=True)
    console.print(
        rich_count_table(count_table(read_records(make(tmp_path, studies)), "train"), "cxrils-demo / validate")
    )
    assert "Tables 10-12)" in console.export_text().splitlines()[0]


def test_image_counts_explain_images_without_records(tmp_path, studies):
    from cxrils.dataset import read_manifest

    ds = make(tmp_path, studies, empty_image=True)
    counts = image_counts(ds, read_manifest(ds))
    assert counts == {
        "processed": len(studies) + 3,
        "with_records": len(studies),
        "without_records": ["norec"],
        "excluded": 2,
        "excluded_by_reason": {"not_frontal": 1, "qc_grounding": 1},
    }


def test_chart_legend_does_not_cover_the_bars(tmp_path, studies):
    import matplotlib.pyplot as plt

    fig = count_figure(read_records(make(tmp_path, studies)))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legend = fig.legends[0].get_window_extent(renderer)
        for ax in fig.axes:
            assert not legend.overlaps(ax.get_window_extent(renderer)), "legend overlaps a panel"
        assert len(fig.legends[0].get_texts()) == len(vocab.INSTRUCTION_TYPES) * len(vocab.POLARITIES)
    finally:
        plt.close(fig)
