"""Answer text of the light model, composed from its structured predictions.

The network predicts presence, a mask, a lesion type and a certainty; this module
turns them into the Table 2 answer through :func:`cxrils.templates.render_answer`
only, so every answer follows the templates. The global positive answer names the
lung regions that the predicted mask lies in, measured against anatomy masks, a whole
lung for its zones from ``lung_answer_min_zones`` of them (:func:`answer_locations`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cxrils import templates, vocab
from cxrils.types import AnatomyMasks


def locations_from_mask(mask: np.ndarray, anatomy: AnatomyMasks, tau_location: float) -> list[str]:
    """Instruction locations that a lesion mask lies in.

    A lung zone of :data:`cxrils.vocab.LUNG_ZONES` is named when at least
    ``tau_location`` of the mask's pixels fall inside it; when the four zones of a
    lung are all named, the lung is named instead ("right lung"), as the instruction
    generation does. A mask that meets no zone above the threshold is named by the
    zone it overlaps most, else by the lung it overlaps most, else by the side of its
    centroid (patient right = image left on a frontal image).

    Parameters
    ----------
    mask : ndarray of bool, shape (H, W)
        Predicted lesion mask, non-empty. When (H, W) differs from the anatomy's
        shape (h, w), it is resized to (h, w) first, a pixel of the result being set
        when any part of it is covered (area interpolation > 0), so a small lesion
        never vanishes.
    anatomy : AnatomyMasks
        Masks of at least the eight lung zones (patient sides), at (h, w).
    tau_location : float
        Share in [0, 1] of the mask that must lie in a zone (ours).

    Returns
    -------
    list of str
        Canonical instruction locations (vocabulary order), at least one.

    Raises
    ------
    ValueError
        If the mask is empty or not 2-D.
    KeyError
        If a lung zone mask is missing.
    """
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (H, W), got shape {m.shape}")
    if not m.any():
        raise ValueError("an empty mask has no location")
    if m.shape != tuple(anatomy.shape):
        import cv2

        h, w = anatomy.shape
        m = cv2.resize(m.astype(np.float32), (w, h), interpolation=cv2.INTER_AREA) > 0
    area = int(m.sum())
    overlap = {z: int((m & anatomy[z]).sum()) for z in vocab.LUNG_ZONES}
    chosen = [z for z in vocab.LUNG_ZONES if overlap[z] >= tau_location * area and overlap[z] > 0]
    if not chosen:
        best = max(vocab.LUNG_ZONES, key=lambda z: overlap[z])
        if overlap[best] > 0:
            chosen = [best]
        else:
            side_overlap = {
                lung: int((m & anatomy[lung]).sum()) if lung in anatomy else 0 for lung in vocab.ZONES_OF_LUNG
            }
            lung = max(side_overlap, key=side_overlap.get)
            if side_overlap[lung] == 0:
                col = float(np.nonzero(m)[1].mean())
                lung = "right lung" if col < m.shape[1] / 2.0 else "left lung"
            return [lung]
    locs = set(chosen)
    for lung, zones in vocab.ZONES_OF_LUNG.items():
        if set(zones) <= locs:
            locs = (locs - set(zones)) | {lung}
    return sorted(locs, key=vocab.INSTRUCTION_LOCATIONS.index)


def answer_locations(locations: Sequence[str], lung_min_zones: int) -> list[str]:
    """The places a global answer names: ``locations`` (of :func:`locations_from_mask`)
    with a lung named instead of its zones when at least ``lung_min_zones`` of its four
    zones are among them (4: only a lung covered through, as
    :func:`locations_from_mask` already merges).

    Parameters
    ----------
    locations : sequence of str
        Canonical instruction locations (zones, lungs), patient sides.
    lung_min_zones : int
        1 to 4 (:attr:`cxrils.models.light.config.LightConfig.lung_answer_min_zones`).

    Returns
    -------
    list of str
        In vocabulary order; a merged lung's zones are left out.
    """
    locs = set(locations)
    for lung, zones in vocab.ZONES_OF_LUNG.items():
        if len(locs & set(zones)) >= lung_min_zones:
            locs = (locs - set(zones)) | {lung}
    return sorted(locs, key=vocab.INSTRUCTION_LOCATIONS.index)


def compose_answer(
    parsed: templates.ParsedText | None,
    present: bool,
    *,
    locations: Sequence[str] = (),
    lesion: str | None = None,
    certainty: str | None = None,
) -> str:
    """Render the answer of Table 2 for a structured prediction.

    Parameters
    ----------
    parsed : ParsedText or None
        The instruction's content (:func:`~cxrils.models.light.text.interpret_instruction`);
        None for free text naming no lesion, answered as a global "opacity" query.
    present : bool
        Whether the model found the requested lesion (non-empty mask).
    locations : sequence of str
        Where the predicted mask lies (global positives only).
    lesion, certainty : str or None
        Predicted lesion type and certainty (lesion-inference positives only).

    Returns
    -------
    str
        An answer that :func:`cxrils.templates.parse_answer` parses.
    """
    if parsed is None:
        parsed = templates.ParsedText("global", None, "opacity", ())
    itype, target = parsed.instruction_type, parsed.target
    polarity = "positive" if present else "negative"
    if itype == "basic":
        return templates.render_answer("basic", polarity, target=target, locations=parsed.locations)
    if itype == "global":
        if present and target in vocab.ORGAN_LOCATIONS:
            locations = [vocab.ORGAN_LOCATIONS[target]]
        return templates.render_answer("global", polarity, target=target, locations=locations)
    if present:
        return templates.render_answer("lesion_inference", "positive", lesion=lesion, certainty=certainty)
    return templates.render_answer("lesion_inference", "negative", locations=parsed.locations)
