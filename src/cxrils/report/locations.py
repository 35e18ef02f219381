"""Location mapping: raw location phrases -> standard anatomical labels.

The paper's two steps (section 3.1 step 1, Appendix A.2 Figure 10):

1. the phrase -> one or more of the 17 broad categories
   (:data:`cxrils.vocab.BROAD_CATEGORIES`); "left", "right" or "bilateral" alone
   default to lung; terms seen only on a lateral view map to
   "lateral view location";
2. if lung -> one or more lung-region labels in CXAS spelling
   (:data:`cxrils.vocab.LUNG_REGION_LABELS`): "bibasilar" -> right lung base + left
   lung base, "right lower lobe" -> lung lower lobe right, "left midlung" -> left
   mid zone lung, "retrocardiac" -> left lung base.

A zone or lobe without a side overlaps the labels of both sides, so it maps to
both, as the paper's rule says for a phrase that overlaps several labels
("basilar" -> right lung base + left lung base, like "bibasilar"); a phrase that
matches no category, or a lung phrase that names no region and no side ("lung",
"parenchyma"), maps to nothing: never to a guess.
``Finding.labels`` holds lung-region labels, or the broad category for a finding
outside the lung (e.g. "mediastinum" for "hilar").

Sides are the PATIENT's: "right lung" lies on the image's left on a frontal view.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

from cxrils.report.tokens import DEID_TOKEN
from cxrils.vocab import BROAD_CATEGORIES, LOBE_PHRASES, LOCATION_SYNONYMS, LUNG_REGION_LABELS

if TYPE_CHECKING:
    from cxrils.config import Config


class LocationMapper(Protocol):
    """Maps one raw location phrase to standard labels (lung-region labels, or broad
    categories for non-lung locations); unknown -> []."""

    name: str

    def map(self, phrase: str) -> list[str]:
        """The standard labels of one location phrase ("left base" -> ["left lung
        base"]); [] when it names nothing known."""
        ...


# Step 1 keyword rules, checked in order; the first that matches decides.
_LATERAL_ONLY = re.compile(
    r"\b(retrosternal|retrocardiac clear space|anterior clear space|posterior (costophrenic|sulc\w*|recess\w*|gutter\w*)"
    r"|lateral (view|projection|film|radiograph)|on the lateral)\b"
)
_CATEGORY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("lateral view location", _LATERAL_ONLY),
    ("cervical spine", re.compile(r"\bcervical\b")),
    ("lumbar spine", re.compile(r"\blumbar\b")),
    ("thoracic spine", re.compile(r"\b(thoracic spine|spine|spinal|vertebra\w*|paraspinal|t-spine)\b")),
    ("clavicle", re.compile(r"\bclavic\w*")),
    ("scapula", re.compile(r"\b(scapula\w*|glenoid)\b")),
    ("rib", re.compile(r"\bribs?\b")),
    ("sternum", re.compile(r"\b(stern(um|al)|substernal)\b")),
    ("diaphragm", re.compile(r"\b(hemi)?diaphragm\w*")),
    ("mediastinum", re.compile(r"\b(mediastin\w*|paratracheal|subcarinal|aortopulmonary|hilar|hila|hilum)\b")),
    ("abdomen", re.compile(r"\b(abdom\w*|subdiaphragmatic)\b")),
    # "obscuring the left heart border": the lung next to the heart (silhouette sign).
    ("lung", re.compile(r"\bheart borders?\b")),
    ("heart", re.compile(r"\b(heart|cardiac|pericardial)\b")),
    ("breast", re.compile(r"\bbreasts?\b")),
    ("trachea", re.compile(r"\btrache\w*")),
    ("vessels", re.compile(r"\b(aorta|aortic|vascular|vessels?|arter\w*|vein\w*)\b")),
    (
        "lung",
        re.compile(
            r"\b(lungs?|lobes?|lobar|zones?|bases?|basilar\w*|basal\w*|bibas\w*|apex|apices|apical\w*|biapical\w*|"
            r"perihilar|infrahilar|suprahilar|retrocardiac|lingula\w*|midlungs?|hemithora\w*|costophrenic|"
            r"parenchym\w*|subpleural|fissur\w*|right|left|bilateral\w*|both)\b"
        ),
    ),
    ("pleura", re.compile(r"\bpleura\w*")),
)
assert all(c in BROAD_CATEGORIES for c, _ in _CATEGORY_RULES)

# Step 2 vocabulary.
_BOTH = re.compile(
    r"\b(bilateral\w*|both|bi(basilar|basal|apical)\w*|lungs|bases|apices|lobes|zones|midlungs|"
    r"hemithoraces|angles|perihilar regions)\b"
)
_ZONE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("apical", re.compile(r"\b(apex|apices|apical\w*|biapical\w*)\b")),
    ("upper", re.compile(r"\b(upper|suprahilar)\b")),
    ("mid", re.compile(r"\b(mid|middle|midlungs?|perihilar|infrahilar)\b")),
    ("base", re.compile(r"\b(base|bases|basilar\w*|basal\w*|bibas\w*|lower|costophrenic|retrocardiac)\b")),
)
_ZONE_LABEL = {
    "apical": "{s} apical zone lung",
    "upper": "{s} upper zone lung",
    "mid": "{s} mid zone lung",
    "base": "{s} lung base",
}
_LOBE = re.compile(r"\b(lobes?|lobar|lingula\w*)\b")
_WHOLE = re.compile(r"\b(lungs?|hemithora\w*|right|left|bilateral\w*|both|parenchym\w*)\b")
_SPLIT = re.compile(r"\s*(?:,|;|\band/or\b|\band\b|\bor\b|\bto\b|/)\s*")
_EXPLICIT_BOTH = re.compile(r"\b(bilateral\w*|both|bi(basilar|basal|apical)\w*)\b")
_SIDE_WORD = re.compile(r"\b(right|left)\b")
_HEAD = re.compile(r"\b(lungs?|lobes?|zones?|bases?|fields?|apex|apices|hemithora\w*|regions?)\b")


