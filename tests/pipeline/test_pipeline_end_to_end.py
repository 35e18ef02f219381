"""The real stages end to end: ``cxrils demo`` on the first public pairs of
``../shared/data`` (built-in backends; the anatomy weights ship in the package)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.dataset import COLUMNS, read_manifest, read_records


@pytest.mark.slow
@pytest.mark.needs_data
def test_demo_on_real_pairs(shared_data, tmp_path):
    out = tmp_path / "demo"
    res = CliRunner().invoke(app, ["demo", "--data", str(shared_data), "-o", str(out), "--limit", "4"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "generate_summary.json").read_text())
    assert summary["studies"]["total"] == 4
    assert summary["studies"]["done"] + summary["studies"]["excluded"] == 4
    df = read_records(out)
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == summary["records"]["total"] == read_manifest(out)["n_records"]
    assert set(df["image_id"]) <= {
        "CXR1900_IM-0584-1001",
        "CXR7_IM-2263-1001",
        "CXR3_IM-1384-1001",
        "CXR25_IM-1024-2001",
    }
    for _, r in df.iterrows():
        assert (out / r["image_path"]).is_file()
        assert list(r["mask"]["size"]) == [r["height"], r["width"]]
    assert "instruction-answer pairs" in res.output and f"results: {out.resolve()}" in res.output
