"""Per-sample counts and streaming accumulators for gIoU, cIoU, N-Acc and text accuracy.

Definitions (paper section 5 "Evaluation Methodology", following LISA):

* A sample is **positive** when its reference mask is non-empty, **negative** when it
  is empty. Positives and negatives are always reported separately.
* ``gIoU`` = mean over positives of the per-sample IoU ``|P ∩ R| / |P ∪ R|``.
* ``cIoU`` = ``sum |P ∩ R| / sum |P ∪ R|`` over positives.
* ``n_acc`` (N-Acc.) = share of negatives whose predicted mask is entirely empty.
* Text accuracy = share of samples whose predicted answer parses
  (:func:`cxrils.templates.parse_answer`) to the same template and the same variables
  (target, locations, lesion, certainty) as the reference answer.

Plain scores of one mask pair, for benchmarks and reports that score masks outside the
paper's protocol (expert masks, boxes): :func:`mask_iou`, :func:`mask_dice`,
:func:`mask_precision`, each with a stated value for empty masks; and
:func:`histogram_auroc`, the AUROC of two histograms (pixel scores binned to levels).

A group with no samples of a kind has the value ``None`` (written ``null`` in JSON,
``n/a`` in CSV and Markdown), never NaN.

Exactness: pixel counts are Python ints (``numpy.count_nonzero``), summed as
integers. The per-sample IoU is the correctly rounded float64 of ``inter / union``;
the sum of these floats is kept **exactly** as an integer in units of 2**-1074 (the
smallest float64), so gIoU is the correctly rounded exact mean whatever the order or
the grouping of the samples. Accumulators hold a fixed number of integers: memory
does not grow with the number of samples.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from cxrils.evaluation.counts import MaskCounts, mask_counts
from cxrils.templates import ParsedText, TemplateError, parse_answer

#: Fixed-point exponent of the exact IoU sum: every float64 in [0, 1] is an integer
#: multiple of 2**-_IOU_EXP (2**-1074 is the smallest subnormal float64).
_IOU_EXP = 1074


def fixed_point(value: float) -> int:
    """A non-negative float64 as the exact integer ``value * 2**1074``.

    Sums of these integers are exact and order-independent; divide by
    ``n << FIXED_POINT_EXP`` to get a correctly rounded mean.

    Raises
    ------
    ValueError
        If ``value`` is negative or not finite.
    """
    if not (value >= 0.0) or value == float("inf"):
        raise ValueError(f"fixed_point needs a finite value >= 0, got {value!r}")
    num, den = float(value).as_integer_ratio()
    return num << (_IOU_EXP - den.bit_length() + 1)  # den is a power of two


#: Exponent of :func:`fixed_point` (2**-1074 is the smallest subnormal float64).
FIXED_POINT_EXP = _IOU_EXP


@dataclass
class SegmentationAccumulator:
    """Streaming sums for gIoU, cIoU (positives) and N-Acc (negatives).

    All fields are exact integers; :meth:`add` and :meth:`merge` are exact and
    commutative, so results do not depend on record order or batching.

    Attributes
    ----------
    n_positive : int
        Positive samples (non-empty reference mask).
    iou_sum : int
        Sum of the per-sample float64 IoUs of the positives, in units of 2**-1074.
    intersection, union : int
        Summed intersection and union pixels over the positives.
    n_negative : int
        Negative samples (empty reference mask).
    n_negative_empty : int
        Negatives whose predicted mask is entirely empty.
    """

    n_positive: int = 0
    iou_sum: int = 0
    intersection: int = 0
    union: int = 0
    n_negative: int = 0
    n_negative_empty: int = 0

    def add(self, counts: MaskCounts) -> None:
        """Add one sample's counts."""
        if counts.is_positive:
            self.n_positive += 1
            self.iou_sum += fixed_point(counts.intersection / counts.union)
            self.intersection += counts.intersection
            self.union += counts.union
        else:
            self.n_negative += 1
            self.n_negative_empty += int(counts.pred_area == 0)

    def merge(self, other: SegmentationAccumulator) -> None:
        """Add another accumulator's sums into this one."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def gIoU(self) -> float | None:  # noqa: N802 - the paper's symbol
        """Mean per-sample IoU over positives in [0, 1]; None without positives."""
        return self.iou_sum / (self.n_positive << _IOU_EXP) if self.n_positive else None

    @property
    def cIoU(self) -> float | None:  # noqa: N802 - the paper's symbol
        """Total intersection / total union over positives in [0, 1]; None without positives."""
        return self.intersection / self.union if self.n_positive else None

    @property
    def n_acc(self) -> float | None:
        """Share of negatives predicted entirely empty in [0, 1]; None without negatives."""
        return self.n_negative_empty / self.n_negative if self.n_negative else None


@dataclass
class TextAccumulator:
    """Streaming exact-match text accuracy: ``n_correct`` of ``n`` scored answers."""

    n: int = 0
    n_correct: int = 0

    def add(self, correct: bool) -> None:
        """Add one scored answer."""
        self.n += 1
        self.n_correct += int(correct)

    def merge(self, other: TextAccumulator) -> None:
        """Add another accumulator's counts into this one."""
        self.n += other.n
        self.n_correct += other.n_correct

    @property
    def accuracy(self) -> float | None:
        """``n_correct / n`` in [0, 1]; None when no answer was scored."""
        return self.n_correct / self.n if self.n else None


