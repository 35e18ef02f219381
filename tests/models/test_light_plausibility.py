"""Answers about an image whose anatomy is no frontal chest radiograph."""

from __future__ import annotations

import numpy as np
from light_synthetic import block_anatomy, bright_anomaly

from cxrils import vocab
from cxrils.models.light import LightConfig
from cxrils.models.light.segmenter import LightSegmenter
from cxrils.types import AnatomyMasks

TINY = dict(ensemble=1, image_size=32, features=(4, 8, 8, 16, 16, 8), text_hidden=32, box_prior=False)
QUESTIONS = [
    "Segment the opacity.",
    "Segment the opacity in the left lung.",
    "Segment the edema in the right lower zone lung.",
    "Segment the cardiomegaly.",
    "What lesion is in the left lung?",
]


def no_lungs(x: np.ndarray) -> AnatomyMasks:
    h, w = x.shape
    return AnatomyMasks({lb: np.zeros((h, w), bool) for lb in (*vocab.INSTRUCTION_LOCATIONS, "heart")}, (h, w), "t")


def _always_present(seg: LightSegmenter) -> LightSegmenter:
    # every question scores above every threshold: whatever is absent below, a rule made it so
    seg.config.tau_presence, seg.config.tau_presence_by_target, seg.config.tau_mask = 0.0, {}, 0.0
    return seg


def test_no_lungs_found_answers_every_question_absent_and_says_why():
    seg = _always_present(LightSegmenter(LightConfig(**TINY), anatomy=no_lungs, anomaly=bright_anomaly))
    x = np.zeros((64, 64), np.uint8)
    for q, pred in zip(QUESTIONS, seg.predict_many([x] * len(QUESTIONS), QUESTIONS)):
        assert not pred.mask.any(), q
        assert pred.note.startswith("answered absent: the anatomy stage found no lungs"), (q, pred.note)
        assert "There is no" in pred.answer, pred.answer


def test_an_implausible_anatomy_is_answered_with_a_warning_in_the_note():
    # block_anatomy: the right lung covers half the image (QC's bound is 0.4)
    seg = _always_present(LightSegmenter(LightConfig(**TINY), anatomy=block_anatomy, anomaly=bright_anomaly))
    x = np.full((64, 64), 200, np.uint8)
    pred = seg.predict(x, "Segment the opacity in the left lung.")
    assert pred.mask.any()
    assert "does not look like a frontal chest radiograph (right lung covers 0.500 of the image" in pred.note
    assert pred.note.endswith("the answer is not reliable")


def test_the_model_api_says_how_to_pass_a_file_or_a_colour_image(tmp_path):
    import pytest

    from cxrils.models.base import check_image

    with pytest.raises(ValueError, match=r"not a path .*load_image\(path\)\.pixels"):
        check_image(str(tmp_path / "x.png"))
    with pytest.raises(ValueError, match=r"grey levels uint8 \(H, W\), got \(64, 64, 3\).*COLOR_RGB2GRAY"):
        check_image(np.zeros((64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        check_image(np.zeros((64, 64), np.float32))
    assert check_image(np.zeros((2, 3), np.uint8)).shape == (2, 3)  # the API answers any size
    # a trial (stop 62): an image scaled to [0, 1] and cast back to uint8 was answered
    scaled = (np.linspace(0, 255, 64 * 64).reshape(64, 64) / 255).astype(np.uint8)
    with pytest.raises(ValueError, match=r"only the grey levels 0 and 1.*0\.\.255"):
        check_image(scaled)
    # a new user's trial (stop 58): the loaded image itself gave "got object ()"
    from PIL import Image

    from cxrils.io import load_image

    Image.fromarray(np.zeros((40, 40), np.uint8)).save(tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"not a LoadedImage: pass its \.pixels"):
        check_image(load_image(tmp_path / "x.png"))
