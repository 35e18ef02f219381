"""Single source of truth for the words cxrils uses.

Lesion types, their report synonyms, the anatomical vocabulary of the paper's
location mapping (17 broad categories, lung-region labels in CXAS spelling), the
locations that instructions may name, and the VinDr-CXR detector classes.

Sides: "right"/"left" always mean the **patient's** side. On a standard frontal
(PA/AP) display the patient's right lung is on the **image's left**.

Sources: paper section 3.1 step 1 and Appendix A.2 (Figure 10) for the anatomical
labels; section 3.2 and Appendix B for the seven lesion types; Appendix A.3 for the
VinDr-CXR classes that are dropped.
"""

from __future__ import annotations

from typing import Final

#: The seven lesion types of MIMIC-ILS (paper section 3.2, Appendix B), in the order
#: the paper's tables use.
LESION_TYPES: Final[tuple[str, ...]] = (
    "cardiomegaly",
    "pneumonia",
    "atelectasis",
    "opacity",
    "consolidation",
    "edema",
    "effusion",
)

#: Lesion types that get lesion-inference instructions ("Segment the opacity in the
#: [Location] and predict its type."): paper section 3.2, Appendix C.1.
INFERENCE_LESION_TYPES: Final[tuple[str, ...]] = ("pneumonia", "atelectasis", "edema")

#: Organ-level lesion types whose mask is an anatomy mask, not an Algorithm 1 mask
#: (paper section 3.2: cardiomegaly -> heart mask).
ORGAN_LESION_TYPES: Final[tuple[str, ...]] = ("cardiomegaly",)

#: Report wording that names each lesion type (lower case). Longer phrases first is
#: not required: matchers must prefer the longest match themselves.
LESION_SYNONYMS: Final[dict[str, tuple[str, ...]]] = {
    "cardiomegaly": (
        "cardiomegaly", "enlarged heart", "heart is enlarged", "heart size is enlarged",
        "enlarged cardiac silhouette", "cardiac silhouette is enlarged", "cardiac enlargement",
        "enlargement of the cardiac silhouette", "heart size is increased", "increased heart size",
        "enlarged cardiomediastinal silhouette", "cardiomediastinal silhouette is enlarged",
    ),
    "pneumonia": ("pneumonia", "pneumonic", "bronchopneumonia", "infectious process", "infection",
                  "pneumonitis"),  # MeSH lists pneumonitis as an entry term of Pneumonia
    "atelectasis": ("atelectasis", "atelectatic", "atelectases", "collapse", "volume loss"),
    "opacity": (
        "opacity", "opacities", "opacification", "opacifications", "infiltrate", "infiltrates",
        "infiltration", "airspace disease", "air space disease", "density", "densities",
        "haziness", "hazy",
    ),
    "consolidation": ("consolidation", "consolidations", "consolidative", "airspace consolidation"),
    "edema": (
        "edema", "oedema", "pulmonary edema", "vascular congestion", "pulmonary congestion",
        "interstitial edema", "fluid overload", "congestive heart failure", "chf",
    ),
    "effusion": ("effusion", "effusions", "pleural effusion", "pleural fluid", "hydrothorax"),
}

#: The 17 broad anatomical categories of the location mapping, step 1
#: (paper section 3.1 step 1, Appendix A.2 Figure 10).
BROAD_CATEGORIES: Final[tuple[str, ...]] = (
    "thoracic spine", "cervical spine", "lumbar spine", "clavicle", "scapula", "rib",
    "sternum", "diaphragm", "mediastinum", "abdomen", "heart", "breast", "trachea",
    "vessels", "lung", "pleura", "lateral view location",
)

#: Lung zones in CXAS spelling, patient sides, apex to base.
RIGHT_ZONES: Final[tuple[str, ...]] = (
    "right apical zone lung", "right upper zone lung", "right mid zone lung", "right lung base",
)
LEFT_ZONES: Final[tuple[str, ...]] = (
    "left apical zone lung", "left upper zone lung", "left mid zone lung", "left lung base",
)
LUNG_ZONES: Final[tuple[str, ...]] = RIGHT_ZONES + LEFT_ZONES

#: Lobes in CXAS spelling (frontal projections; see anatomy docs for how the builtin
#: backend approximates them).
LOBES: Final[tuple[str, ...]] = (
    "lung upper lobe right", "lung middle lobe right", "lung lower lobe right",
    "lung upper lobe left", "lung lower lobe left",
)

WHOLE_LUNGS: Final[tuple[str, ...]] = ("right lung", "left lung")

#: The four zones of each whole lung (patient sides).
ZONES_OF_LUNG: Final[dict[str, tuple[str, ...]]] = {"right lung": RIGHT_ZONES, "left lung": LEFT_ZONES}

#: The lung-region labels of location mapping step 2. The paper says "14" but lists
#: 15 names (8 zones + 5 lobes + 2 whole lungs); we keep all 15 listed names.
LUNG_REGION_LABELS: Final[tuple[str, ...]] = LUNG_ZONES + LOBES + WHOLE_LUNGS

