"""Reports and groundings written from HUMAN lesion labels instead of Algorithm 1.

Used to score the pipeline against expert masks (``benchmarks/human_masks.py``: the
report of an image is written from its label) and to build training records directly
from human-masked images (the light model's extra data, :mod:`cxrils.training.light_data`).
Sides are the patient's: on a frontal image the patient's right lung is on the
image's left.
"""

from __future__ import annotations

import numpy as np

from cxrils.config import Config, LightDataConfig
from cxrils.grounding.locations import empty_locations, reported_locations
from cxrils.types import AnatomyMasks, GroundedFinding, StructuredReport, StudyGrounding
from cxrils.vocab import LUNG_ZONES, WHOLE_LUNGS

#: The two lungs, patient sides.
LUNGS: tuple[str, ...] = WHOLE_LUNGS
#: Report of an image whose label says it is normal.
NORMAL_REPORT = "No acute cardiopulmonary process. The lungs are clear."


def report_from_label(lesion_type: str, sides: tuple[str, ...]) -> str:
    """A one-sentence report of a human label, read by the rule-based structurer.

    Parameters
    ----------
    lesion_type : str
        One of :data:`cxrils.vocab.LESION_TYPES`.
    sides : tuple of str
        Subset of :data:`LUNGS` (patient sides), or one lung region label (e.g. a zone,
        :func:`report_from_zones`); ignored for cardiomegaly.

    Examples
    --------
    >>> report_from_label("opacity", ("right lung", "left lung"))
    'There are opacities in both lungs.'
    >>> report_from_label("atelectasis", ("left lung",))
    'There is atelectasis in the left lung.'
    """
    if lesion_type == "cardiomegaly":
        return "The heart is enlarged. There is cardiomegaly."
    where = "both lungs" if len(sides) == 2 else f"the {sides[0]}" if sides else "the lungs"
    if lesion_type == "opacity":
        return f"There are opacities in {where}." if len(sides) == 2 else f"There is an opacity in {where}."
    return f"There is {lesion_type} in {where}."


def _check_shape(lesion: np.ndarray, anatomy: AnatomyMasks) -> None:
    """Raise ValueError when the lesion mask and the anatomy differ in shape."""
    if tuple(lesion.shape) != tuple(anatomy.shape):
        raise ValueError(f"lesion mask shape {lesion.shape} differs from anatomy shape {tuple(anatomy.shape)}")


def _holding(lesion: np.ndarray, regions: dict[str, np.ndarray], min_share: float) -> tuple[str, ...]:
    """Names of ``regions`` (bool (H, W) each, in order) holding at least
    ``min_share`` of the lesion's pixels."""
    total = max(1, int(lesion.sum()))
    return tuple(name for name, m in regions.items() if int((lesion & m).sum()) >= min_share * total)


def sides_of_mask(
    lesion: np.ndarray, right: np.ndarray, left: np.ndarray, min_share: float = LightDataConfig.side_min_share
) -> tuple[str, ...]:
    """Patient sides (of :data:`LUNGS`) holding at least ``min_share`` (default
    ``cxrils.config.LightDataConfig.side_min_share``) of the lesion's pixels, from bool
    (H, W) masks of the lesion and of each lung."""
    return _holding(lesion, dict(zip(LUNGS, (right, left))), min_share)


def zones_of_mask(
    lesion: np.ndarray, anatomy: AnatomyMasks, min_share: float = LightDataConfig.side_min_share
) -> tuple[str, ...]:
    """Lung zones (of :data:`cxrils.vocab.LUNG_ZONES`, CXAS names, patient sides) holding
    at least ``min_share`` of the lesion's pixels.

    Parameters
    ----------
    lesion : numpy.ndarray, bool, shape (H, W)
    anatomy : AnatomyMasks
        Holding every zone of :data:`cxrils.vocab.LUNG_ZONES`, bool (H, W).
    min_share : float
        Default ``cxrils.config.LightDataConfig.side_min_share``.

    Raises
    ------
    ValueError
        If ``lesion`` and ``anatomy`` differ in shape.
    """
    _check_shape(lesion, anatomy)
    return _holding(lesion, {z: anatomy[z] for z in LUNG_ZONES}, min_share)


