"""Agreement of the report structurer with NLM's manual MeSH indexing of the IU reports.

For each of the seven lesion types: precision, recall and F1 of "the report says
this type is present" against the type's MeSH major terms. "Says present" is a
positive finding, whose lesion type or predicted lesion type is the type, that is
not merely raised as a possibility: the MeSH indexers index findings offered as
alternatives ("atelectasis versus scar": 80 of 87 indexed) but not possibilities
("may represent pneumonia": 6 of 70 indexed), so the structurer runs with
``alternatives_tentative=False`` and tentative findings are not counted. The F1
that counts every positive finding is printed beside it (column F1 any); for MeSH terms with a side (left / right / bilateral), how often the sides
of our labels agree; throughput of the structurer on one core; ten
disagreements per type; for MeSH terms with a zone (base, upper lobe, lingula...),
how often one of our zone or lobe labels agrees. How MeSH terms map: ``MESH_TO_TYPE``
below and docs/report.md.

The text given to the structurer is findings + impression, because the MeSH
indexers read the whole report (``--paper-section`` uses the paper's
findings-else-impression choice instead).

Usage::

    PYTHONPATH=src python benchmarks/report_mesh.py [--csv PATH] [--backend rules]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

from cxrils.report import get_location_mapper, get_structurer, select_iu_section  # noqa: E402
from cxrils.vocab import LABEL_SIDE, LESION_TYPES, LUNG_REGION_LABELS  # noqa: E402

#: MeSH major heading (the part before the first "/") -> lesion type. Follows the
#: synonyms of cxrils.vocab.LESION_SYNONYMS: Airspace Disease, Infiltrate and
#: Density are opacity; Pulmonary Congestion and Heart Failure are edema (as
#: "vascular congestion" and "CHF" are); Volume Loss is atelectasis.
MESH_TO_TYPE: dict[str, str] = {
    "Cardiomegaly": "cardiomegaly",
    "Pneumonia": "pneumonia",
    "Pulmonary Atelectasis": "atelectasis", "Volume Loss": "atelectasis",
    "Opacity": "opacity", "Airspace Disease": "opacity", "Infiltrate": "opacity", "Density": "opacity",
    "Consolidation": "consolidation",
    "Pulmonary Edema": "edema", "Pulmonary Congestion": "edema", "Heart Failure": "edema",
    "Pleural Effusion": "effusion",
}
#: Headings with a qualifier that makes them a lesion type ("Cardiac Shadow/enlarged").
MESH_QUALIFIED: dict[tuple[str, str], str] = {
    ("Cardiac Shadow", "enlarged"): "cardiomegaly", ("Heart", "enlarged"): "cardiomegaly",
}
_SIDES = {"right": {"right"}, "left": {"left"}, "bilateral": {"right", "left"}}


def mesh_types(mesh: str) -> dict[str, set[str] | None]:
    """Lesion types in a ``mesh_major`` cell -> the sides MeSH gives (None: no side)."""
    out: dict[str, set[str] | None] = {}
    for term in (mesh or "").split("|"):
        parts = [p.strip() for p in term.split("/")]
        t = MESH_TO_TYPE.get(parts[0]) or next(
            (v for (h, q), v in MESH_QUALIFIED.items() if parts[0] == h and q in parts[1:]), None)
        if t is None:
            continue
        sides = set().union(*(_SIDES[p] for p in parts[1:] if p in _SIDES)) or None
        if t not in out or out[t] is None:
            out[t] = sides
        elif sides:
            out[t] |= sides
    return out


#: MeSH zone qualifiers -> the lung-region labels that agree with them ({s}: the side).
_ZONE_LABELS = {
    "base": ("{s} lung base", "lung lower lobe {s}"),
    "lower lobe": ("{s} lung base", "lung lower lobe {s}"),
    "upper lobe": ("lung upper lobe {s}", "{s} upper zone lung", "{s} apical zone lung"),
    "apex": ("{s} apical zone lung", "{s} upper zone lung", "lung upper lobe {s}"),
    "middle lobe": ("lung middle lobe right", "{s} mid zone lung"),
    "lingula": ("lung upper lobe left", "left mid zone lung", "left lung base"),
    "retrocardiac": ("left lung base", "lung lower lobe left"),
    "hilum": ("{s} mid zone lung",),
}
_ZONE_LEVEL = set(LUNG_REGION_LABELS) - {"right lung", "left lung"}


def mesh_zones(mesh: str) -> dict[str, list[set[str]]]:
    """Lesion type -> for each of its MeSH terms with a zone, the labels that agree."""
    out: dict[str, list[set[str]]] = defaultdict(list)
    for term in (mesh or "").split("|"):
        parts = [p.strip() for p in term.split("/")]
        t = MESH_TO_TYPE.get(parts[0])
        zones = [p for p in parts[1:] if p in _ZONE_LABELS]
        if t is None or not zones:
            continue
        sides = set().union(*(_SIDES[p] for p in parts[1:] if p in _SIDES)) or {"right", "left"}
        out[t].append({lab.format(s=s) for z in zones for lab in _ZONE_LABELS[z] for s in sides})
    return out


def our_types(findings, tentative: bool = False) -> dict[str, set[str]]:
    """Lesion types the structurer says are present -> sides of their lung labels."""
    return {t: {LABEL_SIDE[lab] for lab in labels if lab in LABEL_SIDE}
            for t, labels in our_labels(findings, tentative).items()}


def our_labels(findings, tentative: bool = False) -> dict[str, set[str]]:
    """Lesion types the structurer says are present -> their labels."""
    out: dict[str, set[str]] = {}
    for f in findings:
        if f.presence != "positive":
            continue
        types = set()
        if f.certainty == "definitive" or tentative:
            types = {f.lesion_type, f.predicted_lesion_type}
        elif f.predicted_lesion_type:
            # "opacity, may represent atelectasis": the opacity is stated; only the
            # inference is tentative.
            types = {f.lesion_type}
        for t in types - {None}:
            out.setdefault(t, set()).update(f.labels)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", type=Path,
                    default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "iu_xray" / "nlmcxr_reports_all.csv")
    ap.add_argument("--backend", default="rules")
    ap.add_argument("--paper-section", action="store_true", help="findings else impression, as the pipeline")
    ap.add_argument("--examples", type=int, default=10)
    args = ap.parse_args()
    if not args.csv.exists():
        raise SystemExit(f"{args.csv}: not found (the IU reports of ../shared/data)")
    df = pd.read_csv(args.csv, dtype=str).fillna("")
    if args.paper_section:
        texts = [select_iu_section(f, i).text for f, i in zip(df.findings, df.impression)]
    else:
        texts = [" ".join(x for x in (f.strip(), i.strip()) if x) for f, i in zip(df.findings, df.impression)]
    if args.backend == "rules":
        from cxrils.report.rules import RulesStructurer

        structurer = RulesStructurer(alternatives_tentative=False)
    else:
        structurer = get_structurer(args.backend)
    mapper = get_location_mapper("lexicon")
    structurer.structure_many(["warm up the pipeline."])
    t0 = time.perf_counter()
    all_findings = structurer.structure_many(texts)
    for fs in all_findings:
        for f in fs:
            f.labels = [lab for p in f.locations for lab in mapper.map(p)]
    dt = time.perf_counter() - t0

    tp, fp, fn = defaultdict(int), defaultdict(int), defaultdict(int)
    tp2, fp2, fn2 = defaultdict(int), defaultdict(int), defaultdict(int)
    side_n, side_ok = defaultdict(int), defaultdict(int)
    wrong: dict[str, list[str]] = defaultdict(list)
    side_wrong: list[str] = []
    zone_n, zone_ok = 0, 0
    for rid, mesh, text, fs in zip(df.report_id, df.mesh_major, texts, all_findings):
        gold, ours, ours2 = mesh_types(mesh), our_types(fs), our_types(fs, tentative=True)
        labels = our_labels(fs)
        for t, wanted in mesh_zones(mesh).items():
            mine = labels.get(t, set()) & _ZONE_LEVEL
            if mine:  # both MeSH and we give a zone or lobe for this type
                for w in wanted:
                    zone_n += 1
                    zone_ok += bool(mine & w)
        for t in LESION_TYPES:
            tp2[t] += t in gold and t in ours2
            fp2[t] += t in ours2 and t not in gold
            fn2[t] += t in gold and t not in ours2
            g, o = t in gold, t in ours
            tp[t] += g and o
            fp[t] += o and not g
            fn[t] += g and not o
            if g != o:
                mine = [f"{f.entity}({f.presence},{f.certainty},{f.locations})" for f in fs
                        if t in (f.lesion_type, f.predicted_lesion_type)]
                wrong[t].append(f"{'FP' if o else 'FN'} {rid}: MeSH={mesh!r}\n      ours={mine}\n      text={text!r}")
            if g and o and gold[t] and ours[t]:
                side_n[t] += 1
                side_ok[t] += gold[t] == ours[t]
                if gold[t] != ours[t]:
                    side_wrong.append(f"{rid} {t}: MeSH {sorted(gold[t])} ours {sorted(ours[t])}: {text!r}")

    print(f"IU reports: {len(df)}  backend: {args.backend}  text: "
          f"{'paper section choice' if args.paper_section else 'findings + impression'}")
    print(f"{'type':<14}{'MeSH+':>6}{'ours+':>6}{'P':>7}{'R':>7}{'F1':>7}{'F1 any':>8}{'side n':>8}{'side agr':>9}")
    for t in LESION_TYPES:
        p = tp[t] / max(tp[t] + fp[t], 1)
        r = tp[t] / max(tp[t] + fn[t], 1)
        f1 = 2 * p * r / max(p + r, 1e-9)
        f1t = 2 * tp2[t] / max(2 * tp2[t] + fp2[t] + fn2[t], 1)
        sa = side_ok[t] / side_n[t] if side_n[t] else float("nan")
        print(f"{t:<14}{tp[t] + fn[t]:>6}{tp[t] + fp[t]:>6}{p:>7.3f}{r:>7.3f}{f1:>7.3f}{f1t:>8.3f}{side_n[t]:>8}{sa:>9.3f}")
    n_all, ok_all = sum(side_n.values()), sum(side_ok.values())
    print(f"side agreement, all types: {ok_all}/{n_all} = {ok_all / max(n_all, 1):.3f}")
    print(f"zone agreement (MeSH zone/lobe term matched by one of our zone or lobe labels): "
          f"{zone_ok}/{zone_n} = {zone_ok / max(zone_n, 1):.3f}")
    print(f"throughput: {len(texts) / dt:.0f} reports/s on one core ({dt:.1f} s for {len(texts)})")
    for t in LESION_TYPES:
        print(f"\n--- {t}: {len(wrong[t])} disagreements, first {args.examples}")
        for line in wrong[t][: args.examples]:
            print("  " + line)
    print(f"\n--- side disagreements: {len(side_wrong)}, first {args.examples}")
    for line in side_wrong[: args.examples]:
        print("  " + line)


if __name__ == "__main__":
    main()
