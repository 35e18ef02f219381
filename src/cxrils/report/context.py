"""The ConText algorithm (Chapman et al. 2007) as medspaCy 1.3 implements it, per sentence.

Restated from medspaCy's ``context/context_modifier.py`` and ``context_graph.py``
(behaviour checked against medspaCy itself in ``tests/report/test_context.py``):

- a cue (modifier) matched in a sentence has a scope in the sentence: FORWARD from
  its end to the sentence end, BACKWARD from the sentence start to its start,
  BIDIRECTIONAL both; a rule's ``max_scope`` (tokens) shortens it;
- overlapping cue matches are pruned to the longest, so a PSEUDO cue ("no interval
  change") hides the cue inside it ("no");
- a TERMINATE cue ("but"), or a cue of the same category, ends a cue's scope where it
  starts (forward) or ends (backward), if the two scopes overlap (medspaCy's one-sided
  test: the other's scope starts or ends inside this one's);
- a cue modifies a target that overlaps its scope and not the cue itself; TERMINATE
  and PSEUDO cues modify nothing.

Differences, all deliberate: work is per sentence (medspaCy compares every pair of
cues of the whole document, quadratic in the document's length); the cue and target
spans come from :class:`cxrils.report.tokens.Matcher`; and a clause boundary
(:data:`cxrils.report.lexicon.CLAUSE_BOUNDARIES`: ";", "but", "however" ...) ends a
scope without the overlap test, which never lets a terminator, whose scope is the whole sentence, end a backward
scope that ``max_scope`` cut ("left basilar opacity noted previously is unchanged; the
right effusion has resolved" negates the opacity in medspaCy 1.3.1). Other terminators
("with", "which", "persistent") keep the test: inside a long subject they would cut a
negation off from its finding ("small right pleural effusion with adjacent atelectasis
... is not seen").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cxrils.report.lexicon import CLAUSE_BOUNDARIES

TERMINATE = "TERMINATE"
PSEUDO = "PSEUDO"


def tuple_overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """medspaCy's overlap test: ``b`` starts or ends inside ``a`` (token spans, end exclusive)."""
    return a[0] <= b[0] < a[1] or a[0] < b[1] <= a[1]


@dataclass
class Modifier:
    """One matched cue in a sentence (token indices relative to the sentence)."""

    start: int
    end: int
    category: str
    direction: str  # FORWARD | BACKWARD | BIDIRECTIONAL | TERMINATE | PSEUDO
    scope_start: int = 0
    scope_end: int = 0
    clause_boundary: bool = False  # a TERMINATE cue of CLAUSE_BOUNDARIES

    def set_scope(self, n_tokens: int, max_scope: int | None) -> None:
        """The scope inside a sentence of ``n_tokens`` tokens (medspaCy ``__set_scope``)."""
        if self.direction == "FORWARD":
            self.scope_start, self.scope_end = self.end, n_tokens
            if max_scope is not None and self.scope_end - self.scope_start > max_scope:
                self.scope_end = self.end + max_scope
        elif self.direction == "BACKWARD":
            self.scope_start, self.scope_end = 0, self.start
            if max_scope is not None and self.scope_end - self.scope_start > max_scope:
                self.scope_start = self.start - max_scope
        else:
            self.scope_start, self.scope_end = 0, n_tokens
            if max_scope is not None and self.start - self.scope_start > max_scope:
                self.scope_start = self.start - max_scope
            if max_scope is not None and self.scope_end - self.end > max_scope:
                self.scope_end = self.end + max_scope

    def limit_scope(self, other: Modifier) -> None:
        """End this cue's scope at ``other`` (medspaCy 1.3 ``limit_scope``; a clause
        boundary skips its overlap test, module docstring)."""
        overlap = tuple_overlaps((self.scope_start, self.scope_end), (other.scope_start, other.scope_end))
        if not overlap and not other.clause_boundary:
            return
        if self.direction == TERMINATE:
            return
        if other.direction != TERMINATE and other.category != self.category:
            return
        if self.direction in ("FORWARD", "BIDIRECTIONAL") and other.start > self.start:
            self.scope_end = min(self.scope_end, other.start)
        if self.direction in ("BACKWARD", "BIDIRECTIONAL") and other.end < self.end:
            self.scope_start = max(self.scope_start, other.end)

    def modifies(self, start: int, end: int) -> bool:
        """Whether this cue modifies the target token span ``[start, end)``."""
        if tuple_overlaps((self.start, self.end), (start, end)):
            return False
        if self.direction in (TERMINATE, PSEUDO):
            return False
        return tuple_overlaps((self.scope_start, self.scope_end), (start, end))


def target_modifiers(
    n_tokens: int, targets: Sequence[tuple[int, int]], cues: Sequence[tuple[int, int, tuple[str, str, str, int | None]]]
) -> list[list[tuple[str, int, int]]]:
    """ConText on one sentence: the cues that modify each target.

    Parameters
    ----------
    n_tokens : int
        Tokens in the sentence.
    targets : sequence of (start, end)
        Target token spans (end exclusive).
    cues : sequence of (start, end, rule)
        Non-overlapping cue matches; ``rule`` is ``(literal, category, direction,
        max_scope)`` as in :data:`cxrils.report.lexicon.CONTEXT_RULES`.

    Returns
    -------
    list of list of (category, start, end)
        For each target, the category and token span of every cue that modifies it,
        in cue order.
    """
    mods = []
    for s, e, (literal, category, direction, max_scope) in cues:
        m = Modifier(s, e, category, direction, clause_boundary=direction == TERMINATE and literal in CLAUSE_BOUNDARIES)
        m.set_scope(n_tokens, max_scope)
        mods.append(m)
    for i in range(len(mods) - 1):  # medspaCy's update_scopes, on this sentence's cues
        for j in range(i + 1, len(mods)):
            mods[i].limit_scope(mods[j])
            mods[j].limit_scope(mods[i])
    return [[(m.category, m.start, m.end) for m in mods if m.modifies(s, e)] for s, e in targets]
