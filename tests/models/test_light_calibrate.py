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
    by = choose_target_thresholds(
        presence, prob, ref, targets, shared["tau_mask"], 0.85, min_positives=4, min_negatives=40
    )
    # "opacity" alone has N-Acc 30/40 = 0.75 at the shared threshold: its own must exceed 0.92
    assert 0.92 < by["opacity"]["tau_presence"] <= 0.99 and by["opacity"]["n_acc"] == 1.0
    assert by["opacity"]["gIoU"] == pytest.approx(1.0)
    assert by["effusion"]["tau_presence"] <= 0.6 and by["effusion"]["gIoU"] == pytest.approx(1.0)
    assert (by["opacity"]["n_positive"], by["opacity"]["n_negative"]) == (4, 40)
    few = choose_target_thresholds(
        presence, prob, ref, targets, shared["tau_mask"], 0.85, min_positives=5, min_negatives=40
    )
    assert few == {}  # 4 positives each: too few for a threshold of its own


def test_per_target_minimums_and_confidence():
    presence, prob, ref, targets = _two_targets()
    # each target has 40 negatives: a minimum of 41 leaves none with its own threshold
    assert choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.85, min_positives=4, min_negatives=41) == {}
    with pytest.raises(ValueError, match="at least one positive"):
        choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.85, min_positives=0, min_negatives=1)
    # "effusion": 40 of 40 negatives empty. Point estimate 1.0 meets 0.95; the one-sided 95 %
    # Wilson bound of 40/40 is 0.937 (z = 1.645: (1 + z^2/80 - z^2/80) / (1 + z^2/40)), which does not
    point = choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.95, min_positives=4, min_negatives=40)
    bound = choose_target_thresholds(presence, prob, ref, targets, 0.5, 0.95, 0.95, min_positives=4, min_negatives=40)
    assert point["effusion"]["constraint_met"] and point["effusion"]["n_acc"] == 1.0
    assert not bound["effusion"]["constraint_met"]
    assert bound["effusion"]["n_acc_lower"] == pytest.approx(1 / (1 + 1.6448536**2 / 40), abs=1e-4)


def test_calibrate_stores_only_targets_that_meet_the_constraint(monkeypatch):
    from types import SimpleNamespace

    from cxrils.models.light import calibrate as cal
    from cxrils.models.light.config import LightConfig

    scores = _two_targets()
    monkeypatch.setattr(cal, "validation_scores", lambda seg, ds, split, **kw: scores)
    seg = SimpleNamespace(
        config=LightConfig(
            calib_min_n_acc=0.85, calib_confidence=0.0, calib_target_min_positives=4, calib_target_min_negatives=40
        )
    )
    out = cal.calibrate(seg, "unused")
    assert set(seg.config.tau_presence_by_target) == {"effusion", "opacity"}
    assert seg.config.tau_presence_by_target["opacity"] == out["by_target"]["opacity"]["tau_presence"] > 0.92
    # at 0.95 with 95 % confidence neither target's 40 negatives can show it (bound 0.937): both
    # keep the shared threshold, though the result still lists their search
    seg = SimpleNamespace(
        config=LightConfig(
            calib_min_n_acc=0.95, calib_confidence=0.95, calib_target_min_positives=4, calib_target_min_negatives=40
        )
    )
    out = cal.calibrate(seg, "unused")
    assert seg.config.tau_presence_by_target == {}
    for name in ("test", "Test", "testing"):  # split aliases read the test split: refused by any name
        with pytest.raises(ValueError, match="must not be chosen on the test split"):
            cal.calibrate(seg, "unused", name)
    assert set(out["by_target"]) == {"effusion", "opacity"}
    assert not any(c["constraint_met"] for c in out["by_target"].values())
    seg.config.calib_per_target = False
    assert cal.calibrate(seg, "unused")["by_target"] == {}


class _FixedNet(torch.nn.Module):
    """Presence probability 0.8 and a foreground mask for every query."""

    def forward(self, x, t):
        b, _, s, _ = x.shape
        return {
            "mask": torch.full((b, 1, s, s), 5.0),
            "presence": torch.full((b,), math.log(0.8 / 0.2)),
            "lesion": torch.zeros(b, 3),
            "certainty": torch.zeros(b),
        }


