"""A resumed run never mixes versions: the code, configuration and weight files a
dataset was started with are recorded, a resume with others is refused with what
changed, and one dataset folder has one writer at a time."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
from pipeline_helpers import FAKE, config, make_input, subprocess_env

import cxrils
from cxrils.config import load_config
from cxrils.dataset import read_manifest
from cxrils.pipeline.runner import RunError, generate


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.needs_data
def test_resume_after_changing_a_weight_file_is_refused(tmp_path, shared_data):
    """The builtin stages (real wiring): the weights they load (anatomy network, lesion
    map, detector) are hashed; changing the lesion map's file between two runs of one
    dataset stops the second with the file and both hashes."""
    shipped = resources.files("cxrils") / "weights"
    lesion_map = tmp_path / "lesion_map.safetensors"
    shutil.copy(shipped / "anomaly_builtin.safetensors", lesion_map)
    cfg = load_config(None, [f"anomaly.builtin_weights={lesion_map}"])
    pairs = shared_data / "pairs" / "iu_pairs.csv"
    out = tmp_path / "ds"
    generate(pairs, out, cfg, limit=1)
    weights = read_manifest(out)["provenance"]["weights"]
    anatomy = Path(str(shipped / "anatomy_builtin.safetensors"))
    detector = Path(str(shipped / "detector_builtin.safetensors"))
    assert weights["anatomy (builtin)"] == {"cxrils/weights/anatomy_builtin.safetensors": _sha(anatomy)}
    assert weights["detector (builtin)"] == {"cxrils/weights/detector_builtin.safetensors": _sha(detector)}
    old = _sha(lesion_map)
    assert weights["anomaly (builtin)"] == {str(lesion_map): old}
    data = bytearray(lesion_map.read_bytes())
    data[-1] ^= 0x01  # a retrained lesion map (one weight changed)
    lesion_map.write_bytes(bytes(data))
    with pytest.raises(RunError) as info:
        generate(pairs, out, cfg, limit=2)
    message = str(info.value)
    assert f'weights.anomaly (builtin).{lesion_map}: "{old[:23]}' in message
    assert f'now "{_sha(lesion_map)[:23]}' in message
    assert f"to start over, delete {out} or write to a new folder (-o)" in message
    assert len(list((out / "parts").glob("*.parquet"))) + len(list((out / "excluded").glob("*.json"))) == 1


def test_atlas_backend_hashes_the_atlas(tmp_path):
    """backends.anomaly=atlas lists the atlas file it reads (no run needed)."""
    from cxrils.pipeline.stages import BuiltinStages

    atlas = tmp_path / "atlas.json"
    atlas.write_text("{}")
    cfg = load_config(None, ["backends.anomaly=atlas", f"anomaly.atlas_path={atlas}"])
    assert BuiltinStages().weight_files(cfg)["anomaly (atlas)"] == [str(atlas)]


def test_provenance_records_the_code_version_and_refuses_another(tmp_path, monkeypatch):
    pairs = make_input(tmp_path / "in", n=3, bad=False)
    out = tmp_path / "ds"
    generate(pairs, out, config(), stages=FAKE, limit=2)
    prov = read_manifest(out)["provenance"]
    assert prov["cxrils_version"] == cxrils.__version__ and prov["stages"] == FAKE
    assert len(prov["code_sha256"]) == 64 and prov["config"] == json.loads(json.dumps(config().dataset_settings()))
    assert "git_commit" in prov and prov["weights"] == {}  # the fake stages load no weights
    assert json.loads((out / "provenance.json").read_text()) == prov
    monkeypatch.setattr(cxrils, "__version__", "99.0")
    with pytest.raises(RunError, match=r"cxrils_version: \"[^\"]+\", now \"99\.0\""):
        generate(pairs, out, config(), stages=FAKE)
    monkeypatch.undo()
    monkeypatch.setattr("cxrils.pipeline.provenance.code_sha256", lambda: "0" * 64)
    with pytest.raises(RunError, match=r"code_sha256: .*now \"0000"):
        generate(pairs, out, config(), stages=FAKE)
    monkeypatch.undo()
    import importlib.metadata as md

    assert prov["dependencies"]["numpy"] == md.version("numpy")  # library versions are recorded
    real = md.version
    monkeypatch.setattr(md, "version", lambda d: "0.0.1" if d == "numpy" else real(d))
    with pytest.raises(RunError, match=r"dependencies\.numpy: .*now \"0\.0\.1\""):
        generate(pairs, out, config(), stages=FAKE)
    monkeypatch.undo()
    # the serving and scheduling libraries change no dataset: another version of them resumes
    assert "fastapi" not in prov["dependencies"] and "ray" not in prov["dependencies"]
    monkeypatch.setattr(md, "version", lambda d: "0.0.1" if d in ("fastapi", "ray") else real(d))
    generate(pairs, out, config(), stages=FAKE)
    monkeypatch.undo()
    monkeypatch.setattr("cxrils.pipeline.provenance.git_commit", lambda: "f" * 40)
    generate(pairs, out, config(), stages=FAKE, limit=2)  # another commit of the same package code resumes
    monkeypatch.undo()
    generate(pairs, out, config(), stages=FAKE)  # the same versions resume
    assert read_manifest(out)["n_images"] == 3
    assert read_manifest(out)["provenance"]["git_commit"] == prov["git_commit"]  # as the folder was started


def test_resume_may_change_how_a_run_executes_but_not_what_it_writes(tmp_path):
    """Ray batch sizes and GPUs (``pipeline.*``) never change the records, so a resume
    may change them; a threshold does change them, so a resume with another is refused."""
    pairs = make_input(tmp_path / "in", n=3, bad=False)
    out = tmp_path / "ds"
    generate(pairs, out, config(), stages=FAKE, limit=1)
    assert "pipeline" not in read_manifest(out)["provenance"]["config"]
    faster = config()
    faster.pipeline.ray.anomaly.batch_size = 8
    faster.pipeline.ray.anomaly.num_gpus = 1.0
    generate(pairs, out, faster, stages=FAKE, limit=2)
    assert read_manifest(out)["n_images"] == 2
    other = config()
    other.grounding.tau_ano = 0.2
    with pytest.raises(RunError, match=r"grounding"):
        generate(pairs, out, other, stages=FAKE)


def test_two_processes_cannot_write_one_dataset_folder(tmp_path):
    pairs = make_input(tmp_path / "in", n=2, bad=False)
    out = tmp_path / "ds"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom cxrils.dataset import DatasetWriter\n"
            f"w = DatasetWriter({str(out)!r}, {{}})\nprint('holding', flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(RunError, match="another process is writing this dataset"):
            generate(pairs, out, config(), stages=FAKE)
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    # the lock went with the process; the holder committed nothing under its {} provenance
    assert generate(pairs, out, config(), stages=FAKE)["studies"]["total"] == 2
