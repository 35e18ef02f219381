"""Word lists of the rules backend, built on :data:`cxrils.vocab.LESION_SYNONYMS`.

The seven lesion types and their report synonyms live in :mod:`cxrils.vocab`
(the single source); this module adds what only the text side needs: findings
outside the seven types (extracted with ``lesion_type=None``, as the paper's
prompt extracts every disease or finding), token patterns for the phrasings of
cardiomegaly, the ConText cue rules (negation, pseudo-negation, hedging,
resolution, hypothetical, scope terminators) and the anatomical words that make
up location phrases.

Sources: paper section 3.1 step 1 and Appendix A.2 (Figure 9) for the extraction
rules ("No change in pneumothorax" positive, "Pneumothorax has been resolved"
negative, hedges tentative, devices ignored, "clear"/"normal" not negative).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from cxrils.report.tokens import ANSWER_DENIALS, ANSWERS, DEID_TOKEN
from cxrils.vocab import LESION_SYNONYMS, LESION_TYPES

#: Findings that are none of the seven lesion types (lesion_type None). Devices
#: (tubes, lines, catheters, pacemakers, clips, wires) are deliberately absent:
#: the paper's prompt ignores them.
OTHER_FINDINGS: Final[tuple[str, ...]] = (
    "pneumothorax",
    "pneumothoraces",
    "hydropneumothorax",
    "pneumomediastinum",
    # A "nodular opacity" stays an opacity (NLM indexes it as Opacity); nodular and
    # calcified densities are nodules and granulomas.
    "nodule",
    "nodules",
    "nodular density",
    "nodular densities",
    "calcified density",
    "calcified densities",
    "calcific density",
    "calcific densities",
    "mass",
    "masses",
    "lesion",
    "lesions",
    # "shadowing" is the British opacity, but not of the pleura, breast, hila, heart or
    # soft tissue ("apical pleural shadowing", "breast shadowing over both lower zones",
    # "normal hilar shadowing"; a review): found, of no lesion type
    *(
        f"{w} shadowing"
        for w in ("pleural", "breast", "hilar", "cardiac", "soft tissue", "rib", "acoustic", "vascular", "nipple")
    ),
    "emphysema",
    "emphysematous changes",
    "copd",
    "hyperinflation",
    "hyperexpansion",
    "fibrosis",
    "fibrotic changes",
    "scarring",
    "scar",
    "granuloma",
    "granulomas",
    "calcified granuloma",
    "calcified granulomas",
    "granulomatous disease",
    "fracture",
    "fractures",
    "hernia",
    "hiatal hernia",
    "pleural thickening",
    "adenopathy",
    "lymphadenopathy",
    "bronchiectasis",
    "cavitation",
    "cavity",
    "cavitary lesion",
    "interstitial lung disease",
    "interstitial disease",
    "interstitial markings",
    "pulmonary hypertension",
    "tortuosity",
    "calcification",
    "calcifications",
    "degenerative changes",
    "scoliosis",
    "kyphosis",
    "osteopenia",
    "effusion-related",
    "bullae",
    "bulla",
    "blebs",
    "tuberculosis",
    "metastases",
    "metastatic disease",
    "aspiration",
    "hemorrhage",
    "eventration",
    # Longer than the pneumonia synonym "infection", so the sequela of old disease wins.
    "granulomatous infection",
    "old infection",
    "prior infection",
    "chronic infection",
    # not the pneumonia synonym "infective" (a review): an airways flare of COPD or
    # asthma, a heart valve's infection, a denial in the word, old disease
    "infective exacerbation",
    "infective exacerbations",
    "infective endocarditis",
    "non-infective",
    "noninfective",
    "old infective",
    "prior infective",
    "previous infective",
    # Not a pleural effusion.
    "pericardial effusion",
    "pericardial effusions",
    "joint effusion",
    "joint effusions",
    "tuberculous infection",
    "tuberculosis infection",
    # infections outside the lung parenchyma (clinical notes: "positive HIV infection")
    "hiv infection",
    "urinary tract infection",
    "upper airway infection",
    "upper respiratory infection",
    "upper respiratory tract infection",
    "wound infection",
    "soft tissue infection",
    "line infection",
    "infection isolation",
    "tuberculous pneumonia",
    "tuberculosis pneumonia",
    # Not edema on the image (cxrils.vocab): found, but of no lesion type.
    "vascular congestion",
    "pulmonary congestion",
    "pulmonary vascular congestion",
    "fluid overload",
    "volume overload",
    "congestive heart failure",
    "chf",
    "heart failure",
    "volume loss",  # not atelectasis (cxrils.vocab)
)

#: Non-specific findings that a report may say "represent" a disease (paper
#: section 3.1: "opacity reflects pneumonia" -> predicted lesion type pneumonia).
NONSPECIFIC_TYPES: Final[frozenset[str]] = frozenset({"opacity", "consolidation"})

#: Broad categories (paper Appendix A.2, step 1) where a "density" can be a lung
#: lesion. A density located only in others (rib, sternum, heart, spine, breast,
#: vessels, abdomen...) is of no lesion type. "Hilar" maps to mediastinum but a hilar
#: density is read as a lung finding (:data:`HILAR_WORDS`). An "opacity" keeps its type
#: wherever it is: "opacity projecting over the 9th rib" is usually in the lung.
LUNG_FINDING_CATEGORIES: Final[frozenset[str]] = frozenset({"lung", "pleura", "lateral view location"})
DENSITY_ENTITIES: Final[frozenset[str]] = frozenset({"density", "densities"})
#: Adjectives of the lexicon that name a finding alone ("hazy right base") but only
#: qualify a finding right after them ("hazy opacities", "consolidative opacity"): there
#: they are no finding of their own.
MODIFIER_ENTITIES: Final[frozenset[str]] = frozenset({"hazy", "consolidative"})
#: Findings that are no lung opacity: a density the report says is one of these gets no
#: lesion type ("retrocardiac density consistent with a hiatal hernia", "density
#: corresponding to a calcified granuloma"), as a density outside the lung does (paper
#: Appendix A.2 step 1). Lung lesions of no type of ours (nodule, mass, scarring) are not
#: here: "right upper lobe density, likely a mass" stays an opacity.
NON_LESION_DENSITY_FINDINGS: Final[frozenset[str]] = frozenset(
    {
        "hernia",
        "hiatal hernia",
        "granuloma",
        "granulomas",
        "calcified granuloma",
        "calcified granulomas",
        "calcification",
        "calcifications",
        "fracture",
        "fractures",
        "pericardial effusion",
        "pericardial effusions",
        "adenopathy",
        "lymphadenopathy",
        "eventration",
        "tortuosity",
        "degenerative changes",
    }
)
HILAR_WORDS: Final[re.Pattern[str]] = re.compile(r"\b(?:hilar|hila|hilum|perihilar)\b", re.IGNORECASE)

# Phrasings of cardiomegaly that fixed phrases cannot cover ("heart size is mildly
# enlarged", "the cardiac silhouette remains enlarged"): spaCy token patterns.
_HEART = [
    # "the cardiothoracic ratio is increased", "CTR is increased" (a trial: no cardiomegaly)
    {"LOWER": {"IN": ["heart", "cardiac", "cardiomediastinal", "cardiothoracic", "ctr"]}},
    {"LOWER": {"IN": ["size", "silhouette", "shadow", "contour", "contours", "ratio"]}, "OP": "*"},
]
_COPULA = {
    "LOWER": {
        "IN": [
            "is",
            "are",
            "remains",
            "remain",
            "appears",
            "appear",
            "again",
            "still",
            "persistently",
            "stably",
            "demonstrates",
            "appearing",
            DEID_TOKEN,
            # a template's "Heart: Enlarged", "Cardiac silhouette: mildly enlarged" (reader trial 2)
            ":",
            # "the heart is not enlarged": matched whole, then negated (NEGATION_IN_PATTERN)
            "not",
            "no",
            "longer",
            # "the heart may be mildly enlarged": matched whole, then hedged (HEDGE_IN_PATTERN)
            "may",
            "might",
            "could",
            "be",
            "likely",
            "probably",
            "possibly",
        ]
    },
    "OP": "*",
}
_DEGREE = {
    "LOWER": {
        "IN": [
            "mildly",
            "moderately",
            "markedly",
            "severely",
            "slightly",
            "minimally",
            "massively",
            "borderline",
            "top-normal",
            "at",
            "upper",
            "limits",
            "of",
            "normal",
            "to",
            "mild",
            "moderate",
            "marked",
            "severe",
            "-",
            "globally",
            "stably",
            "significantly",
            "grossly",
            "now",
        ]
    },
    "OP": "*",
}
#: Words that negate a finding matched by a token pattern that contains them ("the
#: heart is not enlarged"): a cue inside a finding's own words cannot modify it in
#: ConText, so the structurer reads these itself.
NEGATION_IN_PATTERN: Final[frozenset[str]] = frozenset({"not", "no"})
#: Words that hedge a finding matched by a token pattern that contains them ("the heart
#: may be mildly enlarged", "the heart is likely enlarged"), read as NEGATION_IN_PATTERN is.
HEDGE_IN_PATTERN: Final[frozenset[str]] = frozenset({"may", "might", "could", "likely", "probably", "possibly"})
CARDIOMEGALY_PATTERNS: Final[tuple[list[dict], ...]] = (
    # "borderline" heart size is indexed as Cardiomegaly/borderline by NLM (MeSH).
    _HEART + [_COPULA, _DEGREE, {"LOWER": {"IN": ["enlarged", "increased", "prominent", "large", "borderline"]}}],
    [
        {"LOWER": "borderline"},
        {"LOWER": {"IN": ["heart", "cardiac"]}},
        {"LOWER": {"IN": ["size", "silhouette", "enlargement"]}},
    ],
    [{"LOWER": {"IN": ["heart", "cardiac"]}}, {"LOWER": "enlargement"}],
    [
        {"LOWER": {"IN": ["enlarged", "enlarging", "large", "increased", "prominent"]}},
        {"LOWER": {"IN": ["heart", "cardiac", "cardiomediastinal"]}},
        {"LOWER": {"IN": ["size", "silhouette", "shadow", "contour"]}, "OP": "?"},
    ],
    [{"LOWER": "increased"}, {"LOWER": {"IN": ["cardiothoracic", "ctr"]}}, {"LOWER": "ratio", "OP": "?"}],
    [
        {"LOWER": {"IN": ["enlargement", "enlargment"]}},
        {"LOWER": "of"},
        {"LOWER": "the", "OP": "?"},
        {"LOWER": {"IN": ["heart", "cardiac"]}},
        {"LOWER": {"IN": ["silhouette", "shadow"]}, "OP": "?"},
    ],
)


# Pulmonary vascular congestion phrasings ("prominence of the pulmonary vasculature",
# "pulmonary vascularity is mildly prominent"): found as "vascular congestion", of no
# lesion type (congestion is not edema on the image; see OTHER_FINDINGS).
_VESSELS = {"LOWER": {"IN": ["vascularity", "vasculature", "vessels", "vascular"]}}
_PROMINENT = {
    "LOWER": {
        "IN": [
            "prominent",
            "prominence",
            "engorged",
            "engorgement",
            "congested",
            "congestion",
            "indistinct",
            "indistinctness",
            "increased",
            "redistribution",
            "cephalization",
            "plethora",
            "plethoric",
            "enlarged",
        ]
    }
}
CONGESTION_PATTERNS: Final[tuple[list[dict], ...]] = (
    [
        _PROMINENT,
        {"LOWER": {"IN": ["of", "the", "central", "pulmonary", "hilar", "interstitial"]}, "OP": "*"},
        _VESSELS,
    ],
    [_VESSELS, {"LOWER": {"IN": ["markings"]}, "OP": "?"}, _COPULA, _DEGREE, _PROMINENT],
    [{"LOWER": {"IN": ["cephalization", "cephalisation"]}}],
    [{"LOWER": "pulmonary"}, {"LOWER": "venous"}, {"LOWER": {"IN": ["hypertension", "congestion"]}}],
)


#: Verb forms that name a lesion type in reports only ("the right lower lobe is
#: consolidated", "the left lower lobe is collapsed", "the left base is opacified").
REPORT_VERB_FORMS: Final[dict[str, str]] = {
    "consolidated": "consolidation",
    "collapsed": "atelectasis",
    "opacified": "opacity",
}


#: Abbreviations that name a lesion type in reports only ("right lower lobe opacity
#: consistent with PNA"); the finding is named by its type, as a verb form's is.
REPORT_ABBREVIATIONS: Final[dict[str, str]] = {"pna": "pneumonia"}


def lesion_terms() -> dict[str, str | None]:
    """Every fixed finding phrase (lower case) -> lesion type or None.

    Built from :data:`cxrils.vocab.LESION_SYNONYMS` plus :data:`OTHER_FINDINGS`,
    :data:`REPORT_VERB_FORMS` and :data:`REPORT_ABBREVIATIONS`. A phrase listed for two
    types keeps the first type in :data:`cxrils.vocab.LESION_TYPES` order.
    """
    out: dict[str, str | None] = {p: None for p in OTHER_FINDINGS}
    out.update(REPORT_VERB_FORMS)
    out.update(REPORT_ABBREVIATIONS)
    for t in reversed(LESION_TYPES):
        for phrase in LESION_SYNONYMS[t]:
            out[phrase.lower()] = t
    return out


@lru_cache(maxsize=1)
def _lesion_phrase_patterns() -> tuple[tuple[re.Pattern, int, str | None], ...]:
    """The phrases of :func:`lesion_terms` as whole-word patterns (compiled once), with
    length and type."""
    return tuple((re.compile(rf"(?<!\w){re.escape(p)}(?!\w)"), len(p), t) for p, t in lesion_terms().items())


def entity_lesion_type(entity: str) -> str | None:
    """The lesion type an entity names: the type of the longest :func:`lesion_terms`
    phrase it contains ("tuberculous pneumonia" is no type, as for the rules
    structurer); None when that phrase is of no type or none is contained."""
    e = " ".join(entity.lower().split())
    best: tuple[int, str | None] = (0, None)
    for pattern, n, t in _lesion_phrase_patterns():
        if n > best[0] and pattern.search(e):
            best = (n, t)
    return best[1]


def lesion_types_in(text: str) -> set[str]:
    """Every lesion type a text names (any case): the types of the :func:`lesion_terms`
    phrases in it, the longest phrase winning where two overlap. ``"atelectasis or
    pneumonia"`` -> ``{"atelectasis", "pneumonia"}``; ``"pericardial effusion"`` and
    ``"tuberculosis"`` -> ``set()``. Negation in ``text`` is not read."""
    e = " ".join(text.lower().split())
    found = sorted(
        ((m.start(), m.end(), n, t) for pattern, n, t in _lesion_phrase_patterns() for m in pattern.finditer(e)),
        key=lambda x: -x[2],
    )
    taken: list[tuple[int, int]] = []
    types: set[str] = set()
    for a, b, _, t in found:
        if any(a < y and x < b for x, y in taken):
            continue
        taken.append((a, b))
        if t is not None:
            types.add(t)
    return types


#: Wordings that state a finding although they contain the hedge "suggestive of": the
#: paper's own definitive wording, whose lesion-inference answer for a definitive finding
#: is "It is highly suggestive of [Lesion]." (section 3.2, Table 2). PSEUDO cues below, and
#: no hedge in an inference link (``cxrils.report.rules``); plain "suggestive of" stays one.
DEFINITE_SUGGESTIVE: Final[tuple[str, ...]] = (
    "highly suggestive of",
    "most suggestive of",
    "strongly suggestive of",
    "very suggestive of",
)

#: Cues that deny "other" or "further" things: PSEUDO, unless a finding follows them right
#: away (:func:`cxrils.report.rules._denied_others`).
DENIED_OTHERS: Final[tuple[str, ...]] = ("no other", "no further", "no additional", "without other", "without further")

#: Words of a change over time, which "no further", "no other" and "lack of" deny without
#: denying the finding they name after "of" or "in": "no further worsening of the
#: effusion" (PSEUDO cues below).
CHANGE_WORDS: Final[tuple[str, ...]] = (
    "change",
    "changes",
    "interval change",
    "worsening",
    "interval worsening",
    "increase",
    "interval increase",
    "progression",
    "interval progression",
    "enlargement",
    "growth",
    "decrease",
    "improvement",
    "interval improvement",
    "resolution",
    "interval resolution",
    "clearing",
)

#: "X, if any" / "X, if present": a hedge of the finding before, or a question of the one
#: after ("minimal, if any, pulmonary edema"), ``rules._either_way``.
IF_ANY: Final[tuple[str, ...]] = ("if any", "if present")
#: "more likely than not": a hedge of the finding after ("the opacity is more likely than
#: not pneumonia"), or of the one before where nothing follows ("pneumonia is more likely
#: than not."), ``rules._either_way``.
MORE_LIKELY_THAN_NOT: Final[tuple[str, ...]] = tuple(f"{v}more likely than not" for v in ("", "is ", "are "))
#: "This is likely X", "which is most likely due to X and Y": a forward hedge to the next
#: comma, ``rules._either_way``.
REFERRING_LIKELY: Final[tuple[str, ...]] = tuple(
    f"{p} {v} {a}"
    for p in ("this", "it", "which", "that")
    for v in ("is", "is most", "is more")
    for a in ("likely", "probably", "possibly")
)
#: The clinical question asked of the film, not a finding (HYPOTHETICAL; it reaches the
#: finding, or the list of findings, it names only, ``rules._clinical_question``):
#: "clinical concern for pneumonia".
CLINICAL_QUESTION: Final[tuple[str, ...]] = (
    "clinical concern for",
    "clinical suspicion for",
    "clinical suspicion of",
    "clinical question of",
)
#: A reading denied, the finding before it stated: "left basilar opacity, not favored to
#: represent pneumonia" (a forward negation of the first finding after it, or the list
#: of findings joined to it, ``rules._first_finding_scope``; the backward "not favored"
#: would deny the opacity).
NOT_FAVORED_TO: Final[tuple[str, ...]] = tuple(
    f"{v}not favored to {w}" for v in ("", "is ", "are ") for w in ("represent", "be", "reflect", "indicate")
)
#: A finding new since the last film (PSEUDO: "right basilar atelectasis, not seen before,
#: has developed"); before "or"/"nor"/"and" ("effusion is not seen previously or
#: currently") the phrase is a negation again (``rules._seen_now``).
NOT_SEEN_BEFORE: Final[tuple[str, ...]] = tuple(
    f"not {when}{verb}{after}"
    for verb in ("seen", "present", "noted", "visible", "identified")
    for when, after in (
        ("", " before"),
        ("", " previously"),
        ("previously ", ""),
        ("", " on the prior"),
        ("", " on prior"),
        ("", " on the previous"),
    )
)

#: A finding one view of the exam does not show (PSEUDO: "the retrocardiac opacity is not
#: visible on the lateral view": the other view shows it); a negation again where other
#: views are listed with it, "either" follows, or the view is the single AP film
#: ("pneumothorax is not seen on the frontal view or the lateral view", "not seen on the
#: AP radiograph"; ``rules._one_view``).
#: The views a report names: "not seen on the lateral view".
REPORT_VIEWS: Final[tuple[str, ...]] = ("frontal", "pa", "ap", "lateral", "oblique")
NOT_ON_ONE_VIEW: Final[tuple[str, ...]] = tuple(
    f"not {verb} on {the}{view}"
    for verb in ("seen", "visible", "apparent", "evident", "identified", "appreciated")
    for the in ("the ", "")
    for view in REPORT_VIEWS
)

#: Terminators of a change of its own after a denied finding ("resolution of the right
#: effusion and new small left effusion"); they end a denial only (``rules._change_after_and``).
AND_CHANGE: Final[tuple[str, ...]] = tuple(
    f"and {w}" for w in ("new", "increased", "increasing", "worsening", "worsened", "enlarging")
)

#: Terminators that open a clause with its own subject, where a verb of its own follows
#: ("without evidence of edema, the bibasilar opacities likely represent atelectasis"; "no
#: consolidation, and the left effusion has increased"); elsewhere they continue a list
#: or an aside and end nothing (``rules._new_clause``).
CLAUSE_OPENERS: Final[tuple[str, ...]] = (", the", ", and the")
#: Terminators that end a clause: they end a cue's scope even where ``max_scope`` cut it
#: (:mod:`cxrils.report.context`, a deliberate difference from medspaCy 1.3.1).
CLAUSE_BOUNDARIES: Final[frozenset[str]] = frozenset(
    {";", "but", "however", "although", "though", "while", "whereas", "yet", *CLAUSE_OPENERS}
)

_READING_VERBS = ("be", "represent", "reflect", "indicate", "relate to", "be due to")
#: Two-way cues of a reading against a finding: after it ("X is unlikely to be present")
#: or before it ("opacity, unlikely to be pneumonia"); ``rules._one_way`` turns each one
#: way (forward when a finding follows it).
UNLIKELY_TO: Final[frozenset[str]] = frozenset(
    f"{lean} to {verb}" for lean in ("unlikely", "not likely") for verb in _READING_VERBS
)
LESS_LIKELY_TO: Final[frozenset[str]] = frozenset(f"less likely to {verb}" for verb in _READING_VERBS)

_RAW_CONTEXT_RULES: tuple[tuple[str, str, str, int | None], ...] = (
    # Negation (forward).
    *(
        (w, "NEGATED_EXISTENCE", "FORWARD", None)
        for w in (
            "no",
            # UK and Australian reports: "Nil effusion." (a trial: read as present)
            "nil",
            "not",
            "without",
            "negative for",
            "free of",
            "clear of",
            "absence of",
            "absent",
            "no evidence of",
            "without evidence of",
            # "lack of pleural effusion" ("lack of resolution" is a pseudo-cue below)
            "lack of",
            "no sign of",
            "no signs of",
            "without signs of",
            "no definite",
            "no convincing",
            "no radiographic evidence of",
            "nor",
            "neither",
            "resolution of",
            "interval resolution of",
            "no longer",
            "no new",
            "no acute",
            "there is no",
            "there are no",
            "rather than",
            "clearing of",
            "interval clearing of",
            "interval clearing",
            # the British noun (reader trial 2: "interval clearance of the right basal
            # consolidation" was read as present; partial or impaired clearance is no
            # denial: PSEUDO cues below)
            "clearance of",
            "interval clearance of",
            "no history of",
            "doubt",
            "doubt there is",
            "doubt that there is",
            "doubtful",
            "doubtful for",
            *NOT_FAVORED_TO,
        )
    ),
    # A finding of little weight is still there: "nodular opacity of doubtful clinical
    # significance".
    *((f"{o}doubtful {c}significance", "PSEUDO", "PSEUDO", None) for o in ("", "of ") for c in ("", "clinical ")),
    # "Resolution of the previously seen effusion": "seen", "noted" and "present" end a
    # scope (terminators below), so the cue takes the adjective in: the scope starts after it
    # (a PSEUDO "previously seen" would instead let "no effusion, previously seen opacity
    # persists" negate the opacity).
    *(
        (f"{cue} {the}previously {verb}", "NEGATED_EXISTENCE", "FORWARD", None)
        for cue in (
            "resolution of",
            "interval resolution of",
            "clearing of",
            "interval clearing of",
            "clearance of",
            "interval clearance of",
        )
        for the in ("", "the ")
        for verb in ("seen", "noted", "present")
    ),
    # "Partial resolution of the previously seen pneumonia": the finding is still there.
    # The negated cues above would take these in (the longest match wins), so each one
    # is a PSEUDO cue of its own, with the same adjectives.
    *(
        (f"{q} {cue}{tail}", "PSEUDO", "PSEUDO", None)
        for q in (
            "partial",
            "incomplete",
            "slow",
            "slight",
            "some",
            "partial interval",
            "incomplete interval",
            # "near complete resolution of the right effusion": some is left (IU CXR465's
            # MeSH terms give a small right effusion)
            "near complete",
            "near - complete",
            "nearly complete",
            "almost complete",
            "some interval",
            "slight interval",
            "minimal interval",
            "early interval",
            # "impaired clearance of secretions", "minimal clearance of the consolidation"
            "minimal",
            "early",
            "ongoing",
            "gradual",
            "little",
            "impaired",
            "delayed",
            "poor",
            "reduced",
            "mucociliary",
            "airway",
        )
        for cue in ("resolution of", "clearing of", "clearance of", "interval clearance of")
        for tail in ("", *(f" {the}previously {verb}" for the in ("", "the ") for verb in ("seen", "noted", "present")))
    ),
    # "Partially resolved right lower lobe pneumonia", "the effusion has nearly resolved":
    # a residual finding, still there (the negated "resolved" below would take them in).
    *(
        (f"{q} {verb}", "PSEUDO", "PSEUDO", None)
        # not "largely" or "mostly": "the pneumonia has largely resolved, with no residual
        # consolidation"
        for q in (
            "partially",
            "incompletely",
            "nearly",
            "almost",
            "almost completely",
            "nearly completely",
            "almost entirely",
            "nearly entirely",
        )
        for verb in ("resolved", "cleared")
    ),
    # "The lungs are clear airspace disease" (a dropped "of"): a place said to be clear, then
    # a finding right after it, so that "the lungs are clear, atelectasis at the left base"
    # stays positive. Only after a copula or "expanded and": "there is clear consolidation"
    # states the consolidation (a PSEUDO cue below).
    *(
        (w + end, "NEGATED_EXISTENCE", "FORWARD", scope)
        for w in (
            "is clear",
            "are clear",
            "appear clear",
            "appears clear",
            "remain clear",
            "remains clear",
            "expanded and clear",
        )
        # "the lungs are clear of airspace disease, pneumothorax, or effusion": the whole list
        for end, scope in (("", 1), (" of", None))
    ),
    # A reading against a finding: the one that follows it ("left basilar opacity, unlikely
    # to be pneumonia", "the findings are unlikely to represent pneumonia"), else the one
    # before it ("pneumonia is unlikely to be present"); rules._one_way picks the way.
    *((w, "NEGATED_EXISTENCE", "BIDIRECTIONAL", 10) for w in UNLIKELY_TO),
    # ... and its hedged form, read as "less likely" is: "findings are less likely to
    # represent pneumonia", "edema is less likely to be the cause"
    *((w, "POSSIBLE_EXISTENCE", "BIDIRECTIONAL", 8) for w in LESS_LIKELY_TO),
    # Negation and resolution (backward: "pneumothorax has resolved").
    *(
        (w, "NEGATED_EXISTENCE", "BACKWARD", 10)
        for w in (
            "not seen",
            "not identified",
            "not visualized",
            "not appreciated",
            "not present",
            "not demonstrated",
            "not evident",
            "not visible",
            "not apparent",
            "not noted",
            "not detected",
            "is absent",
            "are absent",
            "has resolved",
            "has been resolved",
            "has cleared",
            "has largely cleared",
            "has mostly cleared",
            # backward cues (not the two-way "resolved"), so that "the opacity seen on the
            # prior study has largely resolved" reaches back past "seen on the prior" (rules._seen_before)
            "has largely resolved",
            "has mostly resolved",
            "cleared",
            "no longer seen",
            "no longer visible",
            "no longer present",
            "no longer identified",
            "no longer visualized",
            "no longer appreciated",
            "no longer demonstrated",
            "no longer evident",
            "no longer apparent",
            "is unlikely",
            "are unlikely",
            "unlikely",
            # a reading leaning against the finding, as "unlikely" does: "pneumonia is not favored"
            "is not favored",
            "are not favored",
            "not favored",
            "is doubtful",
            "are doubtful",
            # it has not come back: "the effusion has not reaccumulated"
            "has not recurred",
            "have not recurred",
            "has not reaccumulated",
            "have not reaccumulated",
            "is not likely",
            "is gone",
            "are gone",
            "ruled out",
            "has disappeared",
            "not recognizable",
            "not recognisable",
            # "pulmonary vascular engorgement appears within limits of normal"
            "within normal limits",
            "within limits of normal",
            "within the limits of normal",
        )
    ),
    # A "label: value" line of a templated report: "Effusion: none.", "Pleural effusion:
    # absent", "Pneumothorax - none" (new-user trial: read as present). The nearest finding
    # only, and only where the value ends its sentence or clause: "- no change", "shoulder:
    # negative for fracture", "effusion - none on the left", "- nil change" deny nothing.
    *(
        (f"{sep} {w} {end}", "NEGATED_EXISTENCE", "BACKWARD", 1)
        for sep in (":", "-")
        for w in (
            "none",
            # "Effusion: none seen." (read as present before)
            "none seen",
            "none noted",
            "none identified",
            "none present",
            "none evident",
            "absent",
            "nil",
            "not seen",
            "not present",
            "not identified",
            "negative",
            "no",
        )
        for end in (".", ";")
    ),
    # a label's hedged value: "Effusion: possible, left.", "Consolidation - likely." (the
    # nearest finding only, and only where the value ends its clause)
    *(
        (f"{sep} {w} {end}", "POSSIBLE_EXISTENCE", "BACKWARD", 1)
        for sep in (":", "-")
        for w in ("possible", "probable", "likely", "suspected", "questionable", "equivocal")
        for end in (".", ";", ",")
    ),
    # the same as a template's question and its answer: "Effusion? No."
    *((f"? {w} {end}", "NEGATED_EXISTENCE", "BACKWARD", 1) for w in sorted(ANSWER_DENIALS) for end in (".", ";")),
    # "Pneumonia excluded.", "pneumonia has been excluded" ("cannot be excluded" and "not
    # excluded" are longer cues: hedged); a part of the film left out of it is no denial
    *(
        (w, "NEGATED_EXISTENCE", "BACKWARD", 1)
        for w in ("excluded", "is excluded", "are excluded", "has been excluded", "have been excluded")
    ),
    *(
        (f"{w} from", "PSEUDO", "PSEUDO", None)
        for w in ("excluded", "is excluded", "are excluded", "partially excluded", "been excluded")
    ),
    # Resolution reaches back over a whole list: "consolidation and atelectasis have cleared".
    *(
        (w, "NEGATED_EXISTENCE", "BACKWARD", None)
        for w in (
            "have cleared",
            "have resolved",
            "have been resolved",
            "have largely resolved",
            "have mostly resolved",
            "have completely resolved",
            "has completely resolved",
        )
    ),
    ("resolved", "NEGATED_EXISTENCE", "BIDIRECTIONAL", 4),
    # Hedging (tentative, not negative).
    *(
        (w, "POSSIBLE_EXISTENCE", "FORWARD", None)
        for w in (
            "possible",
            "possibly",
            "probable",
            "probably",
            "likely",
            "may",
            "might",
            "could",
            "may represent",
            "may be",
            "could represent",
            "could be",
            "can not exclude",
            "cannot exclude",
            "can't exclude",
            "cannot rule out",
            "can not rule out",
            "can't rule out",
            "could not exclude",
            "could not rule out",
            "cannot be excluded",
            "not excluded",
            "questionable",
            "question of",
            "suspicious for",
            "concerning for",
            "worrisome for",
            "suggestive of",
            "suggest",
            "suggests",
            "suggesting",
            "presumably",
            "presumed",
            "suspected",
            "suspect",
            "equivocal",
            "difficult to exclude",
            "difficult to rule out",
            "not entirely excluded",
            "differential",
            "impossible to exclude",
            "not definitely",
            "question",
            "suspicion for",
            "suspicion of",
            "may indicate",
            "differential diagnosis",
            "concern for",
            "concern about",  # "... arousing concern about pneumonia" (second new-user trial)
            "concerns about",
            "concern of",
            "raises concern for",
            "raise concern for",
            "concerning",
            "worrisome",
            "suspicious",
            "difficult to completely exclude",
            "in the appropriate clinical setting",
            "in the correct clinical setting",
            "in the proper clinical setting",
            "differential considerations",
            "differential diagnosis includes",
            "consider",
            "considered",
            "cannot be entirely excluded",
            "may reflect",
            "could reflect",
            "perhaps",
            "uncertain",
            "indeterminate",
            "equivocal for",
            "raising the possibility of",
            "not possible to exclude",
            "not possible to rule out",
            "cannot entirely exclude",
            "can not entirely exclude",
            "cannot completely exclude",
            "not unlikely",
            "suggestion of",
            *(
                f"{q} whether{o}{t}"
                for q in ("not clear", "unclear")
                for o in ("", " or not")
                for t in ("", " there is", " there are")
            ),
            # "not" that denies nothing, a hedge: "whether or not there is a left effusion"
            # (a bare "whether or not" is a pseudo-cue: "whether or not the opacity has changed")
            *(f"whether or not{t}" for t in (" there is", " there are")),
            "favored over",
            # "with" ends a scope (below); a hedged "with" opens one: "atelectasis, possibly
            # with a small effusion"
            "possibly with",
            "probably with",
            "likely with",
            "perhaps with",
            # a finding raising the question: "opacity raising clinical concern for pneumonia"
            *(
                f"{v} clinical {n} {p}"
                for v in ("raise", "raises", "raising")
                for n in ("concern", "suspicion")
                for p in ("for", "of")
            ),
        )
    ),
    # "X, less likely Y": the alternative after the comma is the one hedged, not X (the
    # backward "less likely" below is for "Y is less likely").
    (", less likely", "POSSIBLE_EXISTENCE", "FORWARD", 4),
    # "atelectasis is less likely than pneumonia", "pneumonia is more likely than
    # atelectasis": a differential of the two, both tentative, as "A is favored over B"
    # (rules._favored_over hedges what follows "than")
    *(
        (f"{v}{c} likely than", "POSSIBLE_EXISTENCE", "BACKWARD", 8)
        for v in ("", "is ", "are ")
        for c in ("less", "more")
    ),
    # "pleural effusions are small, if any": there may be none. Backward only with a finding
    # shortly before it (rules._either_way); "minimal, if any, pulmonary edema" is the
    # forward "if" of a question.
    *((w, "POSSIBLE_EXISTENCE", "BACKWARD", 8) for w in IF_ANY),
    # "This is likely atelectasis": the referring word before "is likely" is no finding,
    # so the hedge reads forward (the backward "is likely" is for "pneumonia is likely")
    # (to the clause's next comma, rules._either_way: "which is likely small, and ... pneumonia")
    *((w, "POSSIBLE_EXISTENCE", "FORWARD", None) for w in REFERRING_LIKELY),
    # "more likely than not" is "likely", of what follows: "the opacity is more likely than
    # not pneumonia", "the effusion is more likely than not loculated" (the effusion stated)
    *((w, "POSSIBLE_EXISTENCE", "FORWARD", 4) for w in MORE_LIKELY_THAN_NOT),
    # "left lower lobe atelectasis, if not consolidation": the next few words only ("if not
    # already performed, CT is recommended for the nodule" hedges nothing)
    ("if not", "POSSIBLE_EXISTENCE", "FORWARD", 3),
    *(
        (w, "POSSIBLE_EXISTENCE", "BACKWARD", 8)
        for w in (
            "cannot be excluded",
            "can not be excluded",
            "can't be excluded",
            "not excluded",
            "is not excluded",
            "is possible",
            "is suspected",
            "is questioned",
            "not ruled out",
            "cannot be ruled out",
            "can not be ruled out",
            # "pneumonia could not be excluded" (read as stated before)
            "not be excluded",
            "not be ruled out",
            "is likely",
            # "small bilateral effusions are likely present", "a small effusion may be present"
            *(f"{v} {a} present" for v in ("is", "are") for a in ("likely", "probably", "possibly", "questionably")),
            *(f"{m} {also}be present" for m in ("may", "might", "could") for also in ("", "also ", "still ")),
            "is not entirely excluded",
            "cannot be entirely excluded",
            "are possible",
            "not entirely excluded",
            "is difficult to exclude",
            "questionable",
            "suspected",
            "are suspected",
            "is considered",
            "are not excluded",
            "less likely",
            "a consideration",
            "considerations",
            "a possibility",
            "difficult to entirely exclude",
            "difficult to exclude",
            "in the differential",
            "another consideration",
            # "atelectasis is favored over pneumonia", "pneumonia is the favored diagnosis"
            "is favored",
            "are favored",
            "is the favored diagnosis",
            "is not unlikely",
            "are not unlikely",
            # "pneumonia cannot be completely excluded", "pneumonia is also possible"
            "cannot be completely excluded",
            "can not be completely excluded",
            "not completely excluded",
            "is not completely excluded",
            "is also possible",
            "are also possible",
        )
    ),
    # A denial taken back in the same breath is a hedge: "pneumonia is doubtful but cannot
    # be excluded", "an effusion is unlikely but not entirely excluded" (the "but" would end
    # the hedge's scope, leaving the finding to the denial).
    *(
        (f"{lean}{but}{hedge}", "POSSIBLE_EXISTENCE", "BACKWARD", 8)
        for lean in (
            *(f"{v}{w}" for v in ("", "is ", "are ") for w in ("doubtful", "unlikely", "not favored", "not likely")),
            "less likely",
        )
        for but in (" but ", ", but ", " though ", ", though ", " although ", ", although ")
        for hedge in (
            *(
                f"{aux} {v}"
                for aux in ("cannot be", "can not be", "can't be", "not", "is not", "are not")
                for v in ("excluded", "entirely excluded", "completely excluded", "ruled out", "entirely ruled out")
            ),
            # not a bare "possible", which opens the next finding: "effusion is doubtful
            # but possible small pneumothorax"
            "is possible",
        )
    ),
    # A sentence that closes by calling its subject a consideration hedges all of it, however
    # long the subject ("a pneumonia superimposed on chronic scarring would be a
    # consideration"), up to a comma that starts a new finding ("..., edema is also a
    # consideration": the edema only; rules._clause_scope ends the scope there, as it does
    # for the windowed hedges above).
    *(
        (w, "POSSIBLE_EXISTENCE", "BACKWARD", None)
        for w in (
            "would be a consideration",
            "is a consideration",
            "is also a consideration",
            "is another consideration",
            "is in the differential",
            "is a possibility",
            "would be a possibility",
        )
    ),
    # Alternatives ("atelectasis or pneumonia"): tentative. A category of its own, because
    # ConText ends a cue's scope at the next cue of the same category.
    *((w, "ALTERNATIVE", "BIDIRECTIONAL", 4) for w in ("or", "versus", "vs", "and/or", "alternatively")),
    # Hypothetical: the report asks, it does not state.
    *(
        (w, "HYPOTHETICAL", "FORWARD", None)
        for w in (
            # "if there is/are" is one cue: "there is" alone ends a scope (below)
            "if there is",
            "if there are",
            "if there was",
            "if there were",
            "if there has been",
            "evaluate for",
            "evaluation for",
            "assess for",
            "assessment for",  # "assessment for pleural effusion is limited" (reader trial)
            "rule out",
            "r/o",
            "to exclude",
            "to document",
            "document resolution",
            "ensure resolution",
            "confirm resolution",
            # "follow-up to document resolution of the pneumonia": asked, not denied (one cue,
            # so that "to document" and a negated "resolution of" after it do not split it)
            # ("radiographs demonstrate resolution of ..." states it: "to" is needed but
            # for "ensure", which never states)
            *(
                f"{to}{verb} {cue}{tail}"
                for to, verb in (
                    *(("to ", v) for v in ("document", "ensure", "confirm", "verify", "demonstrate", "assess")),
                    *(("to ", v) for v in ("assess for", "evaluate for", "evaluate")),
                    ("", "ensure"),
                    ("", "assess"),  # an imperative: "assess resolution of ... with follow-up"
                    ("", "assess for"),
                    ("", "evaluate for"),
                )
                for cue in ("resolution of", "complete resolution of", "clearing of")
                for tail in (
                    "",
                    *(f" {the}previously {v}" for the in ("", "the ") for v in ("seen", "noted", "present")),
                )
            ),
            "if",
            "in case of",
            "should be considered",
            "follow-up to",
            "followup to",
            "recommend",
            "history of",
            "correlate clinically for",
            "clinical correlation for",
            "correlate clinically",
            "symptoms of",
            "signs and symptoms of",
            # the clinical question, not a finding: "clinical concern for pneumonia; no
            # consolidation" (the findings it names only: rules._clinical_question)
            *CLINICAL_QUESTION,
            # a test asked for, not its result: "he was tested for COVID-19 infection"
            "tested for",
            "testing for",
            "screened for",
            "screening for",
            # an inline header inside the section: "History: pneumonia", "Indication: cough"
            "history :",
            "clinical history :",
            "indication :",
            "indications :",
            "clinical indication :",
            "reason for exam :",
            "reason for examination :",
            "comparison :",
        )
    ),
    # A finding the film cannot show either way: asked, neither stated nor denied ("Bilateral
    # pleural effusions are not well evaluated on this semi-upright study", "Effusion cannot
    # be assessed"; reader trial: read as present)
    # said of the finding that is its subject, right before it (a review: "Large right
    # effusion, underlying parenchyma cannot be evaluated" and "Left basilar opacity, not well
    # evaluated on this portable study" state the finding)
    *(
        (f"{neg} {how}{done}", "HYPOTHETICAL", "BACKWARD", 2)
        for neg in ("is not", "are not", "was not", "were not", "cannot be", "could not be", "can not be")
        for how in ("", "well ", "adequately ", "fully ", "reliably ")
        for done in ("assessed", "evaluated")
    ),
    # ... and of what it is assessed for: "the lung bases are not well evaluated for pneumothorax"
    *(
        (f"{neg} {how}{done} for", "HYPOTHETICAL", "FORWARD", 6)
        for neg in ("is not", "are not", "was not", "were not", "cannot be", "could not be", "can not be", "not")
        for how in ("", "well ", "adequately ", "fully ", "reliably ")
        for done in ("assessed", "evaluated")
    ),
    # "The effusion may be present on the prior study as well": a doubt about the prior
    # study, not about the finding (the backward "may be present" above would hedge it).
    *(
        (f"{m} {also}be present on {the}{prior}", "PSEUDO", "PSEUDO", None)
        for m in ("may", "might", "could")
        for also in ("", "also ")
        for the in ("", "the ")
        for prior in ("prior", "previous", "earlier")
    ),
    # Pseudo-cues: "no interval change in the small effusion" is positive (stable).
    *(
        (w, "PSEUDO", "PSEUDO", None)
        for w in (
            # "with" ends a scope (below), these phrases do not
            "consistent with",
            "compatible with",
            "in keeping with",
            "associated with",
            "correlate with",
            *DEFINITE_SUGGESTIVE,
            "with or without",
            "no interval change",
            "no change",
            "nil change",
            "nil interval change",
            "nil significant change",
            "no significant change",
            "no significant interval change",
            "no substantial change",
            "not changed",
            "not significantly changed",
            "no increase",
            "no decrease",
            "no appreciable change",
            "no definite change",
            "no marked change",
            "no evidence of change",
            "not only",
            "no interval increase",
            "no interval decrease",
            "without change",
            "without interval change",
            "without significant change",
            "without significant interval change",
            "without substantial change",
            "no significant interval change of",
            "no substantial interval change",
            "not worsened",
            "no worsening",
            # "no focal opacity is seen to suggest pneumonia": the denial reaches the reading
            # ("seen" ends a scope below, "suggest" hedges)
            *(f"{v} to {w}" for v in ("seen", "present", "noted") for w in ("suggest", "indicate")),
            # a reason, not a denial: "due to lack of a lateral view, a small effusion cannot be excluded"
            *(f"{why} {the}lack of" for why in ("due to", "given", "because of") for the in ("", "the ")),
            # the finding is there, its reading hedged: "opacities are favored to represent scarring"
            *(f"{v} favored to {w}" for v in ("is", "are") for w in ("represent", "be", "reflect")),
            # the finding has not gone away: "no improvement in the left lower lobe pneumonia"
            *(
                f"{q} {degree}{change}"
                for q in ("no", "without")
                for degree in ("", "significant ", "interval ", "definite ")
                for change in ("improvement", "resolution")
            ),
            "not improved",
            "not resolved",
            "lack of resolution",
            "lack of improvement",
            # new since the last film: "right basilar atelectasis, not seen before, has developed"
            # (a negation again before "or": rules._seen_now)
            *NOT_SEEN_BEFORE,
            # one view does not show it, another does (rules._one_view)
            *NOT_ON_ONE_VIEW,
            "whether or not",
            "gram negative",
            "not unexpected",
            # "no further worsening of the effusion", "lack of resolution of the effusion": a
            # change of the finding after "of"/"in"/"to"/"since" denied, the finding still there ("no other
            # focal consolidation", "no further worsening or new effusion" and "no other
            # changes to suggest pneumonia" are read by the "no" cue)
            *(
                f"{q} {degree}{change} {of}"
                for q in ("no further", "no other", "no additional", "without further", "without other", "lack of")
                for degree in ("", "significant ")
                for change in CHANGE_WORDS
                for of in ("of", "in", "to the", "since")
            ),
            # a denial of something else ("no further follow-up is needed for the nodule", "no
            # other abnormality"); right before a finding, rules._denied_others makes them
            # negations ("no other focal consolidation", "no other infiltrates or masses")
            *DENIED_OTHERS,
            "no longer distended",
            "there is clear",
            "there are clear",
        )
    ),
    # Scope terminators: "no effusion, but right lower lobe consolidation".
    *(
        (w, "TERMINATE", "TERMINATE", None)
        for w in (
            "but",
            "however",
            "although",
            "though",
            "which",
            "aside from",
            "apart from",
            "except",
            "otherwise",
            ";",
            "there is",
            "there are",
            "there has been",
            "while",
            "whereas",
            "yet",
            "nonetheless",
            "still",
            "other than",
            "persistent",
            "persists",
            "unchanged",
            "stable",
            "again",
            "remains",
            "seen",
            "noted",
            "present",
            # "negative for pneumothorax, positive for effusion"; "History: cough FINDINGS: effusion"
            "positive for",
            "findings :",
            "impression :",
            # "no cardiomegaly with bilateral small effusions"
            "with",
            # what limits an evaluation is stated: "assessment for consolidation is limited by
            # the large left pleural effusion" (a review)
            "is limited",
            "are limited",
            "limited by",
            # "resolution of the right effusion, new left consolidation" (not "no new ...",
            # a cue of its own, nor "no evidence of new consolidation": no comma)
            ", new",
            *CLAUSE_OPENERS,
            # "resolution of central consolidation and residual peripheral consolidation"
            # (not "no residual effusion", nor "no residual pneumothorax, residual effusion,
            # or residual consolidation": no "and" before it)
            "and residual",
            # "resolution of the right effusion and new small left effusion", "clearing of
            # the left base opacity and increased right effusion": a change of its own
            # (only after a denial: rules._change_after_and)
            *AND_CHANGE,
        )
    ),
)


def _merge_directions(rules):
    """One rule per (literal, category): a cue listed both forward and backward becomes
    bidirectional (medspaCy keeps only one rule per literal match)."""
    merged: dict[tuple[str, str], list] = {}
    for lit, cat, direction, scope in rules:
        key = (lit, cat)
        if key not in merged:
            merged[key] = [lit, cat, direction, scope]
            continue
        m = merged[key]
        if m[2] != direction:
            m[2] = "BIDIRECTIONAL"
        m[3] = None if (m[3] is None or scope is None) else max(m[3], scope)
    return tuple(tuple(m) for m in merged.values())


def _with_there(rules):
    """The rules, plus "there is/are/has been/have been ..." before each PSEUDO cue that
    starts with "no" (not :data:`DENIED_OTHERS`, which the rules read themselves): the
    longest match wins, so "there is no" (a negation) would otherwise take in the start
    of "there is no change in the effusion" (positive)."""
    lead = ("there is ", "there are ", "there has been ", "there have been ")
    extra = [
        (f"{t}{lit}", cat, direction, scope)
        for lit, cat, direction, scope in rules
        if cat == "PSEUDO" and lit.startswith("no ") and lit not in DENIED_OTHERS  # read by rules._denied_others
        for t in lead
    ]
    return tuple(rules) + tuple(extra)


#: ConText cue rules as (literal, category, direction, max_scope). Categories:
#: NEGATED_EXISTENCE (absent or resolved), POSSIBLE_EXISTENCE and ALTERNATIVE
#: (tentative), HYPOTHETICAL (asked, not asserted: a tentative negative), PSEUDO (looks like a cue, is
#: not), TERMINATE (ends a cue's scope).
CONTEXT_RULES: Final[tuple[tuple[str, str, str, int | None], ...]] = _merge_directions(_with_there(_RAW_CONTEXT_RULES))

# --------------------------------------------------------------------------- locations
#: Words that can make up a location phrase in report text. A run of these words is
#: one raw location ("right lower lobe", "left lung base"); "hilar adenopathy" gives
#: the location "hilar". Connectors may join words inside a run.
#: Words that alone do not make a location (they only qualify one).
LOCATION_QUALIFIERS: Final[frozenset[str]] = frozenset(
    {
        "posterior",
        "anterior",
        "lateral",
        "medial",
        "superior",
        "inferior",
        "segment",
        "segments",
        "subsegmental",
        "central",
        "peripheral",
        "periphery",
        "aspect",
        "portion",
        "region",
        "regions",
        "field",
        "fields",
        "zone",
        "zones",
        "lobe",
        "lobes",
        "angle",
        "angles",
        "lobar",
        "parenchyma",
        "parenchymal",
        "upper",
        "lower",
        "middle",
        "mid",
        "lung",
        "thoracic",
    }
)

LOCATION_WORDS: Final[tuple[str, ...]] = (
    # the qualifiers join a run of location words too ("left lower lobe")
    *sorted(LOCATION_QUALIFIERS),
    # the fissures by name: "fluid in the minor fissure" (cxrils.report.locations: the
    # minor, horizontal fissure is the right lung's)
    "minor fissure",
    "horizontal fissure",
    "major fissure",
    "oblique fissure",
    "right",
    "left",
    "right-sided",
    "left-sided",
    "bilateral",
    "bilaterally",
    "both",
    "bibasilar",
    "bibasal",
    "bibasally",
    "bibasilarly",
    "biapical",
    "biapically",
    "lungs",
    "base",
    "bases",
    "basilar",
    "basal",
    "basally",
    "basilarly",
    "apex",
    "apices",
    "apical",
    "apically",
    "perihilar",
    "hilar",
    "hila",
    "hilum",
    "infrahilar",
    "suprahilar",
    "retrocardiac",
    "lingula",
    "lingular",
    "midlung",
    "midlungs",
    "midzone",
    "midzones",
    "mid-lung",
    "hemithorax",
    "hemithoraces",
    "costophrenic",
    "sulcus",
    "sulci",
    "retrosternal",
    "subpleural",
    "mediastinal",
    "mediastinum",
    "paratracheal",
    "spine",
    "vertebral",
    "vertebra",
    "vertebrae",
    "rib",
    "ribs",
    "clavicle",
    "clavicles",
    "scapula",
    "sternum",
    "sternal",
    "hemidiaphragm",
    "hemidiaphragms",
    "diaphragm",
    "diaphragmatic",
    "paraspinal",
    "axilla",
    "axillary",
    "fissure",
    "fissural",
    "pleural space",
    "pleural spaces",
    "cervical",
    "lumbar",
    "abdomen",
    "abdominal",
    "breast",
    "trachea",
    "tracheal",
    "aorta",
    "aortic",
    "apicolateral",
    "lingular segment",
    "retrocardiac region",
    "pericardial",
    "subcarinal",
    "substernal",
    "glenoid",
    "heart",
    "heart border",
    "breasts",
    "humeral",
    "bibasilar lung",
    "midlung zone",
    "midlung zones",
    "hemidiaphragmatic",
    "infraclavicular",
    "supraclavicular",
)
_CONNECTORS = (
    "and",
    "of the",
    "the",
    "of",
    "to",
    "and/or",
    "or",
    "through",
    # "right greater than left": one phrase naming both sides
    "greater than",
    "more than",
    "worse than",
    "larger than",
    "slightly greater than",
    "much greater than",
    "more so than",
    "as well as",
)
# A run of qualifiers that still names a place: "the lower lobes", "upper lung zones".
_ZONE_RUN = re.compile(r"^(?:upper|lower|middle|mid)\b.*\b(?:lobes?|zones?|lungs?|fields?)$")
_ORDINAL = (
    r"(?:\d+(?:st|nd|rd|th)|t\d{1,2}|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
    r"twelfth)"
)


def _word_alt(words) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))


_LOC = rf"(?:{_word_alt(LOCATION_WORDS)})"
_LINK = rf"(?:\s*[-/]\s*|\s+(?:(?:{_word_alt(_CONNECTORS)}|{_ORDINAL})\s+)*)"
#: A location run in text: location words joined by spaces, hyphens, slashes or
#: connectors (also rib numbers: "left 5th rib").
LOCATION_RE: Final[re.Pattern[str]] = re.compile(
    rf"(?<![\w-]){_LOC}(?:{_LINK}{_LOC})*(?![\w-])",
    re.IGNORECASE,
)
_NOT_WORDS = frozenset(w for c in _CONNECTORS for w in c.split())
_BOTH_SIDES = re.compile(r"\s+sides?\b|\s*(?:[.;:]|$)", re.IGNORECASE)
#: Place words naming both sides (a regex alternation): "bilateral", "both", "bibasilar",
#: "bases", "lungs", "apices".
BOTH_SIDES_WORDS: Final[str] = r"bilateral\w*|both|bi(?:basilar|basal|apical)\w*|lungs|bases|apices"
# A comparison of the sides before a bare side: "worse on the", "more pronounced on the".
_WORSE_ON = re.compile(
    r"\b(?:worse|greater|larger|more(?:\s+(?:so|pronounced|prominent|marked|extensive))?)\s+(?:on|in)\s+the\s+$",
    re.IGNORECASE,
)
_THAN_AFTER = re.compile(r"\s*(?:side\s+)?than\b", re.IGNORECASE)
# "... than (on) the left": the other side alone, no place word after it.
_THAN_OTHER = re.compile(
    r"\s*(?:side\s+)?than\s+(?:on\s+|in\s+)?(?:the\s+)?(?:right|left)(?:\s+side)?(?=\s*(?:[.,;:]|$))", re.IGNORECASE
)
# A change over time in the sentence of "worse on the right": "today", "since", "compared
# with the prior study", "interval worsening", "now" (_sides_compared).
_OVER_TIME = re.compile(
    r"\b(?:today\w*|now|tonight|since|compared|comparison|prior|previous|earlier|yesterday|interval|current\w*"
    r"|increas\w*|decreas\w*|worsen\w*|improv\w*)\b",
    re.IGNORECASE,
)
# Before "worse on the right": a place or finding in both lungs, or a process spread over
# them ("bibasilar atelectasis", "pleural effusions", "pulmonary edema", "multifocal
# opacities").
_BOTH_BEFORE = re.compile(
    rf"\b(?:{BOTH_SIDES_WORDS}|edema|diffuse\w*|multifocal|widespread|scattered"
    r"|effusions|opacities|infiltrates|consolidations|densities|nodules|atelectases)\b",
    re.IGNORECASE,
)
# A finding that is usually one, on one side ("the pneumothorax is larger on the right",
# "pleural effusion, larger on the right").
_ONE_SIDED = re.compile(
    r"\b(?:pneumothorax|effusion|opacity|opacification|consolidation|infiltrate|density|nodule|mass|collapse)\b",
    re.IGNORECASE,
)


def _sides_compared(text: str, start: int, end: int) -> bool:
    """Whether the bare side at ``text[start:end]``, after "worse on the", compares the
    sides of a finding in both lungs rather than naming its place: not in a sentence that
    speaks of a change over time ("compared to the prior study, the effusion is worse on
    the right"); yes after a place, finding or process in both lungs ("bibasilar
    atelectasis", "effusions", "pulmonary edema, worse on the right"); not after a finding
    that is usually one, on one side ("the pneumothorax is larger on the right"); else yes
    (atelectasis and the like: a negative in the other lung would be the worse error)."""
    head = re.split(r"[.;]", text[:start])[-1]
    tail = re.split(r"[.;]", text[end:])[0]
    if _OVER_TIME.search(head) or _OVER_TIME.search(tail):
        return False
    if _BOTH_BEFORE.search(head):
        return True
    return not _ONE_SIDED.search(head)


_NOT_A_SIDE = re.compile(r"\s+(?:clinical|setting|context|scenario|circumstances?)\b", re.IGNORECASE)


def find_locations(text: str) -> list[tuple[int, int, str]]:
    """Location phrases in ``text`` as ``(start, end, phrase)`` character spans.

    A run of location words that holds only qualifiers ("lower", "segment") is not
    a location, unless it names a zone or lobe ("the lower lobes"); nor is "both" alone
    ("both on PA and lateral views"), unless "sides" or the sentence's end follows ("on
    both sides", "effusions are seen on both."). Trailing
    connectors are never part of a phrase.
    """
    out: list[tuple[int, int, str]] = []
    skip_to = 0  # the end of a side comparison taken in whole ("worse on the left than the right")
    for m in LOCATION_RE.finditer(text):
        if m.start() < skip_to:
            continue
        phrase = " ".join(m.group(0).split())
        words = [w for w in re.findall(r"[a-z][a-z/-]*", phrase.lower()) if w not in _NOT_WORDS]
        if all(w in LOCATION_QUALIFIERS for w in words) and not _ZONE_RUN.match(" ".join(words)):
            continue
        if words == ["both"] and not _BOTH_SIDES.match(text, m.end()):
            continue  # "seen both on PA and lateral views": no place named ("on both sides" is one)
        if words == ["right"] and _NOT_A_SIDE.match(text, m.end()):
            continue  # "in the right clinical setting": the right one, not the right side
        than = _THAN_OTHER.match(text, m.end())
        if (
            words in (["right"], ["left"])
            and _WORSE_ON.search(text, 0, m.start())
            and (than is not None or not _THAN_AFTER.match(text, m.end()))
            and _sides_compared(text, m.start(), m.end())
        ):
            # "bibasilar atelectasis, worse on the left (than the right)", "pulmonary edema,
            # worse on the right": how the sides compare, not a place (_sides_compared; nor
            # "worse on the right than the left lung", which names its places itself)
            other = "left" if words == ["right"] else "right"
            skip_to = than.end() if than else m.end()
            out.append((m.start(), skip_to, f"{words[0]} greater than {other}"))
            continue
        if (
            out
            and COMPARED_SIDES_RE.match(phrase)
            and re.fullmatch(r"\s*,\s*", text[out[-1][1] : m.start()])
            and _opens_clause(text, out[-1][0])
            and len(set(re.findall(r"\b(?:right|left)\b", out[-1][2].lower()))) != 1
        ):
            # "Bibasilar, right greater than left atelectasis": one place opening the clause,
            # then its sides compared (not "Opacity at the left base, right greater than left
            # effusions", where the first place is the opacity's)
            start, _, before = out.pop()
            out.append((start, m.end(), f"{before} {phrase}"))
            continue
        out.append((m.start(), m.end(), phrase))
    return out


def _opens_clause(text: str, start: int) -> bool:
    """Whether no finding is named before ``start`` in its clause ("There is bibasilar, ..."
    opens it; "Opacity at the left base, ..." does not: that place is the opacity's)."""
    before = " " + " ".join(re.findall(r"[a-z]+", re.split(r"[.;:]", text[:start])[-1].lower())) + " "
    return not any(f" {term} " in before for term in _finding_words())


@lru_cache(maxsize=1)
def _finding_words() -> tuple[str, ...]:
    """Every finding term of the lexicon (lesion terms and other findings), lower case."""
    return tuple({*(" ".join(re.findall(r"[a-z]+", t.lower())) for t in (*lesion_terms(), *OTHER_FINDINGS))} - {""})


#: A location phrase that only compares the sides ("right greater than left", "left
#: slightly worse than right", "right larger than left").
COMPARED_SIDES_RE = re.compile(
    r"(?i)^(?:right|left)(?: [a-z]+)? (?:(?:slightly|much|somewhat) )?(?:greater|more|worse|larger)(?: so)? than "
    r"(?:right|left)$"
)


#: A line break (or several, blank lines and CRLF included) after a letter, digit, ")" or
#: "%" before a capitalised word ("Large"), an abbreviation before a lower-case word ("CT
#: shows", "RLL consolidation"; not "PNA." alone), two words in capitals ("MODERATE RIGHT",
#: judged by :func:`statement_breaks`), a label in capitals ("LUNGS:", "PNEUMOTHORAX - "),
#: or a bullet before any word: where a line may end a statement written without a full
#: stop (:func:`statement_breaks`).
BARE_LINE_END = re.compile(
    r"(?<=[A-Za-z0-9)%])(?:[ \t]*\r?\n)+"
    r"(?=[ \t]*(?:[-*\u2022][ \t]+[a-z]|(?:[-*\u2022][ \t]+)?[A-Z](?:[a-z]|[A-Z]+[ \t]+[a-z]|[A-Z]*[ \t]+[A-Z]{2,}|[A-Z]+[ \t]*:|[A-Z]+[ \t]+-[ \t])))"
)
#: Words that leave a line's statement open (ours): "... perihilar haziness and\nKerley B
#: lines", "small left\nPleural effusion", "to suggest\nPneumocystis pneumonia".
_JOINING_WORDS = frozenset(
    """
    and or nor of the a an with without to in at on for by from than is are was were be been
    being has have had no not but which that as versus vs left right both bilateral mild
    mildly moderate moderately severe small large new likely possible possibly probable
    probably minimal trace slight slightly any some there its their this these those
    upper lower mid middle definite definitely obvious overt focal acute significant
    suggest suggests suggesting suggestive exclude excludes excluding represent represents
    representing reflect reflects reflecting include includes including indicate indicates
    concerning compatible consistent evidence favor favors favoring may might could would
    should can cannot will into onto over under within along across between behind below
    above near such especially particularly like per via
    """.split()
)
# Words that open a line going on with the sentence before it ("NO PLEURAL EFFUSION\nOR
# PNEUMOTHORAX", a report written in capitals; a review).
_CONTINUING_WORDS = frozenset(
    "and or nor of to with without than is are was were but which that as versus vs in at on for by from".split()
)
# A reading of the line before, opening the next in a report in capitals ("NO FOCAL
# CONSOLIDATION\nSUSPICIOUS FOR PNEUMONIA": a review); not the same word as an adjective
# ("NO EFFUSION\nSUSPICIOUS NODULE"), nor in mixed case, where a capitalised line opens a
# statement of its own ("No pneumothorax\nConcerning for pneumonia ...": a review).
_CONTINUING_READING = re.compile(
    r"[ \t\r\n]*(?:[-*\u2022][ \t]+)?(?:SUSPICIOUS|CONCERNING|WORRISOME|SUGGESTIVE|COMPATIBLE|CONSISTENT)"
    r"[ \t]+(?:FOR|OF|WITH)\b"
)
# A sentence end inside a statement's text: where the statement before a break starts.
_SENTENCE_END = re.compile(r"[.!?;:](?=\s)")
# A bullet or a dash between spaces: where a statement's words start ("- Consolidation\n- No
# effusion\n- Cardiomegaly"; at a line's start or, once the section's other breaks are
# collapsed, inside the line), though a cue before it on its line still counts ("No
# pneumothorax - small left effusion\nRight basal consolidation").
_BULLET = re.compile(r"(?<!\S)[-*\u2022](?=[ \t])")


# A template's label opening the next line ("Heart: Enlarged", "Pleura: small effusion").
_LABEL_LINE = re.compile(
    r"[ \t]*(?:[-*\u2022][ \t]+)?(?:[A-Z][a-z]+(?:[ \t]+[a-z]+){0,2}|[A-Z]{2,}(?:[ \t]+[A-Z]+){0,2})"
    r"(?:[ \t]*:|[ \t]+-[ \t])"
)
#: A template's line of a label and its one-word answer ("Consolidation - no", "Effusion:
#: yes"; group 1 the label): a whole statement, though "no" also joins a wrapped sentence.
_LABEL_ANSWER = re.compile(
    r"[ \t]*(?:[-*\u2022][ \t]+)?([A-Za-z][A-Za-z ]{0,40}?)[ \t]*(?::|[ \t]-)[ \t]*"
    rf"(?:{'|'.join(sorted(ANSWERS | {'positive', 'present'}))})[ \t]*$",
    re.IGNORECASE,
)
#: The organ labels of a templated report's lungs, heart, pleura and mediastinum
#: ("LUNGS:", "HEART AND MEDIASTINUM:"), which may open its findings
#: (:func:`cxrils.report.sections.split_sections`).
CHEST_ORGAN_LABELS: Final[frozenset[str]] = frozenset(
    {"lungs", "lung", "lung fields", "lung parenchyma", "parenchyma", "lung bases", "bases"}
    | {"heart", "heart size", "cardiac", "heart and mediastinum", "cardiomediastinal", "cardiomediastinum"}
    | {"cardiac silhouette", "cardiomediastinal silhouette", "cardiomediastinal contours", "mediastinum"}
    | {"mediastinal contours", "mediastinum and hila", "hila and mediastinum", "hila", "hilar", "hilum"}
    | {"pleura", "pleural", "pleural spaces", "pleural space", "costophrenic angles", "diaphragm", "diaphragms"}
)
#: Every organ label of a templated report: labels of its findings, not sections of their
#: own; the others ("BONES:", "ABDOMEN:", "TUBES:", "OTHER:") never open the findings, as
#: they follow findings written elsewhere (a review).
ORGAN_LABELS: Final[frozenset[str]] = CHEST_ORGAN_LABELS | frozenset(
    {"airways", "trachea", "bones", "bony thorax", "osseous structures", "skeleton", "soft tissues"}
    | {"upper abdomen", "abdomen", "lines", "tubes", "lines and tubes", "tubes and lines", "lines/tubes"}
    | {"tubes/lines", "support devices", "devices", "other", "bony structures", "osseous"}
    | {"bones and soft tissues", "soft tissues and bones", "pulmonary vasculature", "vasculature", "aorta"}
)


@lru_cache(maxsize=1)
def _carrying_cue_words() -> frozenset[str]:
    """The first words of the cues whose scope reaches forward (negation, hedge, question,
    alternative): a statement holding none of them carries nothing over a line break."""
    return frozenset(
        lit.split()[0]
        for lit, cat, direction, _ in CONTEXT_RULES
        if direction in ("FORWARD", "BIDIRECTIONAL") and cat not in ("TERMINATE", "PSEUDO")
    )


# A next line of a report in capitals: two words in capitals, not a label ("NO
# CONSOLIDATION", "MODERATE RIGHT PLEURAL EFFUSION").
_CAPITALS_NEXT = re.compile(r"[ \t]*(?:[-*\u2022][ \t]+)?[A-Z]+[ \t]+[A-Z]{2,}(?![A-Z /&]*[ \t]*:)")


@lru_cache(maxsize=1)
def _finding_term() -> str:
    """A regex group of every finding phrase of :func:`lesion_terms`, longest first."""
    return "(?:" + "|".join(re.escape(t) for t in sorted(lesion_terms(), key=len, reverse=True)) + ")"


@lru_cache(maxsize=1)
def _finding_at_end() -> re.Pattern[str]:
    """A finding phrase of :func:`lesion_terms` that ends a text (any case)."""
    return re.compile(rf"\b{_finding_term()}\s*$", re.IGNORECASE)


@lru_cache(maxsize=1)
def _findings_only() -> re.Pattern[str]:
    """A line of findings alone, joined by "or", "and" or commas, to its end or sentence end
    ("PLEURAL EFFUSION OR PNEUMOTHORAX.": the rest of a list wrapped without its comma, a
    review), any case."""
    term = _finding_term()
    return re.compile(
        rf"[ \t]*(?:[-*\u2022][ \t]+)?{term}(?:[ \t]*(?:,|\bor\b|\band\b|,[ \t]*(?:or|and)\b)[ \t]*{term})*[ \t]*(?:[.;]|$)",
        re.IGNORECASE | re.MULTILINE,
    )


def _finding_line_in_capitals(line: str, statement: str) -> bool:
    """Whether a line in capitals is a statement of its own before a line in capitals:
    the whole line ("NO PNEUMOTHORAX\nMODERATE RIGHT PLEURAL EFFUSION"), ending with a
    finding; not a sentence wrapped after a word that qualifies the next line's finding
    ("NO FOCAL CONSOLIDATION, PLEURAL\nEFFUSION ...", "NO EVIDENCE OF LEFT LOWER
    LOBE\nCONSOLIDATION", "... AIRSPACE\nCONSOLIDATION": a review) or one that began on an
    earlier sentence's line ("STABLE CARDIOMEGALY. NO FOCAL AIRSPACE")."""
    bare = re.sub(r"^[ \t]*(?:[-*\u2022][ \t]+)?", "", line).strip()
    return bare == statement.strip() and "," not in bare and _finding_at_end().search(bare) is not None


def statement_breaks(text: str, max_chars: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the :data:`BARE_LINE_END` line breaks of ``text`` that
    end a statement written without a full stop, one finding per line ("No
    pneumothorax\nLarge left pleural effusion": without the break the negation reaches
    the effusion); ``[]`` when ``max_chars`` is 0.

    The statement before a break runs from the last sentence end (". ", ": ", "; "), bullet
    or dash between spaces, or the last such break before it, and must lie on the break's line (a statement wrapped over
    lines, or a list under a cue, "There is no evidence of\nPneumothorax\nPleural
    effusion", is kept whole; so the text before and after
    :func:`cxrils.report.sections.select_section` collapsed the other breaks gives the same
    breaks). It must be shorter than ``max_chars`` characters
    (``ReportConfig.line_statement_max_chars``: MIMIC-CXR wraps its sentences over lines
    of 70-80 characters), must not end with a joining word (:data:`_JOINING_WORDS`: "to
    suggest\nPneumocystis pneumonia" is one sentence), and must hold a cue whose scope
    reaches forward, on the break's line from the last sentence end ("no", "possible", "or"
    ...: a statement without one carries nothing over, so a template's list "Negative
    for:\nPneumothorax\nPleural effusion" or "No evidence of\n- Pneumothorax\n- Pleural
    effusion" stays one denial; "No pneumothorax - small effusion" holds one). Before a
    template's label line ("Lungs: Hazy opacity left lower zone\nHeart: Enlarged") the break
    ends the statement whatever its length or cues, and after a short one ("Heart:
    Normal\nLarge hiatus hernia") whatever its cues.
    """
    out: list[tuple[int, int]] = []
    if max_chars <= 0:
        return out
    last = 0
    for m in BARE_LINE_END.finditer(text):
        before = text[last : m.start()]
        ends = [e.end() for e in _SENTENCE_END.finditer(before)]
        clause = before[ends[-1] if ends else 0 :]  # from the last sentence end
        bullets = [b.end() for b in _BULLET.finditer(clause)]
        raw = clause[bullets[-1] if bullets else 0 :].strip()  # from the last bullet or dash
        if "\n" in raw:  # wrapped over lines, or a list under a cue ("no evidence of\nX\nY")
            continue
        statement = " ".join(raw.split())
        words = re.findall(r"[a-z?/]+", statement.lower())
        following = re.match(r"[ \t\r\n]*(?:[-*\u2022][ \t]+)?([A-Za-z]+)", text[m.start() :])
        line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
        label_next = bool(_LABEL_LINE.match(text, m.end()))
        # A template's line ends its statement though its last word may join a wrapped
        # sentence ("no", "left"): a finding's label with a one-word answer ("Pneumothorax:
        # No", "Consolidation - no"; not "Lungs: no", "Lung bases: no": no finding's label,
        # a sentence wrapped after "no"), or a label line before a label line ("Effusion -
        # yes, small right\nOedema - no"); not "There is no\nPleural effusion - unchanged"
        # (reviews).
        answer = _LABEL_ANSWER.match(line)
        template = (answer is not None and _finding_at_end().search(answer.group(1)) is not None) or (
            label_next and _LABEL_LINE.match(line) is not None
        )
        if (
            not template
            and _CAPITALS_NEXT.match(text, m.end())
            and (not _finding_line_in_capitals(line, raw) or _findings_only().match(text, m.end()))
        ):
            continue  # a report in capitals wraps its sentences too (reviews)
        if (
            not words
            or (words[-1] in _JOINING_WORDS and not template)
            or (following and following.group(1).lower() in _CONTINUING_WORDS)
            or _CONTINUING_READING.match(text, m.start())
        ):
            continue  # "... effusion\nOR PNEUMOTHORAX" goes on
        # the cue may stand before a dash on the break's line, not on a line before it ("No
        # evidence of\n- Pneumothorax\n- Pleural effusion" is one denial)
        cue_words = re.findall(r"[a-z?/]+", clause[clause.rfind("\n") + 1 :].lower())
        short = len(statement) < max_chars
        if (
            label_next
            or template
            or (_LABEL_LINE.match(line) and short)
            or (short and not _carrying_cue_words().isdisjoint(cue_words))
        ):
            out.append((m.start(), m.end()))
            last = m.end()
    return out
