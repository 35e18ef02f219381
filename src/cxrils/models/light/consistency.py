"""Consistent answers about one image: global, lung and zone questions agree.

The network answers each question on its own, so on one image "Segment the opacity."
could say present while the questions about both lungs say absent (issue 32). With
:attr:`LightConfig.consistent_answers` the light model asks, beside a question about a
lung lesion type, the global question and the two whole-lung questions of the same
target (Table 2's templates; they ride in the same network pass) and answers as a
hierarchy (ours; the paper's lung lesions lie in lung regions, section 3.1 and
Appendix A.2):

* the **global** question is present iff its own score reaches the target's threshold
  and at least one **lung** is present;
* a **lung** ("... in the right lung.") is present iff its own score and the global
  score reach the threshold, and its mask is not empty;
* any other location question (zones, lobes, lists of them) is present iff its own
  score reaches the threshold and a lung on one of its locations' sides is present.

So a location is answered present only when every question above it is, and the global
answer is present exactly when a lung answer is. The global mask is kept inside the
present lungs (:func:`keep_in_lungs`), so the places it names are on a present side.
Cardiomegaly (an organ, the heart) and lesion-inference questions are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from cxrils import vocab
from cxrils.templates import ParsedText, render_instruction

__all__ = ["Hierarchy", "hierarchy_of", "decide"]


@dataclass(frozen=True)
class Hierarchy:
    """The questions one lung-lesion question is checked against.

    Attributes
    ----------
    global_question : str
        "Segment the {target}." (Table 2, global).
    lung_questions : dict of str to str
        ``{"right lung": "Segment the {target} in the right lung.", "left lung": ...}``
        (Table 2, basic; :data:`cxrils.vocab.WHOLE_LUNGS` order).
    sides : tuple of str
        The lungs (``"right lung"``/``"left lung"``, patient sides) whose presence the
        question's own answer needs: both for a global question, the lungs of its
        locations' sides (:data:`cxrils.vocab.LABEL_SIDE`) otherwise.
    """

    global_question: str
    lung_questions: dict[str, str]
    sides: tuple[str, ...]

    @property
    def questions(self) -> tuple[str, ...]:
        """The global question, then the two lung questions."""
        return (self.global_question, *self.lung_questions.values())


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
    return Hierarchy(render_instruction("global", parsed.target), lungs, sides)


def decide(parsed: ParsedText, hierarchy: Hierarchy, global_score: float,
           lung_scores: dict[str, float], lung_has_pixels: dict[str, bool], threshold: float
           ) -> tuple[bool, tuple[str, ...], str | None]:
    """Whether a question whose own score reaches ``threshold`` is answered present
    under the hierarchy, and why not.

    Parameters
    ----------
    parsed : ParsedText
        The question (basic or global, a lung lesion type).
    hierarchy : Hierarchy
        :func:`hierarchy_of` of it.
    global_score : float
        Presence score of the global question, in [0, 1].
    lung_scores, lung_has_pixels : dict of str
        Per whole lung ("right lung", "left lung"): its question's presence score in
        [0, 1], and whether its mask has a pixel at ``tau_mask``.
    threshold : float
        The target's presence threshold (``tau_presence`` or its per-target value).

    Returns
    -------
    (bool, tuple of str, str or None)
        Present or not; the lungs that are present (patient sides); a note saying which
        question above it answered absent (None when present).
    """
    global_on = global_score >= threshold
    present_lungs = tuple(lung for lung in vocab.WHOLE_LUNGS
                          if lung_scores[lung] >= threshold and global_on and lung_has_pixels[lung])
    if parsed.instruction_type == "global":
        if present_lungs:
            return True, present_lungs, None
        scores = " and ".join(f"{lung_scores[lung]:.2f}" for lung in vocab.WHOLE_LUNGS)
        return False, present_lungs, (
            f"answered absent: no lung is present (the right and the left lung's questions score {scores}, "
            f"threshold {threshold:.2f}; consistent_answers)")
    if not global_on:
        return False, present_lungs, (
            f"answered absent: the global question \"{hierarchy.global_question}\" scores {global_score:.2f}, "
            f"below the threshold {threshold:.2f} (consistent_answers)")
    if not any(lung in present_lungs for lung in hierarchy.sides):
        scores = ", ".join(f"{lung} {lung_scores[lung]:.2f}" for lung in hierarchy.sides)
        return False, present_lungs, (
            f"answered absent: the lung it lies in is absent ({scores}, threshold {threshold:.2f}; "
            "consistent_answers)")
    return True, present_lungs, None