def mask_iou(pred: Any, ref: Any, *, empty: float = 0.0) -> float:
    """Intersection over union ``|P ∩ R| / |P ∪ R|`` of one mask pair.

    Parameters
    ----------
    pred, ref : ndarray of shape (H, W) or COCO RLE dict
        As :func:`~cxrils.evaluation.mask_counts` (bool, or 0/1, 0/255 integer, 0/1
        float; same size).
    empty : float
        The value when both masks are empty (the union has no pixel). Default 0.0: an
        empty answer to an empty reference scores nothing. (gIoU never meets this case:
        it averages over positives, whose reference is non-empty.)

    Returns
    -------
    float
        In [0, 1] (``empty`` for two empty masks); the correctly rounded float64 of the
        exact pixel counts.

    Raises
    ------
    MaskSizeError, MaskError
        As :func:`~cxrils.evaluation.mask_counts`.

    Examples
    --------
    >>> import numpy as np
    >>> p, r = np.zeros((4, 4), bool), np.zeros((4, 4), bool)
    >>> p[0, :2] = True; r[0, 1:4] = True    # 1 shared pixel, 4 in the union
    >>> mask_iou(p, r)
    0.25
    >>> none = np.zeros((4, 4), bool)
    >>> mask_iou(none, none), mask_iou(none, none, empty=1.0)
    (0.0, 1.0)
    """
    counts = mask_counts(pred, ref)
    return counts.intersection / counts.union if counts.union else empty


def mask_dice(pred: Any, ref: Any, *, empty: float = 0.0) -> float:
    """Dice coefficient ``2 |P ∩ R| / (|P| + |R|)`` of one mask pair.

    Parameters
    ----------
    pred, ref : ndarray of shape (H, W) or COCO RLE dict
        As :func:`~cxrils.evaluation.mask_counts`.
    empty : float
        The value when both masks are empty. Default 0.0; an anatomy benchmark scoring
        an organ that both the reference and the model leave out passes 1.0.

    Returns
    -------
    float
        In [0, 1] (``empty`` for two empty masks).

    Raises
    ------
    MaskSizeError, MaskError
        As :func:`~cxrils.evaluation.mask_counts`.
    """
    counts = mask_counts(pred, ref)
    total = counts.pred_area + counts.ref_area
    return 2 * counts.intersection / total if total else empty


def mask_precision(pred: Any, ref: Any) -> float:
    """Share of the predicted mask inside the reference, ``|P ∩ R| / |P|``.

    With the masks swapped it is the reference's coverage by the prediction (its
    recall), ``|P ∩ R| / |R|``: e.g. the share of an expert box that a mask covers.

    Parameters
    ----------
    pred, ref : ndarray of shape (H, W) or COCO RLE dict
        As :func:`~cxrils.evaluation.mask_counts`.

    Returns
    -------
    float
        In [0, 1]; 0.0 when ``pred`` is empty.

    Raises
    ------
    MaskSizeError, MaskError
        As :func:`~cxrils.evaluation.mask_counts`.
    """
    counts = mask_counts(pred, ref)
    return counts.intersection / counts.pred_area if counts.pred_area else 0.0


