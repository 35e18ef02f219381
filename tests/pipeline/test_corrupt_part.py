"""A corrupt part file (``parts/{image_id}.parquet``): ``cxrils stats`` and ``generate``
say in one line which file and how to recover, and following that advice gives the
dataset of an uninterrupted run."""

from __future__ import annotations

import pytest
from pipeline_helpers import FAKE, config, make_input, snapshot
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.dataset import DatasetError
from cxrils.pipeline.runner import generate


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_part_file_is_named_with_the_way_out(tmp_path):
    pairs = make_input(tmp_path / "in")
    full, ds = tmp_path / "full", tmp_path / "ds"
    generate(pairs, full, config(), stages=FAKE)
    generate(pairs, ds, config(), stages=FAKE)
    part = sorted((ds / "parts").glob("*.parquet"))[0]
    _truncate(part)

    res = CliRunner().invoke(app, ["stats", str(ds), "--no-plot"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert lines[0].startswith(f"error: {part}: unreadable part file")
    assert "delete this file and rerun cxrils generate" in lines[0] and "the result is identical" in lines[0]

    with pytest.raises(DatasetError, match="delete this file and rerun cxrils generate") as err:
        generate(pairs, ds, config(), stages=FAKE)  # resumes, then finalize reads every part
    assert str(err.value).startswith(f"{part}: unreadable part file")

    part.unlink()  # the advice
    generate(pairs, ds, config(), stages=FAKE)
    assert snapshot(ds) == snapshot(full)