def test_predict_uses_the_threshold_of_the_instruction_target():
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.segmenter import LightSegmenter
    from cxrils.templates import ParsedText

    cfg = LightConfig(
        priors=False,
        box_prior=False,
        ctr_input=False,
        ensemble=1,
        image_size=32,
        tau_presence=0.5,
        tau_presence_by_target={"opacity": 0.9},
    )
    seg = LightSegmenter(cfg, net=_FixedNet())
    assert seg.presence_threshold(ParsedText("basic", None, "opacity", ("left lung",))) == 0.9
    assert seg.presence_threshold(ParsedText("global", None, "cardiomegaly")) == 0.5
    assert seg.presence_threshold(None) == 0.5
    x = np.full((40, 40), 128, np.uint8)
    # presence 0.8: below opacity's 0.9, above the shared 0.5
    opacity, effusion, inference = seg.predict_many(
        [x] * 3,
        [
            "Segment the opacity in the left lung.",
            "Segment the effusion in the left lung.",
            "What lesion is in the left lung?",
        ],
    )  # lesion inference names opacity: its threshold
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

    cfg = LightConfig(
        priors=False,
        box_prior=False,
        ctr_input=True,
        ensemble=1,
        image_size=32,
        tau_presence=0.5,
        cardiomegaly_by_ctr=False,
        consistent_answers=False,
    )  # no zones to place a global mask
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
    """Presence by question and image, from ``scores[(question, dark)]`` (a dark image has
    mean < 0.5); a foreground mask for every query. Rows are told apart by the
    structured encoder's vector (without the CTR column ``ctr_input`` appends)."""

    def __init__(self, seg, scores: dict[tuple[str, bool], float]) -> None:
        super().__init__()
        self.width = seg.encoder.dim
        self.scores = scores
        names = sorted({name for name, _ in scores})
        self.rows = {tuple(v): n for v, n in zip(seg.encoder.encode(names).tolist(), names)}
        self.asked: list[str] = []

    def forward(self, x, t):
        b, _, s, _ = x.shape
        keys = [
            (self.rows[tuple(row)], float(image[0].mean()) < 0.5) for image, row in zip(x, t[:, : self.width].tolist())
        ]
        self.asked += [name for name, _ in keys]
        p = torch.tensor([self.scores[k] for k in keys])
        return {
            "mask": torch.full((b, 1, s, s), 5.0),
            "presence": torch.log(p / (1 - p)),
            "lesion": torch.zeros(b, 3),
            "certainty": torch.zeros(b),
        }


G, R, L = ("Segment the opacity.", "Segment the opacity in the right lung.", "Segment the opacity in the left lung.")
RL = "Segment the opacity in the right lung and left lung."
R_BASE = "Segment the opacity in the right lung base."


def _consistent_segmenter(scores, **config):
    """A light model whose scores are ``scores`` and whose anatomy halves an 8x8 image:
    image left half = patient right (zones of the right lung and the right lung), image
    right half = patient left; CTR 0.6."""
    from cxrils import vocab
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.priors import ImagePriors, PackedMasks
    from cxrils.models.light.segmenter import LightSegmenter

    cfg = LightConfig(
        priors=False, box_prior=False, ctr_input=True, ensemble=1, image_size=32, tau_presence=0.5, **config
    )
    seg = LightSegmenter(cfg)
    seg.net = _ByQuestionNet(seg, scores)
    half = np.zeros((8, 8), bool)
    half[:, :4] = True
    sides = {
        **{z: half for z in vocab.RIGHT_ZONES},
        **{z: ~half for z in vocab.LEFT_ZONES},
        "right lung": half,
        "left lung": ~half,
        "heart": np.zeros((8, 8), bool),
    }
    sides["heart"][3:6, 2:6] = True
    packed = PackedMasks(sides, (8, 8))
    seg.image_priors = lambda image: ImagePriors(anatomy=packed, x_ano=np.zeros((8, 8), np.float16), ctr=0.6)
    return seg


DARK, BRIGHT = np.full((40, 40), 60, np.uint8), np.full((40, 40), 200, np.uint8)


