"""How often the light model's answers about one image contradict each other.

For each real radiograph (the first N PNGs of COVID-QU-Ex's Normal and COVID-19 films,
NIH and JSRT in ../shared/data) and each lung lesion type, asks the global question, the two lung
questions and the eight zone questions (Table 2 templates; for opacity also the two lung
lesion-inference questions), with the shipped model's ``consistent_answers`` off and on,
and counts the (image, type) pairs with a contradiction: the global answer present while
both lungs are absent or the reverse, a zone present in an absent lung (issue 32), a zone
or lung the global answer names ("It is located in the right upper zone lung") answered
absent when asked, or a lesion-inference question answered otherwise than the basic
question of its lung. Also prints the share of questions answered present each way, the
price of the rule in presence.

Usage::

    python -m benchmarks.answer_consistency [--data ../shared/data] [--images 10] [--publish NAME]
"""

from __future__ import annotations

from benchmarks.results import benchmark_parser, publish_if_asked

#: (label, folder, file pattern): COVID-QU-Ex's Normal and COVID-19 films apart, since
#: its sorted names put every Normal film first.
SOURCES = (
    ("covid_qu_ex Normal", "covid_qu_ex/images", "Normal_*.png"),
    ("covid_qu_ex COVID-19", "covid_qu_ex/images", "covid_*.png"),
    ("nih_bbox", "nih_bbox/images", "*.png"),
    ("jsrt_scr", "jsrt_scr/images", "*.png"),
)


def contradicts(target: str, answers: dict) -> bool:
    """Whether the answers (instruction -> Prediction) of one image and target contradict."""
    from cxrils import vocab
    from cxrils.templates import parse_answer, render_instruction

    lung = {n: answers[render_instruction("basic", target, [n])].mask.any() for n in vocab.WHOLE_LUNGS}
    glob = answers[render_instruction("global", target)]
    if glob.mask.any() != any(lung.values()):
        return True
    if any(
        answers[render_instruction("basic", target, [z])].mask.any() and not lung[n]
        for n in vocab.WHOLE_LUNGS
        for z in vocab.ZONES_OF_LUNG[n]
    ):
        return True
    named = parse_answer(glob.answer, "global").locations if glob.mask.any() else ()  # Table 2's answer
    if any(not answers[render_instruction("basic", target, [loc])].mask.any() for loc in named):
        return True
    inference = {n: render_instruction("lesion_inference", None, [n]) for n in vocab.WHOLE_LUNGS}
    return any(answers[q].mask.any() != lung[n] for n, q in inference.items() if q in answers)


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n")[0], data=True, page="answer_consistency")
    ap.add_argument("--images", type=int, default=10, help="first N PNGs per source")
    args = ap.parse_args()

    from cxrils import vocab
    from cxrils.io import load_image
    from cxrils.models import Segmenter, default_model_dir
    from cxrils.templates import render_instruction

    seg = Segmenter.from_pretrained(default_model_dir())
    types = [t for t in vocab.LESION_TYPES if t not in vocab.ORGAN_LOCATIONS]
    rows = []
    for label, folder, pattern in SOURCES:
        paths = sorted((args.data / folder).glob(pattern))[: args.images]
        counts = {False: [0, 0], True: [0, 0]}  # contradicting pairs, present answers
        n_pairs = n_questions = 0
        for path in paths:
            x = load_image(path).pixels
            for target in types:
                qs = [render_instruction("global", target)]
                qs += [render_instruction("basic", target, [loc]) for loc in vocab.INSTRUCTION_LOCATIONS]
                if target == "opacity":  # lesion inference asks of opacity (Table 2)
                    qs += [render_instruction("lesion_inference", None, [n]) for n in vocab.WHOLE_LUNGS]
                for flag in (False, True):
                    seg.config.consistent_answers = flag
                    answers = dict(zip(qs, seg.predict_many([x] * len(qs), qs)))
                    counts[flag][0] += contradicts(target, answers)
                    counts[flag][1] += sum(a.mask.any() for a in answers.values())
                n_pairs += 1
                n_questions += len(qs)
        rows.append((label, len(paths), n_pairs, n_questions, counts))
    lines = [
        f"Shipped light model; {len(types)} lung lesion types x (global + 2 lungs + 8 zones) questions per image, "
        "and 2 lesion-inference questions (opacity).",
        "",
        "| source | images | (image, type) pairs | contradicting pairs, rule off | rule on "
        "| questions answered present, rule off | rule on |",
        "|---|---|---|---|---|---|---|",
    ]
    for src, n_img, n_pairs, n_q, c in rows:
        lines.append(
            f"| {src} | {n_img} | {n_pairs} | {c[False][0]} | {c[True][0]} | {c[False][1]}/{n_q} | {c[True][1]}/{n_q} |"
        )
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
