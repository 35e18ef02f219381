"""``cxrils stats DATASET``: counts in the layout of the paper's Tables 10-12 and a
Figure-4-style bar chart."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the dataset commands to the ``cxrils`` app."""
    app.command("stats")(stats)


def stats(
    dataset: Path = typer.Argument(..., help="Finalized dataset folder (with manifest.json)."),
    split: Optional[str] = typer.Option(None, "--split", help="Only this split (train, validate, test)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Bar chart PNG [default: DATASET/stats.png]."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Do not write the bar chart."),
) -> None:
    """Print pairs by lesion type x instruction type x polarity per split (Tables 10-12)
    and write a bar chart like Figure 4."""
    from rich.console import Console
    from rich.table import Table

    from cxrils import vocab
    from cxrils.dataset.splits import SplitError, normalize_split
    from cxrils.dataset.stats import TOTAL, count_table, plot_counts
    from cxrils.dataset.writer import DatasetError, read_manifest, read_records

    try:
        splits = [normalize_split(split)] if split else ["train", "validate", "test"]
        manifest = read_manifest(dataset)
        records = read_records(dataset, splits[0] if split else None)
    except (DatasetError, SplitError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    console = Console()
    for s in splits:
        if not (records["split"] == s).any():
            console.print(f"{dataset.name} / {s}: no records")
            continue
        table = count_table(records, s)
        t = Table(title=f"{dataset.name} / {s}: instruction-answer pairs (paper Tables 10-12 layout)")
        t.add_column("lesion type", no_wrap=True)
        cols = [(it, p) for it in vocab.INSTRUCTION_TYPES for p in vocab.POLARITIES] + \
               [(TOTAL, "positive"), (TOTAL, "negative"), (TOTAL, TOTAL)]
        short = {"lesion_inference": "infer.", "positive": "pos", "negative": "neg", TOTAL: "all"}
        for it, p in cols:
            t.add_column(f"{short.get(it, it)}\n{short[p]}", justify="right")
        for lesion in table.index:
            t.add_row(lesion, *(str(int(table.loc[lesion, c])) for c in cols), end_section=lesion == vocab.LESION_TYPES[-1])
        console.print(t)
    excl = manifest.get("exclusions", {})
    console.print(f"images: {manifest.get('n_images', 0)}; excluded studies: {excl.get('n', 0)} "
                  f"{excl.get('by_reason', {})}")
    if not no_plot:
        out = plot_counts(records, plot or dataset / "stats.png")
        console.print(f"bar chart: {out}")
