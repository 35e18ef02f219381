"""Dataset statistics in the layout of the paper's Tables 10-12 and Figure 4.

Tables 10-12 count, per split, instruction-answer pairs by lesion type (rows) and by
instruction type x polarity (columns); Figure 4 shows the pairs per lesion type.
"""

from __future__ import annotations

from pathlib import Path

from cxrils import vocab
from cxrils.fsutil import atomic_path

TOTAL = "total"


def count_table(records, split: str | None = None):
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
        ("total", "total"). Integer counts; absent combinations are 0.
    """
    import pandas as pd

    df = records if split is None else records[records["split"] == split]
    cols = [(it, p) for it in vocab.INSTRUCTION_TYPES for p in vocab.POLARITIES]
    counts = df.groupby(["lesion_type", "instruction_type", "polarity"]).size()
    table = pd.DataFrame(0, index=list(vocab.LESION_TYPES), columns=pd.MultiIndex.from_tuples(cols), dtype=int)
    for (lesion, itype, pol), n in counts.items():
        table.loc[lesion, (itype, pol)] = int(n)
    for p in vocab.POLARITIES:
        table[(TOTAL, p)] = table[[(it, p) for it in vocab.INSTRUCTION_TYPES]].sum(axis=1)
    table[(TOTAL, TOTAL)] = table[(TOTAL, "positive")] + table[(TOTAL, "negative")]
    table.loc[TOTAL] = table.sum(axis=0)
    return table


def plot_counts(records, path: str | Path) -> Path:
    """Write a Figure-4-style bar chart PNG: pairs per lesion type, one panel per
    split, positive and negative bars stacked by instruction type. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    splits = [s for s in ("train", "validate", "test") if (records["split"] == s).any()] or ["train"]
    fig, axes = plt.subplots(1, len(splits), figsize=(6 * len(splits), 4), squeeze=False)
    x = np.arange(len(vocab.LESION_TYPES))
    colors = {"basic": "#4c72b0", "global": "#dd8452", "lesion_inference": "#55a868"}
    for ax, split in zip(axes[0], splits):
        table = count_table(records, split)
        for offset, pol, hatch in ((-0.2, "positive", ""), (0.2, "negative", "//")):
            bottom = np.zeros(len(x))
            for itype in vocab.INSTRUCTION_TYPES:
                h = table.loc[list(vocab.LESION_TYPES), (itype, pol)].to_numpy()
                ax.bar(x + offset, h, 0.38, bottom=bottom, color=colors[itype], hatch=hatch,
                       edgecolor="white", label=f"{itype} {pol}")
                bottom += h
        ax.set_xticks(x, vocab.LESION_TYPES, rotation=30, ha="right")
        ax.set_title(f"{split} ({int(table.loc[TOTAL, (TOTAL, TOTAL)])} pairs)")
        ax.set_ylabel("instruction-answer pairs")
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return path