def _sides(part: str) -> set[str]:
    s = set()
    if re.search(r"\bright\b", part):
        s.add("right")
    if re.search(r"\bleft\b", part):
        s.add("left")
    if not s and _BOTH.search(part):
        s = {"right", "left"}
    return s


def _category(part: str) -> str | None:
    for cat, rx in _CATEGORY_RULES:
        if rx.search(part):
            return cat
    return None


def _lung_labels(part: str) -> list[str]:
    """Step 2 for one simple phrase (no coordination). A zone or lobe without a side
    gets both sides (it overlaps both sides' labels)."""
    sides = _sides(part)
    if "retrocardiac" in part:
        return ["left lung base"]
    if re.search(r"\blingula\w*", part) or (re.search(r"\bheart borders?\b", part) and sides == {"left"}):
        return ["lung upper lobe left"]
    if re.search(r"\bheart borders?\b", part) and sides == {"right"}:
        return ["lung middle lobe right"]
    zoned = sides or {"right", "left"}
    labels: list[str] = []
    if _LOBE.search(part):
        for zone, lobe in (("upper", "upper"), ("mid", "middle"), ("base", "lower")):
            if _ZONE_RULES[[z for z, _ in _ZONE_RULES].index(zone)][1].search(part):
                if lobe == "middle":
                    # Only the right lung has a middle lobe; "middle lobe" alone is right.
                    labels.append("lung middle lobe right" if sides != {"left"} else "lung upper lobe left")
                else:
                    labels += [f"lung {lobe} lobe {s}" for s in sorted(zoned)]
        if labels or not sides:
            return labels
        return [f"{s} lung" for s in sorted(sides)]  # "right XXXX lobe": the side's lung
    for zone, rx in _ZONE_RULES:
        if rx.search(part):
            labels += [_ZONE_LABEL[zone].format(s=s) for s in sorted(zoned)]
    if labels or not sides:
        return labels
    if _WHOLE.search(part):
        return [f"{s} lung" for s in sorted(sides)]
    return []


# Place words that name a place without a head noun: "perihilar and lower lobe" is the
# perihilar zones and the lower lobes, not a "perihilar lobe" (_parts).
_SELF_STANDING = re.compile(r"\b(?:perihilar|parahilar|infrahilar|suprahilar|retrocardiac|bibasilar|biapical)\b")


