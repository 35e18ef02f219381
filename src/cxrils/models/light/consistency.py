"""Consistent answers about one image: global, lung and zone questions agree.

The network answers each question on its own, so on one image "Segment the opacity."
could say present while the questions about both lungs say absent (issue 32). With
:attr:`LightConfig.consistent_answers` the light model asks, beside a question about a
lung lesion type, the two whole-lung questions of the same target (Table 2's basic
template; they ride in the same network pass) and answers lung first (ours; the paper's
lung lesions lie in lung regions, section 3.1 and Appendix A.2):

* a **lung** ("... in the right lung.") is present iff its own score reaches the
  target's threshold and its mask is not empty; no other question gates it;
* the **global** question is present iff at least one lung is present, whatever its own
  score (which is still reported); its mask is kept inside the present lungs
  (``LightSegmenter._keep_in_lungs``), or is the union of their masks where nothing of it is left;
* any other location question (zones, lobes, lists of them) is present iff its own
  score reaches the threshold, its mask is not empty and a lung on one of its
  locations' sides is present.

So a location is answered present only when its lung is, and the global answer is
present exactly when a lung answer is. An earlier rule also gated every lung on the
global question's own score; it cost most of the recall of the location questions
(docs/results/human_masks.md), since the global score is the least sure of the three.
Cardiomegaly (an organ, the heart) and lesion-inference questions are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from cxrils import vocab
from cxrils.templates import ParsedText, render_instruction

__all__ = ["Hierarchy", "hierarchy_of", "decide"]


@dataclass(frozen=True)
class Hierarchy:
    """The lung questions one lung-lesion question is checked against.

    Attributes
    ----------
    lung_questions : dict of str to str
        ``{"right lung": "Segment the {target} in the right lung.", "left lung": ...}``
        (Table 2, basic; :data:`cxrils.vocab.WHOLE_LUNGS` order).
    sides : tuple of str
        The lungs (``"right lung"``/``"left lung"``, patient sides) one of which must be
        present for the question's own answer: both for a global question, the lungs of
        its locations' sides (:data:`cxrils.vocab.LABEL_SIDE`) otherwise.
    """

    lung_questions: dict[str, str]
    sides: tuple[str, ...]

    @property
    def questions(self) -> tuple[str, ...]:
        """The two lung questions (patient right, then left)."""
        return tuple(self.lung_questions.values())


def hierarchy_of(parsed: ParsedText | None) -> Hierarchy | None:
    """The hierarchy a question is answered in, or None when it has none.

    Parameters
    ----------
    parsed : ParsedText or None
        The instruction as read (:func:`cxrils.models.light.text.interpret_instruction`).

    Returns
    -------
    Hierarchy or None
        None for an unread instruction, a lesion-inference question, an organ target
        (cardiomegaly) or a location outside both lungs.
    """
    if parsed is None or parsed.target is None or parsed.target in vocab.ORGAN_LOCATIONS \
            or parsed.instruction_type not in ("basic", "global"):
        return None
    lungs = {lung: render_instruction("basic", parsed.target, [lung]) for lung in vocab.WHOLE_LUNGS}
    if parsed.instruction_type == "global":
        sides = vocab.WHOLE_LUNGS
    else:
        named = {vocab.LABEL_SIDE.get(loc) for loc in parsed.locations}
        sides = tuple(lung for lung in vocab.WHOLE_LUNGS if vocab.LABEL_SIDE[lung] in named)
        if not sides:
            return None
    return Hierarchy(lungs, sides)


def decide(parsed: ParsedText, hierarchy: Hierarchy, own_score: float, own_has_pixels: bool,
           lung_scores: dict[str, float], lung_has_pixels: dict[str, bool], threshold: float
           ) -> tuple[bool, tuple[str, ...], str | None]:
    """Whether a question is answered present under the lung-first rule, and why.

    Parameters
    ----------
    parsed : ParsedText
        The question (basic or global, a lung lesion type).
    hierarchy : Hierarchy
        :func:`hierarchy_of` of it.
    own_score : float
        The question's own presence score, in [0, 1].
    own_has_pixels : bool
        Whether the question's own mask has a pixel at ``tau_mask``.
    lung_scores, lung_has_pixels : dict of str
        Per whole lung ("right lung", "left lung"): its question's presence score in
        [0, 1], and whether its mask has a pixel at ``tau_mask``.
    threshold : float
        The target's presence threshold (``tau_presence`` or its per-target value).

    Returns
    -------
    (bool, tuple of str, str or None)
        Present or not; the lungs that are present (patient sides); a note saying what
        decided it, or None where the question's own score and mask already say it.
    """
    present_lungs = tuple(lung for lung in vocab.WHOLE_LUNGS
                          if lung_scores[lung] >= threshold and lung_has_pixels[lung])
    if parsed.instruction_type == "global":
        if not present_lungs:
            scores = " and ".join(f"{lung_scores[lung]:.2f}" for lung in vocab.WHOLE_LUNGS)
            return False, present_lungs, (
                f"answered absent: no lung is present (the right and the left lung's questions score {scores}, "
                f"threshold {threshold:.2f}; consistent_answers)")
        if own_score < threshold:
            return True, present_lungs, (
                f"answered present: the {' and the '.join(present_lungs)} {'is' if len(present_lungs) == 1 else 'are'}"
                f" present, though the global question's own score is {own_score:.2f} (threshold "
                f"{threshold:.2f}; consistent_answers)")
        return True, present_lungs, None
    if own_score < threshold:
        return False, present_lungs, None
    if not own_has_pixels:
        return False, present_lungs, None  # the caller says which tau_mask no pixel reaches
    if not any(lung in present_lungs for lung in hierarchy.sides):
        scores = ", ".join(f"{lung} {lung_scores[lung]:.2f}" for lung in hierarchy.sides)
        return False, present_lungs, (
            f"answered absent: the lung it lies in is absent ({scores}, threshold {threshold:.2f}; "
            "consistent_answers)")
    return True, present_lungs, None
