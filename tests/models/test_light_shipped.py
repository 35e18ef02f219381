"""The light model shipped in the package (cxrils/weights/light_ils) loads and answers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from light_synthetic import block_anatomy, bright_anomaly

from cxrils import templates
from cxrils.models import Segmenter, default_model_dir
from cxrils.models.light.segmenter import WEIGHTS_NAME


def test_shipped_model_loads_and_predicts():
    path = default_model_dir()
    assert path is not None and (path / WEIGHTS_NAME).is_file()
    assert (path / WEIGHTS_NAME).stat().st_size < 8 * 1024 * 1024  # a few MB at most
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "light" and 0 < cfg["tau_presence"] < 1 and 0 < cfg["tau_mask"] < 1
    seg = Segmenter.from_pretrained(path, anatomy=block_anatomy, anomaly=bright_anomaly)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(120, 100), dtype=np.uint8)
    pred = seg.predict(x, "Segment the effusion in the left lung base.")
    assert pred.mask.shape == x.shape and pred.mask.dtype == bool
    assert 0.0 <= pred.presence_score <= 1.0
    templates.parse_answer(pred.answer, "basic")


@pytest.mark.slow
def test_shipped_model_with_the_builtin_stages_on_a_real_image(shared_data):
    """Default anatomy and anomaly priors (no stand-ins) on a real JSRT radiograph."""
    from PIL import Image

    images = sorted((shared_data / "jsrt_scr" / "images").glob("*.png"))
    if not images:
        pytest.skip("no JSRT PNGs in ../shared/data/jsrt_scr/images")
    x = np.asarray(Image.open(images[0]).convert("L"))
    seg = Segmenter.from_pretrained(default_model_dir())
    preds = seg.predict_many(
        [x] * 3,
        [
            "Segment the effusion in the left lung base.",
            "Segment the pneumonia.",
            "Segment the opacity in the right upper zone lung and predict its type.",
        ],
    )
    for pred, itype in zip(preds, ("basic", "global", "lesion_inference")):
        assert pred.mask.shape == x.shape and pred.mask.dtype == bool
        parsed = templates.parse_answer(pred.answer, itype)
        assert (parsed.polarity == "positive") == bool(pred.mask.any())


@pytest.mark.slow
def test_shipped_model_answers_on_images_the_priors_cannot_use():
    """Blank, tiny and flat images: the builtin anomaly stage refuses them, the priors
    fall back to zeros and the model still answers (no exception)."""
    seg = Segmenter.from_pretrained(default_model_dir())
    for x in (np.zeros((200, 200), np.uint8), np.zeros((1, 1), np.uint8), np.full((50, 400), 90, np.uint8)):
        pred = seg.predict(x, "Segment the effusion in the left lung base.")
        assert pred.mask.shape == x.shape
        templates.parse_answer(pred.answer, "basic")


@pytest.mark.slow
def test_shipped_model_answers_agree_across_questions_on_real_images(shared_data):
    """Issue 32: on real radiographs (COVID-QU-Ex COVID-19, NIH, JSRT), the shipped
    model's answers about one image agree: the global question is present exactly when
    a lung is, a zone only when its lung is, and a global answer names only present sides."""
    from cxrils import vocab
    from cxrils.io import load_image

    picks = []
    for folder in ("covid_qu_ex/images", "nih_bbox/images", "jsrt_scr/images"):
        found = sorted((shared_data / folder).glob("*.png"))[:2]
        if not found:
            pytest.skip(f"no PNGs in ../shared/data/{folder}")
        picks += found
    seg = Segmenter.from_pretrained(default_model_dir())
    assert seg.config.consistent_answers  # the shipped setting the README describes
    for path in picks:
        x = load_image(path).pixels
        for target in ("opacity", "effusion", "consolidation"):
            qs = [templates.render_instruction("global", target)]
            qs += [templates.render_instruction("basic", target, [loc]) for loc in vocab.INSTRUCTION_LOCATIONS]
            answers = seg.predict_many([x] * len(qs), qs)
            glob, preds = answers[0], dict(zip(qs[1:], answers[1:]))
            lung = {
                name: preds[templates.render_instruction("basic", target, [name])].mask.any()
                for name in vocab.WHOLE_LUNGS
            }
            assert glob.mask.any() == any(lung.values()), (path.name, target, glob.note)
            for name in vocab.WHOLE_LUNGS:
                for zone in vocab.ZONES_OF_LUNG[name]:
                    zone_on = preds[templates.render_instruction("basic", target, [zone])].mask.any()
                    assert not zone_on or lung[name], (path.name, target, zone)
            if glob.mask.any():
                named = templates.parse_answer(glob.answer, "global").locations
                assert {vocab.LABEL_SIDE[loc] for loc in named} <= {vocab.LABEL_SIDE[n] for n in lung if lung[n]}


def test_lung_answer_min_zones_changes_the_global_answer_text_only():
    # review (stop 58): the setting is phrasing only; masks, scores and presence of every
    # question stay as they were (the consistency rules read the zones as found)
    path = default_model_dir()
    assert json.loads((path / "config.json").read_text())["lung_answer_min_zones"] == 1
    seg = Segmenter.from_pretrained(path, anatomy=block_anatomy, anomaly=bright_anomaly)
    x = np.full((120, 100), 60, np.uint8)
    x[35:110, 10:45] = 200  # bright below the right apex (image left = patient right)
    questions = [
        "Segment the opacity.",
        "Segment the opacity in the right lung.",
        "Segment the opacity in the right apical zone lung.",
        "Segment the opacity in the right lung base.",
        "Segment the edema.",
    ]
    answers = {}
    for k in (1, 4):
        seg.config.lung_answer_min_zones = k
        answers[k] = seg.predict_many([x] * len(questions), questions)
    for a, b in zip(answers[1], answers[4]):
        assert np.array_equal(a.mask, b.mask) and a.presence_score == b.presence_score
    # the global answer names the lung at 1 and the three zones it lies in at 4
    assert answers[1][0].answer == "[SEG] It is located in the right lung."
    assert (
        answers[4][0].answer
        == "[SEG] It is located in the right upper zone lung, right mid zone lung and right lung base."
    )
    for a, b in zip(answers[1][1:4], answers[4][1:4]):
        assert a.answer == b.answer  # location questions: the same answers
