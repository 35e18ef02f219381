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

import re
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
        "cardiomegaly",
        "enlarged heart",
        "heart is enlarged",
        "heart size is enlarged",
        "enlarged cardiac silhouette",
        "cardiac silhouette is enlarged",
        "cardiac enlargement",
        "enlargement of the cardiac silhouette",
        "heart size is increased",
        "increased heart size",
        "enlarged cardiomediastinal silhouette",
        "cardiomediastinal silhouette is enlarged",
    ),
    "pneumonia": (
        "pneumonia",
        "pneumonic",
        # UK and Australian reports: "consolidation, likely infective" (a trial: no pneumonia)
        "infective",
        "bronchopneumonia",
        "infectious process",
        "infection",
        "pneumonitis",
    ),  # MeSH lists pneumonitis as an entry term of Pneumonia
    # Not "volume loss": a lost hemithorax volume (surgery, fibrosis) is not atelectasis.
    "atelectasis": ("atelectasis", "atelectatic", "atelectases", "collapse"),
    "opacity": (
        "opacity",
        "opacities",
        "opacification",
        "opacifications",
        "infiltrate",
        "infiltrates",
        "infiltration",
        "airspace disease",
        "air space disease",
        "density",
        "densities",
        "haziness",
        "hazy",
        # British: "patchy airspace shadowing in the right lower zone" (reader trial 2)
        "shadowing",
        "airspace shadowing",
        "air-space shadowing",
        "air space shadowing",
        "white-out",  # "complete white-out of the left hemithorax"
        "whiteout",
        "white out",
        "whited out",
        "whited-out",
    ),
    "consolidation": ("consolidation", "consolidations", "consolidative", "airspace consolidation"),
    # Not vascular congestion, fluid overload or heart failure: they are not edema on the
    # image (NLM's MeSH indexers keep Pulmonary Congestion and Heart Failure apart too).
    "edema": ("edema", "oedema", "pulmonary edema", "interstitial edema", "alveolar edema"),
    # "fissural fluid": pleural fluid in a fissure (the rules structurer also reads "fluid
    # in the minor fissure" so)
    "effusion": ("effusion", "effusions", "pleural effusion", "pleural fluid", "hydrothorax", "fissural fluid"),
}

#: The 17 broad anatomical categories of the location mapping, step 1
#: (paper section 3.1 step 1, Appendix A.2 Figure 10).
BROAD_CATEGORIES: Final[tuple[str, ...]] = (
    "thoracic spine",
    "cervical spine",
    "lumbar spine",
    "clavicle",
    "scapula",
    "rib",
    "sternum",
    "diaphragm",
    "mediastinum",
    "abdomen",
    "heart",
    "breast",
    "trachea",
    "vessels",
    "lung",
    "pleura",
    "lateral view location",
)

#: Lung zones in CXAS spelling, patient sides, apex to base.
RIGHT_ZONES: Final[tuple[str, ...]] = (
    "right apical zone lung",
    "right upper zone lung",
    "right mid zone lung",
    "right lung base",
)
LEFT_ZONES: Final[tuple[str, ...]] = (
    "left apical zone lung",
    "left upper zone lung",
    "left mid zone lung",
    "left lung base",
)
LUNG_ZONES: Final[tuple[str, ...]] = RIGHT_ZONES + LEFT_ZONES

#: Lobes in CXAS spelling (frontal projections; see anatomy docs for how the builtin
#: backend approximates them).
LOBES: Final[tuple[str, ...]] = (
    "lung upper lobe right",
    "lung middle lobe right",
    "lung lower lobe right",
    "lung upper lobe left",
    "lung lower lobe left",
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
    "lung upper lobe right": "right",
    "lung middle lobe right": "right",
    "lung lower lobe right": "right",
    "lung upper lobe left": "left",
    "lung lower lobe left": "left",
    "right lung": "right",
    "left lung": "left",
}

