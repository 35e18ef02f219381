"""Acceptance rates, agreement and the paper's rates from a review database.

A record's **consensus** is the paper's test-set rule (section 3.3): rejected when any
reviewer rejected it, accepted when at least one reviewer accepted it and none
rejected it; skips count for nothing. Rates are ``accepted / decided`` over the
reviewed sample with 95% Wilson intervals (:func:`cxrils.review.intervals.wilson_interval`),
per lesion type, polarity, instruction type and their crossings, for the consensus and
for each reviewer. Cohen's kappa compares every pair of reviewers on the records both
accepted or rejected.

The sample is stratified with different sampling fractions per stratum, so a group's
rate over the reviewed records weighs its strata by how many were reviewed. The
dataset-level estimate (:func:`stratified_rate`) weighs each stratum by its size in
the dataset instead.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import pandas as pd

from cxrils import vocab
from cxrils.review import paper
from cxrils.review.intervals import CONFIDENCE, cohen_kappa, wilson_interval, wilson_interval_of
from cxrils.review.sampling import STRATUM_COLUMNS, strata_order
from cxrils.review.store import REJECT_REASONS, ReviewStore

#: The groupings of the rate tables, in the order they are reported.
GROUPINGS: tuple[tuple[str, ...], ...] = (
    (),
    ("polarity",),
    ("lesion_type",),
    ("instruction_type",),
    ("lesion_type", "polarity"),
    ("polarity", "instruction_type"),
    STRATUM_COLUMNS,
)


@dataclass
class ReviewStats:
    """Everything ``cxrils review-stats`` reports (tables as pandas DataFrames).

    Attributes
    ----------
    rates : dict
        Grouping (tuple of column names, ``()`` for all) -> DataFrame with the group
        columns, ``n`` (records with a consensus), ``accepted``, ``rate``, ``low``,
        ``high`` (fractions), for the consensus.
    reviewer_rates : DataFrame
        ``reviewer``, ``polarity`` ("all", "positive", "negative"), ``n``, ``accepted``,
        ``rate``, ``low``, ``high``.
    agreement : DataFrame
        Per reviewer pair: ``reviewer_a``, ``reviewer_b``, ``both`` (records both
        accepted or rejected), ``agree`` (fraction), ``kappa`` (NaN when undefined).
    reasons : DataFrame
        Rejections (current decisions of every reviewer) by ``polarity`` and ``reason``: ``n``.
    dataset_estimate : DataFrame
        ``polarity`` ("all", "positive", "negative"), ``rate``, ``low``, ``high``,
        ``strata_reviewed``, ``strata`` (:func:`stratified_rate`).
    paper : DataFrame
        Side by side with the paper's Table 3 / Table 13 (:func:`paper_comparison`).
    counts : dict
        ``sample``, ``decisions`` (rows in the log, undos included), ``current``
        (live decisions), ``reviewers``, ``with_consensus``, ``skipped_only``.
    """

    rates: dict[tuple[str, ...], pd.DataFrame]
    reviewer_rates: pd.DataFrame
    agreement: pd.DataFrame
    reasons: pd.DataFrame
    dataset_estimate: pd.DataFrame
    paper: pd.DataFrame
    counts: dict = field(default_factory=dict)


def consensus(current: pd.DataFrame) -> pd.DataFrame:
    """One row per record with an accept or a reject: ``record_id``, ``accepted`` (bool).

    Parameters
    ----------
    current : DataFrame
        Current decisions: ``record_id``, ``decision`` (accept | reject | skip).
    """
    decided = current[current["decision"].isin(("accept", "reject"))]
    if decided.empty:
        return pd.DataFrame({"record_id": pd.Series(dtype=str), "accepted": pd.Series(dtype=bool)})
    rejected = decided.assign(r=decided["decision"] == "reject").groupby("record_id")["r"].any()
    return pd.DataFrame({"record_id": rejected.index, "accepted": ~rejected.to_numpy()})


def _rate_table(frame: pd.DataFrame, by: tuple[str, ...], confidence: float) -> pd.DataFrame:
    """Rates of ``frame`` (one row per decided unit, bool ``accepted``) per group."""
    if by:
        g = frame.groupby(list(by), sort=False)["accepted"].agg(["size", "sum"]).reset_index()
    else:
        g = pd.DataFrame({"size": [len(frame)], "sum": [int(frame["accepted"].sum())]})
    g = g.rename(columns={"size": "n", "sum": "accepted"})
    g["accepted"] = g["accepted"].astype(int)
    bounds = [wilson_interval(int(k), int(n), confidence) for k, n in zip(g["accepted"], g["n"])]
    g["rate"] = [k / n if n else math.nan for k, n in zip(g["accepted"], g["n"])]
    g["low"] = [b[0] for b in bounds]
    g["high"] = [b[1] for b in bounds]
    return strata_order(g).reset_index(drop=True) if by else g


def stratified_rate(strata: pd.DataFrame, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Acceptance of a whole population from a stratified sample.

    The estimate is ``p = sum_s W_s p_s`` with ``W_s = N_s / N`` over the strata that
    have decisions (``p_s = k_s / n_s``), its variance ``Var = sum_s W_s² p_s (1 - p_s)
    / n_s (1 - n_s / N_s)`` (with the finite-population factor: a stratum reviewed whole
    adds none). The interval is Wilson's (:func:`~cxrils.review.intervals.wilson_interval_of`)
    at the effective sample size ``n_eff = p (1 - p) / Var`` (the variance's design
    effect, as survey intervals for proportions use it: Korn and Graubard, Survey
    Methodology 24 (1998) 193-201, put Clopper-Pearson's there), capped by Kish's
    effective sample size of the design, ``1 / sum_s W_s² (1 - n_s / N_s) / n_s``, which
    also stands in where ``Var`` is 0 (every stratum all accepted or all rejected): a large
    stratum of few agreeing decisions carries no sample variance yet is little known. One
    stratum sampled from a large population gives Wilson's interval of ``k`` of ``n``;
    strata of equal rates sampled in proportion give Wilson's of the pooled counts. The
    interval is clipped to what the decisions prove (every record not reviewed rejected,
    or accepted); a census gives the rate itself.

    Parameters
    ----------
    strata : DataFrame
        One row per stratum: ``N`` (records in the dataset), ``n`` (decided in the
        sample), ``k`` (accepted). Strata with ``n == 0`` are left out of the weights.
    confidence : float

    Returns
    -------
    (rate, low, high)
        Fractions; all NaN when no stratum has a decision.
    """
    used = strata[strata["n"] > 0]
    if used.empty:
        return math.nan, math.nan, math.nan
    size = used[["N", "n"]].max(axis=1)  # more decisions than records: a stale stratum size
    w = size / size.sum()
    p = used["k"] / used["n"]
    fpc = (1 - used["n"] / size).clip(lower=0)
    var = float((w**2 * p * (1 - p) / used["n"] * fpc).sum())
    est = float((w * p).sum())
    # what the decisions already prove: every record not reviewed rejected, or accepted
    least = float((w * used["k"] / size).sum())
    most = float((w * (used["k"] + size - used["n"]) / size).sum())
    if most - least <= 0:
        return est, est, est  # every record reviewed
    # Kish's effective sample size of the design (the weights and sampling fractions
    # alone): a stratum whose sampled records agree carries no sample variance, yet little
    # of a large stratum was seen (a new reviewer's simulation: 0 % coverage without it)
    design = float((w**2 * fpc / used["n"]).sum())
    n_design = 1.0 / design  # > 0: a stratum not reviewed whole has fpc > 0 (returned above otherwise)
    n_eff = min(est * (1 - est) / var, n_design) if var > 0 else n_design
    low, high = wilson_interval_of(est, n_eff, confidence)
    return est, max(least, min(est, low)), min(most, max(est, high))


