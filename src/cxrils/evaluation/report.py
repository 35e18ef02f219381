"""Grouped accumulation and the paper's tables (4, 5, 6, 14) as JSON, CSV and Markdown.

Counts are kept per cell ``(lesion_type, instruction_type, polarity)``; every table is
a sum of cells, so tables are consistent with each other by construction. A sample
without metadata falls in the cell ``(None, None, polarity)``; it counts in the
overall numbers and in no per-type row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cxrils import vocab
from cxrils.evaluation.counts import MaskCounts
from cxrils.evaluation.metrics import SegmentationAccumulator, TextAccumulator
from cxrils.evaluation.official import OfficialAccumulator
from cxrils.fsutil import atomic_write_json, atomic_write_text

REPORT_SCHEMA = "cxrils-evaluation/1"
#: Written for a value whose group has no samples (JSON uses null).
NA = "n/a"

Cell = tuple[str | None, str | None, str]


@dataclass
class _CellAcc:
    seg: SegmentationAccumulator = field(default_factory=SegmentationAccumulator)
    text: TextAccumulator = field(default_factory=TextAccumulator)

    def merge(self, other: _CellAcc) -> None:
        self.seg.merge(other.seg)
        self.text.merge(other.text)


class EvaluationReport:
    """Accumulated evaluation of ILS predictions, with the paper's tables.

    Add samples with :meth:`add` (streaming; memory is one accumulator per cell,
    at most 7 x 3 x 2 cells plus unlabelled ones), combine partial reports with
    :meth:`merge`, read tables with :meth:`table4` ... :meth:`table14`, write them
    with :meth:`write`. Metric values are fractions in [0, 1], or None for a group
    without samples of the kind.

    Parameters
    ----------
    metadata : dict, optional
        Free JSON-ready description (dataset, predictions, split) kept in the JSON.
    """

    def __init__(self, metadata: dict[str, Any] | None = None) -> None:
        self.metadata: dict[str, Any] = dict(metadata or {})
        self._cells: dict[Cell, _CellAcc] = {}
        #: The authors' validate() sums over every sample (:mod:`cxrils.evaluation.official`).
        self.official = OfficialAccumulator()

    # -- accumulation -------------------------------------------------------
    def add(
        self,
        counts: MaskCounts,
        *,
        lesion_type: str | None = None,
        instruction_type: str | None = None,
        polarity: str | None = None,
        text_correct: bool | None = None,
        padding_pixels: int = 0,
    ) -> None:
        """Add one sample.

        Parameters
        ----------
        counts : MaskCounts
            Pixel counts of the sample (:func:`cxrils.evaluation.mask_counts`).
        lesion_type, instruction_type : str, optional
            The record's lesion type and instruction type.
        polarity : {"positive", "negative"}, optional
            The record's polarity, used to group text accuracy (Table 6). Defaults
            to the reference mask (non-empty = positive). gIoU/cIoU/N-Acc always
            use the reference mask.
        text_correct : bool, optional
            Exact-match result of the answer; None when text is not scored.
        padding_pixels : int
            The prediction's pixels in the padding of SAM's square
            (:attr:`cxrils.models.base.Prediction.padding_pixels`): counted by the
            authors' protocol only (:mod:`cxrils.evaluation.official`), never by ours.
        """
        pol = polarity or ("positive" if counts.is_positive else "negative")
        acc = self._cells.setdefault((lesion_type, instruction_type, pol), _CellAcc())
        acc.seg.add(counts)
        self.official.add(counts, padding_pixels)
        if text_correct is not None:
            acc.text.add(text_correct)

    def merge(self, other: EvaluationReport) -> None:
        """Add the counts of another report (e.g. of another batch or worker). The
        metadata stay this report's, except ``padding_counted``: True only where both
        predictions carried ``padding_pixels``."""
        for key, acc in other._cells.items():
            self._cells.setdefault(key, _CellAcc()).merge(acc)
        self.official.merge(other.official)
        counted = [m.get("padding_counted") for m in (self.metadata, other.metadata)]
        if any(c is not None for c in counted):
            self.metadata["padding_counted"] = None if None in counted else all(counted)

    def _sum(self, lesion: str | None = "*", itype: str | None = "*", polarity: str = "*") -> _CellAcc:
        out = _CellAcc()
        for (les, it, pol), acc in self._cells.items():
            if lesion != "*" and les != lesion or itype != "*" and it != itype or polarity != "*" and pol != polarity:
                continue
            out.merge(acc)
        return out

    # -- tables ---------------------------------------------------------------
    @staticmethod
    def _seg_row(acc: _CellAcc) -> dict[str, Any]:
        s = acc.seg
        return {
            "gIoU": s.gIoU,
            "cIoU": s.cIoU,
            "n_acc": s.n_acc,
            "n_positive": s.n_positive,
            "n_negative": s.n_negative,
            "intersection": s.intersection,
            "union": s.union,
            "n_negative_empty": s.n_negative_empty,
            "text_accuracy": acc.text.accuracy,
            "n_text": acc.text.n,
            "n_text_correct": acc.text.n_correct,
        }

    @staticmethod
    def _text_row(acc: _CellAcc) -> dict[str, Any]:
        return {"accuracy": acc.text.accuracy, "n_correct": acc.text.n_correct, "n": acc.text.n}

    def _lesions(self) -> list[str]:
        seen = {les for les, _, _ in self._cells if les is not None}
        return list(vocab.LESION_TYPES) + sorted(seen - set(vocab.LESION_TYPES))

    def _itypes(self) -> list[str]:
        seen = {it for _, it, _ in self._cells if it is not None}
        return list(vocab.INSTRUCTION_TYPES) + sorted(seen - set(vocab.INSTRUCTION_TYPES))

    @property
    def n_samples(self) -> int:
        """Number of samples added."""
        s = self._sum().seg
        return s.n_positive + s.n_negative

    @property
    def text_scored(self) -> bool:
        """True when at least one answer was scored."""
        return self._sum().text.n > 0

    def table4(self) -> dict[str, Any]:
        """Overall gIoU, cIoU, N-Acc (Table 4) with counts and overall text accuracy."""
        return self._seg_row(self._sum())

    def table5(self) -> dict[str, dict[str, Any]]:
        """gIoU, cIoU, N-Acc per lesion type (Table 5), in the paper's lesion order."""
        return {les: self._seg_row(self._sum(lesion=les)) for les in self._lesions()}

    def table6(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Text accuracy per instruction type x polarity, plus "all" margins (Table 6)."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for it in self._itypes() + ["all"]:
            sel = "*" if it == "all" else it
            out[it] = {
                pol: self._text_row(self._sum(itype=sel, polarity="*" if pol == "all" else pol))
                for pol in (*vocab.POLARITIES, "all")
            }
        return out

    def table14(self) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """Text accuracy per lesion type x instruction type x polarity, with "all" margins (Table 14)."""
        out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for les in self._lesions():
            out[les] = {}
            for it in self._itypes() + ["all"]:
                sel = "*" if it == "all" else it
                out[les][it] = {
                    pol: self._text_row(self._sum(lesion=les, itype=sel, polarity="*" if pol == "all" else pol))
                    for pol in (*vocab.POLARITIES, "all")
                }
        return out

    def official_protocol(self) -> dict[str, Any]:
        """The authors' ``validate()`` numbers: ``giou_pos``, ``ciou_pos``, ``giou_neg``
        (their Table 4 gIoU, cIoU, N-Acc.), ``giou``, ``ciou`` over all samples, in [0, 1]
        (see :mod:`cxrils.evaluation.official` for where they differ from ours)."""
        return self.official.metrics()

    def cells(self) -> list[dict[str, Any]]:
        """The raw integer counts of every cell (enough to rebuild every table)."""
        rows = []
        for (les, it, pol), acc in sorted(self._cells.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
            s = acc.seg
            rows.append(
                {
                    "lesion_type": les,
                    "instruction_type": it,
                    "polarity": pol,
                    "n_positive": s.n_positive,
                    "iou_sum_2pow1074": str(s.iou_sum),
                    "intersection": s.intersection,
                    "union": s.union,
                    "n_negative": s.n_negative,
                    "n_negative_empty": s.n_negative_empty,
                    "n_text": acc.text.n,
                    "n_text_correct": acc.text.n_correct,
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: metadata, Tables 4, 5, 6, 14 and the raw cell counts."""
        return {
            "schema": REPORT_SCHEMA,
            "metadata": self.metadata,
            "n_samples": self.n_samples,
            "text_scored": self.text_scored,
            "table4_overall": self.table4(),
            "table5_per_lesion_type": self.table5(),
            "table6_text_by_instruction_type": self.table6(),
            "table14_text_by_lesion_and_instruction_type": self.table14(),
            "official_protocol": self.official_protocol(),
            "official_protocol_counts": self.official.to_dict(),
            "cells": self.cells(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationReport:
        """Rebuild a report from :meth:`to_dict` output (e.g. ``report.json`` of each
        shard of a distributed run, to :meth:`merge` them exactly).

        Raises
        ------
        ValueError
            If ``data`` is not a report of this schema.
        """
        if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA or "cells" not in data:
            raise ValueError(f"not a {REPORT_SCHEMA} report (needs 'schema' and 'cells')")
        report = cls(data.get("metadata"))
        try:
            for row in data["cells"]:
                seg = SegmentationAccumulator(
                    n_positive=int(row["n_positive"]),
                    iou_sum=int(row["iou_sum_2pow1074"]),
                    intersection=int(row["intersection"]),
                    union=int(row["union"]),
                    n_negative=int(row["n_negative"]),
                    n_negative_empty=int(row["n_negative_empty"]),
                )
                text = TextAccumulator(n=int(row["n_text"]), n_correct=int(row["n_text_correct"]))
                key = (row["lesion_type"], row["instruction_type"], row["polarity"])
                report._cells.setdefault(key, _CellAcc()).merge(_CellAcc(seg, text))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed report cell: {err!r}") from err
        if "official_protocol_counts" in data:  # reports written before it have none
            report.official = OfficialAccumulator.from_dict(data["official_protocol_counts"])
        return report

    # -- output ---------------------------------------------------------------
    def write(self, out_dir: str | Path) -> list[Path]:
        """Write ``report.json``, ``table4.csv``, ``table5.csv``, ``table6.csv``,
        ``table14.csv`` and ``report.md`` into ``out_dir`` (atomically, each file).

        Returns
        -------
        list of Path
            The files written.
        """
        out = Path(out_dir)
        files = {
            "report.json": None,
            "table4.csv": _csv(_TABLE4_COLS, [self.table4()]),
            "table5.csv": _csv(
                ["lesion_type", *_TABLE4_COLS], [{"lesion_type": les, **row} for les, row in self.table5().items()]
            ),
            "table6.csv": _csv(
                ["instruction_type", "polarity", "accuracy", "n_correct", "n"],
                [
                    {"instruction_type": it, "polarity": pol, **row}
                    for it, pols in self.table6().items()
                    for pol, row in pols.items()
                ],
            ),
            "table14.csv": _csv(
                ["lesion_type", "instruction_type", "polarity", "accuracy", "n_correct", "n"],
                [
                    {"lesion_type": les, "instruction_type": it, "polarity": pol, **row}
                    for les, its in self.table14().items()
                    for it, pols in its.items()
                    for pol, row in pols.items()
                ],
            ),
            "report.md": self.to_markdown(),
        }
        written = []
        for name, text in files.items():
            path = out / name
            if text is None:
                atomic_write_json(path, self.to_dict())
            else:
                atomic_write_text(path, text)
            written.append(path)
        return written

    def to_markdown(self) -> str:
        """A Markdown report with the four tables (percentages, one decimal as the paper)."""
        t4 = self.table4()
        lines = ["# cxrils evaluation report", ""]
        for key, value in self.metadata.items():
            lines.append(f"- {key}: `{value}`")
        lines += [
            f"- samples: {self.n_samples} ({t4['n_positive']} positive, {t4['n_negative']} negative)",
            "",
            _DEFINITIONS,
            "",
            "## Table 4: overall",
            "",
            "| gIoU | cIoU | N-Acc. | text acc. | positives | negatives |",
            "|---|---|---|---|---|---|",
            f"| {pct(t4['gIoU'])} | {pct(t4['cIoU'])} | {pct(t4['n_acc'])} | {pct(t4['text_accuracy'])} "
            f"| {t4['n_positive']} | {t4['n_negative']} |",
            "",
            *_official_lines(self.official_protocol(), self.metadata.get("padding_counted")),
            "## Table 5: per lesion type",
            "",
            "| lesion type | gIoU | cIoU | N-Acc. | positives | negatives |",
            "|---|---|---|---|---|---|",
        ]
        for les, row in self.table5().items():
            lines.append(
                f"| {les} | {pct(row['gIoU'])} | {pct(row['cIoU'])} | {pct(row['n_acc'])} "
                f"| {row['n_positive']} | {row['n_negative']} |"
            )
        if not self.text_scored:
            lines += ["", "Text accuracy (Tables 6 and 14): n/a, the predictions carry no answers."]
            return "\n".join(lines) + "\n"
        lines += [
            "",
            "## Table 6: text accuracy per instruction type",
            "",
            "| instruction type | positive | negative | all |",
            "|---|---|---|---|",
        ]
        for it, pols in self.table6().items():
            lines.append(f"| {it} | " + " | ".join(_frac(pols[p]) for p in (*vocab.POLARITIES, "all")) + " |")
        lines += [
            "",
            "## Table 14: text accuracy per lesion type and instruction type",
            "",
            "| lesion type | instruction type | positive | negative | all |",
            "|---|---|---|---|---|",
        ]
        for les, its in self.table14().items():
            for it, pols in its.items():
                if pols["all"]["n"]:
                    lines.append(
                        f"| {les} | {it} | " + " | ".join(_frac(pols[p]) for p in (*vocab.POLARITIES, "all")) + " |"
                    )
        return "\n".join(lines) + "\n"


_TABLE4_COLS = [
    "gIoU",
    "cIoU",
    "n_acc",
    "n_positive",
    "n_negative",
    "intersection",
    "union",
    "n_negative_empty",
    "text_accuracy",
    "n_text",
    "n_text_correct",
]

_DEFINITIONS = (
    "gIoU (mean per-sample IoU) and cIoU (total intersection / total union) are computed over "
    "**positives** (non-empty reference mask) only; N-Acc. is the share of **negatives** (empty "
    "reference mask) whose predicted mask is entirely empty. Text accuracy is exact match of the "
    "parsed answer (template and every variable). Values in %; n/a = no sample of that kind."
)


def padding_note(o: dict[str, Any], padding_counted: bool | None) -> str:
    """What the authors'-protocol numbers ``o`` (:meth:`EvaluationReport.official_protocol`)
    counted in the padding of SAM's square; ``padding_counted``: whether the predictions
    carried ``padding_pixels`` (None: not said, e.g. in-memory samples or a report written
    before the column)."""
    if padding_counted is False:
        return (
            "The predictions have no padding_pixels column: predicted pixels in the padding of SAM's "
            "square, which validate() counts as false positives, are not counted (docs/evaluation.md)."
        )
    counted = (
        f"Predicted pixels in the padding of SAM's square counted as false positives: "
        f"{o.get('padding_pixels', 0)} in {o.get('n_padded', 0)} samples"
    )
    if padding_counted:
        return counted + " (padding_pixels)."
    return counted + ", those the samples carried (none where they carry no padding_pixels)."


def _official_lines(o: dict[str, Any], padding_counted: bool | None) -> list[str]:
    """The authors'-protocol section of ``report.md`` (:func:`padding_note`)."""
    padding = padding_note(o, padding_counted)
    return [
        "## Table 4, the authors' protocol (KAIST-Edlab/ROSALIA train_ds.py validate())",
        "",
        "| giou_pos | ciou_pos | giou_neg | giou (all) | ciou (all) |",
        "|---|---|---|---|---|",
        f"| {pct(o['giou_pos'])} | {pct(o['ciou_pos'])} | {pct(o['giou_neg'])} | {pct(o['giou'])} | {pct(o['ciou'])} |",
        "",
        "Per sample I / (U + 1e-5), + 1 when U = 0; means divide by (count + 1e-5); giou_neg is "
        "N-Acc. up to that epsilon (docs/evaluation.md). " + padding,
        "",
    ]


def pct(value: float | None) -> str:
    """A fraction in [0, 1] as a percentage with one decimal ("62.5"); "n/a" for None."""
    return NA if value is None else f"{100 * value:.1f}"


def _frac(row: dict[str, Any]) -> str:
    return NA if row["accuracy"] is None else f"{100 * row['accuracy']:.1f} ({row['n_correct']}/{row['n']})"


def _csv(columns: list[str], rows: Iterable[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: NA if row.get(k) is None else row[k] for k in columns})
    return buf.getvalue()
