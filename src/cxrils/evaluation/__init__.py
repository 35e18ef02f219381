"""Evaluation of instruction-guided lesion segmentation (paper section 5, Tables 4, 5, 6, 14).

gIoU and cIoU over positives (non-empty reference mask), N-Acc over negatives (empty
reference mask), exact-match text accuracy of parsed answers, the paper's tables as
JSON / CSV / Markdown, and baselines (``always-empty``, ``whole-lung``, ``oracle``).

>>> from cxrils.evaluation import evaluate
>>> report = evaluate([(pred_mask, ref_mask), ...])          # doctest: +SKIP
>>> report.table4()["gIoU"], report.table4()["n_acc"]       # doctest: +SKIP
"""

from cxrils.evaluation.counts import MaskCounts, MaskSizeError, mask_counts, rle_mask_counts
from cxrils.evaluation.evaluate import EvalSample, evaluate, evaluate_predictions
from cxrils.evaluation.io import PREDICTION_SUFFIXES, EvaluationError, read_predictions, write_predictions
from cxrils.evaluation.metrics import (
    SegmentationAccumulator,
    TextAccumulator,
    answer_correct,
    histogram_auroc,
    mask_dice,
    mask_iou,
    mask_precision,
    region_pixel_auroc,
)
from cxrils.evaluation.report import EvaluationReport
from cxrils.masks import InvalidRLE, rle_areas

__all__ = [
    "EvalSample",
    "EvaluationError",
    "EvaluationReport",
    "InvalidRLE",
    "MaskCounts",
    "MaskSizeError",
    "SegmentationAccumulator",
    "TextAccumulator",
    "answer_correct",
    "evaluate",
    "evaluate_predictions",
    "histogram_auroc",
    "mask_counts",
    "mask_dice",
    "mask_iou",
    "mask_precision",
    "read_predictions",
    "region_pixel_auroc",
    "rle_areas",
    "rle_mask_counts",
    "write_predictions",
    "PREDICTION_SUFFIXES",
]
