"""benchmarks.light_prior_shift: which questions count as lung-level and the per-half counts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from benchmarks.light_prior_shift import answers_at, is_lung_level, tally


def test_lung_level_questions_are_global_and_whole_lungs_only():
    assert is_lung_level([])  # the global question
    assert is_lung_level(["right lung"])
    assert is_lung_level(["right lung", "left lung"])
    assert not is_lung_level(["left lower zone"])
    assert not is_lung_level(["right lung", "left upper zone"])


def test_tally_counts_each_half_apart():
    rows = [
        # (half, positive, normal-image lung-level question, answered present)
        ("anomaly", False, True, False),  # normal lung question, absent: correct
        ("anomaly", False, True, True),  # normal lung question, present: wrong
        ("anomaly", False, False, False),  # a zone negative on a COVID image, absent
        ("anomaly", True, False, True),  # positive found
        ("detector", True, False, False),  # positive missed
        ("detector", False, True, True),
    ]
    got = tally(rows)
    assert got["anomaly"] == (1, 2, 2, 3, 1, 1)
    assert got["detector"] == (0, 1, 0, 1, 0, 1)


class _ScoreModel:
    """Answers present where its fixed score reaches the opacity threshold in force."""

    def __init__(self, scores):
        self.scores = scores
        self.config = SimpleNamespace(tau_presence_by_target={"opacity": 0.9148, "edema": 0.5})

    def predict_many(self, images, instructions):
        tau = self.config.tau_presence_by_target["opacity"]
        return [SimpleNamespace(mask=np.full((2, 2), s >= tau)) for s in self.scores[: len(instructions)]]


def test_answers_at_each_threshold_then_restores_the_models():
    m = _ScoreModel([0.86, 0.93, 0.99])
    got = answers_at(m, np.zeros((4, 4), np.uint8), ["a", "b", "c"], [0.85, 0.9, 0.95])
    assert got == [[True, True, True], [False, True, True], [False, False, True]]
    assert m.config.tau_presence_by_target == {"opacity": 0.9148, "edema": 0.5}
