"""Mini-batches with positives and negatives 1:1 (paper section 5, Appendix F: "The
ratio of positive to negative samples is maintained at 1:1 in each mini-batch")."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


class BalancedBatchSampler:
    """Batch sampler (``DataLoader(batch_sampler=...)``) giving ``batch_size / 2``
    positives and ``batch_size / 2`` negatives in every batch.

    An epoch walks through the negatives once in a shuffled order (MIMIC-ILS has about
    7 negatives per positive); positives are drawn from successive reshuffled passes
    over all positives, so every positive appears before any repeats. The order is a
    pure function of ``(seed, epoch)``; call :meth:`set_epoch` between epochs.

    Parameters
    ----------
    polarities : sequence of str or bool
        Per dataset index: "positive"/"negative", or True for positive.
    batch_size : int
        Even, >= 2.
    seed : int
        Seed of the shuffles.
    num_batches : int, optional
        Batches per epoch; default ``len(negatives) // (batch_size / 2)`` (at least 1).

    Raises
    ------
    ValueError
        On an odd batch size, an unknown polarity, or no positives or no negatives.
    """

    def __init__(self, polarities: Sequence[Any], batch_size: int, *, seed: int = 0, num_batches: int | None = None):
        if batch_size < 2 or batch_size % 2:
            raise ValueError(f"batch_size must be even and >= 2 for a 1:1 ratio, got {batch_size}")
        pos = []
        for p in polarities:
            if isinstance(p, (bool, np.bool_)):
                pos.append(bool(p))
            elif p in ("positive", "negative"):
                pos.append(p == "positive")
            else:
                raise ValueError(f"polarity must be 'positive', 'negative' or bool, got {p!r}")
        flags = np.asarray(pos, dtype=bool)
        self.positives = np.flatnonzero(flags)
        self.negatives = np.flatnonzero(~flags)
        if not len(self.positives) or not len(self.negatives):
            raise ValueError(f"need positives and negatives, got {len(self.positives)} and {len(self.negatives)}")
        self.batch_size, self.half, self.seed, self.epoch = batch_size, batch_size // 2, int(seed), 0
        self.num_batches = num_batches if num_batches is not None else max(1, len(self.negatives) // self.half)
        if self.num_batches < 1:
            raise ValueError(f"num_batches must be >= 1, got {num_batches}")

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffles of ``epoch``."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_batches

    def _stream(self, pool: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        passes = -(-n // len(pool))
        return np.concatenate([rng.permutation(pool) for _ in range(passes)])[:n]

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        n = self.num_batches * self.half
        pos = self._stream(self.positives, rng, n)
        neg = self._stream(self.negatives, rng, n)
        for b in range(self.num_batches):
            batch = np.concatenate([pos[b * self.half : (b + 1) * self.half], neg[b * self.half : (b + 1) * self.half]])
            yield [int(i) for i in rng.permutation(batch)]