#: Locations an instruction may name (paper section 3.2, Appendix C Table 9): the two
#: lungs and the eight zones. Combinations are lists of these, phrased by
#: :func:`cxrils.templates.location_phrase`.
INSTRUCTION_LOCATIONS: Final[tuple[str, ...]] = ("right lung",) + RIGHT_ZONES + ("left lung",) + LEFT_ZONES

#: How an instruction phrases each lobe (CXAS label -> words a radiologist writes).
#: Lobes are not generated instruction locations (Table 9 lists lungs and zones), but
#: users ask about them ("Is there consolidation in the right lower lobe?", paper
#: section 1), and the anatomy stage segments them (CXAS labels).
LOBE_PHRASES: Final[dict[str, str]] = {
    "lung upper lobe right": "right upper lobe",
    "lung middle lobe right": "right middle lobe",
    "lung lower lobe right": "right lower lobe",
    "lung upper lobe left": "left upper lobe",
    "lung lower lobe left": "left lower lobe",
}

#: Locations a user's instruction may name: the instruction locations of the paper
#: (Table 9), then the five lobes (CXAS labels, phrased by :data:`LOBE_PHRASES`).
#: Generated records use :data:`INSTRUCTION_LOCATIONS` only.
QUERY_LOCATIONS: Final[tuple[str, ...]] = INSTRUCTION_LOCATIONS + LOBES

#: Other ways of writing query locations (lower case, words only) -> the locations
#: they name. Abbreviations as in radiology reports (RUL, RML, RLL, LUL, LLL), the
#: CXAS spellings of the lobes, and zone names without "lung". Ours.
LOCATION_SYNONYMS: Final[dict[str, tuple[str, ...]]] = {
    **{phrase: (label,) for label, phrase in LOBE_PHRASES.items()},
    **{label: (label,) for label in LOBES},
    "rul": ("lung upper lobe right",),
    "rml": ("lung middle lobe right",),
    "rll": ("lung lower lobe right",),
    "lul": ("lung upper lobe left",),
    "lll": ("lung lower lobe left",),
    **{z.replace(" zone lung", " zone"): (z,) for z in LUNG_ZONES if z.endswith(" zone lung")},
    "right base": ("right lung base",),
    "left base": ("left lung base",),
    "right lower zone": ("right lung base",),
    "left lower zone": ("left lung base",),
    "right apex": ("right apical zone lung",),
    "left apex": ("left apical zone lung",),
    "both lungs": ("right lung", "left lung"),
    "both bases": ("right lung base", "left lung base"),
    "bilateral lung bases": ("right lung base", "left lung base"),
    "both lung bases": ("right lung base", "left lung base"),
}

#: Abbreviated sides of clinical shorthand (lower case): "R lung", "L base", "bilat".
SIDE_ABBREVIATIONS: Final[tuple[str, ...]] = ("r", "l", "rt", "lt", "bilat")

#: Words that say an instruction names a place (lower case). An instruction whose
#: location words are not all read as query locations is refused rather than read
#: without its location (which would answer another question).
LOCATION_CUES: Final[frozenset[str]] = frozenset(
    {
        "right",
        "left",
        "upper",
        "middle",
        "mid",
        "lower",
        "base",
        "bases",
        "basal",
        "basilar",
        "bibasilar",
        "apex",
        "apices",
        "apical",
        "zone",
        "zones",
        "lobe",
        "lobes",
        "lobar",
        "lingula",
        "lingular",
        "hilum",
        "hilar",
        "perihilar",
        "bilateral",
        "bilaterally",
        "both",
        "retrocardiac",
        "costophrenic",
        "lateral",
        "medial",
        "peripheral",
        "central",
        # abbreviated sides, which the reader does not expand: refused, never dropped
        # ("atelectasis R lung" is not "Segment the atelectasis.")
        *SIDE_ABBREVIATIONS,
    }
)

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
    "Aortic enlargement",
    "Atelectasis",
    "Calcification",
    "Cardiomegaly",
    "Consolidation",
    "ILD",
    "Infiltration",
    "Lung Opacity",
    "Nodule/Mass",
    "Other lesion",
    "Pleural effusion",
    "Pleural thickening",
    "Pneumothorax",
    "Pulmonary fibrosis",
)

