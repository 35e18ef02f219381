"""cxrils.config: Table 7 defaults, TOML loading, overrides, validation, `cxrils config show`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.config import Config, ConfigError, apply_overrides, config_from_dict, dump_toml, load_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_defaults_are_table_7() -> None:
    g = Config().grounding
    # Paper Table 7 (Appendix A.4), written out here independently of config.py.
    assert (g.tau_anatomy, g.tau_conf, g.tau_conf_edema, g.tau_signal, g.tau_size, g.tau_ano, g.tau_ano_edema) == (
        0.25,
        0.20,
        0.01,
        0.20,
        0.10,
        0.10,
        0.01,
    )
    assert g.tau_conf_for("edema") == 0.01 and g.tau_conf_for("pneumonia") == 0.20
    assert g.tau_ano_for("edema") == 0.01 and g.tau_ano_for("effusion") == 0.10
    qc = Config().qc
    assert qc.ctr_max_cardiomegaly_negative == 0.45  # Appendix D.3
    assert Config().instructions.max_absent_negatives_per_type == 1  # Appendix C.2
    b = Config().backends
    assert (b.report_structurer, b.location_mapper) == ("rules", "lexicon")  # local, no remote API by default


def test_toml_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[grounding]\ntau_ano = 0.05\n\n[backends]\nanatomy = "cxas"\ncxas_weights = "/w"\n[qc]\nfrontal_only = false\n'
    )
    cfg = load_config(path, ["grounding.tau_conf=0.3", "io.max_pixels=1000", "qc.frontal_only=true"])
    assert cfg.grounding.tau_ano == 0.05 and cfg.grounding.tau_conf == 0.3
    assert cfg.backends.anatomy == "cxas" and cfg.backends.cxas_weights == "/w"
    assert cfg.io.max_pixels == 1000 and isinstance(cfg.io.max_pixels, int)
    assert cfg.qc.frontal_only is True  # the override comes after the file
    assert cfg.grounding.tau_size == 0.10  # untouched default
    # Round trip through TOML text.
    again = config_from_dict(tomllib.loads(dump_toml(cfg)))
    assert again == cfg and again.to_json() == cfg.to_json()


@pytest.mark.parametrize(
    ("toml", "match"),
    [
        ("[grounding]\ntau_typo = 0.1\n", "unknown config key grounding.tau_typo"),
        ("[nosuch]\nx = 1\n", "unknown config section"),
        ("grounding = 3\n", "must be a table"),
        ('[grounding]\ntau_ano = "high"\n', "expected float"),
        ("[grounding]\ntau_ano = true\n", "expected float"),
        ("[grounding]\nopen_radius_px = 2.5\n", "expected int"),
        ("[grounding]\ntau_ano = 1.5\n", r"\[0, 1\]"),
        ("[grounding]\ntau_conf = -0.1\n", ">= 0"),
        ("[grounding]\ntau_ano = nan\n", "finite"),
        ("[io]\nmax_pixels = 0\n", "max_pixels"),
        ("[split]\nval_fraction = 0.6\ntest_fraction = 0.5\n", "must be < 1"),
        ("[qc]\nfrontal_only = 3\n", "expected bool"),
        ("[grounding\n", "invalid TOML"),
    ],
)
def test_bad_files_rejected(tmp_path: Path, toml: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=match) as err:
        load_config(path)
    assert str(err.value).startswith(str(path)), str(err.value)  # the file is named


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="bin.toml"):
        load_config(binary)


@pytest.mark.parametrize(
    "item", ["grounding.tau_ano", "tau_ano=0.1", "grounding.nope=1", "io.max_pixels=abc", "grounding.tau_ano=2"]
)
def test_bad_overrides_rejected(item: str) -> None:
    with pytest.raises(ConfigError):
        apply_overrides(Config(), [item])


def test_config_show_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["config", "show"])
    assert res.exit_code == 0, res.output
    shown = config_from_dict(tomllib.loads(res.output))
    assert shown == Config()
    path = tmp_path / "c.toml"
    path.write_text("[grounding]\ntau_ano = 0.07\n")
    res = runner.invoke(app, ["config", "show", "--config", str(path), "--set", "grounding.tau_signal=0.3"])
    assert res.exit_code == 0, res.output
    shown = tomllib.loads(res.output)
    assert shown["grounding"]["tau_ano"] == 0.07 and shown["grounding"]["tau_signal"] == 0.3
    res = runner.invoke(app, ["config", "show", "--set", "grounding.tau_typo=1"])
    assert res.exit_code == 2
    assert "grounding.tau_typo" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ("backends.anatomy=nonexist", "unknown anatomy backend 'nonexist'"),
        ("backends.anatomy_edit_region=hybridgnt", "unknown anatomy backend 'hybridgnt'"),
        ("backends.anomaly=radedt", "unknown anomaly backend"),
        ("backends.detector=yolo", "unknown detector backend"),
        ("backends.report_structurer=gpt", "report structurer"),
        ("backends.location_mapper=regex", "location mapper"),
    ],
)
def test_config_show_refuses_unknown_backend_names(item: str, named: str) -> None:
    # stop 60's trial: `config show` printed a backend name that only generate refused
    res = CliRunner().invoke(app, ["config", "show", "--set", item])
    assert res.exit_code == 2, res.output
    assert named in res.output and "Traceback" not in res.output
    ok = CliRunner().invoke(app, ["config", "show", "--set", "backends.anatomy_edit_region=hybridgnet"])
    assert ok.exit_code == 0, ok.output


def test_the_mimic_ils_import_settings_are_no_generate_section() -> None:
    # third new-user trial: `--set mimic_ils.max_side=512` changed nothing yet refused a
    # generate resume; the import reads its own --max-side
    with pytest.raises(ConfigError, match="mimic_ils is no config section"):
        apply_overrides(Config(), ["mimic_ils.max_side=512"])
    assert "mimic_ils" not in Config().dataset_settings()
    # review (stop 58): an empty table set nothing and so named no section at all
    from cxrils.config import config_from_dict

    with pytest.raises(ConfigError, match="mimic_ils is no config section"):
        config_from_dict({"mimic_ils": {}})
    with pytest.raises(ConfigError, match="unknown config section 'nope'"):
        config_from_dict({"nope": {}})
    config_from_dict({"grounding": {}, "pipeline": {"ray": {}}})  # known sections, nothing set


@pytest.mark.parametrize(
    "item, match",
    [
        ("inputs.iu_sections=findingz", "not among the IU sections"),  # every IU report would be empty
        ("anatomy.zone_apical_end=0.8", "zone_apical_end < zone_upper_end"),
        ("detection.onnx_nms_iou=1.5", "is a ratio"),
    ],
)
def test_settings_that_would_silently_break_a_run_are_refused(item: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        apply_overrides(Config(), [item])


def test_a_boolean_takes_1_and_0() -> None:
    cfg = config_from_dict({"grounding": {"effusion_hidden_base": 0}})
    assert cfg.grounding.effusion_hidden_base is False


def test_a_saved_config_with_the_old_mimic_ils_section_gets_a_pointed_message(tmp_path: Path) -> None:
    old = tmp_path / "old.toml"
    old.write_text("[mimic_ils]\nmax_side = 1024\n")
    with pytest.raises(ConfigError, match="mimic_ils is no config section any more.*--max-side"):
        load_config(old)
