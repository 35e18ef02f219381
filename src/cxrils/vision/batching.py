"""Batches of images through the model-backed image stages.

Every stage protocol (:class:`~cxrils.vision.anatomy.base.AnatomySegmenter`,
:class:`~cxrils.vision.anomaly.base.AnomalyMapper`,
:class:`~cxrils.vision.detection.base.LesionDetector`) has a batch method whose
default calls the single-image method once per image; :func:`call_batch` uses a
backend's own batch method, or that default for a backend (a custom stage provider's,
say) that does not define one.

A batch must give every image exactly the result it gets alone. The torch adapters
therefore stack images into one forward pass only on CUDA (HybridGNet never: its
encoder normalises with batch statistics); on CPU they run image by
image, because oneDNN's batched CPU convolutions are not bitwise stable across batch
sizes (``benchmarks/cost_model.py`` measures it on RadEdit's first UNet layer). With
oneDNN disabled torch convolves each sample alone and agrees bit for bit, but the
switch is process-wide and would change the built-in models' numerics too. On CUDA
results agree to float tolerance, not bit for bit (cuDNN picks kernels by shape).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from cxrils.config import PRECISIONS


def call_batch(backend: Any, method: str, protocol: type, *args: Any, **kwargs: Any) -> list:
    """``backend.<method>(*args, **kwargs)``, or the protocol's default batch method
    (one single-image call per image) when the backend does not define ``method``.

    Parameters
    ----------
    backend : object
        A stage backend (``segment`` / ``map`` / ``detect``).
    method : str
        The batch method's name: ``segment_batch``, ``map_batch`` or ``detect_batch``.
    protocol : type
        The stage protocol class whose default implementation to fall back on.

    Returns
    -------
    list
        One result per image, in input order.
    """
    bound = getattr(backend, method, None)
    if bound is not None:
        return bound(*args, **kwargs)
    return getattr(protocol, method)(backend, *args, **kwargs)


def torch_device(device: str | None = None) -> str:
    """``device`` if given, else ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def stacked_groups(n: int, device: str) -> list[list[int]]:
    """Indices of ``n`` images grouped per forward pass: all together on CUDA, one
    by one on CPU (module docstring: batch-size independence)."""
    if n == 0:
        return []
    if str(device).startswith("cuda"):
        return [list(range(n))]
    return [[i] for i in range(n)]


@contextlib.contextmanager
def inference(device: str, precision: str = "fp32") -> Iterator[None]:
    """``torch.inference_mode`` plus, on CUDA, autocast to fp16 or bf16
    (``backends.precision``); CPU always computes in fp32.

    Raises
    ------
    ValueError
        For a precision other than fp32, fp16, bf16.
    """
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    cuda = str(device).startswith("cuda")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    with (
        torch.inference_mode(),
        torch.autocast("cuda", dtype=dtype or torch.float32, enabled=cuda and dtype is not None),
    ):
        yield


def check_lengths(what: str, n: int, *others: Sequence | None) -> None:
    """Raise ValueError unless every sequence in ``others`` (None = absent) has ``n`` items."""
    for other in others:
        if other is not None and len(other) != n:
            raise ValueError(f"{what}: {len(other)} items given for {n} images")
