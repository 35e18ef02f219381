"""The light model's cardiomegaly rule on the validation split: CTR alone against CTR and score (issue 28).

With ``cardiomegaly_by_ctr`` the light model answers "Segment the cardiomegaly." with the
anatomy's heart where the cardiothoracic ratio of its priors exceeds
``cardiomegaly_min_ctr`` (0.5). ``cardiomegaly_needs_score`` also asks the network's
presence score to reach the cardiomegaly threshold. This benchmark answers every global
cardiomegaly record of a light dataset's ``validate`` split under both rules and prints,
per source of the image (the record's image-id prefix: ``cqx-Normal``, ``cqx-covid``,
``jsrt-``, other), the positives answered present and the negatives answered absent. The
rule is chosen here, on the split the thresholds are chosen on, never on the human-mask
benchmark's images (``benchmarks/human_masks.py`` is the test): keep the score gate only
if it answers every validation positive the CTR alone answers and more negatives absent.
The check is in-sample (the cardiomegaly threshold is calibrated on this split) and its
positives are few (JSRT PA films): it can refuse the gate, not prove it; the held-back
images of ``human_masks`` are the test. Exit status 3 when the rule is not met (the
retrain script then stops before shipping).

With ``--out-of-fold`` (a model trained with out-of-fold priors) each image of the tuning
part (COVID-QU-Ex, JSRT) is answered with the priors of the lesion models that never saw
it, as in training (:mod:`cxrils.training.prior_folds`); other images with the shipped
models. Without it the anomaly half's images get in-sample priors from the shipped map.

Usage::

    python -m benchmarks.light_cardiomegaly --dataset LIGHT_DATA [--run RUN] [--out-of-fold] [--threads 2]
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.light_validate import add_light_validate_options, count_cell, load_light_run, out_of_fold_segmenters
from benchmarks.results import apply_threads, benchmark_parser, publish_if_asked
from cxrils.training.light_data import HUMAN_PREFIX, JSRT_PREFIX

#: Record image-id prefixes (:mod:`cxrils.training.light_data`; COVID-QU-Ex ids start with
#: their class folder) and the source they name.
SOURCES: tuple[tuple[str, str], ...] = (
    (f"{HUMAN_PREFIX}Normal", "COVID-QU-Ex Normal films"),
    (f"{HUMAN_PREFIX}covid", "COVID-QU-Ex COVID-19 films"),
    (JSRT_PREFIX, "JSRT (SCR CTR)"),
)
#: Exit status when the rule is not met.
RULE_NOT_MET = 3


#: The question asked (Table 2's global cardiomegaly instruction).
QUESTION = "Segment the cardiomegaly."


def source_of(image_id: str) -> str:
    """The source named by a light-dataset record's image id (the prefix of
    :data:`SOURCES`), else ``"generated (demo reports)"``."""
    return next((name for prefix, name in SOURCES if image_id.startswith(prefix)), "generated (demo reports)")


def tally(rows: list[tuple[str, str, bool]]) -> dict[str, tuple[int, int, int, int]]:
    """``{source: (positives present, positives, negatives absent, negatives)}`` from
    ``(source, polarity, answered present)`` rows, plus ``"all"``."""
    out: dict[str, list[int]] = {}
    for source, polarity, present in rows:
        for key in (source, "all"):
            t = out.setdefault(key, [0, 0, 0, 0])
            if polarity == "positive":
                t[0] += present
                t[1] += 1
            else:
                t[2] += not present
                t[3] += 1
    return {k: (t[0], t[1], t[2], t[3]) for k, t in out.items()}


def main(argv: list[str] | None = None) -> int:
    """Answer the validate split's global cardiomegaly records under both rules, print
    (and with ``--publish`` write) the table; 0 when the rule is met, 1 when the model
    does not answer cardiomegaly by the CTR, :data:`RULE_NOT_MET` otherwise."""
    ap = benchmark_parser(__doc__.splitlines()[0], threads=2, page="light_cardiomegaly")
    add_light_validate_options(ap)
    ap.add_argument(
        "--out-of-fold",
        action="store_true",
        help="answer each tuning-part image with the priors of the lesion models that never saw it",
    )
    args = ap.parse_args(argv)
    apply_threads(args)
    run, seg = load_light_run(args)

    from cxrils.dataset import read_records
    from cxrils.io import load_image
    from cxrils.models.light.segmenter import LightSegmenter
    from cxrils.templates import parse_instruction
    from cxrils.training.prior_folds import source_role

    if not isinstance(seg, LightSegmenter) or not seg.answers_cardiomegaly_by_ctr:
        print(f"{run}: not a light model that answers cardiomegaly by the CTR")
        return 1
    records = read_records(args.dataset, "validate")
    records = records[
        (records.lesion_type == "cardiomegaly") & (records.instruction_type == "global") & (records.paraphrase_of == "")
    ]
    by_half = {}
    if args.out_of_fold:
        try:
            by_half = out_of_fold_segmenters(run, seg)
        except (ValueError, RuntimeError) as err:
            print(f"{run}: no out-of-fold lesion models to answer with: {err}")
            return 1
    rules = ("CTR alone", "CTR and score")
    rows: dict[str, list[tuple[str, str, bool]]] = {name: [] for name in rules}
    keep = seg.config.cardiomegaly_needs_score
    for s in (seg, *by_half.values()):
        s.config.cardiomegaly_needs_score = False  # one prediction per record: the CTR alone
    try:
        for r in records.itertuples():
            answer = by_half.get(source_role(r.image_id), seg)
            pred = answer.predict(load_image(Path(args.dataset) / r.image_path).pixels, r.instruction)
            by_ctr = bool(pred.mask.any())
            # the gate as LightSegmenter._cardiomegaly applies it: absent when score < threshold
            gated = by_ctr and bool(pred.score_passes)
            for name, present in zip(rules, (by_ctr, gated)):
                rows[name].append((source_of(r.image_id), r.polarity, present))
    finally:
        for s in (seg, *by_half.values()):
            s.config.cardiomegaly_needs_score = keep
    tallies = {name: tally(v) for name, v in rows.items()}
    sources = sorted({s for t in tallies.values() for s in t if s != "all"}) + ["all"]
    lines = [
        f"Model: {run.name}; dataset: {Path(args.dataset).name}, validate split, {len(records)} records "
        f'"{QUESTION}" (template records); cut-off CTR > {seg.config.cardiomegaly_min_ctr}, '
        f"cardiomegaly threshold {seg.presence_threshold(parse_instruction(QUESTION)):.3f}; "
        f"shipped setting: cardiomegaly_needs_score = {keep}; priors of the tuning-part images: "
        + ("out of fold (the lesion models that never saw each image)." if by_half else "the shipped lesion models."),
        "",
        "| source | rule | positives answered present | negatives answered absent (N-Acc) |",
        "|---|---|---|---|",
    ]
    for source in sources:
        for name in rules:
            p, n_p, a, n_n = tallies[name].get(source, (0, 0, 0, 0))
            lines.append(f"| {source} | {name} | {count_cell(p, n_p)} | {count_cell(a, n_n)} |")
    (p0, n_p, a0, n_n), (p1, _, a1, _) = tallies["CTR alone"]["all"], tallies["CTR and score"]["all"]
    met = p1 == p0 and a1 > a0
    lines += [
        "",
        f"The rule (keep the score gate only if it answers every positive the CTR alone answers, {p0} of {n_p}, "
        f"and more negatives absent): {'met' if met else 'not met'} ({p1} of {n_p} positives, "
        f"{a1} against {a0} of {n_n} negatives absent).",
    ]
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)
    return 0 if met else RULE_NOT_MET


if __name__ == "__main__":
    raise SystemExit(main())
