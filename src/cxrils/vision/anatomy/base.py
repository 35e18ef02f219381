"""The ``AnatomySegmenter`` protocol, its registry, and mask assembly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from cxrils.config import AnatomyConfig, Config
from cxrils.registry import Registry
from cxrils.types import AnatomyMasks
from cxrils.vision.anatomy.regions import lung_regions
from cxrils.vocab import ANATOMY_LABELS


class AnatomyBackendError(RuntimeError):
    """A backend cannot be built: unknown name, missing package, or missing weights.
    The message names what to install or download and which config key to set."""


@runtime_checkable
class AnatomySegmenter(Protocol):
    """Segments lungs, heart, lung zones and lobes of a frontal chest X-ray.

    Implementations load their model once, at construction.
    """

    name: str
    version: str

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        """Masks of every label of :data:`cxrils.vocab.ANATOMY_LABELS`.

        Parameters
        ----------
        x : numpy.ndarray, uint8, shape (H, W)
            Frontal chest X-ray, [0, 255].

        Returns
        -------
        AnatomyMasks
            Bool (H, W) masks at the input's resolution; "right"/"left" are the
            patient's sides (the patient's right lung is on the image's left).

        Raises
        ------
        ValueError
            If ``x`` is not a non-empty uint8 (H, W) array.
        """
        ...

    def segment_batch(self, xs: Sequence[np.ndarray]) -> list[AnatomyMasks]:
        """:meth:`segment` of each image; each result is the one the image gets alone.

        The default segments image by image; model-backed backends override it to
        stack images on a GPU (:mod:`cxrils.vision.batching`).

        Parameters
        ----------
        xs : sequence of numpy.ndarray, uint8, shape (H_i, W_i)
            Frontal chest X-rays; sizes may differ.

        Returns
        -------
        list of AnatomyMasks
            One per image, in order, at each image's own (H_i, W_i).

        Raises
        ------
        ValueError
            If an image is not a non-empty uint8 (H, W) array.
        """
        return [self.segment(x) for x in xs]


#: Backend name -> "module:Class" (:class:`cxrils.registry.Registry`); each class provides
#: ``from_config(cfg)`` and ``weight_files(cfg)`` (the files it loads, for provenance).
BACKENDS: Registry[AnatomySegmenter] = Registry(
    "anatomy backend",
    {
        "builtin": "cxrils.vision.anatomy.builtin:BuiltinSegmenter",
        "cxas": "cxrils.vision.anatomy.cxas:CxasSegmenter",
        "hybridgnet": "cxrils.vision.anatomy.hybridgnet:HybridGNetSegmenter",
    },
    AnatomyBackendError,
)


def get_segmenter(name: str, cfg: Config) -> AnatomySegmenter:
    """Build the anatomy backend ``name`` (``builtin``, ``cxas`` or ``hybridgnet``).

    Raises
    ------
    AnatomyBackendError
        If the name is unknown, or the backend's package or weights are missing.
    """
    return BACKENDS.build(name, cfg)


def assemble(
    right: np.ndarray,
    left: np.ndarray,
    heart: np.ndarray,
    cfg: AnatomyConfig,
    backend: str,
    version: str,
    visible: tuple[np.ndarray, np.ndarray] | None = None,
) -> AnatomyMasks:
    """AnatomyMasks with all labels, zones and lobes derived geometrically
    (:mod:`cxrils.vision.anatomy.regions`) from the lungs. Inputs bool (H, W),
    patient sides.

    ``right`` and ``left`` are the lungs the zones and lobes are cut from (the whole
    lungs when the backend knows them); ``visible``, when given, is (right, left) of the
    visible lungs (:meth:`cxrils.types.AnatomyMasks.organs`)."""
    masks = lung_regions(right, left, cfg)
    masks["heart"] = np.asarray(heart, dtype=bool)
    seen = (
        None
        if visible is None
        else {"right lung": np.asarray(visible[0], dtype=bool), "left lung": np.asarray(visible[1], dtype=bool)}
    )
    return AnatomyMasks(
        masks={k: masks[k] for k in ANATOMY_LABELS},
        shape=tuple(right.shape),
        backend=backend,
        version=version,
        visible=seen,
    )


def check_input(x: np.ndarray) -> None:
    """Raise ValueError unless ``x`` is a non-empty uint8 (H, W) array."""
    if not isinstance(x, np.ndarray) or x.ndim != 2 or x.dtype != np.uint8 or x.size == 0:
        desc = f"{type(x).__name__} {getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}"
        raise ValueError(f"anatomy input must be a non-empty uint8 (H, W) array, got {desc}")
