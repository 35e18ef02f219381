"""The ``rules`` report structurer: lexicons + medspaCy ConText (CPU, no weights).

Pipeline per section text (paper section 3.1 step 1, the six-element tuples):

1. medspaCy's clinical tokenizer and spaCy's rule-based ``sentencizer``;
2. medspaCy's ``TargetMatcher`` with our finding lexicon
   (:func:`cxrils.report.lexicon.lesion_terms`, built on
   :data:`cxrils.vocab.LESION_SYNONYMS`, plus token patterns for cardiomegaly);
3. medspaCy's ``ConText`` with our cue rules
   (:data:`cxrils.report.lexicon.CONTEXT_RULES`): negation and resolution ->
   negative, hedging -> tentative, pseudo-cues ("no interval change in") ignored,
   hypothetical mentions dropped, scope ended by terminators ("but", ";");
4. location phrases found in the sentence and attached to the nearest finding
   they modify ("right lower lobe consolidation", "opacity in the left base");
5. a non-specific finding said to represent a disease gets a predicted lesion
   type ("opacity likely reflecting pneumonia" -> pneumonia, tentative).

Devices are not in the lexicon, so they are never extracted; "clear", "normal"
and "unremarkable" name no finding, so they never give a negative finding.
"""

from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass
from typing import Iterable

from cxrils.report.lexicon import (
    CARDIOMEGALY_PATTERNS, CONTEXT_RULES, EDEMA_PATTERNS, NONSPECIFIC_TYPES, find_locations, lesion_terms,
)
from cxrils.types import Finding
from cxrils.vocab import INFERENCE_LESION_TYPES

_NO_TYPE = "FINDING"  # TargetMatcher category of findings outside the seven types

# Words allowed between a location and the finding it precedes ("left SMALL effusion").
_PREMOD = re.compile(
    r"^(?:[\s,-]|\b(?:a|an|the|small|smaller|moderate|moderately|large|larger|mild|mildly|trace|minimal|tiny|"
    r"patchy|focal|streaky|linear|plate-?like|band-?like|dense|hazy|ill-defined|subtle|new|increased|increasing|"
    r"decreased|decreasing|persistent|residual|stable|unchanged|chronic|acute|layering|loculated|sized|"
    r"moderate-sized|small-to-moderate|some|airspace|air|space|pleural|sided|lung|lobe|zone|subsegmental|"
    r"segmental|lobar|nodular|interstitial|alveolar|confluent|consolidative|reticular|scattered|minor|"
    r"retrocardiac|basilar|mass-?like|rounded|round|faint|vague|slight|slightly|bandlike|discoid|"
    r"severe|marked|massive|underlying|possible|probable|likely|early|developing|worsening|worsened|"
    r"improving|improved|mid|upper|lower|area|areas|of|region)\b)*$",
    re.IGNORECASE,
)
# What may link a finding to a location that follows it ("opacity IN THE left base").
_POSTLINK = re.compile(
    r"^(?:[\s,]|\b(?:in|at|within|involving|of|along|overlying|over|projecting|is|are|seen|noted|present|"
    r"identified|the|a|both|which|that|predominantly|predominately|mostly|particularly|primarily|"
    r"mainly|most|more|marked|prominent|pronounced|greater|than|on|right|left|side|sided|"
    r"base|bases|lung|lungs|lobe|zone|region|regions|aspect|portion|level|and|or|slightly|"
    r"posterior|anterior|lateral|medial|bilaterally|diffusely|throughout|scattered|again|also|"
    r"persistent|stable|small|mild|moderate|large|trace|minimal|there)\b)*$",
    re.IGNORECASE,
)
_BREAK = re.compile(r"[;:]|\b(?:but|however|although|whereas|while|with|without|no)\b", re.IGNORECASE)
# Inference cues between a non-specific finding and the disease it represents.
_INFER = re.compile(
    r"\b(?:represent\w*|reflect\w*|consistent with|compatible with|suggest\w*|concerning for|suspicious for|"
    r"worrisome for|likely|probably|possibly|may be|could be|due to|secondary to|related to|"
    r"indicative of|characteristic of|favou?r\w*|most likely|presumably|typical of|which is|which are)\b",
    re.IGNORECASE,
)
_HEDGE_INFER = re.compile(
    r"\b(?:likely|probably|possibly|possible|may|might|could|suggest\w*|concerning|suspicious|worrisome|"
    r"favou?r\w*|presumably|question\w*|versus|vs|or|cannot|differential)\b",
    re.IGNORECASE,
)
_ALT = re.compile(r"^\s*(?:,\s*)?(?:or|versus|vs\.?|and/or|/)\s*$", re.IGNORECASE)
_MULTI_STOP = re.compile(r"\.{2,}\s*")
_CONJ = re.compile(r"^\s*(?:,|and|or|,\s*and|,\s*or|and/or)\s*$", re.IGNORECASE)


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
    predicted: str | None = None
    absorbed: bool = False


