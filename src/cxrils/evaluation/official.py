"""The authors' evaluation protocol: ``giou_pos``, ``ciou_pos``, ``giou_neg`` (and ``giou``, ``ciou``).

Restated from ``validate()`` in KAIST-Edlab/ROSALIA ``train_ds.py`` (the script that
printed the paper's Table 4 numbers), with ``intersectionAndUnionGPU(..., K=2)`` of
``utils/utils.py``; the foreground class (index 1) is the one reported:

* per sample (one mask each): ``I`` = foreground pixels predicted and referenced,
  ``U`` = foreground pixels predicted or referenced;
  ``acc_iou = I / (U + 1e-5)``, plus 1 when ``U == 0`` ("no-object target": both masks
  empty);
* a sample is positive when its reference mask has a foreground pixel, negative
  otherwise (``masks_list[0].sum() != 0``);
* ``giou_pos`` = sum of ``acc_iou`` over positives / (n_pos + 1e-5), the ``1e-5`` coming
  from ``AverageMeter.all_reduce`` (``avg = sum / (count + 1e-5)``); ``giou_neg`` the same
  over negatives; ``giou`` over all samples;
* ``ciou_pos`` = sum of I / (sum of U + 1e-10) over positives; ``ciou`` over all samples.

Where this differs from :mod:`cxrils.evaluation.metrics` (ours): ours has no epsilons
(gIoU = mean I/U, cIoU = sum I / sum U, N-Acc = share of empty predictions on negatives),
so ``giou_pos`` = gIoU x (1 - O(1e-5 / U)), ``ciou_pos`` = cIoU up to 1e-10 and
``giou_neg`` = N-Acc x n_neg / (n_neg + 1e-5) (a negative scores 1 exactly when its
prediction is empty, else 0 / (pred area + 1e-5) = 0). The authors accumulate in float32
on the GPU; here every sum is exact (integers, and float64 values summed exactly as
integer multiples of 2**-1074), so the values do not depend on sample order.

``validate()`` counts in SAM's padded 1024 x 1024 square (the target zero-padded at the
bottom and right, ``preprocess_mask`` of ``utils/reason_seg_dataset.py``; the prediction
postprocessed to that square, LISA.py ``model_forward``), where a predicted pixel in the
padding of a non-square image is a false positive. The masks scored here are on the image
only; the pixels a prediction puts in the padding come beside it
(:attr:`cxrils.models.base.Prediction.padding_pixels`, the ``padding_pixels`` column of a
predictions file) and join its ``P`` and ``U`` here: ``I`` is unchanged (the target has
no pixel there), a negative with such a pixel scores 0. Predictions without the column
count none (docs/evaluation.md, "The authors' protocol").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cxrils.evaluation.counts import MaskCounts
from cxrils.evaluation.metrics import FIXED_POINT_EXP, fixed_point

#: ``acc_iou = I / (U + IOU_EPS)`` (train_ds.py ``validate()``).
IOU_EPS = 1e-5
#: ``avg = sum / (count + COUNT_EPS)`` (utils/utils.py ``AverageMeter.all_reduce``).
COUNT_EPS = 1e-5
#: ``iou_class = intersection / (union + UNION_EPS)`` (train_ds.py ``validate()``).
UNION_EPS = 1e-10


def sample_acc_iou(counts: MaskCounts) -> float:
    """The authors' per-sample score ``I / (U + 1e-5)``, + 1 when the union is empty."""
    value = counts.intersection / (counts.union + IOU_EPS)
    return value + 1.0 if counts.union == 0 else value


@dataclass
class _Group:
    """Exact sums of one group (positives or negatives)."""

    n: int = 0
    acc: int = 0  # sum of sample_acc_iou, in units of 2**-1074
    inter: int = 0
    union: int = 0
    padding: int = 0  # predicted pixels in the padding, included in union
    n_padded: int = 0  # samples with such a pixel

    def add(self, counts: MaskCounts, padding_pixels: int) -> None:
        self.n += 1
        self.acc += fixed_point(sample_acc_iou(counts))
        self.inter += counts.intersection
        self.union += counts.union
        self.padding += padding_pixels
        self.n_padded += padding_pixels > 0


class OfficialAccumulator:
    """Streaming, exact sums of the authors' ``validate()`` (module docstring): for
    positives and for negatives, the count, the sum of :func:`sample_acc_iou` (in units
    of 2**-1074) and the summed intersection and union pixels."""

    _FIELDS = ("n", "acc", "inter", "union", "padding", "n_padded")
    #: Fields that reports written before them lack (read as 0).
    _NEWER = ("padding", "n_padded")

    def __init__(self) -> None:
        self.pos, self.neg = _Group(), _Group()

    def add(self, counts: MaskCounts, padding_pixels: int = 0) -> None:
        """Add one sample's pixel counts (positive when its reference mask is non-empty).

        ``padding_pixels`` (int >= 0): the prediction's pixels in the padding of SAM's
        square (module docstring), added to its area and to the union.

        Raises
        ------
        ValueError
            If ``padding_pixels`` is negative.
        """
        if padding_pixels < 0:
            raise ValueError(f"padding_pixels must be >= 0, got {padding_pixels}")
        if padding_pixels:
            counts = MaskCounts(
                counts.intersection,
                counts.union + padding_pixels,
                counts.pred_area + padding_pixels,
                counts.ref_area,
            )
        (self.pos if counts.is_positive else self.neg).add(counts, int(padding_pixels))

    def merge(self, other: OfficialAccumulator) -> None:
        """Add another accumulator's sums into this one."""
        for mine, theirs in ((self.pos, other.pos), (self.neg, other.neg)):
            for name in self._FIELDS:
                setattr(mine, name, getattr(mine, name) + getattr(theirs, name))

    @staticmethod
    def _mean(acc: int, n: int) -> float | None:
        return (acc / (1 << FIXED_POINT_EXP)) / (n + COUNT_EPS) if n else None

    def metrics(self) -> dict[str, Any]:
        """``giou_pos``, ``ciou_pos``, ``giou_neg``, ``giou``, ``ciou`` in [0, 1] (None
        for a group without samples), the counts ``n_pos``, ``n_neg``, and the predicted
        pixels counted in the padding (``padding_pixels``) and the samples with one
        (``n_padded``)."""
        p, q = self.pos, self.neg
        n = p.n + q.n
        return {
            "giou_pos": self._mean(p.acc, p.n),
            "ciou_pos": p.inter / (p.union + UNION_EPS) if p.n else None,
            "giou_neg": self._mean(q.acc, q.n),
            "giou": self._mean(p.acc + q.acc, n),
            "ciou": (p.inter + q.inter) / (p.union + q.union + UNION_EPS) if n else None,
            "n_pos": p.n,
            "n_neg": q.n,
            "padding_pixels": p.padding + q.padding,
            "n_padded": p.n_padded + q.n_padded,
        }

    def to_dict(self) -> dict[str, str]:
        """Raw sums as decimal strings (exact; the fixed-point sums exceed JSON's doubles)."""
        return {
            f"{g}_{name}": str(getattr(grp, name))
            for g, grp in (("pos", self.pos), ("neg", self.neg))
            for name in self._FIELDS
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OfficialAccumulator:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If a field is missing or not an integer.
        """
        out = cls()
        try:
            for g, grp in (("pos", out.pos), ("neg", out.neg)):
                for name in cls._FIELDS:
                    key = f"{g}_{name}"
                    setattr(grp, name, int(data.get(key, 0) if name in cls._NEWER else data[key]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed official-protocol counts: {err!r}") from err
        return out
