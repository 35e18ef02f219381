"""Kill a real ``cxrils generate`` process with SIGKILL mid-run, rerun the same
command, and compare with an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from pipeline_helpers import FAKE, X_HAT, make_input, snapshot, subprocess_env


def _cmd(pairs, out, workers):
    return [
        sys.executable,
        "-m",
        "cxrils",
        "generate",
        str(pairs),
        "-o",
        str(out),
        "--stages",
        FAKE,
        "--workers",
        str(workers),
        "--no-progress",
        "--set",
        X_HAT[0],
    ]


def _committed(out) -> int:
    studies = out / "pipeline" / "studies"
    return len(list(studies.glob("*.json"))) if studies.is_dir() else 0


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_then_rerun_equals_uninterrupted_run(tmp_path, workers):
    pairs = make_input(tmp_path / "in", n=16)
    env = subprocess_env()
    ref = tmp_path / "ref"
    subprocess.run(_cmd(pairs, ref, 1), env=env, check=True, capture_output=True, timeout=300)

    out = tmp_path / "out"
    env_slow = {**env, "CXRILS_FAKE_DELAY": "0.4"}
    kills = 0
    for target in (4, 11):  # two kills at different points of the run
        proc = subprocess.Popen(
            _cmd(pairs, out, workers),
            env=env_slow,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 240
        while _committed(out) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)  # the whole job: the CLI and its workers
        proc.wait(timeout=30)
        kills += 1
        assert target <= _committed(out) < 22
    assert kills == 2
    assert not (out / "generate_summary.json").exists()
    done = subprocess.run(_cmd(pairs, out, workers), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "images: 23  done: 16  excluded: 7" in done.stdout
    assert snapshot(out) == snapshot(ref)
