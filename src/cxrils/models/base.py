"""The model API shared by every ILS model (light model, ROSALIA).

A trained model lives in a run folder holding ``config.json`` whose ``model_type``
names the implementation (:data:`MODEL_TYPES`) plus that model's weights.
:meth:`Segmenter.from_pretrained` reads ``model_type`` and hands the folder to the
registered class, so a new model plugs in by adding one entry to
:data:`MODEL_TYPES` and subclassing :class:`Segmenter`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from cxrils.registry import Registry

CONFIG_NAME = "config.json"

#: ``config.json`` ``architectures`` entries of released checkpoints -> model_type: the
#: LISA format of xinlai/LISA-7B-v1 and checkone/ROSALIA-7B-v1 (``model_type: llava``).
ARCHITECTURE_TYPES: dict[str, str] = {"LISAForCausalLM": "rosalia"}


class ModelLoadError(ValueError):
    """Raised when a run folder is missing, incomplete or of an unknown model type."""


#: model_type -> "module:Class" of its :class:`Segmenter`, imported lazily
#: (:class:`cxrils.registry.Registry`; :meth:`Segmenter.from_pretrained` loads, not ``build``).
MODEL_TYPES: Registry[Segmenter] = Registry(
    "model_type",
    {
        "light": "cxrils.models.light.segmenter:LightSegmenter",
        "rosalia": "cxrils.models.rosalia.segmenter:RosaliaSegmenter",
    },
    ModelLoadError,
)


@dataclass(frozen=True)
class Prediction:
    """One answer of an ILS model to (image, instruction).

    Attributes
    ----------
    mask : ndarray of bool, shape (H, W)
        Lesion mask at the input image's resolution; all False when the model says
        the requested lesion is absent (an empty target).
    answer : str
        Answer text following the templates of :mod:`cxrils.templates` (Table 2).
    presence_score : float
        Probability in [0, 1] that the requested lesion is present.
    presence_threshold : float or None
        The score at or above which the model answered with a mask, shown beside the
        score so that "absent" at 0.87 is no puzzle; None for models without one (ROSALIA
        decides by the mask its ``[SEG]`` token gives).
    note : str or None
        For the user: why the answer differs from what the score alone says (the light
        model's cardiomegaly rule on the CTR, its consistent-answers rule, no lungs
        found), and a warning where the image does not look like a frontal chest
        radiograph; None when there is nothing to say.
    padding_pixels : int
        Foreground pixels of the model's mask in the part of the authors' comparison
        frame outside the image: ROSALIA with ``mask_geometry="padded"`` (the frame its
        weights learned) crops SAM's mask to the resized image ``[:h, :w]`` and stretches
        it over the S x S square, where ``validate()`` compares it with the target
        zero-padded at the bottom and right; the pixels it puts at rows >= h or columns
        >= w are false positives there (:mod:`cxrils.evaluation.official`). 0 for every
        other model. ``mask`` holds the image part only. In pixels of the image's grid:
        the square's count times ``H * W / (h * w)`` (ours); exact when the image is on
        SAM's grid, longest side S (the 1024-pixel grid of an imported MIMIC-ILS
        dataset, ``cxrils import --max-side 1024``).
    """

    mask: np.ndarray
    answer: str
    presence_score: float
    presence_threshold: float | None = None
    note: str | None = None
    padding_pixels: int = 0

    @property
    def is_empty(self) -> bool:
        """True when the predicted mask has no foreground pixel."""
        return not bool(self.mask.any())

    @property
    def score_passes(self) -> bool | None:
        """True when ``presence_score`` reaches ``presence_threshold`` (at or above: the
        rule by which the light model answers with a mask, and by which
        ``cardiomegaly_needs_score`` lets the heart through); None without a threshold."""
        if self.presence_threshold is None:
            return None
        return self.presence_score >= self.presence_threshold


def read_model_config(path: str | Path) -> dict:
    """Read ``config.json`` of a run folder.

    Raises
    ------
    ModelLoadError
        If the folder or its config is missing or is not a JSON object with ``model_type``
        or a released architecture (:data:`ARCHITECTURE_TYPES`).
    """
    run = Path(path)
    cfg_path = run / CONFIG_NAME
    if run.is_file():
        raise ModelLoadError(f"{run}: a file, not a model folder: give the folder that holds {CONFIG_NAME}")
    if not run.is_dir():
        raise ModelLoadError(
            f"{run}: model folder not found (a trained run of `cxrils train -o`, or a released checkpoint you "
            "downloaded: checkone/ROSALIA-7B-v1 or xinlai/LISA-7B-v1 from the Hugging Face hub, docs/rosalia.md; "
            "nothing is downloaded at run time)"
        )
    if not cfg_path.is_file():
        raise ModelLoadError(f"{cfg_path}: missing; is {run} a trained model folder (cxrils train -o ...)?")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"{cfg_path}: not readable JSON: {err}") from err
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{cfg_path}: not a JSON object")
    archs = cfg.get("architectures")
    released = isinstance(archs, list) and any(isinstance(a, str) and a in ARCHITECTURE_TYPES for a in archs)
    if "model_type" not in cfg and not released:
        raise ModelLoadError(
            f"{cfg_path}: needs a 'model_type' key (one of {MODEL_TYPES.names()}) or a released "
            f"architecture ({sorted(ARCHITECTURE_TYPES)})"
        )
    return cfg


def model_type_of(config: dict) -> str:
    """The cxrils model type of a folder's ``config.json``: a released architecture
    (:data:`ARCHITECTURE_TYPES`) first, else its ``model_type``."""
    archs = config.get("architectures")
    for arch in archs if isinstance(archs, list) else []:
        if isinstance(arch, str) and arch in ARCHITECTURE_TYPES:
            return ARCHITECTURE_TYPES[arch]
    return str(config["model_type"])


def resolve_model_class(model_type: str) -> type[Segmenter]:
    """Import the :class:`Segmenter` subclass registered for ``model_type``.

    Raises
    ------
    ModelLoadError
        If the type is unknown or its module cannot be imported.
    """
    return cast("type[Segmenter]", MODEL_TYPES.resolve(model_type))


def default_model_dir() -> Path | None:
    """The light model shipped in the package (``cxrils/weights/light_ils``, see its
    model card ``cxrils/weights/light_ils.md``), or None when it is not installed."""
    from importlib import resources

    path = Path(str(resources.files("cxrils") / "weights" / "light_ils"))
    return path if (path / "config.json").is_file() else None


class Segmenter(ABC):
    """An instruction-guided lesion segmentation model (paper section 4).

    Subclasses implement :meth:`_load` and :meth:`predict`; :meth:`predict_many`
    may be overridden for batching.
    """

    model_type: str = ""

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs) -> Segmenter:
        """Load a trained model from its run folder.

        Parameters
        ----------
        path : path
            Folder with ``config.json`` (``model_type``) and weights.
        **kwargs
            Passed to the model class (e.g. ``device``, ``anatomy``).

        Raises
        ------
        ModelLoadError
            If the folder is not a trained model or its type is unknown or mismatched.
        """
        cfg = read_model_config(path)
        model_type = model_type_of(cfg)
        target = resolve_model_class(model_type)
        if cls is not Segmenter and not issubclass(target, cls):
            raise ModelLoadError(f"{path}: holds a {model_type!r} model, not {cls.__name__}")
        return target._load(Path(path), cfg, **kwargs)

    @classmethod
    @abstractmethod
    def _load(cls, path: Path, config: dict, **kwargs) -> Segmenter:
        """Build the model from its run folder and parsed ``config.json``."""

    @abstractmethod
    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        """Answer one instruction about one image.

        Parameters
        ----------
        image : ndarray of uint8, shape (H, W)
            The 8-bit image x.
        instruction : str
            An instruction, ideally following Table 2 ("Segment the effusion in the
            left lung base.").

        Returns
        -------
        Prediction
            Mask at (H, W), template answer, presence score.
        """

    def read_instruction(self, instruction: str) -> str:
        """The instruction as this model reads it, i.e. the question its answer replies
        to; responses show it so that a rewritten instruction never goes unnoticed.

        Default: the text itself (whitespace collapsed), for models that read free text.
        The light model returns its Table 2 reading ("where is the pleural fluid at the left
        base?" -> "Segment the effusion in the left lung base.").

        Raises
        ------
        ValueError
            (``InstructionError``) if the model cannot read the instruction; the
            message says what it accepts.
        """
        return " ".join(instruction.split())

    def predict_many(self, images: list[np.ndarray], instructions: list[str]) -> list[Prediction]:
        """Answer several (image, instruction) pairs; default: one by one."""
        if len(images) != len(instructions):
            raise ValueError(f"{len(images)} images but {len(instructions)} instructions")
        return [self.predict(x, s) for x, s in zip(images, instructions)]


def check_instruction(instruction: object) -> str:
    """Validate a model input instruction: returns it.

    Raises
    ------
    ValueError
        If it is not a str (None, bytes, a list of them: ``predict_many`` takes lists).
    """
    if not isinstance(instruction, str):
        raise ValueError(f"instruction must be a str, got {type(instruction).__name__}: {instruction!r:.60}")
    return instruction


def check_image(image: np.ndarray) -> np.ndarray:
    """Validate a model input image.

    Returns
    -------
    ndarray of uint8, shape (H, W)

    Raises
    ------
    ValueError
        If the array is not 2-D uint8 with both sides >= 1 (the message says how to get
        such an array from a file or a colour image), or holds only the levels 0 and 1
        (an image scaled to [0, 1] and cast to uint8). The model API answers any size;
        ``cxrils predict`` and the service also refuse images under
        :data:`cxrils.io.base.MIN_IMAGE_SIDE` (:func:`cxrils.io.base.image_too_small`).
    """
    if isinstance(image, (str, Path)):
        raise ValueError(
            f"image must be the pixels, not a path ({image!r}): cxrils.io.load_image(path).pixels gives them"
        )
    if hasattr(image, "pixels") and not isinstance(image, np.ndarray):  # cxrils.io.LoadedImage
        raise ValueError(f"image must be the pixels, not a {type(image).__name__}: pass its .pixels")
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.dtype == np.uint8:
        raise ValueError(
            f"image must be grey levels uint8 (H, W), got {arr.shape}: cxrils.io.load_image reads a file as grey "
            "levels, or convert the colour array first (e.g. cv2.cvtColor(x, cv2.COLOR_RGB2GRAY))"
        )
    if arr.ndim != 2 or arr.dtype != np.uint8 or 0 in arr.shape:
        raise ValueError(f"image must be uint8 (H, W) with H, W >= 1, got {arr.dtype} {arr.shape}")
    if arr.max() == 1:  # a trial: answered "no opacity" with a confident score
        raise ValueError(
            "image holds only the grey levels 0 and 1: an image scaled to [0, 1] and cast to uint8? "
            "give the 8-bit grey levels 0..255 (cxrils.io.load_image(path).pixels)"
        )
    return arr
