"""Instruction-answer records from one grounded study (paper section 3.2, Appendix C).

:func:`generate_records` turns a :class:`~cxrils.types.StudyGrounding` into rows of
:data:`cxrils.dataset.schema.COLUMNS`. Every text comes from :mod:`cxrils.templates`;
lung-region labels become instruction locations through
:func:`cxrils.vocab.instruction_location`. The rules, and the decisions the paper
leaves open, are written out in ``docs/instructions.md``; in short:

* a finding's lesion type is ``GroundedFinding.lesion_type`` or else
  ``Finding.target_type`` (the predicted type wins over the entity's type);
* positives of one instruction target whose reported locations overlap are merged
  into one record (union of masks and of grounded locations); disjoint findings give
  one record each; a record is dropped when a lesion it should contain was reported
  inside the named locations but not grounded there;
* "opacity" is the superordinate concept of the paper's lesion inference: any
  positive lung lesion (every type but cardiomegaly, :data:`OPACITY_FAMILY`) makes
  opacity present in the study, so no record ever says "There is no opacity" where
  a reported lesion lies.

Sides are the patient's: "right lung" is on the image's left on a frontal image.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cxrils import __version__, templates, vocab
from cxrils.config import Config
from cxrils.masks import encode_rle
from cxrils.report.lexicon import lesion_types_in
from cxrils.types import GroundedFinding, StudyGrounding
from cxrils.vocab import SplitError, normalize_split

#: Lesion types seen as an opacity on the image: the hyperintense lung lesions of the
#: anomaly map ("opacities, consolidations, effusions, edema, and atelectasis, which
#: all appear brighter", section 3.1) and pneumonia, a "specific type of opacity"
#: (section 3.2). Every localized type; cardiomegaly (an organ state) is not one.
OPACITY_FAMILY: tuple[str, ...] = ("pneumonia", "atelectasis", "opacity", "consolidation", "edema", "effusion")

#: Findings outside the seven types (``cxrils.report.lexicon.OTHER_FINDINGS``) that are
#: opacities on a radiograph too (ours): a positive one makes "There is no opacity"
#: false, so no absent-type opacity negative; opacity's one negative then goes to an
#: empty location away from the finding's places. Every entry of OTHER_FINDINGS is
#: either here or, as a lucency, a bone, a mediastinal or a non-radiographic finding,
#: not (tests/instructions/test_generate.py lists those).
OPACITY_LIKE_ENTITIES: frozenset[str] = frozenset(
    {
        "nodule",
        "nodules",
        "nodular opacity",
        "nodular density",
        "nodular densities",
        "calcified density",
        "calcified densities",
        "calcific density",
        "calcific densities",
        "calcification",
        "calcifications",
        "mass",
        "masses",
        "lesion",
        "lesions",
        "granuloma",
        "granulomas",
        "calcified granuloma",
        "calcified granulomas",
        "granulomatous disease",
        "granulomatous infection",
        "scarring",
        "scar",
        "fibrosis",
        "fibrotic changes",
        "interstitial markings",
        "interstitial disease",
        "interstitial lung disease",
        "pleural thickening",
        "pleural shadowing",  # the British pleural thickening or plaque
        "cavity",
        "cavitation",
        "cavitary lesion",
        "metastases",
        "metastatic disease",
        "tuberculosis",
        "tuberculous infection",
        "tuberculosis infection",
        "tuberculous pneumonia",
        "tuberculosis pneumonia",
        "old infection",
        "prior infection",
        "chronic infection",
        "aspiration",
        "hemorrhage",
    }
)


class InstructionError(ValueError):
    """Raised when a grounding is inconsistent (mask shape, unknown values)."""


def _zones(labels: Iterable[str]) -> frozenset[str]:
    """Lung zones covered by lung-region labels; a lobe counts as its whole lung
    (the conservative reading: zones and lobes overlap on a frontal image)."""
    out: set[str] = set()
    for label in labels:
        if label not in vocab.LUNG_REGION_LABELS:
            continue
        loc = vocab.instruction_location(label)
        out.update(vocab.ZONES_OF_LUNG.get(loc, (loc,)))
    return frozenset(out)


def _locations(labels: Iterable[str]) -> list[str]:
    """Canonical instruction locations naming lung-region labels: lobes become their
    lung, and a zone is dropped when its whole lung is named too."""
    locs = {vocab.instruction_location(lb) for lb in labels if lb in vocab.LUNG_REGION_LABELS}
    for lung, zones in vocab.ZONES_OF_LUNG.items():
        if lung in locs:
            locs -= set(zones)
    return sorted(locs, key=vocab.INSTRUCTION_LOCATIONS.index)


@dataclass(eq=False)  # identity comparison (holds arrays)
class _Item:
    """One positive finding of the study, prepared for the rules."""

    index: int
    gf: GroundedFinding
    lesion_type: str
    target: str  # instruction target: the lesion type, or "opacity" when tentative
    reported_zones: frozenset[str]  # reported and grounded lung zones
    grounded_zones: frozenset[str]
    grounded_locations: list[str]
    mask: np.ndarray | None  # None when nothing was grounded

    @property
    def definitive(self) -> bool:
        """The finding is definitively of its lesion type (the inference's certainty
        when the type was inferred: ``Finding.type_certainty``)."""
        return self.gf.finding.type_certainty == "definitive"

    @property
    def localized(self) -> bool:
        return bool(self.reported_zones)

    @property
    def ungrounded_zones(self) -> frozenset[str]:
        return self.reported_zones - self.grounded_zones if self.mask is not None else self.reported_zones

    @property
    def fully_grounded(self) -> bool:
        """The paper's global rule: grounded == reported locations (and not empty)."""
        return self.mask is not None and bool(self.gf.reported) and set(self.gf.grounded) == set(self.gf.reported)


