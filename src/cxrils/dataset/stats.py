"""Dataset statistics in the layout of the paper's Tables 10-12 and Figure 4.

Tables 10-12 count, per split, instruction-answer pairs by lesion type (rows) and by
instruction type x polarity (columns); Figure 4 shows the pairs per lesion type.
:func:`image_counts` says how many images were processed, have records or were
excluded (a processed image can have no record, so these differ).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from cxrils import vocab
from cxrils.fsutil import atomic_path

TOTAL = "total"
#: Column headers of the printed and HTML tables, per instruction type (Table 2 names).
INSTRUCTION_TYPE_NAMES = {"basic": "basic", "global": "global", "lesion_inference": "lesion inference"}


def count_table(records: Any, split: str | None = None) -> Any:
    """Counts of one split (or all rows) as a DataFrame.

    Parameters
    ----------
    records : pandas.DataFrame
        Rows of :func:`cxrils.dataset.read_records`.
    split : str or None
        Restrict to one split.

    Returns
    -------
    pandas.DataFrame
        Index: the seven lesion types in the paper's order, then "total"; columns:
        MultiIndex (instruction type, polarity) for basic / global / lesion_inference
        x positive / negative, then ("total", "positive"), ("total", "negative"),
        ("total", "total"). Integer counts; absent combinations are 0. The totals count
        every pair, also one whose instruction follows none of the paper's templates
        (``instruction_type`` "": pairs of an imported release kept as they were);
        ``table.attrs["no_template"]`` says how many such pairs are in the totals only.
    """
    import pandas as pd

    df = records if split is None else records[records["split"] == split]
    cols = [(it, p) for it in vocab.INSTRUCTION_TYPES for p in vocab.POLARITIES]
    counts = df.groupby(["lesion_type", "instruction_type", "polarity"]).size()
    table = pd.DataFrame(0, index=list(vocab.LESION_TYPES), columns=pd.MultiIndex.from_tuples(cols), dtype=int)
    for (lesion, itype, pol), n in counts.items():
        table.loc[lesion, (itype, pol)] = int(n)
    for p in vocab.POLARITIES:
        table[(TOTAL, p)] = 0
    for (lesion, pol), n in df.groupby(["lesion_type", "polarity"]).size().items():
        table.loc[lesion, (TOTAL, pol)] = int(n)
    table[(TOTAL, TOTAL)] = table[(TOTAL, "positive")] + table[(TOTAL, "negative")]
    table.loc[TOTAL] = table.sum(axis=0)
    table.attrs["no_template"] = int((~df["instruction_type"].isin(vocab.INSTRUCTION_TYPES)).sum())
    return table


def no_template_note(table: Any) -> str:
    """The note under a :func:`count_table` whose totals hold pairs of no instruction
    type ("" when there are none)."""
    n = table.attrs.get("no_template", 0)
    if not n:
        return ""
    return (
        f"{n} pair{'s' if n != 1 else ''} whose instruction follows none of the paper's templates: in the totals only"
    )


def rich_count_table(table: Any, title: str) -> Any:
    """A :func:`count_table` as a ``rich.table.Table`` with full headers that fits 80
    columns: each instruction type's cell reads ``positives / negatives``; the last
    columns are the row's positive, negative and all pairs."""
    from rich import box
    from rich.table import Table

    note = no_template_note(table)
    t = Table(
        title=f"{title}: instruction-answer pairs (paper Tables 10-12)",
        box=box.SIMPLE_HEAD,
        caption="cells: positive / negative pairs" + (f"; {note}" if note else ""),
        title_justify="left",
    )
    t.add_column("lesion type", no_wrap=True, vertical="bottom")
    for it in vocab.INSTRUCTION_TYPES:
        name = INSTRUCTION_TYPE_NAMES[it].replace(" ", "\n")
        t.add_column(f"{name}\n+ / -", justify="right", no_wrap=True, vertical="bottom")
    for name in ("all +", "all -", "pairs"):
        t.add_column(name, justify="right", no_wrap=True, vertical="bottom")
    for lesion in table.index:
        cells = [
            f"{int(table.loc[lesion, (it, 'positive')])} / {int(table.loc[lesion, (it, 'negative')])}"
            for it in vocab.INSTRUCTION_TYPES
        ]
        totals = [str(int(table.loc[lesion, (TOTAL, k)])) for k in ("positive", "negative", TOTAL)]
        t.add_row(lesion, *cells, *totals, end_section=lesion == vocab.LESION_TYPES[-1])
    return t


