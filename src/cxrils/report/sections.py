"""Report sections and the paper's choice of one section per study.

Reproduces the behaviour of the official MIMIC-CXR report pre-processing
(``section_parser.py`` of the MIT-LCP ``mimic-cxr`` repository): a header is an
upper-case name followed by a colon at the start of a line (indentation allowed;
also a known section name in any case, "Indication:", for mixed-case reports; and a
known name in upper or title case with its colon after a sentence end inside a line,
for reports flattened to one line: "... effusion. IMPRESSION: ...", "... Impression: ..."),
section names are normalised (common misspellings included), and the text used
for structuring follows the paper's fallback (section 3.1 step 1, Appendix A.1):
findings, else impression, else the last paragraph, else the study is excluded
with a reason.

A WET READ (a preliminary read) is kept apart and never chosen; an ADDENDUM is
kept and flagged. Non-empty report text never silently yields an empty section:
either a section with text is chosen or the study is excluded with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cxrils.config import ReportConfig
from cxrils.report.lexicon import CHEST_ORGAN_LABELS, ORGAN_LABELS, statement_breaks

#: The default of :func:`select_section` (``ReportConfig.line_statement_max_chars``).
_LINE_STATEMENT_MAX_CHARS = ReportConfig.line_statement_max_chars

#: Canonical section names and the spellings (lower case) that map to them.
#: Misspellings are those the official MIMIC-CXR parser lists as frequent.
SECTION_ALIASES: dict[str, tuple[str, ...]] = {
    "findings": (
        "findings",
        "finding",
        "findins",
        "findindgs",
        "findgings",
        "findngs",
        "findnings",
        "finidngs",
        "fidings",
        "findigns",
        "pfi",
        "frontal and lateral chest radiographs",
    ),
    "impression": (
        "impression",
        "impressions",
        "impresson",
        "imprression",
        "imoression",
        "impressoin",
        "imprssion",
        "impresion",
        "imperssion",
        "mpression",
        "impession",
        "conclusion",
        "conclusions",
        "summary",
        "opinion",
    ),
    "findings_impression": (
        "findings and impression",
        "findings/impression",
        "findings/ impression",
        "impression and findings",
        "findings and impressions",
    ),
    "comparison": (
        "comparison",
        "comparisons",
        "comparison exam",
        "comparison film",
        "comparision",
        "comparsion",
        "comparrison",
        "comparisions",
        "prior",
        "priors",
        "reference exam",
    ),
    "history": (
        "history",
        "clinical history",
        "patient history",
        "indication",
        "indications",
        "ndication",
        "idication",
        "clinical indication",
        "reason for examination",
        "reason for exam",
        "clinical information",
        "clinical info",
        "hx",
        "reason",
    ),
    "technique": (
        "technique",
        "procedure",
        "examination",
        "exam",
        "type of examination",
        "chest, two views",
        "chest two views",
        "views",
    ),
    "addendum": ("addendum", "addenda"),
    "wet_read": ("wet read", "wetread", "wet reading", "preliminary read", "preliminary report"),
    "recommendation": ("recommendation", "recommendations", "recommendation(s)", "notification", "comment", "comments"),
}
_ALIAS_TO_NAME = {alias: name for name, aliases in SECTION_ALIASES.items() for alias in aliases}

_NON_FINDING_SECTIONS = frozenset({"comparison", "history", "technique", "wet_read", "recommendation"})
_FINDING_SECTIONS = frozenset({"findings", "impression", "findings_impression"})
# The title line above a MIMIC-CXR report's sections, no text of its own.
_MIMIC_TITLE = re.compile(r"^\s*FINAL REPORT\b", re.IGNORECASE)
# Technique headers that name the views and go on with what the film shows
# ("CHEST, TWO VIEWS: Right lower lobe consolidation."): no non-finding line for the
# last-paragraph fallback.
_VIEW_HEADERS = frozenset({"chest, two views", "chest two views"})

# Header: upper-case name + colon at a line start, indentation tolerated (official parser:
# r'\n ([A-Z ()/,-]+):\s'); we also accept a header at the very start of the text.
_HEADER = re.compile(r"(?m)^[ \t]*([A-Z][A-Z ()/,&-]{1,60}?)[ \t]*:(?=\s|$)")
# A known section name in any case ("Indication: pneumonia", "Findings:"), which the
# official parser's upper-case rule misses in reports typed in mixed case.
_KNOWN_HEADER = re.compile(
    r"(?mi)^[ \t]*("
    + "|".join(sorted((re.escape(a) for a in _ALIAS_TO_NAME), key=len, reverse=True))
    + r")[ \t]*:(?=\s|$)"
)


# A known section name in upper case, or a main one in title case, after a sentence end
# (or after another header's colon) inside a line: reports flattened to one line, as CSV exports often are
# ("FINDINGS: Small effusion. IMPRESSION: Effusion.", "Findings: Small effusion.
# Impression: Effusion."). The match starts after the punctuation, which stays with the
# text before. Lower-case words of running text ("the impression is of") and names
# without a colon never match; unknown names ("NOTE:") start a section only at a line start.
# Title case only for the section-specific names: short generic words ("Reason:",
# "Prior:", "Exam:", "Summary:") open clauses of running text too.
_TITLE_CASE_INLINE = frozenset(
    {
        "findings",
        "finding",
        "impression",
        "impressions",
        "conclusion",
        "conclusions",
        "indication",
        "indications",
        "history",
        "clinical history",
        "clinical indication",
        "comparison",
        "technique",
        "findings and impression",
        "findings/impression",
        "wet read",
        "addendum",
        "recommendation",
        "recommendations",
    }
)
_INLINE_HEADER = re.compile(
    r"(?<=[.!?:])[ \t]*("
    + "|".join(
        sorted(
            {re.escape(a.upper()) for a in _ALIAS_TO_NAME}
            | {re.escape(form) for a in _TITLE_CASE_INLINE for form in (a.capitalize(), a.title())},
            key=len,
            reverse=True,
        )
    )
    + r")[ \t]*:(?=\s|$)"
)


def _organ_label(m: re.Match) -> bool:
    """Whether a header match is an upper-case organ label
    (:data:`~cxrils.report.lexicon.ORGAN_LABELS`: "LUNGS", "HEART AND MEDIASTINUM")."""
    return m.group(1).isupper() and " ".join(m.group(1).lower().split()) in ORGAN_LABELS


def _header_matches(text: str) -> list[tuple[re.Match, bool]]:
    """Header matches in text order, each with whether it is an organ label that opens the
    findings: upper-case names and known names in any case at a line start, then known
    names in upper or title case after a sentence end inside a line.

    An upper-case organ label (:func:`_organ_label`) is a label of a templated report's
    findings: inside a findings or impression section, or after a label that opened the
    findings, it is no header ("FINDINGS:\nLUNGS: ...\nHEART: ..." is one findings section;
    a trial: "LUNGS:" ended the findings, whose atelectasis was lost). In a report with no
    findings or impression header, one of :data:`~cxrils.report.lexicon.CHEST_ORGAN_LABELS` opens the findings
    ("INDICATION: Cough.\nLUNGS: ...", a review). Elsewhere it is a header of its own, as
    the official parser reads it ("IMPRESSION: ...\nTECHNIQUE: ...\nABDOMEN: ...")."""
    found = {m.start(): m for m in _KNOWN_HEADER.finditer(text)}
    for m in _HEADER.finditer(text):
        found.setdefault(m.start(), m)
    for m in _INLINE_HEADER.finditer(text):
        found.setdefault(m.start(), m)
    ordered = [found[k] for k in sorted(found)]
    headed = any(normalize_section_name(m.group(1)) in _FINDING_SECTIONS for m in ordered if not _organ_label(m))
    out: list[tuple[re.Match, bool]] = []
    for m in ordered:
        if out and m.start() < out[-1][0].end():  # never a header inside another's span
            continue
        if _organ_label(m):
            last, opened = out[-1] if out else (None, False)
            if opened or (last is not None and normalize_section_name(last.group(1)) in _FINDING_SECTIONS):
                continue  # a label inside the findings
            if not headed and " ".join(m.group(1).lower().split()) in CHEST_ORGAN_LABELS:
                out.append((m, True))
                continue
        out.append((m, False))
    return out


def _headers(text: str) -> list[re.Match]:
    """The header matches of :func:`_header_matches`."""
    return [m for m, _ in _header_matches(text)]


_PARAGRAPH_SPLIT = re.compile(r"\n[ \t]*\n")

# A section whose whole text only points to another ("See impression.", "As above.",
# "Please refer to the impression below."): it states nothing, so the fallback goes on
# to the next section (_usable). Short texts only: a sentence of findings that ends
# "see impression" is findings.
_POINTER = re.compile(
    r"^\W*(?:(?:please\s+)?(?:see|refer\s+to|as\s+(?:per|in))\s+(?:the\s+)?"
    r"(?:impression|conclusion|findings|report|text|below|above)(?:\s+(?:below|above|section))?"
    r"|(?:findings\s+)?as\s+(?:described|noted|stated)?\s*(?:above|below))\W*$",
    re.IGNORECASE,
)


def normalize_section_name(name: str) -> str:
    """Canonical name of a header: ``"IMPRESSON"`` -> ``"impression"``.

    Unknown headers keep their lower-case, whitespace-collapsed spelling.
    """
    key = " ".join(name.lower().split())
    return _ALIAS_TO_NAME.get(key, key)


@dataclass
class Sections:
    """A report split into sections.

    Attributes
    ----------
    preamble : str
        Text before the first header (e.g. "FINAL REPORT", exam line).
    sections : list of (name, text)
        In report order, names normalised; a name may repeat (e.g. two addenda).
    """

    preamble: str
    sections: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str) -> str:
        """Text of the LAST non-empty section called ``name`` ("" if none). The official
        parser also keeps the last occurrence."""
        for n, t in reversed(self.sections):
            if n == name and t.strip():
                return t
        return ""

    @property
    def names(self) -> list[str]:
        """The section names in report order (repeats kept)."""
        return [n for n, _ in self.sections]


def _clean(text: str, line_statement_max_chars: int = 0) -> str:
    """Collapse whitespace inside a section (line breaks of the fixed-width layout), but
    keep as one line break each break that ends a statement written without a full stop
    (:func:`cxrils.report.lexicon.statement_breaks` with ``line_statement_max_chars``; 0
    keeps none), which the rules structurer reads as a sentence end."""
    parts: list[str] = []
    pos = 0
    for a, b in statement_breaks(text, line_statement_max_chars):
        parts.append(text[pos:a])
        pos = b
    parts.append(text[pos:])
    return "\n".join(p for p in (" ".join(part.split()) for part in parts) if p)


def _usable(body: str) -> str:
    """``body``, or "" when it only points to another section ("See impression."):
    such a section is treated as empty, so the paper's fallback moves on."""
    return "" if _POINTER.match(body) else body


