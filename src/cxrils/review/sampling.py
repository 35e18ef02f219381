"""Which records an expert review looks at: a stratified, seeded sample of a dataset.

Strata are (lesion type, polarity, instruction type), the cells of the paper's
Tables 10-12. Each stratum gets the number of records that brings the 95% Wilson
interval of its acceptance rate to the target margin at a planning rate (by default the
paper's Table 3 rates: positives 90.1%, negatives 97.7%), or a fixed ``n``; a stratum
smaller than that is reviewed whole. Paraphrased rows (Appendix C.3) are left out:
they repeat a template record's image, mask and answer.

Inside a stratum the records are ordered by SHA-256 of ``"{seed}:{record_id}"`` and
the first ones taken, so the sample depends only on the seed and the record ids (not on
row order), and a larger sample contains the smaller one. The review order of the
whole sample is the same hash order, so a review stopped part-way is still a random
subset of every stratum.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import pandas as pd

from cxrils import vocab
from cxrils.review.intervals import CONFIDENCE, wilson_sample_size
from cxrils.review.paper import TABLE3_ACCEPTANCE

#: Target half-width of each stratum's 95% Wilson interval (ours: +-5 points, the usual
#: precision of a reported proportion).
DEFAULT_MARGIN = 0.05
#: Columns of a stratum, in the order they are reported.
STRATUM_COLUMNS: tuple[str, ...] = ("lesion_type", "polarity", "instruction_type")


class SamplingError(ValueError):
    """Raised for a plan that cannot be drawn (bad margin, n, or no records)."""


@dataclass(frozen=True)
class SamplePlan:
    """How a review sample is drawn (stored with the sample; see the module docstring).

    Attributes
    ----------
    margin : float
        Target half-width of each stratum's Wilson interval, a fraction in (0, 0.5].
        Ignored when ``n`` is set.
    n : int or None
        Records per stratum instead of the margin rule.
    seed : int
        Seed of the hash order.
    planning_positive, planning_negative : float
        Acceptance rates the sample size is planned for (defaults: the paper's Table 3,
        positives 0.901 and negatives 0.977).
    confidence : float
        Level of the intervals, 0.95.
    """

    margin: float = DEFAULT_MARGIN
    n: int | None = None
    seed: int = 0
    planning_positive: float = TABLE3_ACCEPTANCE["positive"]
    planning_negative: float = TABLE3_ACCEPTANCE["negative"]
    confidence: float = CONFIDENCE

    def per_stratum(self, polarity: str) -> int:
        """Records wanted in a stratum of this polarity (before capping at its size).

        Raises
        ------
        SamplingError
            If ``n`` is below 1 or the margin is out of range.
        """
        if self.n is not None:
            if self.n < 1:
                raise SamplingError(f"--n must be at least 1, got {self.n}")
            return int(self.n)
        p = self.planning_positive if polarity == "positive" else self.planning_negative
        try:
            return wilson_sample_size(p, self.margin, self.confidence)
        except ValueError as err:
            raise SamplingError(str(err)) from None

    def to_dict(self) -> dict:
        """JSON-ready dict (stored in the review database)."""
        return asdict(self)


def sample_key(seed: int, record_id: str) -> str:
    """The hash that orders records: hex SHA-256 of ``"{seed}:{record_id}"``."""
    return hashlib.sha256(f"{seed}:{record_id}".encode()).hexdigest()


def draw_sample(records: pd.DataFrame, plan: SamplePlan) -> pd.DataFrame:
    """Draw the review sample of a dataset's records.

    Parameters
    ----------
    records : pandas.DataFrame
        The dataset's records (:func:`cxrils.dataset.read_records`); needs
        ``record_id``, ``paraphrase_of`` and the :data:`STRATUM_COLUMNS`.
    plan : SamplePlan

    Returns
    -------
    pandas.DataFrame
        One row per sampled record in review order: ``position`` (0, 1, ...),
        ``record_id``, the stratum columns, ``stratum_size`` (template records of the
        stratum in the dataset) and ``stratum_sampled`` (how many of them were drawn).

    Raises
    ------
    SamplingError
        If there is no template record, or the plan is out of range.
    """
    templ = records[records["paraphrase_of"].fillna("") == ""]
    if templ.empty:
        raise SamplingError("the dataset has no records to review")
    parts = []
    for key, group in templ.groupby(list(STRATUM_COLUMNS), sort=True):
        stratum = dict(zip(STRATUM_COLUMNS, key))
        want = plan.per_stratum(stratum["polarity"])
        keys = group["record_id"].map(lambda r: sample_key(plan.seed, str(r)))
        chosen = group.assign(_key=keys).sort_values("_key").head(want)
        parts.append(
            chosen[["record_id", *STRATUM_COLUMNS, "_key"]].assign(stratum_size=len(group), stratum_sampled=len(chosen))
        )
    out = pd.concat(parts).sort_values("_key").drop(columns="_key").reset_index(drop=True)
    out.insert(0, "position", range(len(out)))
    return out


def strata_order(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` sorted by the paper's order of lesion types, polarities (positive
    first) and instruction types (:mod:`cxrils.vocab`)."""
    rank = {
        "lesion_type": {t: i for i, t in enumerate(vocab.LESION_TYPES)},
        "polarity": {p: i for i, p in enumerate(vocab.POLARITIES)},
        "instruction_type": {t: i for i, t in enumerate(vocab.INSTRUCTION_TYPES)},
    }
    cols = [c for c in STRATUM_COLUMNS if c in frame]
    return frame.sort_values(cols, key=lambda s: s.map(rank[s.name]).fillna(len(rank[s.name])), kind="stable")