def report_from_zones(lesion_type: str, zones: tuple[str, ...]) -> str:
    """A report naming each zone in a sentence of its own (:func:`report_from_label` of
    that zone), so that each is one finding (its record's answer mask is then the lesion
    inside that zone).

    Parameters
    ----------
    lesion_type : str
        One of :data:`cxrils.vocab.LESION_TYPES` but cardiomegaly.
    zones : tuple of str
        Labels of :data:`cxrils.vocab.LUNG_ZONES` (patient sides).

    Examples
    --------
    >>> report_from_zones("opacity", ("right lung base", "left mid zone lung"))
    'There is an opacity in the right lung base. There is an opacity in the left mid zone lung.'
    """
    return " ".join(report_from_label(lesion_type, (z,)) for z in zones)


def sides_of_box(
    box: tuple[float, float, float, float], width: int, min_share: float = LightDataConfig.side_min_share
) -> tuple[str, ...]:
    """Patient sides of a box ``(x0, y0, x1, y1)`` holding at least ``min_share`` of its
    columns: its share of columns left of the image's middle column is on the patient's
    right."""
    x0, _, x1, _ = box
    span = max(1e-6, x1 - x0)
    right = max(0.0, min(x1, width / 2) - x0) / span
    return tuple(s for s, share in zip(LUNGS, (right, 1 - right)) if share >= min_share)


def human_grounding(
    *, study_id: str, image_id: str, report: StructuredReport, anatomy: AnatomyMasks, lesion: np.ndarray, cfg: Config
) -> StudyGrounding:
    """A :class:`~cxrils.types.StudyGrounding` whose lesion masks are a human mask.

    Every positive finding of the report's lesion types (but cardiomegaly, whose mask is
    the heart, section 3.2) gets as its mask the part of ``lesion`` inside the reported
    lung regions the mask reaches (its grounded locations; as Algorithm 1 cuts its mask
    by the reported locations); the heart mask and the CTR come from ``anatomy`` exactly
    as :func:`cxrils.grounding.ground_study` computes them, and so do the empty locations,
    less every one that ``lesion`` overlaps by more than ``empty_overlap_tol_px`` pixels
    (the tolerance of the empty locations themselves): a report written from the label names only
    the regions holding ``LightDataConfig.side_min_share`` of the mask, and a region holding less of
    it is not empty (an empty location is a negative instruction, section 3.1 step 4).

    Parameters
    ----------
    report : StructuredReport
    anatomy : AnatomyMasks
        Every label of :data:`cxrils.vocab.ANATOMY_LABELS`, bool (H, W).
    lesion : numpy.ndarray, bool, shape (H, W)
        The human lesion mask (all False for a normal image).
    cfg : Config

    Raises
    ------
    ValueError
        If ``lesion`` and ``anatomy`` differ in shape.
    """
    from cxrils.vision.anatomy import cardiothoracic_ratio

    _check_shape(lesion, anatomy)
    positives = [f for f in report.findings if f.presence == "positive"]
    empty = empty_locations(positives, anatomy, cfg.grounding.empty_overlap_tol_px, [lesion])
    heart = anatomy["heart"]
    ctr = cardiothoracic_ratio(anatomy) if heart.any() and anatomy.union(LUNGS).any() else None
    findings = []
    for f in report.findings:
        reported = list(reported_locations(f).labels)
        gf = GroundedFinding(finding=f, lesion_type=f.target_type, reported=reported, grounded=[], empty=list(empty))
        if f.presence != "positive" or f.target_type is None:
            gf.drop_reason = "not a positive finding of the seven types"
        elif f.target_type == "cardiomegaly":
            gf.mask, gf.grounded = heart.copy(), ["heart"]
        else:
            gf.grounded = [lb for lb in reported if (anatomy[lb] & lesion).any()]
            if gf.grounded:
                gf.mask = lesion & anatomy.union(gf.grounded)
            else:
                gf.drop_reason = "the human mask reaches no reported location"
        findings.append(gf)
    return StudyGrounding(
        study_id=study_id,
        image_id=image_id,
        shape=tuple(lesion.shape),
        findings=findings,
        empty_locations=empty,
        ctr=ctr,
        heart_mask=heart,
        provenance={"anatomy": f"{anatomy.backend} {anatomy.version}".strip(), "lesion_masks": "human"},
    )