def test_consistent_answers_a_global_answer_is_present_exactly_when_a_lung_is():
    # dark: only the left lung's question passes (the global one fails, 0.3): the left lung
    # is present, so the global answer is too, inside the left lung only
    scores = {
        (G, True): 0.3,
        (R, True): 0.3,
        (L, True): 0.6,
        (R_BASE, True): 0.9,
        (G, False): 0.2,
        (R, False): 0.2,
        (L, False): 0.1,
        (R_BASE, False): 0.9,
    }
    seg = _consistent_segmenter(scores)
    g_dark, r_dark, l_dark, base_dark, g_bright, base_bright = seg.predict_many(
        [DARK, DARK, DARK, DARK, BRIGHT, BRIGHT], [G, R, L, R_BASE, G, R_BASE]
    )
    assert l_dark.mask.all() and l_dark.note is None
    # own score 0.3, nothing lifts it: absent, as the score alone says, so no note (docs/serve.md)
    assert not r_dark.mask.any() and r_dark.note is None
    assert g_dark.mask.any() and g_dark.presence_score == pytest.approx(0.3)
    assert "the left lung is present by the left lung's question" in g_dark.note and "own score is 0.30" in g_dark.note
    assert not g_dark.mask[:, :20].any() and g_dark.mask[:, 20:].all()  # image right half = patient left
    assert g_dark.answer == "[SEG] It is located in the left lung."
    # the right lung base scores 0.9 but its lung is absent
    assert not base_dark.mask.any() and "the lung it lies in is absent" in base_dark.note
    assert "right lung 0.30" in base_dark.note
    # bright: no lung-level question passes, so no lung, global or zone answer is present
    # (its own score 0.2 already says absent: no note)
    assert not g_bright.mask.any() and g_bright.answer == "[SEG] There is no opacity." and g_bright.note is None
    assert not base_bright.mask.any()


def test_consistent_answers_a_passing_global_question_lifts_the_lungs_its_mask_lies_in():
    # dark: the global question passes (0.9) with a mask over both halves, while each lung
    # scores below 0.5: both lungs are present, and so is a zone that passes on its own
    seg = _consistent_segmenter(
        {
            (G, True): 0.9,
            (R, True): 0.3,
            (L, True): 0.4,
            (RL, True): 0.1,
            (R_BASE, True): 0.8,
            (G, False): 0.1,
            (R, False): 0.2,
            (L, False): 0.2,
            (RL, False): 0.9,
            (R_BASE, False): 0.3,
        }
    )
    right, left, glob, both, base = seg.predict_many([DARK] * 5, [R, L, G, RL, R_BASE])
    assert glob.mask.all() and glob.note is None
    assert right.mask[:, :20].all() and not right.mask[:, 20:].any()  # the global mask inside the right lung
    assert "present by the global question" in right.note and "own score is 0.30" in right.note
    assert left.mask[:, 20:].all() and not left.mask[:, :20].any()
    assert base.mask.all() and base.note is None
    # a list of locations scores 0.1, but the global answer names both its lungs ("It is
    # located in the right lung and left lung"): present, with the global mask
    assert both.mask.all() and "mask lies in the right lung and the left lung" in both.note
    # bright: only the both-lungs question passes (0.9); it lifts no lung, so it is absent too
    right, glob, both = seg.predict_many([BRIGHT] * 3, [R, G, RL])
    assert not right.mask.any() and not glob.mask.any()
    assert not both.mask.any() and "the lung it lies in is absent" in both.note
    seg.config.consistent_answers = False  # each question on its own
    right, glob = seg.predict_many([DARK, DARK], [R, G])
    assert not right.mask.any() and glob.mask.all()
    assert seg.net.asked[-2:] == [R, G]  # no extra questions without the rule


def test_consistent_answers_a_zone_the_global_answer_names_is_present():
    # the global question passes with a mask over the image's left half (patient right)
    # only; the right lung base (a zone there) and the right lung score low on their own
    l_base = "Segment the opacity in the left lung base."
    seg = _consistent_segmenter(
        {(G, True): 0.9, (R, True): 0.2, (L, True): 0.2, (R_BASE, True): 0.1, (l_base, True): 0.1}
    )
    half = np.zeros((40, 40), bool)
    half[:, :20] = True
    seg._mask = lambda out, row, shape: half.copy()
    glob, base = seg.predict_many([DARK, DARK], [G, R_BASE])
    assert glob.answer == "[SEG] It is located in the right lung."
    assert base.mask[:, :20].all() and not base.mask[:, 20:].any()
    assert "the global question's mask lies in the right lung base" in base.note
    assert "own score is 0.100" in base.note
    # a left zone: the global answer does not name it, and its lung is absent
    (left_base,) = seg.predict_many([DARK], [l_base])
    assert not left_base.mask.any() and left_base.answer == "[SEG] There is no opacity in the left lung base."


def test_consistent_answers_a_lesion_inference_question_agrees_with_its_lung():
    inference = "Segment the opacity in the left lung and predict its type."
    seg = _consistent_segmenter({(G, True): 0.2, (R, True): 0.2, (L, True): 0.9, (inference, True): 0.1})
    left, asked = seg.predict_many([DARK, DARK], [L, inference])
    assert left.mask.all() and asked.mask[:, 20:].all() and not asked.mask[:, :20].any()
    assert asked.answer.startswith("[SEG] It is") and "present by the left lung's question" in asked.note
    seg = _consistent_segmenter({(G, True): 0.2, (R, True): 0.2, (L, True): 0.1, (inference, True): 0.9})
    (asked,) = seg.predict_many([DARK], [inference])
    assert not asked.mask.any() and asked.answer == "[SEG] There is no opacity in the left lung."
    assert "its lung answers absent" in asked.note and "left lung 0.100" in asked.note  # not "no pixel"


