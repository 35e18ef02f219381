"""What the negative records ask: instruction forms of a dataset beside the paper's test set.

The paper says an absent lesion type gets "a basic type with a randomly assigned lung
region or a global type" (Appendix C.2) and gives no share. Its Table 12 counts the
expert-verified test set's negatives by instruction type; the authors' released review
sheet of that test set (``final_sheet/absence_final.csv`` of KAIST-Edlab/ROSALIA, commit
e38fdb2, not shipped here: pass it with ``--released-sheet``) lists each negative's
question. This benchmark counts the negatives of a cxrils dataset (``--dataset``, e.g.
the folder ``cxrils demo`` writes) by form, and the sheet's when given:

* global, lung lesion types ("Segment the effusion."); global cardiomegaly apart;
* basic at both lungs together ("... in the right lung and left lung.");
* basic at one whole lung; basic at zones (any other place);
* lesion inference ("... and predict its type.").

A second table counts the opacity negatives at one place (a zone or one lung) and the
share of them asked as lesion inference (``instructions.lesion_inference_negative_prob``
in cxrils), the one thing that rule decides. The dataset's template records only (``paraphrase_of`` empty), every split.

Usage::

    python -m benchmarks.negative_forms --dataset cxrils-demo [--released-sheet absence_final.csv]
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from benchmarks.results import benchmark_parser, publish_if_asked

#: The forms, in printing order.
FORMS: tuple[str, ...] = (
    "global, lung types",
    "global, cardiomegaly",
    "basic, both lungs",
    "basic, one lung",
    "basic, zones",
    "lesion inference",
)
#: Paper Table 12 (Appendix E): the expert-verified test set's negatives by instruction type.
TABLE12_NEGATIVES: dict[str, int] = {"basic": 8316, "global": 796, "lesion inference": 769}
WHOLE_LUNG_PLACES = frozenset({"right lung", "left lung"})


def form_of(instruction_type: str, target: str, locations: list[str] | tuple[str, ...]) -> str:
    """The form (:data:`FORMS`) of one negative: its Table 2 instruction type, target and
    query locations (patient sides)."""
    if instruction_type == "lesion_inference":
        return "lesion inference"
    if instruction_type == "global":
        return "global, cardiomegaly" if target == "cardiomegaly" else "global, lung types"
    places = set(locations)
    if places == WHOLE_LUNG_PLACES:
        return "basic, both lungs"
    if len(places) == 1 and places <= WHOLE_LUNG_PLACES:
        return "basic, one lung"
    return "basic, zones"


#: Key of the one-place opacity negatives in a source's counter: (kind, count key).
ONE_PLACE_OPACITY = ("one-place opacity", "basic"), ("one-place opacity", "lesion inference")


def _count(out: Counter, kind: str, target: str, places: list[str]) -> None:
    """Add one negative (Table 2 kind, target, query places) to ``out``: its form, and,
    for an opacity negative at one place, its key of :data:`ONE_PLACE_OPACITY`."""
    form = form_of(kind, target, places)
    out[form] += 1
    if target == "opacity" and kind != "global" and len(places) == 1:
        out[ONE_PLACE_OPACITY[form == "lesion inference"]] += 1


def dataset_forms(dataset: Path) -> Counter:
    """Negative template records of a cxrils dataset, by form (and the one-place opacity
    negatives by kind, :data:`ONE_PLACE_OPACITY`)."""
    from cxrils.dataset import read_records

    recs = read_records(dataset)
    recs = recs[(recs["polarity"] == "negative") & (recs["paraphrase_of"] == "")]
    out: Counter = Counter()
    for it, t, locs in zip(recs["instruction_type"], recs["target"], recs["locations"]):
        _count(out, it, t, list(locs))
    return out


def sheet_forms(path: Path) -> Counter:
    """Negatives of the authors' review sheet (columns ``target``, ``location``,
    ``question``), by form: "predict its type" marks lesion inference, a question without
    " in the " a global one, ``location`` the places ("lung" for a global one)."""
    out: Counter = Counter()
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            q = row["question"]
            kind = "lesion_inference" if "predict its type" in q else "basic" if " in the " in q else "global"
            _count(out, kind, row["target"], [p.strip() for p in row["location"].split(" and ")])
    return out


def sheet_opacity_pairing(path: Path) -> str:
    """How the sheet's opacity negatives sit in their studies (rows as :func:`sheet_forms`
    reads them): the studies with an opacity negative, those asking it in both forms, and
    how often a lesion-inference and a basic opacity negative share their study and place
    with a pneumonia, atelectasis or edema negative (the test of whether the
    lesion-inference negative is a form of opacity's negative or one more negative of
    those types)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    inference_types = {"pneumonia", "atelectasis", "edema"}
    beside = {(r["sample_key"], r["location"]) for r in rows if r["target"] in inference_types}
    opacity = [r for r in rows if r["target"] == "opacity"]
    li = [r for r in opacity if "predict its type" in r["question"]]
    basic = [r for r in opacity if "predict its type" not in r["question"]]
    both = {r["sample_key"] for r in li} & {r["sample_key"] for r in basic}

    def paired(group: list[dict]) -> str:
        return f"{sum((r['sample_key'], r['location']) in beside for r in group)} of {len(group)}"

    return (
        f"Released sheet: {len({r['sample_key'] for r in opacity})} studies have an opacity negative, "
        f"{len(both)} of them in both forms. Sharing study and place with a pneumonia, atelectasis or "
        f"edema negative: lesion-inference negatives {paired(li)}, other opacity negatives {paired(basic)}."
    )