#: Every anatomy mask the pipeline may need: lung regions plus the heart.
ANATOMY_LABELS: Final[tuple[str, ...]] = LUNG_REGION_LABELS + ("heart",)

#: Which whole lung each lung-region label lies in (patient side).
LABEL_SIDE: Final[dict[str, str]] = {
    **{z: "right" for z in RIGHT_ZONES},
    **{z: "left" for z in LEFT_ZONES},
    "lung upper lobe right": "right", "lung middle lobe right": "right",
    "lung lower lobe right": "right", "lung upper lobe left": "left",
    "lung lower lobe left": "left", "right lung": "right", "left lung": "left",
}

#: Locations an instruction may name (paper section 3.2, Appendix C Table 9): the two
#: lungs and the eight zones. Combinations are lists of these, phrased by
#: :func:`cxrils.templates.location_phrase`.
INSTRUCTION_LOCATIONS: Final[tuple[str, ...]] = ("right lung",) + RIGHT_ZONES + ("left lung",) + LEFT_ZONES

#: Anatomy labels whose union is RadEdit's edit region (paper section 3.1 step 2).
EDIT_REGION_LABELS: Final[tuple[str, ...]] = ("right lung", "left lung", "heart")

#: Organ locations named only by the global positive answer of an organ-level lesion
#: type ("[SEG] It is located in the heart." for cardiomegaly, whose mask is the heart
#: mask, section 3.2). The paper's Table 2 gives no other word for this slot; never
#: combined with lung locations and never an empty-location candidate.
ORGAN_LOCATIONS: Final[dict[str, str]] = {"cardiomegaly": "heart"}

#: Lung regions used for "empty location" negatives (section 3.1 location
#: verification): the eight zones and the two lungs.
EMPTY_LOCATION_CANDIDATES: Final[tuple[str, ...]] = INSTRUCTION_LOCATIONS


def instruction_location(label: str) -> str:
    """Return the instruction location that names a lung-region label.

    Zones and whole lungs name themselves; a lobe (not an instruction location in the
    paper's Table 9) is named by the lung that contains it, which is true of any
    lesion inside that lobe.

    Raises
    ------
    KeyError
        If ``label`` is not one of :data:`LUNG_REGION_LABELS`.
    """
    if label in INSTRUCTION_LOCATIONS:
        return label
    return f"{LABEL_SIDE[label]} lung"


#: The 14 VinDr-CXR lesion classes in the competition's class-id order (0..13).
VINDR_CLASSES: Final[tuple[str, ...]] = (
    "Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly", "Consolidation",
    "ILD", "Infiltration", "Lung Opacity", "Nodule/Mass", "Other lesion", "Pleural effusion",
    "Pleural thickening", "Pneumothorax", "Pulmonary fibrosis",
)

#: Classes dropped before Algorithm 1 (Appendix A.3: not hyperintense lesions).
#: Cardiomegaly boxes are dropped too: the paper's list of kept classes omits it and
#: cardiomegaly's mask is the heart mask (section 3.2), never a box-seeded mask.
VINDR_DROPPED: Final[frozenset[str]] = frozenset(
    {"Aortic enlargement", "Other lesion", "Pneumothorax", "Cardiomegaly"}
)
VINDR_KEPT: Final[tuple[str, ...]] = tuple(c for c in VINDR_CLASSES if c not in VINDR_DROPPED)

#: Instruction types (paper Table 2) and polarities.
INSTRUCTION_TYPES: Final[tuple[str, ...]] = ("basic", "global", "lesion_inference")
POLARITIES: Final[tuple[str, ...]] = ("positive", "negative")
CERTAINTIES: Final[tuple[str, ...]] = ("definitive", "tentative")
PRESENCES: Final[tuple[str, ...]] = ("positive", "negative")

#: Frontal view positions accepted by quality control (Appendix D.1: PA and AP), plus
#: "FRONTAL", which sources without the projection (IU X-ray checked by eye) use.
FRONTAL_VIEWS: Final[frozenset[str]] = frozenset({"PA", "AP", "AP SUPINE", "FRONTAL"})

#: Split names of a cxrils dataset (the spelling of MIMIC-CXR's official split file), and
#: the other spellings accepted for them.
SPLITS: Final[tuple[str, ...]] = ("train", "validate", "test")
SPLIT_ALIASES: Final[dict[str, str]] = {
    "train": "train", "training": "train", "validate": "validate", "validation": "validate",
    "val": "validate", "valid": "validate", "test": "test", "testing": "test",
}


class SplitError(ValueError):
    """Raised for an unknown split name, a bad fraction, or a key missing from an official split."""


def normalize_split(name: str) -> str:
    """Map a split name ("val", "validation", "Test"...) to train | validate | test.

    Raises
    ------
    SplitError
        For a name that is none of :data:`SPLIT_ALIASES`.
    """
    try:
        return SPLIT_ALIASES[str(name).strip().lower()]
    except KeyError:
        raise SplitError(f"unknown split name {name!r}; expected one of {SPLITS}") from None
