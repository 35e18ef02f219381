"""Location verification (paper section 3.1 step 4): reported, grounded and empty
locations.

Definitions used here (labels are CXAS spellings, patient sides):

- **reported** locations of a finding: its mapped labels that are lung regions
  (:data:`cxrils.vocab.LUNG_REGION_LABELS`). A finding whose labels name no lung
  region but only "lung" or "pleura", or nothing at all, is taken to be anywhere in
  the lungs: reported = ["right lung", "left lung"] (``implied``), unless its entity
  is a finding outside the lungs (:data:`NON_LUNG_ENTITIES`: spine, bones,
  mediastinum, diaphragm, pericardium), which occupies no lung region. Cardiomegaly's
  location is the heart. Other broad categories (rib, mediastinum, ...) have no lung
  mask.
- **grounded** locations: the reported labels ``l`` for which some box kept by
  Algorithm 1 intersects the anatomy mask M_l (at least one pixel) *and* the final
  lesion mask intersects M_l (at least one pixel), so that "segment the X in l" is
  answered by a mask that reaches l.
- **empty** locations of a study: the candidates
  :data:`cxrils.vocab.EMPTY_LOCATION_CANDIDATES` (both lungs and the eight zones)
  whose anatomy mask overlaps the anatomy mask of no reported location of any
  positive finding of the study (all seven types and other findings), allowing
  ``empty_overlap_tol_px`` pixels (0: "does not overlap at all"). Organ-level
  findings (cardiomegaly: the heart) occupy no lung region: the heart mask's overlap
  with the lung masks must not erase the empty lung regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cxrils.types import AnatomyMasks, Finding, LesionBox
from cxrils.vocab import EMPTY_LOCATION_CANDIDATES, LUNG_REGION_LABELS, ORGAN_LESION_TYPES, WHOLE_LUNGS

#: Broad categories (location mapping step 1) that mean "somewhere in the lungs".
LUNG_BROAD: frozenset[str] = frozenset({"lung", "pleura"})

#: Entities (lower case, as the report stage extracts them) that lie outside the lungs
#: when the report names no location: they occupy no lung region (ours).
NON_LUNG_ENTITIES: frozenset[str] = frozenset(
    {
        "fracture",
        "fractures",
        "hernia",
        "hiatal hernia",
        "adenopathy",
        "lymphadenopathy",
        "pulmonary hypertension",
        "tortuosity",
        "degenerative changes",
        "scoliosis",
        "kyphosis",
        "osteopenia",
        "pericardial effusion",
        "pericardial effusions",
        "pneumomediastinum",
        "eventration",
    }
)


@dataclass(frozen=True)
class ReportedLocations:
    """Anatomy labels a finding refers to.

    ``labels``: anatomy labels (lung regions, or ["heart"] for cardiomegaly);
    ``implied``: True when the report named no lung region and both lungs were
    assumed; ``outside``: broad non-lung categories that have no mask."""

    labels: tuple[str, ...]
    implied: bool
    outside: tuple[str, ...] = ()


def reported_locations(finding: Finding) -> ReportedLocations:
    """The anatomy labels of a finding's reported locations (module docstring)."""
    if finding.target_type == "cardiomegaly":
        return ReportedLocations(("heart",), implied=not finding.labels)
    lung = tuple(dict.fromkeys(label for label in finding.labels if label in LUNG_REGION_LABELS))
    if lung:
        return ReportedLocations(lung, implied=False)
    others = tuple(label for label in finding.labels if label not in LUNG_BROAD)
    if finding.labels and len(others) == len(finding.labels):
        return ReportedLocations((), implied=False, outside=others)
    if not finding.labels and finding.entity.strip().lower() in NON_LUNG_ENTITIES:
        return ReportedLocations((), implied=False, outside=(finding.entity,))
    return ReportedLocations(WHOLE_LUNGS, implied=True, outside=others)


def grounded_locations(
    reported: tuple[str, ...], anatomy: AnatomyMasks, kept_boxes: list[LesionBox], lesion_mask: np.ndarray
) -> list[str]:
    """Reported labels whose anatomy mask meets a kept box and the lesion mask.

    Parameters
    ----------
    reported : tuple of str
        Lung-region labels.
    anatomy : AnatomyMasks
    kept_boxes : list of LesionBox
        Boxes that passed Algorithm 1.
    lesion_mask : numpy.ndarray, bool, shape (H, W)

    Returns
    -------
    list of str
        In the order of ``reported``.
    """
    if not kept_boxes or not lesion_mask.any():
        return []
    boxes = np.zeros(anatomy.shape, dtype=bool)
    for box in kept_boxes:
        boxes |= box.to_mask(anatomy.shape)
    return [label for label in reported if (anatomy[label] & boxes).any() and (anatomy[label] & lesion_mask).any()]


def empty_locations(
    positive_findings: list[Finding],
    anatomy: AnatomyMasks,
    tol_px: int = 0,
    lesion_masks: Sequence[np.ndarray] = (),
) -> list[str]:
    """Lung regions no positive finding of the study may lie in (paper section 3.1,
    step 4: the regions no reported finding names).

    Parameters
    ----------
    positive_findings : list of Finding
        Every present finding of the study (any type, including types outside the seven).
    anatomy : AnatomyMasks
        Region masks, bool (H, W), patient sides.
    tol_px : int
        Overlap in pixels still counted as none (``grounding.empty_overlap_tol_px``).
    lesion_masks : sequence of ndarray of bool, shape (H, W)
        Lesion masks of the study (generated, or an expert's): a region overlapping
        their union by more than ``tol_px`` pixels is not empty either (ours:
        ``grounding.empty_excludes_lesion_masks``; a lesion can spread past the places
        its report names).

    Returns
    -------
    list of str
        Candidates of :data:`cxrils.vocab.EMPTY_LOCATION_CANDIDATES`, in that order.
    """
    occupied = np.zeros(anatomy.shape, dtype=bool)
    for finding in positive_findings:
        if finding.target_type in ORGAN_LESION_TYPES:  # the heart is not a lung region
            continue
        occupied |= anatomy.union(reported_locations(finding).labels)
    lesion = np.logical_or.reduce(list(lesion_masks)) if len(lesion_masks) else None
    return [
        c
        for c in EMPTY_LOCATION_CANDIDATES
        if np.count_nonzero(anatomy[c] & occupied) <= tol_px
        and (lesion is None or np.count_nonzero(anatomy[c] & lesion) <= tol_px)
    ]
