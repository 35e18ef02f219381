"""Anatomy and anomaly priors: extra input channels of the light model.

With ``LightConfig.priors`` the network sees, next to the image, three maps computed
by cxrils' own CPU stages on a copy of the image whose longer side is at most
:data:`WORK_SIDE` pixels:

* ``region``: the anatomy mask of the region the instruction names (the union of its
  locations, lobes included; both lungs for a global instruction or when it names
  none; the heart for cardiomegaly, whose answer mask is the heart, paper section 3.2);
* ``lungs``: both lungs;
* ``x_ano``: the anomaly map in [0, 1] of the configured anomaly backend (builtin: the
  learned lesion map), inside the lungs (paper section 3.1 step 2);
* ``boxes`` (with ``LightConfig.box_prior``): the configured lesion detector's boxes
  (builtin: the learned CenterNet), each pixel the highest confidence of a box covering
  it: the evidence Algorithm 1's c2 reads, from a model independent of x_ano.

All are resized to the network side ``S`` (area interpolation, float32 in
[0, 1]). The anatomy of the reduced image also names the locations of global positive
answers and gives the cardiothoracic ratio (``ctr``, the paper's Appendix D.3 measure,
:func:`cxrils.vision.anatomy.cardiothoracic_ratio`), which ``LightConfig.ctr_input``
feeds to the network next to the instruction (:func:`ctr_feature`). Only the labels the priors and answers use (:data:`PRIOR_LABELS`) are kept,
bit-packed, with x_ano as float16: about 0.2 MB per image at 256 px, in training
(every image of the split is cached) as at inference.

When the anomaly stage fails on an image (the builtin mapper refuses images without
a mediastinum or with flat lung contrast, e.g. blank or tiny images), x_ano is all
zeros and a warning is logged; when the anatomy finds no lungs the region and lung
channels are empty. So a prediction never fails because of the priors. docs/models.md explains why these priors matter and their caveat: on a
dataset generated with the builtin backends, the reference masks are built from the
same anatomy and anomaly maps, so part of what the model gains is agreement with the
pipeline, not lesion recognition.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cxrils import vocab
from cxrils.config import Config, QCConfig
from cxrils.templates import ParsedText
from cxrils.types import AnatomyMasks, LesionBox
from cxrils.vision.anatomy.measures import cardiothoracic_ratio, frontal_plausibility

log = logging.getLogger(__name__)

#: Names of the prior channels, in input order (after the image); ``boxes`` only with
#: ``LightConfig.box_prior``.
PRIOR_CHANNELS: tuple[str, ...] = ("region", "lungs", "x_ano", "boxes")
#: Longer side, in pixels, of the reduced image the priors are computed on (ours: the
#: builtin anatomy network works at 256 px, so a larger copy adds time, not detail).
WORK_SIDE = 256
#: Images whose priors :class:`PriorComputer` keeps (least recently used dropped).
CACHE_SIZE = 16
#: Anatomy labels kept in :class:`ImagePriors`: the instruction locations (lungs and
#: zones, which also name a global answer's locations) and the heart (cardiomegaly).
PRIOR_LABELS: tuple[str, ...] = vocab.INSTRUCTION_LOCATIONS + ("heart",)
#: Labels also kept when the anatomy backend gives them: the lobes, which an instruction
#: may name (``region`` prior of a lobe instruction).
OPTIONAL_PRIOR_LABELS: tuple[str, ...] = vocab.LOBES

#: Centre and scale of the CTR input (:func:`ctr_feature`): the paper's cardiomegaly
#: negative cut-off (0.45, Appendix D.3) maps to 0, and one tenth of CTR to 1 (ours).
CTR_CENTRE = QCConfig().ctr_max_cardiomegaly_negative
CTR_SCALE = 10.0

AnatomyFn = Callable[[np.ndarray], AnatomyMasks]
#: ``detector(x uint8 (h, w)) -> list of LesionBox`` in pixels of ``x``.
DetectorFn = Callable[[np.ndarray], list[LesionBox]]
#: ``anomaly(x uint8 (h, w), edit_region bool (h, w), lungs bool (h, w)) -> x_ano float32 (h, w)``.
AnomalyFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class PackedMasks:
    """Bool (h, w) masks of a few labels, bit-packed (``numpy.packbits``); read like
    :class:`~cxrils.types.AnatomyMasks` (``masks[label]``, ``label in masks``,
    ``union(labels)``, ``shape``).

    Raises
    ------
    KeyError
        On a label that was not kept.
    """

    def __init__(self, masks: dict[str, np.ndarray], shape: tuple[int, int]) -> None:
        self.shape = (int(shape[0]), int(shape[1]))
        self._bits = {label: np.packbits(np.asarray(m, dtype=bool).ravel()) for label, m in masks.items()}

    def __getitem__(self, label: str) -> np.ndarray:
        try:
            bits = self._bits[label]
        except KeyError:
            raise KeyError(f"no prior mask for {label!r}; have {sorted(self._bits)}") from None
        n = self.shape[0] * self.shape[1]
        return np.unpackbits(bits, count=n).astype(bool).reshape(self.shape)

    def __contains__(self, label: object) -> bool:
        return label in self._bits

    def union(self, labels) -> np.ndarray:
        """Union of the named masks, bool (h, w)."""
        out = np.zeros(self.shape, dtype=bool)
        for label in labels:
            out |= self[label]
        return out


@dataclass(frozen=True)
class ImagePriors:
    """Priors of one image at the reduced working size (h, w).

    Attributes
    ----------
    anatomy : PackedMasks
        Bool (h, w) masks of :data:`PRIOR_LABELS` (CXAS labels, patient sides).
    x_ano : ndarray, float16 (h, w)
        Anomaly map in [0, 1], zero outside the lungs (all zero when not computed
        or when the anomaly stage failed on the image).
    ctr : float or None
        Cardiothoracic ratio of the anatomy (heart width / thoracic width), None when
        the heart or the lungs are empty.
    boxes : ndarray, float16 (h, w), or None
        Highest detector confidence of a box covering each pixel (None when no
        detector was given).
    implausible : str or None
        Why the anatomy does not look like a frontal chest radiograph ("no lungs found",
        or the reason of :func:`cxrils.vision.anatomy.measures.frontal_plausibility` at
        the default QC bounds); None when it does.
    """

    anatomy: PackedMasks
    x_ano: np.ndarray
    ctr: float | None = None
    boxes: np.ndarray | None = None
    implausible: str | None = None


#: :attr:`ImagePriors.implausible` of an image in which the anatomy stage found no lungs.
NO_LUNGS = "no lungs found"

#: The prior stages whose weights a light model's own depend on (keys of
#: :func:`stage_version` records, :attr:`cxrils.models.light.segmenter.LightSegmenter.prior_stages`).
PRIOR_STAGES: tuple[str, ...] = ("anatomy", "anomaly", "detector")


def stage_version(fn) -> str | None:
    """``"{backend name} {weights version}"`` of a stage callable made by
    :func:`default_anatomy`, :func:`default_anomaly` or :func:`default_detector` (e.g.
    ``"builtin lesionseg-4d8b4e5a1140"``, the version the pipeline's provenance records);
    None for any other callable (a caller's own stage has no version to check)."""
    return getattr(fn, "stage_version", None)


class _Versioned:
    """A stage callable carrying its stage's name and version (:func:`stage_version`;
    None when the stage has no ``version``)."""

    def __init__(self, fn, stage) -> None:
        self.fn = fn
        version = getattr(stage, "version", None)
        self.stage_version = f"{getattr(stage, 'name', type(stage).__name__)} {version}" if version else None

    def __call__(self, *args):
        return self.fn(*args)


def default_anatomy() -> AnatomyFn:
    """The configured anatomy segmenter's ``segment`` (``cxrils.vision.anatomy``, builtin),
    carrying its :func:`stage_version`.

    Raises
    ------
    RuntimeError
        If the anatomy stage is not installed or cannot be built.
    """
    try:
        from cxrils.config import Config
        from cxrils.vision.anatomy import get_segmenter
    except ImportError as err:
        raise RuntimeError(
            "the light model's priors and answers name lung regions and need the anatomy "
            f"stage (cxrils.vision.anatomy), which is not available: {err}"
        ) from err
    cfg = Config()
    stage = get_segmenter(cfg.backends.anatomy, cfg)
    return _Versioned(stage.segment, stage)


def default_anomaly(cfg: Config | None = None) -> AnomalyFn:
    """The anomaly mapper of ``cfg`` (a :class:`cxrils.config.Config`; default: the
    default config, whose backend is the builtin map) as an :data:`AnomalyFn` carrying
    its :func:`stage_version`.

    Raises
    ------
    RuntimeError
        If the anomaly stage cannot be built.
    """
    from cxrils.vision.anomaly import get_anomaly_mapper

    cfg = cfg or Config()
    mapper = get_anomaly_mapper(cfg.backends.anomaly, cfg)

    def anomaly(x: np.ndarray, edit_region: np.ndarray, lungs: np.ndarray) -> np.ndarray:
        return mapper.map(x, edit_region, lungs=lungs).x_ano

    return _Versioned(anomaly, mapper)


def default_detector(cfg: Config | None = None) -> DetectorFn:
    """The lesion detector of ``cfg`` (a :class:`cxrils.config.Config`; default: the
    default config, whose backend is the builtin detector) as a :data:`DetectorFn`
    carrying its :func:`stage_version`.

    Raises
    ------
    RuntimeError
        If the detection stage cannot be built.
    """
    from cxrils.vision.detection import get_detector

    cfg = cfg or Config()
    stage = get_detector(cfg.backends.detector, cfg)
    return _Versioned(stage.detect, stage)


def box_map(boxes: list[LesionBox], shape: tuple[int, int]) -> np.ndarray:
    """float16 (h, w): at each pixel the highest confidence of a box covering it
    (boxes rasterised with :meth:`LesionBox.to_mask`), 0 elsewhere."""
    out = np.zeros(shape, np.float32)
    for b in boxes:
        m = b.to_mask(shape)
        out[m] = np.maximum(out[m], float(np.clip(b.confidence, 0.0, 1.0)))
    return out.astype(np.float16)


def reduce_image(x: np.ndarray) -> np.ndarray:
    """``x`` uint8 (H, W) shrunk (area interpolation, aspect kept) so that its longer
    side is at most :data:`WORK_SIDE`; returned unchanged when already that small."""
    import cv2

    h, w = x.shape
    scale = WORK_SIDE / max(h, w)
    if scale >= 1.0:
        return x
    return cv2.resize(x, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)


class PriorComputer:
    """Computes (and caches) :class:`ImagePriors` of images.

    Parameters
    ----------
    anatomy : callable
        ``anatomy(x uint8 (h, w)) -> AnatomyMasks`` at (h, w).
    anomaly : callable, optional
        An :data:`AnomalyFn`; needed only for :meth:`priors` with ``with_anomaly``.
    detector : callable, optional
        A :data:`DetectorFn`; when given, :attr:`ImagePriors.boxes` is computed.
    warn : bool
        Log a warning for each image whose anatomy does not look like a frontal chest
        radiograph (:attr:`ImagePriors.implausible`), once per computed image: on for
        answers; training turns it off and counts them instead.
    """

    def __init__(
        self,
        anatomy: AnatomyFn,
        anomaly: AnomalyFn | None = None,
        detector: DetectorFn | None = None,
        *,
        warn: bool = True,
    ) -> None:
        self._anatomy = anatomy
        self._anomaly = anomaly
        self._detector = detector
        self._warn = warn
        self._cache: OrderedDict[tuple[str, bool], ImagePriors] = OrderedDict()

    def clear_cache(self) -> None:
        """Forget the priors of every image seen so far."""
        self._cache.clear()

    def priors(self, x: np.ndarray, *, with_anomaly: bool = True, key: str | None = None) -> ImagePriors:
        """Priors of ``x`` uint8 (H, W), computed on :func:`reduce_image` of it.

        ``key`` identifies the image in the cache (default: a hash of its pixels).
        Without ``with_anomaly`` the map is all zeros (only the anatomy is needed).
        A failing anomaly stage also gives zeros (logged), see the module docstring.

        Raises
        ------
        ValueError
            If the anatomy lacks a label of :data:`PRIOR_LABELS` or has another shape,
            or ``with_anomaly`` is asked without an anomaly mapper.
        """
        key = key or hashlib.blake2b(x.tobytes() + repr(x.shape).encode(), digest_size=16).hexdigest()
        for k in ((key, with_anomaly), (key, True)):
            if k in self._cache:
                self._cache.move_to_end(k)
                return self._cache[k]
        small = reduce_image(x)
        anatomy = self._anatomy(small)
        missing = [lb for lb in PRIOR_LABELS if lb not in anatomy]
        if missing or tuple(anatomy.shape) != small.shape:
            raise ValueError(
                f"anatomy of a {small.shape} image has shape {tuple(anatomy.shape)} "
                f"and lacks {missing}; the light model's priors need the lungs, their "
                "zones and the heart"
            )
        x_ano = np.zeros(small.shape, dtype=np.float16)
        lungs = anatomy.union(("right lung", "left lung"))
        if not lungs.any():
            implausible: str | None = NO_LUNGS
            if self._warn:
                log.warning(
                    "the anatomy stage found no lungs in this %s image (is it a frontal chest "
                    "radiograph?): the priors are empty and every answer is absent",
                    x.shape,
                )
        else:  # the pipeline's QC check (default QCConfig bounds); the answers are still given
            implausible = frontal_plausibility(anatomy, QCConfig())
            if implausible is not None and self._warn:
                log.warning(
                    "this %s image does not look like a frontal chest radiograph (%s): the answers about it "
                    "are not reliable",
                    x.shape,
                    implausible,
                )
        if with_anomaly:
            if self._anomaly is None:
                raise ValueError("no anomaly mapper given; cannot compute the x_ano prior")
            if lungs.any():
                try:
                    x_ano = np.asarray(
                        self._anomaly(small, anatomy.union(vocab.EDIT_REGION_LABELS), lungs), dtype=np.float16
                    )
                except (ValueError, RuntimeError) as err:  # e.g. no mediastinum, flat contrast
                    log.warning("x_ano prior set to zero: the anomaly stage failed on a %s image: %s", small.shape, err)
        boxes = None
        if self._detector is not None and with_anomaly:
            try:
                boxes = box_map(list(self._detector(small)), small.shape)
            except (ValueError, RuntimeError) as err:
                log.warning("box prior set to zero: the detection stage failed on a %s image: %s", small.shape, err)
                boxes = np.zeros(small.shape, np.float16)
        kept = PRIOR_LABELS + tuple(lb for lb in OPTIONAL_PRIOR_LABELS if lb in anatomy)
        result = ImagePriors(
            anatomy=PackedMasks({lb: anatomy[lb] for lb in kept}, small.shape),
            x_ano=x_ano,
            ctr=_ctr(anatomy),
            boxes=boxes,
            implausible=implausible,
        )
        self._cache[(key, with_anomaly)] = result
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return result


def _ctr(anatomy: AnatomyMasks) -> float | None:
    if not anatomy["heart"].any() or not anatomy.union(("right lung", "left lung")).any():
        return None
    try:
        return float(cardiothoracic_ratio(anatomy))
    except ValueError:
        return None


def ctr_feature(ctr: float | None) -> float:
    """The CTR as the network's extra input: ``(ctr - CTR_CENTRE) * CTR_SCALE``,
    clipped to [-3, 3]; 0 (the centre) when unknown."""
    if ctr is None or not np.isfinite(ctr):
        return 0.0
    return float(np.clip((ctr - CTR_CENTRE) * CTR_SCALE, -3.0, 3.0))


def region_labels(parsed: ParsedText | None) -> tuple[str, ...]:
    """Anatomy labels of the region an instruction names (see the module docstring):
    its locations as CXAS labels (zones, lungs, lobes), both lungs, or the heart."""
    if parsed is not None and parsed.target in vocab.ORGAN_LOCATIONS:
        return (vocab.ORGAN_LOCATIONS[parsed.target],)
    if parsed is None or parsed.instruction_type == "global" or not parsed.locations:
        return ("right lung", "left lung")
    return tuple(parsed.locations)


def prior_channels(priors: ImagePriors, parsed: ParsedText | None, size: int, *, boxes: bool = False) -> np.ndarray:
    """The :data:`PRIOR_CHANNELS` of one (image, instruction) pair.

    Returns
    -------
    ndarray, float32 (3 or 4, size, size)
        region, lungs, x_ano and, with ``boxes``, the box map (zeros when the priors
        have none), each in [0, 1] (area-resized to ``size`` x ``size``).

    Raises
    ------
    ValueError
        If the anatomy lacks a named region (e.g. a lobe, with an anatomy backend that
        does not segment lobes).
    """
    import cv2

    labels = region_labels(parsed)
    missing = [lb for lb in labels if lb not in priors.anatomy]
    if missing:
        raise ValueError(
            f"the anatomy stage gave no mask for {missing}, which the instruction names; "
            "use an anatomy backend that segments it (builtin and cxas give lobes)"
        )
    maps = [
        priors.anatomy.union(labels).astype(np.float32),
        priors.anatomy.union(("right lung", "left lung")).astype(np.float32),
        priors.x_ano.astype(np.float32),
    ]
    if boxes:
        maps.append(
            priors.boxes.astype(np.float32) if priors.boxes is not None else np.zeros(priors.x_ano.shape, np.float32)
        )
    return np.stack([cv2.resize(m, (size, size), interpolation=cv2.INTER_AREA) for m in maps])
