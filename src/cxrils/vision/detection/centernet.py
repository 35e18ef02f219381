"""CenterNet targets, loss and decoding ("Objects as Points", Zhou et al. 2019).

The detector (:class:`cxrils.vision.lesion_nets.CenterNetDetector`) predicts, on a grid
of ``G x G`` cells (stride 4 of the ``S x S`` input), a centre heatmap per class, the
box size as ``log(width), log(height)`` in cells and the centre's offset inside its
cell. Boxes are ``(x0, y0, x1, y1)`` in pixels (x = column, x1/y1 exclusive).

Departures from the paper, ours: the heatmap Gaussian is elliptical with sigma
``gaussian_alpha * side / 6`` per axis (TTFNet, Liu et al. 2020) instead of CenterNet's
size-dependent round radius, and sizes are regressed in log space (boxes here span a
few to tens of cells).
"""

from __future__ import annotations

import math

import numpy as np

#: Output stride of the detector (input pixels per heatmap cell).
STRIDE = 4


def targets(
    boxes: list[tuple[float, float, float, float]],
    grid: int,
    n_classes: int = 1,
    classes: list[int] | None = None,
    gaussian_alpha: float = 0.54,
) -> dict[str, np.ndarray]:
    """Training targets of one image.

    Parameters
    ----------
    boxes : list of (x0, y0, x1, y1)
        In input pixels (``grid * STRIDE`` wide).
    grid : int
        Cells per side G.
    classes : list of int, optional
        Class index per box (default 0).

    Returns
    -------
    dict of numpy.ndarray
        ``heatmap`` float32 (n_classes, G, G) in [0, 1] (1 exactly at each centre cell);
        ``size`` float32 (2, G, G) log width and log height in cells; ``offset`` float32
        (2, G, G) in [0, 1); ``mask`` float32 (G, G), 1 at centre cells.
    """
    hm = np.zeros((n_classes, grid, grid), np.float32)
    size = np.zeros((2, grid, grid), np.float32)
    off = np.zeros((2, grid, grid), np.float32)
    mask = np.zeros((grid, grid), np.float32)
    ys, xs = np.mgrid[0:grid, 0:grid].astype(np.float32)
    for k, (x0, y0, x1, y1) in enumerate(boxes):
        c = (classes or [0] * len(boxes))[k]
        w, h = max(1e-3, (x1 - x0) / STRIDE), max(1e-3, (y1 - y0) / STRIDE)
        cx, cy = (x0 + x1) / 2 / STRIDE, (y0 + y1) / 2 / STRIDE
        ix, iy = min(grid - 1, max(0, int(cx))), min(grid - 1, max(0, int(cy)))
        sx, sy = max(0.5, gaussian_alpha * w / 6), max(0.5, gaussian_alpha * h / 6)
        g = np.exp(-((xs - ix) ** 2 / (2 * sx * sx) + (ys - iy) ** 2 / (2 * sy * sy)))
        hm[c] = np.maximum(hm[c], g)
        hm[c, iy, ix] = 1.0
        size[:, iy, ix] = (math.log(w), math.log(h))
        off[:, iy, ix] = (cx - ix, cy - iy)
        mask[iy, ix] = 1.0
    return {"heatmap": hm, "size": size, "offset": off, "mask": mask}


def loss(
    out: dict, tgt: dict, alpha: float = 2.0, beta: float = 4.0, size_weight: float = 1.0, offset_weight: float = 1.0
):
    """CenterNet loss of a batch: penalty-reduced pixel-wise focal loss on the heatmap
    (paper eq. 1, exponents ``alpha``, ``beta``) plus L1 on size and offset at centre
    cells, each divided by the number of centres (at least 1).

    ``out`` holds the network's tensors (heatmap logits (B, C, G, G), size and offset
    (B, 2, G, G)); ``tgt`` the stacked :func:`targets` as tensors (mask (B, G, G)).
    """
    import torch
    import torch.nn.functional as F

    logits, gt = out["heatmap"], tgt["heatmap"]
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    pos = gt.eq(1).float()
    log_p, log_1p = F.logsigmoid(logits), F.logsigmoid(-logits)
    pos_loss = -((1 - p) ** alpha * log_p * pos).sum()
    neg_loss = -((1 - gt) ** beta * p**alpha * log_1p * (1 - pos)).sum()
    m = tgt["mask"][:, None]
    n = m.sum().clamp(min=1.0)
    reg = (
        size_weight * ((out["size"] - tgt["size"]).abs() * m).sum()
        + offset_weight * ((out["offset"] - tgt["offset"]).abs() * m).sum()
    )
    return (pos_loss + neg_loss + reg) / n


