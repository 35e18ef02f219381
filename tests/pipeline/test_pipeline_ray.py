"""``--runner ray`` on a local Ray instance started by the test: same dataset as local."""

from __future__ import annotations

import pytest
from pipeline_helpers import (
    ABSENT_OF_REPORT_0,
    FAKE,
    REAL_RECORDS,
    absent_negatives_by_image,
    config,
    make_input,
    snapshot,
    study_of_three,
    subprocess_env,
)

from cxrils.pipeline.runner import generate

ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed")


@pytest.fixture(scope="module")
def loads(tmp_path_factory):
    return tmp_path_factory.mktemp("loads")


@pytest.fixture(scope="module")
def local_ray(loads):
    # Ray workers inherit the environment at init: let them import the fake stages
    # and count model loads.
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
    mp.setenv("CXRILS_FAKE_LOADS", str(loads))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    mp.undo()


@pytest.mark.slow
def test_ray_runner_equals_local_runner(tmp_path, local_ray, loads):
    pairs = make_input(tmp_path / "in", n=10)
    generate(pairs, tmp_path / "local", config(), stages=FAKE, runner="local")
    for p in loads.iterdir():
        p.unlink()
    summary = generate(pairs, tmp_path / "ray", config(), stages=FAKE, runner="ray", workers=1)
    assert summary["runner"] == "ray" and summary["studies"]["total"] == 17
    assert snapshot(tmp_path / "ray") == snapshot(tmp_path / "local")
    # One actor pool per model-backed step: anatomy twice (on x and on x_hat), anomaly, detector.
    names = sorted(p.name.split("-")[0] for p in loads.iterdir())
    assert names == ["anatomy", "anatomy", "anomaly", "detector"]


@pytest.mark.slow
def test_ray_runner_resumes_a_local_run(tmp_path, local_ray):
    pairs = make_input(tmp_path / "in", n=6)
    generate(pairs, tmp_path / "full", config(), stages=FAKE, runner="local")
    generate(pairs, tmp_path / "mixed", config(), stages=FAKE, runner="local", limit=4)
    generate(pairs, tmp_path / "mixed", config(), stages=FAKE, runner="ray", workers=2)
    assert snapshot(tmp_path / "mixed") == snapshot(tmp_path / "full")


@pytest.mark.slow
def test_ray_runner_gives_a_study_s_absent_negatives_to_its_first_image_not_excluded(tmp_path, local_ray):
    inp = study_of_three(tmp_path / "in")
    generate(inp, tmp_path / "local", config(), stages=REAL_RECORDS, runner="local")
    generate(inp, tmp_path / "ray", config(), stages=REAL_RECORDS, runner="ray", workers=2)
    assert snapshot(tmp_path / "ray") == snapshot(tmp_path / "local")
    assert absent_negatives_by_image(tmp_path / "ray") == {"im000": list(ABSENT_OF_REPORT_0)}
