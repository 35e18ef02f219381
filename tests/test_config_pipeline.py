"""Nested configuration tables (``[pipeline.ray.<step>]``), their ``--set`` form and
validation, and ``backends.precision``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.config import ConfigError, config_from_dict, dump_toml, load_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_nested_toml_tables_and_dotted_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[pipeline.ray.anomaly]\nnum_gpus = 1\nbatch_size = 8\n\n"
        '[pipeline.ray.detector]\nnum_gpus = 0.25\n\n[backends]\nprecision = "bf16"\n'
    )
    cfg = load_config(path, ["pipeline.ray.anomaly.actors=2", "pipeline.ray.anatomy_x.batch_size=4"])
    ray = cfg.pipeline.ray
    assert (ray.anomaly.num_gpus, ray.anomaly.batch_size, ray.anomaly.actors) == (1.0, 8, 2)
    assert isinstance(ray.anomaly.num_gpus, float) and isinstance(ray.anomaly.batch_size, int)
    assert ray.detector.num_gpus == 0.25 and ray.anatomy_x.batch_size == 4
    assert ray.anatomy_x_hat.batch_size == 1 and ray.anatomy_x_hat.num_gpus == 0.0  # defaults
    assert cfg.backends.precision == "bf16"
    again = config_from_dict(tomllib.loads(dump_toml(cfg)))
    assert again == cfg


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("pipeline.ray.nosuch.num_gpus=1", "unknown config section 'pipeline.ray.nosuch'"),
        ("pipeline.ray.anomaly.gpus=1", "unknown config key pipeline.ray.anomaly.gpus"),
        ("pipeline.ray.anomaly=3", "must be a table"),
        ("pipeline.ray.anomaly.num_gpus=-1", ">= 0"),
        ("pipeline.ray.anomaly.num_gpus=one", "expected float"),
        ("pipeline.ray.anomaly.batch_size=0", "batch_size: must be >= 1"),
        ("pipeline.ray.anomaly.batch_size=2.5", "expected int"),
        ("backends.precision=fp8", "precision: must be one of"),
        ("anomaly.radedit_eta=0", r"radedit_eta: must lie in \(0, 1\]"),
        ("pipeline.=1", "not of the form"),
        ("grounding.tau_ano.x=1", "unknown config section 'grounding.tau_ano'"),
    ],
)
def test_bad_nested_overrides_are_refused(item: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config(None, [item])


@pytest.mark.parametrize(
    ("toml", "match"),
    [
        ("[pipeline]\nray = 3\n", "pipeline.ray must be a table"),
        ("[pipeline.ray.anomaly]\nbatch_size = 0\n", "batch_size"),
        ("[pipeline.ray.anomaly.num_gpus]\nx = 1\n", "unknown config section 'pipeline.ray.anomaly.num_gpus'"),
    ],
)
def test_bad_nested_toml_is_refused(tmp_path: Path, toml: str, match: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=match):
        load_config(path)


def test_config_show_prints_nested_tables_and_cli_refuses_bad_keys() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["config", "show", "--set", "pipeline.ray.anomaly.num_gpus=2"])
    assert result.exit_code == 0, result.output
    shown = tomllib.loads(result.output)
    assert shown["pipeline"]["ray"]["anomaly"]["num_gpus"] == 2.0
    bad = runner.invoke(app, ["config", "show", "--set", "pipeline.ray.anomaly.gpus=2"])
    assert bad.exit_code == 2 and "pipeline.ray.anomaly.gpus" in bad.output
