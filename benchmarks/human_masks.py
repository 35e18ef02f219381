"""Benchmark: the pipeline's lesion masks and the light model against HUMAN lesion labels.

For every image of the shared sources below, a short report is written from the human
label (lesion type, and the patient's side read from the expert mask or box: the
patient's right is the image's left), the generation pipeline's own steps run on it
(``cxrils.pipeline.Pipeline``: ``start``, ``image_steps``, ``ground``, then
``generate_records``, as ``cxrils ground`` / ``cxrils generate`` do), and the light
model is asked the matching basic instruction. Printed per source and lesion type:

* pipeline: recall (share of reported lesions that get a mask), IoU / Dice / pixel
  precision of the generated masks against the human mask, the whole-named-lung
  baseline (IoU of the union of the reported lungs of the pipeline's own anatomy, its
  visible lungs where it gives both conventions; on all reported lesions and on the
  images that got a mask), positive records on normal
  images with a normal report, masks on normal images given a (false) lesion report,
  and the left/right balance of positive records next to that of the reports;
* boxes (NIH, TBX11K): a mask is not compared to a rectangle by IoU. Precision = share
  of the mask inside the expert box; coverage = share of the box covered by the mask;
* severity scores (93 COVID-19 images, 3 experts' geographic extent 0-8 and opacity
  0-6, no mask): recall and the Spearman correlation of the mask's share of the lungs
  with the scores;
* the light model (basic instruction, e.g. "Segment the opacity in the right lung."):
  presence recall, IoU over all reported lesions (an empty answer scores 0) and over
  answered ones, N-Acc on normal images per type, and "Segment the cardiomegaly." on
  the held-back cardiomegaly images;
* the light model on normal images: N-Acc of the opacity questions (each lung, both
  lungs, global), the cardiomegaly question, the eight zones, and the global question of
  every other lung type;
* the anomaly map ``x_ano`` (pipeline anatomy, inside the HUMAN lung masks of
  COVID-QU-Ex): mean on normal images (whole lungs, the medial fifth of each lung's
  width, where heart border, mediastinum and hila lie, and the rest), mean on lesion and
  on non-lesion lung pixels of COVID-19 images, and the pixel-level AUROC of x_ano
  (lesion pixels against non-lesion lung pixels of both classes) on each half of the
  tuning part (the images the detector and the anomaly network may train on) and on the
  report part;
* near-duplicates between COVID-QU-Ex and the other sources (``cxrils.training.lesion_data``).

Confidence intervals: 95 % Wilson intervals for proportions, 95 % percentile bootstrap
(1,000 resamples of images, seed 0) for mean IoU.

Sources (``../shared/data``): ``covid_qu_ex`` report part (held back by
``cxrils.training.lesion_data.part_of``: 360 COVID-19 images with expert-verified infection
masks = opacity, 172 normals); ``nih_bbox`` (12 expert boxes: cardiomegaly, pneumonia,
atelectasis, infiltrate = opacity; nodules and the mass are not among the seven lesion
types and are skipped); ``nih_labels`` (the 4 of those NIH images whose text-mined
ChestX-ray14 labels hold an effusion: image-level truth, "found" = any mask);
``covid_ieee8023`` severity scores (93); ``xrv_tests`` (NIH
cardiomegaly label, two normals, two TBX11K tuberculosis boxes = opacity); ``jsrt_scr``
(93 non-nodule images as normals; the anatomy model trained on JSRT, so they are not
unseen by it; the nodules are not among the seven types). The JSRT non-nodule label says
nothing about the heart: an image whose radiologists' SCR masks give a CTR above 0.5
(the radiographic definition of cardiomegaly, the light model's training rule) is not
asked the cardiomegaly question as a negative. 79 of the 93 severity-scored images are
in the anatomy model's train split (their v7labs lung masks trained it), so the
pipeline's lungs on them are not unseen either.

Run (2 shared CPU cores, a few minutes per 500 images)::

    PYTHONPATH=src nice -n 10 python -m benchmarks.human_masks [--data ../shared/data]
        [--limit N] [--sources covid_qu_ex,nih_bbox,...] [--model DIR | --no-light]
        [--tuning-auroc-limit N] [--set SECTION.KEY=VALUE ...] [--publish NAME]

``--limit N`` keeps the first N cases of each source (a fixed subset, for development);
the published run uses every case. ``--set`` runs the pipeline with configuration
overrides (as ``cxrils generate --set``), e.g. ``--set grounding.c1_bilateral=union``, the
paper's c1 (published as ``human_masks_c1_union``, not over the default run's ``human_masks``).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.results import apply_threads, benchmark_parser, publish_if_asked
from cxrils import vocab
from cxrils.config import CTR_MIN_CARDIOMEGALY
from cxrils.evaluation import histogram_auroc, mask_dice, mask_iou, mask_precision
from cxrils.training.human_grounding import LUNGS as SIDES
from cxrils.training.human_grounding import NORMAL_REPORT, report_from_label, sides_of_box, sides_of_mask

SOURCES = ("covid_qu_ex", "nih_bbox", "nih_labels", "covid_severity", "xrv_tests", "jsrt_normals")
#: The medial share of each lung's width scored separately on normal images (ours):
#: heart border, mediastinum and hila border the lungs there.
MEDIAL_FRACTION = 0.20
FALSE_REPORT = "There are opacities in both lungs."
#: The lung lesion types but opacity, asked globally of normal images (``other_type_lines``).
OTHER_LUNG_TYPES: tuple[str, ...] = tuple(
    t for t in vocab.LESION_TYPES if t not in vocab.ORGAN_LESION_TYPES and t != "opacity"
)
#: The basic opacity questions asked of a normal image: the locations of the positives'
#: basic questions (one whole lung, or both for a bilateral lesion). Until issue 28's
#: both-lungs negatives the N-Acc left the both-lungs question out, which the shipped
#: model then answered on its text alone (it had been asked only of positives).
NORMAL_LUNG_QUESTIONS: tuple[tuple[str, ...], ...] = (("right lung",), ("left lung",), ("right lung", "left lung"))
NIH_TYPES = {
    "Cardiomegaly": "cardiomegaly",
    "Pneumonia": "pneumonia",
    "Atelectasis": "atelectasis",
    "Infiltrate": "opacity",
}


@dataclass
class Case:
    """One image and its human label. ``kind``: positive | normal; ``sides``: patient
    sides named in the report; ``mask`` bool (H, W) or None; ``box`` (x0, y0, x1, y1)."""

    source: str
    image_id: str
    path: Path
    kind: str
    lesion_type: str = ""
    sides: tuple[str, ...] = ()
    mask_path: Path | None = None
    lung_path: Path | None = None
    box: tuple[float, float, float, float] | None = None
    severity: tuple[float, float] | None = None
    report: str = ""
    reference_ctr: float | None = None  # CTR of the radiologists' heart and lung masks, where there are any
    out: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- sources


def covid_qu_ex_cases(data: Path, part: str) -> list[Case]:
    from cxrils.training.lesion_data import covid_qu_ex_samples

    cases = []
    for s in covid_qu_ex_samples(data, part):
        c = Case(
            "covid_qu_ex",
            s.image_id,
            s.image_path,
            "positive" if s.positive else "normal",
            mask_path=s.lesion_path,
            lung_path=s.lung_path,
        )
        if s.positive:
            right, left = s.lungs()
            c.lesion_type, c.sides = "opacity", sides_of_mask(s.lesion(), right, left)
        cases.append(c)
    return cases


def nih_cases(data: Path) -> list[Case]:
    from PIL import Image

    from cxrils.sources.nih import read_nih_boxes

    cases = []
    for b in read_nih_boxes(data):
        t = NIH_TYPES.get(b.finding)
        if t is None:
            continue
        with Image.open(b.image_path) as im:
            width = im.size[0]
        cases.append(
            Case(
                "nih_bbox",
                b.image_id,
                b.image_path,
                "positive",
                t,
                () if t == "cardiomegaly" else sides_of_box(b.xyxy, width),
                box=b.xyxy,
            )
        )
    return cases


def nih_label_cases(data: Path) -> list[Case]:
    """NIH images whose ChestX-ray14 labels (text-mined from the reports, Wang et al.
    2017; no box) hold a pleural effusion: image-level truth, side unknown, so the report
    names both lungs and "found" means a mask in either."""
    from cxrils.sources.nih import read_nih_images

    return [
        Case("nih_labels", r.image_id, r.image_path, "positive", "effusion", SIDES)
        for r in read_nih_images(data)
        if "Effusion" in r.labels
    ]


def severity_cases(data: Path) -> list[Case]:
    from cxrils.sources.covid19 import read_covid19_severity

    cases = []
    for s in read_covid19_severity(data):
        if s.image_id is None or s.image_path is None or not s.image_path.is_file():
            continue
        geo, opa = s.geographic_mean, s.opacity_mean
        # extent is summed over both lungs (0-8) without a side: the report says both lungs
        kind = "positive" if geo > 0 else "normal"
        cases.append(
            Case(
                "covid_severity",
                s.image_id,
                s.image_path,
                kind,
                "opacity" if geo > 0 else "",
                SIDES if geo > 0 else (),
                severity=(geo, opa),
            )
        )
    return cases


def xrv_cases(data: Path) -> list[Case]:
    from PIL import Image

    from cxrils.sources.xrv_tests import read_xrv_boxes, read_xrv_images

    boxes: dict[str, list] = {}
    for b in read_xrv_boxes(data):
        boxes.setdefault(b.image_id, []).append(b.xyxy)
    cases = []
    for r in read_xrv_images(data):
        iid, labels, path = r.image_id, r.labels, r.image_path
        if labels == "Cardiomegaly":
            cases.append(Case("xrv_tests", iid, path, "positive", "cardiomegaly"))
        elif labels in ("No Finding", "healthy"):
            cases.append(Case("xrv_tests", iid, path, "normal"))
        elif iid in boxes:  # tuberculosis: an opacity; one case per expert box
            with Image.open(path) as im:
                width = im.size[0]
            for k, box in enumerate(boxes[iid]):
                cases.append(
                    Case("xrv_tests", f"{iid}#{k}", path, "positive", "opacity", sides_of_box(box, width), box=box)
                )
    return cases


def jsrt_normal_cases(data: Path) -> list[Case]:
    from cxrils.sources.jsrt import read_jsrt_images, read_jsrt_non_nodules

    images = {r.image_id: r for r in read_jsrt_images(data)}
    ids = [n.image_id for n in read_jsrt_non_nodules(data)]
    from cxrils.types import AnatomyMasks
    from cxrils.vision.anatomy import cardiothoracic_ratio

    cases = []
    for i in ids:
        r = images[i]
        organs = {
            k: read_mask(p) for k, p in (("right lung", r.right_lung), ("left lung", r.left_lung), ("heart", r.heart))
        }
        ctr = cardiothoracic_ratio(AnatomyMasks(organs, organs["heart"].shape, "reference"))
        cases.append(Case("jsrt_normals", i, r.image_path, "normal", reference_ctr=ctr))
    return cases


def load_cases(data: Path, sources: list[str], limit: int | None) -> list[Case]:
    makers = {
        "covid_qu_ex": lambda: covid_qu_ex_cases(data, "report"),
        "nih_bbox": lambda: nih_cases(data),
        "nih_labels": lambda: nih_label_cases(data),
        "covid_severity": lambda: severity_cases(data),
        "xrv_tests": lambda: xrv_cases(data),
        "jsrt_normals": lambda: jsrt_normal_cases(data),
    }
    cases = []
    for name in sources:
        got = makers[name]()
        if limit:
            pos = [c for c in got if c.kind == "positive"][:limit]
            neg = [c for c in got if c.kind == "normal"][: max(1, limit // 2)]
            got = pos + neg
        cases += got
    return cases


# ----------------------------------------------------------------------------- metrics
# Mask scores are cxrils.evaluation's: mask_iou and mask_dice (0.0 for two empty masks),
# mask_precision (share of the first mask inside the second; 0.0 when it is empty).


def box_mask(box, shape) -> np.ndarray:
    from cxrils.types import LesionBox

    return LesionBox(*box, 1.0, "").to_mask(shape)


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z, p = 1.959964, k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def boot(values: list[float]) -> tuple[float, float]:
    if not values:
        return (math.nan, math.nan)
    v = np.asarray(values, float)
    rng = np.random.default_rng(0)
    means = v[rng.integers(0, len(v), (1000, len(v)))].mean(1)
    return (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


def pct(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def with_ci(v: float, ci: tuple[float, float]) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{100 * v:.1f} [{pct(ci[0])}, {pct(ci[1])}]"


def prop(k: int, n: int) -> str:
    return f"{k}/{n} = " + with_ci(k / n if n else math.nan, wilson(k, n))


def mean(v: list[float]) -> float:
    return float(np.mean(v)) if v else math.nan


# ----------------------------------------------------------------------------- running


def read_mask(path: Path) -> np.ndarray:
    from cxrils.training.anatomy_data import read_gray

    return read_gray(path) > 127


def side_of_record(record: dict) -> str:
    locs = list(record["locations"])
    if locs and all(loc.startswith("right") for loc in locs):
        return "right"
    if locs and all(loc.startswith("left") for loc in locs):
        return "left"
    return "both" if locs else "none"


class _Cached:
    """An anatomy segmenter whose results are kept per image (the pipeline, its runs
    with a second report and the light model's priors ask for the same image)."""

    def __init__(self, seg) -> None:
        self.seg, self.name, self._cache = seg, getattr(seg, "name", "anatomy"), {}

    def segment(self, x: np.ndarray):
        import hashlib

        key = hashlib.blake2b(x.tobytes() + repr(x.shape).encode(), digest_size=16).hexdigest()
        if key not in self._cache:
            if len(self._cache) > 8:
                self._cache.clear()
            self._cache[key] = self.seg.segment(x)
        return self._cache[key]


class Runner:
    """The pipeline (builtin stages; the default config with ``overrides``,
    ``section.key=value`` items) and optionally the light model."""

    def __init__(self, model_dir: Path | None, overrides: list[str] | None = None) -> None:
        from cxrils.config import load_config
        from cxrils.pipeline.study import Pipeline

        self.cfg = load_config(None, overrides)
        self.pipe = Pipeline(self.cfg)
        self.pipe.load_models(paraphrase=False)
        anatomy = _Cached(self.pipe.anatomy_segmenter)
        self.pipe.anatomy_segmenter = self.pipe.edit_region_segmenter = anatomy
        self.seg = None
        if model_dir is not None:
            from cxrils.models import Segmenter

            self.seg = Segmenter.from_pretrained(model_dir, anatomy=anatomy.segment)

    def image_state(self, case: Case, reports: list[str]):
        """``(studies, structured, state)``: one study per report of the case's image, their
        structured reports, and the state after the image steps (run once, on the first)."""
        from cxrils.sources import StudyInput

        studies = [
            StudyInput(
                study_id=f"{case.image_id}-{k}",
                image_id=case.image_id.replace("#", "_"),
                patient_id=case.image_id,
                image_path=case.path,
                report=text,
                view=None,
                split="test",
            )
            for k, text in enumerate(reports)
        ]
        structured = self.pipe.structure(studies)
        state = self.pipe.start(studies[0], structured[(studies[0].study_id, reports[0])])
        for step in self.pipe.image_steps:
            state = step(state)
        return studies, structured, state

    def run_pipeline(self, case: Case, reports: list[str]) -> list[dict]:
        """Grounding of one image with each report (the image steps run once): the
        generated mask of the case's type, the positive records and the anatomy."""
        import dataclasses

        studies, structured, state = self.image_state(case, reports)
        outs = []
        for study in studies:
            st = dataclasses.replace(state, study=study, report=structured[(study.study_id, study.report)])
            if st.report.excluded and st.excluded is None:
                st.excluded = f"report: {st.report.excluded}"
            sg = self.pipe.ground(st)
            out = {
                "excluded": st.excluded,
                "anatomy": st.anatomy,
                "mask": None,
                "records": [],
                "any_mask": False,
                "ctr": None,
            }
            if sg is not None:
                masks = [
                    gf.mask
                    for gf in sg.findings
                    if gf.mask is not None
                    and gf.mask.any()
                    and (not case.lesion_type or gf.lesion_type == case.lesion_type)
                ]
                out["mask"] = np.logical_or.reduce(masks) if masks else None
                out["grounded"] = sorted(
                    {
                        lb
                        for gf in sg.findings
                        if gf.mask is not None and (not case.lesion_type or gf.lesion_type == case.lesion_type)
                        for lb in gf.grounded
                    }
                )
                out["any_mask"] = any(gf.mask is not None and gf.mask.any() for gf in sg.findings)
                if st.excluded is None:
                    out["records"] = self.pipe.stages.generate_records(
                        sg, split="test", patient_id=case.image_id, image_path="images/x.png", cfg=self.cfg
                    )
                out["ctr"] = sg.ctr
            outs.append(out)
        return outs

    def ask(self, x: np.ndarray, instructions: list[str], *, consistent: bool | None = None):
        """The light model's answers; ``consistent`` overrides the model's own
        ``consistent_answers`` setting."""
        keep = self.seg.config.consistent_answers
        if consistent is not None:
            self.seg.config.consistent_answers = consistent
        try:
            return self.seg.predict_many([x] * len(instructions), instructions)
        finally:
            self.seg.config.consistent_answers = keep


def run_case(r: Runner, case: Case) -> None:
    from cxrils.io import load_image
    from cxrils.templates import render_instruction

    x = load_image(case.path).pixels
    o = case.out
    if case.kind == "positive":
        case.report = report_from_label(case.lesion_type, case.sides)
        res = r.run_pipeline(case, [case.report])[0]
        o["excluded"] = res["excluded"]
        o["pos_records"] = [rec for rec in res["records"] if rec["polarity"] == "positive"]
        o["grounded"] = res.get("grounded", [])
        o["ctr"] = res.get("ctr")
        gen = res["mask"]
        o["generated"] = gen is not None
        anat = res["anatomy"]
        # baseline: the named lungs as the radiologists of these sources drew them (visible
        # lungs, which hold their lesions more tightly than whole lungs: the stronger baseline)
        named = (
            (anat.organs().union(case.sides) if case.sides else anat["heart"])
            if anat is not None
            else np.zeros(x.shape, bool)
        )
        if case.mask_path is not None:
            ref = read_mask(case.mask_path)
            o["wl_iou"] = mask_iou(named, ref)
            if gen is not None:
                o.update(iou=mask_iou(gen, ref), dice=mask_dice(gen, ref), prec=mask_precision(gen, ref))
        if case.box is not None:
            b = box_mask(case.box, x.shape)
            o["wl_prec"], o["wl_cov"] = mask_precision(named, b), mask_precision(b, named)
            if gen is not None:
                o.update(box_prec=mask_precision(gen, b), box_cov=mask_precision(b, gen))
        lungs = anat.union(SIDES) if anat is not None else np.zeros(x.shape, bool)
        if case.severity is not None or case.source == "covid_severity":
            o["frac"] = float((gen & lungs).sum() / max(1, lungs.sum())) if gen is not None else 0.0
        if r.seg is not None:
            if case.lesion_type == "cardiomegaly":
                instruction = render_instruction("global", "cardiomegaly")
            else:
                instruction = render_instruction("basic", case.lesion_type, list(case.sides))
            pred = r.ask(x, [instruction])[0]
            m = pred.mask
            o["light_present"] = bool(m.any())
            o["light_score"] = float(pred.presence_score)
            if case.mask_path is not None:
                o["light_iou"] = mask_iou(m, ref)
            if case.box is not None and m.any():
                o.update(light_box_prec=mask_precision(m, b), light_box_cov=mask_precision(b, m))
            if case.source == "covid_severity" and anat is not None:
                o["light_frac"] = float((m & lungs).sum() / max(1, lungs.sum()))
            if case.mask_path is not None and case.lesion_type != "cardiomegaly":
                # the basic and the global question, with and without consistent answers
                o["light_basic"], o["light_global"] = {}, {}
                for check in (True, False):
                    bm, gm = (
                        p.mask
                        for p in r.ask(
                            x, [instruction, render_instruction("global", case.lesion_type)], consistent=check
                        )
                    )
                    o["light_basic"][check] = (bool(bm.any()), mask_iou(bm, ref))
                    o["light_global"][check] = (bool(gm.any()), mask_iou(gm, ref))
            if case.mask_path is not None and anat is not None and case.lesion_type != "cardiomegaly":
                # the zone holding most of the expert lesion, asked on its own
                zone = max(vocab.LUNG_ZONES, key=lambda z: int((ref & anat[z]).sum()))
                zm = r.ask(x, [render_instruction("basic", case.lesion_type, [zone])])[0].mask
                o["light_zone"] = (bool(zm.any()), mask_iou(zm, ref & anat[zone]))
    else:
        res, false = r.run_pipeline(case, [NORMAL_REPORT, FALSE_REPORT])
        o["excluded"] = res["excluded"]
        o["pos_records_normal"] = sum(rec["polarity"] == "positive" for rec in res["records"])
        o["false_mask"] = bool(false.get("any_mask"))
        o["ctr"] = res.get("ctr")
        if case.source == "covid_severity":
            o["frac"] = 0.0
        if r.seg is not None:
            # the opacity questions asked of positives: each lung, both lungs (a bilateral
            # lesion's basic question) and the global one
            qs = [render_instruction("basic", "opacity", list(locs)) for locs in NORMAL_LUNG_QUESTIONS]
            qs += [render_instruction("global", "opacity")]
            n_op = len(qs)
            qs += [render_instruction("global", "cardiomegaly")]
            qs += [render_instruction("basic", "opacity", [z]) for z in vocab.LUNG_ZONES]
            preds = r.ask(x, qs)
            # the opacity questions, answered with the model's own setting in preds and
            # asked again with the other one
            own = bool(r.seg.config.consistent_answers)
            other = r.ask(x, qs[:n_op], consistent=not own)
            o["light_neg_rules"] = {
                own: [not p.mask.any() for p in preds[:n_op]],
                not own: [not p.mask.any() for p in other],
            }
            enlarged = case.reference_ctr is not None and case.reference_ctr > CTR_MIN_CARDIOMEGALY
            o["light_neg"] = {
                "opacity": [not p.mask.any() for p in preds[:n_op]],
                "cardiomegaly": [] if enlarged else [not preds[n_op].mask.any()],
            }
            o["enlarged_heart"] = enlarged
            o["light_cardiomegaly"] = bool(preds[n_op].mask.any())
            if r.seg.answers_cardiomegaly_by_ctr:
                # the CTR its cardiomegaly answer used (the rule runs only with priors;
                # image_priors is cached, so this recomputes nothing), and whether the
                # network's score passes where cardiomegaly_needs_score asks it to
                o["light_ctr"] = r.seg.image_priors(x).ctr
                cm = preds[n_op]
                o["light_cm_score_ok"] = not r.seg.config.cardiomegaly_needs_score or bool(cm.score_passes)
            o["light_neg_zones"] = [not p.mask.any() for p in preds[n_op + 1 :]]
            # the global question of every other lung type: a normal film holds none of them
            others = r.ask(x, [render_instruction("global", t) for t in OTHER_LUNG_TYPES])
            o["light_neg_types"] = {t: not p.mask.any() for t, p in zip(OTHER_LUNG_TYPES, others)}
            if case.source == "covid_severity":
                o["light_frac"] = 0.0


# ----------------------------------------------------------------------------- x_ano


def x_ano_stats(r: Runner, samples, label: str) -> dict:
    """x_ano statistics over COVID-QU-Ex samples (module docstring)."""
    from cxrils import vocab

    hist_pos = np.zeros(256, np.int64)
    hist_neg = np.zeros(256, np.int64)
    normal_all, normal_med, normal_lat, les, nonles = [], [], [], [], []
    failed = 0
    for s in samples:
        x = s.image()
        try:
            anat = r.pipe.edit_region_segmenter.segment(x)
            res = r.pipe.anomaly_mapper.map(x, anat.union(vocab.EDIT_REGION_LABELS), lungs=anat.union(SIDES))
        except Exception:  # noqa: BLE001 - counted, not fatal
            failed += 1
            continue
        xa = res.x_ano
        right, left = s.lungs()
        lungs = right | left
        lesion = s.lesion(lungs.shape) & lungs
        k = np.clip(np.rint(xa * 255), 0, 255).astype(np.int64)
        hist_pos += np.bincount(k[lesion], minlength=256)
        hist_neg += np.bincount(k[lungs & ~lesion], minlength=256)
        if s.positive:
            if lesion.any():
                les.append(float(xa[lesion].mean()))
            if (lungs & ~lesion).any():
                nonles.append(float(xa[lungs & ~lesion].mean()))
        else:
            medial = np.zeros_like(lungs)
            for lung, lateral_left in ((right, True), (left, False)):
                cols = np.flatnonzero(lung.any(0))
                if cols.size == 0:
                    continue
                w = cols[-1] - cols[0] + 1
                band = (
                    slice(cols[-1] + 1 - int(MEDIAL_FRACTION * w), cols[-1] + 1)
                    if lateral_left
                    else slice(cols[0], cols[0] + int(MEDIAL_FRACTION * w))
                )
                medial[:, band] |= lung[:, band]
            normal_all.append(float(xa[lungs].mean()))
            normal_med.append(float(xa[medial].mean()) if medial.any() else 0.0)
            normal_lat.append(float(xa[lungs & ~medial].mean()))
    # exact AUROC from the 256-level histograms (x_ano is k / 255), ties count one half
    auc = histogram_auroc(hist_pos, hist_neg)
    return {
        "label": label,
        "n": len(samples) - failed,
        "failed": failed,
        "normal": mean(normal_all),
        "medial": mean(normal_med),
        "lateral": mean(normal_lat),
        "lesion": mean(les),
        "nonlesion": mean(nonles),
        "auroc": auc,
    }


# ----------------------------------------------------------------------------- tables


def pipeline_tables(cases: list[Case]) -> list[str]:
    lines = [
        "### Pipeline (builtin backends), reported lesions with an expert mask",
        "",
        "| source | type | n | recall | IoU of generated masks | Dice | pixel precision "
        "| whole named lung, same images | whole named lung, all | IoU, all reported (none = 0) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        if c.kind == "positive" and c.mask_path is not None:
            groups.setdefault((c.source, c.lesion_type), []).append(c)
    allc = [c for g in groups.values() for c in g]
    for (src, t), g in list(groups.items()) + ([(("all", "all"), allc)] if len(groups) > 1 else []):
        gen = [c for c in g if c.out.get("generated")]
        ious = [c.out["iou"] for c in gen]
        all_iou = [c.out.get("iou", 0.0) for c in g]
        lines.append(
            f"| {src} | {t} | {len(g)} | {prop(len(gen), len(g))} | {with_ci(mean(ious), boot(ious))} "
            f"| {pct(mean([c.out['dice'] for c in gen]))} | {pct(mean([c.out['prec'] for c in gen]))} "
            f"| {pct(mean([c.out['wl_iou'] for c in gen]))} | {pct(mean([c.out['wl_iou'] for c in g]))} "
            f"| {with_ci(mean(all_iou), boot(all_iou))} |"
        )
    boxes = [c for c in cases if c.kind == "positive" and c.box is not None]
    if boxes:
        lines += [
            "",
            "### Pipeline, reported lesions with an expert box (precision = share of the mask inside "
            "the box; coverage = share of the box covered by the mask)",
            "",
            "| source | type | n | recall | precision in box | box coverage "
            "| whole named lung (heart for cardiomegaly): precision | coverage |",
            "|---|---|---|---|---|---|---|---|",
        ]
        bg: dict[tuple[str, str], list[Case]] = {}
        for c in boxes:
            bg.setdefault((c.source, c.lesion_type), []).append(c)
        for (src, t), g in sorted(bg.items()):
            gen = [c for c in g if c.out.get("generated")]
            lines.append(
                f"| {src} | {t} | {len(g)} | {len(gen)}/{len(g)} | {pct(mean([c.out['box_prec'] for c in gen]))} "
                f"| {pct(mean([c.out['box_cov'] for c in gen]))} | {pct(mean([c.out['wl_prec'] for c in g]))} "
                f"| {pct(mean([c.out['wl_cov'] for c in g]))} |"
            )
    sev = [c for c in cases if c.source == "covid_severity"]
    if sev:
        from scipy.stats import spearmanr

        pos = [c for c in sev if c.kind == "positive"]
        gen = [c for c in pos if c.out.get("generated")]
        geo = [c.severity[0] for c in sev]
        opa = [c.severity[1] for c in sev]
        frac = [c.out.get("frac", 0.0) for c in sev]
        lines += [
            "",
            "### Pipeline, COVID-19 severity scores (no mask; report: opacities in both lungs when the "
            "extent score is above 0)",
            "",
            "| n | recall (extent > 0) | Spearman: mask share of lungs vs geographic extent | vs opacity |",
            "|---|---|---|---|",
            f"| {len(sev)} | {prop(len(gen), len(pos))} | {spearmanr(frac, geo).statistic:.3f} "
            f"| {spearmanr(frac, opa).statistic:.3f} |",
        ]
    normals = [c for c in cases if c.kind == "normal"]
    if normals:
        lines += [
            "",
            "### Pipeline on normal images",
            "",
            f"| source | n | positive records, normal report | images with a mask given the false report "
            f'"{FALSE_REPORT}" |',
            "|---|---|---|---|",
        ]
        for src in dict.fromkeys(c.source for c in normals):
            g = [c for c in normals if c.source == src]
            k = sum(c.out["pos_records_normal"] > 0 for c in g)
            f = sum(c.out["false_mask"] for c in g)
            lines.append(f"| {src} | {len(g)} | {k} | {prop(f, len(g))} |")
    lr = [c for c in cases if c.kind == "positive" and c.lesion_type != "cardiomegaly"]
    if lr:
        lines += [
            "",
            "### Left/right balance (patient sides): reports naming one side only, and positive records "
            "whose locations are all on one side",
            "",
            "| source | reports right-only : left-only | positive records right-only : left-only | "
            "records right : left ratio | bilateral reports grounded in both : right only : left only : none |",
            "|---|---|---|---|---|",
        ]
        for src in dict.fromkeys(c.source for c in lr):
            g = [c for c in lr if c.source == src]
            rep_r = sum(c.sides == ("right lung",) for c in g)
            rep_l = sum(c.sides == ("left lung",) for c in g)
            sides = [side_of_record(rec) for c in g for rec in c.out.get("pos_records", [])]
            rr, ll = sides.count("right"), sides.count("left")
            ratio = f"{rr / ll:.2f}" if ll else ("inf" if rr else "n/a")
            bil = [c.out.get("grounded", []) for c in g if len(c.sides) == 2]
            both = sum(set(SIDES) <= set(x) for x in bil)
            r_only = sum("right lung" in x and "left lung" not in x for x in bil)
            l_only = sum("left lung" in x and "right lung" not in x for x in bil)
            lines.append(
                f"| {src} | {rep_r} : {rep_l} | {rr} : {ll} | {ratio} "
                f"| {both} : {r_only} : {l_only} : {len(bil) - both - r_only - l_only} |"
            )
    return lines


def light_tables(cases: list[Case]) -> list[str]:
    pos = [c for c in cases if c.kind == "positive" and "light_present" in c.out and c.lesion_type != "cardiomegaly"]
    if not pos and not any("light_neg" in c.out for c in cases):
        return []
    lines = [
        "",
        '### Light model, basic instruction ("Segment the {type} in the {named lungs}.")',
        "",
        "| source | type | n | presence recall | IoU, all reported (empty = 0) | IoU when answered "
        "| whole named lung IoU | precision in box | box coverage |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in pos:
        groups.setdefault((c.source, c.lesion_type), []).append(c)
    masked = [c for c in pos if c.mask_path is not None]
    extra = (
        [(("all (expert masks)", "all"), masked)]
        if len({k for k, g in groups.items() if g[0].mask_path is not None}) > 1
        else []
    )
    for (src, t), g in list(groups.items()) + extra:
        k = sum(c.out["light_present"] for c in g)
        ious = [c.out["light_iou"] for c in g if "light_iou" in c.out]
        ans = [c.out["light_iou"] for c in g if "light_iou" in c.out and c.out["light_present"]]
        wl = [c.out["wl_iou"] for c in g if "wl_iou" in c.out]
        bp = [c.out["light_box_prec"] for c in g if "light_box_prec" in c.out]
        bc = [c.out["light_box_cov"] for c in g if "light_box_cov" in c.out]
        lines.append(
            f"| {src} | {t} | {len(g)} | {prop(k, len(g))} | {with_ci(mean(ious), boot(ious))} "
            f"| {pct(mean(ans))} | {pct(mean(wl))} | {pct(mean(bp))} | {pct(mean(bc))} |"
        )
    sev = [c for c in cases if c.source == "covid_severity" and "light_frac" in c.out]
    if sev:
        from scipy.stats import spearmanr

        lines += [
            "",
            f"Light model on the {len(sev)} severity-scored images: Spearman of the answered mask's share "
            f"of the lungs with geographic extent {spearmanr([c.out['light_frac'] for c in sev], [c.severity[0] for c in sev]).statistic:.3f}, "
            f"with opacity {spearmanr([c.out['light_frac'] for c in sev], [c.severity[1] for c in sev]).statistic:.3f}.",
        ]
    neg = [c for c in cases if "light_neg" in c.out]
    if neg:
        lines += [
            "",
            "### Light model on normal images: N-Acc (share of questions answered with an empty mask; "
            "opacity: basic right lung, basic left lung, basic right lung and left lung, global; "
            "cardiomegaly: global, not asked where the "
            f"radiologists' SCR masks give a CTR above {CTR_MIN_CARDIOMEGALY})",
            "",
            "| source | type | questions | N-Acc |",
            "|---|---|---|---|",
        ]
        for src in list(dict.fromkeys(c.source for c in neg)) + ["all"]:
            g = [c for c in neg if src == "all" or c.source == src]
            for t in ("opacity", "cardiomegaly"):
                v = [ok for c in g for ok in c.out["light_neg"][t]]
                lines.append(f"| {src} | {t} | {len(v)} | {prop(sum(v), len(v))} |")
    lines += consistency_lines(cases)
    lines += zone_lines(cases)
    lines += other_type_lines(cases)
    return lines


def consistency_lines(cases: list[Case]) -> list[str]:
    """The light model with and without consistent answers (``LightConfig.consistent_answers``):
    the basic and the global question on expert-masked lesions, and the four opacity
    questions (right lung, left lung, both lungs, global) on normal images."""
    pos, neg = _having(cases, "light_global"), _having(cases, "light_neg_rules")
    if not pos and not neg:
        return []
    lines = _table_head(
        "Light model with and without consistent answers (`consistent_answers`)",
        [
            "consistent answers",
            "basic question: presence recall",
            "IoU (empty = 0)",
            "global question: presence recall",
            "IoU (empty = 0)",
            "normal images: N-Acc of the opacity questions (right lung, left lung, both lungs, global)",
        ],
    )
    for check in (True, False):
        b_rec, b_iou = _recall_iou([c.out["light_basic"][check] for c in pos])
        g_rec, g_iou = _recall_iou([c.out["light_global"][check] for c in pos])
        v = [ok for c in neg for ok in c.out["light_neg_rules"][check]]
        lines.append(f"| {'on' if check else 'off'} | {b_rec} | {b_iou} | {g_rec} | {g_iou} | {_n_acc_cell(v)} |")
    return lines


def zone_lines(cases: list[Case]) -> list[str]:
    """The light model's zone questions (not among issue 18's targets): on each expert-masked
    lesion, the lung zone of the pipeline anatomy holding most of it; on normal images, all
    eight zones (opacity)."""
    pos, neg = _having(cases, "light_zone"), _having(cases, "light_neg_zones")
    if not pos and not neg:
        return []
    lines = _table_head(
        'Light model, zone questions ("Segment the {type} in the {zone}."; not among the targets)',
        [
            "source",
            "questions",
            "presence recall: the zone holding most of the expert lesion",
            "IoU with the expert lesion inside that zone (empty = 0)",
            "N-Acc on normal images, all eight zones",
        ],
    )
    for src in dict.fromkeys(c.source for c in pos + neg):
        p = [c for c in pos if c.source == src]
        v = [ok for c in neg if c.source == src for ok in c.out["light_neg_zones"]]
        rec, ious = _recall_iou([c.out["light_zone"] for c in p])
        lines.append(
            f"| {src} | {len(p)} lesions, {len(v)} normal-image questions | {rec} | {ious} | {_n_acc_cell(v)} |"
        )
    return lines


def other_type_lines(cases: list[Case]) -> list[str]:
    """N-Acc of the global question of each lung type but opacity on normal images (not
    among issue 28's targets, which ask opacity and cardiomegaly only): the types the
    human-masked images do not show, whose thresholds are chosen on mostly synthetic and
    generated validation records."""
    neg = _having(cases, "light_neg_types")
    if not neg:
        return []
    srcs = list(dict.fromkeys(c.source for c in neg)) + ["all"]
    lines = _table_head(
        'Light model on normal images, the other lung types ("Segment the {type}."; not among the targets)',
        ["type", *srcs],
    )
    for t in OTHER_LUNG_TYPES:
        cells = [
            _n_acc_cell([c.out["light_neg_types"][t] for c in neg if src == "all" or c.source == src]) for src in srcs
        ]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return lines


def _having(cases: list[Case], key: str) -> list[Case]:
    """The cases whose outputs hold ``key``."""
    return [c for c in cases if key in c.out]


def _n_acc_cell(empty: list[bool]) -> str:
    """N-Acc of answers (True = answered empty) with its interval; n/a when there are none."""
    return prop(sum(empty), len(empty)) if empty else "n/a"


def _table_head(title: str, columns: list[str]) -> list[str]:
    """A section title and the header rows of its Markdown table."""
    return ["", f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _recall_iou(answers: list[tuple[bool, float]]) -> tuple[str, str]:
    """Presence recall and mean IoU (bootstrap CI) of ``(answered, IoU)`` pairs; n/a when empty."""
    if not answers:
        return "n/a", "n/a"
    ious = [a[1] for a in answers]
    return prop(sum(a[0] for a in answers), len(answers)), with_ci(mean(ious), boot(ious))


def cardiomegaly_table(cases: list[Case]) -> list[str]:
    cm = [c for c in cases if c.lesion_type == "cardiomegaly"]
    if not cm:
        return []
    lines = [
        "",
        "### Held-back cardiomegaly images",
        "",
        "| source | image | CTR (pipeline anatomy) | pipeline positive record | light model: "
        '"Segment the cardiomegaly." | presence score |',
        "|---|---|---|---|---|---|",
    ]
    for c in cm:
        ctr = c.out.get("ctr")
        lines.append(
            f"| {c.source} | {c.image_id} | {'n/a' if ctr is None else f'{ctr:.2f}'} "
            f"| {'yes' if c.out.get('pos_records') else 'no'} "
            f"| {('found' if c.out['light_present'] else 'not found') if 'light_present' in c.out else 'n/a'} "
            f"| {c.out.get('light_score', float('nan')):.2f} |"
        )
    found = sum(c.out.get("light_present", False) for c in cm)
    lines.append(f"\nLight model found cardiomegaly on {found} of {len(cm)} held-back images.")
    normals = [c for c in cases if c.kind == "normal" and c.out.get("ctr") is not None]
    if normals:
        parts = []
        for src in dict.fromkeys(c.source for c in normals):
            v = np.array([c.out["ctr"] for c in normals if c.source == src])
            parts.append(f"{src} {int((v >= 0.5).sum())}/{len(v)} (median {np.median(v):.2f})")
        lines.append(
            "Normal images whose CTR (pipeline anatomy) is at least 0.50, the radiographic cut-off of "
            "cardiomegaly: " + ", ".join(parts) + "."
        )
    return lines


def per_type_table(cases: list[Case]) -> list[str]:
    """Per lesion type, over every source with human truth of it: the pipeline's recall,
    IoU (expert masks) and precision in the expert box, the light model's presence recall,
    IoU and precision in box, each beside the trivial baseline (the whole named lung; the
    heart for cardiomegaly). Cardiomegaly's IoU is not scored (no expert heart mask)."""
    pos = [c for c in cases if c.kind == "positive"]
    if not pos:
        return []
    lines = _table_head(
        "Per lesion type, all sources with human truth (pipeline | light model; baseline = "
        "the whole named lung, the heart for cardiomegaly)",
        [
            "type",
            "cases (sources)",
            "pipeline recall",
            "pipeline IoU, expert masks (when generated)",
            "baseline IoU, same cases",
            "pipeline precision in box",
            "baseline precision in box",
            "light presence recall",
            "light IoU, expert masks (empty = 0)",
            "baseline IoU, all",
            "light precision in box",
        ],
    )
    for t in vocab.LESION_TYPES:
        g = [c for c in pos if c.lesion_type == t]
        if not g:
            continue
        srcs = ", ".join(f"{src} {sum(c.source == src for c in g)}" for src in dict.fromkeys(c.source for c in g))
        gen = [c for c in g if c.out.get("generated")]
        m_gen = [c for c in gen if "iou" in c.out]
        b_gen = [c for c in gen if "box_prec" in c.out]
        b_all = [c for c in g if "wl_prec" in c.out]
        lp = [c for c in g if "light_present" in c.out]
        lm = [c for c in lp if "light_iou" in c.out]
        lb = [c for c in lp if "light_box_prec" in c.out]

        def cell(v: list[float]) -> str:
            return f"{pct(mean(v))} (n={len(v)})" if v else "n/a"

        lines.append(
            f"| {t} | {len(g)} ({srcs}) | {prop(len(gen), len(g))} | {cell([c.out['iou'] for c in m_gen])} "
            f"| {cell([c.out['wl_iou'] for c in m_gen])} | {cell([c.out['box_prec'] for c in b_gen])} "
            f"| {cell([c.out['wl_prec'] for c in b_gen or b_all])} "
            f"| {prop(sum(c.out['light_present'] for c in lp), len(lp)) if lp else 'n/a'} "
            f"| {cell([c.out['light_iou'] for c in lm])} | {cell([c.out['wl_iou'] for c in lm])} "
            f"| {cell([c.out['light_box_prec'] for c in lb])} |"
        )
    return lines


def ctr_cardiomegaly_lines(cases: list[Case]) -> list[str]:
    """ "Segment the cardiomegaly." on the JSRT normals, split by the CTR of the
    radiologists' SCR heart and lung masks: found where it is above 0.5 (the
    radiographic definition), not found at or below 0.45 (Appendix D.3's negatives)."""
    g = [c for c in cases if "light_cardiomegaly" in c.out and c.reference_ctr is not None]
    if not g:
        return []
    big = [c for c in g if c.reference_ctr > CTR_MIN_CARDIOMEGALY]
    small = [c for c in g if c.reference_ctr <= 0.45]
    mid = [c for c in g if 0.45 < c.reference_ctr <= CTR_MIN_CARDIOMEGALY]
    lines = _table_head(
        'Light model, "Segment the cardiomegaly." by the radiologists\' CTR (JSRT SCR masks, images without a nodule)',
        [
            "expert CTR",
            "images",
            "answered present",
            "of them held out of the builtin anatomy's training: answered present",
        ],
    )
    for name, part in ((f"> {CTR_MIN_CARDIOMEGALY}", big), (f"0.45 - {CTR_MIN_CARDIOMEGALY}", mid), ("<= 0.45", small)):
        held = [c for c in part if jsrt_held_out(c.image_id)]
        lines.append(
            f"| {name} | {len(part)} | {prop(sum(c.out['light_cardiomegaly'] for c in part), len(part))} "
            f"| {prop(sum(c.out['light_cardiomegaly'] for c in held), len(held))} |"
        )
    n_held = sum(jsrt_held_out(c.image_id) for c in g)
    lines += [
        "",
        "The light model answers cardiomegaly by the CTR of the builtin anatomy, which trained on the JSRT "
        f"images outside its held-out split (`cxrils.training.anatomy_data.split_of`): {len(g) - n_held} of "
        f"these {len(g)} images are its training images; the last column counts only the {n_held} held-out ones.",
    ]
    return lines


#: Cut-offs on the light model's anatomy CTR tried by :func:`ctr_cutoff_lines` (a
#: diagnostic of the trade-off between issue 28's two cardiomegaly targets and N-Acc; the
#: shipped cut-off is the radiographic definition, ``LightConfig.cardiomegaly_min_ctr``).
CTR_CUTOFFS = (0.46, 0.47, 0.48, 0.49, 0.50, 0.51, 0.52, 0.53, 0.54, 0.56, 0.58, 0.60)


def ctr_cutoff_lines(cases: list[Case], shipped: float | None) -> list[str]:
    """What "Segment the cardiomegaly." would answer on the normal images at other cut-offs
    on the light model's own anatomy CTR (``cardiomegaly_by_ctr``: present where the CTR is
    above the cut-off and, with ``cardiomegaly_needs_score``, the network's score reaches
    its threshold, ``light_cm_score_ok``): the JSRT images by the radiologists' CTR, and the N-Acc of the
    opacity and cardiomegaly questions of all normal images. A diagnostic on the report
    images, not a tuning (nothing is chosen from it). The row check: at the shipped
    cut-off the rule must reproduce the model's own answers; the images where it does not
    (e.g. a CTR above the cut-off with an empty heart mask, answered absent) are named.

    ``shipped`` is ``LightConfig.cardiomegaly_min_ctr`` when the model answers by the CTR
    rule, else ``None`` (no table). The shipped row counts at the exact shipped cut-off
    and replaces a tried cut-off equal to it; rows are labelled with two decimals unless
    the cut-off has more."""
    g = [c for c in cases if "light_ctr" in c.out]
    if not g or shipped is None:
        return []

    def present(c: Case, t: float, gate: bool = True) -> bool:
        ctr = c.out["light_ctr"]
        return ctr is not None and ctr > t and (c.out["light_cm_score_ok"] or not gate)

    def label(t: float) -> str:
        return f"{t:.2f}" if math.isclose(t, round(t, 2), abs_tol=1e-9) else f"{t:g}"

    differ = [f"{c.source}/{c.image_id}" for c in g if present(c, shipped) != c.out["light_cardiomegaly"]]
    jsrt = [c for c in g if c.reference_ctr is not None]
    big = [c for c in jsrt if c.reference_ctr > CTR_MIN_CARDIOMEGALY]
    small = [c for c in jsrt if c.reference_ctr <= 0.45]
    asked = [c for c in g if c.out["light_neg"]["cardiomegaly"]]
    opacity = [v for c in g for v in c.out["light_neg"]["opacity"]]
    lines = _table_head(
        "Light model on the normal images: the cardiomegaly cut-off on its anatomy CTR (diagnostic, nothing chosen from it)",
        [
            "cut-off",
            f"JSRT, expert CTR > {CTR_MIN_CARDIOMEGALY}: found (of {len(big)})",
            "the same by the CTR alone (no score gate)",
            f"JSRT, expert CTR <= 0.45: found (of {len(small)})",
            f"cardiomegaly answered present on normal images (of {len(asked)} questions)",
            f"N-Acc, opacity and cardiomegaly questions (of {len(opacity) + len(asked)})",
        ],
    )
    tried = [t for t in CTR_CUTOFFS if not math.isclose(t, shipped, abs_tol=1e-9)]
    for t in sorted([*tried, shipped]):
        fp = sum(present(c, t) for c in asked)
        k = sum(opacity) + len(asked) - fp
        mark = " (shipped)" if t == shipped else ""
        lines.append(
            f"| {label(t)}{mark} | {sum(present(c, t) for c in big)} | {sum(present(c, t, gate=False) for c in big)} "
            f"| {sum(present(c, t) for c in small)} | {fp} "
            f"| {prop(k, len(opacity) + len(asked))} |"
        )
    best = sum(opacity) + len(asked)
    lines += [
        "",
        f"With no cardiomegaly question answered present, the N-Acc would be {prop(best, len(opacity) + len(asked))}: "
        f"the opacity questions answer {len(opacity) - sum(opacity)} of {len(opacity)} present, whatever the cut-off.",
        "",
        f"At the shipped cut-off {label(shipped)} the rule reproduces the model's answer on "
        f"{len(g) - len(differ)} of {len(g)} normal images"
        + (
            f"; it differs on {', '.join(differ[:10])}"
            + (f" and {len(differ) - 10} more" if len(differ) > 10 else "")
            + ": there the table counts the rule, not the model's answer (so its shipped row differs "
            "from the targets table)."
            if differ
            else "."
        ),
    ]
    return lines


def jsrt_held_out(image_id: str) -> bool:
    """Whether a JSRT image is in the builtin anatomy model's held-out ``test`` split
    (:func:`cxrils.training.anatomy_data.split_of`, patient = image on JSRT)."""
    from cxrils.training.anatomy_data import split_of

    return split_of("jsrt_scr", image_id) == "test"


def targets_table(cases: list[Case]) -> list[str]:
    """Issue 28's targets against this run's numbers (met / missed), pipeline and light
    model, per source and per type with human truth."""
    rows: list[tuple[str, str, str, bool]] = []

    def add(what: str, target: str, value: float | None, ok: bool, fmt: str = "{:.1f}") -> None:
        rows.append((what, target, "n/a" if value is None else fmt.format(value), ok))

    pos = [c for c in cases if c.kind == "positive"]
    for t in vocab.LESION_TYPES:
        g = [c for c in pos if c.lesion_type == t]
        if g:
            k = sum(bool(c.out.get("generated")) for c in g)
            add(f"pipeline, {t}: recall (n={len(g)})", ">= 80", 100 * k / len(g), k / len(g) >= 0.8)
    lung = [c for c in pos if c.lesion_type != "cardiomegaly"]
    for src in dict.fromkeys(c.source for c in lung):
        g = [c for c in lung if c.source == src]
        gm = [c for c in g if "iou" in c.out]
        gb = [c for c in g if "box_prec" in c.out]
        if gm:
            v, base = mean([c.out["iou"] for c in gm]), mean([c.out["wl_iou"] for c in gm])
            add(
                f"pipeline, {src}: IoU minus whole-named-lung IoU, same images (n={len(gm)})",
                ">= +5",
                100 * (v - base),
                v - base >= 0.05,
            )
        elif gb:
            v, base = mean([c.out["box_prec"] for c in gb]), mean([c.out["wl_prec"] for c in gb])
            add(
                f"pipeline, {src}: precision in box minus the whole named lung's (n={len(gb)})",
                ">= +5",
                100 * (v - base),
                v - base >= 0.05,
            )
        elif any(c.box is not None for c in g):  # box cases, none given a mask: missed, not left out
            add(f"pipeline, {src}: precision in box minus the whole named lung's (n=0 generated)", ">= +5", None, False)
    eff = [c for c in pos if c.source == "nih_labels" and c.lesion_type == "effusion"]
    if eff:
        k = sum(bool(c.out.get("generated")) for c in eff)
        add(
            f"pipeline, effusion on NIH films (text-mined labels, n={len(eff)}): found",
            ">= 75",
            100 * k / len(eff),
            k / len(eff) >= 0.75,
        )
    lp = [c for c in lung if "light_present" in c.out]
    for src in dict.fromkeys(c.source for c in lp):
        g = [c for c in lp if c.source == src]
        gm = [c for c in g if "light_iou" in c.out]
        gb = [c for c in g if "light_box_prec" in c.out]
        if gm:
            v, base = mean([c.out["light_iou"] for c in gm]), mean([c.out["wl_iou"] for c in gm])
            add(
                f"light, {src}: IoU (empty = 0) minus whole-named-lung IoU (n={len(gm)})",
                ">= 0",
                100 * (v - base),
                v >= base,
            )
        elif gb:
            v, base = mean([c.out["light_box_prec"] for c in gb]), mean([c.out["wl_prec"] for c in gb])
            add(
                f"light, {src}: precision in box minus the whole named lung's (n={len(gb)} answered)",
                ">= 0",
                100 * (v - base),
                v >= base,
            )
        elif any(c.box is not None for c in g):  # box cases, none answered: missed, not left out
            add(f"light, {src}: precision in box minus the whole named lung's (n=0 answered)", ">= 0", None, False)
    lm = [c for c in lp if "light_iou" in c.out]
    if lm:
        v = mean([c.out["light_iou"] for c in lm])
        add("light: IoU, all expert-mask cases (empty = 0)", ">= 50", 100 * v, v >= 0.5)
    lpc = [c for c in pos if "light_present" in c.out]
    if lpc:
        k = sum(c.out["light_present"] for c in lpc)
        add(
            f"light: presence recall, all sources and types (n={len(lpc)})",
            ">= 80",
            100 * k / len(lpc),
            k / len(lpc) >= 0.8,
        )
    neg = [
        ok for c in cases if "light_neg" in c.out for t in ("opacity", "cardiomegaly") for ok in c.out["light_neg"][t]
    ]
    if neg:
        add(
            "light: N-Acc on normal images (opacity and cardiomegaly questions)",
            ">= 95",
            100 * mean(neg),
            mean(neg) >= 0.95,
        )
    g = [c for c in cases if "light_cardiomegaly" in c.out and c.reference_ctr is not None]
    big = [c for c in g if c.reference_ctr > CTR_MIN_CARDIOMEGALY]
    small = [c for c in g if c.reference_ctr <= 0.45]
    if big:
        k = sum(c.out["light_cardiomegaly"] for c in big)
        add(
            f"light: cardiomegaly found where the expert CTR > {CTR_MIN_CARDIOMEGALY} (JSRT, of {len(big)})",
            f"{len(big)}",
            k,
            k == len(big),
            "{:.0f}",
        )
    if small:
        k = sum(c.out["light_cardiomegaly"] for c in small)
        add(f"light: cardiomegaly found where the expert CTR <= 0.45 (JSRT, of {len(small)})", "0", k, k == 0, "{:.0f}")
    if not rows:
        return []
    lines = [
        "",
        "### Issue 28's targets on this run (percent unless stated)",
        "",
        "| target | goal | this run | |",
        "|---|---|---|---|",
    ]
    lines += [f"| {w} | {t} | {v} | {'met' if ok else '**missed**'} |" for w, t, v, ok in rows]
    lines.append(f"\nMet {sum(r[3] for r in rows)} of {len(rows)}.")
    return lines


def x_ano_table(stats: list[dict]) -> list[str]:
    lines = [
        "",
        "### Anomaly map x_ano inside the expert lung masks of COVID-QU-Ex",
        "",
        "| part | images | normals: mean in lungs | normals: medial fifth | normals: rest "
        "| COVID-19: lesion pixels | COVID-19: non-lesion lung pixels | pixel AUROC |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in stats:
        lines.append(
            f"| {s['label']} | {s['n']} | {s['normal']:.4f} | {s['medial']:.4f} | {s['lateral']:.4f} "
            f"| {s['lesion']:.4f} | {s['nonlesion']:.4f} | {s['auroc']:.3f} |"
        )
    return lines


def oracle_c1_lines(data: Path, cfg) -> list[str]:
    """Condition c1 of Algorithm 1 under both ``grounding.c1_bilateral`` rules (the paper's
    ``union``: IoU(box, right lung + left lung) >= tau_anatomy; ours, ``per_lung``: or
    IoU(box, one lung) >= tau_anatomy) with the EXPERT's own boxes (one per lesion
    component) and the expert lungs, for the images of both COVID-QU-Ex parts whose expert
    mask lies in both lungs (bilateral reports):
    on which side can a box pass c1 at all (:func:`cxrils.grounding.expert.c1_passing_sides`)?
    No model runs, so the tuning part is as unseen as the report part here; the rule was
    chosen on the tuning part's row."""
    import dataclasses

    from cxrils.config import LesionDataConfig
    from cxrils.grounding.expert import c1_passing_sides
    from cxrils.training.lesion_data import covid_qu_ex_samples

    min_frac = LesionDataConfig().box_min_area_frac  # the detector's training targets
    rules = {rule: dataclasses.replace(cfg, c1_bilateral=rule) for rule in ("union", "per_lung")}
    counts = {(part, rule): [0, 0, 0, 0] for part in ("tuning", "report") for rule in rules}
    for part in ("tuning", "report"):
        for s in covid_qu_ex_samples(data, part):
            if not s.positive:
                continue
            r, lf = s.lungs()
            les = s.lesion()
            if len(sides_of_mask(les, r, lf)) != 2:
                continue
            for rule, rcfg in rules.items():
                ok = c1_passing_sides(les, r, lf, rcfg, min_area_frac=min_frac)
                right, left = "right lung" in ok, "left lung" in ok
                k = 0 if right and left else 1 if right else 2 if left else 3
                counts[(part, rule)][k] += 1
    lines = [
        "",
        "### c1 with the experts' own boxes and lungs, bilateral COVID-QU-Ex images",
        "",
        f"One box per lesion component, tau_anatomy {cfg.tau_anatomy}; union: IoU(box, both lungs); "
        "per_lung: IoU(box, both lungs, the right lung or the left lung). Default rule of this run: "
        f"{cfg.c1_bilateral}.",
        "",
        "| part | c1 rule | bilateral COVID-19 images | a box passes on both sides : right only : left only "
        ": neither | right only / left only |",
        "|---|---|---|---|---|",
    ]
    for (part, rule), (both, right, left, none) in counts.items():
        ratio = f"{right / left:.2f}" if left else ("inf" if right else "n/a")
        lines.append(
            f"| {part} | {rule} | {both + right + left + none} | {both} : {right} : {left} : {none} | {ratio} |"
        )
    return lines


def duplicate_lines(data: Path) -> list[str]:
    from cxrils.training.lesion_data import covid_qu_ex_samples, find_duplicates

    rep = find_duplicates(data)
    part = {s.image_id: s.part for s in covid_qu_ex_samples(data)}
    lines = [
        "",
        "### Near-duplicates of COVID-QU-Ex images (`cxrils.training.lesion_data.find_duplicates`)",
        "",
        "| other source | COVID-QU-Ex images copying one of its images (tuning part / report part) "
        "| fine correlation >= 0.9 | 0.8-0.9 | 0.7-0.8 |",
        "|---|---|---|---|---|",
    ]
    by: dict[str, list] = {}
    for iid, other, c in rep.cross:
        by.setdefault(other.split("/")[0], []).append((iid, c))
    for src, items in sorted(by.items()):
        ids = {i for i, _ in items}
        t = sum(part[i] == "tuning" for i in ids)
        cs = [c for _, c in items]
        lines.append(
            f"| {src} | {len(ids)} ({t} / {len(ids) - t}) | {sum(c >= 0.9 for c in cs)} "
            f"| {sum(0.8 <= c < 0.9 for c in cs)} | {sum(c < 0.8 for c in cs)} |"
        )
    lines.append(
        f"\nCopies across COVID-QU-Ex's own split (tuning image ~ report image): {len(rep.within)} pairs. "
        f"Tuning-part images no model trains on: {len(rep.excluded)}."
    )
    return lines


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n")[0], data=True, threads=2, page="human_masks")
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--limit", type=int, default=None, help="first N positives (N/2 normals) per source")
    ap.add_argument("--model", type=Path, default=None, help="light model folder (default: the shipped one)")
    ap.add_argument("--no-light", action="store_true")
    ap.add_argument(
        "--tuning-auroc-limit",
        type=int,
        default=None,
        help="x_ano statistics on the first N images of each tuning-part half only",
    )
    ap.add_argument("--no-x-ano", action="store_true")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="configuration override for the pipeline (repeatable), e.g. grounding.c1_bilateral=union",
    )
    args = ap.parse_args()
    apply_threads(args)
    logging.basicConfig(level=logging.ERROR)
    from cxrils.models import default_model_dir
    from cxrils.training.lesion_data import covid_qu_ex_samples

    t0 = time.time()
    model = None if args.no_light else (args.model or default_model_dir())
    from cxrils.config import ConfigError

    try:
        r = Runner(model, args.overrides)
    except ConfigError as err:
        ap.error(f"--set: {err}")
    sources = [s for s in args.sources.split(",") if s]
    cases = load_cases(args.data, sources, args.limit)
    for i, c in enumerate(cases, 1):
        run_case(r, c)
        if i % 50 == 0:
            print(f"  {i}/{len(cases)} cases, {time.time() - t0:.0f} s", flush=True)
    lines = [
        f"Cases: {len(cases)} ({', '.join(f'{s} {sum(c.source == s for c in cases)}' for s in sources)})"
        + (f", first {args.limit} positives per source" if args.limit else "")
        + f"; light model: {model.name if model else 'none'}; backends: anatomy "
        f"{r.cfg.backends.anatomy}, anomaly {r.cfg.backends.anomaly}, detector {r.cfg.backends.detector}"
        + (f"; config overrides: {', '.join(args.overrides)}" if args.overrides else "")
        + ".",
        "",
    ]
    shipped_ctr_cutoff = (
        r.seg.config.cardiomegaly_min_ctr if r.seg is not None and r.seg.answers_cardiomegaly_by_ctr else None
    )
    lines += (
        pipeline_tables(cases)
        + light_tables(cases)
        + cardiomegaly_table(cases)
        + ctr_cardiomegaly_lines(cases)
        + ctr_cutoff_lines(cases, shipped_ctr_cutoff)
        + per_type_table(cases)
        + targets_table(cases)
    )
    if not args.no_x_ano and "covid_qu_ex" in sources:
        from cxrils.training.lesion_data import ROLES, training_samples

        # the tuning part by halves, as the models train on them (copies of other images
        # dropped): the anomaly network trained on the "anomaly" half only
        groups = [(f"tuning, {role} half", training_samples(args.data, role)) for role in ROLES]
        groups += [("report", covid_qu_ex_samples(args.data, "report"))]
        stats = []
        for label, s in groups:
            n = args.limit if label == "report" else args.tuning_auroc_limit
            if n:
                s = [x for x in s if x.positive][:n] + [x for x in s if not x.positive][: max(1, n // 2)]
            stats.append(x_ano_stats(r, s, label))
        lines += x_ano_table(stats)
    if "covid_qu_ex" in sources:
        lines += oracle_c1_lines(args.data, r.cfg.grounding)
        lines += duplicate_lines(args.data)
    lines.append(f"\nWall time {time.time() - t0:.0f} s.")
    text = "\n".join(lines)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
