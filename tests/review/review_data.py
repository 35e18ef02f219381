"""A small finalized dataset for the review tests: the hand-built groundings of
tests/instructions/ils_studies.py through the real record generator and dataset writer,
each study with its grounding file (Algorithm 1 box checks included) as ``cxrils
generate`` writes it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "instructions"))

from ils_studies import multi_lesion_study, no_cardiomegaly_study  # noqa: E402

from cxrils.config import Config  # noqa: E402
from cxrils.dataset import DatasetWriter  # noqa: E402
from cxrils.grounding.algorithm import BoxCheck  # noqa: E402
from cxrils.instructions import generate_records  # noqa: E402
from cxrils.pipeline.study import grounding_record  # noqa: E402
from cxrils.types import LesionBox, StructuredReport  # noqa: E402

SPLITS = ("train", "train", "validate", "test")


def _checks(mask: np.ndarray) -> list[dict]:
    """A kept box over the mask and a dropped one (c1 and c3 failed) elsewhere."""
    rows, cols = np.nonzero(mask)
    kept = LesionBox(
        float(cols.min()), float(rows.min()), float(cols.max() + 1), float(rows.max() + 1), 0.8, "Lung Opacity"
    )
    far = LesionBox(40.0, 2.0, 60.0, 10.0, 0.3, "Lung Opacity")
    return [
        BoxCheck(kept, 0.6, 0.8, 0.7, 0.3, 0.0, True, True, True, True, 1).to_dict(),
        BoxCheck(far, 0.0, 0.3, 0.0, 0.0, 0.1, False, True, False, True).to_dict(),
    ]


def build_dataset(root: Path, n_studies: int = 8) -> Path:
    """Write and finalize ``n_studies`` synthetic studies (64 x 64 images) in ``root``."""
    with DatasetWriter(root, {"code_version": "test", "note": "review test fixture"}) as w:
        for i in range(n_studies):
            g = multi_lesion_study() if i % 2 == 0 else no_cardiomegaly_study(0.40)
            g.image_id, g.study_id = f"im{i}", f"s{i}"
            for gf in g.findings:
                if gf.mask is not None and gf.lesion_type != "cardiomegaly":
                    gf.box_checks = _checks(gf.mask)
            g.provenance = {"grounding": {"tau_anatomy": 0.25, "tau_conf": 0.2, "tau_signal": 0.2, "tau_size": 0.1}}
            x = ((np.arange(64)[:, None] * 3 + np.arange(64)[None, :] + 9 * i) % 256).astype(np.uint8)
            records = generate_records(
                g, split=SPLITS[i % len(SPLITS)], patient_id=f"p{i}", image_path="", cfg=Config()
            )
            report = StructuredReport(
                g.study_id,
                "findings",
                " ".join(gf.finding.sentence for gf in g.findings),
                findings=[gf.finding for gf in g.findings],
            )
            w.commit_study(g.image_id, x, records, grounding=grounding_record(g, report))
        w.finalize()
    return root
