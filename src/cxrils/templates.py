"""Instruction and answer templates of the paper (Table 2), rendering and parsing.

One place writes and reads every template string: instruction generation renders
with :func:`render_instruction` / :func:`render_answer`, the evaluation and the
models parse with :func:`parse_answer` / :func:`parse_instruction`. Never copy a
template string elsewhere.

Locations are lists of query locations (:data:`cxrils.vocab.QUERY_LOCATIONS`, patient
sides: the paper's instruction locations, then the five lobes) phrased by
:func:`location_phrase` in the canonical vocabulary order: one item as itself, two as
"A and B", more as "A, B and C". :func:`parse_location_phrase` reads the same list in
any order: " and " between two, ", " between the others and " and " before the last,
as the authors' released test sheets write them, in the grounded order
(KAIST-Edlab/ROSALIA ``final_sheet/presence_final.csv`` and ``absence_final.csv`` at
commit e38fdb2, removed in cb20db5: "left lung and right lung", "left lung base and
left mid zone lung", "left upper zone lung, right lung base and left mid zone lung");
", and" before the last is read too (not seen in those sheets). Zones and lungs are
written as their CXAS names ("right lung base"), lobes as a radiologist writes them (:data:`cxrils.vocab.LOBE_PHRASES`:
"lung lower lobe left" -> "left lower lobe"); generated records never name a lobe.
An organ location of :data:`cxrils.vocab.ORGAN_LOCATIONS` ("heart", the cardiomegaly
global answer) is accepted alone only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cxrils import vocab

SEG_TOKEN = "[SEG]"
#: Longest instruction ``cxrils predict`` and the service accept (characters, stripped;
#: ours: several times the longest Table 2 instruction, so a pasted report is refused).
MAX_INSTRUCTION_CHARS = 500

# Table 2 of the paper. {target}: lesion type or "opacity"; {location}: location_phrase.
INSTRUCTION_TEMPLATES: dict[str, str] = {
    "basic": "Segment the {target} in the {location}.",
    "global": "Segment the {target}.",
    "lesion_inference": "Segment the opacity in the {location} and predict its type.",
}
ANSWER_TEMPLATES: dict[tuple[str, str], str] = {
    ("basic", "positive"): "[SEG]",
    ("basic", "negative"): "[SEG] There is no {target} in the {location}.",
    ("global", "positive"): "[SEG] It is located in the {location}.",
    ("global", "negative"): "[SEG] There is no {target}.",
    ("lesion_inference", "negative"): "[SEG] There is no opacity in the {location}.",
}
#: Lesion-inference positive answers depend on certainty (Table 2).
INFERENCE_POSITIVE_TEMPLATES: dict[str, str] = {
    "definitive": "[SEG] It is highly suggestive of {lesion}.",
    "tentative": "[SEG] It possibly reflects {lesion}.",
}

#: Targets an instruction may name: the seven lesion types plus "opacity" (which is
#: also the target of basic instructions for tentative findings, section 3.2).
TARGETS: tuple[str, ...] = vocab.LESION_TYPES


class TemplateError(ValueError):
    """Raised when a template variable is invalid or a text matches no template."""


_ORGANS: tuple[str, ...] = tuple(vocab.ORGAN_LOCATIONS.values())
_LOBE_BY_PHRASE: dict[str, str] = {phrase: label for label, phrase in vocab.LOBE_PHRASES.items()}


def _order(locations: Sequence[str]) -> list[str]:
    if len(set(locations)) == 1 and locations[0] in _ORGANS:  # "heart", alone only
        return [locations[0]]
    unknown = [loc for loc in locations if loc not in vocab.QUERY_LOCATIONS]
    if unknown:
        raise TemplateError(
            f"not instruction locations: {unknown}; expected items of {vocab.INSTRUCTION_LOCATIONS}"
            f" or lobes {vocab.LOBES} (or one organ location of {_ORGANS} alone)"
        )
    if not locations:
        raise TemplateError("a location phrase needs at least one location")
    return sorted(set(locations), key=vocab.QUERY_LOCATIONS.index)


def _word(location: str) -> str:
    return vocab.LOBE_PHRASES.get(location, location)


def location_phrase(locations: Sequence[str]) -> str:
    """Phrase one or more instruction locations as the templates' ``[Location]``.

    Parameters
    ----------
    locations : sequence of str
        Items of :data:`cxrils.vocab.QUERY_LOCATIONS` (patient sides; lobes as CXAS
        labels); order and duplicates do not matter.

    Returns
    -------
    str
        ``"right lung base"``, ``"right lung base and left lung base"``,
        ``"right upper zone lung, right mid zone lung and left lung base"``,
        ``"left lower lobe"`` (for ``["lung lower lobe left"]``).

    Raises
    ------
    TemplateError
        On an empty list or a name that is not a query location.
    """
    items = [_word(loc) for loc in _order(locations)]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


#: Joiners of a location list: ", " between items, " and " or ", and " before the last.
_JOINER = re.compile(r"(, and |, | and )")


def parse_location_phrase(text: str) -> tuple[str, ...]:
    """Inverse of :func:`location_phrase`, for the locations in any order; returns the
    canonical tuple (vocabulary order; lobes as CXAS labels: ``"left lower lobe"`` ->
    ``("lung lower lobe left",)``).

    Accepted: one location; two joined by " and "; three or more with ", " between and
    " and " or ", and " before the last (module docstring).

    Raises
    ------
    TemplateError
        If ``text`` names an unknown location, a location twice, or joins the items
        otherwise (e.g. "A, B" without "and").
    """
    pieces = _JOINER.split(text.strip())
    words, joins = pieces[0::2], pieces[1::2]
    if joins and (
        any(j != ", " for j in joins[:-1]) or joins[-1] == ", " or (joins[-1] == ", and " and len(words) < 3)
    ):
        raise TemplateError(f"not a location list: {text!r}; join items as 'A and B' or 'A, B and C'")
    parts = [_LOBE_BY_PHRASE.get(p, p) for p in words]
    if len(set(parts)) != len(parts):
        raise TemplateError(f"a location is named twice: {text!r}")
    try:
        items = _order(parts)
    except TemplateError as err:
        raise TemplateError(f"not a location phrase: {text!r}") from err
    if any(p in vocab.LOBES for p in words):  # a lobe is written as a radiologist writes it
        raise TemplateError(f"not a location phrase: {text!r} (lobes are written as 'left lower lobe')")
    return tuple(items)


@dataclass(frozen=True)
class ParsedText:
    """The structured content of an instruction or answer.

    ``kind`` is (instruction_type, polarity) for answers and (instruction_type, None)
    for instructions. ``locations`` is a canonical tuple (empty when the template has
    no location); ``target``, ``lesion`` and ``certainty`` are None where absent.
    """

    instruction_type: str
    polarity: str | None
    target: str | None = None
    locations: tuple[str, ...] = field(default_factory=tuple)
    lesion: str | None = None
    certainty: str | None = None


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise TemplateError(f"unknown target {target!r}; expected one of {TARGETS}")


def render_instruction(instruction_type: str, target: str | None, locations: Sequence[str] = ()) -> str:
    """Render an instruction of Table 2.

    Parameters
    ----------
    instruction_type : {"basic", "global", "lesion_inference"}
    target : str or None
        Lesion type or "opacity"; ignored (may be None) for lesion inference, whose
        target is always "opacity".
    locations : sequence of str
        Instruction locations; required for basic and lesion inference, unused for global.

    Raises
    ------
    TemplateError
        On an unknown type, target or location.
    """
    if instruction_type == "basic":
        _check_target(target or "")
        return INSTRUCTION_TEMPLATES["basic"].format(target=target, location=location_phrase(locations))
    if instruction_type == "global":
        _check_target(target or "")
        return INSTRUCTION_TEMPLATES["global"].format(target=target)
    if instruction_type == "lesion_inference":
        return INSTRUCTION_TEMPLATES["lesion_inference"].format(location=location_phrase(locations))
    raise TemplateError(f"unknown instruction type {instruction_type!r}")


def render_answer(
    instruction_type: str,
    polarity: str,
    target: str | None = None,
    locations: Sequence[str] = (),
    lesion: str | None = None,
    certainty: str | None = None,
) -> str:
    """Render an answer of Table 2.

    Basic positive -> ``"[SEG]"``; basic negative needs target and locations; global
    positive needs the locations where the lesion is; global negative needs target;
    lesion-inference positive needs ``lesion`` (one of pneumonia, atelectasis, edema)
    and ``certainty``; lesion-inference negative needs locations.

    Raises
    ------
    TemplateError
        On a missing or unknown variable.
    """
    key = (instruction_type, polarity)
    if key == ("lesion_inference", "positive"):
        if lesion not in vocab.INFERENCE_LESION_TYPES:
            raise TemplateError(f"lesion inference needs a lesion in {vocab.INFERENCE_LESION_TYPES}, got {lesion!r}")
        if certainty not in INFERENCE_POSITIVE_TEMPLATES:
            raise TemplateError(f"unknown certainty {certainty!r}")
        return INFERENCE_POSITIVE_TEMPLATES[certainty].format(lesion=lesion)
    if key not in ANSWER_TEMPLATES:
        raise TemplateError(f"unknown instruction type / polarity {key}")
    fmt: dict[str, str] = {}
    template = ANSWER_TEMPLATES[key]
    if "{target}" in template:
        _check_target(target or "")
        fmt["target"] = str(target)
    if "{location}" in template:
        fmt["location"] = location_phrase(locations)
    return template.format(**fmt)


_LOC = r"(?P<location>[a-z ,]+?)"
_TGT = r"(?P<target>[a-z]+)"
_INSTRUCTION_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("lesion_inference", re.compile(rf"^Segment the opacity in the {_LOC} and predict its type\.$")),
    ("basic", re.compile(rf"^Segment the {_TGT} in the {_LOC}\.$")),
    ("global", re.compile(rf"^Segment the {_TGT}\.$")),
]
_ANSWER_PATTERNS: list[tuple[tuple[str, str], re.Pattern[str]]] = [
    (("basic", "positive"), re.compile(r"^\[SEG\]$")),
    (("lesion_inference", "negative"), re.compile(rf"^\[SEG\] There is no opacity in the {_LOC}\.$")),
    (("basic", "negative"), re.compile(rf"^\[SEG\] There is no {_TGT} in the {_LOC}\.$")),
    (("global", "positive"), re.compile(rf"^\[SEG\] It is located in the {_LOC}\.$")),
    (("global", "negative"), re.compile(rf"^\[SEG\] There is no {_TGT}\.$")),
    (("lesion_inference", "positive"), re.compile(r"^\[SEG\] It is highly suggestive of (?P<lesion>[a-z]+)\.$")),
    (("lesion_inference", "positive"), re.compile(r"^\[SEG\] It possibly reflects (?P<lesion>[a-z]+)\.$")),
]


def _build(itype: str, polarity: str | None, m: re.Match[str]) -> ParsedText:
    groups = m.groupdict()
    target = groups.get("target")
    if target is not None:
        _check_target(target)
    locations: tuple[str, ...] = ()
    if groups.get("location") is not None:
        locations = parse_location_phrase(groups["location"])
    lesion = groups.get("lesion")
    certainty = None
    if lesion is not None:
        if lesion not in vocab.INFERENCE_LESION_TYPES:
            raise TemplateError(f"unknown lesion {lesion!r} in answer")
        certainty = "definitive" if "highly suggestive" in m.string else "tentative"
    if itype == "lesion_inference" and target is None:
        target = "opacity"
    return ParsedText(itype, polarity, target, locations, lesion, certainty)


def parse_instruction(text: str) -> ParsedText:
    """Parse an instruction rendered by :func:`render_instruction`.

    Raises
    ------
    TemplateError
        If the text matches no template or names an unknown target or location.
    """
    s = text.strip()
    for itype, pat in _INSTRUCTION_PATTERNS:
        m = pat.match(s)
        if m:
            return _build(itype, None, m)
    raise TemplateError(f"instruction matches no template: {text!r}")


def parse_answer(text: str, instruction_type: str | None = None) -> ParsedText:
    """Parse an answer rendered by :func:`render_answer` (exact, whitespace-trimmed).

    Parameters
    ----------
    text : str
    instruction_type : {"basic", "global", "lesion_inference"}, optional
        The type of the instruction the answer replies to. Table 2 gives a basic negative
        for opacity and a lesion-inference negative the same text ("[SEG] There is no
        opacity in the ..."); without this hint such a text parses as lesion inference.

    Raises
    ------
    TemplateError
        If the text matches no template (of ``instruction_type`` when given) or names an
        unknown variable.
    """
    if instruction_type is not None and instruction_type not in INSTRUCTION_TEMPLATES:
        raise TemplateError(f"unknown instruction type {instruction_type!r}")
    s = text.strip()
    for (itype, polarity), pat in _ANSWER_PATTERNS:
        if instruction_type is not None and itype != instruction_type:
            continue
        m = pat.match(s)
        if m:
            return _build(itype, polarity, m)
    raise TemplateError(f"answer matches no template: {text!r}")
