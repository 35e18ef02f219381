"""``benchmarks/light_answers.py``: the choice rule fixed before its first run."""

from benchmarks.light_answers import choose


def test_the_rule_takes_the_most_correct_validate_answers_ties_to_the_larger_k():
    assert choose({1: 22, 2: 18, 3: 3, 4: 0}) == 1
    assert choose({1: 5, 2: 9, 3: 9, 4: 1}) == 3  # a tie goes to the fewer merges
    assert choose({1: 0, 2: 0, 3: 0, 4: 0}) == 4  # nothing right: keep naming zones as found
