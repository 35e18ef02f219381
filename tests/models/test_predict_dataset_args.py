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


class _Overruled(_Never):
    """Answers present below its threshold, as the consistent-answers rule can."""

    def predict(self, image, instruction) -> Prediction:
        import numpy as np

        mask = np.zeros(image.shape, bool)
        mask[10:20, 10:20] = True
        return Prediction(
            mask=mask,
            answer="[SEG] It is located in the right lung.",
            presence_score=0.941,
            presence_threshold=0.947,
            note="answered present: the right lung's question passes (consistent_answers)",
        )


def test_predict_says_when_the_answer_differs_from_the_score(tmp_path, monkeypatch):
    # new-user trial (stop 58): "presence 0.941 (a mask from 0.947), mask 100 px" read as a contradiction
    import numpy as np
    from PIL import Image
    from typer.testing import CliRunner

    from cxrils.cli import app

    monkeypatch.setattr(Segmenter, "from_pretrained", classmethod(lambda cls, path, **kw: _Overruled()))
    image = tmp_path / "x.png"
    Image.fromarray(np.full((64, 64), 90, np.uint8)).save(image)
    res = CliRunner().invoke(
        app, ["predict", "--model", str(tmp_path), str(image), "Segment the opacity.", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    assert "presence 0.941 (a mask from 0.947; answered otherwise, as the note says), mask 100 px" in res.output


def test_predicting_a_split_without_records_is_refused_not_an_empty_file(tmp_path):
    # new-user trial: `cxrils predict --dataset` on an empty split wrote a 0-byte file and
    # said "predictions -> ...", where evaluate and baseline refuse the split
    from light_synthetic import make_tiny_dataset

    from cxrils.dataset import DatasetError

    dataset = make_tiny_dataset(tmp_path / "ds", n_train=2, n_val=1, n_test=0)
    with pytest.raises(DatasetError, match=r"no records in split 'test' to predict"):
        predict_dataset(_Never(), dataset, "test", tmp_path / "p.jsonl")
    assert not (tmp_path / "p.jsonl").exists()


def test_an_instruction_over_the_limit_is_one_line_as_in_the_service(tmp_path, monkeypatch):
    # new-user trial: a 76,000-character instruction ran and was echoed whole into the log
    from typer.testing import CliRunner

    from cxrils.cli import app

    monkeypatch.setattr(Segmenter, "from_pretrained", classmethod(lambda cls, path, **kw: _Never()))
    long = "Segment the opacity in the left lung. " * 20  # 760 characters, 759 without the last space
    res = CliRunner().invoke(app, ["predict", "--model", str(tmp_path), "x.png", long, "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.output.strip() == "error: the instruction has 759 characters; the limit is 500 (--max-instruction-chars)"


def test_the_instruction_limit_counts_as_the_service_does(tmp_path, monkeypatch):
    # review: the service strips the instruction before counting; predict refused padding
    from typer.testing import CliRunner

    from cxrils.cli import app

    monkeypatch.setattr(Segmenter, "from_pretrained", classmethod(lambda cls, path, **kw: _Never()))
    padded = "Segment the effusion in the left lung base.".ljust(513)
    res = CliRunner().invoke(app, ["predict", "--model", str(tmp_path), "x.png", padded, "-o", str(tmp_path / "o")])
    assert "characters; the limit" not in res.output and "x.png" in res.output  # refused for the image only