def _parts(phrase: str) -> list[str]:
    """Split a coordinated phrase and let parts share side and head words:
    "left upper and lower lobes" -> ["left upper lobes", "left lower lobes"]; a place
    word that stands alone (:data:`_SELF_STANDING`) borrows no head ("perihilar and lower
    lobe" -> ["perihilar", "lower lobe"])."""
    parts = [p for p in _SPLIT.split(phrase) if p and re.search(r"[a-z]", p)]
    out = []
    for i, p in enumerate(parts):
        if not _HEAD.search(p) and not _SELF_STANDING.search(p):
            for q in parts[i + 1 :]:
                h = _HEAD.search(q)
                if h:
                    zoned = any(rx.search(p) for _, rx in _ZONE_RULES)
                    # "mid and lower lungs": borrow the head; "right and left lower lobes":
                    # a bare side borrows the rest of the next part.
                    p = f"{p} {h.group(0) if zoned else _SIDE_WORD.sub('', q).strip()}"
                    side = _SIDE_WORD.search(q)
                    if zoned and side and not (_SIDE_WORD.search(p) or _EXPLICIT_BOTH.search(p)):
                        # "upper and lower lobes of the left lung": one phrase, one side
                        p = f"{side.group(0)} {p}"
                    break
        if not (_SIDE_WORD.search(p) or _EXPLICIT_BOTH.search(p)):
            prev = [q for q in out if _SIDE_WORD.search(q)]
            if prev:
                p = f"{_SIDE_WORD.search(prev[-1]).group(0)} {p}"
        out.append(p)
    return out


#: The lobe abbreviations of reports (lower case) -> the lobe written out
#: (:data:`cxrils.vocab.LOCATION_SYNONYMS`, :data:`cxrils.vocab.LOBE_PHRASES`).
LOBE_ABBREVIATIONS: dict[str, str] = {
    a: LOBE_PHRASES[LOCATION_SYNONYMS[a][0]] for a in ("rul", "rml", "rll", "lul", "lll")
}
_ANY_CASE = re.compile(r"\b(" + "|".join(LOBE_ABBREVIATIONS) + r")\b", re.IGNORECASE)
#: An upper-case lobe abbreviation as a whole word, the form :func:`write_out_lobes` reads in
#: running report text.
UPPER_CASE_LOBE_RE = re.compile(r"\b(" + "|".join(a.upper() for a in LOBE_ABBREVIATIONS) + r")\b")


def write_out_lobes(text: str, *, any_case: bool) -> str:
    """``text`` with each lobe abbreviation (:data:`LOBE_ABBREVIATIONS`, whole words)
    written out: "RLL" -> "right lower lobe". ``any_case`` for a location phrase, where
    the letters are no English word; upper case only in running report text (the rules
    structurer)."""
    pattern = _ANY_CASE if any_case else UPPER_CASE_LOBE_RE
    return pattern.sub(lambda m: LOBE_ABBREVIATIONS[m.group(1).lower()], text)


def _normalise(phrase: str) -> str:
    p = re.sub(rf"\b{DEID_TOKEN}\b", " ", phrase.lower()).replace("-", " ")
    p = write_out_lobes(p, any_case=True)
    p = re.sub(r"\b(right|left)\s+sided\b", r"\1", p)
    p = re.sub(r"\bmid\s*lung", "midlung", p)
    p = re.sub(r"\bmidzone(s?)\b", r"mid zone\1", p)
    # only the right lung has a minor (horizontal) fissure
    p = re.sub(r"(?<!right )\b(minor|horizontal) fissure", r"right \1 fissure", p)
    return " ".join(p.split())


class LexiconLocationMapper:
    """Deterministic two-step location mapping (default backend).

    Examples
    --------
    >>> m = LexiconLocationMapper()
    >>> m.map("bibasilar")
    ['right lung base', 'left lung base']
    >>> m.map("right lower lobe")
    ['lung lower lobe right']
    >>> m.map("hilar")
    ['mediastinum']
    >>> m.map("somewhere odd")
    []
    """

    name = "lexicon"

    @classmethod
    def from_config(cls, cfg: Config) -> LexiconLocationMapper:
        """The registry's constructor (:data:`cxrils.report.LOCATION_MAPPERS`); the
        lexicon has no settings."""
        return cls()

    def categories(self, phrase: str) -> list[str]:
        """Step 1: the broad categories of a phrase (possibly several for a
        coordinated phrase), in first-seen order; [] when none matches."""
        out: list[str] = []
        for part in _parts(_normalise(phrase)):
            cat = _category(part)
            if cat and cat not in out:
                out.append(cat)
        return out

    def map(self, phrase: str) -> list[str]:
        """Both steps: lung-region labels for lung phrases, broad categories
        otherwise, in :data:`cxrils.vocab.LUNG_REGION_LABELS` order for lung labels.

        Parameters
        ----------
        phrase : str
            A raw location phrase from a report.

        Returns
        -------
        list of str
            Labels; [] for an unknown phrase.
        """
        lung: set[str] = set()
        other: list[str] = []
        for part in _parts(_normalise(phrase)):
            cat = _category(part)
            if cat == "lung":
                lung.update(_lung_labels(part))
            elif cat and cat not in other:
                other.append(cat)
        return [lab for lab in LUNG_REGION_LABELS if lab in lung] + other
