"""Our per-sentence ConText (cxrils.report.context) against medspaCy's ConText itself, and
the text engine's linear work (cxrils.report.tokens).

The equivalence test runs medspaCy 1.3 with our cue rules and our target lexicon on
sentences written for this test and requires the same cue categories on every
target; it is skipped where medspaCy is not installed.
"""

import pytest

from cxrils.report import context as ctx
from cxrils.report.lexicon import CONTEXT_RULES, lesion_terms
from cxrils.report.rules import RulesStructurer, _matchers
from cxrils.report.tokens import Matcher, TokenPattern, prune_longest, split_sentences

pytestmark = pytest.mark.filterwarnings("ignore:.*W036")

SENTENCES = [
    "No effusion, but right lower lobe consolidation.",
    "No pneumothorax, pleural effusion, or focal consolidation.",
    "No interval change in the small left effusion.",
    "Cannot exclude pneumonia.",
    "Pneumonia cannot be excluded.",
    "The pneumonia has resolved.",
    "Findings may indicate edema or atypical infection.",
    "Left basilar atelectasis versus scar.",
    "Evaluate for pneumonia.",
    "There is no evidence of effusion; there is patchy atelectasis at the left base.",
    "Possible small left effusion and mild edema, no pneumothorax.",
    "Consolidation and atelectasis have cleared.",
    "Without evidence of pneumonia or edema.",
    "Atelectasis is possible in the right base.",
    "No new consolidation, although there is stable atelectasis.",
    "Pulmonary edema is not excluded, but the effusion is unchanged.",
]


@pytest.fixture(scope="module")
def medspacy_nlp():
    medspacy = pytest.importorskip("medspacy", reason="the comparison needs medspaCy (docs/report.md)")
    from medspacy.context import ConTextRule
    from medspacy.target_matcher import TargetRule

    nlp = medspacy.load(medspacy_enable=["medspacy_target_matcher"])
    nlp.add_pipe("sentencizer", first=True)
    nlp.get_pipe("medspacy_target_matcher").add(
        [TargetRule(phrase, t or "FINDING") for phrase, t in lesion_terms().items()]
    )
    context = nlp.add_pipe("medspacy_context", config={"rules": None, "span_attrs": None})
    context.add([ConTextRule(lit, cat, direction=d, max_scope=sc) for lit, cat, d, sc in CONTEXT_RULES])
    return nlp


def ours(text: str) -> dict[tuple[int, int], set[str]]:
    targets, cues = _matchers()
    out = {}
    for sent in split_sentences(text):
        ents = targets.find(sent.words)
        mods = ctx.target_modifiers(len(sent.words), [(a, b) for a, b, _ in ents], cues.find(sent.words))
        for (a, b, _), m in zip(ents, mods):
            out[sent.char_span(a, b)] = {c for c, _, _ in m}
    return out


@pytest.mark.parametrize("text", SENTENCES)
def test_same_categories_as_medspacy_context(medspacy_nlp, text):
    doc = medspacy_nlp(text)
    theirs = {(e.start_char, e.end_char): {m.category for m in e._.modifiers} for e in doc.ents}
    assert ours(text) == theirs


def test_a_terminator_ends_a_limited_backward_scope_where_medspacy_does_not(medspacy_nlp):
    # medspaCy 1.3.1 tests a one-sided overlap of the two scopes before limiting: the ";"
    # (scope: the whole sentence) does not end "has resolved"'s scope, cut to 10 tokens,
    # and the opacity is negated. Ours ends it there (cxrils.report.context.Modifier.limit_scope).
    text = "Left basilar opacity noted previously is unchanged; the right effusion has resolved."
    doc = medspacy_nlp(text)
    theirs = {(e.start_char, e.end_char): {m.category for m in e._.modifiers} for e in doc.ents}
    opacity, effusion = (13, 20), (62, 70)
    assert text[slice(*opacity)] == "opacity" and text[slice(*effusion)] == "effusion"
    assert theirs[opacity] == {"NEGATED_EXISTENCE"} and ours(text)[opacity] == set()
    assert theirs[effusion] == ours(text)[effusion] == {"NEGATED_EXISTENCE"}


