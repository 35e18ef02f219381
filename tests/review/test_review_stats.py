"""Review statistics: the consensus rule, grouped rates with Wilson intervals, kappa
between reviewers, the stratified dataset estimate, the paper's rates beside ours."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from cxrils.review import open_review
from cxrils.review.intervals import wilson_interval
from cxrils.review.report import print_stats, stats_html
from cxrils.review.stats import review_stats, stratified_rate

# (ann, bob) per sample position; None = no decision. Consensus: 0 accepted, 1 rejected
# (bob), 2 rejected, 3 accepted (ann only skipped), 4 accepted (ann alone), 5 nothing.
PLAN = {
    0: ("accept", "accept"),
    1: ("accept", ("reject", "wrong_extent")),
    2: (("reject", "wrong_side"), ("reject", "wrong_side")),
    3: ("skip", "accept"),
    4: ("accept", None),
    5: (None, "skip"),
}
CONSENSUS = {0: True, 1: False, 2: False, 3: True, 4: True}


@pytest.fixture
def reviewed(dataset):
    r = open_review(dataset)
    for pos, pair in PLAN.items():
        rid = r.record(pos)["record_id"]
        for who, d in zip(("ann", "bob"), pair):
            if d is not None:
                decision, reason = (d, None) if isinstance(d, str) else d
                r.store.decide(who, rid, decision, reason)
    r.store.decide("ann", r.record(6)["record_id"], "reject", "not_a_lesion")
    r.store.undo("ann")  # withdrawn: counts for nothing
    yield r
    r.close()


def test_consensus_rates_per_group_with_wilson_intervals(reviewed):
    stats = review_stats(reviewed.store)
    assert stats.counts["with_consensus"] == 5 and stats.counts["skipped_only"] == 1
    assert stats.counts["decisions"] == 12 and stats.counts["current"] == 10
    all_ = stats.rates[()].iloc[0]
    assert (all_["n"], all_["accepted"]) == (5, 3)
    assert (all_["low"], all_["high"]) == pytest.approx(wilson_interval(3, 5))
    # the same groups computed here from the sample's strata
    strata = reviewed.sample.set_index("position")
    truth = pd.DataFrame(
        [
            {**strata.loc[p, ["lesion_type", "polarity", "instruction_type"]].to_dict(), "acc": a}
            for p, a in CONSENSUS.items()
        ]
    )
    for by in (("lesion_type",), ("polarity",), ("instruction_type",), ("lesion_type", "polarity")):
        want = truth.groupby(list(by))["acc"].agg(["size", "sum"]).reset_index()
        got = stats.rates[by].merge(want, on=list(by))
        assert len(got) == len(want) == len(stats.rates[by])
        assert (got["n"] == got["size"]).all() and (got["accepted"] == got["sum"]).all()
        for row in got.itertuples():
            assert (row.low, row.high) == pytest.approx(wilson_interval(int(row.sum), int(row.size)))


def test_per_reviewer_rates_reasons_and_kappa(reviewed):
    stats = review_stats(reviewed.store)
    rr = stats.reviewer_rates.set_index(["reviewer", "polarity"])
    assert (rr.loc[("ann", "all"), "n"], rr.loc[("ann", "all"), "accepted"]) == (4, 3)
    assert (rr.loc[("bob", "all"), "n"], rr.loc[("bob", "all"), "accepted"]) == (4, 2)
    reasons = stats.reasons.groupby("reason")["n"].sum().to_dict()
    assert reasons == {"wrong extent": 1, "wrong side": 2}  # the withdrawn "not a lesion" is gone
    pair = stats.agreement.iloc[0]
    assert (pair["reviewer_a"], pair["reviewer_b"], pair["both"]) == ("ann", "bob", 3)
    cohen_kappa_score = pytest.importorskip("sklearn.metrics").cohen_kappa_score
    assert pair["kappa"] == pytest.approx(
        cohen_kappa_score(["accept", "accept", "reject"], ["accept", "reject", "reject"])
    )
    assert pair["agree"] == pytest.approx(2 / 3)


def test_paper_rates_stand_beside_ours(reviewed):
    stats = review_stats(reviewed.store)
    paper = stats.paper.set_index("what")["paper"]
    assert paper["all records"].startswith("96.4% of 10,701") and "96.1-98.7%" in paper["all records"]
    assert paper["positive records"] == "90.1% (Table 3)" and paper["negative records"] == "97.7% (Table 3)"
    assert "B 79.9%" in paper["atelectasis, positive"] and "A 89.8%; B 89.3%; C 99.5%" in paper["effusion, positive"]
    page = stats_html(stats, "ds")
    assert "96.4% of 10,701" in page and "Cohen" in page and "<script" not in page
    from rich.console import Console

    console = Console(record=True, width=160)
    print_stats(stats, console)
    text = console.export_text()
    assert "60.0% [23.1-88.2]" in text  # 3 of 5 with the Wilson interval (statsmodels: 0.2307, 0.8824)


def test_stratified_estimate_weighs_strata_by_their_size():
    strata = pd.DataFrame({"N": [100, 900], "n": [10, 10], "k": [10, 5]})
    rate, low, high = stratified_rate(strata)
    assert rate == pytest.approx(0.1 * 1.0 + 0.9 * 0.5)  # not the pooled 15/20
    assert low < rate < high
    # Wilson's interval where the stratified design is plain sampling (statsmodels
    # proportion_confint(method="wilson") gives these bounds): one stratum of a large
    # population, 48 of 50 accepted; ten strata of equal rate sampled in proportion, 30
    # of 50; one stratum, every sampled record accepted, 10 of 10
    assert stratified_rate(pd.DataFrame({"N": [10**9], "n": [50], "k": [48]}))[1:] == pytest.approx(
        (0.8653991, 0.9889611), abs=1e-6
    )
    ten = pd.DataFrame({"N": [10**9] * 10, "n": [5] * 10, "k": [3] * 10})
    assert stratified_rate(ten)[1:] == pytest.approx((0.4618144, 0.7239161), abs=1e-6)
    _, low1, high1 = stratified_rate(pd.DataFrame({"N": [10**9], "n": [10], "k": [10]}))
    assert (low1, high1) == pytest.approx((0.7224672, 1.0), abs=1e-6)
    # a large stratum of few agreeing decisions beside a small, well-sampled one: as
    # uncertain as its own few decisions (Wilson's 2 of 2 gives a lower bound of 0.34;
    # a reviewer's simulation put the coverage of an interval without the cap at 0 %)
    lo2 = stratified_rate(pd.DataFrame({"N": [10**6, 1000], "n": [2, 998], "k": [2, 998]}))[1]
    assert lo2 < 0.4
    lo3 = stratified_rate(pd.DataFrame({"N": [10**6, 1000], "n": [3, 500], "k": [3, 250]}))[1]
    assert lo3 < 0.6
    # many small strata do not pull the interval towards 50 %: the estimate stays inside,
    # not at an end (a new user's review, 8 strata with 5 of 5 and 2 with 4 of 5)
    est, lo, hi = stratified_rate(pd.DataFrame([(100, 5, 5)] * 8 + [(100, 5, 4)] * 2, columns=["N", "n", "k"]))
    assert lo < est < hi and lo > 0.85
    # never beyond what the decisions prove: a census at 0 beside a sample of all accepted
    _, low2, high2 = stratified_rate(pd.DataFrame({"N": [20, 1000], "n": [20, 50], "k": [0, 50]}))
    assert high2 <= 1000 / 1020 and low2 >= 50 / 1020
    _, low3, _ = stratified_rate(pd.DataFrame({"N": [10, 10], "n": [10, 9], "k": [10, 9]}))
    assert low3 >= 0.95  # 19 of the 20 records are known accepted
    for k in (10, 3):  # more decisions than the stratum's size (stale): still an interval in [0, 1]
        est, lo, hi = stratified_rate(pd.DataFrame({"N": [5], "n": [10], "k": [k]}))
        assert 0 <= lo <= est <= hi <= 1
    census = pd.DataFrame({"N": [10, 30], "n": [10, 30], "k": [9, 30]})
    assert stratified_rate(census) == pytest.approx((39 / 40, 39 / 40, 39 / 40))  # nothing left to sample
    assert all(math.isnan(v) for v in stratified_rate(pd.DataFrame({"N": [5], "n": [0], "k": [0]})))


def test_no_decisions_yet(dataset):
    r = open_review(dataset)
    stats = review_stats(r.store)
    assert stats.counts["with_consensus"] == 0 and stats.rates[()].iloc[0]["n"] == 0
    assert math.isnan(stats.rates[()].iloc[0]["rate"]) and stats.agreement.empty
    assert "0 accepted or rejected" in stats_html(stats, "ds")
    r.close()
