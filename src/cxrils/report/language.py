"""Whether a report is written in English, the only language the report structurers read.

The ``rules`` structurer and the location mapper match English words. A report in
another language ("Infiltrat im rechten Unterlappen. Grosser Pleuraerguss links.")
yields no finding, and the instruction generator would turn that silence into "There
is no effusion." negatives: wrong labels. :func:`not_english_reason` excludes such a
report instead: one of at least :attr:`cxrils.config.ReportConfig.language_min_words`
words that holds at least :attr:`~cxrils.config.ReportConfig.language_min_foreign`
function words of other European report languages (:data:`FOREIGN_WORDS`) and more of them than English function words
(:data:`ENGLISH_WORDS`): "Erguss rechts. Infiltrat im linken Unterlappen." holds two
(German inflected side words count: "linken"). Function words, not medical terms, tell languages apart
("pleural" and "opacity" look alike in several). The word lists are ours and leave out
words that are also English or report abbreviations ("a", "in", "no", "et", "im"). Checked on every report of the
public IU collection and every COVID-19 case note of the shared data, none of which it
excludes (``tests/report/test_language.py``).
"""

from __future__ import annotations

import re

__all__ = ["ENGLISH_WORDS", "FOREIGN_WORDS", "function_words", "not_english_reason", "words"]

#: English function words (ours; lower case).
ENGLISH_WORDS: frozenset[str] = frozenset(
    """
    the of and with is are was were there not this that these those from for on at by be
    been has have had which or as to without within but also into than then its their
    """.split()
)
#: Function words and side words of German, Dutch, French, Spanish, Italian and
#: Portuguese reports that are neither English words nor report abbreviations (ours;
#: lower case; left out: "et" (ET tube), "im" (IM), "y" (y/o), "do", "die", "den", "son",
#: "il", "os", "da", "con", "sin", "es", "van", "com", "sem", "di", "lo", "dos", "est" (est.),
#: "non" (non-specific), "met", "sono").
FOREIGN_WORDS: frozenset[str] = frozenset(
    """
    der das dem des und mit ist sind nicht kein keine ein eine einer bei oder auch links
    rechts linken rechten linke rechte linkem rechtem linkes rechtes beidseits beidseitig
    beidseitige beidseitigen zu zum zur vom auf nach wie seit het een niet geen le les du
    avec sans une sont droit droite gauche dans au aux el los las del por una en
    derecho derecha derechos derechas izquierdo izquierda izquierdos izquierdas gli della
    delle dei nel nella destro destra sinistro sinistra direito direita esquerdo esquerda
    """.split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def words(text: str | None) -> list[str]:
    """The words of ``text`` as written: runs of letters of any alphabet (no digits, no
    underscore), in order; ``[]`` for None or an empty text."""
    return _WORD.findall(text or "")


def function_words(text: str) -> tuple[int, int, int]:
    """``(english, foreign, words)``: the text's words (:func:`words`, lower-cased) in
    :data:`ENGLISH_WORDS`, in :data:`FOREIGN_WORDS`, and in all."""
    words_ = [w.lower() for w in words(text)]
    return sum(w in ENGLISH_WORDS for w in words_), sum(w in FOREIGN_WORDS for w in words_), len(words_)


def not_english_reason(text: str, min_words: int, min_foreign: int) -> str | None:
    """Why ``text`` is not read as English (module docstring), or None.

    Parameters
    ----------
    text : str
        The report section to structure.
    min_words : int
        Texts with fewer words are not judged; 0 turns the check off.
    min_foreign : int
        Fewest foreign function words that make a text foreign (a stray one, as in a
        place name "Hospital de ...", a name "Dr. Zu" or an abbreviation "DES", does not).

    Returns
    -------
    str or None
        E.g. ``"not English: 3 function words of other languages against 0 English ones
        (of 14 words); the report structurers read English"``.
    """
    if min_words <= 0:
        return None
    english, foreign, words = function_words(text)
    if words < min_words or foreign < min_foreign or foreign <= english:
        return None
    return (
        f"not English: {foreign} function words of other languages against {english} English ones "
        f"(of {words} words); the report structurers read English"
    )