def test_terminate_and_same_category_end_a_scope():
    # "no" FORWARD, "but" TERMINATE, "possible" FORWARD: rules are (literal, category, direction, max_scope)
    neg, term, hedge = (
        ("no", "NEG", "FORWARD", None),
        ("but", "TERMINATE", "TERMINATE", None),
        ("possible", "POS", "FORWARD", None),
    )
    # tokens: no(0) A(1) but(2) B(3) possible(4) C(5)
    mods = ctx.target_modifiers(6, [(1, 2), (3, 4), (5, 6)], [(0, 1, neg), (2, 3, term), (4, 5, hedge)])
    assert [{c for c, _, _ in m} for m in mods] == [{"NEG"}, set(), {"POS"}]
    # a second "no" ends the first one's scope: the target after it has one NEG, from the second cue
    mods = ctx.target_modifiers(4, [(1, 2), (3, 4)], [(0, 1, neg), (2, 3, neg)])
    assert [[s for _, s, _ in m] for m in mods] == [[0], [2]]
    # max_scope counts tokens
    back = ("has resolved", "NEG", "BACKWARD", 2)
    mods = ctx.target_modifiers(6, [(0, 1), (2, 3)], [(4, 6, back)])
    assert [{c for c, _, _ in m} for m in mods] == [set(), {"NEG"}]


# ------------------------------------------------------------------ tokens and sentences
@pytest.mark.parametrize(
    "text,sentences",
    [
        ("Atelectasis vs. scar. No effusion.", ["Atelectasis vs. scar.", "No effusion."]),
        ("1. Cardiomegaly. 2. Small effusion.", ["1. Cardiomegaly.", "2. Small effusion."]),
        ("Opacity at the apex.There is effusion.", ["Opacity at the apex.", "There is effusion."]),
        ("Nodule measures 1.5 cm. Stable.", ["Nodule measures 1.5 cm.", "Stable."]),
        ("No effusion", ["No effusion"]),
    ],
)
def test_sentence_split(text, sentences):
    assert [s.text for s in split_sentences(text)] == sentences
    assert [s.index for s in split_sentences(text)] == list(range(1, len(sentences) + 1))


def test_long_sentences_are_cut_but_keep_their_index():
    text = " ".join(["opacity"] * 450)
    pieces = split_sentences(text, max_tokens=200)
    assert [len(p.words) for p in pieces] == [200, 200, 50]
    assert {p.index for p in pieces} == {1}


def test_phrases_longest_match_and_deidentification_token():
    m = Matcher(
        [("effusion", "E"), ("pleural effusion", "PE"), ("right", "R")],
        [TokenPattern([{"LOWER": "heart"}, {"LOWER": {"IN": ["is", "size"]}, "OP": "*"}, {"LOWER": "enlarged"}], "CM")],
    )
    assert m.find("small pleural effusion".split()) == [(1, 3, "PE")]
    assert m.find("pleural xxxx effusion".split()) == [(0, 3, "PE")]
    assert m.find("heart size xxxx enlarged".split()) == [(0, 4, "CM")]
    assert prune_longest([(0, 2, "a"), (1, 4, "b"), (4, 5, "c")]) == [(1, 4, "b"), (4, 5, "c")]


def test_work_is_per_sentence_and_linear(monkeypatch):
    """Comparisons of cue pairs (medspaCy's quadratic update_scopes) grow linearly with
    the text: N copies of a paragraph cost N times one copy, and an unpunctuated text
    is cut into bounded pieces."""
    calls = {"n": 0}
    real = ctx.Modifier.limit_scope

    def counting(self, other):
        calls["n"] += 1
        return real(self, other)

    monkeypatch.setattr(ctx.Modifier, "limit_scope", counting)
    s = RulesStructurer()
    para = (
        "No pneumothorax or effusion, but possible left basilar atelectasis versus scar. "
        "Opacity may represent pneumonia; no edema. "
    )

    def cost(text):
        calls["n"] = 0
        s.structure(text)
        return calls["n"]

    one = cost(para)
    assert one > 0
    assert cost(para * 10) == 10 * one
    assert cost(para * 100) == 100 * one
    flat = "no effusion or possible atelectasis versus scar and "
    assert cost(flat * 400) <= 2.2 * cost(flat * 200)
