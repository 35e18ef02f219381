"""``cxrils stats DATASET``: counts in the layout of the paper's Tables 10-12, a
Figure-4-style bar chart and, with ``--html``, a self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import typer

from cxrils.cli.common import fail

#: Width of the console when the output is not a terminal (a log file, a pipe), so that
#: tables keep their full headers instead of rich's 80-column default.
LOG_WIDTH = 120


def register(app: typer.Typer) -> None:
    """Add the dataset commands to the ``cxrils`` app."""
    app.command("stats")(stats)


def _console():
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(LOG_WIDTH, console.width))
    return console


def stats(
    dataset: Path = typer.Argument(..., help="Finalized dataset folder (with manifest.json)."),
    split: str | None = typer.Option(
        None, "--split", help="Only this split (train, validate, test; all for every one)."
    ),
    plot: Path | None = typer.Option(None, "--plot", help="Bar chart PNG (default: DATASET/stats.png)."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Do not write the bar chart."),
    html: Path | None = typer.Option(
        None,
        "--html",
        help="Also write a self-contained HTML report here: "
        "tables, chart and a gallery of sampled records with their masks.",
    ),
    per_cell: int = typer.Option(
        2, "--samples", min=1, max=20, help="Gallery records per lesion type and polarity (--html)."
    ),
) -> None:
    """Print pairs by lesion type x instruction type x polarity per split (Tables 10-12),
    image and exclusion counts, and write a bar chart like Figure 4 (and an HTML report)."""
    from cxrils import vocab
    from cxrils.dataset.stats import count_table, image_counts, plot_counts, rich_count_table
    from cxrils.vocab import SplitError, split_filter

    if plot is not None and no_plot:
        fail("give --plot PATH or --no-plot, not both")
    if plot is not None and plot.suffix.lower() != ".png":
        fail(f"{plot}: --plot writes a PNG; give a file name ending in .png")
    if html is not None and html.is_dir():
        fail(f"{html}: is a folder; --html names the HTML file to write")
    from cxrils.dataset.writer import DatasetError, read_manifest, read_records

    try:
        chosen = split_filter(split)
        splits = [chosen] if chosen else list(vocab.SPLITS)
        manifest = read_manifest(dataset)
        records = read_records(dataset, chosen)
        images = image_counts(dataset, manifest)
    except (DatasetError, SplitError) as err:
        fail(str(err))
    console = _console()
    for s in splits:
        if not (records["split"] == s).any():
            console.print(f"{dataset.name} / {s}: no records")
            continue
        console.print(rich_count_table(count_table(records, s), f"{dataset.name} / {s}"))
    console.print(_image_table(images))
    if not no_plot:
        out = plot_counts(records, plot or dataset / "stats.png")
        console.print(f"bar chart: {out}")
    if html is not None:
        from cxrils.dataset.html_report import write_html_report

        try:
            out = write_html_report(dataset, html, per_cell=per_cell, split=chosen)
        except (DatasetError, OSError) as err:
            fail(str(err))
        console.print(f"HTML report: {out}")


def _image_table(counts: dict):
    """Images processed, with and without records, excluded (by reason)."""
    from rich import box
    from rich.table import Table

    t = Table(title="images", title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("images", no_wrap=True)
    t.add_column("count", justify="right")
    t.add_column("note")
    if counts["processed"] is not None:
        t.add_row(
            "processed", str(counts["processed"]), "committed by the run that wrote this dataset (done + excluded)"
        )
    t.add_row("with records", str(counts["with_records"]), "images the records refer to")
    ids = counts["without_records"]
    t.add_row(  # shown at 0 too, as the HTML page does
        "done, no records",
        str(len(ids)),
        "processed, but no record came out (e.g. no finding grounded; absent-type negatives "
        "go to one image per study)" + (": " + ", ".join(ids[:3]) + (" ..." if len(ids) > 3 else "") if ids else ""),
    )
    t.add_row("excluded", str(counts["excluded"]), "QC or errors; reasons below and in DATASET/excluded/")
    for reason, n in counts["excluded_by_reason"].items():
        t.add_row(f"  {reason}", str(n), "")
    return t
