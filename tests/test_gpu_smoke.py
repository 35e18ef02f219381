"""``python -m benchmarks.gpu_smoke`` at tiny size on the CPU, as CI runs it.

Every heavy adapter (RadEdit, HybridGNet, CXAS, the ONNX YOLO, the transformers LLM
structurer, ROSALIA) must build from weights written to a temporary folder, give a batch
that equals its single-image calls bit for bit, and ``cxrils generate`` with the paper's
backends must write records.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def test_gpu_smoke_tiny_on_cpu_passes_every_check(tmp_path):
    for module in ("diffusers", "onnxruntime", "peft", "sentencepiece"):
        pytest.importorskip(module)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_smoke", "--device", "cpu", "--work", str(tmp_path / "work")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, (out + proc.stderr)[-4000:]
    rows = dict(re.findall(r"^\| (radedit|hybridgnet|cxas|onnx|llm|rosalia) \|.*\| ([^|]+) \|$", out, re.M))
    assert set(rows) == {"radedit", "hybridgnet", "cxas", "onnx", "llm", "rosalia"}, out
    for name, status in rows.items():
        assert status.strip() == "ok", (name, status)
    for name in rows:  # batch vs singles: 0 on CPU
        assert re.search(rf"^\| {name} \| [^|]* \| 0 \|", out, re.M), name
    m = re.search(r"exit status 0, (\d+) records from 2 images .*: ok\.", out)
    assert m and int(m.group(1)) > 0, out
