"""The Ray runner's per-step actor pools: GPUs and batch sizes from
``pipeline.ray.<step>``, on a local Ray instance that declares one logical GPU
standing in for a real one (the fake stages run on CPU), and ``cxrils generate
--runner ray`` against the local runner."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pipeline_helpers import FAKE, X_HAT, config, make_input, snapshot, subprocess_env

from cxrils.config import load_config
from cxrils.pipeline.ray_runner import ACTOR_STEPS, step_options
from cxrils.pipeline.runner import generate
from cxrils.pipeline.stages import RunError


def test_step_options_follow_the_config_and_refuse_what_the_cluster_lacks():
    cfg = load_config(
        None,
        [
            "pipeline.ray.anomaly.num_gpus=1",
            "pipeline.ray.anomaly.batch_size=8",
            "pipeline.ray.anomaly.num_cpus=1",
            "pipeline.ray.detector.actors=3",
        ],
    )
    opts = step_options(cfg, workers=2, cluster={"CPU": 16.0, "GPU": 2.0})
    assert set(opts) == set(ACTOR_STEPS) | {"start", "finish"}
    assert opts["anomaly"] == {"num_cpus": 1.0, "num_gpus": 1.0, "actors": 2, "batch_size": 8}
    # the others share the 16 CPUs with the tasks: 2 + 3 + 2 actors, 2 x 2 tasks, 1 driver
    assert opts["detector"]["actors"] == 3 and opts["detector"]["num_cpus"] == pytest.approx(16 / 12)
    assert opts["anatomy_x"]["num_gpus"] == 0.0 and opts["anatomy_x"]["batch_size"] == 1
    with pytest.raises(RunError, match="pipeline.ray.anomaly: 2 actor\\(s\\) x num_gpus=1 exceed the cluster's 1 GPUs"):
        step_options(cfg, workers=2, cluster={"CPU": 16.0, "GPU": 1.0})
    with pytest.raises(RunError, match="num_gpus=1 exceed the cluster's 0 GPUs"):
        step_options(cfg, workers=1, cluster={"CPU": 4.0})
    big = load_config(None, ["pipeline.ray.detector.num_cpus=3"])
    with pytest.raises(RunError, match="num_cpus=3 exceed the cluster's 2 CPUs"):
        step_options(big, workers=1, cluster={"CPU": 2.0})


ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed")


@pytest.fixture(scope="module")
def ray_with_a_gpu(tmp_path_factory):
    batches = tmp_path_factory.mktemp("batches")
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
    mp.setenv("CXRILS_FAKE_BATCHES", str(batches))
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield batches
    ray.shutdown()
    mp.undo()


@pytest.mark.slow
def test_gpu_step_gets_the_gpu_and_batches_without_changing_the_dataset(tmp_path, ray_with_a_gpu):
    batches = ray_with_a_gpu
    pairs = make_input(tmp_path / "in", n=10)
    generate(pairs, tmp_path / "local", config(), stages=FAKE, runner="local")
    for p in batches.iterdir():
        p.unlink()
    cfg = load_config(
        None,
        X_HAT
        + [
            "pipeline.ray.anomaly.num_gpus=1",
            "pipeline.ray.anomaly.batch_size=3",
            "pipeline.ray.anatomy_x.batch_size=2",
        ],
    )
    generate(pairs, tmp_path / "ray", cfg, stages=FAKE, runner="ray", workers=1)
    ray_snap, local_snap = snapshot(tmp_path / "ray"), snapshot(tmp_path / "local")
    assert ray_snap["records"] == local_snap["records"] and ray_snap["images"] == local_snap["images"]
    assert ray_snap["summary"] == local_snap["summary"]
    seen = [p.name.split("-") for p in batches.iterdir()]
    anomaly = [(int(n), gpus) for stage, n, gpus, _ in seen if stage == "anomaly"]
    anatomy = [(int(n), gpus) for stage, n, gpus, _ in seen if stage == "anatomy"]
    assert anomaly and all(gpus == "0" for _, gpus in anomaly)  # the anomaly actor holds the GPU
    assert all(gpus == "none" for _, gpus in anatomy)  # the others hold none
    assert max(n for n, _ in anomaly) <= 3 and max(n for n, _ in anomaly) > 1  # batched, up to batch_size
    assert max(n for n, _ in anatomy) <= 2


@pytest.mark.slow
def test_cli_generate_runner_ray_equals_runner_local(tmp_path):
    pairs = make_input(tmp_path / "in", n=8)
    env = subprocess_env()
    common = [
        sys.executable,
        "-m",
        "cxrils",
        "generate",
        str(pairs),
        "--stages",
        FAKE,
        "--no-progress",
        "--set",
        "backends.anatomy_on_x_hat=yes",
    ]
    local = subprocess.run(common + ["-o", str(tmp_path / "local")], env=env, capture_output=True, text=True)
    assert local.returncode == 0, local.stderr
    ray_run = subprocess.run(
        common
        + [
            "-o",
            str(tmp_path / "ray"),
            "--runner",
            "ray",
            "--set",
            "pipeline.ray.anomaly.batch_size=4",
            "--set",
            "pipeline.ray.detector.batch_size=3",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert ray_run.returncode == 0, ray_run.stderr
    a, b = snapshot(tmp_path / "local"), snapshot(tmp_path / "ray")
    assert a["records"] == b["records"] and a["images"] == b["images"] and a["summary"] == b["summary"]
