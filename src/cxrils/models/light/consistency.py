"""Consistent answers about one image: global, lung and zone questions agree.

The network answers each question on its own, so on one image "Segment the opacity."
could say present while the questions about both lungs say absent (issue 32). With
:attr:`LightConfig.consistent_answers` the light model asks, beside a question about a
lung lesion type, the three **lung-level** questions of the same target (they ride in
the same network pass): the global one, the right lung's and the left lung's (Table 2's
global and basic templates). Each lung is then decided once
(ours; the paper's lung lesions lie in lung regions, section 3.1 and Appendix A.2):

* a **lung is present** when a lung-level question that covers it passes (its score
  reaches the target's threshold and its mask has a pixel at ``tau_mask``): its own
  question, or the global question whose mask lies in it (the lungs of
  :func:`cxrils.models.light.answer.locations_from_mask`);
* a **lung-level question** is present iff a lung it covers is present, whatever its
  own score (which is still reported); a global mask is kept inside its present lungs (``LightSegmenter._keep_in_lungs``), and a question lifted by another
  one answers with the passing lung-level masks inside its present lungs;
* any other location question (zones, lobes, lists of them, both lungs) is present iff a
  lung on one of its locations' sides is present and either its own score reaches the
  threshold with a non-empty mask, or the mask the global question answers with lies in
  one of its locations (the zones and lungs
  :func:`cxrils.models.light.answer.locations_from_mask` finds in it, lifted or not, before
  ``lung_answer_min_zones`` names a lung for its zones in the answer text; a found zone
  stands for its lung, a lung found whole for its four zones): a global mask in the right
  upper zone is not followed by "There is no opacity in the right upper zone lung". Such a question does
  not lift its lung: a light model
  trained before issue 28's both-lungs negatives
  (:func:`cxrils.training.light_data.both_lungs_negatives`) scored the both-lungs question
  near 1 on normal images (a text shortcut: its training data asked it only of
  positives), and a zone would take eight more network rows.

So a zone is answered present only when its lung is, and the global answer is present
exactly when a lung answer is. Two earlier rules gated the lungs instead (on the global
question's own score, then on each lung's own score alone); both cost much of the recall
of the location questions (docs/results/human_masks.md), since a lesion often passes
the global question while each single lung scores below the threshold. A
lesion-inference question ("Segment the opacity in the left lung and predict its
type.") is decided as the basic question of its locations is (its type comes from its
own row). Cardiomegaly (an organ, the heart) is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from cxrils import vocab
from cxrils.templates import ParsedText, render_instruction

__all__ = ["LUNG_LEVEL", "Evidence", "Hierarchy", "hierarchy_of", "named_places", "present_lungs", "decide"]

#: The lung-level questions, in the order they ride in the network pass: the global
#: question, then the two whole lungs (:data:`cxrils.vocab.WHOLE_LUNGS`).
LUNG_LEVEL: tuple[str, ...] = ("global",) + vocab.WHOLE_LUNGS

_NAMES = {
    "global": "the global question",
    "right lung": "the right lung's question",
    "left lung": "the left lung's question",
}


@dataclass(frozen=True)
class Evidence:
    """What one lung-level question says about an image.

    Attributes
    ----------
    score : float
        Its presence score, in [0, 1].
    has_pixels : bool
        Whether its mask has a pixel at ``tau_mask``.
    lungs : tuple of str
        The whole lungs (patient sides, :data:`cxrils.vocab.WHOLE_LUNGS` order) it says
        are involved when it passes: its own lung for a lung question, the lungs its
        mask lies in for the global question (empty where it does not pass).
    """

    score: float
    has_pixels: bool
    lungs: tuple[str, ...]

    def passes(self, threshold: float) -> bool:
        """Whether the score reaches ``threshold`` and the mask is not empty."""
        return self.score >= threshold and self.has_pixels


@dataclass(frozen=True)
class Hierarchy:
    """The lung-level questions one lung-lesion question is checked against.

    Attributes
    ----------
    lung_questions : dict of str to str
        :data:`LUNG_LEVEL` key -> question of the same target, e.g. ``{"global":
        "Segment the opacity.", "right lung": "Segment the opacity in the right lung.",
        "left lung": "Segment the opacity in the left lung."}``.
    sides : tuple of str
        The lungs (``"right lung"``/``"left lung"``, patient sides) the question covers:
        both for a global question, the lungs of its locations' sides
        (:data:`cxrils.vocab.LABEL_SIDE`) otherwise.
    level : str or None
        The question's own :data:`LUNG_LEVEL` key, or None for a zone, lobe or any list
        of locations (both lungs included).
    locations : tuple of str
        The question's own query locations (empty for the global question).
    inference : bool
        A lesion-inference question: its own row is not the lung-level question of its
        lung (that one is asked beside it), so it never stands in for it.
    """

    lung_questions: dict[str, str]
    sides: tuple[str, ...]
    level: str | None
    locations: tuple[str, ...] = ()
    inference: bool = False

    @property
    def questions(self) -> tuple[str, ...]:
        """The three lung-level questions (:data:`LUNG_LEVEL` order)."""
        return tuple(self.lung_questions[key] for key in LUNG_LEVEL)


def hierarchy_of(parsed: ParsedText | None) -> Hierarchy | None:
    """The hierarchy a question is answered in, or None when it has none.

    Parameters
    ----------
    parsed : ParsedText or None
        The instruction as read (:func:`cxrils.models.light.text.interpret_instruction`).

    Returns
    -------
    Hierarchy or None
        None for an unread instruction, an organ target (cardiomegaly) or a location
        outside both lungs. A lesion-inference question, which names no target, is
        checked against the opacity questions (:mod:`cxrils.models.light.text` reads it
        so too).
    """
    if parsed is None or parsed.instruction_type not in ("basic", "global", "lesion_inference"):
        return None
    t = "opacity" if parsed.instruction_type == "lesion_inference" else parsed.target
    if t is None or t in vocab.ORGAN_LOCATIONS:
        return None
    questions = {
        "global": render_instruction("global", t),
        **{lung: render_instruction("basic", t, [lung]) for lung in vocab.WHOLE_LUNGS},
    }
    if parsed.instruction_type == "global":
        return Hierarchy(questions, vocab.WHOLE_LUNGS, "global")
    named = {vocab.LABEL_SIDE.get(loc) for loc in parsed.locations}
    sides = tuple(lung for lung in vocab.WHOLE_LUNGS if vocab.LABEL_SIDE[lung] in named)
    if not sides:
        return None
    level = parsed.locations[0] if len(parsed.locations) == 1 and parsed.locations[0] in vocab.WHOLE_LUNGS else None
    inference = parsed.instruction_type == "lesion_inference"
    return Hierarchy(questions, sides, level, tuple(parsed.locations), inference)


def named_places(locations: list[str]) -> frozenset[str]:
    """The query locations a mask found in ``locations`` (those of
    :func:`cxrils.models.light.answer.locations_from_mask`) speaks of: each one, the lung
    of a found zone, and the four zones of a lung found whole."""
    out = set(locations)
    for lung, zones in vocab.ZONES_OF_LUNG.items():
        if lung in out:
            out.update(zones)
        elif out & set(zones):
            out.add(lung)
    return frozenset(out)


def present_lungs(evidence: dict[str, Evidence], threshold: float) -> tuple[str, ...]:
    """The lungs (:data:`cxrils.vocab.WHOLE_LUNGS` order, patient sides) a passing
    lung-level question says are involved (``evidence``: per :data:`LUNG_LEVEL` key)."""
    present = {lung for ev in evidence.values() if ev.passes(threshold) for lung in ev.lungs}
    return tuple(lung for lung in vocab.WHOLE_LUNGS if lung in present)


def decide(
    hierarchy: Hierarchy,
    own: Evidence,
    evidence: dict[str, Evidence],
    threshold: float,
    named: frozenset[str] = frozenset(),
) -> tuple[bool, tuple[str, ...], str | None]:
    """Whether a question is answered present under the consistent-answers rule, and why.

    Parameters
    ----------
    hierarchy : Hierarchy
        :func:`hierarchy_of` of the question.
    own : Evidence
        The question's own score and mask (``lungs``: as for a lung-level question, or
        its sides' lungs for a location question).
    evidence : dict of str to Evidence
        Per :data:`LUNG_LEVEL` key: what that question says. For a lung-level question
        (not a lesion-inference one) its own entry is replaced by ``own``, so one network
        row decides it.
    threshold : float
        The target's presence threshold (``tau_presence`` or its per-target value).
    named : frozenset of str
        The query locations the global question's mask lies in (:func:`named_places` of
        the locations of the mask it answers with; empty where it is absent). Read only
        for a zone, lobe or list question.

    Returns
    -------
    (bool, tuple of str, str or None)
        Present or not; the present lungs the question covers (patient sides,
        :data:`cxrils.vocab.WHOLE_LUNGS` order); a note saying what decided it, or None
        where the question's own score and mask already say it.
    """
    if hierarchy.level is not None and not hierarchy.inference:
        evidence = {**evidence, hierarchy.level: own}
    present = present_lungs(evidence, threshold)
    covered = tuple(lung for lung in hierarchy.sides if lung in present)
    scores = ", ".join(f"{key} {evidence[key].score:.3f}" for key in LUNG_LEVEL)
    rule = f"threshold {threshold:.3f}; consistent_answers"
    if hierarchy.level is None:  # a zone, lobe or list of them: inside a present lung
        if own.passes(threshold):
            if covered:
                return True, covered, None
            return (
                False,
                covered,
                (f"answered absent: the lung it lies in is absent (lung-level questions: {scores}; {rule})"),
            )
        places = [loc for loc in hierarchy.locations if loc in named]
        if not covered or not places:
            return False, covered, None
        return (
            True,
            covered,
            (
                f"answered present: the global question's mask lies in the {' and the '.join(places)}, though "
                f"this question's own score is {own.score:.3f} ({rule})"
            ),
        )
    if not covered:
        if own.score < threshold or not hierarchy.inference:
            # the score alone says absent; or it passes with no pixel at tau_mask, which
            # the caller's note says
            return False, covered, None
        where = "no lung answers present" if hierarchy.level == "global" else "its lung answers absent"
        return False, covered, f"answered absent: {where} (lung-level questions: {scores}; {rule})"
    if own.passes(threshold):
        return True, covered, None
    by = " and ".join(
        _NAMES[key] for key in LUNG_LEVEL if evidence[key].passes(threshold) and set(evidence[key].lungs) & set(covered)
    )
    verb = "is" if len(covered) == 1 else "are"
    return (
        True,
        covered,
        (
            f"answered present: the {' and the '.join(covered)} {verb} present by {by}, though this "
            f"question's own score is {own.score:.3f} ({rule})"
        ),
    )