def _entity_type(it: _Item) -> str | None:
    """The lesion type the finding's entity names ("consolidation" in "consolidation
    concerning for pneumonia"), whatever type it was grounded as."""
    return it.gf.finding.lesion_type


def lesion_type_of(gf: GroundedFinding) -> str | None:
    """The lesion type a grounded finding stands for.

    ``gf.lesion_type`` (what the grounding stage grounded) when set, else
    ``gf.finding.target_type`` (the predicted lesion type, else the entity's type;
    "opacity likely reflecting pneumonia" is pneumonia). None, or a name outside
    :data:`cxrils.vocab.LESION_TYPES`, means the finding makes no record.
    """
    t = gf.lesion_type or gf.finding.target_type
    return t if t in vocab.LESION_TYPES else None


def mentioned_types(gf: GroundedFinding) -> set[str]:
    """Every lesion type a finding names: its entity type, predicted type and grounded
    type ("opacity reflecting pneumonia" mentions both opacity and pneumonia), and every
    type its predicted lesion in the report's words names (``predicted_lesion_text``):
    "opacity may represent atelectasis or pneumonia" predicts atelectasis and mentions
    pneumonia too, so pneumonia is neither absent from the report nor asked as a
    negative."""
    f = gf.finding
    named = {t for t in (f.lesion_type, f.predicted_lesion_type, gf.lesion_type) if t in vocab.LESION_TYPES}
    return named | lesion_types_in(f.predicted_lesion_text or "")


