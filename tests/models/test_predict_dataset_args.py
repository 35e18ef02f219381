"""``predict_dataset`` checks its arguments before predicting (new-user trial, stop 58:
the Python API wrote JSON Lines into ``x.csv`` and failed on a path with an
AttributeError, where the CLI refuses both)."""

import pytest

from cxrils.models.base import Prediction, Segmenter
from cxrils.models.predict import predict_dataset


class _Never(Segmenter):
    """A model that must not be asked: the arguments are refused first."""

    @classmethod
    def _load(cls, path, config, **kwargs):  # pragma: no cover - never reached
        raise AssertionError("not loaded in these tests")

    def predict(self, image, instruction) -> Prediction:  # pragma: no cover - never reached
        raise AssertionError("predicted before checking the arguments")


def test_a_path_instead_of_a_model_is_named(tmp_path):
    with pytest.raises(TypeError, match=r"segmenter must be a loaded model .*got str"):
        predict_dataset("runs/light", tmp_path / "no-dataset", "test", tmp_path / "p.parquet")


@pytest.mark.parametrize("name", ["x.csv", "x", "x.json"])
def test_an_output_that_is_no_predictions_file_is_refused_before_reading_the_dataset(tmp_path, name):
    with pytest.raises(ValueError, match=rf"{name}: predictions must end in \.parquet or \.jsonl"):
        predict_dataset(_Never(), tmp_path / "no-dataset", "test", tmp_path / name)
    assert not (tmp_path / name).exists()