#: Classes dropped before Algorithm 1 (Appendix A.3: not hyperintense lesions).
#: Cardiomegaly boxes are dropped too: the paper's list of kept classes omits it and
#: cardiomegaly's mask is the heart mask (section 3.2), never a box-seeded mask.
VINDR_DROPPED: Final[frozenset[str]] = frozenset({"Aortic enlargement", "Other lesion", "Pneumothorax", "Cardiomegaly"})
VINDR_KEPT: Final[tuple[str, ...]] = tuple(c for c in VINDR_CLASSES if c not in VINDR_DROPPED)

#: Instruction types (paper Table 2) and polarities.
INSTRUCTION_TYPES: Final[tuple[str, ...]] = ("basic", "global", "lesion_inference")
POLARITIES: Final[tuple[str, ...]] = ("positive", "negative")
CERTAINTIES: Final[tuple[str, ...]] = ("definitive", "tentative")
PRESENCES: Final[tuple[str, ...]] = ("positive", "negative")

#: Frontal view positions accepted by quality control (Appendix D.1: PA and AP), plus
#: "FRONTAL", which sources without the projection (IU X-ray checked by eye) use.
FRONTAL_VIEWS: Final[frozenset[str]] = frozenset({"PA", "AP", "AP SUPINE", "FRONTAL"})
#: View Position values of a lateral (sagittal-plane) radiograph (DICOM LL and RL, and
#: their spellings in metadata; :mod:`cxrils.io.dicom` checks Patient Orientation with them).
LATERAL_VIEWS: Final[frozenset[str]] = frozenset({"LL", "RL", "LATERAL", "LAT"})
#: View positions a user may name (``cxrils ground --view``): the frontal ones, the
#: defined terms of DICOM View Position (0018,5101) for radiographs (PS3.3 C.8.11.5: AP,
#: PA, LL, RL, RLD, LLD, RLO, LLO) and the others of MIMIC-CXR-JPG's metadata
#: (ViewPosition: lateral, oblique, decubitus, axial, swimmer's), which quality control
#: excludes.
VIEW_POSITIONS: Final[frozenset[str]] = (
    FRONTAL_VIEWS
    | LATERAL_VIEWS
    | frozenset({"XTABLE LATERAL", "LAO", "RAO", "LPO", "RPO", "AP AXIAL", "PA LLD", "PA RLD"})
    | frozenset({"AP LLD", "AP RLD", "SWIMMERS", "RLD", "LLD", "RLO", "LLO"})
)

#: Spellings of the two frontal projections in users' tables and headers (not DICOM terms).
_VIEW_SPELLINGS: Final[dict[str, str]] = {
    "POSTERO ANTERIOR": "PA",
    "POSTEROANTERIOR": "PA",
    "ANTERO POSTERIOR": "AP",
    "ANTEROPOSTERIOR": "AP",
}
#: Words that make a view not frontal whatever else it says.
_NOT_FRONTAL_WORDS: Final[frozenset[str]] = frozenset(
    {"LAT", "LATERAL", "DECUBITUS", "OBLIQUE", "SWIMMERS", "LLD", "RLD", "LAO", "RAO", "LPO", "RPO", "LL", "RL"}
)
#: Words after a view that do not change it: "AP PORTABLE", "PA VIEW", "LATERAL VIEW".
_VIEW_FILLERS: Final[frozenset[str]] = frozenset(
    {"VIEW", "PORTABLE", "PORT", "ERECT", "UPRIGHT", "SEMIERECT", "SEMI", "PROJECTION", "CHEST"}
)


