"""Sentences, tokens and phrase matching of the ``rules`` structurer.

Everything here is linear in the text's length: the text is tokenised once with one
regular expression, split into sentences in one pass, and phrases are looked up
token by token in a table indexed by their first word (no scan of the lexicon per
position, no pass over the whole document per sentence). What it replaces: spaCy's
tokenizer and rule-based ``sentencizer`` and medspaCy's ``TargetMatcher``
(PhraseMatcher + Matcher with longest-match pruning), whose per-document work
grew with the square of the number of matches (``doc.ents += (span,)`` per
match, recursive pruning), which held a 120 kB report for minutes.

Tokens are lower-case runs of letters/digits, or single other characters
("right-sided" -> "right", "-", "sided"; "can't" -> "can", "'", "t"), as spaCy
splits infix hyphens and apostrophes. The de-identification token of the IU
reports ("XXXX") is transparent inside a phrase: "heart XXXX enlarged" matches
the pattern "heart ... enlarged", "pleural XXXX effusion" matches "pleural
effusion".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
#: De-identification token of the IU reports (upper case there; tokens are lower case).
DEID_TOKEN = "xxxx"
_END_PUNCT = frozenset(".!?")
# Words after which a period does not end a sentence ("atelectasis vs. scar").
_ABBREVIATIONS = frozenset({"vs", "dr", "mr", "mrs", "ms", "approx", "fig", "cf", "etc", "ca", "st", "resp"})


#: Characters folded before a report is read that Unicode compatibility and accent
#: folding leave as they are (ours): ligatures of British spellings ("œdema"), and the
#: typographic apostrophes, quotes and dashes of word processors ("can’t be excluded").
_FOLDED = {
    **dict.fromkeys("œ", "oe"),
    **dict.fromkeys("Œ", "Oe"),
    **dict.fromkeys("æ", "ae"),
    **dict.fromkeys("Æ", "Ae"),
    **dict.fromkeys("ß", "ss"),
    **dict.fromkeys("‘’‚‛ʼ′´", "'"),
    # compatibility would spell it "No", a denial ("Case № 2: bilateral pneumonia.")
    **dict.fromkeys("№", "#"),
    **dict.fromkeys("“”„″", '"'),
    **dict.fromkeys("‐‑‒–—―−", "-"),
}
#: The cp1252 characters of the bytes 0x80-0x9F (the rest of that range is Latin-1's).
_CP1252_HIGH = "€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ"
#: What :func:`fold_text` reads: a run that may be UTF-8 decoded as Latin-1 or cp1252
#: ("â€™" for "’", "Â°" for "°"), or any other character that is not ASCII.
FOLDED_RE = re.compile(rf"[\u00c2-\u00f4][\u0080-\u00bf{_CP1252_HIGH}]{{1,3}}|[^\x00-\x7f]")


def _utf8_mojibake(run: str) -> str | None:
    """The character a run of :data:`FOLDED_RE`'s first kind spells when its characters
    are taken back to the bytes they were decoded from (cp1252, else Latin-1) and read as
    UTF-8; None if they are no valid UTF-8 (then they are letters as written)."""
    try:
        raw = b"".join(c.encode("cp1252") if c in _CP1252_HIGH else c.encode("latin-1") for c in run)
        return raw.decode("utf-8")
    except UnicodeError:
        return None


def fold_text(match: re.Match[str]) -> str:
    """The ASCII spelling of one :data:`FOLDED_RE` match (``re.sub`` replacement): a
    UTF-8 character decoded as Latin-1 or cp1252 is mended first (COVID-19 case notes of
    the shared data hold "opacitiesâ\x80\x9d" for "opacities”", whose "â" must not
    become a letter of the word), then folded by :func:`fold_char`; a run that is no such
    character is folded character by character."""
    run = match.group(0)
    mended = _utf8_mojibake(run) if len(run) > 1 else None
    if mended is not None:
        return "".join(fold_char(c) for c in mended)
    return "".join(fold_char(c) for c in run)


#: One-word answers that deny the finding a template's question names ("Effusion? No."):
#: the sentence splitter keeps them with the question, and the ConText rules read them as
#: "Effusion: no." (:data:`cxrils.report.lexicon.CONTEXT_RULES`). Ours.
ANSWER_DENIALS = frozenset({"no", "none", "negative", "nil", "absent"})
#: One-word answers to a template's question: a denial, or "yes" ("Effusion? Yes.": stated).
ANSWERS = ANSWER_DENIALS | {"yes"}


def fold_char(char: str) -> str:
    """The ASCII spelling of one report character, or the character itself.

    :data:`_FOLDED` first; otherwise Unicode compatibility (NFKC: full-width "Ｎｏ" -> "No",
    "ﬁ" -> "fi") and then the letters without their accents (NFKD, combining marks
    dropped: "Cardiomégaly" -> "Cardiomegaly"). A character with no ASCII spelling ("½",
    "°", a CJK character) stays as written, so no report loses a character.
    """
    if char in _FOLDED:
        return _FOLDED[char]
    compatible = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", char))
    folded = "".join(c for c in compatible if not unicodedata.combining(c))
    return folded if folded and folded.isascii() else char


def tokenize(text: str) -> list[str]:
    """Lower-case tokens of ``text`` (see the module docstring)."""
    return _TOKEN.findall(text.lower())


@dataclass
class Sentence:
    """One sentence of a document.

    Attributes
    ----------
    index : int
        1-based sentence index in the document (pieces of a cut long sentence share it).
    start, end : int
        Character offsets in the document text (end exclusive).
    text : str
        ``document[start:end]``.
    words : list of str
        Lower-case tokens of the sentence.
    tok_start, tok_end : list of int
        Character offsets in the document of each token (end exclusive).
    """

    index: int
    start: int
    end: int
    text: str
    words: list[str]
    tok_start: list[int]
    tok_end: list[int]

    def char_span(self, start: int, end: int) -> tuple[int, int]:
        """Document character offsets of the token span ``[start, end)``."""
        return self.tok_start[start], self.tok_end[end - 1]


def _lower_in_place(text: str) -> str:
    """``text.lower()`` where that keeps every character's offset; a character whose lower
    case is longer ("İ" -> "i" + combining dot) stays as written, so token offsets index
    ``text`` itself."""
    lower = text.lower()
    if len(lower) == len(text):
        return lower
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def split_sentences(text: str, max_tokens: int = 200) -> list[Sentence]:
    """Split ``text`` into sentences in one pass over its tokens.

    A sentence ends after ".", "!" or "?" that is followed by white space, or by an
    upper-case letter ("apex.There"); not after an abbreviation ("vs.") or a single
    letter ("e.g."), and a list number ("1.") starts the next sentence rather than
    being one; a "?" that opens a sentence, follows a comma or comes before a lower-case
    letter ("? pneumonia", "opacity, ? Pneumonia") questions what follows and ends nothing, nor does
    one that a one-word answer follows (:data:`ANSWERS`: "Effusion? No.", "Effusion?
    Yes."). A sentence longer than ``max_tokens`` tokens is cut into pieces of at most
    that many tokens (same index), so that the work per sentence is bounded.

    Parameters
    ----------
    text : str
    max_tokens : int
        Source: ``cxrils.config.ReportConfig.max_sentence_tokens``.

    Returns
    -------
    list of Sentence
        In text order; tokens of ``text`` each belong to exactly one sentence.
    """
    lower = _lower_in_place(text)
    starts: list[int] = []
    ends: list[int] = []
    words: list[str] = []
    for m in _TOKEN.finditer(lower):
        starts.append(m.start())
        ends.append(m.end())
        words.append(m.group())
    n = len(words)
    bounds: list[tuple[int, int]] = []
    first = 0
    for i in range(n):
        if words[i] not in _END_PUNCT:
            continue
        if words[i] == "?" and (i == first or words[i - 1] == "," or (i + 1 < n and text[starts[i + 1]].islower())):
            continue  # "? pneumonia.", "opacity, ? Pneumonia": a question mark hedging what follows
        if (
            words[i] == "?"
            and i + 1 < n
            and words[i + 1] in ANSWERS
            and words[i + 2 : i + 3] in ([], ["."], [";"], [","])
        ):
            continue  # "Effusion? No.": the answer belongs to its question
        if i + 1 < n:
            gap = ends[i] < starts[i + 1]
            if not gap and not (text[starts[i + 1]].isupper() and words[i] == "." and i > 0 and words[i - 1].isalpha()):
                continue
            if (
                words[i] == "."
                and i > 0
                and (words[i - 1] in _ABBREVIATIONS or (len(words[i - 1]) == 1 and words[i - 1].isalpha()))
            ):
                continue
        if i - first == 1 and words[first].isdigit():
            continue  # "1. Cardiomegaly." : the list number belongs to its item
        bounds.append((first, i + 1))
        first = i + 1
    if first < n:
        bounds.append((first, n))
    out: list[Sentence] = []
    for index, (a, b) in enumerate(bounds, start=1):
        for c in range(a, b, max(1, max_tokens)):
            d = min(b, c + max(1, max_tokens))
            s, e = starts[c], ends[d - 1]
            out.append(Sentence(index, s, e, text[s:e], words[c:d], starts[c:d], ends[c:d]))
    return out


class PhraseTable:
    """Fixed token sequences -> payloads, found at every token of a sentence.

    The phrases are stored as a trie of their words, so finding the longest phrase that
    starts at a token walks at most as many words as that phrase has, however many
    phrases share its first words (the lexicon has hundreds that start with "no" or
    "there is no"). Phrase text is tokenised with :func:`tokenize`; a phrase listed twice
    keeps its first payload.
    """

    def __init__(self, items: Iterable[tuple[str, Any]]) -> None:
        root: dict[str, Any] = {}
        for phrase, payload in items:
            toks = tokenize(phrase)
            if not toks:
                continue
            node = root
            for w in toks:
                node = node.setdefault(w, {})
            node.setdefault(_END, payload)  # the first payload of a phrase listed twice
        self._root = root

    def find(self, words: Sequence[str]) -> list[tuple[int, int, Any]]:
        """The longest phrase starting at each token: ``(start, end, payload)``
        token spans (end exclusive), possibly overlapping, in start order."""
        out = []
        root, n = self._root, len(words)
        for i in range(n):
            node, best = root, None
            j = i
            while j < n:
                node = node.get(words[j])
                if node is None:
                    break
                j += 1
                if _END in node:
                    best = (i, j, node[_END])
            if best is not None:
                out.append(best)
        return out


#: The trie key that marks the end of a phrase (no token is empty).
_END = ""


class TokenPattern:
    """A sequence of word sets with "1", "?" (optional) or "*" (any number) counts:
    the subset of spaCy's Matcher patterns (``{"LOWER": {"IN": [...]}, "OP": "*"}``)
    the lexicon uses. :meth:`match` gives the longest match, as medspaCy keeps the
    longest of overlapping matches."""

    def __init__(self, spacy_pattern: Sequence[dict], payload: Any) -> None:
        elements = []
        for d in spacy_pattern:
            lower = d["LOWER"]
            allowed = frozenset(lower["IN"] if isinstance(lower, dict) else [lower])
            elements.append((frozenset(w for a in allowed for w in tokenize(a)), d.get("OP", "1")))
        if not elements or elements[0][1] != "1":
            raise ValueError("a token pattern must start with a required element")
        self.elements = tuple(elements)
        self.payload = payload

    @property
    def first_words(self) -> frozenset[str]:
        """The lower-case words a match can start with."""
        return self.elements[0][0]

    def match(self, words: Sequence[str], i: int) -> int:
        """End (exclusive) of the longest match starting at token ``i``, or -1."""
        return self._match(0, words, i)

    def _match(self, k: int, words: Sequence[str], i: int) -> int:
        if k == len(self.elements):
            return i
        allowed, op = self.elements[k]
        best = self._match(k + 1, words, i) if op in ("?", "*") else -1
        if i < len(words) and words[i] in allowed:
            best = max(best, self._match(k if op == "*" else k + 1, words, i + 1))
        return best


class Matcher:
    """Phrases and token patterns found together, overlaps pruned to the longest
    (medspaCy's ``prune_overlapping_matches`` strategy "longest"; ties go to the
    earlier match), with :data:`DEID_TOKEN` transparent inside matches."""

    def __init__(self, phrases: Iterable[tuple[str, Any]], patterns: Iterable[TokenPattern] = ()) -> None:
        self.table = PhraseTable(phrases)
        self._patterns: dict[str, list[TokenPattern]] = {}
        for p in patterns:
            for w in p.first_words:
                self._patterns.setdefault(w, []).append(p)

    def find(self, words: Sequence[str]) -> list[tuple[int, int, Any]]:
        """Non-overlapping ``(start, end, payload)`` token spans of ``words``, in order."""
        keep = [i for i, w in enumerate(words) if w != DEID_TOKEN]
        if len(keep) != len(words):
            content = [words[i] for i in keep]
        else:
            content, keep = words, None
        found = self.table.find(content)
        if self._patterns:
            get = self._patterns.get
            for i, w in enumerate(content):
                for p in get(w, ()):
                    e = p.match(content, i)
                    if e > i:
                        found.append((i, e, p.payload))
        found = prune_longest(found)
        if keep is not None:
            found = [(keep[s], keep[e - 1] + 1, pl) for s, e, pl in found]
        return found


def prune_longest(matches: list[tuple[int, int, Any]]) -> list[tuple[int, int, Any]]:
    """Of overlapping token spans keep the longest (ties: the earlier); in start order."""
    if len(matches) < 2:
        return list(matches)
    order = sorted(range(len(matches)), key=lambda k: (matches[k][0] - matches[k][1], matches[k][0], k))
    taken: set[int] = set()
    kept = []
    for k in order:
        s, e, _ = matches[k]
        if any(t in taken for t in range(s, e)):
            continue
        taken.update(range(s, e))
        kept.append(matches[k])
    kept.sort(key=lambda m: m[0])
    return kept