def decode(
    heatmap: np.ndarray, size: np.ndarray, offset: np.ndarray, *, min_score: float, max_boxes: int
) -> list[tuple[float, float, float, float, float, int]]:
    """Boxes of one image from the network outputs.

    Peaks are cells at least as high as their 3 x 3 neighbours (CenterNet's max-pool
    "NMS"), scoring ``min_score`` or more; at most ``max_boxes``, best first.

    Parameters
    ----------
    heatmap : numpy.ndarray, float32 (C, G, G)
        Probabilities (after the sigmoid).
    size, offset : numpy.ndarray, float32 (2, G, G)

    Returns
    -------
    list of (x0, y0, x1, y1, score, class)
        In input pixels of the ``G * STRIDE`` square.
    """
    import cv2

    out = []
    for c in range(heatmap.shape[0]):
        h = heatmap[c].astype(np.float32)
        peaks = (h >= cv2.dilate(h, np.ones((3, 3), np.uint8))) & (h >= min_score)
        for iy, ix in zip(*np.nonzero(peaks)):
            w, hh = math.exp(float(size[0, iy, ix])), math.exp(float(size[1, iy, ix]))
            cx, cy = ix + float(offset[0, iy, ix]), iy + float(offset[1, iy, ix])
            out.append(
                (
                    (cx - w / 2) * STRIDE,
                    (cy - hh / 2) * STRIDE,
                    (cx + w / 2) * STRIDE,
                    (cy + hh / 2) * STRIDE,
                    float(h[iy, ix]),
                    c,
                )
            )
    out.sort(key=lambda b: -b[4])
    return out[:max_boxes]


def box_iou(a, b) -> float:
    """IoU of two ``(x0, y0, x1, y1, ...)`` boxes (continuous areas)."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def nms(boxes: list, iou_max: float) -> list:
    """Greedy non-maximum suppression of score-sorted boxes (``(x0, y0, x1, y1, score,
    class)``) within a class: a box overlapping a kept one by IoU > ``iou_max`` goes."""
    kept: list = []
    for b in boxes:
        if all(k[5] != b[5] or box_iou(k, b) <= iou_max for k in kept):
            kept.append(b)
    return kept


def average_precision(detections: list[list], truths: list[list], iou_min: float = 0.5) -> float:
    """All-point interpolated average precision (PASCAL VOC 2010+) of one class over images.

    Parameters
    ----------
    detections : list (per image) of lists of (x0, y0, x1, y1, score, ...)
    truths : list (per image) of lists of (x0, y0, x1, y1)
        An image may have none (a normal image).
    iou_min : float
        A detection matches an unmatched truth of its image with IoU >= this.

    Returns
    -------
    float
        In [0, 1]; 0 when there is no truth.
    """
    n_truth = sum(len(t) for t in truths)
    if n_truth == 0:
        return 0.0
    flat = sorted(((d[4], i, d) for i, ds in enumerate(detections) for d in ds), key=lambda t: -t[0])
    used = [np.zeros(len(t), bool) for t in truths]
    tp = []
    for _, i, d in flat:
        ious = [box_iou(d, t) for t in truths[i]]
        j = int(np.argmax(ious)) if ious else -1
        if j >= 0 and ious[j] >= iou_min and not used[i][j]:
            used[i][j] = True
            tp.append(1.0)
        else:
            tp.append(0.0)
    tp_arr = np.asarray(tp)
    cum_tp = np.cumsum(tp_arr)
    recall = cum_tp / n_truth
    prec = cum_tp / np.arange(1, len(tp_arr) + 1)
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], prec, [0.0]])
    for k in range(len(mpre) - 2, -1, -1):
        mpre[k] = max(mpre[k], mpre[k + 1])
    idx = np.flatnonzero(mrec[1:] != mrec[:-1])
    return float(((mrec[idx + 1] - mrec[idx]) * mpre[idx + 1]).sum())
