"""``BuiltinStages.weight_files``: the weight files a run hashes into its provenance.

The dict is compared by a resume (``provenance.json``), so its labels, paths and order
must not change when the code that assembles it does. The expected dicts below are
written out by hand from what each backend loads (the listing of commit 8787733, where
one function named every backend's paths); the test checks every backend of every stage
and the cases where a path is unset or a name unknown."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from pipeline_helpers import subprocess_env

from cxrils.config import load_config
from cxrils.pipeline.stages import BuiltinStages

SHIPPED = Path(str(resources.files("cxrils") / "weights"))
ANATOMY = str(SHIPPED / "anatomy_builtin.safetensors")
LESION_MAP = str(SHIPPED / "anomaly_builtin.safetensors")
DETECTOR = str(SHIPPED / "detector_builtin.safetensors")
ATLAS = str(SHIPPED / "anomaly_atlas.json")
DEFAULT = {"anatomy (builtin)": [ANATOMY], "anomaly (builtin)": [LESION_MAP], "detector (builtin)": [DETECTOR]}

CASES: list[tuple[str, list[str], dict[str, list[str]]]] = [
    ("default", [], DEFAULT),
    (
        "cxas",
        ["backends.anatomy=cxas", "backends.cxas_weights=/w/cxas.pth"],
        {"anatomy (cxas)": ["/w/cxas.pth"], "anomaly (builtin)": [LESION_MAP], "detector (builtin)": [DETECTOR]},
    ),
    (
        "cxas without weights",
        ["backends.anatomy=cxas"],
        {"anatomy (cxas)": [], "anomaly (builtin)": [LESION_MAP], "detector (builtin)": [DETECTOR]},
    ),
    (
        "paper's anatomy pair",
        [
            "backends.anatomy=cxas",
            "backends.cxas_weights=/w/cxas.pth",
            "backends.anatomy_edit_region=hybridgnet",
            "backends.hybridgnet_dir=/w/hg-code",
            "backends.hybridgnet_weights=/w/hg.pt",
        ],
        {
            "anatomy (cxas)": ["/w/cxas.pth"],
            "anatomy (hybridgnet)": ["/w/hg.pt"],
            "anomaly (builtin)": [LESION_MAP],
            "detector (builtin)": [DETECTOR],
        },
    ),
    ("edit region = anatomy", ["backends.anatomy_edit_region=builtin"], DEFAULT),
    (
        "radedit",
        [
            "backends.anomaly=radedit",
            "backends.radedit_dir=/w/radedit",
            "anomaly.radedit_vae_dir=/w/vae",
            "anomaly.radedit_text_encoder_dir=/w/biovil",
        ],
        {
            "anatomy (builtin)": [ANATOMY],
            "anomaly (radedit)": ["/w/radedit", "/w/vae", "/w/biovil"],
            "detector (builtin)": [DETECTOR],
        },
    ),
    (
        "radedit, only the unet",
        ["backends.anomaly=radedit", "backends.radedit_dir=/w/radedit"],
        {"anatomy (builtin)": [ANATOMY], "anomaly (radedit)": ["/w/radedit"], "detector (builtin)": [DETECTOR]},
    ),
    (
        "atlas shipped",
        ["backends.anomaly=atlas"],
        {"anatomy (builtin)": [ANATOMY], "anomaly (atlas)": [ATLAS], "detector (builtin)": [DETECTOR]},
    ),
    (
        "atlas own",
        ["backends.anomaly=atlas", "anomaly.atlas_path=/w/atlas.json"],
        {"anatomy (builtin)": [ANATOMY], "anomaly (atlas)": ["/w/atlas.json"], "detector (builtin)": [DETECTOR]},
    ),
    (
        "retrained builtins",
        ["anomaly.builtin_weights=/w/map.safetensors", "detection.builtin_weights=/w/det.safetensors"],
        {
            "anatomy (builtin)": [ANATOMY],
            "anomaly (builtin)": ["/w/map.safetensors"],
            "detector (builtin)": ["/w/det.safetensors"],
        },
    ),
    (
        "onnx",
        ["backends.detector=onnx", "backends.onnx_detector=/w/yolo.onnx"],
        {"anatomy (builtin)": [ANATOMY], "anomaly (builtin)": [LESION_MAP], "detector (onnx)": ["/w/yolo.onnx"]},
    ),
    (
        "onnx without a file",
        ["backends.detector=onnx"],
        {"anatomy (builtin)": [ANATOMY], "anomaly (builtin)": [LESION_MAP], "detector (onnx)": []},
    ),
    (
        "llm structurer",
        ["backends.report_structurer=llm", "backends.llm_model_path=/w/llm"],
        {**DEFAULT, "llm": ["/w/llm"]},
    ),
    ("llm mapper", ["backends.location_mapper=llm", "backends.llm_model_path=/w/llm"], {**DEFAULT, "llm": ["/w/llm"]}),
    (
        "llm both",
        ["backends.report_structurer=llm", "backends.location_mapper=llm", "backends.llm_model_path=/w/llm"],
        {**DEFAULT, "llm": ["/w/llm"]},
    ),
    ("llm on a server", ["backends.report_structurer=llm", "backends.llm_base_url=http://127.0.0.1:8000/v1"], DEFAULT),
    ("llm path unused", ["backends.llm_model_path=/w/llm"], DEFAULT),
    ("paraphrase", ["instructions.paraphrase=true", "backends.llm_model_path=/w/llm"], {**DEFAULT, "llm": ["/w/llm"]}),
    (
        "unknown names",
        ["backends.anatomy=nope", "backends.anomaly=nope", "backends.detector=nope", "backends.report_structurer=nope"],
        {"anatomy (nope)": [], "anomaly (nope)": [], "detector (nope)": []},
    ),
    (
        "every heavy backend",
        [
            "backends.anatomy=cxas",
            "backends.cxas_weights=/w/cxas.pth",
            "backends.anatomy_edit_region=hybridgnet",
            "backends.hybridgnet_weights=/w/hg.pt",
            "backends.anomaly=radedit",
            "backends.radedit_dir=/w/radedit",
            "anomaly.radedit_vae_dir=/w/vae",
            "anomaly.radedit_text_encoder_dir=/w/biovil",
            "backends.detector=onnx",
            "backends.onnx_detector=/w/yolo.onnx",
            "backends.report_structurer=llm",
            "backends.location_mapper=llm",
            "instructions.paraphrase=true",
            "backends.llm_model_path=/w/llm",
        ],
        {
            "anatomy (cxas)": ["/w/cxas.pth"],
            "anatomy (hybridgnet)": ["/w/hg.pt"],
            "anomaly (radedit)": ["/w/radedit", "/w/vae", "/w/biovil"],
            "detector (onnx)": ["/w/yolo.onnx"],
            "llm": ["/w/llm"],
        },
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_weight_files_are_those_of_the_chosen_backends(overrides, expected):
    got = BuiltinStages().weight_files(load_config(None, overrides))
    assert list(got.items()) == list(expected.items())  # labels, paths and their order


def test_listing_needs_no_optional_dependency():
    """The heavy backends' packages (diffusers, transformers, onnxruntime, cxas,
    torch_geometric, httpx) are imported when a backend is built, never to list its
    files: in a process where importing them fails, the listing of the paper's backends
    is the same."""
    blocked = ["diffusers", "transformers", "onnxruntime", "cxas", "torch_geometric", "httpx"]
    overrides, expected = CASES[-1][1:]
    code = (
        f"import json, sys\n"
        f"sys.modules.update(dict.fromkeys({blocked!r}))\n"  # None: `import name` raises ImportError
        "from cxrils.config import load_config\n"
        "from cxrils.pipeline.stages import BuiltinStages\n"
        f"print(json.dumps(BuiltinStages().weight_files(load_config(None, {overrides!r}))))\n"
        "try:\n    import diffusers\nexcept ImportError:\n    print('blocked')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), timeout=120
    )
    assert out.returncode == 0, out.stderr
    listing, block = out.stdout.splitlines()
    assert json.loads(listing) == expected and block == "blocked"
