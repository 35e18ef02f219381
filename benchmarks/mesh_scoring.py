"""The yardstick of ``benchmarks/report_mesh.py``: findings scored against NLM's MeSH indexing.

Written apart from the structurer (``cxrils.report``): it reads only the fields of
the findings (``presence``, ``certainty``, ``inference_certainty``, ``lesion_type``,
``predicted_lesion_type``, ``labels``) and the ``mesh_major`` cell of the Indiana
University reports, and imports nothing from the structurer's code. Only the
vocabulary of the seven lesion types and of the lung-region labels comes from
``cxrils.vocab`` (the names being scored).

Split: a report is in the TUNING half when the first byte of SHA-256 of its
``report_id`` (UTF-8) is even, else in the UNTUNED half (:func:`half`). Rules were
changed by reading failures of the tuning half only; the untuned half is reported
apart and never read for failures.

Two scorings of "the report says type T is present":

- STRICT: MeSH major headings mapped only to their own type (:data:`STRICT_MESH`:
  no Volume Loss -> atelectasis, Density -> opacity, Pulmonary Congestion or Heart
  Failure -> edema); on our side a positive finding counts for its ``lesion_type``
  when its certainty is definitive and for its ``predicted_lesion_type`` when the
  inference is definitive too (:func:`strict_types`). Sides (:func:`side_agreement`):
  for each type both say is present where MeSH gives a side (left / right /
  bilateral), our sides must equal MeSH's; a finding with no side counts as a
  disagreement.
- LENIENT: also the related headings (:data:`LENIENT_MESH`, the synonyms of
  ``cxrils.vocab.LESION_SYNONYMS``: Volume Loss, Density, Pulmonary Congestion,
  Heart Failure), same definitive findings; sides compared only where both sides
  are given.

Column "F1 any" counts every positive finding, tentative ones included.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cxrils.vocab import LABEL_SIDE, LESION_TYPES

#: MeSH heading (the part before the first "/") -> lesion type, each term to its own type.
STRICT_MESH: dict[str, str] = {
    "Cardiomegaly": "cardiomegaly",
    "Pneumonia": "pneumonia",
    "Pulmonary Atelectasis": "atelectasis",
    # Airspace Disease and Infiltrate are opacity's own synonyms in the MeSH-indexed
    # reports ("airspace disease", "infiltrate"); Density is kept apart (ribs, nipples...).
    "Opacity": "opacity",
    "Airspace Disease": "opacity",
    "Infiltrate": "opacity",
    "Consolidation": "consolidation",
    "Pulmonary Edema": "edema",
    "Pleural Effusion": "effusion",
}
#: Lenient: also related headings that the vocabulary treats as synonyms.
LENIENT_MESH: dict[str, str] = {
    **STRICT_MESH,
    "Volume Loss": "atelectasis",
    "Density": "opacity",
    "Pulmonary Congestion": "edema",
    "Heart Failure": "edema",
}
#: Headings whose qualifier makes them cardiomegaly (both scorings): an enlarged heart shadow.
MESH_QUALIFIED: dict[tuple[str, str], str] = {
    ("Cardiac Shadow", "enlarged"): "cardiomegaly",
    ("Heart", "enlarged"): "cardiomegaly",
}
_SIDES = {"right": {"right"}, "left": {"left"}, "bilateral": {"right", "left"}}


def half(report_id: str) -> str:
    """``"tuning"`` when the first byte of SHA-256(report_id) is even, else ``"untuned"``."""
    return "tuning" if hashlib.sha256(report_id.encode("utf-8")).digest()[0] % 2 == 0 else "untuned"


def mesh_types(mesh: str, mapping: Mapping[str, str]) -> dict[str, set[str] | None]:
    """Lesion types of a ``mesh_major`` cell -> the sides MeSH gives (None: no side)."""
    out: dict[str, set[str] | None] = {}
    for term in (mesh or "").split("|"):
        parts = [p.strip() for p in term.split("/")]
        t = mapping.get(parts[0]) or next(
            (v for (h, q), v in MESH_QUALIFIED.items() if parts[0] == h and q in parts[1:]), None
        )
        if t is None:
            continue
        sides = set().union(*(_SIDES[p] for p in parts[1:] if p in _SIDES)) or None
        if t not in out or out[t] is None:
            out[t] = sides
        elif sides:
            out[t] |= sides
    return out


def _get(f, name):
    return f.get(name) if isinstance(f, Mapping) else getattr(f, name, None)


def strict_types(findings: Iterable) -> dict[str, set[str]]:
    """Types our findings say are definitively present -> sides of their lung labels.

    A positive finding counts for its ``lesion_type`` when ``certainty`` is
    "definitive", and for its ``predicted_lesion_type`` when, in addition,
    ``inference_certainty`` is not "tentative". Findings are
    :class:`cxrils.types.Finding` objects or their ``to_dict()`` dicts.
    """
    out: dict[str, set[str]] = {}
    for f in findings:
        if _get(f, "presence") != "positive" or _get(f, "certainty") != "definitive":
            continue
        types = {_get(f, "lesion_type")}
        if _get(f, "inference_certainty") != "tentative":
            types.add(_get(f, "predicted_lesion_type"))
        sides = {LABEL_SIDE[lab] for lab in _get(f, "labels") or () if lab in LABEL_SIDE}
        for t in types & set(LESION_TYPES):
            out.setdefault(t, set()).update(sides)
    return out


def any_types(findings: Iterable) -> set[str]:
    """Types of every positive finding, tentative ones included."""
    return {
        t
        for f in findings
        if _get(f, "presence") == "positive"
        for t in (_get(f, "lesion_type"), _get(f, "predicted_lesion_type"))
        if t in LESION_TYPES
    }


@dataclass
class Scores:
    """Counts of one scoring over a set of reports."""

    tp: dict = field(default_factory=lambda: defaultdict(int))
    fp: dict = field(default_factory=lambda: defaultdict(int))
    fn: dict = field(default_factory=lambda: defaultdict(int))
    tp_any: dict = field(default_factory=lambda: defaultdict(int))
    fp_any: dict = field(default_factory=lambda: defaultdict(int))
    fn_any: dict = field(default_factory=lambda: defaultdict(int))
    side_n: dict = field(default_factory=lambda: defaultdict(int))
    side_ok: dict = field(default_factory=lambda: defaultdict(int))
    side_none: dict = field(default_factory=lambda: defaultdict(int))
    n_reports: int = 0

    def f1(self, t: str, any_: bool = False) -> float:
        tp, fp, fn = (self.tp_any, self.fp_any, self.fn_any) if any_ else (self.tp, self.fp, self.fn)
        return 2 * tp[t] / max(2 * tp[t] + fp[t] + fn[t], 1)

    def precision(self, t: str) -> float:
        return self.tp[t] / max(self.tp[t] + self.fp[t], 1)

    def recall(self, t: str) -> float:
        return self.tp[t] / max(self.tp[t] + self.fn[t], 1)

    def sides(self) -> tuple[int, int]:
        """(agreeing, compared) over all types."""
        return sum(self.side_ok.values()), sum(self.side_n.values())


def side_agreement(
    gold: Mapping[str, set[str] | None], ours: Mapping[str, set[str]], strict: bool
) -> dict[str, tuple[bool, bool]]:
    """For each type both say is present and MeSH gives a side: (compared, agree).

    Strict: our side set must equal MeSH's, no side at all is a disagreement.
    Lenient: compared only when we give a side too.
    """
    out = {}
    for t, g in gold.items():
        if t not in ours or not g:
            continue
        if not strict and not ours[t]:
            continue
        out[t] = (True, ours[t] == g)
    return out


def score(rows: Iterable[tuple[str, list]], strict: bool) -> tuple[Scores, dict[str, list[int]]]:
    """Score ``(mesh_major, findings)`` pairs; also the report indices of each disagreement.

    Returns
    -------
    (Scores, dict)
        The dict maps "FP <type>", "FN <type>" and "side <type>" to the indices (in
        ``rows`` order) of the reports that disagree that way.
    """
    mapping = STRICT_MESH if strict else LENIENT_MESH
    s = Scores()
    wrong: dict[str, list[int]] = defaultdict(list)
    for i, (mesh, findings) in enumerate(rows):
        s.n_reports += 1
        findings = list(findings)
        gold = mesh_types(mesh, mapping)
        ours = strict_types(findings)
        anyt = any_types(findings)
        for t in LESION_TYPES:
            g, o = t in gold, t in ours
            s.tp[t] += g and o
            s.fp[t] += o and not g
            s.fn[t] += g and not o
            if g != o:
                wrong[f"{'FP' if o else 'FN'} {t}"].append(i)
            a = t in anyt
            s.tp_any[t] += g and a
            s.fp_any[t] += a and not g
            s.fn_any[t] += g and not a
        for t, (_, ok) in side_agreement(gold, ours, strict).items():
            s.side_n[t] += 1
            s.side_ok[t] += ok
            s.side_none[t] += not ours[t]
            if not ok:
                wrong[f"side {t}"].append(i)
    return s, wrong


def table(s: Scores, title: str) -> str:
    """Markdown table of one scoring: per type MeSH+, ours+, P, R, F1, F1 any, sides."""
    lines = [
        f"**{title}** ({s.n_reports} reports)",
        "",
        "| type | MeSH+ | ours+ | P | R | F1 | F1 any | sides compared | sides agree |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in LESION_TYPES:
        n, ok = s.side_n[t], s.side_ok[t]
        lines.append(
            f"| {t} | {s.tp[t] + s.fn[t]} | {s.tp[t] + s.fp[t]} | {s.precision(t):.3f} | "
            f"{s.recall(t):.3f} | {s.f1(t):.3f} | {s.f1(t, any_=True):.3f} | {n} | "
            f"{ok / n:.3f} |"
            if n
            else f"| {t} | {s.tp[t] + s.fn[t]} | {s.tp[t] + s.fp[t]} | {s.precision(t):.3f} | "
            f"{s.recall(t):.3f} | {s.f1(t):.3f} | {s.f1(t, any_=True):.3f} | 0 | - |"
        )
    ok, n = s.sides()
    none = sum(s.side_none.values())
    lines += [
        "",
        f"Sides, all types: {ok}/{n} = {ok / max(n, 1):.3f} agree"
        + (f" ({none} of the {n} have no side of ours)" if none else "")
        + ".",
    ]
    return "\n".join(lines)