def test_consistent_answers_leave_cardiomegaly_alone():
    from cxrils.models.light.consistency import hierarchy_of
    from cxrils.templates import ParsedText

    inference = hierarchy_of(ParsedText("lesion_inference", None, None, ("right lung",)))
    assert inference.level == "right lung" and inference.questions[0] == "Segment the opacity."
    assert hierarchy_of(ParsedText("global", None, "cardiomegaly")) is None
    assert hierarchy_of(None) is None
    tree = hierarchy_of(ParsedText("basic", None, "effusion", ("left lung base", "left mid zone lung")))
    assert (
        tree.sides == ("left lung",)
        and tree.level is None
        and tree.questions
        == (
            "Segment the effusion.",
            "Segment the effusion in the right lung.",
            "Segment the effusion in the left lung.",
        )
    )
    both = hierarchy_of(ParsedText("basic", None, "edema", ("right lung base", "left lung base")))
    assert both.sides == ("right lung", "left lung") and both.level is None
    lungs = hierarchy_of(ParsedText("basic", None, "edema", ("left lung", "right lung")))
    assert (
        lungs.level is None
        and lungs.sides == ("right lung", "left lung")
        and hierarchy_of(ParsedText("global", None, "edema")).level == "global"
    )
    assert hierarchy_of(ParsedText("basic", None, "edema", ("left lung",))).level == "left lung"


def test_cardiomegaly_by_ctr_answers_with_the_anatomy_heart():
    from cxrils.models.light.priors import ImagePriors

    # the CTR alone (cardiomegaly_needs_score off)
    seg = _consistent_segmenter({("Segment the cardiomegaly.", True): 0.1}, cardiomegaly_needs_score=False)
    enlarged = seg.predict(DARK, "Segment the cardiomegaly.")  # CTR 0.6 > 0.5, network score 0.1
    heart = np.zeros((40, 40), bool)
    heart[15:30, 10:30] = True  # the 8x8 heart [3:6, 2:6] at 40x40 (nearest)
    assert np.array_equal(enlarged.mask, heart) and enlarged.presence_score == pytest.approx(0.1)
    assert enlarged.answer == "[SEG] It is located in the heart."
    anatomy = seg.image_priors(DARK).anatomy
    seg.image_priors = lambda image: ImagePriors(anatomy=anatomy, x_ano=np.zeros((8, 8), np.float16), ctr=0.5)
    normal = seg.predict(DARK, "Segment the cardiomegaly.")  # at the cut-off: absent
    assert not normal.mask.any() and "CTR 0.50, not above 0.50 (cardiomegaly_by_ctr)" in normal.note
    seg.config.cardiomegaly_by_ctr = False  # the network's score 0.1 then decides
    assert not seg.predict(DARK, "Segment the cardiomegaly.").mask.any()


def test_an_impossible_ctr_gives_no_cardiomegaly():
    from cxrils.config import QCConfig
    from cxrils.models.light.priors import ImagePriors

    seg = _consistent_segmenter({("Segment the cardiomegaly.", True): 0.9}, cardiomegaly_needs_score=False)
    anatomy = seg.image_priors(DARK).anatomy
    qc = QCConfig()
    for ctr in (qc.ctr_plausible_max + 0.01, 2.6, qc.ctr_plausible_min - 0.01):  # a heart wider than the thorax...
        seg.image_priors = lambda image, c=ctr: ImagePriors(anatomy=anatomy, x_ano=np.zeros((8, 8), np.float16), ctr=c)
        got = seg.predict(DARK, "Segment the cardiomegaly.")
        assert not got.mask.any() and "a failed heart or lung mask rather than a heart size" in got.note
    seg.image_priors = lambda image: ImagePriors(anatomy=anatomy, x_ano=np.zeros((8, 8), np.float16), ctr=0.6)
    assert seg.predict(DARK, "Segment the cardiomegaly.").mask.any()  # inside the range: the heart