# medspaCy's unused regex matcher warns on every document (spaCy W036): silenced
# around our calls only.


class RulesStructurer:
    """Rule-based structurer (default backend; CPU, no weights).

    Parameters
    ----------
    cfg : cxrils.config.Config, optional
        Unused today; accepted so that every backend has the same constructor.
    alternatives_tentative : bool
        Whether a finding offered as one of alternatives ("atelectasis versus scar",
        "effusion or atelectasis") is tentative (default, the paper's reading of
        expressed uncertainty). False reads alternatives as definitive, as NLM's MeSH
        indexers do (benchmarks/report_mesh.py); possibility cues ("may", "possible",
        "cannot exclude") stay tentative either way.

    Raises
    ------
    ImportError
        If medspaCy is not installed (``pip install "cxrils[nlp]"``; see docs/report.md).
    """

    name = "rules"

    def __init__(self, cfg=None, *, alternatives_tentative: bool = True) -> None:
        self._nlp = None
        self._hedges = {"POSSIBLE_EXISTENCE", "ALTERNATIVE"} if alternatives_tentative else {"POSSIBLE_EXISTENCE"}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ pipeline
    @property
    def nlp(self):
        """The medspaCy pipeline, built on first use."""
        with self._lock:
            if self._nlp is None:
                self._nlp = _build_pipeline()
            return self._nlp

    @property
    def version(self) -> str:
        import medspacy

        return f"rules medspacy-{medspacy.__version__}"

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
        nlp = self.nlp
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*\[W036\]")
            return self._findings(nlp(_prepare(text)))

    def structure_many(self, texts: Iterable[str]) -> list[list[Finding]]:
        """:meth:`structure` over many texts (spaCy's ``nlp.pipe`` batching)."""
        texts = list(texts)
        out: list[list[Finding]] = [[] for _ in texts]
        idx = [i for i, t in enumerate(texts) if t and t.strip()]
        nlp = self.nlp
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*\[W036\]")
            for i, doc in zip(idx, nlp.pipe([_prepare(texts[i]) for i in idx], batch_size=64)):
                out[i] = self._findings(doc)
        return out

    # ------------------------------------------------------------------ internals
    def _findings(self, doc) -> list[Finding]:
        mentions: list[_Mention] = []
        for si, sent in enumerate(doc.sents, start=1):
            ents = [e for e in doc.ents if e.start >= sent.start and e.end <= sent.end]
            if not ents:
                continue
            ms = []
            for e in ents:
                cats = {m.category for m in e._.modifiers}
                if "HYPOTHETICAL" in cats:
                    continue
                negative = "NEGATED_EXISTENCE" in cats
                tentative = bool(cats & self._hedges)
                ms.append(_Mention(
                    start=e.start_char, end=e.end_char, entity=_entity_name(e),
                    lesion_type=None if e.label_ == _NO_TYPE else e.label_,
                    presence="negative" if negative else "positive",
                    certainty="tentative" if tentative and not negative else "definitive",
                    sentence_index=si, sentence=sent.text.strip(), pre=[], post=[],
                ))
            if not ms:
                continue
            self._attach_locations(doc.text, sent, ms)
            self._predict_types(doc.text, ms)
            mentions.extend(m for m in ms if not m.absorbed)
        return [
            Finding(
                entity=m.entity, sentence_index=m.sentence_index, presence=m.presence,
                certainty=m.certainty, locations=_dedupe([p.lower() for p in m.pre + m.post]), labels=[],
                lesion_type=m.lesion_type, predicted_lesion_type=m.predicted, sentence=m.sentence,
            )
            for m in mentions
        ]

    @staticmethod
    def _attach_locations(text: str, sent, ms: list[_Mention]) -> None:
        """Give each location phrase of the sentence to the finding it modifies."""
        base = sent.start_char
        spans = [(base + s, base + e, p) for s, e, p in find_locations(sent.text)]
        spans = [sp for sp in spans if not any(sp[0] < m.end and m.start < sp[1] for m in ms)]
        for s, e, phrase in spans:
            prev = max((m for m in ms if m.end <= s), key=lambda m: m.end, default=None)
            nxt = min((m for m in ms if m.start >= e), key=lambda m: m.start, default=None)
            gap_next = text[e:nxt.start] if nxt else None
            gap_prev = text[prev.end:s] if prev else None
            if nxt is not None and _PREMOD.match(gap_next):
                nxt.pre.append(phrase)
            elif prev is not None and _POSTLINK.match(gap_prev) and len(gap_prev.split()) <= 10:
                prev.post.append(phrase)
            elif nxt is not None and len(gap_next.split()) <= 3 and not _BREAK.search(gap_next):
                nxt.pre.append(phrase)
            elif prev is not None and not _BREAK.search(gap_prev) and len(gap_prev.split()) <= 12:
                prev.post.append(phrase)
        # Coordinated findings share locations: "bibasilar atelectasis and effusions",
        # "atelectasis and effusion at the bases".
        for a, b in zip(ms, ms[1:]):
            if not _CONJ.match(text[a.end:b.start]) or a.presence != b.presence:
                continue
            if a.pre and not (b.pre or b.post):
                b.pre = list(a.pre)
            elif b.post and not (a.pre or a.post) and a.lesion_type != "cardiomegaly":
                a.post = list(b.post)

    @staticmethod
    def _predict_types(text: str, ms: list[_Mention]) -> None:
        """"opacity likely reflecting pneumonia": the opacity gets predicted type
        pneumonia and the disease mention(s) are absorbed into it."""
        for i, a in enumerate(ms):
            if a.absorbed or a.presence != "positive" or a.lesion_type not in NONSPECIFIC_TYPES:
                continue
            j = i + 1
            # Skip over further non-specific findings and locations: "opacity and
            # consolidation in the left base, likely pneumonia".
            while j < len(ms) and ms[j].lesion_type in NONSPECIFIC_TYPES and _CONJ.match(text[ms[j - 1].end:ms[j].start]):
                j += 1
            if j >= len(ms):
                continue
            b = ms[j]
            gap = text[ms[j - 1].end:b.start]
            if b.lesion_type not in INFERENCE_LESION_TYPES or not _INFER.search(gap) or len(gap.split()) > 12:
                continue
            if re.search(r"[;]|\b(?:no|without|but|however)\b", gap, re.IGNORECASE):
                continue
            hedged = bool(_HEDGE_INFER.search(gap)) or b.certainty == "tentative"
            b.absorbed = True
            k = j + 1
            while k < len(ms) and _ALT.match(text[ms[k - 1].end:ms[k].start]):
                ms[k].absorbed = True
                hedged = True
                k += 1
            for m in ms[i:j]:
                m.predicted = b.lesion_type
                if hedged:
                    m.certainty = "tentative"


