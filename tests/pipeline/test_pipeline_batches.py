"""Pipeline steps on batches of studies (what a Ray actor runs): the same states as
one study at a time, one bad image never excludes the rest of its batch, and a
configuration error still stops the run."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from pipeline_helpers import FAKE, config, make_input

from cxrils.pipeline.stages import StageLoadError
from cxrils.pipeline.study import Pipeline
from cxrils.sources import read_inputs


def started(tmp_path):
    pipe = Pipeline(config(), FAKE)
    studies = list(read_inputs(make_input(tmp_path / "in", n=8)))
    reports = pipe.structure(studies)
    return pipe, [pipe.start(s, reports[(s.study_id, s.report)]) for s in studies]


def as_bytes(state):
    return pickle.dumps(state)


def test_batched_steps_give_every_study_its_single_result(tmp_path):
    pipe, states = started(tmp_path)
    singles = copy.deepcopy(states)
    for step in pipe.image_steps:
        singles = [step(s) for s in singles]
        states = step(states)  # the whole list as one batch
    assert [s.excluded for s in states] == [s.excluded for s in singles]
    assert {s.excluded for s in states if s.excluded} >= {
        "qc_crosscheck: lung x-extent differs",
        "view_not_frontal: LATERAL",
    }
    for b, s in zip(states, singles):
        assert as_bytes(b) == as_bytes(s)
    results = [pipe.finish(s) for s in states]
    assert sum(r.excluded is None for r in results) >= 6


class _Flaky:
    """A segmenter whose batch call fails when any image is all 7s (a 'bad' image)."""

    def __init__(self, inner):
        self.inner = inner

    def segment(self, x):
        if (x == 7).all():
            raise ValueError("cannot segment this image")
        return self.inner.segment(x)

    def segment_batch(self, xs):
        return [self.segment(x) for x in xs]


def test_one_bad_image_is_excluded_alone_and_configuration_errors_stop(tmp_path):
    pipe, states = started(tmp_path)
    pipe.edit_region_segmenter = _Flaky(pipe.anatomy_segmenter)
    live = [s for s in states if s.x is not None]
    live[2].x = np.full_like(live[2].x, 7)
    alone = copy.deepcopy(live)
    for s in alone:  # each image on its own: the verdicts a batch must reproduce
        pipe.run_anatomy_x(s)
    pipe.run_anatomy_x(live)
    assert live[2].excluded == "error:anatomy: ValueError: cannot segment this image"
    assert [s.excluded for s in live] == [s.excluded for s in alone]
    # the rest keep their anatomy; the all-black image fails the frontal-view check
    assert [s.study.image_id for i, s in enumerate(live) if i != 2 and s.excluded] == ["black"]
    assert all(s.anatomy_x is not None for i, s in enumerate(live) if i != 2)

    class Broken:
        def map(self, *a, **k):
            raise StageLoadError("weights missing")

    pipe.anomaly_mapper = Broken()
    with pytest.raises(StageLoadError, match="weights missing"):
        pipe.run_anomaly([s for s in live if s.excluded is None])


def test_a_backend_returning_the_wrong_number_of_results_fails_the_step(tmp_path):
    pipe, states = started(tmp_path)

    class Short:
        def segment_batch(self, xs):
            return []

    pipe.edit_region_segmenter = Short()
    live = [s for s in states if s.x is not None][:2]
    pipe.run_anatomy_x(live)
    assert all(s.excluded.startswith("error:anatomy: ValueError: zip()") for s in live)
