"""Expert review of a generated dataset (the paper's section 3.3 evaluation as a tool).

``cxrils review DATASET`` serves a page on which experts accept, reject (with a
reason) or skip a stratified, seeded sample of the records, each shown with its image,
mask, report sentence and the chain that produced it; decisions go to an append-only
SQLite database in the dataset folder. ``cxrils review-stats`` reports acceptance
rates with Wilson intervals, Cohen's kappa between reviewers and the paper's rates, and
writes the accepted subset. See ``docs/review.md``.
"""

from cxrils.review.intervals import cohen_kappa, wilson_interval, wilson_sample_size
from cxrils.review.sampling import SamplePlan, SamplingError, draw_sample
from cxrils.review.session import ReviewSession, open_review
from cxrils.review.store import DECISIONS, REJECT_REASONS, ReviewError, ReviewStore

__all__ = [
    "cohen_kappa",
    "wilson_interval",
    "wilson_sample_size",
    "SamplePlan",
    "SamplingError",
    "draw_sample",
    "ReviewSession",
    "open_review",
    "DECISIONS",
    "REJECT_REASONS",
    "ReviewError",
    "ReviewStore",
]