def _prepare(text: str) -> str:
    """Whitespace collapsed and "effusion.. Left" split as a sentence end."""
    return _MULTI_STOP.sub(". ", " ".join(text.split()))


def _entity_name(ent) -> str:
    """The finding name: the matched words, or the canonical name for a pattern match."""
    rule = getattr(ent._, "target_rule", None)
    if rule is not None and rule.pattern is not None:
        return rule.literal
    return " ".join(ent.text.lower().split())


def _dedupe(items: list[str]) -> list[str]:
    seen: list[str] = []
    for x in items:
        if x not in seen:
            seen.append(x)
    return seen


def _build_pipeline():
    try:
        import medspacy
        from loguru import logger as _loguru  # a medspaCy dependency
        from medspacy.context import ConTextRule
        from medspacy.target_matcher import TargetRule
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the 'rules' report structurer needs medspaCy: pip install 'cxrils[nlp]' and "
            "'pip install --no-deps medspacy==1.3.1 pyrush==1.0.13 medspacy_quickumls==3.2' "
            "(see docs/report.md for why --no-deps)"
        ) from err
    _loguru.disable("PyRuSH")  # PyRuSH (imported by medspaCy) logs every token at DEBUG level
    nlp = medspacy.load(medspacy_enable=["medspacy_target_matcher"])
    # spaCy's rule-based sentencizer: PyRuSH was ~50x slower on the IU reports
    # (benchmarks/report_mesh.py), and section text is well punctuated.
    nlp.add_pipe("sentencizer", first=True)
    rules = [TargetRule(phrase, t or _NO_TYPE) for phrase, t in lesion_terms().items()]
    rules += [TargetRule("cardiomegaly", "cardiomegaly", pattern=p) for p in CARDIOMEGALY_PATTERNS]
    rules += [TargetRule("vascular congestion", "edema", pattern=p) for p in EDEMA_PATTERNS]
    nlp.get_pipe("medspacy_target_matcher").add(rules)
    context = nlp.add_pipe("medspacy_context", config={"rules": None, "span_attrs": None})
    context.add([
        ConTextRule(lit, cat, direction=direction, max_scope=scope)
        for lit, cat, direction, scope in CONTEXT_RULES
    ])
    return nlp
