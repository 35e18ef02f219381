"""The real pipeline steps on a real image: the anomaly map stays off the heart.

Regression test for a review finding: without ``lungs=``, the builtin anomaly mapper
treats the whole edit region (lungs + heart) as lung tissue and flags the normal
heart, so Algorithm 1's components could swallow it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cxrils.config import load_config
from cxrils.pipeline.study import Pipeline
from cxrils.sources import StudyInput


@pytest.mark.slow
def test_builtin_anomaly_map_is_zero_on_heart_outside_lungs(shared_data):
    image = shared_data / "jsrt_scr" / "images" / "JPCLN001.png"
    if not image.is_file():
        image = next(iter(sorted((shared_data / "jsrt_scr").rglob("JPCLN*.png"))), None)
    if image is None:
        pytest.skip("no JSRT image")
    pipe = Pipeline(load_config())
    study = StudyInput(
        study_id="s1",
        image_id="i1",
        patient_id="p1",
        image_path=Path(image),
        report="FINDINGS: Right lower lobe consolidation.",
        view="PA",
        split="train",
    )
    state = pipe.start(study, None)
    state = pipe.run_anatomy_x(state)
    state = pipe.run_anomaly(state)
    assert state.excluded is None, state.excluded
    lungs = state.anatomy_x.union(("right lung", "left lung"))
    heart_only = state.anatomy_x["heart"] & ~lungs
    assert heart_only.sum() > 1000
    assert float(state.anomaly.x_ano[heart_only].max()) == 0.0