#: The words a not-frontal view keeps (:func:`read_view_position`); any other word of the
#: value (a name typed into a free-text field) is dropped.
_VIEW_WORDS: Final[frozenset[str]] = (
    frozenset(w for term in VIEW_POSITIONS for w in term.split())
    | _NOT_FRONTAL_WORDS
    | _VIEW_FILLERS
    | frozenset({"LEFT", "RIGHT", "CROSS", "TABLE", "CROSSTABLE", "X"})
)


def read_view_position(value: str | None) -> tuple[str | None, str | None]:
    """How a written view reads: ``(term, not_frontal)``.

    ``term`` is one of :data:`VIEW_POSITIONS` when the value spells one ("p.a." and "PA
    VIEW" -> "PA", "AP PORTABLE" -> "AP", "postero-anterior" -> "PA", "cross-table
    lateral" -> "XTABLE LATERAL"), else None; ``not_frontal`` is set when the value names
    no term but a word of it makes the view not frontal: its view words (:data:`_VIEW_WORDS`)
    in upper case, in order ("left-lateral" -> "LEFT LATERAL", "Lateral decubitus" ->
    "LATERAL DECUBITUS"; a name in the value is dropped: "DOE LATERAL" -> "LATERAL"),
    else None. Case, full stops, "_", "-" and "/" do not matter. Used for
    input tables' view cells (:func:`cxrils.sources.base.read_view`) and DICOM View
    Position (:mod:`cxrils.io.dicom`).
    """
    v = " ".join(re.sub(r"[_\-/]", " ", (value or "").upper().replace(".", "")).split())
    if not v:
        return None, None
    v = _VIEW_SPELLINGS.get(v, v)
    if v in VIEW_POSITIONS:
        return v, None
    words = v.split()
    if words[0] in VIEW_POSITIONS and set(words[1:]) <= _VIEW_FILLERS:
        return words[0], None
    if v in ("X TABLE LATERAL", "CROSS TABLE LATERAL", "CROSSTABLE LATERAL"):
        return "XTABLE LATERAL", None
    if not set(words) & _NOT_FRONTAL_WORDS:
        return None, None
    return None, " ".join(w for w in words if w in _VIEW_WORDS)


#: Split names of a cxrils dataset (the spelling of MIMIC-CXR's official split file), and
#: the other spellings accepted for them.
SPLITS: Final[tuple[str, ...]] = ("train", "validate", "test")
SPLIT_ALIASES: Final[dict[str, str]] = {
    "train": "train",
    "training": "train",
    "validate": "validate",
    "validation": "validate",
    "val": "validate",
    "valid": "validate",
    "test": "test",
    "testing": "test",
}


class SplitError(ValueError):
    """Raised for an unknown split name, a bad fraction, or a key missing from an official split."""


def normalize_split(name: str, *, extra: tuple[str, ...] = ()) -> str:
    """Map a split name ("val", "validation", "Test"...) to train | validate | test.

    Parameters
    ----------
    name : str
    extra : tuple of str
        Other words the caller accepts besides the splits (``("all",)`` for a command's
        ``--split``), named in the error after the splits; the caller handles them
        before calling (they are not mapped here).

    Raises
    ------
    SplitError
        For a name that is none of :data:`SPLIT_ALIASES`.
    """
    try:
        return SPLIT_ALIASES[str(name).strip().lower()]
    except KeyError:
        raise SplitError(
            f"unknown split name {name!r}; expected one of {', '.join((*SPLITS, *extra))} "
            f"(also read: {', '.join(k for k in SPLIT_ALIASES if k not in SPLITS)})"
        ) from None


def split_filter(name: str | None) -> str | None:
    """The split a reader of a dataset keeps: ``normalize_split(name)``, or None (every
    record) for None or ``"all"`` (any case), as the commands' ``--split all``.

    Raises
    ------
    SplitError
        For a name that is neither ``"all"`` nor one of :data:`SPLIT_ALIASES`.
    """
    if name is None or str(name).strip().lower() == "all":
        return None
    return normalize_split(name, extra=("all",))