def split_sections(text: str) -> Sections:
    """Split a raw report into its headed sections.

    Parameters
    ----------
    text : str
        Raw report text (MIMIC-CXR ``.txt`` layout or similar).

    Returns
    -------
    Sections
        Section texts keep their paragraph breaks (blank lines) for the
        last-paragraph fallback; use :func:`select_section` for cleaned text.
    """
    headers = _header_matches(text)
    if not headers:
        return Sections(preamble=text, sections=[])
    out = Sections(preamble=text[: headers[0][0].start()])
    for i, (m, opens_findings) in enumerate(headers):
        end = headers[i + 1][0].start() if i + 1 < len(headers) else len(text)
        if opens_findings:  # a templated report's findings, their first label kept
            out.sections.append(("findings", text[m.start() : end]))
        else:
            out.sections.append((normalize_section_name(m.group(1)), text[m.end() : end]))
    # A "findings and impression" section serves as both.
    out.sections = [
        (n, t)
        for name, t in out.sections
        for n in (("findings", "impression") if name == "findings_impression" else (name,))
    ]
    return out


def _non_finding_line(line: str) -> bool:
    """Whether ``line`` starts with the header of a known non-finding section (not a
    view header such as "CHEST, TWO VIEWS:", whose line describes the film)."""
    m = _KNOWN_HEADER.match(line) or _HEADER.match(line)
    return bool(
        m
        and normalize_section_name(m.group(1)) in _NON_FINDING_SECTIONS
        and " ".join(m.group(1).lower().split()) not in _VIEW_HEADERS
    )