def opacity_table(columns: dict[str, Counter]) -> str:
    """Markdown table: per source, the opacity negatives at one place and the share of
    them asked as lesion inference."""
    lines = ["| source | opacity negatives at one place | of them lesion inference |", "|---|---|---|"]
    for name, counts in columns.items():
        basic, li = (counts[k] for k in ONE_PLACE_OPACITY)
        n = basic + li
        lines.append(f"| {name} | {n} | {li} ({100 * li / n:.1f} %) |" if n else f"| {name} | 0 | n/a |")
    return "\n".join(lines)


def table(columns: dict[str, Counter]) -> str:
    """Markdown table: one row per form, a count and share column per source."""
    head = "| form | " + " | ".join(columns) + " |"
    lines = [head, "|---|" + "---|" * len(columns)]
    for form in FORMS:
        cells = []
        for counts in columns.values():
            n = sum(counts[f] for f in FORMS)
            cells.append(f"{counts[form]} ({100 * counts[form] / n:.1f} %)" if n else "n/a")
        lines.append(f"| {form} | " + " | ".join(cells) + " |")
    lines.append("| all negatives | " + " | ".join(str(sum(c[f] for f in FORMS)) for c in columns.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = benchmark_parser(__doc__.splitlines()[0], page="negative_forms")
    ap.add_argument("--dataset", type=Path, required=True, help="a cxrils dataset folder (e.g. cxrils-demo)")
    ap.add_argument("--released-sheet", type=Path, default=None, help="the authors' absence_final.csv")
    args = ap.parse_args(argv)
    columns = {f"{args.dataset.name} (cxrils)": dataset_forms(args.dataset)}
    if args.released_sheet is not None:
        columns["authors' released test sheet"] = sheet_forms(args.released_sheet)
    t12 = TABLE12_NEGATIVES
    total = sum(t12.values())
    body = "\n\n".join(
        [
            table(columns),
            opacity_table(columns),
            *([sheet_opacity_pairing(args.released_sheet)] if args.released_sheet is not None else []),
            "Paper Table 12, expert-verified test set negatives: "
            + ", ".join(f"{k} {v} ({100 * v / total:.1f} %)" for k, v in t12.items())
            + f" of {total} (global includes cardiomegaly).",
        ]
    )
    print(body)
    publish_if_asked(args, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