def record_seed(base_seed: int, image_id: str) -> int:
    """Seed of one image's random choices: SHA-256 of ``"{base_seed}:{image_id}"``
    (stable across processes and Python versions, unlike ``hash()``)."""
    digest = hashlib.sha256(f"{base_seed}:{image_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _components(items: Sequence[_Item]) -> list[list[_Item]]:
    """Groups of items linked by overlapping reported zones (union-find), in input order."""
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if items[i].reported_zones & items[j].reported_zones:
                parent[find(j)] = find(i)
    groups: dict[int, list[_Item]] = {}
    for i, it in enumerate(items):
        groups.setdefault(find(i), []).append(it)
    return list(groups.values())


def _merge(component: Sequence[_Item]) -> tuple[list[str], np.ndarray] | None:
    """Named locations and union mask of a component, or None when the record would
    be incomplete: nothing grounded, or a member reported (but not grounded) inside
    the named locations."""
    grounded = [it for it in component if it.mask is not None and it.grounded_locations]
    if not grounded:
        return None
    named_zones = frozenset().union(*(it.grounded_zones for it in grounded))
    if any(it.ungrounded_zones & named_zones for it in component):
        return None
    mask = np.logical_or.reduce([it.mask for it in grounded])
    return _locations(lb for it in grounded for lb in it.gf.grounded), mask


class _Builder:
    """Accumulates the records of one study."""

    def __init__(self, g: StudyGrounding, split: str, patient_id: str, image_path: str, provenance: str):
        self.g, self.split, self.patient_id, self.image_path = g, split, patient_id, image_path
        self.provenance = provenance
        self.records: list[dict] = []
        self.empty_rle = encode_rle(np.zeros(g.shape, dtype=bool))

    def add(
        self,
        *,
        lesion_type: str,
        target: str,
        instruction_type: str,
        polarity: str,
        instruction: str,
        answer: str,
        locations: Sequence[str],
        certainty: str,
        mask: np.ndarray | None,
        sources: Sequence[GroundedFinding],
    ) -> None:
        if any(r["instruction"] == instruction for r in self.records):
            return  # one query per study: the same text never gets two answers
        rle = encode_rle(mask) if mask is not None else self.empty_rle
        primary = sources[0].finding if sources else None
        self.records.append(
            {
                "record_id": f"{self.g.image_id}:{len(self.records)}",
                "study_id": self.g.study_id,
                "image_id": self.g.image_id,
                "patient_id": self.patient_id,
                "image_path": self.image_path,
                "split": self.split,
                "lesion_type": lesion_type,
                "target": target,
                "instruction_type": instruction_type,
                "polarity": polarity,
                "locations": list(locations),
                "certainty": certainty,
                "instruction": instruction,
                "answer": answer,
                "mask": rle,
                "mask_area": int(mask.sum()) if mask is not None else 0,
                "height": int(self.g.shape[0]),
                "width": int(self.g.shape[1]),
                "finding_entity": primary.entity if primary else "",
                "sentence_index": int(primary.sentence_index) if primary else 0,
                "sentence": primary.sentence if primary else "",
                "source_findings": json.dumps(
                    [
                        {
                            "entity": s.finding.entity,
                            "sentence_index": s.finding.sentence_index,
                            "sentence": s.finding.sentence,
                        }
                        for s in sources
                    ],
                    sort_keys=True,
                ),
                "paraphrase_of": "",
                "persona": "",
                "provenance": self.provenance,
            }
        )


def _prepare(g: StudyGrounding) -> list[_Item]:
    items = []
    for i, gf in enumerate(g.findings):
        t = lesion_type_of(gf)
        if gf.finding.presence != "positive" or t is None:
            continue
        for c in (gf.finding.certainty, gf.finding.inference_certainty or gf.finding.certainty):
            if c not in vocab.CERTAINTIES:
                raise InstructionError(
                    f"image {g.image_id}: finding {gf.finding.entity!r} has certainty "
                    f"{c!r}; expected one of {vocab.CERTAINTIES}"
                )
        mask = gf.mask
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != tuple(g.shape):
                raise InstructionError(
                    f"image {g.image_id}: mask of finding {gf.finding.entity!r} has "
                    f"shape {mask.shape}, grounding shape is {tuple(g.shape)}"
                )
            mask = mask.astype(bool)
            if not mask.any():
                mask = None
        grounded = list(gf.grounded) if mask is not None else []
        if t not in vocab.ORGAN_LESION_TYPES and not _locations(grounded):
            mask = None
        # A tentative type is named "opacity" (section 3.2); the record keeps the observation's certainty.
        target = "opacity" if (gf.finding.type_certainty == "tentative" and t not in vocab.ORGAN_LESION_TYPES) else t
        items.append(
            _Item(
                index=i,
                gf=gf,
                lesion_type=t,
                target=target,
                reported_zones=_zones(list(gf.reported) + grounded),
                grounded_zones=_zones(grounded),
                grounded_locations=_locations(grounded),
                mask=mask,
            )
        )
    return items


def _positives(b: _Builder, items: list[_Item]) -> None:
    lung = [it for it in items if it.lesion_type not in vocab.ORGAN_LESION_TYPES]
    opacity_pool = [it for it in lung if it.lesion_type in OPACITY_FAMILY]
    targets = list(dict.fromkeys(it.target for it in items))
    for target in targets:
        if target == "cardiomegaly":
            _cardiomegaly_positive(b, [it for it in items if it.target == "cardiomegaly"])
            continue
        # a finding of the target type whose lesion type is inferred ("consolidation
        # concerning for pneumonia") is one of the target's instances too: its mask
        # belongs to the target's masks (the paper's global rule: the mask covers every
        # instance the radiologist described)
        owners = [it for it in lung if it.target == target or _entity_type(it) == target]
        pool = opacity_pool if target == "opacity" else owners
        # Basic: "Segment the [Target] in the [Location]." -> "[SEG]"
        for comp in _components(pool):
            own = [it for it in comp if it.target == target and it.mask is not None]
            merged = _merge(comp)
            if not own or merged is None:
                continue
            locs, mask = merged
            src = own + [it for it in comp if it not in own]  # the record's own finding first
            b.add(
                lesion_type=own[0].lesion_type,
                target=target,
                instruction_type="basic",
                polarity="positive",
                instruction=templates.render_instruction("basic", target, locs),
                answer=templates.render_answer("basic", "positive"),
                locations=locs,
                certainty=own[0].gf.finding.certainty,
                mask=mask,
                sources=[it.gf for it in src],
            )
        # Global: only when every instance of the target is grounded where reported.
        members = pool if target == "opacity" else [it for it in lung if target in (it.lesion_type, _entity_type(it))]
        if (
            members
            and all(it.fully_grounded for it in members)
            and (target == "opacity" or all(it.definitive for it in members))
        ):
            locs = _locations(lb for it in members for lb in it.gf.grounded)
            mask = np.logical_or.reduce([it.mask for it in members])
            src = [it for it in members if it.target == target] + [it for it in members if it.target != target]
            b.add(
                lesion_type=src[0].lesion_type,
                target=target,
                instruction_type="global",
                polarity="positive",
                instruction=templates.render_instruction("global", target),
                answer=templates.render_answer("global", "positive", locations=locs),
                locations=locs,
                certainty=src[0].gf.finding.certainty,
                mask=mask,
                sources=[it.gf for it in src],
            )
    # Lesion inference: "Segment the opacity in [Location] and predict its type."
    for comp in _components(opacity_pool):
        types = {it.lesion_type for it in comp}
        if len(types) != 1 or not types <= set(vocab.INFERENCE_LESION_TYPES):
            continue  # "its type" must be one of pneumonia/atelectasis/edema, unambiguous
        merged = _merge(comp)
        if merged is None:
            continue
        locs, mask = merged
        lesion = types.pop()
        certainty = "definitive" if any(it.definitive for it in comp if it.mask is not None) else "tentative"
        b.add(
            lesion_type=lesion,
            target="opacity",
            instruction_type="lesion_inference",
            polarity="positive",
            instruction=templates.render_instruction("lesion_inference", None, locs),
            answer=templates.render_answer("lesion_inference", "positive", lesion=lesion, certainty=certainty),
            locations=locs,
            certainty=certainty,
            mask=mask,
            sources=[it.gf for it in comp],
        )


def _cardiomegaly_positive(b: _Builder, items: list[_Item]) -> None:
    """Global only, heart mask (section 3.2, Appendix C.1), the mask grounding gave the
    finding; a report that only suspects cardiomegaly makes no positive (a global
    instruction would claim it), and neither does a finding grounding dropped (an empty
    heart, or a CTR at or below ``qc.ctr_min_cardiomegaly_positive``): its quality
    control said no."""
    definitive = [it for it in items if it.definitive]
    mask = next((it.mask for it in definitive if it.mask is not None), None)
    if mask is None or not mask.any():
        return
    locs = [vocab.ORGAN_LOCATIONS["cardiomegaly"]]
    b.add(
        lesion_type="cardiomegaly",
        target="cardiomegaly",
        instruction_type="global",
        polarity="positive",
        instruction=templates.render_instruction("global", "cardiomegaly"),
        answer=templates.render_answer("global", "positive", locations=locs),
        locations=locs,
        certainty="definitive",
        mask=mask,
        sources=[it.gf for it in definitive],
    )


def _negatives(
    b: _Builder,
    items: list[_Item],
    g: StudyGrounding,
    cfg: Config,
    rng: np.random.Generator,
    li_rng: np.random.Generator,
    absent: bool = True,
    absent_forms: Sequence[tuple[str, str | None]] | None = None,
) -> None:
    positive_findings = [gf for gf in g.findings if gf.finding.presence == "positive"]
    present = set().union(*(mentioned_types(gf) for gf in positive_findings)) if positive_findings else set()
    opacity_pool = [it for it in items if it.lesion_type in OPACITY_FAMILY]
    if opacity_pool or any(gf.finding.entity.strip().lower() in OPACITY_LIKE_ENTITIES for gf in positive_findings):
        present.add("opacity")
    # Empty locations usable in an instruction: study-level empty (section 3.1), named
    # by a zone or a whole lung (an empty lobe does not make its lung empty), and not
    # touching any positive finding's reported or grounded lung region.
    # a finding the report asks about ("evaluate for left lower lobe pneumonia") occupies
    # its place too: it is neither stated nor denied there
    asked = [gf for gf in g.findings if gf.finding.asked]
    occupied = _zones(lb for gf in positive_findings for lb in list(gf.reported) + list(gf.grounded)) | _zones(
        lb for gf in asked for lb in gf.finding.labels
    )
    empty = [
        loc for loc in vocab.INSTRUCTION_LOCATIONS if loc in set(g.empty_locations) and not (_zones([loc]) & occupied)
    ]
    ic = cfg.instructions
    for t in vocab.LESION_TYPES:
        negated = [gf for gf in g.findings if gf.finding.presence == "negative" and t in mentioned_types(gf)]
        if t not in present:
            if not absent or (negated and all(gf.finding.certainty == "tentative" for gf in negated)):
                continue  # asked, not denied ("rule out pneumonia"): neither absent nor negated
            if t == "cardiomegaly":  # Appendix D.3: only with a CTR known and <= 0.45 (and plausible)
                if g.ctr is not None and cfg.qc.ctr_plausible_min <= g.ctr <= cfg.qc.ctr_max_cardiomegaly_negative:
                    _negative(b, t, "global", (), negated)
                continue
            forms = (
                [(form, (loc,) if loc else ()) for form, loc in absent_forms]
                if absent_forms is not None
                else _absent_choices(rng, ic.max_absent_negatives_per_type, ic.absent_negative_global_prob)
            )
            for form, locs in forms:
                if absent_forms is None:
                    form = _opacity_form(t, form, locs, li_rng, ic.lesion_inference_negative_prob)
                _negative(b, t, form, locs, negated)
            continue
        if t in vocab.ORGAN_LESION_TYPES:
            continue
        # every positive finding that mentions the type, whatever type it was grounded as:
        # "consolidation concerning for pneumonia" with no place blocks consolidation's
        # location negatives as pneumonia's
        same = opacity_pool if t == "opacity" else [it for it in items if t in mentioned_types(it.gf)]
        if not empty or not all(it.localized for it in same):
            continue  # an unlocalized positive could lie anywhere: no location negative
        if t == "opacity" and any(
            gf.finding.entity.strip().lower() in OPACITY_LIKE_ENTITIES
            and not _zones(list(gf.reported) + list(gf.grounded))
            for gf in positive_findings
        ):
            # nor an opacity on the film outside the seven types whose place names no lung
            # zone ("right hilar mass": the hilum maps to the mediastinum), which a review
            # found beside "There is no opacity in the right lung."
            continue
        k = min(ic.max_empty_location_negatives_per_type, len(empty))
        picks = sorted(rng.choice(len(empty), size=k, replace=False).tolist()) if k > 0 else []
        for p in picks:
            form = _opacity_form(t, "basic", (empty[p],), li_rng, ic.lesion_inference_negative_prob)
            _negative(b, t, form, (empty[p],), [it.gf for it in same])


def _opacity_form(t: str, form: str, places: Sequence[str], rng: np.random.Generator, p: float) -> str:
    """The form of one negative: an opacity negative at one place (a zone or one lung)
    is asked as lesion inference ("Segment the opacity in the left lung base and predict
    its type.") with probability ``p``
    (``InstructionConfig.lesion_inference_negative_prob``: the authors' released test
    sheet asks about half of them so, never both forms in one study), else as it came;
    every other negative keeps ``form``. Draws from ``rng`` (the image's stream of this
    choice, apart from the one that picks places) only for an opacity negative at one
    place."""
    if t != "opacity" or form != "basic" or len(places) != 1:
        return form
    return "lesion_inference" if rng.random() < p else form


def _absent_choices(rng: np.random.Generator, n: int, p_global: float) -> list[tuple[str, tuple[str, ...]]]:
    """Up to ``n`` distinct negatives for an absent type: global with probability
    ``p_global``, else basic at a place drawn uniformly from both lungs together
    (:data:`cxrils.vocab.WHOLE_LUNGS`: "Segment the effusion in the right lung and left
    lung.") and the ten instruction locations (Appendix C.2; the released
    sheet's places, ``InstructionConfig.absent_negative_global_prob``): ``(form, query
    locations)`` pairs, ``()`` for the global one."""
    cands: list[tuple[str, tuple[str, ...]]] = [("global", ()), ("basic", vocab.WHOLE_LUNGS)] + [
        ("basic", (loc,)) for loc in vocab.INSTRUCTION_LOCATIONS
    ]
    w = np.array([p_global] + [(1.0 - p_global) / (len(cands) - 1)] * (len(cands) - 1))
    nonzero = np.flatnonzero(w > 0)
    k = min(n, nonzero.size)
    if k <= 0:
        return []
    picks = rng.choice(nonzero, size=k, replace=False, p=w[nonzero] / w[nonzero].sum())
    return [cands[i] for i in sorted(picks.tolist())]


def _negative(b: _Builder, t: str, form: str, places: Sequence[str], sources: Sequence[GroundedFinding]) -> None:
    locs = list(places)
    if form == "lesion_inference":
        instruction = templates.render_instruction("lesion_inference", None, locs)
        answer = templates.render_answer("lesion_inference", "negative", locations=locs)
        target = "opacity"
    else:
        instruction = templates.render_instruction(form, t, locs)
        answer = templates.render_answer(form, "negative", target=t, locations=locs)
        target = t
    b.add(
        lesion_type=t,
        target=target,
        instruction_type=form,
        polarity="negative",
        instruction=instruction,
        answer=answer,
        locations=locs,
        certainty="",
        mask=None,
        sources=list(sources),
    )


def generate_records(
    grounding: StudyGrounding,
    *,
    split: str,
    patient_id: str,
    image_path: str,
    cfg: Config,
    absent_negatives: bool = True,
    absent_forms: Sequence[tuple[str, str | None]] | None = None,
) -> list[dict]:
    """Instruction-answer records of one image (paper section 3.2, Table 2, Appendix C).

    Parameters
    ----------
    grounding : StudyGrounding
        Grounded findings of the image: masks bool (H, W) at ``grounding.shape``;
        reported / grounded / empty locations as lung-region labels (patient sides:
        "right lung" is on the image's left on a frontal image); CTR or None.
    split : str
        "train", "validate" or "test" (see :func:`cxrils.dataset.assign_split`);
        aliases such as "val" are normalised.
    patient_id : str
        Patient id or "".
    image_path : str
        Path of the 8-bit image relative to the dataset folder (``images/{image_id}.png``).
    cfg : Config
        ``cfg.instructions`` (seed, negatives per type, global share) and
        ``cfg.qc.ctr_max_cardiomegaly_negative`` (0.45, Appendix D.3): a cardiomegaly
        negative needs ``ctr_plausible_min <= CTR <= 0.45`` (a lower CTR is a failed
        heart mask, ours).
    absent_negatives : bool
        Emit the negatives of types absent from the report. At most one per type per
        *study* (Appendix C.2): of a study with several images, one only keeps them
        (the pipeline: its first image in input order that is not excluded, for which
        it may make a later image's records both ways,
        :class:`cxrils.pipeline.study.StudyResult`).
    absent_forms : sequence of (form, location or None), optional
        Ask every absent type (cardiomegaly aside, which follows the CTR rule) exactly
        these negatives instead of :func:`_absent_choices`' random draws: ``("global",
        None)`` or ``("basic", loc)`` with ``loc`` in
        :data:`cxrils.vocab.INSTRUCTION_LOCATIONS`. Not used by the pipeline; the light
        model's training data asks its radiologist-labelled normal images the global and
        whole-lung questions this way.

    Returns
    -------
    list of dict
        One dict per record with the columns of :data:`cxrils.dataset.schema.COLUMNS`;
        ``mask`` is a COCO RLE dict (empty for negatives). ``record_id`` is
        ``f"{image_id}:{index}"``. Empty when the grounding is excluded. The same
        grounding, split and ``cfg.instructions.seed`` give the same records.

    Raises
    ------
    InstructionError
        If a mask does not have the grounding's shape, a certainty is unknown, or
        the split name is unknown.
    """
    if grounding.excluded is not None:
        return []
    try:
        split = normalize_split(split)
    except SplitError as err:
        raise InstructionError(f"image {grounding.image_id}: {err}") from err
    provenance = json.dumps(
        {
            "code_version": __version__,
            "grounding": grounding.provenance,
            "config_sha256": hashlib.sha256(cfg.to_json().encode("utf-8")).hexdigest(),
            "instructions": dataclasses.asdict(cfg.instructions),
            "ctr_max_cardiomegaly_negative": cfg.qc.ctr_max_cardiomegaly_negative,
        },
        sort_keys=True,
        default=str,
    )
    b = _Builder(grounding, split, patient_id, image_path, provenance)
    items = _prepare(grounding)
    rng = np.random.default_rng(record_seed(cfg.instructions.seed, grounding.image_id))
    # the lesion-inference form is drawn from a stream of its own, so that its draws move
    # none of the other negatives (with the probability 0 the records are those of before)
    li_rng = np.random.default_rng(record_seed(cfg.instructions.seed, f"lesion-inference:{grounding.image_id}"))
    _positives(b, items)
    if absent_forms is not None:
        for form, loc in absent_forms:
            if form not in ("global", "basic") or (form == "basic") != (loc in vocab.INSTRUCTION_LOCATIONS):
                raise InstructionError(
                    f"image {grounding.image_id}: absent negative {(form, loc)!r} is not "
                    "('global', None) or ('basic', an instruction location)"
                )
    _negatives(b, items, grounding, cfg, rng, li_rng, absent_negatives, absent_forms)
    return b.records