def image_counts(dataset_dir: str | Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """How many images a dataset's run processed, how many have records, which have none.

    Parameters
    ----------
    dataset_dir : path
        A finalized dataset (``parts/`` holds one file per image done, with or without
        rows; ``excluded/`` one marker per excluded image).
    manifest : dict
        Its ``manifest.json``.

    Returns
    -------
    dict
        ``processed`` (done + excluded; None when ``parts/`` is gone), ``with_records``
        (``manifest["n_images"]``), ``without_records`` (sorted image ids done with no
        record), ``excluded`` and ``excluded_by_reason`` (category, the text before the
        first ": ", -> count).

    Raises
    ------
    cxrils.dataset.DatasetError
        If a part file cannot be read (the message says how to recover).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cxrils.dataset.writer import unreadable_part

    root = Path(dataset_dir)
    excl = manifest.get("exclusions", {})
    by_reason: Counter[str] = Counter()
    for reason, n in excl.get("by_reason", {}).items():
        by_reason[str(reason).split(": ", 1)[0]] += int(n)
    parts = sorted(p for p in (root / "parts").glob("*.parquet") if not p.name.startswith("."))
    empty = []
    for p in parts:
        try:
            rows = pq.read_metadata(p).num_rows
        except (OSError, pa.ArrowException) as err:
            raise unreadable_part(p, err) from err
        if rows == 0:
            empty.append(p.stem)
    n_excluded = int(excl.get("n", 0))
    return {
        "processed": len(parts) + n_excluded if (root / "parts").is_dir() else None,
        "with_records": int(manifest.get("n_images", 0)),
        "without_records": empty,
        "excluded": n_excluded,
        "excluded_by_reason": dict(sorted(by_reason.items())),
    }


def count_figure(records: Any) -> Any:
    """The Figure-4-style bar chart as a matplotlib Figure: pairs per lesion type, one
    panel per split, positive and negative bars stacked by instruction type, the legend
    below the panels (never over a bar). Close it with ``matplotlib.pyplot.close``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    splits = [s for s in vocab.SPLITS if (records["split"] == s).any()] or ["train"]
    fig, axes = plt.subplots(1, len(splits), figsize=(6 * len(splits), 4.6), squeeze=False)
    x = np.arange(len(vocab.LESION_TYPES))
    colors = {"basic": "#4c72b0", "global": "#dd8452", "lesion_inference": "#55a868"}
    for ax, split in zip(axes[0], splits):
        table = count_table(records, split)
        for offset, pol, hatch in ((-0.2, "positive", ""), (0.2, "negative", "//")):
            bottom = np.zeros(len(x))
            for itype in vocab.INSTRUCTION_TYPES:
                h = table.loc[list(vocab.LESION_TYPES), (itype, pol)].to_numpy()
                ax.bar(
                    x + offset,
                    h,
                    0.38,
                    bottom=bottom,
                    color=colors[itype],
                    hatch=hatch,
                    edgecolor="white",
                    label=f"{INSTRUCTION_TYPE_NAMES[itype]} {pol}",
                )
                bottom += h
        ax.set_xticks(x, vocab.LESION_TYPES, rotation=30, ha="right")
        ax.set_title(f"{split} ({int(table.loc[TOTAL, (TOTAL, TOTAL)])} pairs)")
        ax.set_ylabel("instruction-answer pairs")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
        title="left bar: positive, right bar (hatched): negative",
    )
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


def plot_counts(records: Any, path: str | Path) -> Path:
    """Write :func:`count_figure` as a PNG at ``path`` (atomically); returns ``path``."""
    import matplotlib.pyplot as plt

    fig = count_figure(records)
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return path
