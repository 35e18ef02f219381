"""The ``rules`` report structurer: lexicons + the ConText algorithm (CPU, no weights).

Pipeline per section text (paper section 3.1 step 1, the six-element tuples), one
sentence at a time, so the work is linear in the text's length
(:mod:`cxrils.report.tokens`):

1. sentences and tokens (:func:`cxrils.report.tokens.split_sentences`);
2. findings: our finding lexicon (:func:`cxrils.report.lexicon.lesion_terms`, built on
   :data:`cxrils.vocab.LESION_SYNONYMS`, plus token patterns for cardiomegaly and
   vascular congestion), longest match wins;
3. ConText (:mod:`cxrils.report.context`, medspaCy's algorithm restated) with our cue
   rules (:data:`cxrils.report.lexicon.CONTEXT_RULES`): negation and resolution ->
   negative, hedging -> tentative, pseudo-cues ("no interval change in") ignored,
   hypothetical mentions ("rule out pneumonia") kept as tentative negatives that take
   no part in steps 4-5, scope ended by terminators ("but", ";");
4. location phrases found in the sentence and attached to the nearest finding
   they modify ("right lower lobe consolidation", "opacity in the left base");
5. a non-specific finding said to represent a disease gets a predicted lesion
   type ("opacity likely reflecting pneumonia" -> pneumonia, tentative).

Devices are not in the lexicon, so they are never extracted; "clear", "normal"
and "unremarkable" name no finding, so they never give a negative finding.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from cxrils import __version__
from cxrils.config import Config
from cxrils.report.context import target_modifiers
from cxrils.report.lexicon import (
    AND_CHANGE,
    BARE_LINE_END,
    BOTH_SIDES_WORDS,
    CARDIOMEGALY_PATTERNS,
    CHANGE_WORDS,
    CLAUSE_OPENERS,
    CLINICAL_QUESTION,
    COMPARED_SIDES_RE,
    CONGESTION_PATTERNS,
    CONTEXT_RULES,
    DEFINITE_SUGGESTIVE,
    DENIED_OTHERS,
    DENSITY_ENTITIES,
    HEDGE_IN_PATTERN,
    HILAR_WORDS,
    IF_ANY,
    LESS_LIKELY_TO,
    LOCATION_RE,
    LUNG_FINDING_CATEGORIES,
    MODIFIER_ENTITIES,
    MORE_LIKELY_THAN_NOT,
    NEGATION_IN_PATTERN,
    NON_LESION_DENSITY_FINDINGS,
    NONSPECIFIC_TYPES,
    NOT_FAVORED_TO,
    NOT_ON_ONE_VIEW,
    NOT_SEEN_BEFORE,
    REFERRING_LIKELY,
    REPORT_ABBREVIATIONS,
    REPORT_VERB_FORMS,
    REPORT_VIEWS,
    UNLIKELY_TO,
    find_locations,
    lesion_terms,
    statement_breaks,
)
from cxrils.report.locations import UPPER_CASE_LOBE_RE, LexiconLocationMapper, write_out_lobes
from cxrils.report.tokens import (
    DEID_TOKEN,
    FOLDED_RE,
    Matcher,
    Sentence,
    TokenPattern,
    fold_text,
    split_sentences,
)
from cxrils.types import Finding
from cxrils.vocab import INFERENCE_LESION_TYPES, LUNG_REGION_LABELS

# Words allowed between a location and the finding it precedes ("left SMALL effusion").
_PREMOD = re.compile(
    r"^(?:[\s,-]|\b(?:a|an|the|small|smaller|moderate|moderately|large|larger|mild|mildly|trace|minimal|tiny|"
    r"patchy|focal|streaky|linear|plate-?like|band-?like|dense|hazy|ill-defined|subtle|new|increased|increasing|"
    r"decreased|decreasing|persistent|residual|stable|unchanged|chronic|acute|layering|loculated|sized|"
    r"moderate-sized|small-to-moderate|some|airspace|air|space|pleural|sided|lung|lobe|zone|subsegmental|"
    r"segmental|lobar|nodular|interstitial|alveolar|confluent|consolidative|reticular|scattered|minor|"
    r"retrocardiac|basilar|mass-?like|rounded|round|faint|vague|slight|slightly|bandlike|discoid|"
    r"severe|marked|massive|underlying|possible|probable|likely|early|developing|worsening|worsened|"
    r"improving|improved|mid|upper|lower|area|areas|of|region|to)\b)*$",
    re.IGNORECASE,
)
# The words before a finding left over from a resolved one: "... has resolved, with minimal
# RESIDUAL atelectasis", "has improved, with a small residual effusion" (_attach_locations).
_RESIDUAL_GAP = re.compile(
    r"\b(?:resolved|cleared|improved|decreased)\b[^;]*?(?:,\s*|\s)(?:with|and|but)\s+"
    r"(?:(?:a|an|minimal|mild|small|some|trace|slight|mildly)\s+)*residual\s+$",
    re.IGNORECASE,
)
# "<place> WITH ADJACENT <finding>", "<place> is elevated WITH ADJACENT <finding>", "...
# WITH A SMALL <finding>", "<place> with decreased <finding>", "<hemidiaphragm> IS OBSCURED
# BY A MODERATE <finding>" (_attach_locations).
_WITH_BESIDE = re.compile(
    r"^\s*(?:(?:is|are|remains|remain)\s+(?:mildly\s+|markedly\s+)?(?:elevated|obscured|blunted)\s*)?,?\s*"
    r"(?:with|(?:is|are|remains|remain)\s+(?:partially\s+|completely\s+)?obscured\s+by)\s+"
    r"(?:(?:adjacent|associated|overlying|a|an|small|mild|minimal|trace|persistent|residual|subsegmental|"
    r"patchy|some|new|moderate|large|decreased|increased|improved|improving|worsened|worsening|slightly)\s+)*$",
    re.IGNORECASE,
)
# A place that names hemidiaphragms only: "right hemidiaphragm", "the right and left
# hemidiaphragms", "both hemidiaphragms" (_lung_beside).
_HEMIDIAPHRAGMS_ONLY = re.compile(
    r"^(?:the\s+)?(?:(?P<first>right|left)\s+(?:(?:hemi-?)?diaphragm\s+)?(?:and|,)\s+(?:the\s+)?)?"
    r"(?P<side>right|left|bilateral|both)\s+(?:hemi-?)?diaphragms?$",
    re.IGNORECASE,
)


# A heart border named as a place, a silhouette sign: "the left heart border".
_HEART_BORDER = re.compile(r"^(?:the\s+)?(?:right|left)\s+heart\s+borders?$", re.IGNORECASE)


def _lung_beside(phrase: str) -> str:
    """The lung place a finding next to ``phrase`` lies in: the base above the
    hemidiaphragms ``phrase`` names when it names nothing else but heart borders (the
    silhouette signs of the same opacity): "right hemidiaphragm", "left diaphragm" ->
    "right base", "left base"; "right and left hemidiaphragms", "both hemidiaphragms" ->
    "bibasilar"; "left hemidiaphragm and left heart border" -> "left base and left heart
    border". Else the phrase itself ("right hemidiaphragm and left basilar" keeps its own
    lung place)."""
    text = " ".join(phrase.split())
    m = _HEMIDIAPHRAGMS_ONLY.match(text)
    if m:
        sides = {m.group("side").lower(), (m.group("first") or m.group("side")).lower()}
        if sides & {"bilateral", "both"} or sides == {"right", "left"}:
            return "bibasilar"
        return f"{sides.pop()} base"
    parts = [p for p in re.split(r"\s*(?:,|\band\b)\s*", text) if p]
    out = []
    for part in parts:
        one = _HEMIDIAPHRAGMS_ONLY.match(part)
        if one and not one.group("first") and one.group("side").lower() in ("right", "left"):
            out.append(f"{one.group('side').lower()} base")
        elif _HEART_BORDER.match(part):
            out.append(part)
        else:
            return phrase
    return " and ".join(out) if any(p.endswith(" base") for p in out) else phrase


# A place introduced by a preposition after a finding is that finding's ("consolidation
# AT the right base and a small left effusion"; not "edema and moderate right and small
# left effusions"): _attach_locations.
_PLACE_PREP = re.compile(r"\b(?:in|at|on|within|involving|along|over|of|throughout)\b", re.IGNORECASE)
# "moderate right AND SMALL LEFT pleural effusions": a side, then the other side before
# the finding (_other_side_next).
_AND_SIDE = re.compile(r"^\s+(?:and|or)\s+(?:[\w-]+\s+){0,2}?(?:right|left)\b", re.IGNORECASE)


def _other_side_next(gap: str) -> bool:
    """Whether ``gap`` (text from a place to the next finding) names the other side and
    then only modifiers: " and small left pleural " in "moderate right and small left
    pleural effusions" (both sides are the finding's; :func:`_split_sides` then makes
    one finding per side)."""
    m = _AND_SIDE.match(gap)
    if m is None:
        return False
    between = " ".join(gap[: m.end()].split()[1:-1])  # the words between "and" and the side
    return bool(_PREMOD.match(between)) and bool(_PREMOD.match(gap[m.end() :]))


# What may link a finding to a location that follows it ("opacity IN THE left base").
_POSTLINK = re.compile(
    r"^(?:[\s,]|\b(?:in|at|within|involving|of|along|overlying|over|projecting|is|are|seen|noted|present|"
    r"identified|the|a|both|which|that|predominantly|predominately|mostly|particularly|primarily|"
    r"mainly|most|more|marked|prominent|pronounced|greater|than|on|right|left|side|sided|"
    r"base|bases|lung|lungs|lobe|zone|region|regions|aspect|portion|level|and|or|slightly|"
    r"posterior|anterior|lateral|medial|bilaterally|diffusely|throughout|scattered|again|also|"
    r"persistent|stable|small|mild|moderate|large|trace|minimal|there|with air bronchograms?)\b)*$",
    re.IGNORECASE,
)
# A place said to be clear is no finding's place: "left basilar atelectasis, otherwise clear lungs".
#: Between a finding's place and the next one: an inserted "with ..." clause, then "and".
_INSERTED_AND = re.compile(r"^,\s+(?:with|without)\b[^,;.:]{1,80},\s+and\s+(?:in\s+)?(?:the\s+)?$", re.IGNORECASE)
#: After such a place, what says it opens a clause of its own rather than continuing the
#: finding's list of places (reviews of stop 59): a word of clearness or absence before
#: the sentence ends ("..., and the right upper lobe is well aerated", "have resolved",
#: "are no longer seen", ", which is clear"), "demonstrates no ...", or a finding noun
#: right after it ("..., and left hilar prominence"). Anything else continues the list, as
#: before ("..., and right lower lobe.", "are again seen", ", which is new", "(new)").
_OWN_CLAUSE = re.compile(
    r"^(?:[^.;]*?\b(?:clear|normal|sharp|aerated|unremarkable|hyperinflated|resolved|re-?expanded|no\s+longer|not)\b"
    r"|\s*(?:demonstrates?|shows?|reveals?|has|have|contains?)\s+no\b"
    r"|\s*(?:prominence|fullness|enlargement|opacit\w*|consolidations?|effusions?|atelectasis|edema|nodules?|"
    r"mass(?:es)?|thickening|scarring|pneumothorax|infiltrates?)\b)",
    re.IGNORECASE,
)
#: A place that names several regions ("the lungs", "both bases") and a word after it:
#: the subject of a clause of its own ("..., and the lungs are otherwise unchanged"),
#: unless the list plainly goes on (_PLURAL_PLACE_JOINS).
_PLURAL_PLACE = re.compile(
    r"(?:lungs|bases|lobes|zones|apices|fields|regions|angles|hemithoraces|hila|hemidiaphragms)\s*$", re.IGNORECASE
)
_PLURAL_PLACE_JOINS = re.compile(
    r"^\s*(?:(?:have|has|are|is|were|was)\s+(?:again\s+|also\s+|now\s+)?(?:increased|worsened|progressed|developed|"
    r"enlarged|grown|new|seen|noted|involved|present)\b|appears?\s+(?:more\s+dense|denser)\b|persist|remain"
    r"|(?:as\s+well|too|also)\s*(?:$|[.,;:]))",
    re.IGNORECASE,
)
_BREAK = re.compile(
    r"[;:]|\b(?:but|however|although|whereas|while|with|without|no|otherwise|elsewhere|clear|"
    r"normal|unremarkable)\b",
    re.IGNORECASE,
)
# Lesion types that stay findings of their own in an inference's list of alternatives
# (not what an opacity represents: "opacity may represent pneumonia or small effusion").
_OWN_FINDING_TYPES = frozenset({"effusion", "cardiomegaly"})
# A place phrase that names both whole lungs and nothing nearer (_attach_locations).
_BOTH_LUNGS_PHRASE = re.compile(
    r"^\W*(?:the\s+|both\s+)?(?:lungs|lung fields|bilateral|bilaterally)\W*$", re.IGNORECASE
)
# A template label's separator, and a "yes" answer or a short value after it, before the
# label's place ("Atelectasis: Minor, right base.", "Pneumonia: Not excluded, left lower zone.").
_LABEL_VALUE = re.compile(
    r"^\s*(?::|-(?=\s))\s*(?:(?:yes|minor|possible|probable|likely|not excluded)\b[,;]?)?", re.IGNORECASE
)
# The lungs as a whole, as a template's section label names them ("Lungs:", "Lung fields:").
_BARE_LUNG_LABEL = re.compile(r"^\W*(?:the\s+|both\s+)?(?:lungs?|lung fields?|parenchyma|lung parenchyma)\W*$", re.I)
# Inference cues between a non-specific finding and the disease it represents.
_INFER = re.compile(
    r"\b(?:(?:is|are)\s+either|represent\w*|reflect\w*|consistent with|compatible with|suggest\w*|concerning for|suspicious for|"
    r"worrisome for|likely|probably|possibly|may be|could be|due to|secondary to|related to|"
    r"indicative of|characteristic of|favou?r\w*|most likely|presumably|typical of|which is|which are|"
    r"correspond\w* to)\b",
    re.IGNORECASE,
)
# An opacity said to be something that is no lesion, within a few words after it
# ("opacity in the right mid lung is likely a nipple shadow", "density at the left base
# likely represents overlapping vessels"; a review of MIMIC-style sentences).
_NO_LESION_READING = re.compile(
    r"^[^.;,]{0,80}?(?:,\s*)?(?:\b(?:is|are|which is|which are)\s+)?(?:\bmost\s+)?\b(?P<reading>likely|probably|presumably|"
    r"consistent with|compatible with|due to|(?:likely\s+|probably\s+)?(?:represents?|representing|reflects?|"
    r"reflecting))\s+(?:a\s+|an\s+|the\s+)?(?:(?:right|left|bilateral)\s+)?(?:nipple\s+shadows?|nipple|"
    r"(?:overlapping|overlying|superimposed)\s+(?:vessels|vascular\s+structures|soft\s+tissues?|breast\s+tissues?|"
    r"breast\s+shadow(?:s|ing)?|breasts?|shadows|shadowing|structures)|(?:breast|soft)\s+tissues?(?:\s+shadows?)?|"
    r"breast\s+shadow(?:s|ing)?|"
    r"confluence\s+of\s+"
    r"(?:shadows|vessels|vascular\s+structures)|summation\s+(?:of\s+shadows|shadows?|artifact)|skin\s+folds?|"
    r"artifact|(?:hiatal\s+)?hernia)\b"
    # a mass or nodule of soft tissue is a lesion (a review: "likely represents a soft tissue mass")
    r"(?!\s+(?:mass|masses|nodule|nodules|density|densities|lesion|lesions|swelling|opacity|opacities)\b)",
    re.IGNORECASE,
)


# A word that denies the no-lesion reading it stands with ("not likely artifact").
_DENIED_READING = re.compile(r"\b(?:not|no|less|unlikely|without|rather)\b", re.IGNORECASE)


def _read_as_no_lesion(text: str, sent_end: int, ms: list[_Mention], i: int) -> bool:
    """Whether the opacity ``ms[i]`` is said to be something that is no lesion
    (:data:`_NO_LESION_READING`: "focal opacity in the right mid lung is likely a nipple
    shadow"), and nothing in the sentence keeps it a lesion: no denial of that reading
    ("not likely artifact", "less likely a nipple shadow", "not due to overlapping
    vessels"), no other finding between it and the reading ("left basilar opacity and
    right mid lung nodular density, likely a nipple shadow": the density's), and no
    finding of a lesion type after it ("likely due to overlapping soft tissues or early
    pneumonia", "..., although consolidation cannot be excluded"). ``sent_end`` is the
    character offset of the sentence's end in ``text``."""
    m = ms[i]
    hit = _NO_LESION_READING.match(text[m.end : sent_end])
    if hit is None or _DENIED_READING.search(hit.group(0)):
        return False
    return not any(b.start < m.end + hit.start("reading") or b.lesion_type is not None for b in ms[i + 1 :])


# The gap before a finding denied in passing: "opacity WITHOUT effusion", "opacity, WITHOUT
# ASSOCIATED effusion" (_predict_types skips it to reach the reading after it).
_WITHOUT_GAP = re.compile(
    r"^\s*,?\s*(?:without|with no)(?:\s+(?:associated|evidence of|definite|an?))*\s*$", re.IGNORECASE
)
_HEDGE_INFER = re.compile(
    r"\b(?:likely|probably|possibly|possible|may|might|could|suggest\w*|concerning|suspicious|worrisome|"
    r"favou?r\w*|presumably|question\w*|cannot|differential|perhaps|presumed|suspected|equivocal|probable)\b",
    re.IGNORECASE,
)
# "Highly suggestive of" is the paper's definitive wording (lexicon.DEFINITE_SUGGESTIVE): no
# hedge in the inference link.
_DEFINITE_SUGGEST = re.compile(
    r"\b(?:" + "|".join(r"\s+".join(map(re.escape, w.split())) for w in DEFINITE_SUGGESTIVE) + r")\b", re.IGNORECASE
)
# Alternatives in the inference ("versus", "or"): tentative when report.differential_certainty is.
_ALT_INFER = re.compile(r"\b(?:versus|vs|or)\b", re.IGNORECASE)
# A disease in apposition with a hedge: "opacity, probable atelectasis"; the observation's
# place may come first ("opacity in the right base, probable atelectasis": _hedged_apposition).
_HEDGED_APPOSITION = re.compile(
    r"^(?P<place>[^,;]*),\s*(?:most\s+)?(?:probable|possible|likely|presumed|suspected|questionable)\s+$", re.IGNORECASE
)
# Only de-identified words between an observation and a disease: the link word was removed
# ("opacities XXXX scarring or atelectasis"). Its certainty comes from the words left (no
# hedge is assumed for the removed word, as for any text without a cue).
_DEID_LINK = re.compile(rf"^[\s,]*(?:{DEID_TOKEN}\b[\s,]*)+", re.IGNORECASE)
_MULTI_STOP = re.compile(r"\.{2,}\s*")
# Lung places written with a hyphen ("peri-hilar", "retro-cardiac", "sub-pleural"): read as
# one word, as the places they are ("hilar shadowing" alone is no lung lesion; a review).
_HYPHENATED_PLACE = re.compile(r"\b(peri|para|retro|sub)\s*-\s*(hilar|cardiac|pleural)\b", re.IGNORECASE)
# The end of a text whose last sentence has no full stop (after a letter, digit, ")" or "%").
_BARE_END = re.compile(r"(?<=[A-Za-z0-9)%])\Z")
# Pleural fluid named by the fissure it lies in: "fluid in the minor fissure", "fluid
# tracking along the right major fissure" (read as "fissural fluid", an effusion; _prepare).
_FISSURE_FLUID = re.compile(
    # not denied ("no fluid in the minor fissure" says nothing of an effusion elsewhere)
    # (the look-behinds after the word: tried only where "fluid" stands, not at every character)
    r"\bfluid(?<!\bno fluid)(?<!\bwithout fluid)(?=\s+(?:(?:is|seen|noted|previously|tracking|tracks|extending|extends|also|again|now)\s+)*"
    r"(?:in|within|along|into)\s+(?:the\s+)?(?:(?:right|left)\s+)?(?:minor|major|horizontal|oblique)\s+fissures?\b)",
    re.IGNORECASE,
)
_CONJ_WORDS = r"(?:,|and|or|,\s*and|,\s*or|and/or|/|versus|vs\.?)"
_CONJ = re.compile(rf"^\s*{_CONJ_WORDS}\s*$", re.IGNORECASE)
# Coordinated findings that share a place, a size word before the second allowed:
# "consolidation and some atelectasis are present in the left lower lobe" (IU CXR1769).
_SIZE_WORDS = r"some|mild|small|minimal|trace|tiny|moderate|patchy|streaky|a|an"
_CONJ_SIZED = re.compile(rf"^\s*{_CONJ_WORDS}(?:\s+(?:{_SIZE_WORDS}))*\s*$", re.IGNORECASE)
# Alternatives for one finding share its place, a size or stage word before the second
# allowed: "atelectasis versus early pneumonia at the left base", "atelectasis or small
# consolidation in the right lower lobe" (a differential of one opacity); not edema,
# which is no focal lesion ("mild pulmonary edema or small effusion at the right base").
_ALT_SIZED = re.compile(
    rf"^\s*(?:,\s*)?(?:or|versus|vs\.?|and/or|/)(?:\s+(?:{_SIZE_WORDS}|early|developing|superimposed|underlying))*\s*$",
    re.IGNORECASE,
)
# A comma between two alternatives of a list that "or" closes (_alternatives_end).
_LIST_COMMA = re.compile(rf"^\s*,(?:\s+(?:{_SIZE_WORDS}|early|developing|superimposed|underlying))*\s*$", re.IGNORECASE)
# A finding's own feature, whose place is the finding's: "patchy opacity with volume loss
# in the left lower lobe" (the entities), "consolidation with air bronchograms in the
# right upper lobe" (no entity: a link word of _POSTLINK).
_FEATURES = frozenset({"volume loss", "cavitation", "cavity", "air bronchograms", "air bronchogram"})
_WITH = re.compile(r"^\s*with\s*$", re.IGNORECASE)
# The lesion types a feature's place is given to ("pulmonary edema with volume loss in
# the right lower lobe" puts no edema there).
_FOCAL_TYPES = frozenset({"opacity", "consolidation", "atelectasis", "pneumonia"})
# A plural verb right after a finding, before any comma: the coordinated findings are its subject.
_PLURAL_AFTER = re.compile(r"^[^,;.]*?\b(?:are|were|have been)\b", re.IGNORECASE)
# Between a located finding and an unlocated one that shares its place ("right pleural
# effusion with adjacent atelectasis", "left base opacity, XXXX atelectasis").
_SHARE_BREAK = re.compile(
    r"[;:]|\b(?:but|however|although|whereas|while|no|not|without|there (?:is|are)|otherwise|"
    r"elsewhere|other|contralateral|opposite)\b",
    re.IGNORECASE,
)
# A sentence that refers back ("This may represent pneumonia", "These findings are
# consistent with atelectasis").
_ANAPHORA = re.compile(
    r"^\W*(?:\d+\.\s*)?(?:this|these|it|which|findings?|the findings?|this finding|these findings|"
    r"this appearance|the appearances?|these appearances|the features|these features|this area|the opacity|"
    r"the opacities)\b",
    re.IGNORECASE,
)
# What links a place with no finding of its own to the finding inferred from it: "blunting
# of the left costophrenic angle, consistent with a small effusion".
_PLACE_INFER = re.compile(
    r"^[\s,]*(?:(?:(?:is|are)\s+)?(?:blunting|blunted|obscuration|obscured)[\s,]+)?"
    r"(?:(?:which|that)\s+(?:is|are|may be|could be)\s+)?(?:(?:is|are|may|might|could|would)\s+(?:be\s+)?)?"
    r"(?:most\s+)?(?:(?:likely|probably|possibly)\s+)?(?:consistent with|compatible with|"
    r"suggestive of|suspicious for|concerning for|likely|probably|possibly|represent\w*|reflect\w*|"
    r"due to|secondary to|related to|from|suggesting|suggests|indicating|indicative of|in keeping with)\b",
    re.IGNORECASE,
)
# What may stand between a referring word and the disease it names: "This is atelectasis",
# "The appearance XXXX subsegmental atelectasis" (a de-identified verb).
_REFER_LINK = re.compile(rf"^(?:\s+(?:is|are|{DEID_TOKEN}))+\b", re.IGNORECASE)
# A place named as the term of a comparison is not where the finding is: "increased
# opacity of the right base compared to the left" (_compared_place).
_REFERENCE_PLACE = re.compile(
    r"\b(?:compared (?:to|with)|in comparison (?:to|with)|relative to)\s+(?:the\s+)?$", re.IGNORECASE
)
# Tokens that join findings into one list (a backward hedge's subject stays the whole list).
_LIST_WORDS = frozenset({"and", "or", "versus", "vs", "/", ";"})
# Words between a comma and a backward negation cue that make no subject of their own:
# verbs and adverbs ("..., has now resolved"), and the openers of an aside (a preposition,
# a pronoun, a size or time word: "pneumothorax, at the right apex has resolved", "left
# effusion, small on the prior study has resolved", "..., it has resolved").
_AUXILIARIES = frozenset({"is", "are", "was", "were", "has", "have", "had", "been", "be", "now", "also", "again"})
_PLURAL_VERBS = frozenset({"are", "were", "have"})
_ASIDE_OPENERS = frozenset(
    {"at", "on", "in", "from", "since", "behind", "along", "over", "with", "without", "after", "before", "by"}
    | {"for", "of", "to", "within", "near", "under", "above", "below", "across", "throughout", "during", "as"}
    | {"status", "post", "per", "it", "this", "these", "that", "which", "they", "small", "large", "moderate"}
    | {"mild", "minimal", "trace", "tiny", "previously", "currently", "likely", "possibly", "probably", "most"}
    | {"partially", "completely", "nearly", "almost", "still", "greater", "larger", "worse", "more", "less"}
    | {"mostly", "predominantly", "primarily", "mainly", "slightly", "much", "concerning", "compatible"}
    | {"consistent", "suggestive", "suspicious", "worrisome", "representing", "reflecting", "presumably"}
)


def _own_subject(words: list[str]) -> bool:
    """Whether ``words`` (lower case, between a comma and a backward negation cue) hold
    a subject of their own: a word other than a verb, and no list word or aside opener
    first (:data:`_ASIDE_OPENERS`)."""
    return (
        bool(words)
        and words[0] not in _LIST_WORDS
        and words[0] not in _ASIDE_OPENERS
        and "than" not in words  # "right larger than left": a comparison
        and any(w not in _AUXILIARIES for w in words)
    )


# A place said to be clear, right before or after the word: "the lungs are clear
# bilaterally, left base atelectasis" (neither "lungs" nor "bilaterally" is the atelectasis's).
_CLEAR_BEFORE = re.compile(r"\b(?:clear|normal|unremarkable)\s+$", re.IGNORECASE)
_CLEAR_AFTER = re.compile(
    r"^\s+(?:(?:is|are|appears?|remains?)\s+)?(?:clear|normal|unremarkable)\b(?!\s+of\b)", re.IGNORECASE
)
# A place the sentence rules out, right before the word: "consolidation in the right lung,
# none in the left lung", "none seen on the left", "right-sided effusion, not left", "does
# not involve the left lung", "does not extend into the left lung", "sparing the left lung" (not
# "whether or not", "if not", which hedge: "opacity in the right lower lobe, if not the
# right middle lobe"; nor "except", whose place is often the finding's: "clear except at
# the bases").
_DENIED_BEFORE = re.compile(
    r"\b(?:none(?:\s+(?:seen|identified|noted))?|(?<!\bor )(?<!\bif )not(?:\s+(?:involve|involving|extend|extending))?"
    r"|sparing|spares|spared)\s+(?:(?:in|on|at|of|within|involving|into|to)\s+)?(?:the\s+)?$",
    re.IGNORECASE,
)
_SIDES = re.compile(r"\b(?:right|left)\b", re.IGNORECASE)
_SLASH = re.compile(r"^\s*/\s*$")


@dataclass
class _Mention:
    start: int  # character offsets in the doc
    end: int
    entity: str
    lesion_type: str | None
    presence: str
    certainty: str
    sentence_index: int
    sentence: str
    pre: list[str]
    post: list[str]
    mods: list[tuple[str, int, int]]  # ConText cues: (category, char start, char end)
    predicted: str | None = None
    predicted_text: str | None = None
    inference_certainty: str | None = None
    absorbed: bool = False


class RulesStructurer:
    """Rule-based structurer (default backend; CPU, no weights, no model to load).

    Parameters
    ----------
    cfg : cxrils.config.Config, optional
        ``cfg.report`` gives ``differential_certainty`` (whether a finding offered as
        one of alternatives, "atelectasis versus scar", is tentative),
        ``max_sentence_tokens`` and the character and word windows of place attachment
        and inference (``clear_before_chars`` ... ``named_other_words``); default
        :class:`cxrils.config.ReportConfig`.
    """

    name = "rules"

    def __init__(self, cfg: Config | None = None) -> None:
        rc = (cfg or Config()).report
        self.differential_certainty = rc.differential_certainty
        self.max_sentence_tokens = rc.max_sentence_tokens
        self.line_statement_max_chars = rc.line_statement_max_chars
        self._hedges = (
            {"POSSIBLE_EXISTENCE", "ALTERNATIVE"}
            if rc.differential_certainty == "tentative"
            else {"POSSIBLE_EXISTENCE"}
        )
        self._targets, self._cues = _matchers()
        self._windows = (rc.clear_before_chars, rc.clear_after_chars, rc.comparison_before_chars)
        self._rc = rc  # its word windows

    @classmethod
    def from_config(cls, cfg: Config) -> RulesStructurer:
        """The registry's constructor (:data:`cxrils.report.STRUCTURERS`): ``cls(cfg)``."""
        return cls(cfg)

    @property
    def version(self) -> str:
        """The structurer's name, the package version and its certainty setting."""
        return f"rules cxrils-{__version__} differential-{self.differential_certainty}"

    def structure(self, text: str) -> list[Finding]:
        """Structured findings of one section text (labels left empty: location
        mapping is a separate step, see :func:`cxrils.report.structure_report`).

        Parameters
        ----------
        text : str
            The chosen section (findings / impression / last paragraph).

        Returns
        -------
        list of Finding
            In text order; sentence indices are 1-based.
        """
        if not text or not text.strip():
            return []
        doc = _prepare(text, self.line_statement_max_chars)
        return self._findings(doc, split_sentences(doc.text, self.max_sentence_tokens))

    def structure_many(self, texts: Iterable[str]) -> list[list[Finding]]:
        """:meth:`structure` over many texts, in order."""
        return [self.structure(t) for t in texts]

    # ------------------------------------------------------------------ internals
    def _findings(self, doc: _Prepared, sentences: list[Sentence]) -> list[Finding]:
        text = doc.text
        mentions: list[_Mention] = []
        prev: tuple[int, list[_Mention]] = (0, [])  # the last sentence with findings
        for sent in sentences:
            ents = _without_modifiers(text, sent, self._targets.find(sent.words))
            if not ents:
                continue
            spans = [(a, b) for a, b, _ in ents]
            cues = _sentence_cues(
                sent.words,
                spans,
                self._cues.find(sent.words),
                self._rc.question_mark_words,
                (_asking_marks(text, sent), _glued_before(sent), _answered_yes(text, sent))
                if "?" in sent.words
                else (frozenset(), frozenset(), False),
            )
            mods_of = target_modifiers(len(sent.words), spans, cues)
            ms: list[_Mention] = []
            asked: list[_Mention] = []  # hypothetical: kept, but no part in the passes below
            quoted = doc.quote(sent.start, sent.end)
            for (a, b, (entity, lesion_type)), mods in zip(ents, mods_of):
                hypothetical = any(c == "HYPOTHETICAL" for c, _, _ in mods)
                start, end = sent.char_span(a, b)
                if any(w in NEGATION_IN_PATTERN for w in sent.words[a:b]):  # "the heart is not enlarged"
                    mods = mods + [("NEGATED_EXISTENCE", a, b)]
                if any(w.lower() in HEDGE_IN_PATTERN for w in sent.words[a:b]):  # "the heart may be enlarged"
                    mods = mods + [("POSSIBLE_EXISTENCE", a, b)]
                m = _Mention(
                    start=start,
                    end=end,
                    entity=entity,
                    lesion_type=lesion_type,
                    presence="positive",
                    certainty="definitive",
                    sentence_index=sent.index,
                    sentence=quoted,
                    pre=[],
                    post=[],
                    mods=[(c, *sent.char_span(cs, ce)) for c, cs, ce in mods],
                )
                self._assert(m)
                # asked, unless a negation after the question denies it (_assert)
                (asked if hypothetical and m.certainty == "tentative" else ms).append(m)
            if not ms:
                self._attach_locations(text, sent, asked)
                mentions.extend(asked)
                continue
            for a, b in zip(ms, ms[1:]):
                if _SLASH.match(text[a.end : b.start]):  # "atelectasis/scarring": alternatives
                    for m in (a, b):
                        m.mods.append(("ALTERNATIVE", a.end, b.start))
                        self._assert(m)
            self._attach_locations(text, sent, ms)
            self._refer_back(text, sent, ms, prev)
            self._predict_types(text, ms)
            ms = _split_sides(ms)
            for i, m in enumerate(ms):
                if m.entity in DENSITY_ENTITIES and (
                    _outside_lung(m.pre + m.post) or _named_other(text, ms, i, self._rc.named_other_words)
                ):
                    # "density over the left 5th rib", "sclerotic density in the sternum",
                    # "retrocardiac density consistent with a hiatal hernia"
                    m.lesion_type = None
                elif m.lesion_type == "opacity" and m.predicted is None and _read_as_no_lesion(text, sent.end, ms, i):
                    # "focal opacity in the right mid lung is likely a nipple shadow"
                    m.lesion_type = None
            if asked:  # their own places, among themselves ("evaluate for right lower lobe pneumonia")
                self._attach_locations(text, sent, asked)
            mentions.extend(sorted([m for m in ms if not m.absorbed] + asked, key=lambda m: m.start))
            prev = (sent.index, [m for m in ms if not m.absorbed])
        return [
            Finding(
                entity=m.entity,
                sentence_index=m.sentence_index,
                presence=m.presence,
                certainty=m.certainty,
                locations=_without_bare_side(
                    _without_extent_comparison(_one_side(_dedupe([p.lower() for p in m.pre + m.post])))
                ),
                labels=[],
                lesion_type=m.lesion_type,
                predicted_lesion_type=m.predicted,
                sentence=m.sentence,
                inference_certainty=m.inference_certainty,
                predicted_lesion_text=m.predicted_text,
            )
            for m in mentions
        ]

    def _assert(self, m: _Mention, skip: tuple[int, int] | None = None) -> None:
        """Presence and certainty of a mention from its ConText cues, leaving out the
        cues inside the character span ``skip`` (those of an inference about it)."""
        kept = [(c, s) for c, s, _ in m.mods if skip is None or not skip[0] <= s < skip[1]]
        cats = {c for c, _ in kept}
        hypothetical = max((s for c, s in kept if c == "HYPOTHETICAL"), default=None)
        denied = max((s for c, s in kept if c == "NEGATED_EXISTENCE"), default=None)
        # "rule out pneumonia": asked, neither stated nor denied; unless a negation after the
        # question's cue denies it ("history of tuberculosis without active infectious process")
        if hypothetical is not None and (denied is None or denied < hypothetical):
            m.presence, m.certainty = "negative", "tentative"
            return
        negative = "NEGATED_EXISTENCE" in cats
        m.presence = "negative" if negative else "positive"
        m.certainty = "tentative" if (cats & self._hedges) and not negative else "definitive"

    def _attach_locations(self, text: str, sent, ms: list[_Mention]) -> None:
        """Give each location phrase of the sentence to the finding it modifies (the
        character windows are ``cfg.report.clear_before_chars`` and the like, the word
        windows ``cfg.report.place_link_words`` and the like)."""
        before, after, compared = self._windows
        rc = self._rc
        base = sent.start
        spans = [(base + s, base + e, p) for s, e, p in find_locations(sent.text)]
        spans = [
            sp
            for sp in spans
            if not any(sp[0] < m.end and m.start < sp[1] for m in ms)
            and not _compared_place(text, base, sp, ms, compared)
            and not _CLEAR_BEFORE.search(text[max(base, sp[0] - before) : sp[0]])
            and not _denied_place(text, base, sp, ms, before)
            and not _CLEAR_AFTER.match(text[sp[1] : sp[1] + after])
        ]
        placed_until: dict[int, int] = {}  # id of a mention -> end of the last place it took after it
        for s, e, phrase in spans:
            prev = max((m for m in ms if m.end <= s), key=lambda m: m.end, default=None)
            had = len(prev.post) if prev is not None else 0
            nxt = min((m for m in ms if m.start >= e), key=lambda m: m.start, default=None)
            gap_next = text[e : nxt.start] if nxt else None
            gap_prev = text[prev.end : s] if prev else None
            # a hemidiaphragm named before a lung finding is the lung base above it ("the
            # left hemidiaphragm is obscured, likely due to effusion", "elevation of the
            # right hemidiaphragm with adjacent atelectasis")
            before_next = (
                _lung_beside(phrase) if nxt is not None and nxt.lesion_type not in (None, "cardiomegaly") else phrase
            )
            # "streaky opacity lateral right lung, atelectasis versus scarring": a place right
            # after a finding, with a comma before the next, is the first finding's.
            right_after = (
                prev is not None
                and nxt is not None
                and "," in gap_next
                and (not gap_prev.strip() or bool(_POSTLINK.match(gap_prev)))
            )
            # "moderate right and small left effusions" (not "consolidation at the right base
            # and a small left effusion": that place follows its own finding)
            side_list = (
                gap_next is not None
                and _other_side_next(gap_next)
                and not (prev is not None and _PLACE_PREP.search(gap_prev))
            )
            # a template label: "Left lung: small effusion." (not the section label "Lungs:",
            # which names no place: "Lungs: patchy opacity in the right mid zone")
            label = gap_next is not None and gap_next.lstrip().startswith(":") and not _BARE_LUNG_LABEL.match(phrase)
            if (
                nxt is not None
                and (_PREMOD.match(gap_next.lstrip()[1:] if label else gap_next) or side_list)
                and not right_after
            ):
                nxt.pre.append(before_next)
            elif (
                prev is not None
                # a template label: "Consolidation: left lower lobe.", "Effusion: small right.",
                # "Effusion - yes, small right."
                and _POSTLINK.match(_LABEL_VALUE.sub("", gap_prev, count=1))
                and len(gap_prev.split()) <= rc.place_link_words
            ):
                prev.post.append(phrase)
            elif (
                nxt is not None
                and (prev is None or _BREAK.search(gap_prev))
                and _place_of_inference(gap_next, rc.place_inference_words)
            ):
                nxt.pre.append(before_next)
            elif (
                nxt is not None
                and prev is None
                and nxt.lesion_type not in (None, "cardiomegaly")
                and bool(_WITH_BESIDE.match(gap_next))
            ):
                # "elevation of the right hemidiaphragm with adjacent atelectasis",
                # "blunting of the left costophrenic angle with a small effusion": the
                # place of a finding that stands for none of the seven types
                nxt.pre.append(before_next)
            elif (
                nxt is not None
                and len(gap_next.split()) <= rc.place_before_words
                and not _BREAK.search(gap_next)
                # "the lungs demonstrate right basilar atelectasis": both whole lungs yield
                # to a nearer place ("right ... lateral base", "basilar predominant
                # bilateral lung" keep theirs)
                and not (
                    _BOTH_LUNGS_PHRASE.match(phrase)
                    and any(e <= s2 and e2 <= nxt.start and _names_lung_region(p2) for s2, e2, p2 in spans)
                )
            ):
                nxt.pre.append(before_next)
            elif prev is not None and not _BREAK.search(gap_prev) and len(gap_prev.split()) <= rc.place_after_words:
                prev.post.append(phrase)
            elif (
                prev is not None
                and id(prev) in placed_until
                and _INSERTED_AND.match(text[placed_until[id(prev)] : s])
                and not _OWN_CLAUSE.match(text[e:])
                and not (
                    _PLURAL_PLACE.search(phrase)
                    and re.match(r"\s*[a-z]", text[e:], re.IGNORECASE)
                    and not _PLURAL_PLACE_JOINS.match(text[e:])
                )
            ):
                # "consolidations in the right upper lobe, with a bulging horizontal
                # fissure, and right lower lobe": the list of places goes on past the
                # inserted clause
                prev.post.append(phrase)
            if prev is not None and len(prev.post) > had:
                placed_until[id(prev)] = e
        # Coordinated findings share locations: "bibasilar atelectasis and effusions",
        # "atelectasis and effusion at the bases", "atelectasis/scarring at the left base".
        for a, b in zip(ms, ms[1:]):
            gap = text[a.end : b.start]
            plain = bool(_CONJ.match(gap))
            # "consolidation and some atelectasis are present in the left lower lobe": a
            # size word before the second finding, and a plural verb after it, so that
            # "mild pulmonary edema and small effusion at the right base" keeps the
            # edema's place its own
            sized = not plain and (
                bool(_CONJ_SIZED.match(gap))
                and bool(_PLURAL_AFTER.match(text[b.end :]))
                or bool(_ALT_SIZED.match(gap))
                and "edema" not in (a.lesion_type, b.lesion_type)
            )
            feature = b.entity.lower() in _FEATURES and bool(_WITH.match(gap)) and a.lesion_type in _FOCAL_TYPES
            if not (plain or sized or feature) or a.presence != b.presence:
                continue
            if a.pre and not (b.pre or b.post) and not feature and b.lesion_type != "cardiomegaly":
                b.pre = _shared(a.pre, b, a, text)
            elif b.post and not (a.pre or a.post) and a.lesion_type != "cardiomegaly":
                a.post = _shared(b.post, a, b, text)
        # An adjective finding lies where the finding it qualifies does: "consolidative
        # opacities in the left lower lobe" (_without_modifiers).
        for a, b in zip(ms, ms[1:]):
            if (
                a.entity in MODIFIER_ENTITIES
                and b.lesion_type is not None
                and not (a.pre or a.post)
                and _qualifies(text[a.end : b.start])
            ):
                a.post = _shared(b.pre + b.post, a, b, text)
        # An unlocated lung finding shares the place of the located finding just before
        # it: "right pleural effusion with adjacent atelectasis".
        for i, b in enumerate(ms):
            if b.pre or b.post or b.lesion_type == "cardiomegaly" or i == 0:
                continue
            # past unlocated alternatives of no lesion type joined to it by "or" ("aspiration
            # or pneumonia cannot be excluded": aspiration takes no place, and the pneumonia's
            # giver is the finding before both; not past a list: "pneumonia, cardiomegaly,
            # and effusion")
            k = i - 1
            while (
                k > 0
                and ms[k].lesion_type is None
                and not (ms[k].pre or ms[k].post)
                and _ALT_SIZED.match(text[ms[k].end : ms[k + 1].start])
            ):
                k -= 1
            a = ms[k]
            gap = text[a.end : ms[k + 1].start]
            # "streaky bibasilar opacities; the appearance suggests atelectasis": a clause that
            # refers back; "opacity at the left base may be due to atelectasis, but pneumonia
            # cannot be excluded": the other reading of the same opacity
            if (
                (a.pre or a.post)
                # "the right lung base opacity has resolved, with minimal residual
                # atelectasis": what is left lies where the resolved finding was
                and (a.presence == b.presence or b.presence == "positive" and bool(_RESIDUAL_GAP.search(gap)))
                and a.lesion_type != "cardiomegaly"
                # the located finding's own place after it is no distance ("atelectasis in
                # the right lower lobe is seen, with possible superimposed pneumonia")
                and len(gap.split()) - sum(len(p.split()) for p in a.post if p.lower() in gap.lower())
                <= rc.share_place_words
                and (
                    not _SHARE_BREAK.search(gap)
                    # the clause after the last semicolon ("opacity at the left base,
                    # unchanged; this likely represents atelectasis")
                    or ";" in gap
                    and _refers(gap[gap.rfind(";") :])
                    or _other_reading(a, b, _past_places(gap, a.post))
                )
            ):
                b.post = _shared(a.pre + a.post, b, a, text)

    @staticmethod
    def _refer_back(text: str, sent: Sentence, ms: list[_Mention], prev: tuple[int, list[_Mention]]) -> None:
        """ "Opacity in the left base. This may represent atelectasis.": the disease
        of a sentence that refers back lies where the last located finding of the
        previous sentence does."""
        index, before = prev
        if index != sent.index - 1 or not _ANAPHORA.match(sent.text):
            return
        located = [
            m for m in before if m.presence == "positive" and (m.pre or m.post) and m.lesion_type != "cardiomegaly"
        ]
        if not located:
            return
        for m in ms:
            if (
                m.presence == "positive"
                and not (m.pre or m.post)
                and m.lesion_type != "cardiomegaly"
                and _refers(text[sent.start : m.start])
            ):
                m.post = list(located[-1].pre + located[-1].post)

    def _predict_types(self, text: str, ms: list[_Mention]) -> None:
        """ "opacity likely reflecting pneumonia": the opacity gets predicted type
        pneumonia and the disease mention(s) are absorbed into it. The opacity keeps
        its own certainty (cues of the inference left out); the inference's goes to
        ``inference_certainty``."""
        differential = self.differential_certainty == "tentative"
        for i, a in enumerate(ms):
            if a.absorbed or a.presence != "positive" or a.lesion_type not in NONSPECIFIC_TYPES:
                continue
            j = i + 1
            # Skip over further non-specific findings and locations: "opacity and
            # consolidation in the left base, likely pneumonia".
            denied = []  # "opacity without effusion, likely atelectasis": the effusion is no link
            while j < len(ms) and (
                ms[j].lesion_type in NONSPECIFIC_TYPES
                and _CONJ.match(text[ms[j - 1].end : ms[j].start])
                or ms[j].presence == "negative"
                and _WITHOUT_GAP.match(text[ms[j - 1].end : ms[j].start])
            ):
                if ms[j].presence == "negative":
                    denied.append(ms[j])
                j += 1
            if j >= len(ms):
                continue
            gap = text[ms[j - 1].end : ms[j].start]
            # "atelectasis or scarring", "scarring versus atelectasis", "atelectasis, edema, or pneumonia"
            chain = ms[j : _alternatives_end(text, ms, j)]
            # "opacity in the right base, atelectasis versus pneumonia": a differential in apposition
            appositive = (len(chain) > 1 and gap.rstrip().endswith(",")) or _hedged_apposition(gap)
            deid = _DEID_LINK.match(gap)
            hidden = deid is not None and bool(_PREMOD.match(gap[deid.end() :]))
            if not (_INFER.search(gap) or appositive or hidden) or len(gap.split()) > self._rc.inference_link_words:
                continue
            if re.search(r"[;]|\b(?:no|without|but|however)\b", gap, re.IGNORECASE):
                continue
            typed = [b for b in chain if b.lesion_type in INFERENCE_LESION_TYPES and b.presence == "positive"]
            if not typed:
                continue
            b = typed[0]
            hedged = (
                bool(_HEDGE_INFER.search(_DEFINITE_SUGGEST.sub(" ", gap)))
                or b.certainty == "tentative"
                or (differential and (len(chain) > 1 or bool(_ALT_INFER.search(gap))))
            )
            for x in chain:  # an effusion or a heart stays a finding ("... or small effusion")
                x.absorbed = x.lesion_type not in _OWN_FINDING_TYPES
            words = text[chain[0].start : chain[-1].end]
            places = [p for x in chain for p in x.pre + x.post]  # "opacities consistent with edema in the bases"
            for m in ms[i:j]:
                if m in denied:
                    continue
                m.post += [p for p in places if p not in m.pre + m.post]
                self._assert(m, skip=(m.end, chain[-1].end))
                m.predicted = b.lesion_type
                m.predicted_text = " ".join(words.lower().split())
                m.inference_certainty = "tentative" if hedged or m.certainty == "tentative" else "definitive"


def _alternatives_end(text: str, ms: list[_Mention], j: int) -> int:
    """The end (exclusive index into ``ms``) of the alternatives offered from ``ms[j]``
    on: joined by "or", "versus", "/" (a size or stage word may open one: "atelectasis
    or early pneumonia", :data:`_ALT_SIZED`), or a comma list that one of those closes
    ("atelectasis, aspiration, or pneumonia"; a list with no closing "or" is no
    differential: "atelectasis, small effusion")."""

    def joined(k: int, pattern: re.Pattern) -> bool:
        return k < len(ms) and bool(pattern.match(text[ms[k - 1].end : ms[k].start]))

    k = j + 1
    while k < len(ms):
        if joined(k, _ALT_SIZED):
            k += 1
            continue
        n = k
        while joined(n, _LIST_COMMA):
            n += 1
        if n == k or not joined(n, _ALT_SIZED):
            break
        k = n + 1
    return k


def _qualifies(gap: str) -> bool:
    """Whether the text between an adjective finding and the next finding leaves the
    adjective on that finding: modifiers and places only ("hazy right basilar")."""
    return "," not in gap and bool(_PREMOD.match(LOCATION_RE.sub(" ", gap)))


def _without_modifiers(text: str, sent: Sentence, ents: list) -> list:
    """The sentence's finding matches less an adjective of :data:`MODIFIER_ENTITIES` that
    qualifies a finding of its own lesion type right after it ("hazy opacities": one
    opacity, not a second, unlocated one). One of another type stays a finding
    ("ground-glass and consolidative opacities" names a consolidation) and takes the
    places of the finding it qualifies (:meth:`RulesStructurer._attach_locations`)."""
    out = []
    for i, ent in enumerate(ents):
        nxt = ents[i + 1] if i + 1 < len(ents) else None
        if ent[2][0] in MODIFIER_ENTITIES and nxt is not None and nxt[2][1] == ent[2][1]:
            gap = text[sent.char_span(ent[0], ent[1])[1] : sent.char_span(nxt[0], nxt[1])[0]]
            if _qualifies(gap):
                continue
        out.append(ent)
    return out


def _hedged_apposition(gap: str) -> bool:
    """Whether ``gap`` (text from an observation to a disease) puts the disease in
    apposition with a hedge, after the observation's place or none: ", probable ",
    " in the right base, probable ", " at the right base, possible "."""
    m = _HEDGED_APPOSITION.match(gap)
    if not m:
        return False
    place = m.group("place")
    for s, e, _ in reversed(find_locations(place)):
        place = place[:s] + " " + place[e:]
    return bool(_POSTLINK.match(place))


def _refers(lead: str) -> bool:
    """Whether ``lead`` (from a clause's start to a disease) refers back to what came
    before: a referring word, then an inference cue ("This may represent"), a copula or a
    de-identified verb ("This is", "The appearance XXXX subsegmental")."""
    anaphor = _ANAPHORA.match(lead)
    if not anaphor:
        return False
    rest = lead[anaphor.end() :]
    link = _REFER_LINK.match(rest)
    return bool(_INFER.search(lead)) or (link is not None and bool(_PREMOD.match(rest[link.end() :])))


# Words that may stand between "no other" and the finding it denies ("no other definite
# focal consolidation", "no other findings to suggest pneumonia").
_DENIAL_MODIFIERS = frozenset(
    {"definite", "significant", "discrete", "convincing", "evident", "apparent", "visible", "focal", "new"}
    | {"acute", "areas", "area", "of", "suspicious", "large", "small", "sizable", "pleural", "airspace", "air", "space"}
    | {"evidence", "sign", "signs", "findings", "to", "suggest", "suggesting", "indicate", "indicating"}
)


# How far "A is favored over B" hedges B (_favored_over): as far as an alternative ("or")
# reaches in the lexicon ("over left lower lobe pneumonia").
_OVER_SCOPE = next(sc for lit, cat, _, sc in CONTEXT_RULES if (lit, cat) == ("or", "ALTERNATIVE"))
# Words that join the findings a clinical question asks about (_first_finding_scope).
_QUESTION_LIST_WORDS = frozenset({",", "and", "or", "nor", "/", "and/or"})
# The backward scope of "not seen" (lexicon), given to "not seen previously or ..." (_seen_now).
_NOT_SEEN_SCOPE = next(sc for lit, cat, _, sc in CONTEXT_RULES if (lit, cat) == ("not seen", "NEGATED_EXISTENCE"))
# A denied change before "or new X" (_new_or_denied), and the words that open X.
_DENIED_CHANGE_LEAD = re.compile(r"^(?:no|without|there (?:is|are|has been|have been) no)\b")
_NEW_WORDS = frozenset({"new", "additional", "further"})


# The verbs that make the words after a clause opener (lexicon.CLAUSE_OPENERS) a clause
# (_new_clause), or the words before an "and the" one (_verb_before).
_CLAUSE_VERBS = frozenset(
    {"is", "are", "was", "were", "has", "have", "had", "remains", "remain", "appears", "appear", "persists"}
    | {"persist", "represents", "represent", "reflects", "reflect", "measures", "seems", "seem", "demonstrates"}
)


# Terminators that, beside a time word, describe a finding seen before (_seen_before):
# "opacity seen previously has cleared", "pneumothorax, previously noted, has resolved".
_SEEN_WORDS = frozenset({"seen", "noted", "present"})
_BEFORE_WORDS = frozenset({"previously", "earlier", "before", "formerly", "prior", "previous"})


# A change denied and a finding added: "no further worsening or new effusion".
_DENIED_CHANGE = frozenset(w for phrase in CHANGE_WORDS for w in phrase.split()) | {"or", "nor"}


def _denied_others(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with each PSEUDO cue of
    :data:`~cxrils.report.lexicon.DENIED_OTHERS` ("no other", "no further") made a forward
    negation where a finding follows it with only modifiers between ("no other focal
    consolidation", "no other infiltrates or masses", "no further worsening or new
    effusion"); elsewhere it denies something else and negates nothing ("no further
    follow-up is needed for the nodule")."""
    out = []
    for cue in cues:
        start, end, (literal, category, direction, max_scope) = cue
        nxt = min((a for a, _ in targets if a >= end), default=None)
        if (
            category == "PSEUDO"
            and literal in DENIED_OTHERS
            and nxt is not None
            and all(w.lower() in _DENIAL_MODIFIERS or w.lower() in _DENIED_CHANGE for w in words[end:nxt])
        ):
            cue = (start, end, (literal, "NEGATED_EXISTENCE", "FORWARD", None))
        out.append(cue)
    return out


def _seen_before(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence less the terminators of
    :data:`_SEEN_WORDS` ("seen", "noted", "present") that, next to a time word
    (:data:`_BEFORE_WORDS`: "seen previously", "previously noted", "seen on the prior"),
    describe the finding a backward negation then resolves, no other finding nor
    terminator between: "right lower lobe opacity seen previously has cleared",
    "pneumothorax, previously seen at the right apex, has resolved". They still end a
    cue's scope elsewhere ("no effusion, previously seen opacity persists", "opacity
    previously seen, effusion has resolved"). ``targets`` are the finding token spans
    ``(start, end)`` of the sentence."""
    back = [s for s, _, (_, cat, direction, _) in cues if cat == "NEGATED_EXISTENCE" and direction == "BACKWARD"]
    stops = [s for s, _, (lit, cat, _, _) in cues if cat == "TERMINATE" and lit not in _SEEN_WORDS]
    out = []
    for cue in cues:
        start, end, (literal, category, _, _) = cue
        if category == "TERMINATE" and literal in _SEEN_WORDS:
            before = [w.lower() for w in words[max(0, start - 1) : start]]
            after = [w.lower() for w in words[end : end + 3]]
            seen_before = (
                bool(set(before) & _BEFORE_WORDS)
                or after[:1] in (["previously"], ["earlier"], ["before"])
                or after[:1] in (["on"], ["in"])
                and bool(set(after[1:]) & _BEFORE_WORDS)
            )  # "previously seen", "seen previously", "seen on/in the prior" (not "present as before")
            cue_at = min((s for s in back if s >= end), default=None)
            if (
                seen_before
                and cue_at is not None
                and not any(end <= s < cue_at for s in stops)
                and not any(end <= a < cue_at for a, _ in targets)
            ):
                continue
        out.append(cue)
    return out


def _sentence_cues(
    words: list[str],
    targets: list[tuple[int, int]],
    found: list,
    question_gap: int,
    asking: tuple[frozenset[int], frozenset[int], bool] = (frozenset(), frozenset(), False),
) -> list:
    """The ConText cue matches ``found`` (``(start, end, rule)``, token indices) of a
    sentence after the sentence-level readings of this module, in order: terminators that
    describe a finding seen before (:func:`_seen_before`) or open no clause
    (:func:`_new_clause`), "not seen previously or ..." (:func:`_seen_now`), "A is
    favored over B" (:func:`_favored_over`), a comma before a stated finding
    (:func:`_stated_after_comma`), a two-way cue next to its finding (:func:`_one_way`),
    "and new" after a denial only
    (:func:`_change_after_and`), the scope of a clinical question or a reading not
    favored (:func:`_first_finding_scope`), "no change ... or new X"
    (:func:`_new_or_denied`), "no other X" (:func:`_denied_others`), a negated list's "or"
    (:func:`_listing_or`), and the comma-bounded scope of backward cues
    (:func:`_clause_scope`); first of all, a question mark's hedge (:func:`_question_marks`),
    and "if any", "more likely than not" and "this is likely" read one way or the other
    (:func:`_either_way`). ``targets`` are the finding
    token spans ``(start, end)``."""
    found = _question_marks(words, targets, found, question_gap, *asking)
    cues = _seen_before(words, targets, _one_way(words, targets, _either_way(words, targets, found)))
    cues = _favored_over(words, _one_view(words, _seen_now(words, _new_clause(words, targets, cues))))
    cues = _reading_after_without(words, targets, cues)
    cues = _first_finding_scope(words, targets, _change_after_and(targets, _stated_after_comma(words, targets, cues)))
    cues = _new_or_denied(words, targets, cues)
    return _clause_scope(words, targets, _listing_or(_denied_others(words, targets, cues)))


# Words that open a reading of a finding ("opacity without effusion, LIKELY atelectasis",
# "opacity without effusion MAY reflect pneumonia") (_reading_after_without).
_READING_OPENERS = frozenset(
    {"likely", "probably", "possibly", "most", "presumably", "concerning", "consistent", "compatible"}
    | {"suggestive", "suspicious", "worrisome", "may", "might", "could", "which", "representing", "reflecting"}
    | {"suggesting", "favoring", "favouring", "indicating"}
)


# The readings that open with a verb of their own, with no comma before them ("opacity
# without effusion MAY reflect pneumonia").
_READING_VERB_OPENERS = frozenset({"may", "might", "could", "which"})


def _reading_after_without(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with the scope of a forward
    "without" (or "with no") that follows a finding ended where a reading of that finding
    starts after the denied one(s): "patchy left basilar opacity, without effusion, likely
    atelectasis" and "right lower lobe consolidation without effusion, consistent with
    pneumonia" deny the effusion only (the reading, :data:`_READING_OPENERS` after the
    denied list's comma, or :data:`_READING_VERB_OPENERS` right after the list, is the
    opacity's); "small left effusion without consolidation concerning for pneumonia"
    denies the pneumonia too. A "without" that opens the sentence
    keeps its scope ("without effusion or consolidation to suggest pneumonia"), and so
    does "no" ("no focal consolidation concerning for pneumonia" denies the pneumonia).
    ``targets`` are the finding token spans ``(start, end)``."""
    out = []
    for cue in cues:
        start, end, (literal, category, direction, max_scope) = cue
        if (
            category == "NEGATED_EXISTENCE"
            and direction == "FORWARD"
            and literal.startswith(("without", "with no"))
            and any(b <= start for _, b in targets)
        ):
            after = sorted(t for t in targets if t[0] >= end)
            if after:
                j = after[0][1]
                # the denied list goes on: "without effusion or pneumothorax, likely ..."
                for a, b in after[1:]:
                    if a - j <= 2 and all(w.lower() in _QUESTION_LIST_WORDS for w in words[j:a]):
                        j = b
                # after a comma any reading opens; without one only a verb of its own does
                # ("without consolidation concerning for pneumonia" denies the pneumonia)
                comma = j < len(words) and words[j] == ","
                k = j + 1 if comma else j
                if k < len(words) and words[k].lower() in (_READING_OPENERS if comma else _READING_VERB_OPENERS):
                    scope = j - end
                    cue = (
                        start,
                        end,
                        (literal, category, direction, scope if max_scope is None else min(scope, max_scope)),
                    )
        out.append(cue)
    return out


def _favored_over(words: list[str], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with a forward hedge added at the
    "over" of "A is favored over B" and at the "than" of "A is more (less) likely than B"
    (the backward cue hedges A; B, the other alternative, is tentative too; within
    :data:`_OVER_SCOPE` tokens)."""
    added = [
        (end, end + 1, ("over", "POSSIBLE_EXISTENCE", "FORWARD", _OVER_SCOPE))
        for _, end, (literal, category, _, _) in cues
        if category == "POSSIBLE_EXISTENCE"
        and literal in ("is favored", "are favored")
        and words[end : end + 1] == ["over"]
    ] + [
        (end - 1, end, ("than", "POSSIBLE_EXISTENCE", "FORWARD", _OVER_SCOPE))
        for _, end, (literal, category, direction, _) in cues
        if category == "POSSIBLE_EXISTENCE" and direction == "BACKWARD" and literal.endswith("likely than")
    ]
    return sorted(cues + added, key=lambda c: (c[0], c[1])) if added else cues


def _seen_now(words: list[str], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with each PSEUDO cue of
    :data:`~cxrils.report.lexicon.NOT_SEEN_BEFORE` ("not seen previously": a new finding)
    made a backward negation, as "not seen" is, where "or", "nor" or "and" follows it:
    "pleural effusion is not seen previously or currently", "not identified before or
    after thoracentesis"."""
    out = []
    for cue in cues:
        start, end, (literal, category, _, _) = cue
        if category == "PSEUDO" and literal in NOT_SEEN_BEFORE and words[end : end + 1] in (["or"], ["nor"], ["and"]):
            cue = (start, end, (literal, "NEGATED_EXISTENCE", "BACKWARD", _NOT_SEEN_SCOPE))
        out.append(cue)
    return out


#: The views a report names (the lexicon's), and the words that say one shows a finding.
_VIEW_WORDS = frozenset(REPORT_VIEWS)
_SHOWN_WORDS = frozenset(
    {"seen", "visible", "evident", "noted", "identified", "demonstrated", "appreciated", "apparent", "present"}
)


def _one_view(words: list[str], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with each PSEUDO cue of
    :data:`~cxrils.report.lexicon.NOT_ON_ONE_VIEW` ("not seen on the lateral": the other
    view of the exam shows it) made a backward negation, as "not seen" is, where no view
    shows the finding: the single AP film ("not seen on the AP radiograph"), "either"
    after it ("not evident on the lateral radiograph either"), or another view named
    after it that is not said to show it ("not seen on the frontal view or the lateral
    view", "frontal, lateral, or oblique views"; but "not seen on the PA view and is seen
    only on the lateral view" keeps the finding). A single view said in another sentence
    ("Single portable view of the chest.") is not read."""
    out = []
    for cue in cues:
        start, end, (literal, category, _, _) = cue
        if category == "PSEUDO" and literal in NOT_ON_ONE_VIEW:
            after = [w.lower() for w in words[end:]]
            other = next((i for i, w in enumerate(after) if w in _VIEW_WORDS), None)
            shown = other is not None and any(w in _SHOWN_WORDS for w in after[:other])
            denied_again = other is not None and any(w in ("not", "nor", "no") for w in after[:other])
            if literal.endswith(" ap") or "either" in after or (other is not None and (not shown or denied_again)):
                cue = (start, end, (literal, "NEGATED_EXISTENCE", "BACKWARD", _NOT_SEEN_SCOPE))
        out.append(cue)
    return out


def _first_finding_scope(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with the scope of each
    :data:`~cxrils.report.lexicon.CLINICAL_QUESTION` and
    :data:`~cxrils.report.lexicon.NOT_FAVORED_TO` cue ended after the first finding
    that follows it, or the list of findings joined to it by "and", "or" or commas:
    "in the setting of clinical concern for pneumonia, right lower lobe opacity likely
    represents pneumonia" asks about the first pneumonia only, "clinical concern for
    pneumonia or pulmonary edema" about both; "opacity not favored to represent
    consolidation, more likely atelectasis" denies the consolidation only, and so does a
    forward reading against a finding ("left basilar opacity, unlikely to represent
    pneumonia, likely atelectasis" denies the pneumonia only). ``targets`` are the
    finding token spans ``(start, end)`` of the sentence."""
    out = []
    for cue in cues:
        start, end, (literal, category, direction, _) = cue
        if (
            literal in CLINICAL_QUESTION
            or literal in NOT_FAVORED_TO
            or direction == "FORWARD"
            and (literal in UNLIKELY_TO or literal in LESS_LIKELY_TO)
            and "than" not in (w.lower() for w in words[end:])  # "less likely to represent X than Y"
        ):
            after = sorted((a, b) for a, b in targets if a >= end)
            if after:
                last = after[0][1]
                for a, b in after[1:]:  # a list of findings asked together: "pneumonia or edema"
                    if not all(w.lower() in _QUESTION_LIST_WORDS for w in words[last:a]):
                        break
                    last = b
                cue = (start, end, (literal, category, direction, last - end))
        out.append(cue)
    return out


def _new_or_denied(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with a forward negation added at
    the "or" of "no <change> ... or new X" after a denied change (a PSEUDO cue that
    starts with "no", "without" or "there is no": "no significant improvement or new
    focal consolidation", "there is no increase in the small effusion or new
    consolidation"): the new finding is denied, and that "or" offers no alternative (the
    ALTERNATIVE cue there is dropped). ``targets`` are the finding token spans."""
    added: list = []
    for _, end, (literal, category, _, _) in cues:
        if category != "PSEUDO" or literal in DENIED_OTHERS or not _DENIED_CHANGE_LEAD.match(literal):
            continue
        for k in range(end, len(words)):
            if words[k] in (",", ";") or any(s == k and c[1] == "TERMINATE" for s, _, c in cues):
                break
            if words[k].lower() not in ("or", "nor"):
                continue
            nxt = min((a for a, _ in targets if a > k), default=None)
            between = [w.lower() for w in words[k + 1 : nxt]] if nxt is not None else []
            if between and between[0] in _NEW_WORDS and all(w in _DENIAL_MODIFIERS for w in between):
                added.append((k, k + 1, (words[k].lower(), "NEGATED_EXISTENCE", "FORWARD", None)))
            break
    if not added:
        return cues
    at = {a for a, _, _ in added}
    kept = [c for c in cues if not (c[2][1] == "ALTERNATIVE" and c[0] in at)]
    return sorted(kept + added, key=lambda c: (c[0], c[1]))


def _new_clause(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence less the terminators of
    :data:`~cxrils.report.lexicon.CLAUSE_OPENERS` (", the", ", and the") that open no clause: one ends a scope
    only where a verb of its own follows before the next comma ("without consolidation,
    the right effusion is unchanged"; not a list, "no pneumothorax, the pleural effusion,
    or edema", nor an aside, "effusions, the left larger than the right, have resolved")
    and no backward negation or hedge follows in the sentence, whose subject the comma
    logic of :func:`_clause_scope` finds ("the right effusion, the left atelectasis and
    the edema have resolved"). A backward hedge with a finding right after it is a
    reading, not such a cue: "without evidence of pneumonia, the left basilar opacity is
    likely atelectasis" ends the denial at ", the". ``targets`` are the finding token
    spans ``(start, end)``."""
    starts = {a for a, _ in targets}
    later_backward = [
        s
        for s, e, (_, cat, direction, _) in cues
        if direction == "BACKWARD" and cat in ("NEGATED_EXISTENCE", "POSSIBLE_EXISTENCE") and e not in starts
    ]
    out = []
    for cue in cues:
        start, end, (literal, category, _, _) = cue
        if category == "TERMINATE" and literal in CLAUSE_OPENERS:
            clause = []
            for w in words[end:]:
                if w in (",", ";"):
                    break
                clause.append(w.lower())
            verb = any(w in _CLAUSE_VERBS for w in clause) and "than" not in clause
            if not verb or any(s >= end for s in later_backward):
                continue
        out.append(cue)
    return out


# Words that open a stated finding after a comma, not one more item of a negated list:
# a size, a change or a side ("no pneumothorax, small left effusion").
# Size words that open a stated finding, also after "and" with no comma ("no effusion and
# mild cardiomegaly"); a change or a side there may go on the denied list ("no evidence
# of pneumothorax and worsening effusion" stays unsure, so denied).
_SIZE_OPENERS = frozenset(
    {"small", "mild", "mildly", "minimal", "trace", "tiny", "moderate", "moderately", "severe", "marked"}
)
_STATED_OPENERS = (
    _SIZE_OPENERS
    | {"new", "increased", "increasing", "worsening", "worsened", "enlarging", "developing", "residual"}
    | {"left", "right", "bilateral", "bibasilar", "bibasal", "biapical", "retrocardiac", "lingular", "a"}
)
# Words that go on listing after the comma of a stated finding (_stated_after_comma).
_LISTING = _QUESTION_LIST_WORDS | {"versus", "vs", "&"}
# Words that may stand between such an opener and the finding: more of them, and places.
_STATED_MODIFIERS = _STATED_OPENERS | frozenset(
    {"lower", "upper", "middle", "mid", "lobe", "lung", "zone", "basilar", "basal", "base", "apical"}
    | {"perihilar", "patchy", "streaky", "linear", "subsegmental", "plate-like", "platelike", "and", "to"}
    | {"pleural", "pulmonary", "interstitial", "airspace", "focal", "-", "sided", "large"}
)


# Words that may stand between a two-way cue and the finding it leads ("suspected RIGHT
# LOWER LOBE pneumonia", "resolved LEFT effusion") (_one_way).
_LEAD_WORDS = (_STATED_MODIFIERS - {"and", "to", "-"}) | frozenset({"the", "an", "of", "early", "developing"})
# Words that may stand between a finding and the two-way cue that follows it ("pneumonia
# IS not excluded", "the effusion HAS resolved").
_TRAIL_WORDS = frozenset({"is", "are", "was", "were", "has", "have", "had", "been", "be", "now", "also", "since"})


# Words that may stand between a finding and the "if any" after it: its place, punctuation,
# a copula or a word of its course ("trace pleural effusion on the left, if any", "small
# left effusion is unchanged, if any"; not "consolidation, please correlate with prior
# imaging if any") (_either_way).
_IF_ANY_GAP = frozenset({",", "the", "on", "in", "at", "of", "within", "is", "are", "seen", "noted", "present"}) | {
    "unchanged",
    "stable",
    "persists",
    "persist",
    "persistent",
    "remains",
    "remain",
    "again",
    "still",
}
# A size word that, right before "if any", is said of the finding after it ("minimal if any
# pleural effusion"), or after a copula of the finding before ("effusions are small, if any").
_IF_ANY_SIZES = _SIZE_OPENERS | {"slight", "little", "very"}
_COPULAS = frozenset({"is", "are", "remains", "remain", "appears", "appear", "seems", "seem"})


def _nearest_before(targets: list[tuple[int, int]], start: int, reach: int) -> tuple[int, int] | None:
    """The finding span ending last at or before token ``start``, within ``reach`` tokens."""
    return max(((a, b) for a, b in targets if start - reach <= b <= start), key=lambda t: t[1], default=None)


# Words that open a question ("Is there pneumonia?", "Any effusion?") (_question_marks).
_QUESTION_OPENERS = frozenset({"is", "are", "any", "question", "could", "can", "does", "do", "has", "have"})


def _glued_before(sent: Sentence) -> frozenset[int]:
    """Token indices of the question marks of ``sent`` written right after a word, with
    no space ("pneumonia?")."""
    return frozenset(
        i
        for i, w in enumerate(sent.words)
        if w == "?" and i > 0 and sent.tok_end[i - 1] == sent.tok_start[i] and sent.words[i - 1][-1].isalnum()
    )


def _answered_yes(text: str, sent: Sentence) -> bool:
    """Whether the sentence after ``sent`` opens with "yes" ("Does the patient have
    pneumonia? Yes, right lower lobe consolidation.")."""
    return re.match(r"\s*yes\b", text[sent.end :], re.IGNORECASE) is not None


def _asking_marks(text: str, sent: Sentence) -> frozenset[int]:
    """Token indices of the question marks of ``sent`` that may question a finding
    (:func:`_question_marks`); not those that stand for a character lost in an encoding,
    as the COVID-19 case notes of the shared data hold them: one glued to a letter or digit
    on both sides ("SARS?CoV?2", "2?days", "patient?s"), one before a number ("? 2 cm",
    "4.3 ? 109 cells", also where the number opens the next sentence), and one that opens
    its sentence before an upper-case word ("? Bilateral consolidation.", a lost bullet)."""
    words, n = sent.words, len(sent.words)
    glued = _glued_before(sent)
    out = set()
    for i, w in enumerate(words):
        if w != "?":
            continue
        glued_after = i + 1 < n and sent.tok_start[i + 1] == sent.tok_end[i] and words[i + 1][0].isalnum()
        if i in glued and glued_after:
            continue
        after = words[i + 1] if i + 1 < n else text[sent.end :].lstrip()[:1]
        if after[:1].isdigit():  # also after the sentence: "? 2 cm" ends one at the "?"
            continue
        if i == 0 and i + 1 < n and not glued_after and text[sent.tok_start[i + 1]].isupper():
            continue
        out.add(i)
    return frozenset(out)


# Words after a "?" that doubt the finding before it, not name what it is ("left lower zone
# opacity ?nipple shadow", "?artefact", "?projectional", "?real"; a review).
_QUESTIONED_REALITY = frozenset(
    {"nipple", "artefact", "artifact", "artefactual", "artifactual", "overlying", "overlapping", "projectional"}
    | {"projection", "real", "true", "technical", "rotation", "rotational", "summation", "positional", "skin"}
    | {"genuine"}
)


def _doubts_reality(after: list[str]) -> bool:
    """Whether the (up to two) words after a "?" doubt the finding before it:
    :data:`_QUESTIONED_REALITY`, or "breast shadow", "soft tissue", "vessel on end", and
    "significant" closing the sentence ("shadowing ?significant." but not "effusion
    ?significant change")."""
    if not after:
        return False
    first, second = after[0], (after[1] if len(after) > 1 else "")
    return (
        first in _QUESTIONED_REALITY
        or (first, second) in {("breast", "shadow"), ("breast", "shadowing"), ("breast", "tissue"), ("soft", "tissue")}
        or first in ("vessel", "vessels")
        or (first == "significant" and not second[:1].isalpha())
    )


def _question_marks(
    words: list[str],
    targets: list[tuple[int, int]],
    cues: list,
    gap: int,
    asking: frozenset[int],
    glued_before: frozenset[int] = frozenset(),
    answered_yes: bool = False,
) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with a hedge (POSSIBLE_EXISTENCE)
    for each question mark of ``asking`` (:func:`_asking_marks`) that questions a finding,
    as a radiologist writes it: right before it with at most ``gap`` words
    (``ReportConfig.question_mark_words``) and no punctuation or cue between ("? pneumonia",
    "opacity, ?RLL pneumonia", "Right basal consolidation ?infection"; not "? no
    pneumothorax"), or right after it ("Pneumonia?", "consolidation (pneumonia?)"), which
    wins where the "?" is glued to the finding before it (``glued_before``: token indices)
    and not followed by a finding. Each hedges that finding only (the other findings of
    "Right lower lobe opacity, ?pneumonia." stay definitive). One that ends a sentence
    opening as a question asks, as "evaluate for" does (HYPOTHETICAL: "Is there pneumonia in
    the right lower lobe?"), unless the next sentence opens with "yes" (``answered_yes``).
    One answered "yes" ("Effusion? Yes.") hedges nothing, and one answered by a denial is a cue of its own ("Effusion? No.",
    :data:`cxrils.report.lexicon.CONTEXT_RULES`). The sentence splitter keeps a leading
    "?", one before a lower-case word and one before its one-word answer in their sentence
    (:func:`cxrils.report.tokens.split_sentences`)."""
    added = []
    in_cues = {q for start, end, _ in cues for q in range(start, end)}  # "Effusion? No."
    for q in sorted(asking - in_cues):
        if words[q + 1 : q + 2] == ["yes"]:
            continue
        before = next(((a, b) for a, b in targets if b == q), None)
        after = next((a for a, _ in targets if q < a <= q + 1 + gap), None)
        if after is not None and not all(
            x.isalnum() and k not in in_cues for k, x in enumerate(words[q + 1 : after], q + 1)
        ):
            after = None
        if q == len(words) - 1 and words[0] in _QUESTION_OPENERS:
            if not answered_yes:
                added.append((q, q + 1, ("?", "HYPOTHETICAL", "BACKWARD", None)))
        elif after is not None and (before is None or q not in glued_before):
            added.append((q, q + 1, ("?", "POSSIBLE_EXISTENCE", "FORWARD", after - q)))
        elif before is not None and (
            q in glued_before
            or not words[q + 1 : q + 2]
            or not words[q + 1][0].isalnum()
            or _doubts_reality(words[q + 1 : q + 3])
        ):
            # not "shadowing ?TB": a "?" before a word that is no finding questions that word,
            # unless the word doubts the finding itself ("opacity ?nipple shadow")
            added.append((q, q + 1, ("?", "POSSIBLE_EXISTENCE", "BACKWARD", before[1] - before[0])))
    return sorted(cues + added, key=lambda c: c[0]) if added else cues


def _either_way(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with the readings of cues that
    read one way or the other by what stands next to them:

    * "if any", "if present" (:data:`~cxrils.report.lexicon.IF_ANY`): a question (as a
      bare "if") about the finding right after them ("minimal, if any, pulmonary edema",
      "bibasilar atelectasis, minimal if any pleural effusion"); else a hedge of the one
      finding just before them, within their backward scope with only its place, a copula
      or a word of its course between ("trace pleural effusion on the left, if any",
      "small left effusion is unchanged, if any", "effusions are small, if any"; the
      terminators "seen", "present" between are dropped, and earlier findings of a list
      are not reached: "pneumonia and small left effusion, if any" hedges the effusion);
      after a size word said of nothing ("large right effusion, minimal if any on the
      left") they hedge nothing;
    * "more likely than not" (:data:`~cxrils.report.lexicon.MORE_LIKELY_THAN_NOT`) hedges
      the finding after it ("the opacity is more likely than not pneumonia"); at the end
      of the sentence ("pneumonia is more likely than not."), the one finding before it;
      not a finding a word of its own is said of ("the effusion is more likely than not
      loculated": the effusion stated);
    * "this/which is (most) likely" (:data:`~cxrils.report.lexicon.REFERRING_LIKELY`)
      hedges forward to the clause's next comma ("which is most likely due to a
      combination of effusion and atelectasis"; not "which is likely small, and left
      lower lobe pneumonia");
    * "is likely" hedges the finding before it ("pneumonia is likely"), but the finding
      right after it when there is one, after "a" or "an" at most (and the findings right
      after that one: "is likely aspiration pneumonia"): "the opacity in
      the right lower lobe is likely consolidation" states the opacity and hedges the
      consolidation (reader trial: the other way round).

    ``targets`` are the finding token spans ``(start, end)``."""
    out = []
    drop: set[int] = set()  # terminators between a finding and its "if any"
    for cue in cues:
        start, end, (literal, category, direction, scope) = cue
        if literal in IF_ANY:
            k = end + (end < len(words) and words[end] == ",")
            after = [(a, b) for a, b in targets if k <= a <= k + 2]
            j = start - (start > 0 and words[start - 1] == ",")
            sized = j > 0 and words[j - 1].lower() in _IF_ANY_SIZES
            predicate = sized and j > 1 and words[j - 2].lower() in _COPULAS
            near = _nearest_before(targets, start, scope or 0)
            gap_ok = near is not None and all(
                w.lower() in _IF_ANY_GAP or LOCATION_RE.fullmatch(w) or (predicate and w.lower() in _IF_ANY_SIZES)
                for w in words[near[1] : start]
            )
            if after or (near is None and not sized):
                first = min(after)[1] if after else None
                cue = (start, end, ("if", "HYPOTHETICAL", "FORWARD", None if first is None else first - end))
            elif gap_ok and (not sized or predicate):
                cue = (start, end, (literal, category, "BACKWARD", start - near[0]))
                drop.update(range(near[1], start))
            else:
                cue = (start, end, (literal, "PSEUDO", "PSEUDO", None))
        elif literal in MORE_LIKELY_THAN_NOT:
            follows = any(end <= a <= end + (scope or 0) for a, _ in targets)
            closes = end >= len(words) or words[end] == "."
            near = _nearest_before(targets, start, 8)
            if not follows and closes and near is not None:
                cue = (start, end, (literal, category, "BACKWARD", start - near[0]))
        elif literal in REFERRING_LIKELY:
            comma = next((i for i in range(end, len(words)) if words[i] in (",", ";")), len(words))
            cue = (start, end, (literal, category, direction, comma - end))
        elif literal in ("is likely", "are likely"):
            named = next(
                ((a, b) for a, b in targets if end <= a <= end + 1 and all(w in ("a", "an") for w in words[end:a])),
                None,
            )
            if named is not None:  # "the opacity is likely consolidation": the reading, not the opacity
                last = named[1]
                while (nxt := next((b for a, b in targets if a == last), None)) is not None:
                    last = nxt  # "is likely aspiration pneumonia": both words of the reading
                cue = (start, end, (literal, category, "FORWARD", last - end))
        out.append(cue)
    return [c for c in out if not (c[2][1] == "TERMINATE" and c[0] in drop)]


def _one_way(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with each two-way hedge or
    negation (a literal the lexicon lists both before and after a finding: "suspected",
    "questionable", "not excluded", "resolved") turned one way where a finding stands
    right next to it: forward where one follows it (only :data:`_LEAD_WORDS` between:
    "moderate cardiomegaly and suspected right lower lobe pneumonia" hedges the pneumonia
    only), backward where one precedes it (only :data:`_TRAIL_WORDS` between: "right
    basilar atelectasis, pneumonia not excluded" hedges the pneumonia, and the backward
    scope then stops at the comma, :func:`_clause_scope`; "pneumonia resolved, small left
    effusion" denies the pneumonia only; with a finding on each side, "pneumonia resolved
    small residual effusion", backward: a cue right after a finding is its predicate). A
    two-way cue with no finding next to it ("pneumothorax and effusion, resolved") keeps
    both ways. A reading against a finding (:data:`~cxrils.report.lexicon.UNLIKELY_TO`,
    :data:`~cxrils.report.lexicon.LESS_LIKELY_TO`) is forward where a finding follows it
    ("the opacity is unlikely to represent pneumonia" denies the pneumonia), else backward
    ("pneumonia is unlikely to be present"). ``targets`` are the finding token spans
    ``(start, end)``."""
    starts, ends = {a for a, _ in targets}, {b for _, b in targets}
    out = []
    for cue in cues:
        start, end, (literal, category, direction, max_scope) = cue
        if direction == "BIDIRECTIONAL" and category in ("POSSIBLE_EXISTENCE", "NEGATED_EXISTENCE"):
            j = end
            while j < len(words) and j not in starts and words[j].lower() in _LEAD_WORDS:
                j += 1
            k = start
            while k > 0 and k not in ends and words[k - 1].lower() in _TRAIL_WORDS:
                k -= 1
            if literal in UNLIKELY_TO or literal in LESS_LIKELY_TO:
                # a reading of what follows ("opacity is unlikely to represent pneumonia"),
                # else of what precedes ("pneumonia is unlikely to be present")
                way, scope = ("FORWARD", 4) if j in starts else ("BACKWARD", max_scope)
                cue = (start, end, (literal, category, way, scope))
            elif k in ends:  # a finding on both sides ("pneumonia resolved small effusion"): its predicate
                # over the whole list it ends: "pneumothorax, effusion and consolidation resolved"
                first = _list_start(words, targets, k)
                scope = max_scope if max_scope is None else max(max_scope, start - first)
                cue = (start, end, (literal, category, "BACKWARD", scope))
            elif j in starts:
                cue = (start, end, (literal, category, "FORWARD", max_scope))
        out.append(cue)
    return out


def _list_start(words: list[str], targets: list[tuple[int, int]], k: int) -> int:
    """The first token of the list of findings that ends at token ``k`` (findings joined
    by commas, "and", "or" and the words of :data:`_LEAD_WORDS` only). A finding that
    stands as a clause of its own before a comma (:func:`_stated`: "moderate
    cardiomegaly, small left effusion and pneumothorax resolved") is not in the list."""
    spans = sorted(targets)
    first = k
    while True:
        before = [t for t in spans if t[1] <= first]
        if not before:
            return first
        a, b = before[-1]
        between = [w.lower() for w in words[b:first]]
        if b != first and not all(w in _LISTING or w in _LEAD_WORDS for w in between):
            return first
        if b != first and not any(w in _LISTING for w in between):
            return first  # two findings with no list word between: not one list
        if "," in between and _stated(words, targets, b + between.index(",")):
            return first
        j = a  # modifiers before it belong to it ("small left effusion")
        while j > 0 and words[j - 1].lower() in _LEAD_WORDS:
            j -= 1
        first = j


def _stated_after_comma(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence with a terminator added at a
    comma that follows a forward negation and a finding it denies, where a last item
    follows with a size, change or side word of its own (:data:`_STATED_OPENERS`) and
    nothing more is listed after the comma (no comma, "and", "or", "nor", "/", "versus"):
    "no pneumothorax, small left effusion" and "without pneumothorax or effusion,
    moderate cardiomegaly is seen" state the effusion and the cardiomegaly; "no
    pneumothorax, small effusion, or consolidation", "no pneumonia, bilateral effusions,
    pulmonary edema", "no pneumothorax, effusion, left lower lobe consolidation", "no
    pneumothorax, small left effusion and atelectasis" (which may list three) and "there
    is no large, left-sided effusion" (no finding before the comma) stay negated. The
    same holds at ", and" ("no edema or effusion, and mild cardiomegaly is stable") and,
    with a size word only (:data:`_SIZE_OPENERS`, an article before it allowed), at a bare
    "and": "no effusion and mild cardiomegaly" and "with no pneumothorax and a small
    residual left effusion" state the cardiomegaly and the effusion; "no evidence of pneumothorax and worsening
    effusion" stays denied. A forward hedge ends so at a comma too: "bibasilar opacities,
    likely atelectasis, and small bilateral effusions" and "possible pneumonia, small left
    effusion" state the effusions (not at a bare "and": "possible small left effusion and
    mild atelectasis" may hedge both). A comma between two modifiers goes on with them ("no
    pneumothorax and mild, patchy atelectasis" states the atelectasis). ``targets`` are
    the finding token spans ``(start, end)``."""
    negations = [e for _, e, (_, cat, direction, _) in cues if cat == "NEGATED_EXISTENCE" and direction != "BACKWARD"]
    hedges = [e for _, e, (_, cat, direction, _) in cues if cat == "POSSIBLE_EXISTENCE" and direction == "FORWARD"]
    if not negations and not hedges:
        return cues
    starts = {a for a, _ in targets}
    added = []
    for k, w in enumerate(words):
        if w == ",":  # ", small left effusion", ", and mild cardiomegaly is stable"
            first = k + 2 if [x.lower() for x in words[k + 1 : k + 2]] == ["and"] else k + 1
            openers, leads = _STATED_OPENERS, negations + hedges
        elif w.lower() == "and" and not (k and words[k - 1] == ","):  # "and (a) mild cardiomegaly"
            first, openers, leads = k + 1, _SIZE_OPENERS, negations
            if [x.lower() for x in words[first : first + 1]] in (["a"], ["an"]):
                first += 1
                if [x.lower() for x in words[first : first + 1]] == ["new"]:  # "and a new small opacity"
                    first += 1
        else:
            continue
        if first >= len(words) or words[first].lower() not in openers:
            continue
        # the negation's list before the comma: one or more findings, closed ("no A or B")
        # or without a comma
        if not any(e <= a and b <= k and _closed_list(words[e:k]) for e in leads for a, b in targets):
            continue
        j = first
        # "mild, patchy atelectasis": a comma between two modifiers goes on with them
        while (
            j < len(words)
            and j not in starts
            and (
                words[j].lower() in _STATED_MODIFIERS
                or words[j] == ","
                and j > first
                and j + 1 < len(words)
                and words[j + 1].lower() in _STATED_MODIFIERS
            )
        ):
            j += 1
        # nothing more listed after it: no list word, or no finding after it ("no
        # pneumothorax and trace bilateral effusions, unchanged"), up to a denial of its own
        # ("no edema, small right effusion, no pneumothorax")
        stop = min(
            (a for a, _, (_, cat, way, _) in cues if cat == "NEGATED_EXISTENCE" and way != "BACKWARD" and a > j),
            default=len(words),
        )
        if j not in starts or (
            any(x.lower() in _LISTING for x in words[first:stop]) and any(j < a < stop for a, _ in targets)
        ):
            continue
        added.append((k, k + 1, (",", "TERMINATE", "TERMINATE", None)))
    return sorted(cues + added, key=lambda c: (c[0], c[1])) if added else cues


def _closed_list(span: list[str]) -> bool:
    """Whether a negation's list (the words from the negation to a comma or "and") has no
    comma, or ends in "or"/"nor" after its last one ("no consolidation, effusion, or
    pneumothorax": closed, so what follows is not one more item)."""
    if "," not in span:
        return True
    last = len(span) - 1 - span[::-1].index(",")
    return any(w.lower() in ("or", "nor") for w in span[last + 1 :])


def _change_after_and(targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence less the terminators of
    :data:`~cxrils.report.lexicon.AND_CHANGE` ("and new", "and increased") that end no
    resolution: one ends a scope only where the last cue before it is a resolution or
    clearing ("resolution of", "clearing of") and a finding stands between the two
    ("resolution of the right effusion and new small left effusion"); "evaluate for
    pneumonia and new effusion" asks about both, "cannot exclude pneumonia and
    increasing effusion" hedges both, and after a plain negation the reading is unsure
    ("no evidence of pneumothorax and worsening effusion"), so it stays denied.
    ``targets`` are the finding token spans ``(start, end)``."""
    out: list = []
    for cue in cues:
        start, _, (literal, category, _, _) = cue
        if category == "TERMINATE" and literal in AND_CHANGE:
            before = [c for c in out if c[2][1] != "TERMINATE" and c[2][2] != "BACKWARD" and c[1] <= start]
            last = before[-1] if before else None
            if (
                last is None
                or last[2][1] != "NEGATED_EXISTENCE"
                or not ("resolution" in last[2][0] or "clearing" in last[2][0])
                or not any(last[1] <= a and b <= start for a, b in targets)
            ):
                continue
        out.append(cue)
    return out


def _listing_or(cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence (token indices), less the
    alternatives that only join a negated list: "no change in the effusion or the
    atelectasis", "no effusion or pneumothorax" (a negation or a "no change" pseudo-cue
    before the "or", no terminator between). The list ends where the negation's scope
    does: a cue with a ``max_scope`` ("lungs are clear", one token) lists nothing past
    it, so "the right lung is clear, left basilar atelectasis or pneumonia" keeps its
    differential."""
    out, listing_until = [], -1.0  # token index where the open negated list ends
    for cue in cues:
        start, end, (literal, category, direction, max_scope) = cue
        if (
            category == "NEGATED_EXISTENCE"
            and direction != "BACKWARD"
            or category == "PSEUDO"
            and literal.split()[0] in ("no", "not", "without")
        ):
            listing_until = max(listing_until, end + max_scope if max_scope is not None else math.inf)
        elif category == "TERMINATE":
            listing_until = -1.0
        elif category == "ALTERNATIVE" and start < listing_until:
            continue
        out.append(cue)
    return out


def _clause_scope(words: list[str], targets: list[tuple[int, int]], cues: list) -> list:
    """Cue matches ``(start, end, rule)`` of a sentence, with the scope of each backward
    hedge ended at a comma that starts a new finding: "moderate cardiomegaly, bibasilar
    atelectasis and a small left effusion, edema is also a consideration" hedges the
    edema only. The subject is the finding just before the cue, with its modifiers, when
    a comma comes before it and no "and"/"or" joins it to the findings before; otherwise
    the scope stays the rule's ("a pneumonia superimposed on chronic scarring would be a
    consideration", "atelectasis or pneumonia is possible"), and so it does when an
    alternative runs up to the comma ("cardiomegaly or less likely, pericardial effusion
    is suspected"). A backward negation stops so too ("right pleural effusion, left
    pneumothorax not seen"). ", and" after a finding that is a clause of its own
    (:func:`_and_after_clause`) is such a comma: "small left effusion, and pneumothorax is
    not seen". A backward negation also stops at the last comma before it where a subject of its own
    stands between that comma and the cue (:func:`_own_subject`: "retrocardiac opacity,
    the left hemidiaphragm is not seen"). ``targets`` are the finding token spans ``(start,
    end)`` of the sentence."""
    out = []
    for cue in cues:
        start, end, (literal, category, direction, max_scope) = cue
        subject = max(((a, b) for a, b in targets if b <= start), key=lambda t: t[1], default=None)
        negation = category == "NEGATED_EXISTENCE" and direction == "BACKWARD"
        if negation and subject is not None:
            # "Retrocardiac opacity, the left hemidiaphragm is not seen": after the last comma
            # the cue has a subject of its own, so it stops there ("the effusion, on the
            # left, has resolved" keeps the effusion: nothing but the verb after that comma);
            # not a list going on ("consolidation, atelectasis, and blunting ... have
            # cleared") nor an aside ("pneumothorax, at the right apex has resolved")
            commas = [k for k in range(subject[1], start) if words[k] == ","]
            if commas:
                after = [w.lower() for w in words[commas[-1] + 1 : start]]
                if _own_subject(after):
                    cue = (start, end, (literal, category, direction, start - commas[-1] - 1))
                out.append(cue)
                continue
            # "the heart is mildly enlarged and the mediastinal contours are within normal
            # limits": after "and the" the cue has a subject of its own, as after a comma
            ands = [k for k in range(subject[1], start - 1) if _clause_and(words, k)]
            if ands and _own_subject([w.lower() for w in words[ands[-1] + 1 : start]]):
                out.append((start, end, (literal, category, direction, start - ands[-1] - 1)))
                continue
            if any(w.lower() in _PLURAL_VERBS for w in words[subject[1] : end]):  # the cue's own "have" too
                out.append(cue)  # "pneumothorax, effusion have resolved": the list is the subject
                continue
        if (
            not (category == "POSSIBLE_EXISTENCE" or negation)
            or direction != "BACKWARD"
            or subject is None
            or any(w in _LIST_WORDS for w in words[subject[1] : start])
        ):
            out.append(cue)
            continue
        comma, joined = None, False
        for k in range(subject[0] - 1, -1, -1):
            # "right effusion noted previously is now small and the pneumothorax has
            # resolved": "and the" after a clause with its verb is a comma there
            if words[k] == "," or _clause_and(words, k) and _verb_before(words, targets, k):
                comma = k
                break
            # "small left effusion, and pneumothorax is not seen": ", and" after a
            # finding stated as a clause of its own opens a clause too
            # (not where a plural verb follows: "bibasilar opacities, small effusions, and
            # pulmonary edema are less likely" hedges the list)
            if _and_after_clause(words, targets, k) and not any(
                w.lower() in _PLURAL_VERBS for w in words[subject[1] : end]
            ):
                comma, joined = (k - 1 if words[k - 1] == "," else k), True
                break
            if words[k] in _LIST_WORDS or any(a <= k < b for a, b in targets):
                break
        # "cardiomegaly or less XXXX, pericardial effusion is suspected": the comma
        # continues an alternative, it starts no new finding
        before = max((b for a, b in targets if b <= comma), default=0) if comma is not None else 0
        if comma is not None and any(w in _LIST_WORDS for w in words[before:comma]):
            comma = None
        lead = [w.lower() for w in words[comma + 1 : subject[0]]] if comma is not None else []
        if (
            negation
            and comma is not None
            and not joined
            and (lead and not _own_subject(lead) or not lead and not _stated(words, targets, comma))
        ):
            # "right basilar consolidation, concerning for pneumonia has cleared": an aside;
            # "pleural effusion, pneumothorax not seen": a list. The subject right after the
            # comma is a clause of its own where the finding before the comma is one too
            # (_stated: "left lower lobe opacity, pneumonia is unlikely")
            comma = None
        if comma is not None and (max_scope is None or start - comma - 1 < max_scope):
            cue = (start, end, (literal, category, direction, start - comma - 1))
        out.append(cue)
    return out


def _stated(words: list[str], targets: list[tuple[int, int]], comma: int) -> bool:
    """Whether the finding right before token ``comma`` is a clause of its own, not a
    bare item of a list: a word other than an article (or "pleural", "pulmonary") stands
    with it between the last comma (or the sentence start) and ``comma`` ("mild
    cardiomegaly", "left lower lobe opacity", "atelectasis is favored", "most likely
    atelectasis"; not "pleural effusion" in "pleural effusion, pneumothorax not seen")."""
    before = max((t for t in targets if t[1] <= comma), key=lambda t: t[1], default=None)
    if before is None:
        return False
    first = max((k for k in range(before[0]) if words[k] in (",", ";")), default=-1) + 1
    around = words[first : before[0]] + words[before[1] : comma]
    return any(w.lower() not in ("the", "a", "an", "pleural", "pulmonary") for w in around)


def _clause_and(words: list[str], k: int) -> bool:
    """Whether token ``k`` is the "and" of "and the" or of ", and" (a clause may start
    there: "pneumonia is unlikely but not excluded, and effusion is absent")."""
    pair = [w.lower() for w in words[k : k + 2]]
    return pair == ["and", "the"] or (pair[:1] == ["and"] and k > 0 and words[k - 1] == ",")


def _and_after_clause(words: list[str], targets: list[tuple[int, int]], k: int) -> bool:
    """Whether token ``k`` is an "and" after a finding that is a clause of its own: a verb
    stands in that clause ("the heart is enlarged and effusion is not seen", "the heart is
    enlarged, and a small effusion is also possible"), or, before ", and", a size, side or
    other word stands with the finding (:func:`_stated`: "small left effusion, and
    pneumothorax is not seen"); not after a bare list item ("pneumothorax, effusion, and
    consolidation is not seen", "pneumothorax and effusion are possible")."""
    if words[k].lower() != "and" or k == 0:
        return False
    comma = words[k - 1] == ","
    stop = k - 1 if comma else k
    first = max((j for j in range(stop) if words[j] in (",", ";")), default=-1) + 1
    verb = any(w.lower() in _CLAUSE_VERBS for w in words[first:stop])
    return verb or (comma and _stated(words, targets, k - 1))


def _verb_before(words: list[str], targets: list[tuple[int, int]], k: int) -> bool:
    """Whether a verb (:data:`_CLAUSE_VERBS`) stands between the last finding before token
    ``k`` and ``k``: the words before an "and the" are a clause, not a list item."""
    last = max((b for a, b in targets if b <= k), default=0)
    return any(w.lower() in _CLAUSE_VERBS for w in words[last:k])


def _denied_place(text: str, base: int, span: tuple[int, int, str], ms: list[_Mention], window: int) -> bool:
    """Whether the sentence rules the place ``span`` out (:data:`_DENIED_BEFORE` within
    ``window`` characters before it): "none in the left lung". Not when a finding follows
    it directly, with no comma between, whose place it is ("not right lower lobe
    pneumonia": the negation reads the pneumonia)."""
    s, e, _ = span
    if not _DENIED_BEFORE.search(text[max(base, s - window) : s]):
        return False
    nxt = min((m for m in ms if m.start >= e), key=lambda m: m.start, default=None)
    gap = text[e : nxt.start] if nxt is not None else ","
    return "," in gap or not _PREMOD.match(gap)  # "none on the left, small pneumothorax": not its place


def _compared_place(text: str, base: int, span: tuple[int, int, str], ms: list[_Mention], window: int) -> bool:
    """Whether the place ``span`` (document character offsets) is only the term of a
    comparison: "opacity of the right base compared to the left". Not when a finding
    follows it directly, whose place it is: "... compared to the right base opacity".
    ``base`` is the sentence's start; the comparison must start within ``window``
    characters before the place."""
    s, e, _ = span
    if not _REFERENCE_PLACE.search(text[max(base, s - window) : s]):
        return False
    nxt = min((m for m in ms if m.start >= e), key=lambda m: m.start, default=None)
    return nxt is None or not _PREMOD.match(text[e : nxt.start])


def _place_of_inference(gap: str, max_words: int) -> bool:
    """Whether ``gap`` (text from a place to the next finding, at most ``max_words``
    words) infers that finding from the place: ", consistent with a small" before
    "effusion"."""
    m = _PLACE_INFER.match(gap)
    return bool(m) and len(gap.split()) <= max_words and bool(_PREMOD.match(gap[m.end() :]))


def _named_other(text: str, ms: list[_Mention], i: int, max_words: int) -> bool:
    """Whether the density ``ms[i]`` is said, within ``max_words`` words, to be a finding
    that is no lung opacity (:data:`cxrils.report.lexicon.NON_LESION_DENSITY_FINDINGS`): "density consistent with
    a hiatal hernia", "density corresponding to a calcified granuloma". Never when the
    density has a predicted lesion type or a finding of a lesion type is among the
    alternatives offered ("left base density, likely scarring or atelectasis")."""
    if ms[i].predicted is not None or i + 1 >= len(ms) or ms[i + 1].entity not in NON_LESION_DENSITY_FINDINGS:
        return False
    k = i + 2  # the alternatives offered with it: "hiatal hernia or atelectasis"
    while k < len(ms) and _ALT_SIZED.match(text[ms[k - 1].end : ms[k].start]):
        if ms[k].lesion_type is not None:
            return False
        k += 1
    gap = text[ms[i].end : ms[i + 1].start]
    return (
        bool(_INFER.search(gap))
        and len(gap.split()) <= max_words
        and not re.search(r"[;]|\b(?:no|not|without|but)\b", gap, re.IGNORECASE)
    )


def _split_sides(ms: list[_Mention]) -> list[_Mention]:
    """ "small right and moderate left effusions": one finding per side, each with its
    own location (two separate location runs before one finding name two findings)."""
    out = []
    for m in ms:
        sided = [p for p in m.pre if _SIDES.search(p)]
        if len(m.pre) >= 2 and len(sided) == len(m.pre) and len({_SIDES.search(p).group(0).lower() for p in sided}) > 1:
            for p in m.pre:
                out.append(dataclasses.replace(m, pre=[p], post=list(m.post)))
        else:
            out.append(m)
    return out


_BOTH_WORDS = re.compile(rf"\b(?:{BOTH_SIDES_WORDS})\b")


def _without_extent_comparison(phrases: list[str]) -> list[str]:
    """A finding's places less a comparison of the sides (:data:`~cxrils.report.lexicon.COMPARED_SIDES_RE`:
    how the sides compare in extent, not a place of its own) when another place names where:
    "bibasilar atelectasis, right greater than left" lies at the bases, not in the whole
    lungs the comparison names on its own."""
    rest = [p for p in phrases if not COMPARED_SIDES_RE.match(p)]
    return rest or phrases


_BARE_SIDE = re.compile(r"^(?:right|left)(?:[- ]?sided| side)?$")


def _without_bare_side(phrases: list[str]) -> list[str]:
    """A finding's places less a bare side ("right", "on the left") that another of its
    places names with a lung region of that side: "minimal right sided perihilar
    atelectasis" and "basilar atelectasis on the left" lie in that region, not in the
    whole lung; a place naming both sides names either ("bibasilar atelectasis, worse on
    the left than on the prior study": the bases). A place outside the lung ("left
    effusion up to the aortic knob") or with no lung region keeps the side."""
    regions = [p for p in phrases if not _BARE_SIDE.match(p) and _names_lung_region(p)]
    named = {m.group(0) for p in regions for m in _SIDES.finditer(p)}
    if any(_BOTH_WORDS.search(p.lower()) for p in regions):
        named |= {"right", "left"}  # "bibasilar atelectasis, worse on the left than on the prior study"
    return [p for p in phrases if not (_BARE_SIDE.match(p) and _SIDES.search(p).group(0) in named)]


def _one_side(phrases: list[str]) -> list[str]:
    """A finding's places without a side take the one side its other places name:
    "minimal basilar infiltrate, left base" -> "left basilar", "left base"."""
    sides = {m.group(0) for p in phrases for m in _SIDES.finditer(p)}
    if len(sides) != 1:
        return phrases
    side = sides.pop()
    return [p if _SIDES.search(p) or _BOTH_WORDS.search(p) else f"{side} {p}" for p in phrases]


_CATEGORIES = LexiconLocationMapper()


@lru_cache(maxsize=4096)
def _names_lung_region(phrase: str) -> bool:
    """Whether a place phrase maps to a lung region (:data:`cxrils.vocab.LUNG_REGION_LABELS`;
    "right basilar", not "rib")."""
    return bool(set(_CATEGORIES.map(phrase)) & set(LUNG_REGION_LABELS))


@lru_cache(maxsize=4096)
def _lung_compatible(phrase: str) -> bool:
    """Whether a location phrase can be in the lung: one of its broad categories is in
    :data:`LUNG_FINDING_CATEGORIES`, it names the hila, or it has no category at all."""
    cats = _CATEGORIES.categories(phrase)
    return not cats or bool(HILAR_WORDS.search(phrase)) or any(c in LUNG_FINDING_CATEGORIES for c in cats)


# A size word right before a finding ("mild pulmonary edema", "moderate edema").
_SIZE_BEFORE = re.compile(r"\b(?:" + "|".join(sorted(_SIZE_OPENERS | {"large", "slight"})) + r")\s+$", re.IGNORECASE)


# The gap before another reading of an opacity, offered against the first: ", but", ";
# however,", "although", "though", with words of a superimposed process ("but early
# pneumonia", "although superimposed infection") (_other_reading).
_OTHER_READING_GAP = re.compile(
    r"^\s*(?:[,;]?\s*(?:but|however|although|though|while)|;)\s*,?\s*"
    r"(?:(?:an?|early|superimposed|underlying|developing|concurrent|coexistent|an element of|a component of)\s+)*$",
    re.IGNORECASE,
)


# The findings a second reading may follow (an opacity, an inference type, or an effusion
# that hides what lies under it), and the readings themselves (_other_reading).
_READ_AGAIN_TYPES = frozenset(NONSPECIFIC_TYPES | set(INFERENCE_LESION_TYPES) | {"effusion"})
_OTHER_READING_TYPES = frozenset(set(INFERENCE_LESION_TYPES) | {"consolidation"})


def _past_places(gap: str, places: list[str]) -> str:
    """The part of ``gap`` (text from a finding's end to the next finding) after the
    last of the finding's own places it holds: ", but " of " at the left base, but "
    (places ``["left base"]``), so that another reading after a located finding
    (:func:`_other_reading`) opens where its place ends. ``gap`` whole where it holds
    none of them."""
    low, end = gap.lower(), 0
    for p in places:
        i = low.rfind(p.lower())
        if i >= 0:
            end = max(end, i + len(p))
    return gap[end:]


def _other_reading(a: _Mention, b: _Mention, gap: str) -> bool:
    """Whether the unlocated ``b`` is a second reading of the located ``a``, offered in a
    clause of its own after "but", "however", "although", "though" or a semicolon (gap
    ``gap``): ``a`` is a positive opacity, effusion or finding of an inference type
    (:data:`cxrils.vocab.INFERENCE_LESION_TYPES`), ``b`` a tentative positive of an
    inference type or a consolidation ("opacity at the left base may be due to
    atelectasis, but pneumonia cannot be excluded": the pneumonia is at the left base;
    "layering effusions obscure the bases; underlying consolidation cannot be excluded":
    the consolidation at the bases). Not a denial ("left basilar
    atelectasis, but no pneumonia") nor a finding with a place of its own."""
    return (
        a.presence == "positive"
        and a.lesion_type in _READ_AGAIN_TYPES
        and b.presence == "positive"
        and b.certainty == "tentative"
        and b.lesion_type in _OTHER_READING_TYPES
        and bool(_OTHER_READING_GAP.match(gap))
    )


def _shared(places: list[str], receiver: _Mention, giver: _Mention, text: str) -> list[str]:
    """The places of one finding that another shares (coordination, an unlocated finding
    beside a located one): for a finding of a lesion type only those that can be in the
    lung (:func:`_lung_compatible`), since "healing left rib fractures and small pleural
    effusion" puts the fractures, not the effusion, in the rib. Edema, a diffuse process,
    described as a finding of its own (a size word before it, or "pulmonary",
    "interstitial" in its name) takes no one-sided place from a finding of another
    specific type: "small left pleural effusion and mild pulmonary edema" does not put
    the edema in the left lung; "left lung atelectasis and edema" and "bibasilar
    atelectasis and edema" share their places, and so does "right lung crowding,
    infiltrates or pulmonary edema" (a differential of one non-specific finding).
    ``text`` is the document the mentions' character offsets index."""
    if receiver.lesion_type is None:
        return list(places)
    if (
        receiver.lesion_type == "edema"
        and giver.lesion_type not in (None, "edema", *NONSPECIFIC_TYPES)
        and (len(receiver.entity.split()) > 1 or _SIZE_BEFORE.search(text[: receiver.start]))
    ):
        places = [p for p in places if not _SIDES.search(p)]
    return [p for p in places if _lung_compatible(p.lower())]


def _outside_lung(phrases: list[str]) -> bool:
    """Located, and every location is outside the lung (paper Appendix A.2 step 1)."""
    return bool(phrases) and not any(_lung_compatible(p.lower()) for p in phrases)


@dataclass(frozen=True)
class _Prepared:
    """The text the rules read, and where each of its characters came from in the
    report: ``starts[i]:ends[i]`` is the span of the original text that character ``i``
    of ``text`` stands for (a written-out lobe abbreviation stands for its letters)."""

    text: str
    original: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def quote(self, start: int, end: int) -> str:
        """The report's own words under ``text[start:end]``, whitespace collapsed."""
        chars = [i for i in range(start, end) if not self.text[i].isspace()]
        if not chars:
            return ""
        return " ".join(self.original[self.starts[chars[0]] : self.ends[chars[-1]]].split())

    def sub(self, pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str]) -> _Prepared:
        """``pattern.sub(repl, text)`` with the origins carried along: a replacement's
        characters each stand for the whole match."""
        matches = list(pattern.finditer(self.text))
        if not matches:  # most patterns match nothing in most reports
            return self
        out: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        for m in matches:
            a, b = m.start(), m.end()
            out.append(self.text[pos:a])
            starts.extend(self.starts[pos:a])
            ends.extend(self.ends[pos:a])
            r = repl(m)
            out.append(r)
            first = self.starts[a] if a < b else (self.ends[a - 1] if a else 0)
            last = self.ends[b - 1] if a < b else first
            starts.extend([first] * len(r))
            ends.extend([last] * len(r))
            pos = b
        out.append(self.text[pos:])
        starts.extend(self.starts[pos:])
        ends.extend(self.ends[pos:])
        return _Prepared("".join(out), self.original, tuple(starts), tuple(ends))


# Whitespace that collapsing changes: at either end, a run of two or more, or one that is
# no plain space (a single space between words is left as it is).
_SPACES = re.compile(r"^\s+|\s+$|\s{2,}|[^\S ]")
# An upper-case R or L as a word before a place word: "L base opacity", "R lung", "R and L
# lower lobes" (the letters alone are no side: "2 L of fluid"; nor a litre after a number:
# "1.2 L pleural fluid removed"; after a full stop they are: "effusion. L base opacity").
_SIDE_LETTER = re.compile(
    r"\b([RL])(?<!\d\s[RL])(?<!\d[RL])(?=(?:\s*(?:and|/|&)\s*[RL])?\s+(?i:lung|lungs|base|bases|basilar|basal|apex|apical|upper|mid|middle|lower|hemithorax|"
    r"costophrenic|cp|perihilar|hilar|hilum|lobe|pleural|chest|side|sided|effusion|effusions)\b)"
)


# Two sides compared by a sign: "R > L lower lobe opacities", "L>R basilar", "right > left"
# (read as "right greater than left", which names both sides).
_SIDES_COMPARED = re.compile(r"\b(right|left|R|L)\s*([<>])\s*(right|left|R|L)\b", re.IGNORECASE)
# Abbreviated and misspelt sides, written out: "B/L effusions", "bilat. effusions" (before
# the R/L letters: "B/L" is no "B/left"), "rt lower lobe", "lft base", "rigth" ("rt" and "lt"
# only before a word that is no preposition or verb, not after "s/p" or "post", and never the
# capitals "RT": radiation therapy, "after RT for breast cancer").
_SIDE_ABBREVIATION = re.compile(
    r"\b(?:(?P<both>b/l|bilat)\b\.?|(?<!s/p )(?<!post )(?P<right>(?-i:rt|Rt|rgt|Rgt))\b\.?(?=\s+(?!(?:for|to|of|in|at|with|is|was|therapy)\b)[a-z])|"
    r"(?<!s/p )(?<!post )(?P<left>lt|lft)\b\.?(?=\s+(?!(?:for|to|of|in|at|with|is|was)\b)[a-z])|(?P<typo>rigth)\b)",
    re.IGNORECASE,
)
_SIDE_WORD = {"r": "right", "l": "left", "right": "right", "left": "left"}
_COMPARISON = {">": "greater than", "<": "less than"}


def _prepare(text: str, line_statement_max_chars: int = 0) -> _Prepared:
    """Characters folded to ASCII where they have an ASCII spelling
    (:func:`cxrils.report.tokens.fold_text`: "Cardiomégaly", "œdema", full-width "Ｎｏ",
    "can’t", and "canâ€™t", UTF-8 read as cp1252), a short line without a full stop before
    a capitalised line ended as a statement (:func:`cxrils.report.lexicon.statement_breaks`: "No
    pneumothorax\nLarge left pleural effusion"; ``line_statement_max_chars``, 0 = never),
    whitespace collapsed, hyphenated lung places joined ("peri-hilar" -> "perihilar"), a full stop after a last sentence that has none ("Pneumothorax:
    None" is read as "Pneumothorax: None." is), "effusion.. Left" split as a sentence end, the upper-case
    lobe abbreviations written out (:func:`cxrils.report.locations.write_out_lobes`: "RLL"
    is no English word, so "consolidation in the RLL" is located as "right lower lobe" is),
    abbreviated sides written out ("B/L" -> "bilateral", "rt" -> "right"), two sides
    compared by a sign ("R > L" -> "right greater than left") and an R or L before a
    place word ("L base" -> "left base").
    A finding's ``sentence`` quotes the report's own words (:meth:`_Prepared.quote`)."""
    doc = _Prepared(text, text, tuple(range(len(text))), tuple(range(1, len(text) + 1)))
    doc = doc.sub(FOLDED_RE, fold_text)
    kept = {a for a, _ in statement_breaks(doc.text, line_statement_max_chars)}
    if kept:
        doc = doc.sub(BARE_LINE_END, lambda m: ".\n" if m.start() in kept else m.group(0))
    folded = len(doc.text)  # a fold may lengthen the text ("œ" -> "oe")
    doc = doc.sub(_SPACES, lambda m: "" if m.start() == 0 or m.end() == folded else " ")
    doc = doc.sub(_BARE_END, lambda m: ".")  # "Pneumothorax: None" ends as "Pneumothorax: None." does
    doc = doc.sub(UPPER_CASE_LOBE_RE, lambda m: write_out_lobes(m.group(0), any_case=False))
    doc = doc.sub(
        _SIDE_ABBREVIATION,
        lambda m: "bilateral" if m.group("both") else "left" if m.group("left") else "right",
    )
    doc = doc.sub(
        _SIDES_COMPARED,
        lambda m: f"{_SIDE_WORD[m.group(1).lower()]} {_COMPARISON[m.group(2)]} {_SIDE_WORD[m.group(3).lower()]}",
    )
    doc = doc.sub(_SIDE_LETTER, lambda m: "right" if m.group(1) == "R" else "left")
    doc = doc.sub(_FISSURE_FLUID, lambda m: "fissural fluid")
    doc = doc.sub(_HYPHENATED_PLACE, lambda m: m.group(1) + m.group(2))
    return doc.sub(_MULTI_STOP, lambda m: ". ")


def _dedupe(items: list[str]) -> list[str]:
    seen: list[str] = []
    for x in items:
        if x not in seen:
            seen.append(x)
    return seen


@lru_cache(maxsize=1)
def _matchers() -> tuple[Matcher, Matcher]:
    """The finding matcher and the ConText cue matcher, built once per process."""
    targets = Matcher(
        # a verb form ("is consolidated") is named by its type, as the paper's entity would be
        [
            (phrase, (t if phrase in REPORT_VERB_FORMS or phrase in REPORT_ABBREVIATIONS else phrase, t))
            for phrase, t in lesion_terms().items()
        ],
        [TokenPattern(p, ("cardiomegaly", "cardiomegaly")) for p in CARDIOMEGALY_PATTERNS]
        + [TokenPattern(p, ("vascular congestion", None)) for p in CONGESTION_PATTERNS],
    )
    cues = Matcher([(rule[0], rule) for rule in CONTEXT_RULES])
    return targets, cues
