"""Network inputs of dataset records, shared by training and threshold calibration."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cxrils.models.light.priors import ImagePriors
from cxrils.models.light.segmenter import LightSegmenter

#: ``priors_of(image_id, x uint8 (H, W)) -> ImagePriors``, or None for "the segmenter's
#: own" (:class:`cxrils.training.prior_folds.OutOfFoldPriors`).
PriorsFn = Callable[[str, np.ndarray], "ImagePriors | None"]


def dataset_inputs(
    seg: LightSegmenter,
    ds,
    indices: list[int],
    cache: dict[str, ImagePriors],
    priors_of: PriorsFn | None = None,
) -> tuple[list[dict], object, object]:
    """Items of ``ds`` (an :class:`~cxrils.dataset.ILSDataset` at the network side) and
    the network inputs ``(x, t)`` of :meth:`LightSegmenter.network_inputs` for them.

    With ``config.priors`` or ``config.ctr_input``, each image's priors are computed
    once from its stored full-size image and kept in ``cache`` (image id -> priors;
    grows to the split's image count, about 0.2 MB per image, see
    :mod:`cxrils.models.light.priors`). ``priors_of`` gives an image's priors in place of
    the segmenter's (training with out-of-fold lesion models); where it returns None, or
    without it, :meth:`LightSegmenter.image_priors` does."""
    import torch

    items = [ds[i] for i in indices]
    priors = None
    if seg.needs_priors:
        priors = []
        for i in indices:
            image_id = str(ds.records.at[i, "image_id"])
            if image_id not in cache:
                x = ds.load_image(i)
                p = priors_of(image_id, x) if priors_of is not None else None
                # keyed by dataset and image id in the segmenter's own (small) cache
                cache[image_id] = p if p is not None else seg.image_priors(x, key=f"{ds.dataset_dir}:{image_id}")
            priors.append(cache[image_id])
    x, t = seg.network_inputs(torch.stack([it["image"] for it in items]), priors, [it["instruction"] for it in items])
    return items, x, t