def last_paragraph(text: str) -> str:
    """Last non-empty paragraph of a report that is not a non-finding section.

    Paragraphs are separated by blank lines (the official parser's
    ``last_paragraph``). A paragraph that starts with the header of a known
    non-finding section (comparison, history, technique, wet read,
    recommendation) is skipped; findings/impression/addendum headers are dropped
    from the text, wherever in the paragraph ("FINDINGS:  IMPRESSION:" on one line is
    no text); an unknown header ("PC:", "BG:") is kept as text. A paragraph left with
    nothing but lines that start with non-finding headers, MIMIC-CXR's title "FINAL
    REPORT" aside, is skipped too ("FINDINGS: IMPRESSION: COMPARISON: None.", "FINAL
    REPORT\\n EXAMINATION:  CHEST (PA AND LAT)"): it holds no findings text. Any other
    paragraph is kept whole, its non-finding lines included, as MIMIC-CXR reports often
    go on with the findings below such a line without a blank line.
    """
    for para in reversed(_PARAGRAPH_SPLIT.split(text)):
        if not para.strip():
            continue
        stripped = para.lstrip("\n")
        if _non_finding_line(stripped):
            continue
        for h in reversed(_headers(stripped)):
            name = normalize_section_name(h.group(1))
            if name in SECTION_ALIASES and name not in _NON_FINDING_SECTIONS:
                stripped = stripped[: h.start()] + " " + stripped[h.end() :]
        lines = [line for line in _MIMIC_TITLE.sub("", stripped, count=1).splitlines() if line.strip()]
        if all(_non_finding_line(line) for line in lines):
            continue
        return stripped
    return ""


