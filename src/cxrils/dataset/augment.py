"""Training augmentation of the paper: histogram equalisation with probability 0.5
(Appendix F: "Each input image has a 50% chance of being processed with histogram
equalization")."""

from __future__ import annotations

import hashlib

import numpy as np

#: Probability of equalising an image (Appendix F).
HIST_EQ_PROB = 0.5


class HistogramEqualization:
    """Apply ``cv2.equalizeHist`` to a uint8 (H, W) image with probability ``p``.

    The decision is seedable two ways: with a ``key`` (e.g. ``"{epoch}:{record_id}"``)
    it is a pure function of ``(seed, key)``, independent of call order and of
    DataLoader workers; without a key it comes from a ``numpy`` generator seeded
    with ``seed``.

    Parameters
    ----------
    p : float
        Probability in [0, 1] (Appendix F: 0.5).
    seed : int
        Seed of the decisions.
    """

    def __init__(self, p: float = HIST_EQ_PROB, seed: int = 0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"probability must lie in [0, 1], got {p}")
        self.p, self.seed = float(p), int(seed)
        self._rng = np.random.default_rng(self.seed)

    def decide(self, key: str | None = None) -> bool:
        """Whether the image of ``key`` (or the next call) is equalised."""
        if key is None:
            return bool(self._rng.random() < self.p)
        digest = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2.0**64 < self.p

    def __call__(self, x: np.ndarray, key: str | None = None) -> np.ndarray:
        """Return ``x`` (uint8 (H, W)) equalised or unchanged (a new array either way).

        Raises
        ------
        ValueError
            If ``x`` is not a uint8 2-D array.
        """
        import cv2

        x = np.asarray(x)
        if x.ndim != 2 or x.dtype != np.uint8:
            raise ValueError(f"histogram equalisation needs uint8 (H, W), got {x.dtype} {x.shape}")
        return cv2.equalizeHist(x) if self.decide(key) else x.copy()
