"""Small deterministic stage implementations for the runner tests.

They follow the stage interfaces (same argument and return types) with trivial
image maths, so the runner's real code (batching, workers, Ray, commits, resume,
exclusions) is tested quickly without the models. Imported by import path
(``fake_stages:FakeStages``) in worker processes and Ray actors, so the tests put
this folder on PYTHONPATH.

Environment knobs: ``CXRILS_FAKE_DELAY`` (seconds slept per image in the detector,
to make a run long enough to kill), ``CXRILS_FAKE_LOADS`` (a folder where each
model construction drops a file, to count model loads per process),
``CXRILS_FAKE_BATCHES`` (a folder where each batch call of the anatomy segmenter and
the anomaly mapper drops a file ``{stage}-{batch size}-{Ray GPU ids}-...``).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

from cxrils import vocab
from cxrils.masks import encode_rle
from cxrils.types import (
    AnatomyMasks,
    AnomalyResult,
    Finding,
    GroundedFinding,
    LesionBox,
    StructuredReport,
    StudyGrounding,
)


def _note_load(name: str) -> None:
    folder = os.environ.get("CXRILS_FAKE_LOADS")
    if folder:
        Path(folder, f"{name}-{os.getpid()}-{uuid.uuid4().hex[:6]}").touch()


def _note_batch(stage: str, n: int) -> None:
    folder = os.environ.get("CXRILS_FAKE_BATCHES")
    if folder:
        import ray

        gpus = "+".join(str(g) for g in ray.get_gpu_ids()) if ray.is_initialized() else ""
        Path(folder, f"{stage}-{n}-{gpus or 'none'}-{uuid.uuid4().hex[:6]}").touch()


class _Segmenter:
    """Lungs = left/right image halves inside a margin (patient right = image left),
    zones = horizontal bands, heart = lower middle block (plausible for a frontal view,
    CTR 0.375); black image -> no lungs; an image more than half of whose pixels are
    exactly 100 (what the fake mapper makes of a bright image's edit region) -> no lungs,
    so the anatomy of x and of x_hat disagree (the cross-check case)."""

    def __init__(self, backend: str = "fake"):
        self.backend = backend
        self.calls = 0

    def segment(self, x: np.ndarray) -> AnatomyMasks:
        h, w = x.shape
        rows, cols = np.mgrid[0:h, 0:w]
        body = (x > 10) & ~((x == 100).mean() > 0.5)
        inside = (rows > h // 8) & (rows < 7 * h // 8) & body
        right = inside & (cols < w // 2) & (cols > w // 10)
        left = inside & (cols >= w // 2) & (cols < 9 * w // 10)
        masks = {"right lung": right, "left lung": left}
        bands = np.array_split(np.arange(h), 4)
        for _side, lung, zones in (("right", right, vocab.RIGHT_ZONES), ("left", left, vocab.LEFT_ZONES)):
            for zone, band in zip(zones, bands):
                masks[zone] = lung & (rows >= band[0]) & (rows <= band[-1])
        for lobe in vocab.LOBES:
            masks[lobe] = masks["right lung" if lobe.endswith("right") else "left lung"]
        masks["heart"] = (rows > h // 2) & (rows < 7 * h // 8) & (abs(cols - w // 2) < w // 6) & body
        self.calls += 1
        return AnatomyMasks(masks=masks, shape=(h, w), backend=self.backend)

    def segment_batch(self, xs):
        _note_batch("anatomy", len(xs))
        return [self.segment(x) for x in xs]


class _Mapper:
    def map(self, x: np.ndarray, edit_region: np.ndarray, *, lungs: np.ndarray | None = None) -> AnomalyResult:
        x_hat = np.where(edit_region, np.minimum(x, 100), x).astype(np.uint8)
        x_ano = (np.clip(x.astype(np.int16) - x_hat, 0, 255) / 255.0).astype(np.float32)
        return AnomalyResult(x_hat=x_hat, x_ano=x_ano, edit_region=edit_region, backend="fake")

    def map_batch(self, xs, edit_regions, *, lungs=None):
        _note_batch("anomaly", len(xs))
        return [self.map(x, r) for x, r in zip(xs, edit_regions)]


class _Detector:
    def detect(self, x, *, anomaly=None, anatomy=None) -> list[LesionBox]:
        delay = float(os.environ.get("CXRILS_FAKE_DELAY", "0"))
        if delay:
            time.sleep(delay)
        rows, cols = np.nonzero(x > 150)
        if rows.size == 0:
            return []
        return [
            LesionBox(
                float(cols.min()), float(rows.min()), float(cols.max() + 1), float(rows.max() + 1), 0.9, "Lung Opacity"
            )
        ]


class FakeStages:
    """A deterministic stage provider (see the module docstring)."""

    def structure_reports(self, items, cfg):
        for study_id, text in items:
            if "STRUCTURER-CRASH" in text:
                raise RuntimeError("structurer crashed")
            if not text.strip():
                yield StructuredReport(study_id, None, "", excluded="no findings, impression or last paragraph")
                continue
            findings = []
            for i, sentence in enumerate(s for s in text.split(".") if s.strip()):
                low = sentence.lower()
                for t in vocab.LESION_TYPES:
                    if t in low:
                        side = "left lung" if "left" in low else "right lung"
                        findings.append(
                            Finding(
                                entity=t,
                                sentence_index=i + 1,
                                presence="negative" if "no " in low else "positive",
                                certainty="definitive",
                                locations=[side.split()[0]],
                                labels=[side],
                                lesion_type=t,
                                sentence=sentence.strip(),
                            )
                        )
            yield StructuredReport(study_id, "findings", text, findings=findings)

    def load_image(self, path, cfg):
        with Image.open(path) as im:
            return np.asarray(im.convert("L")).copy(), None

    def make_anatomy(self, cfg):
        _note_load("anatomy")
        return _Segmenter(f"fake-{cfg.backends.anatomy}")

    def make_anomaly(self, cfg):
        _note_load("anomaly")
        return _Mapper()

    def make_detector(self, cfg):
        _note_load("detector")
        return _Detector()

    def cross_check(self, a, b, cfg):
        if not a["right lung"].any() or not b["right lung"].any():
            return "lung x-extent differs"
        return None

    def ground_study(self, *, study_id, image_id, x, report, anatomy, anomaly, boxes, cfg, organs=None):
        if "nogrounding" in image_id:
            raise ValueError("grounding failed on purpose")
        found = anomaly.anomaly_set(cfg.grounding.tau_ano)
        box_mask = np.zeros(x.shape, bool)
        for b in boxes:
            box_mask |= b.to_mask(x.shape)
        out = []
        for f in report.findings:
            region = anatomy.union(f.labels)
            mask = found & region & box_mask if f.presence == "positive" else None
            ok = mask is not None and mask.any()
            out.append(
                GroundedFinding(
                    finding=f,
                    lesion_type=f.lesion_type,
                    reported=list(f.labels),
                    grounded=list(f.labels) if ok else [],
                    empty=[],
                    mask=mask if ok else None,
                    drop_reason=None if ok else "no signal",
                )
            )
        return StudyGrounding(
            study_id=study_id,
            image_id=image_id,
            shape=x.shape,
            findings=out,
            empty_locations=["left upper zone lung"],
            ctr=0.4,
        )

    def generate_records(self, grounding, *, split, patient_id, image_path, cfg, absent_negatives=True):
        if "badrecords" in grounding.image_id:
            return [{"record_id": f"{grounding.image_id}:0", "image_id": grounding.image_id}]
        recs = []
        empty = np.zeros(grounding.shape, bool)
        for gf in grounding.findings:
            if gf.lesion_type is None:
                continue
            pos = gf.mask is not None
            mask = gf.mask if pos else empty
            recs.append(
                {
                    "record_id": f"{grounding.image_id}:{len(recs)}",
                    "study_id": grounding.study_id,
                    "image_id": grounding.image_id,
                    "patient_id": patient_id,
                    "image_path": image_path,
                    "split": split,
                    "lesion_type": gf.lesion_type,
                    "target": gf.lesion_type,
                    "instruction_type": "basic",
                    "polarity": "positive" if pos else "negative",
                    "locations": list(gf.reported),
                    "certainty": gf.finding.certainty if pos else "",
                    "instruction": f"Segment the {gf.lesion_type} in the {gf.reported[0]}.",
                    "answer": "yes" if pos else "no",
                    "mask": encode_rle(mask),
                    "mask_area": int(mask.sum()),
                    "height": grounding.shape[0],
                    "width": grounding.shape[1],
                    "finding_entity": gf.finding.entity,
                    "sentence_index": gf.finding.sentence_index,
                    "sentence": gf.finding.sentence,
                    "source_findings": "[]",
                    "paraphrase_of": "",
                    "persona": "",
                    "provenance": "{}",
                }
            )
        return recs


class FakeStagesRealLoader(FakeStages):
    """The fake stages with the real image loader (``cxrils.io.load_image``): for
    what the loader decides, such as a DICOM's orientation."""

    def load_image(self, path, cfg):
        from cxrils.pipeline.stages import BuiltinStages

        return BuiltinStages().load_image(path, cfg)


class FakeStagesRealRecords(FakeStages):
    """The fake stages with the real records (``cxrils.instructions.generate_records``):
    for the absent-type negatives, which the fake records leave out."""

    def generate_records(self, grounding, **kw):
        from cxrils.pipeline.stages import BuiltinStages

        return BuiltinStages().generate_records(grounding, **kw)
