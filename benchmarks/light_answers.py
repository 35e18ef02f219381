"""How the light model's global answers name places: text exact match by ``lung_answer_min_zones``.

A global positive answer ("[SEG] It is located in the [Location].", Table 2) names the
places its mask lies in (:func:`cxrils.models.light.answer.locations_from_mask`). The
reference answer names the report's places (grounded == reported, Appendix C.1), and a
report names a lung ("bilateral opacities": "right lung and left lung") where the mask
covers three of its four zones but not its apex. ``lung_answer_min_zones`` (k) names the
lung once the mask lies in k of its zones; it changes the answer text only, never a mask
or whether a question is answered present.

For each k in 1-4 this prints the text exact match (:func:`cxrils.evaluation.metrics.answer_correct`,
the paper's Table 6 criterion) of the model's answers to the template global positives of
the lung types (cardiomegaly's answer is always the heart) in the dataset's ``validate``
and ``test`` splits. The rule, fixed before the first run: the k with the most correct
validate answers, ties to the larger k (the fewer merges); the test split is reported,
never used to choose. A generated dataset's references are the pipeline's own reading of
its reports, so this measures agreement with that reading, not with a radiologist.

Usage::

    python -m benchmarks.light_answers --dataset cxrils-demo [--run RUN] [--threads 2]
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.results import apply_threads, benchmark_parser, publish_if_asked

#: The values of ``lung_answer_min_zones`` compared (every valid one).
KS = (1, 2, 3, 4)
SPLITS = ("validate", "test")


def choose(correct_by_k: dict[int, int]) -> int:
    """The rule: the most correct validate answers, ties to the larger k."""
    return max(correct_by_k, key=lambda k: (correct_by_k[k], k))


def main(argv: list[str] | None = None) -> int:
    ap = benchmark_parser(__doc__.splitlines()[0], threads=2, page="light_answers")
    ap.add_argument("--dataset", type=Path, required=True, help="a generated cxrils dataset (e.g. cxrils-demo)")
    ap.add_argument("--run", type=Path, default=None, help="light run folder (default: the shipped model)")
    args = ap.parse_args(argv)
    apply_threads(args)

    from cxrils import templates, vocab
    from cxrils.dataset import ILSDataset
    from cxrils.evaluation.metrics import answer_correct
    from cxrils.models import Segmenter, default_model_dir
    from cxrils.models.light.answer import answer_locations
    from cxrils.models.light.segmenter import LightSegmenter

    run = args.run or default_model_dir()
    seg = Segmenter.from_pretrained(run)
    if not isinstance(seg, LightSegmenter):
        print(f"{run}: not a light model")
        return 1
    shipped_k = seg.config.lung_answer_min_zones
    correct: dict[str, dict[int, int]] = {}
    present: dict[str, int] = {}
    n: dict[str, int] = {}
    for split in SPLITS:
        ds = ILSDataset(args.dataset, split, augment=None, size=None)
        recs = ds.records
        keep = (
            (recs["instruction_type"] == "global")
            & (recs["polarity"] == "positive")
            & (recs["paraphrase_of"] == "")
            & ~recs["lesion_type"].isin(list(vocab.ORGAN_LESION_TYPES))
        )
        idx = [int(i) for i in recs.index[keep]]
        images = [ds.load_image(i) for i in idx]
        instructions = [str(recs.at[i, "instruction"]) for i in idx]
        n[split] = len(idx)
        # One prediction per record, at 4 (the zones as found: locations_from_mask already
        # names a lung covered through); k only rephrases a present answer
        # (answer_locations), as the segmenter does, so masks and presence are shared.
        seg.config.lung_answer_min_zones = 4
        preds = seg.predict_many(images, instructions)
        present[split] = sum(bool(p.mask.any()) for p in preds)
        correct[split] = {}
        for k in KS:
            answers = [
                templates.render_answer(
                    "global", "positive", locations=answer_locations(templates.parse_answer(p.answer).locations, k)
                )
                if p.mask.any()
                else p.answer
                for p in preds
            ]
            correct[split][k] = sum(answer_correct(a, str(recs.at[i, "answer"])) for a, i in zip(answers, idx))
    seg.config.lung_answer_min_zones = shipped_k
    chosen = choose(correct["validate"])

    def cell(split: str, k: int) -> str:
        m = n[split]
        return f"{correct[split][k]}/{m} = {100 * correct[split][k] / m:.1f}" if m else "n/a"

    rows = [
        f"| {k}{' (shipped)' if k == shipped_k else ''}{' **chosen**' if k == chosen else ''} "
        f"| {cell('validate', k)} | {cell('test', k)} |"
        for k in KS
    ]
    text = "\n".join(
        [
            f"Model: {Path(run).name}; dataset: {args.dataset.name}; template global positives of the lung types: "
            f"validate {n['validate']} (answered present {present['validate']}), "
            f"test {n['test']} (answered present {present['test']}).",
            "",
            "| lung_answer_min_zones | validate: text exact match | test: text exact match |",
            "|---|---|---|",
            *rows,
            "",
            f"Rule (fixed before the first run): the most correct validate answers, ties to the larger k. Chosen: {chosen}.",
            "An answer called absent is wrong for every k; the references are the pipeline's reading of the reports.",
        ]
    )
    print(text)
    publish_if_asked(args, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