def test_the_prior_computer_warns_of_an_anatomy_that_is_no_frontal_chest_radiograph(caplog):
    from cxrils.models.light.priors import PRIOR_LABELS, PriorComputer
    from cxrils.types import AnatomyMasks

    def anatomy_fn(x):
        h, w = x.shape
        m = {lb: np.zeros((h, w), bool) for lb in PRIOR_LABELS}
        m["right lung"][10:50, 5:25] = True  # one lung only, no heart: QC's "no left lung found"
        return AnatomyMasks(m, (h, w), "test")

    with caplog.at_level("WARNING", logger="cxrils.models.light.priors"):
        got = PriorComputer(anatomy_fn, None, None).priors(np.full((64, 64), 100, np.uint8), with_anomaly=False)
    assert "does not look like a frontal chest radiograph (no left lung found" in caplog.text
    assert got.implausible.startswith("no left lung found")
    caplog.clear()
    # warn=False (training): no warning, the reason kept with the priors
    with caplog.at_level("WARNING", logger="cxrils.models.light.priors"):
        quiet = PriorComputer(anatomy_fn, warn=False).priors(np.full((64, 64), 90, np.uint8), with_anomaly=False)
    assert caplog.text == "" and quiet.implausible.startswith("no left lung found")


def test_cardiomegaly_needs_score_asks_the_network_too():
    seg = _consistent_segmenter({("Segment the cardiomegaly.", True): 0.1, ("Segment the cardiomegaly.", False): 0.9})
    assert seg.config.cardiomegaly_needs_score  # the default
    # DARK: CTR 0.6 > 0.5 but the network scores 0.1 < tau_presence 0.5: absent, and the note says why
    low = seg.predict(DARK, "Segment the cardiomegaly.")
    assert not low.mask.any() and low.answer == "[SEG] There is no cardiomegaly."
    assert "presence score 0.100 is below 0.500 (cardiomegaly_needs_score)" in low.note
    # BRIGHT: the same CTR, the network scores 0.9: the heart
    high = seg.predict(BRIGHT, "Segment the cardiomegaly.")
    assert high.mask.any() and high.note is None and high.answer == "[SEG] It is located in the heart."
    seg.config.cardiomegaly_needs_score = False  # the CTR alone: the heart on both
    assert seg.predict(DARK, "Segment the cardiomegaly.").mask.any()


def test_prediction_score_passes_at_or_above_its_threshold():
    from cxrils.models.base import Prediction

    empty = np.zeros((2, 2), bool)
    assert Prediction(empty, "", 0.5, presence_threshold=0.5).score_passes is True
    assert Prediction(empty, "", 0.49, presence_threshold=0.5).score_passes is False
    assert Prediction(empty, "", 0.9).score_passes is None  # no threshold (ROSALIA)


def test_cardiomegaly_needs_score_passes_a_score_equal_to_its_threshold():
    """The gate is ``score >= threshold`` (present), like every other presence answer."""
    seg = _consistent_segmenter({("Segment the cardiomegaly.", True): 0.5, ("Segment the cardiomegaly.", False): 0.5})
    pred = seg.predict(DARK, "Segment the cardiomegaly.")
    assert pred.presence_score == pytest.approx(0.5, abs=1e-6) and pred.presence_threshold == 0.5
    assert pred.mask.any() and pred.answer == "[SEG] It is located in the heart."


def test_a_score_above_the_threshold_without_mask_pixels_says_why():
    from cxrils.models.light.config import LightConfig
    from cxrils.models.light.segmenter import LightSegmenter

    cfg = LightConfig(
        priors=False, box_prior=False, ctr_input=False, ensemble=1, image_size=32, tau_presence=0.5, tau_mask=0.999
    )  # the fixed network's pixels are sigmoid(5) = 0.993
    pred = LightSegmenter(cfg, net=_FixedNet()).predict(
        np.full((40, 40), 128, np.uint8), "Segment the effusion in the left lung."
    )
    assert pred.presence_score == pytest.approx(0.8) and not pred.mask.any()
    assert pred.answer == "[SEG] There is no effusion in the left lung."
    assert pred.note == "answered absent: no pixel of the mask reaches tau_mask 0.999"


def test_runs_saved_before_the_answer_rules_load_without_them():
    from cxrils.models.light.config import LightConfig

    old = LightConfig().to_dict()
    del old["consistent_answers"], old["cardiomegaly_by_ctr"], old["cardiomegaly_needs_score"]
    old["global_needs_lung"] = True  # the former one-way check: read and dropped
    back = LightConfig.from_dict(old)
    assert back.consistent_answers is False and back.cardiomegaly_by_ctr is False
    assert back.cardiomegaly_needs_score is False
    assert LightConfig().consistent_answers is True and LightConfig().cardiomegaly_by_ctr is True
    assert LightConfig().cardiomegaly_needs_score is True
    for flag in ("consistent_answers", "cardiomegaly_by_ctr", "cardiomegaly_needs_score"):
        with pytest.raises(ValueError, match=flag):
            LightConfig(**{flag: "yes"})
