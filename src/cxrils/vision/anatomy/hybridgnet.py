"""The ``hybridgnet`` anatomy backend: HybridGNet landmarks -> masks.

HybridGNet (Gaggion et al. 2022, 2024; the paper's source of lung and heart masks,
section 3.1 step 2) predicts 120 contour landmarks on a 1024 x 1024 canvas: the
patient's right lung (44 points), left lung (50), heart (26), in that order. The
adapter resizes the image to 1024 x 1024 (no padding), asks the network for the
landmarks, scales them back with separate x and y factors (W / 1024, H / 1024) and
fills each contour at the image's own size. Zones and lobes come from the geometric
rule of :mod:`cxrils.vision.anatomy.regions`.

HybridGNet's code is GPL-3.0, so cxrils does not vendor it: the network is imported
from the user's own clone (``backends.hybridgnet_dir``) with the weights
``backends.hybridgnet_weights``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from cxrils.config import AnatomyConfig, Config
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy.base import AnatomyBackendError, assemble, check_input

#: Side of HybridGNet's square input canvas, pixels.
CANVAS = 1024
#: Landmark counts per organ, in output order (HybridGNet's lungs + heart model).
LANDMARK_COUNTS: dict[str, int] = {"right lung": 44, "left lung": 50, "heart": 26}
N_LANDMARKS = sum(LANDMARK_COUNTS.values())

#: A predictor maps a float32 (1024, 1024) image in [0, 1] to (120, 2) landmarks
#: (x = column, y = row) in canvas pixels.
Predictor = Callable[[np.ndarray], np.ndarray]


def landmarks_to_masks(landmarks: np.ndarray, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """Fill HybridGNet's contours at the image's own size.

    Parameters
    ----------
    landmarks : numpy.ndarray, float, shape (120, 2)
        (x, y) = (column, row) on the 1024 x 1024 canvas: right lung 44, left lung 50,
        heart 26 points (patient sides).
    shape : (int, int)
        (H, W) of the image the canvas was resized from.

    Returns
    -------
    dict
        ``"right lung"``, ``"left lung"``, ``"heart"``: bool (H, W) filled polygons;
        x is scaled by W / 1024 and y by H / 1024.

    Raises
    ------
    ValueError
        If ``landmarks`` is not a finite (120, 2) array or ``shape`` is not positive.
    """
    pts = np.asarray(landmarks, dtype=np.float64)
    if pts.shape != (N_LANDMARKS, 2) or not np.isfinite(pts).all():
        raise ValueError(f"HybridGNet landmarks must be a finite ({N_LANDMARKS}, 2) array, got {pts.shape}")
    h, w = int(shape[0]), int(shape[1])
    if h < 1 or w < 1:
        raise ValueError(f"image shape must be positive, got {shape}")
    scaled = pts * np.array([w / CANVAS, h / CANVAS])
    out, start = {}, 0
    for label, n in LANDMARK_COUNTS.items():
        canvas = np.zeros((h, w), dtype=np.uint8)
        poly = np.round(scaled[start:start + n]).astype(np.int32).reshape(-1, 1, 2)
        cv2.fillPoly(canvas, [poly], 1)
        out[label] = canvas.astype(bool)
        start += n
    return out


def _load_hybridgnet(code_dir: Path, weights: Path) -> Predictor:
    """Build HybridGNet (lungs + heart, two image-to-graph skips) from the user's clone
    of https://github.com/ngaggion/HybridGNet and return a predictor."""
    import scipy.sparse as sp
    import torch

    sys.path.insert(0, str(code_dir))
    try:
        from models.HybridGNet2IGSC import Hybrid
        from utils.utils import genMatrixesLungsHeart, scipy_to_torch_sparse
    except ImportError as err:
        raise AnatomyBackendError(
            f"{code_dir}: cannot import HybridGNet (models/HybridGNet2IGSC.py, utils/utils.py): {err}") from err
    finally:
        sys.path.remove(str(code_dir))
    adj, adj_down, down, up = (sp.csc_matrix(m).tocoo() for m in genMatrixesLungsHeart())
    n1, n2 = adj.shape[0], adj_down.shape[0]
    to_t = scipy_to_torch_sparse
    config = {"n_nodes": [n1, n1, n1, n2, n2, n2], "latents": 64, "inputsize": CANVAS,
              "filters": [2, 32, 32, 32, 16, 16, 16], "skip_features": 32}
    net = Hybrid(config, [to_t(down)], [to_t(up)], [to_t(a) for a in [adj] * 3 + [adj_down] * 3])
    try:
        net.load_state_dict(torch.load(str(weights), map_location="cpu", weights_only=True))
    except Exception as err:  # torch raises many types for a bad file
        raise AnatomyBackendError(f"{weights}: cannot load HybridGNet weights: {err}") from err
    net.eval()

    def predict(image: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            out = net(torch.from_numpy(image)[None, None].float())[0]
        return out.numpy().reshape(-1, 2) * CANVAS

    return predict


class HybridGNetSegmenter:
    """Lungs and heart from HybridGNet landmarks; zones and lobes by rule.

    Parameters
    ----------
    predictor : callable
        float32 (1024, 1024) image in [0, 1] -> (120, 2) landmarks in canvas pixels.
    cfg : AnatomyConfig, optional
        Fractions of the zone/lobe rule.
    version : str
        Provenance string.
    """

    name = "hybridgnet"

    def __init__(self, predictor: Predictor, cfg: AnatomyConfig | None = None, version: str = "") -> None:
        self.predictor = predictor
        self.cfg = cfg or AnatomyConfig()
        self.version = version

    @classmethod
    def from_config(cls, cfg: Config) -> "HybridGNetSegmenter":
        """Build from ``backends.hybridgnet_dir`` (the user's HybridGNet clone) and
        ``backends.hybridgnet_weights``.

        Raises
        ------
        AnatomyBackendError
            If either is unset or missing, or the code cannot be imported.
        """
        where = ("clone https://github.com/ngaggion/HybridGNet (GPL-3.0), download its lungs+heart "
                 "weights (weights.pt), and set backends.hybridgnet_dir and backends.hybridgnet_weights")
        code, weights = cfg.backends.hybridgnet_dir, cfg.backends.hybridgnet_weights
        if not code or not weights:
            raise AnatomyBackendError(f"the hybridgnet backend is not configured: {where}")
        code_dir, wpath = Path(code).expanduser(), Path(weights).expanduser()
        if not code_dir.is_dir():
            raise AnatomyBackendError(f"{code_dir}: HybridGNet code folder not found: {where}")
        if not wpath.is_file():
            raise AnatomyBackendError(f"{wpath}: HybridGNet weights not found: {where}")
        return cls(_load_hybridgnet(code_dir, wpath), cfg.anatomy, version=f"hybridgnet:{wpath.name}")

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        """All anatomy labels of one image at its own (H, W); see
        :class:`~cxrils.vision.anatomy.base.AnatomySegmenter`."""
        check_input(x)
        canvas = cv2.resize(x, (CANVAS, CANVAS), interpolation=cv2.INTER_CUBIC).astype(np.float32) / 255.0
        organs = landmarks_to_masks(self.predictor(canvas), x.shape)
        return assemble(organs["right lung"], organs["left lung"], organs["heart"], self.cfg,
                        self.name, self.version)
