"""Threshold choice of the light model on the validation split (calibrate.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cxrils.models.light.calibrate import choose_target_thresholds, choose_thresholds, n_acc_lower_bound


def _case():
    """4 positives (a 4x4 square, probabilities 0.9 inside, 0.35 on a ring around it) and
    6 negatives (one blob of 0.8); presence scores overlap between the classes."""
    s = 16
    ref = np.zeros((10, s, s), bool)
    prob = np.full((10, s, s), 0.05, np.float32)
    for i in range(4):
        ref[i, 4:8, 4:8] = True
        prob[i, 3:9, 3:9] = 0.35
        prob[i, 4:8, 4:8] = 0.9
    for i in range(4, 10):
        prob[i, 10:12, 10:12] = 0.8
    presence = np.array([0.9, 0.8, 0.7, 0.3, 0.75, 0.2, 0.1, 0.1, 0.05, 0.05], np.float32)
    return presence, prob, ref


def test_choice_meets_n_acc_and_maximises_giou():
    presence, prob, ref = _case()
    c = choose_thresholds(presence, prob, ref, min_n_acc=0.80)
    # N-Acc >= 0.8 allows one negative above tau_presence (the 0.75 one), so tau_presence in
    # (0.2, 0.3] keeps all four positives; the best tau_mask excludes the 0.35 ring
    assert 0.2 < c["tau_presence"] <= 0.3 and c["tau_mask"] > 0.35
    assert c["constraint_met"] and c["n_acc"] == pytest.approx(5 / 6)
    assert c["gIoU"] == pytest.approx(1.0) and c["cIoU"] == pytest.approx(1.0)
    strict = choose_thresholds(presence, prob, ref, min_n_acc=1.0)  # every negative must be empty
    assert strict["tau_presence"] > 0.75 and strict["n_acc"] == 1.0
    assert strict["gIoU"] == pytest.approx(2 / 4)


def test_unreachable_target_falls_back_to_giou_plus_n_acc():
    presence, prob, ref = _case()
    presence[4:] = 0.95  # every negative scores above every positive
    c = choose_thresholds(presence, prob, ref, min_n_acc=1.01)
    assert not c["constraint_met"]
    assert c["gIoU"] + c["n_acc"] >= 1.0  # at least as good as calling everything absent


def test_needs_both_classes():
    presence, prob, ref = _case()
    with pytest.raises(ValueError, match="positive and negative"):
        choose_thresholds(presence[4:], prob[4:], ref[4:], 0.9)


def test_ties_in_giou_go_to_the_higher_n_acc():
    presence, prob, ref = _case()
    presence[4:] = [0.15, 0.12, 0.05, 0.05, 0.05, 0.05]
    c = choose_thresholds(presence, prob, ref, min_n_acc=0.5)
    # every tau_presence <= 0.3 keeps the four positives (gIoU 1.0); those <= 0.15 also let
    # negatives through, so of the tied pairs the one above 0.15 must win
    assert c["gIoU"] == pytest.approx(1.0) and c["n_acc"] == pytest.approx(1.0)
    assert 0.15 < c["tau_presence"] <= 0.3


def test_wilson_lower_bound_and_confident_constraint():
    # hand-computed Wilson score bound: p = 0.9, n = 100, z = 1.6449 (one-sided 95 %)
    z, n, p = 1.6448536, 100, 0.9
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert n_acc_lower_bound(90, 100, 0.95) == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-6)
    assert n_acc_lower_bound(90, 100, 0.0) == pytest.approx(0.9)
    presence, prob, ref = _case()
    loose = choose_thresholds(presence, prob, ref, min_n_acc=0.60)
    strict = choose_thresholds(presence, prob, ref, min_n_acc=0.60, confidence=0.95)
    # 6 negatives: the bound is 0.69 for 6/6 and 0.49 for 5/6, so only all 6 empty pass
    assert strict["n_acc"] == 1.0 and strict["n_acc_lower"] == pytest.approx(0.689, abs=1e-3)
    assert loose["constraint_met"] and loose["n_acc"] < 1.0


def _two_targets():
    """Target "easy": 4 positives (scores 0.9-0.6) and 40 negatives all at 0.05. Target
    "hard": 4 positives at 0.99 and 40 negatives, 10 of them at 0.92 (the rest 0.05).
    Every mask is a perfect 4x4 square on positives and one blob on negatives."""
    s, n = 8, 88
    ref = np.zeros((n, s, s), bool)
    prob = np.full((n, s, s), 0.05, np.float32)
    presence = np.full(n, 0.05, np.float32)
    targets = np.array(["effusion"] * 44 + ["opacity"] * 44)
    for i in list(range(4)) + list(range(44, 48)):
        ref[i, 2:6, 2:6] = True
        prob[i, 2:6, 2:6] = 0.9
    presence[:4] = [0.9, 0.8, 0.7, 0.6]
    presence[44:48] = 0.99
    prob[4:44, 0, 0] = 0.9
    prob[48:, 0, 0] = 0.9
    presence[48:58] = 0.92
    return presence, prob, ref, targets


def test_per_target_threshold_holds_each_target_to_the_n_acc():
    presence, prob, ref, targets = _two_targets()
    shared = choose_thresholds(presence, prob, ref, min_n_acc=0.85)
    # pooled: 10 of 80 negatives above 0.6 -> N-Acc 0.875 passes with every positive kept
    assert shared["tau_presence"] <= 0.6 and shared["n_acc"] == pytest.approx(70 / 80)
    by = choose_target_thresholds(presence, prob, ref, targets, shared["tau_mask"], 0.85,
                                  min_positives=4, min_negatives=40)
    # "opacity" alone has N-Acc 30/40 = 0.75 at the shared threshold: its own must exceed 0.92
    assert 0.92 < by["opacity"]["tau_presence"] <= 0.99 and by["opacity"]["n_acc"] == 1.0
    assert by["opacity"]["gIoU"] == pytest.approx(1.0)
    assert by["effusion"]["tau_presence"] <= 0.6 and by["effusion"]["gIoU"] == pytest.approx(1.0)
    assert (by["opacity"]["n_positive"], by["opacity"]["n_negative"]) == (4, 40)
    few = choose_target_thresholds(presence, prob, ref, targets, shared["tau_mask"], 0.85,
                                   min_positives=5, min_negatives=40)
    assert few == {}  # 4 positives each: too few for a threshold of its own


def test_per_target_minimums_and_confidence():
    presence, prob, ref, targets = _two_targets()
    # each target has 40 negatives: a minimum of 41 leaves none with its own threshold
    assert choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.85, min_positives=4,
                                    min_negatives=41) == {}
    with pytest.raises(ValueError, match="at least one positive"):
        choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.85, min_positives=0, min_negatives=1)
    # "effusion": 40 of 40 negatives empty. Point estimate 1.0 meets 0.95; the one-sided 95 %
    # Wilson bound of 40/40 is 0.937 (z = 1.645: (1 + z^2/80 - z^2/80) / (1 + z^2/40)), which does not
    point = choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.95, min_positives=4, min_negatives=40)
    bound = choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.95, 0.95, min_positives=4,
                                     min_negatives=40)
    assert point["effusion"]["constraint_met"] and point["effusion"]["n_acc"] == 1.0
    assert not bound["effusion"]["constraint_met"]
    assert bound["effusion"]["n_acc_lower"] == pytest.approx(1 / (1 + 1.6448536 ** 2 / 40), abs=1e-4)


def test_calibrate_stores_only_targets_that_meet_the_constraint(monkeypatch):
    from types import SimpleNamespace

    from cxrils.models.light import calibrate as cal
    from cxrils.models.light.config import LightConfig

    scores = _two_targets()
    monkeypatch.setattr(cal, "validation_scores", lambda seg, ds, split: scores)
    seg = SimpleNamespace(config=LightConfig(calib_min_n_acc=0.85, calib_confidence=0.0,
                                             calib_target_min_positives=4, calib_target_min_negatives=40))
    out = cal.calibrate(seg, "unused")
    assert set(seg.config.tau_presence_by_target) == {"effusion", "opacity"}
    assert seg.config.tau_presence_by_target["opacity"] == out["by_target"]["opacity"]["tau_presence"] > 0.92
    # at 0.95 with 95 % confidence neither target's 40 negatives can show it (bound 0.937): both
    # keep the shared threshold, though the result still lists their search
    seg = SimpleNamespace(config=LightConfig(calib_min_n_acc=0.95, calib_confidence=0.95,
                                             calib_target_min_positives=4, calib_target_min_negatives=40))
    out = cal.calibrate(seg, "unused")
    assert seg.config.tau_presence_by_target == {}
    assert set(out["by_target"]) == {"effusion", "opacity"}
    assert not any(c["constraint_met"] for c in out["by_target"].values())
    seg.config.calib_per_target = False
    assert cal.calibrate(seg, "unused")["by_target"] == {}


class _FixedNet(torch.nn.Module):
    """Presence probability 0.8 and a foreground mask for every query."""

    def forward(self, x, t):
        b, _, s, _ = x.shape
        return {"mask": torch.full((b, 1, s, s), 5.0), "presence": torch.full((b,), math.log(0.8 / 0.2)),
                "lesion": torch.zeros(b, 3), "certainty": torch.zeros(b)}


def test_predict_uses_the_threshold_of_the_instruction_target():
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.segmenter import LightSegmenter
    from cxrils.templates import ParsedText

    cfg = LightConfig(priors=False, box_prior=False, ctr_input=False, ensemble=1, image_size=32, tau_presence=0.5,
                      tau_presence_by_target={"opacity": 0.9})
    seg = LightSegmenter(cfg, net=_FixedNet())
    assert seg.presence_threshold(ParsedText("basic", None, "opacity", ("left lung",))) == 0.9
    assert seg.presence_threshold(ParsedText("global", None, "cardiomegaly")) == 0.5
    assert seg.presence_threshold(None) == 0.5
    x = np.full((40, 40), 128, np.uint8)
    # presence 0.8: below opacity's 0.9, above the shared 0.5
    opacity, effusion, inference = seg.predict_many(
        [x] * 3, ["Segment the opacity in the left lung.", "Segment the effusion in the left lung.",
                  "What lesion is in the left lung?"])  # lesion inference names opacity: its threshold
    assert not opacity.mask.any() and opacity.answer == "[SEG] There is no opacity in the left lung."
    assert effusion.mask.all() and effusion.answer == "[SEG]"
    assert not inference.mask.any()
    assert opacity.presence_score == pytest.approx(0.8)
    assert (opacity.presence_threshold, effusion.presence_threshold, inference.presence_threshold) == (0.9, 0.5, 0.9)


def test_per_target_thresholds_are_checked():
    from cxrils.models.light.config import LightConfig

    with pytest.raises(ValueError, match="tau_presence_by_target"):
        LightConfig(tau_presence_by_target={"nodule": 0.5})
    with pytest.raises(ValueError, match="tau_presence_by_target"):
        LightConfig(tau_presence_by_target={"opacity": 1.5})
    with pytest.raises(ValueError, match="tau_presence_by_target"):  # JSON null from --set
        LightConfig(tau_presence_by_target={"opacity": None})
    with pytest.raises(ValueError, match="tau_presence_by_target"):
        LightConfig(tau_presence_by_target=[0.5])
    back = LightConfig.from_dict(LightConfig(tau_presence_by_target={"opacity": 0.9}).to_dict())
    assert back.tau_presence_by_target == {"opacity": 0.9}


def test_cardiomegaly_is_answered_present_only_above_the_ctr_cut_off():
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.priors import ImagePriors, PackedMasks
    from cxrils.models.light.segmenter import LightSegmenter

    cfg = LightConfig(priors=False, box_prior=False, ctr_input=True, ensemble=1, image_size=32, tau_presence=0.5)
    seg = LightSegmenter(cfg, net=_FixedNet())
    x = np.full((40, 40), 128, np.uint8)
    empty = PackedMasks({}, (8, 8))

    def answer(ctr):
        seg.image_priors = lambda image: ImagePriors(anatomy=empty, x_ano=np.zeros((8, 8), np.float16), ctr=ctr)
        return seg.predict(x, "Segment the cardiomegaly.")

    # presence 0.8 is above tau_presence 0.5 every time; the CTR decides, > 0.5 (Appendix D.3)
    enlarged = answer(0.56)
    assert enlarged.mask.all() and enlarged.note is None
    for ctr in (0.5, 0.47, None):  # at the cut-off, below it, no CTR measured
        normal = answer(ctr)
        assert not normal.mask.any() and normal.answer == "[SEG] There is no cardiomegaly."
        assert "cut-off" in normal.note and normal.presence_score == pytest.approx(0.8)
    seg.image_priors = lambda image: ImagePriors(anatomy=empty, x_ano=np.zeros((8, 8), np.float16), ctr=0.47)
    assert seg.predict(x, "Segment the effusion in the left lung.").mask.all()  # other targets: no CTR rule
    seg.config.cardiomegaly_min_ctr = 0.0
    assert answer(0.47).mask.all()  # turned off


def test_runs_saved_before_the_ctr_rule_load_without_it():
    from cxrils.models.light.config import LightConfig

    old = LightConfig().to_dict()
    del old["cardiomegaly_min_ctr"]
    assert LightConfig.from_dict(old).cardiomegaly_min_ctr == 0.0
    assert LightConfig().cardiomegaly_min_ctr == 0.5
    with pytest.raises(ValueError, match="cardiomegaly_min_ctr"):
        LightConfig(cardiomegaly_min_ctr=1.2)


def test_a_model_without_anatomy_inputs_answers_cardiomegaly_by_its_score():
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.segmenter import LightSegmenter

    cfg = LightConfig(priors=False, box_prior=False, ctr_input=False, ensemble=1, image_size=32, tau_presence=0.5)
    seg = LightSegmenter(cfg, net=_FixedNet())

    def no_anatomy(image):
        raise RuntimeError("the anatomy stage is not installed")

    seg.image_priors = no_anatomy  # never needed: the CTR rule has no CTR to read here
    pred = seg.predict(np.full((40, 40), 128, np.uint8), "Segment the cardiomegaly.")
    assert pred.note is None and pred.mask.any()


class _ByQuestionNet(torch.nn.Module):
    """Presence by question and image: 0.8 for a global question; for the questions about
    the right / left lung 0.3 / 0.6 on a dark image and 0.2 / 0.1 on a bright one; a
    foreground mask for every query. Rows are told apart by the structured encoder's
    vector (without the CTR column ``ctr_input`` appends)."""

    def __init__(self, seg) -> None:
        super().__init__()
        self.width = seg.encoder.dim
        names = ["Segment the opacity.", "Segment the cardiomegaly.", "Segment the opacity in the right lung.",
                 "Segment the opacity in the left lung."]
        self.rows = {tuple(v): n for v, n in zip(seg.encoder.encode(names).tolist(), names)}

    def forward(self, x, t):
        b, _, s, _ = x.shape
        scores = []
        for image, row in zip(x, t[:, :self.width].tolist()):
            name, dark = self.rows[tuple(row)], float(image[0].mean()) < 0.5
            scores.append(0.8 if "lung" not in name else
                          {(True, "right"): 0.3, (True, "left"): 0.6, (False, "right"): 0.2,
                           (False, "left"): 0.1}[dark, "right" if "right" in name else "left"])
        p = torch.tensor(scores)
        return {"mask": torch.full((b, 1, s, s), 5.0), "presence": torch.log(p / (1 - p)),
                "lesion": torch.zeros(b, 3), "certainty": torch.zeros(b)}


def test_a_global_lung_question_needs_a_lung_question_that_agrees():
    from cxrils import vocab
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.priors import ImagePriors, PackedMasks
    from cxrils.models.light.segmenter import LightSegmenter, lung_check_instructions
    from cxrils.templates import ParsedText

    cfg = LightConfig(priors=False, box_prior=False, ctr_input=True, ensemble=1, image_size=32, tau_presence=0.5)
    seg = LightSegmenter(cfg)
    seg.net = _ByQuestionNet(seg)
    # a present global answer names its places from the anatomy: image left half = patient right
    half = np.zeros((8, 8), bool)
    half[:, :4] = True
    zones = PackedMasks({z: half if z in vocab.RIGHT_ZONES else ~half for z in vocab.LUNG_ZONES}, (8, 8))
    seg.image_priors = lambda image: ImagePriors(anatomy=zones, x_ano=np.zeros((8, 8), np.float16), ctr=0.6)
    dark, bright = np.full((40, 40), 60, np.uint8), np.full((40, 40), 200, np.uint8)
    # one batch: two global lung questions on different images around a basic and an organ question
    g_dark, right_dark, cardio, g_bright = seg.predict_many(
        [dark, dark, bright, bright], ["Segment the opacity.", "Segment the opacity in the right lung.",
                                       "Segment the cardiomegaly.", "Segment the opacity."])
    # every global score is 0.8, above 0.5; the lungs' scores decide
    assert g_dark.presence_score == pytest.approx(0.8) and g_dark.mask.all() and g_dark.note is None  # left 0.6
    assert g_bright.presence_score == pytest.approx(0.8) and not g_bright.mask.any()
    assert g_bright.answer == "[SEG] There is no opacity."
    assert "right and the left lung score 0.20 and 0.10, below the threshold 0.50" in g_bright.note
    assert right_dark.presence_score == pytest.approx(0.3) and not right_dark.mask.any() and right_dark.note is None
    assert cardio.mask.all() and cardio.note is None  # the heart's question is no lung's (CTR 0.6 > 0.5)
    assert lung_check_instructions(ParsedText("global", None, "effusion")) == (
        "Segment the effusion in the right lung.", "Segment the effusion in the left lung.")
    assert lung_check_instructions(ParsedText("basic", None, "effusion", ("left lung",))) == ()
    assert lung_check_instructions(ParsedText("global", None, "cardiomegaly")) == ()
    assert lung_check_instructions(None) == ()
    seg.config.global_needs_lung = False
    off = seg.predict(bright, "Segment the opacity.")
    assert off.mask.all() and off.note is None


def test_a_score_above_the_threshold_without_mask_pixels_says_why():
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.segmenter import LightSegmenter

    cfg = LightConfig(priors=False, box_prior=False, ctr_input=False, ensemble=1, image_size=32, tau_presence=0.5,
                      tau_mask=0.999)  # the fixed network's pixels are sigmoid(5) = 0.993
    pred = LightSegmenter(cfg, net=_FixedNet()).predict(np.full((40, 40), 128, np.uint8),
                                                         "Segment the effusion in the left lung.")
    assert pred.presence_score == pytest.approx(0.8) and not pred.mask.any()
    assert pred.answer == "[SEG] There is no effusion in the left lung."
    assert pred.note == "answered absent: no pixel of the mask reaches tau_mask 0.999"


def test_runs_saved_before_the_lung_check_load_without_it():
    from cxrils.models.light.config import LightConfig

    old = LightConfig().to_dict()
    del old["global_needs_lung"]
    assert LightConfig.from_dict(old).global_needs_lung is False
    assert LightConfig().global_needs_lung is True
    with pytest.raises(ValueError, match="global_needs_lung"):
        LightConfig(global_needs_lung="yes")