def paper_comparison(rates: dict[tuple[str, ...], pd.DataFrame]) -> pd.DataFrame:
    """This review's consensus rates beside the paper's.

    Rows: all, positive, negative (Table 3) and the positives of each lesion type
    (Table 13, where the reference gives numbers or words). Columns: ``what``,
    ``n``, ``rate``, ``low``, ``high`` (this review; NaN where nothing was decided)
    and ``paper`` (text).
    """
    rows = []

    def ours(by: tuple[str, ...], **match) -> dict:
        t = rates[by]
        for col, val in match.items():
            t = t[t[col] == val]
        if t.empty:
            return {"n": 0, "rate": math.nan, "low": math.nan, "high": math.nan}
        r = t.iloc[0]
        return {"n": int(r["n"]), "rate": r["rate"], "low": r["low"], "high": r["high"]}

    lo, hi = paper.TABLE3_EXPERT_RANGE
    rows.append(
        {
            "what": "all records",
            **ours(()),
            "paper": f"{100 * paper.TABLE3_ACCEPTANCE['all']:.1f}% of {paper.TABLE3_REVIEWED:,} "
            f"(experts {100 * lo:.1f}-{100 * hi:.1f}%; Table 3)",
        }
    )
    for pol in vocab.POLARITIES:
        rows.append(
            {
                "what": f"{pol} records",
                **ours(("polarity",), polarity=pol),
                "paper": f"{100 * paper.TABLE3_ACCEPTANCE[pol]:.1f}% (Table 3)",
            }
        )
    for lesion in vocab.LESION_TYPES:
        text = paper.table13_text(lesion)
        rows.append(
            {
                "what": f"{lesion}, positive",
                **ours(("lesion_type", "polarity"), lesion_type=lesion, polarity="positive"),
                "paper": f"{text} (Table 13)" if text else "not in the reference",
            }
        )
    return pd.DataFrame(rows)


