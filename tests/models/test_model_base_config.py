"""``read_model_config`` (cxrils.models.base): what a model folder must hold."""

import json

import pytest

from cxrils.models.base import ModelLoadError, model_type_of, read_model_config


def test_a_missing_model_folder_names_the_released_checkpoints(tmp_path):
    # new-user trial (stop 61): the error said only "model folder not found"
    with pytest.raises(ModelLoadError) as err:
        read_model_config(tmp_path / "models" / "ROSALIA-7B-v1")
    assert "checkone/ROSALIA-7B-v1" in str(err.value) and "xinlai/LISA-7B-v1" in str(err.value)
    # a trial (stop 62): a file's path was "model folder not found" too
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="manifest.json: a file, not a model folder"):
        read_model_config(tmp_path / "manifest.json")


def test_a_released_architecture_needs_no_model_type(tmp_path):
    # new-user trial: architectures ["LISAForCausalLM"] without model_type was refused,
    # though model_type_of resolves it
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LISAForCausalLM"]}))
    assert model_type_of(read_model_config(tmp_path)) == "rosalia"
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Other"]}))
    with pytest.raises(ModelLoadError, match="needs a 'model_type' key"):
        read_model_config(tmp_path)
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(ModelLoadError, match="not a JSON object"):
        read_model_config(tmp_path)


@pytest.mark.parametrize("archs", [5, [{"x": 1}], "LISAForCausalLM"])
def test_malformed_architectures_are_a_load_error_not_a_traceback(tmp_path, archs):
    # review: {"architectures": 5} raised TypeError
    (tmp_path / "config.json").write_text(json.dumps({"architectures": archs}))
    with pytest.raises(ModelLoadError, match="needs a 'model_type' key"):
        read_model_config(tmp_path)
