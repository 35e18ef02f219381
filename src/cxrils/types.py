"""Typed values passed between pipeline stages.

Arrays: images are ``numpy.ndarray`` (H, W) row-major; ``x`` is uint8 in [0, 255];
float maps are float32 in [0, 1]; masks are bool (H, W). Boxes are
``(x0, y0, x1, y1)`` in pixels of the image as loaded (x = column, y = row, x1/y1
exclusive). "right"/"left" are the patient's sides: on a standard frontal image the
patient's right lung is on the image's left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np


@dataclass
class Finding:
    """One structured finding of a report: the paper's six-element tuple (section 3.1).

    Attributes
    ----------
    entity : str
        Finding name with anatomical words moved to ``locations`` ("adenopathy").
    sentence_index : int
        1-based index of the sentence in the chosen report section.
    presence : {"positive", "negative"}
        positive = present or stable; negative = stated absent or resolved, or (with
        ``certainty`` tentative) asked and not stated ("rule out pneumonia").
    certainty : {"definitive", "tentative"}
    locations : list of str
        Raw anatomical phrases from the report ("right lower lobe", "bibasilar").
    labels : list of str
        Standard labels from location mapping: items of
        :data:`cxrils.vocab.LUNG_REGION_LABELS`, or broad categories
        (:data:`cxrils.vocab.BROAD_CATEGORIES`) when not in the lung.
    lesion_type : str or None
        The entity mapped to one of :data:`cxrils.vocab.LESION_TYPES`, or None.
    predicted_lesion_type : str or None
        The disease a non-specific finding is said to represent ("opacity likely
        reflecting pneumonia" -> "pneumonia") when it is one of
        :data:`cxrils.vocab.LESION_TYPES`, else None.
    sentence : str
        The sentence text the finding came from.
    inference_certainty : {"definitive", "tentative"} or None
        Certainty of the inference that gave ``predicted_lesion_type``, when the
        report states it apart from the observation: "opacity, may represent
        atelectasis" is a definitive opacity (``certainty``) with a tentative
        inference. None: the inference has the observation's certainty.
    predicted_lesion_text : str or None
        The disease the report says the finding represents, in the report's words
        (the paper's sixth field), also when it is none of the seven types
        ("opacity likely reflecting tuberculosis" -> "tuberculosis",
        ``predicted_lesion_type`` None).
    """

    entity: str
    sentence_index: int
    presence: str
    certainty: str
    locations: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    lesion_type: str | None = None
    predicted_lesion_type: str | None = None
    sentence: str = ""
    inference_certainty: str | None = None
    predicted_lesion_text: str | None = None

    @property
    def asked(self) -> bool:
        """Whether the report asks about the finding rather than states or denies it
        ("evaluate for pneumonia", "cannot exclude effusion": a tentative negative)."""
        return self.presence == "negative" and self.certainty == "tentative"

    @property
    def target_type(self) -> str | None:
        """The lesion type this finding grounds: the predicted type when given, else
        the entity's own type (section 3.1: "opacity reflects pneumonia" is pneumonia)."""
        return self.predicted_lesion_type or self.lesion_type

    @property
    def type_certainty(self) -> str:
        """Certainty that the finding is :attr:`target_type`: the observation's
        ``certainty`` when there is no predicted type, else tentative when either the
        observation or the inference is ("opacity, may represent atelectasis" is a
        tentative atelectasis). Instruction generation uses it for the instruction
        target and the lesion-inference answer (paper section 3.2)."""
        if self.predicted_lesion_type and self.inference_certainty == "tentative":
            return "tentative"
        return self.certainty

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the keys of ``cxrils structure`` output."""
        return {
            "entity": self.entity,
            "sentence_index": self.sentence_index,
            "presence": self.presence,
            "certainty": self.certainty,
            "locations": list(self.locations),
            "labels": list(self.labels),
            "lesion_type": self.lesion_type,
            "predicted_lesion_type": self.predicted_lesion_type,
            "sentence": self.sentence,
            "inference_certainty": self.inference_certainty,
            "predicted_lesion_text": self.predicted_lesion_text,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """Inverse of :meth:`to_dict`."""
        return cls(
            entity=d["entity"],
            sentence_index=int(d["sentence_index"]),
            presence=d["presence"],
            certainty=d["certainty"],
            locations=list(d.get("locations", [])),
            labels=list(d.get("labels", [])),
            lesion_type=d.get("lesion_type"),
            predicted_lesion_type=d.get("predicted_lesion_type"),
            sentence=d.get("sentence", ""),
            inference_certainty=d.get("inference_certainty"),
            predicted_lesion_text=d.get("predicted_lesion_text"),
        )


@dataclass
class StructuredReport:
    """The text side's result for one study (``cxrils structure`` writes one per line).

    ``excluded`` holds the reason when no usable section was found (then ``findings``
    is empty); ``flags`` holds notes such as "addendum" or "wet_read".
    """

    study_id: str
    section_used: str | None
    section_text: str
    findings: list[Finding] = field(default_factory=list)
    excluded: str | None = None
    flags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "study_id": self.study_id,
            "section_used": self.section_used,
            "section_text": self.section_text,
            "findings": [f.to_dict() for f in self.findings],
            "excluded": self.excluded,
            "flags": list(self.flags),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StructuredReport:
        """Inverse of :meth:`to_dict`."""
        return cls(
            study_id=str(d["study_id"]),
            section_used=d.get("section_used"),
            section_text=d.get("section_text", ""),
            findings=[Finding.from_dict(f) for f in d.get("findings", [])],
            excluded=d.get("excluded"),
            flags=list(d.get("flags", [])),
        )


@dataclass
class AnatomyMasks:
    """Anatomy masks of one image, addressable by label (CXAS spelling).

    ``masks`` maps labels of :data:`cxrils.vocab.ANATOMY_LABELS` to bool (H, W) arrays
    at the input image's resolution. Patient sides: "right lung" lies on the image's
    left on a standard frontal image.

    Two conventions of a lung exist (docs/anatomy.md): the whole lung, reaching behind
    the heart and under an effusion (CXAS's, and the zones and lobes are cut from it), and
    the visible lung, stopping at the heart border and above fluid (HybridGNet's and
    JSRT/SCR's). ``masks["right lung"]`` is whatever the backend segments; a backend that
    gives both (``builtin``) puts the whole lungs in ``masks`` and the visible ones in
    ``visible`` (keys "right lung", "left lung"), and :meth:`organs` swaps them in.
    """

    masks: dict[str, np.ndarray]
    shape: tuple[int, int]
    backend: str
    version: str = ""
    visible: dict[str, np.ndarray] | None = None

    def organs(self) -> AnatomyMasks:
        """These masks with the visible lungs as "right lung" and "left lung".

        The organ role of the paper's HybridGNet (section 3.1): condition c4, the
        cardiothoracic ratio, RadEdit's edit region and the plausibility checks read it.
        Zones, lobes and the heart are unchanged. Returns ``self`` when the backend gives
        one convention only (``visible`` is None).
        """
        if not self.visible:
            return self
        return replace(self, masks={**self.masks, **self.visible}, visible=None)

    def __getitem__(self, label: str) -> np.ndarray:
        try:
            return self.masks[label]
        except KeyError:
            raise KeyError(f"no anatomy mask for {label!r}; have {sorted(self.masks)}") from None

    def __contains__(self, label: object) -> bool:
        return label in self.masks

    def union(self, labels: Iterable[str]) -> np.ndarray:
        """Union of the masks of ``labels`` (bool (H, W)); all False for no labels."""
        out = np.zeros(self.shape, dtype=bool)
        for label in labels:
            out |= self[label]
        return out


@dataclass(frozen=True)
class LesionBox:
    """A detector box: ``(x0, y0, x1, y1)`` float pixels (x = column), confidence in
    [0, 1], and the detector's class name (VinDr-CXR spelling for the onnx backend)."""

    x0: float
    y0: float
    x1: float
    y1: float
    confidence: float
    class_name: str

    def to_mask(self, shape: tuple[int, int]) -> np.ndarray:
        """The box as a bool (H, W) mask: pixels whose centres lie inside the box,
        clipped to the image."""
        h, w = shape
        r0, r1 = max(0, int(np.ceil(self.y0 - 0.5))), min(h, int(np.ceil(self.y1 - 0.5)))
        c0, c1 = max(0, int(np.ceil(self.x0 - 0.5))), min(w, int(np.ceil(self.x1 - 0.5)))
        out = np.zeros(shape, dtype=bool)
        if r1 > r0 and c1 > c0:
            out[r0:r1, c0:c1] = True
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "box": [self.x0, self.y0, self.x1, self.y1],
            "confidence": self.confidence,
            "class_name": self.class_name,
        }


@dataclass
class AnomalyResult:
    """Anomaly map of one image (section 3.1 step 2).

    ``x_hat`` uint8 (H, W): the pseudo-healthy image; ``x_ano`` float32 (H, W) in
    [0, 1]: ``max(x - x_hat, 0) / 255`` (negative differences clipped to 0: only
    hyperintense changes are lesions); ``edit_region`` bool (H, W): lungs + heart.
    """

    x_hat: np.ndarray
    x_ano: np.ndarray
    edit_region: np.ndarray
    backend: str
    version: str = ""

    def anomaly_set(self, tau_ano: float) -> np.ndarray:
        """A = x_ano >= tau_ano, bool (H, W) (paper section 3.1)."""
        return self.x_ano >= tau_ano


@dataclass
class GroundedFinding:
    """A finding after Algorithm 1 and location verification (section 3.1 steps 3-4).

    ``mask`` is the bool (H, W) lesion mask (heart mask for cardiomegaly), or None
    when nothing was grounded, with ``drop_reason`` saying why. ``reported``,
    ``grounded`` and ``empty`` are lung-region labels (patient sides).
    """

    finding: Finding
    lesion_type: str | None
    reported: list[str]
    grounded: list[str]
    empty: list[str]
    mask: np.ndarray | None = None
    kept_boxes: list[LesionBox] = field(default_factory=list)
    drop_reason: str | None = None
    #: Algorithm 1 record of every candidate box: JSON-ready dicts with the box, the
    #: four condition values and verdicts, and whether it was kept
    #: (:meth:`cxrils.grounding.BoxCheck.to_dict`).
    box_checks: list[dict[str, Any]] = field(default_factory=list[Any])


@dataclass
class StudyGrounding:
    """Everything the instruction stage needs about one image of one study."""

    study_id: str
    image_id: str
    shape: tuple[int, int]
    findings: list[GroundedFinding]
    empty_locations: list[str]
    ctr: float | None
    heart_mask: np.ndarray | None = None
    excluded: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict[str, Any])
