"""Wilson intervals, the sample size for a target margin and Cohen's kappa, against
independent implementations (statsmodels, scikit-learn) and published values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cxrils.review.intervals import cohen_kappa, wilson_half_width, wilson_interval, wilson_sample_size


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # R. G. Newcombe, "Two-sided confidence intervals for the single proportion: comparison of
        # seven methods", Stat. Med. 17 (1998) 857-872, Table II, method 3 (Wilson score, 95%).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombes_published_intervals(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=5e-5) and hi == pytest.approx(high, abs=5e-5)


def test_wilson_matches_statsmodels_for_many_counts_and_levels():
    proportion_confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 2000))
        k = int(rng.integers(0, n + 1))
        conf = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
        want = proportion_confint(k, n, alpha=1 - conf, method="wilson")
        assert wilson_interval(k, n, conf) == pytest.approx(want, abs=1e-12)


def test_wilson_edges_and_bad_counts():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and 0.69 < lo < 0.73  # 10/10 accepted still leaves room below 1
    for k, n in ((-1, 5), (6, 5), (1, -1)):
        with pytest.raises(ValueError):
            wilson_interval(k, n)


@pytest.mark.parametrize(("p", "margin"), [(0.5, 0.05), (0.901, 0.05), (0.977, 0.05), (0.9, 0.1), (0.99, 0.02)])
def test_sample_size_is_the_smallest_n_reaching_the_margin(p, margin):
    proportion_confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
    n = wilson_sample_size(p, margin)

    def half(m: int) -> float:  # statsmodels' Wilson interval at the planning proportion
        lo, hi = proportion_confint(p * m, m, alpha=0.05, method="wilson")
        return (hi - lo) / 2

    assert half(n) <= margin + 1e-12 < half(n - 1)
    assert wilson_half_width(p, n) == pytest.approx(half(n), abs=1e-12)


def test_sample_size_is_close_to_the_wald_formula():
    # Wald: n = z^2 p (1 - p) / m^2 = 384.1 -> 385 at p = 0.5, m = 0.05. Wilson's interval is
    # narrower at p = 0.5 (its z^2/n terms) and wider near 0 and 1 (it is not centred on p),
    # so it needs a few records fewer there and a few more here.
    z = 1.959963984540054
    assert wilson_sample_size(0.5, 0.05) < 385
    assert wilson_sample_size(0.9, 0.05) > math.ceil(z * z * 0.9 * 0.1 / 0.05**2)
    for p, m in ((0.5, 0.05), (0.7, 0.03), (0.9, 0.05)):
        wald = math.ceil(z * z * p * (1 - p) / (m * m))
        assert 0.95 * wald <= wilson_sample_size(p, m) <= 1.05 * wald
    with pytest.raises(ValueError, match="margin"):
        wilson_sample_size(0.9, 0.0)
    with pytest.raises(ValueError, match="proportion"):
        wilson_sample_size(1.2, 0.05)


def _table(a: int, b: int, c: int, d: int) -> tuple[list[str], list[str]]:
    """Two raters' labels from a 2 x 2 table: a yes/yes, b yes/no, c no/yes, d no/no."""
    return (["yes"] * (a + b) + ["no"] * (c + d), ["yes"] * a + ["no"] * b + ["yes"] * c + ["no"] * d)


@pytest.mark.parametrize(
    ("cells", "kappa"),
    [
        ((20, 5, 10, 15), 0.4),  # p_o 0.70, p_e 0.50
        ((45, 15, 25, 15), 0.1304),  # p_o 0.60, p_e 0.54: same agreement, lower kappa
        ((25, 35, 5, 35), 0.2593),  # p_o 0.60, p_e 0.46
    ],
)
def test_kappa_textbook_tables(cells, kappa):
    assert cohen_kappa(*_table(*cells)) == pytest.approx(kappa, abs=5e-5)


def test_kappa_matches_scikit_learn():
    cohen_kappa_score = pytest.importorskip("sklearn.metrics").cohen_kappa_score
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(2, 300))
        a = rng.choice(["accept", "reject"], size=n, p=[0.85, 0.15])
        flip = rng.random(n) < 0.2
        b = np.where(flip, np.where(a == "accept", "reject", "accept"), a)
        want = cohen_kappa_score(a, b)
        got = cohen_kappa(a.tolist(), b.tolist())
        assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want, abs=1e-12)


def test_kappa_undefined_and_unequal_lengths():
    assert math.isnan(cohen_kappa(["accept"] * 5, ["accept"] * 5))  # one label everywhere: p_e = 1
    assert math.isnan(cohen_kappa([], []))
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="2 and 1"):
        cohen_kappa(["a", "b"], ["a"])