def current_frame(store: ReviewStore, sample: pd.DataFrame | None = None) -> pd.DataFrame:
    """Current decisions joined with the sample's strata: ``reviewer``, ``record_id``,
    ``decision``, ``reason``, ``decided_at`` and the stratum columns (``sample``: the
    store's sample when already read)."""
    cur = store.current()
    frame = pd.DataFrame(
        [(d.reviewer, d.record_id, d.decision, d.reason, d.decided_at) for d in cur.values()],
        columns=["reviewer", "record_id", "decision", "reason", "decided_at"],
    )
    sample = store.sample() if sample is None else sample
    return frame.merge(sample[["record_id", *STRATUM_COLUMNS]], on="record_id", how="left")


def review_stats(store: ReviewStore, confidence: float = CONFIDENCE) -> ReviewStats:
    """Compute every table of :class:`ReviewStats` from a review database."""
    sample = store.sample()
    current = current_frame(store, sample)
    cons = consensus(current).merge(sample[["record_id", *STRATUM_COLUMNS]], on="record_id", how="left")
    rates = {by: _rate_table(cons, by, confidence) for by in GROUPINGS}

    per_rev = []
    for reviewer, group in current[current["decision"].isin(("accept", "reject"))].groupby("reviewer"):
        g = group.assign(accepted=group["decision"] == "accept")
        for pol, part in [("all", g)] + [(p, g[g["polarity"] == p]) for p in vocab.POLARITIES]:
            t = _rate_table(part, (), confidence).iloc[0]
            per_rev.append(
                {
                    "reviewer": reviewer,
                    "polarity": pol,
                    "n": int(t["n"]),
                    "accepted": int(t["accepted"]),
                    "rate": t["rate"],
                    "low": t["low"],
                    "high": t["high"],
                }
            )
    reviewer_rates = pd.DataFrame(per_rev, columns=["reviewer", "polarity", "n", "accepted", "rate", "low", "high"])

    decided = current[current["decision"].isin(("accept", "reject"))]
    pairs = []
    labels = {r: g.set_index("record_id")["decision"] for r, g in decided.groupby("reviewer")}
    for a, b in itertools.combinations(sorted(labels), 2):
        both = labels[a].index.intersection(labels[b].index)
        la, lb = labels[a].loc[both].tolist(), labels[b].loc[both].tolist()
        pairs.append(
            {
                "reviewer_a": a,
                "reviewer_b": b,
                "both": len(both),
                "agree": (sum(x == y for x, y in zip(la, lb)) / len(both)) if len(both) else math.nan,
                "kappa": cohen_kappa(la, lb),
            }
        )
    agreement = pd.DataFrame(pairs, columns=["reviewer_a", "reviewer_b", "both", "agree", "kappa"])

    rej = current[current["decision"] == "reject"]
    reasons = (
        rej.groupby(["polarity", "reason"]).size().rename("n").reset_index()
        if not rej.empty
        else pd.DataFrame(columns=["polarity", "reason", "n"])
    )
    reasons["reason"] = reasons["reason"].map(lambda k: REJECT_REASONS.get(k, k))

    strata = sample.groupby(list(STRATUM_COLUMNS)).agg(N=("stratum_size", "first")).reset_index()
    got = cons.groupby(list(STRATUM_COLUMNS))["accepted"].agg(["size", "sum"]).reset_index()
    strata = strata.merge(got, on=list(STRATUM_COLUMNS), how="left").fillna({"size": 0, "sum": 0})
    strata = strata.rename(columns={"size": "n", "sum": "k"})
    est = []
    for pol, part in [("all", strata)] + [(p, strata[strata["polarity"] == p]) for p in vocab.POLARITIES]:
        rate, low, high = stratified_rate(part, confidence)
        est.append(
            {
                "polarity": pol,
                "rate": rate,
                "low": low,
                "high": high,
                "strata_reviewed": int((part["n"] > 0).sum()),
                "strata": len(part),
            }
        )

    skipped_only = set(current.loc[current["decision"] == "skip", "record_id"]) - set(cons["record_id"])
    counts = {
        "sample": len(sample),
        "decisions": store.n_rows(),
        "current": len(current),
        "reviewers": sorted(current["reviewer"].unique().tolist()),
        "with_consensus": len(cons),
        "skipped_only": len(skipped_only),
    }
    return ReviewStats(
        rates=rates,
        reviewer_rates=reviewer_rates,
        agreement=agreement,
        reasons=reasons,
        dataset_estimate=pd.DataFrame(est),
        paper=paper_comparison(rates),
        counts=counts,
    )