@dataclass
class SectionChoice:
    """The section chosen for structuring (paper Appendix A.1).

    ``name`` is "findings", "impression" or "last_paragraph" (None when excluded);
    ``text`` is whitespace-collapsed; ``excluded`` gives the reason when no usable
    text exists; ``flags`` may hold "addendum" and "wet_read"; ``wet_read`` and
    ``addendum`` keep those texts apart.
    """

    name: str | None
    text: str
    excluded: str | None = None
    flags: list[str] = field(default_factory=list)
    wet_read: str = ""
    addendum: str = ""


def select_section(text: str, line_statement_max_chars: int = _LINE_STATEMENT_MAX_CHARS) -> SectionChoice:
    """Pick the text to structure from a raw report with the paper's fallback.

    Findings, else impression, else the last paragraph, else excluded (paper
    section 3.1 step 1, Appendix A.1). A section that only points to another ("See
    impression.", "As above.") counts as empty. A WET READ is never chosen (it is
    preliminary) but is returned in ``wet_read``; an ADDENDUM is flagged and
    returned in ``addendum``.

    Parameters
    ----------
    text : str
        The raw report.
    line_statement_max_chars : int
        ``ReportConfig.line_statement_max_chars``: the chosen text keeps a line break
        that ends a statement written without a full stop (:func:`_clean`).

    Returns
    -------
    SectionChoice
    """
    if text is None or not str(text).strip():
        return SectionChoice(None, "", excluded="empty report text")
    secs = split_sections(str(text))
    flags: list[str] = []
    wet = " ".join(_clean(t) for n, t in secs.sections if n == "wet_read" and t.strip())
    add = " ".join(_clean(t) for n, t in secs.sections if n == "addendum" and t.strip())
    if wet:
        flags.append("wet_read")
    if add:
        flags.append("addendum")
    pointers = []  # sections that only point elsewhere ("See impression."), for the reason
    for name in ("findings", "impression"):
        cleaned = _clean(secs.get(name), line_statement_max_chars)
        body = _usable(cleaned)
        if body:
            return SectionChoice(name, body, flags=flags, wet_read=wet, addendum=add)
        if cleaned:
            pointers.append(cleaned)
    # Last paragraph of the report without its wet read (preliminary text is never used).
    kept = str(text)
    for n, t in secs.sections:
        if n == "wet_read" and t.strip():
            kept = kept.replace(t, "\n\n")
    body = _usable(_clean(last_paragraph(kept), line_statement_max_chars))
    if body:
        return SectionChoice("last_paragraph", body, flags=flags, wet_read=wet, addendum=add)
    return SectionChoice(
        None,
        "",
        flags=flags,
        wet_read=wet,
        addendum=add,
        excluded=(
            f"the findings/impression text only points elsewhere ({pointers[0]!r})"
            if pointers
            else "no findings or impression text"
        )
        + ", and no last paragraph outside history/comparison/technique/wet-read/recommendation sections",
    )


def select_iu_section(findings: str | None, impression: str | None) -> SectionChoice:
    """The paper's fallback on the Indiana University format (separate columns).

    Findings, else impression, else excluded: the IU XML has no free text outside
    its named sections, so there is no last paragraph to fall back on. The line rule of
    :func:`_clean` uses the default ``ReportConfig.line_statement_max_chars`` (the IU
    cells hold no line breaks).
    """
    f = _usable(_clean(findings or "", _LINE_STATEMENT_MAX_CHARS)) if isinstance(findings, str) else ""
    i = _usable(_clean(impression or "", _LINE_STATEMENT_MAX_CHARS)) if isinstance(impression, str) else ""
    if f:
        return SectionChoice("findings", f)
    if i:
        return SectionChoice("impression", i)
    return SectionChoice(None, "", excluded="IU report has neither findings nor impression text")