def histogram_auroc(positive: Any, negative: Any) -> float:
    """Area under the ROC curve of scores given as two histograms over the same bins.

    The probability that a positive's score is above a negative's, ties (the same bin)
    counting one half: ``sum_k pos[k] (neg[<k] + neg[k] / 2) / (n_pos n_neg)``. Exact for
    scores that take only the bins' values (e.g. an anomaly map ``x_ano`` stored as
    ``k / 255``, binned by ``k``), whatever the number of pixels.

    Parameters
    ----------
    positive, negative : array_like of int, shape (K,)
        Counts per bin, bins in increasing order of score.

    Returns
    -------
    float
        In [0, 1]; 0.0 when either histogram is empty (no pair to compare).

    Examples
    --------
    >>> histogram_auroc([0, 1], [1, 0]), histogram_auroc([1, 1], [1, 1])
    (1.0, 0.5)
    """
    pos, neg = np.asarray(positive), np.asarray(negative)
    below = np.concatenate([[0], np.cumsum(neg)[:-1]])
    return float((pos * (below + 0.5 * neg)).sum() / max(1, pos.sum() * neg.sum()))


def answer_correct(pred: str | None, ref: str | ParsedText) -> bool:
    """Exact-match correctness of a predicted answer (paper section 5, Table 6).

    Parameters
    ----------
    pred : str or None
        The model's answer. None, or text that matches no template of
        :mod:`cxrils.templates`, is wrong.
    ref : str or ParsedText
        The reference answer, or its parse.

    Returns
    -------
    bool
        True only when both parse to the same template (instruction type and
        polarity) and the same target, locations, lesion and certainty.

    Raises
    ------
    TemplateError
        If the reference answer matches no template.
    """
    ref_parsed = ref if isinstance(ref, ParsedText) else parse_answer(ref)
    if pred is None:
        return False
    try:
        return parse_answer(pred) == ref_parsed
    except TemplateError:
        return False


def region_pixel_auroc(score: np.ndarray, lesion: np.ndarray, region: np.ndarray, n_bins: int = 256) -> float:
    """Pixel AUROC of a score map inside a region: lesion pixels against the region's other
    pixels, scores binned into ``n_bins`` equal bins of [0, 1] (:func:`histogram_auroc`;
    ties within a bin count one half).

    Parameters
    ----------
    score : numpy.ndarray, float, shape (N, H, W) or (H, W)
        Scores in [0, 1] (e.g. a lesion probability); values outside are clipped.
    lesion, region : numpy.ndarray, bool, same shape as ``score``
        The reference lesion and the region scored (e.g. the lungs); lesion pixels outside
        the region are ignored.
    n_bins : int
        Bins of [0, 1]; bin ``k`` holds ``k / n_bins <= s < (k + 1) / n_bins`` (1.0 in the last).

    Returns
    -------
    float
        In [0, 1]; 0.0 when the region holds no lesion pixel or no other pixel (the
        convention of :func:`histogram_auroc`: a caller that chooses by it checks first).

    Raises
    ------
    ValueError
        If ``lesion`` or ``region`` differs in shape from ``score``, ``n_bins`` is below 1,
        or a score inside the region is not finite.

    Examples
    --------
    >>> s = np.array([[0.9, 0.1, 0.6, 0.0]])
    >>> region_pixel_auroc(s, np.array([[True, False, False, False]]), np.ones((1, 4), bool))
    1.0
    """
    s = np.asarray(score, dtype=np.float64)
    les, reg = np.asarray(lesion, dtype=bool), np.asarray(region, dtype=bool)
    if les.shape != s.shape or reg.shape != s.shape:
        raise ValueError(
            f"region_pixel_auroc: score {s.shape}, lesion {les.shape} and region {reg.shape} differ in shape"
        )
    if n_bins < 1:
        raise ValueError(f"region_pixel_auroc: n_bins must be at least 1, got {n_bins}")
    inside, les_inside = s[reg], les[reg]
    if not np.isfinite(inside).all():
        raise ValueError("region_pixel_auroc: the score map holds NaN or infinite values inside the region")
    k = np.minimum((np.clip(inside, 0.0, 1.0) * n_bins).astype(np.int64), n_bins - 1)
    return histogram_auroc(np.bincount(k[les_inside], minlength=n_bins), np.bincount(k[~les_inside], minlength=n_bins))
