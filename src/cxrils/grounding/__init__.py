"""Grounded lesion masks (paper section 3.1 steps 3-4): Algorithm 1, location
verification, quality control. Entry point :func:`ground_study`; :mod:`.expert` checks
c1 with an expert's own boxes and lungs (the measurement behind ``c1_bilateral``)."""

from cxrils.grounding.algorithm import Algorithm1Result, BoxCheck, algorithm1, c1_sides, check_box, refine
from cxrils.grounding.expert import OracleBox, c1_oracle, c1_passing_sides, lesion_boxes
from cxrils.grounding.locations import empty_locations, grounded_locations, reported_locations
from cxrils.grounding.study import frontal_view_problem, ground_study, grounding_to_dict, recall_counts

__all__ = [
    "Algorithm1Result",
    "BoxCheck",
    "OracleBox",
    "algorithm1",
    "c1_oracle",
    "c1_passing_sides",
    "c1_sides",
    "check_box",
    "lesion_boxes",
    "refine",
    "empty_locations",
    "grounded_locations",
    "reported_locations",
    "frontal_view_problem",
    "ground_study",
    "grounding_to_dict",
    "recall_counts",
]
