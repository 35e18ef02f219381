"""Binomial intervals and agreement for the expert review: Wilson score intervals, the
sample size that reaches a target margin, and Cohen's kappa.

Plain functions of counts, no dependency beyond the standard library, so the tests can
check them against independent implementations (statsmodels, scikit-learn) and
textbook values.

References
----------
E. B. Wilson, "Probable inference, the law of succession, and statistical inference",
J. Am. Stat. Assoc. 22 (1927) 209-212.
J. Cohen, "A coefficient of agreement for nominal scales", Educ. Psychol. Meas. 20
(1960) 37-46.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from statistics import NormalDist

#: Confidence level of every interval the review reports: the 95% the issue asks for
#: (and the usual level of a reported proportion).
CONFIDENCE = 0.95


def z_value(confidence: float = CONFIDENCE) -> float:
    """Two-sided standard normal quantile: 1.959964 for 0.95.

    Raises
    ------
    ValueError
        If ``confidence`` is not in (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n``.

    ``(p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``p = k / n``.
    Unlike the Wald interval it stays inside [0, 1] and keeps its coverage near 0 and 1,
    where acceptance rates of a good dataset lie.

    Parameters
    ----------
    k : int
        Successes (accepted records), ``0 <= k <= n``.
    n : int
        Trials (records decided); 0 gives the uninformative ``(0.0, 1.0)``.
    confidence : float
        Two-sided level, default 0.95.

    Returns
    -------
    (float, float)
        Lower and upper bound, fractions in [0, 1].

    Raises
    ------
    ValueError
        If the counts are negative or ``k > n``.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    return wilson_interval_of(k / n, n, confidence)


def wilson_interval_of(p: float, n: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval (:func:`wilson_interval`) of a proportion ``p`` in [0, 1]
    observed on ``n > 0`` trials, ``n`` possibly fractional: an effective sample size
    (Kish), as for a stratified estimate (:func:`cxrils.review.stats.stratified_rate`).
    Returns lower and upper bound, fractions in [0, 1].

    Raises
    ------
    ValueError
        If ``n`` is not positive.
    """
    if not n > 0:
        raise ValueError(f"the Wilson interval needs n > 0 trials, got {n}")
    z = z_value(confidence)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_half_width(p: float, n: int, confidence: float = CONFIDENCE) -> float:
    """Half the width of the Wilson interval for an observed proportion ``p`` of ``n``
    trials (``p`` need not be a multiple of ``1/n``: the planning value)."""
    z = z_value(confidence)
    return z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1.0 + z * z / n)


def wilson_sample_size(p: float, margin: float, confidence: float = CONFIDENCE) -> int:
    """The smallest ``n`` whose Wilson interval at proportion ``p`` is at most
    ``± margin`` wide.

    Parameters
    ----------
    p : float
        Expected proportion in [0, 1] (the planning value; 0.5 is the worst case).
    margin : float
        Target half-width, a fraction in (0, 0.5].
    confidence : float
        Two-sided level, default 0.95.

    Returns
    -------
    int
        At least 1. For p = 0.5, margin 0.05, 95%: 381 (the Wald formula's 385 minus
        the z²/n terms that make Wilson's interval narrower there).

    Raises
    ------
    ValueError
        If ``p`` or ``margin`` is out of range.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"expected proportion must lie in [0, 1], got {p}")
    if not 0.0 < margin <= 0.5:
        raise ValueError(f"margin must lie in (0, 0.5], got {margin}")
    lo, hi = 1, 1
    while wilson_half_width(p, hi, confidence) > margin:  # the half-width falls as n grows
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if wilson_half_width(p, mid, confidence) <= margin:
            hi = mid
        else:
            lo = mid + 1
    return hi


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels of the same items.

    ``kappa = (p_o - p_e) / (1 - p_e)``: ``p_o`` the observed agreement, ``p_e`` the
    agreement expected from each rater's label frequencies.

    Parameters
    ----------
    a, b : sequences of labels (e.g. "accept" / "reject"), same length, item-aligned.

    Returns
    -------
    float
        In [-1, 1]; NaN when it is undefined (no items, or both raters gave one and the
        same label to every item, ``p_e = 1``), as scikit-learn's ``cohen_kappa_score``.

    Raises
    ------
    ValueError
        If the lengths differ.
    """
    if len(a) != len(b):
        raise ValueError(f"the raters labelled {len(a)} and {len(b)} items")
    n = len(a)
    if n == 0:
        return math.nan
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if p_e >= 1.0:
        return math.nan
    return (p_o - p_e) / (1.0 - p_e)
