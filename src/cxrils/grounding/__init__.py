"""Grounded lesion masks (paper section 3.1 steps 3-4): Algorithm 1, location
verification, quality control. Entry point :func:`ground_study`."""

from cxrils.grounding.algorithm import Algorithm1Result, BoxCheck, algorithm1, c1_sides, check_box, refine
from cxrils.grounding.locations import empty_locations, grounded_locations, reported_locations
from cxrils.grounding.study import frontal_view_problem, ground_study, grounding_to_dict, recall_counts

__all__ = [
    "Algorithm1Result", "BoxCheck", "algorithm1", "c1_sides", "check_box", "refine", "empty_locations",
    "grounded_locations", "reported_locations", "frontal_view_problem", "ground_study", "grounding_to_dict",
    "recall_counts",
]
