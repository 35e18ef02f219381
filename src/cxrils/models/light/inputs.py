"""Network inputs of dataset records, shared by training and threshold calibration."""

from __future__ import annotations

from cxrils.models.light.priors import ImagePriors
from cxrils.models.light.segmenter import LightSegmenter


def dataset_inputs(
    seg: LightSegmenter, ds, indices: list[int], cache: dict[str, ImagePriors]
) -> tuple[list[dict], object, object]:
    """Items of ``ds`` (an :class:`~cxrils.dataset.ILSDataset` at the network side) and
    the network inputs ``(x, t)`` of :meth:`LightSegmenter.network_inputs` for them.

    With ``config.priors`` or ``config.ctr_input``, each image's priors are computed
    once from its stored full-size image and kept in ``cache`` (image id -> priors;
    grows to the split's image count, about 0.2 MB per image, see
    :mod:`cxrils.models.light.priors`)."""
    import torch

    items = [ds[i] for i in indices]
    priors = None
    if seg.needs_priors:
        priors = []
        for i in indices:
            image_id = str(ds.records.at[i, "image_id"])
            if image_id not in cache:
                # keyed by dataset and image id in the segmenter's own (small) cache
                cache[image_id] = seg.image_priors(ds.load_image(i), key=f"{ds.dataset_dir}:{image_id}")
            priors.append(cache[image_id])
    x, t = seg.network_inputs(torch.stack([it["image"] for it in items]), priors, [it["instruction"] for it in items])
    return items, x, t
