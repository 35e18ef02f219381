"""The ``AnomalyMapper`` protocol, its registry and the shared x_ano computation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from cxrils.config import Config
from cxrils.registry import Registry
from cxrils.types import AnatomyMasks, AnomalyResult
from cxrils.vision.batching import check_lengths

#: 8-bit maximum intensity I_max of x_ano = (x - x_hat) / I_max (paper section 3.1).
I_MAX = 255.0


class AnomalyBackendError(RuntimeError):
    """A backend cannot be built: unknown name, missing package or missing weights.
    The message names what to install or download and which config key to set."""


@runtime_checkable
class AnomalyMapper(Protocol):
    """Estimates the healthy image inside an edit region and the anomaly map."""

    name: str
    version: str

    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        """Pseudo-healthy image and anomaly map of ``x``.

        Parameters
        ----------
        x : numpy.ndarray, uint8, shape (H, W)
            Frontal chest X-ray in [0, 255].
        edit_region : numpy.ndarray, bool, shape (H, W)
            Where the image may be edited: right lung + left lung + heart (paper
            section 3.1 step 2). Outside it ``x_hat == x``.
        lungs : numpy.ndarray, bool, shape (H, W), optional
            The lung part of the edit region (right + left lung). Backends that model
            only lung tissue (``builtin``, ``atlas``) edit only there, leaving the heart as it is
            (a normal heart is brighter than lung, not a lesion); None = the whole
            edit region is lung. ``radedit`` edits the whole edit region regardless.

        Returns
        -------
        AnomalyResult
            ``x_hat`` uint8 (H, W); ``x_ano`` float32 (H, W) in [0, 1], equal to
            ``max(x - x_hat, 0) / 255`` (negative differences, i.e. pixels the edit
            made brighter, are clipped to 0: only hyperintense lesions count).

        Raises
        ------
        ValueError
            If ``x`` is not uint8 (H, W), or ``edit_region`` has another shape or is empty.
        """
        ...

    def map_batch(
        self,
        xs: Sequence[np.ndarray],
        edit_regions: Sequence[np.ndarray],
        *,
        lungs: Sequence[np.ndarray | None] | None = None,
    ) -> list[AnomalyResult]:
        """:meth:`map` of each image; each result is the one the image gets alone.

        The default maps image by image; model-backed backends override it to stack
        images on a GPU (:mod:`cxrils.vision.batching`).

        Parameters
        ----------
        xs : sequence of numpy.ndarray, uint8, shape (H_i, W_i)
        edit_regions : sequence of numpy.ndarray, bool, shape (H_i, W_i)
            One per image (lungs + heart).
        lungs : sequence of (numpy.ndarray or None), optional
            One per image (see :meth:`map`); None = None for every image.

        Returns
        -------
        list of AnomalyResult
            One per image, in order.

        Raises
        ------
        ValueError
            If the sequences differ in length or an image's inputs are invalid.
        """
        check_lengths("map_batch", len(xs), edit_regions, lungs)
        lungs = [None] * len(xs) if lungs is None else lungs
        return [self.map(x, r, lungs=lu) for x, r, lu in zip(xs, edit_regions, lungs)]


#: Backend name -> "module:Class" (:class:`cxrils.registry.Registry`); each class provides
#: ``from_config(cfg)`` and ``weight_files(cfg)`` (the files it loads, for provenance).
BACKENDS: Registry[AnomalyMapper] = Registry(
    "anomaly backend",
    {
        "builtin": "cxrils.vision.anomaly.builtin:BuiltinAnomalyMapper",
        "atlas": "cxrils.vision.anomaly.atlas:AtlasAnomalyMapper",
        "radedit": "cxrils.vision.anomaly.radedit:RadEditAnomalyMapper",
    },
    AnomalyBackendError,
)


def get_anomaly_mapper(name: str, cfg: Config) -> AnomalyMapper:
    """Build the anomaly backend ``name`` (``builtin``, ``atlas`` or ``radedit``).

    Raises
    ------
    AnomalyBackendError
        If the name is unknown, or the backend's package or weights are missing.
    """
    return BACKENDS.build(name, cfg)


def check_inputs(x: np.ndarray, edit_region: np.ndarray) -> np.ndarray:
    """Validate ``x`` (uint8 (H, W)) and ``edit_region`` (same shape, not empty; also
    used for the optional ``lungs``).

    Returns
    -------
    numpy.ndarray
        ``edit_region`` as bool (H, W).

    Raises
    ------
    ValueError
        Naming the problem.
    """
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype != np.uint8 or x.size == 0:
        raise ValueError(f"x must be a non-empty uint8 (H, W) image, got {x.dtype} {x.shape}")
    if isinstance(edit_region, AnatomyMasks):
        raise ValueError(
            "edit_region must be one bool (H, W) mask, not the anatomy masks: pass "
            'anatomy.union(("right lung", "left lung", "heart"))'
        )
    region = np.asarray(edit_region)
    if region.shape != x.shape:
        raise ValueError(f"edit_region shape {region.shape} differs from image shape {x.shape}")
    region = region.astype(bool)
    if not region.any():
        raise ValueError("edit_region is empty: no lung or heart mask to edit")
    return region


def anomaly_result(
    x: np.ndarray, x_hat: np.ndarray, edit_region: np.ndarray, backend: str, version: str = ""
) -> AnomalyResult:
    """Assemble an :class:`~cxrils.types.AnomalyResult` from an edited image.

    ``x_hat`` is forced equal to ``x`` outside ``edit_region``, then
    ``x_ano = max(x - x_hat, 0) / 255`` (float32, paper section 3.1).

    Parameters
    ----------
    x, x_hat : numpy.ndarray, uint8, shape (H, W)
    edit_region : numpy.ndarray, bool, shape (H, W)
    backend, version : str
        Provenance.
    """
    x_hat = np.where(edit_region, np.asarray(x_hat, dtype=np.uint8), x).astype(np.uint8)
    diff = x.astype(np.int16) - x_hat.astype(np.int16)
    x_ano = (np.clip(diff, 0, None) / I_MAX).astype(np.float32)
    return AnomalyResult(x_hat=x_hat, x_ano=x_ano, edit_region=edit_region, backend=backend, version=version)
