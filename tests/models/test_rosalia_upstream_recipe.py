"""ROSALIA's mask frame and fine-tuning recipe against KAIST-Edlab/ROSALIA's code
(restated here, at commit 7cba5ae unless named):

- ``utils/reason_seg_dataset.py`` ``__getitem__``: the target mask goes through
  ``ResizeLongestSide(1024).apply_mask`` (``model/segment_anything/utils/transforms.py``:
  PIL nearest to ``get_preprocess_shape``), ``== 255``, and is zero-padded at the bottom
  and right to 1024 x 1024 like the image; the label is 1024 x 1024;
- ``model/LISA.py`` ``model_forward``: ``postprocess_masks(low_res, input_size=resize,
  original_size=label.shape)`` (``model/segment_anything/modeling/sam.py``: bilinear to
  1024, crop to ``resize``, bilinear to ``original_size``), then ``sigmoid_ce_loss`` (mean
  over the 1024 x 1024 pixels) and ``dice_loss`` (scale 1000, eps 1e-6) on that frame;
- ``train_ds.py`` (24c5613): with ``--batch_balance`` (train.sh passes it) the dataset
  length is ``2 * len(pos_dataset)``; ``steps_per_epoch = ceil(N / (batch_size *
  grad_accumulation_steps * world_size))``; ``--lora_sam_encoder`` adds every
  ``nn.Linear`` under ``visual_model.image_encoder`` to the LoRA targets, whose
  embeddings ``get_visual_embs`` computes under ``torch.no_grad``.

The tiny model is ``RosaliaConfig.tiny()`` (SAM input 64 x 64), random.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("sentencepiece")

import torch.nn.functional as F  # noqa: E402

from cxrils import templates  # noqa: E402
from cxrils.models.rosalia.configuration import RosaliaConfig  # noqa: E402
from cxrils.models.rosalia.segmenter import RosaliaSegmenter, build_model  # noqa: E402
from cxrils.models.rosalia.tiny import build_tiny_tokenizer  # noqa: E402

INSTRUCTION = "Segment the effusion in the left lung base."


def tiny_segmenter(tmp_path, **overrides):
    torch.manual_seed(0)
    cfg = RosaliaConfig.tiny()
    for k, v in overrides.items():
        setattr(cfg, k, v)
    model, proc = build_model(cfg, build_tiny_tokenizer(tmp_path / "tok"))
    return RosaliaSegmenter(model, proc)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_segmenter(tmp_path_factory.mktemp("tiny"))


# --- restatements of upstream --------------------------------------------------------


def get_preprocess_shape(h, w, side):
    scale = side * 1.0 / max(h, w)
    return int(h * scale + 0.5), int(w * scale + 0.5)


def upstream_target(mask, side):
    """reason_seg_dataset.py: apply_mask (PIL nearest), == 255, zero pad to side x side."""
    from PIL import Image

    h, w = get_preprocess_shape(*mask.shape, side)
    img = Image.fromarray(np.repeat((mask.astype(np.uint8) * 255)[:, :, None], 3, axis=2))
    resized = (np.array(img.resize((w, h), Image.NEAREST)) == 255).astype(np.float32)
    out = np.zeros((3, side, side), np.float32)
    out[:, :h, :w] = resized.transpose(2, 0, 1)
    return torch.from_numpy(out).mean(dim=0)


def postprocess_masks(masks, input_size, original_size, side):
    """segment_anything Sam.postprocess_masks."""
    masks = F.interpolate(masks.float(), (side, side), mode="bilinear", align_corners=False)
    masks = masks[..., : input_size[0], : input_size[1]]
    return F.interpolate(masks, original_size, mode="bilinear", align_corners=False)


def iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


# --- the frame the released weights learned ---------------------------------------------


def test_default_reads_masks_in_the_frame_the_weights_learned(tiny, monkeypatch):
    """A model that learned the padded frame perfectly outputs low-res logits whose
    training-time postprocess (1024 label size) is the padded target. Read back by the
    default geometry they give the reference mask; read as the inference example reads
    them (``original_size`` = the image), a non-square mask comes out squeezed."""
    assert RosaliaConfig().mask_geometry == "padded"  # the old default was "image"
    model, side = tiny.model, tiny.model.cfg.sam_image_size  # 64
    x = np.zeros((40, 24), np.uint8)  # tall: SAM's resize is 64 x 38, padded on the right
    gt = np.zeros(x.shape, bool)
    gt[10:32, 4:20] = True
    h, w = get_preprocess_shape(*x.shape, side)
    frame = upstream_target(gt, side) * 20 - 10  # the learned frame: logit +-10
    # low-res logits L with postprocess_masks(L, (h, w), (S, S)) ~ frame: the frame squeezed
    # into the resized image's area, at SAM's low resolution (S / 4)
    squeezed = torch.full((side, side), -10.0)
    squeezed[:h, :w] = F.interpolate(frame[None, None], (h, w), mode="bilinear", align_corners=False)[0, 0]
    low_res = F.interpolate(squeezed[None, None], (side // 4, side // 4), mode="bilinear", align_corners=False)
    learned = postprocess_masks(low_res, (h, w), (side, side), side)[0, 0] > 0
    assert iou(learned.numpy(), upstream_target(gt, side).numpy() > 0) > 0.8  # the construction is sound

    monkeypatch.setattr(model, "low_res_masks", lambda pixels, prompts: [low_res.clone() for _ in prompts])
    answer = templates.render_answer("basic", "positive")
    default = tiny.predict_teacher_forced(x, INSTRUCTION, answer).mask
    model.cfg.mask_geometry = "image"
    try:
        as_example = tiny.predict_teacher_forced(x, INSTRUCTION, answer).mask
    finally:
        model.cfg.mask_geometry = "padded"
    assert iou(default, gt) > 0.85
    assert iou(as_example, gt) < iou(default, gt) - 0.15
    # the squeeze is horizontal (w / S of the frame): the example's mask is too narrow
    assert as_example.any(axis=0).sum() < gt.any(axis=0).sum() - 3


# --- fine-tuning: loss frame, epoch length, --lora_sam_encoder -----------------------------


def test_training_loss_is_on_the_padded_frame(tiny):
    """The BCE and Dice terms equal LISA.py's, computed on postprocess_masks(..., 1024
    label size) against reason_seg_dataset.py's padded target (the old code compared
    the image-sized mask with the image-sized target)."""
    model, proc, side = tiny.model, tiny.processor, tiny.model.cfg.sam_image_size
    x = (np.random.default_rng(1).random((40, 24)) * 255).astype(np.uint8)
    gt = np.zeros(x.shape, bool)
    gt[10:32, 4:20] = True
    enc = [proc.encode(x, INSTRUCTION, templates.render_answer("basic", "positive"), gt)]
    batch = proc.collate(enc)
    assert torch.equal(batch["gt_frames"][0], upstream_target(gt, side))
    low = {}
    real = model.low_res_masks
    model.low_res_masks = lambda pixels, prompts: low.setdefault("v", real(pixels, prompts))
    try:
        with torch.no_grad():
            out = model(**batch)
    finally:
        del model.low_res_masks
    h, w = batch["reshaped_sizes"][0].tolist()
    pred = postprocess_masks(low["v"][0], (h, w), (side, side), side)[:, 0]  # (1, S, S)
    target = upstream_target(gt, side)[None]
    bce = F.binary_cross_entropy_with_logits(pred, target, reduction="none").flatten(1, 2).mean(1).sum()
    p = pred.sigmoid().flatten(1, 2)
    t = target.flatten(1, 2)
    dice = (1 - (2 * (p / 1000 * t).sum(-1) + 1e-6) / ((p / 1000).sum(-1) + (t / 1000).sum(-1) + 1e-6)).sum()
    assert torch.isclose(out.loss_bce, bce, atol=1e-6) and torch.isclose(out.loss_dice, dice, atol=1e-6)
    assert tuple(out.mask_logits[0].shape) == (side, side)


def test_epoch_is_twice_the_positives_as_batch_balance():
    """MIMIC-ILS train (paper Table 10): 1,045,140 pairs, of which 50,323 + 53,964 +
    27,538 = 131,825 positive. train_ds.py with --batch_balance: N = 2 x 131,825, 1,030
    steps of 256 per epoch; the old schedule walked all 1,045,140 (4,083 steps, 3.96x)."""
    from cxrils.models.rosalia.training import epoch_samples, schedule_steps

    n_pos, n_all = 50_323 + 53_964 + 27_538, 1_045_140
    polarities = np.zeros(n_all, dtype=bool)
    polarities[:n_pos] = True
    cfg = RosaliaConfig()
    assert epoch_samples(polarities) == 2 * n_pos
    assert schedule_steps(cfg, polarities) == 15 * math.ceil(2 * n_pos / 256) == 15 * 1030
    assert epoch_samples(["positive", "negative", "negative"]) == 2


def test_cli_train_schedule_and_sampler_follow_the_epoch(tmp_path, monkeypatch):
    """``cxrils train --model rosalia``: the schedule and the sampler's epoch are twice
    the train split's positives (the old code used the split's size)."""
    from light_synthetic import make_tiny_dataset

    import cxrils.dataset
    from cxrils.dataset import ILSDataset
    from cxrils.models.rosalia import training

    ds = make_tiny_dataset(tmp_path / "ds", n_train=8, n_val=1, n_test=1)
    polarities = ILSDataset(ds, "train").polarities
    n_pos = sum(p == "positive" for p in polarities)
    assert n_pos < len(polarities) / 2  # so the two definitions differ
    seen = {}
    real_sampler = cxrils.dataset.BalancedBatchSampler

    def sampler(*args, **kwargs):
        made = real_sampler(*args, **kwargs)
        seen["batches"] = len(made)
        return made

    def fake_train(segmenter, batches, out_dir, *, total_steps, **kwargs):
        seen["total"] = total_steps
        return []

    monkeypatch.setattr(cxrils.dataset, "BalancedBatchSampler", sampler)
    monkeypatch.setattr(training, "train_rosalia", fake_train)
    res = training.cli_train(
        ds,
        tmp_path / "run",
        {"tiny": "true", "batch_size": "2", "micro_batch_size": "2", "epochs": "1"},
        evaluate=False,
        progress=False,
    )
    assert res["steps"] == seen["total"] == math.ceil(2 * n_pos / 2)
    assert seen["batches"] == 2 * n_pos // 2


@pytest.mark.slow
def test_lora_sam_encoder_targets_the_image_encoder_and_learns_nothing_there(tmp_path):
    from cxrils.models.rosalia.training import _parse_overrides, train_rosalia

    cfg, _ = _parse_overrides({"tiny": "true", "lora_sam_encoder": "true"})
    assert cfg.lora_sam_encoder is True
    seg = tiny_segmenter(tmp_path, lora_sam_encoder=True)
    enc = seg.model.sam.vision_encoder
    lora_b = {n: p for n, p in enc.named_parameters() if "lora_B" in n}
    linears = [
        n
        for n, m in tiny_segmenter(tmp_path / "plain").model.sam.vision_encoder.named_modules()
        if isinstance(m, torch.nn.Linear)
    ]
    assert linears and {n.split(".lora_B")[0] for n in lora_b} == set(linears)  # every encoder Linear
    assert all(p.requires_grad for p in lora_b.values())
    x = (np.random.default_rng(0).random((40, 30)) * 255).astype(np.uint8)
    m = np.zeros(x.shape, bool)
    m[5:20, 5:15] = True
    batch = [
        {"image": x, "instruction": INSTRUCTION, "answer": "[SEG]", "mask": m},
        {
            "image": x,
            "instruction": "Segment the pneumonia.",
            "answer": templates.render_answer("global", "negative", "pneumonia"),
            "mask": np.zeros_like(m),
        },
    ]
    seg.model.cfg.batch_size = seg.model.cfg.micro_batch_size = 2
    seg.model.cfg.warmup_steps = 0  # the first step at the full learning rate
    train_rosalia(seg, [batch], tmp_path / "run", total_steps=1)
    # upstream computes SAM's image embeddings under no_grad: those LoRA weights stay 0
    assert all(torch.count_nonzero(p) == 0 for n, p in seg.model.sam.vision_encoder.named_parameters() if "lora_B" in n)
    assert any(torch.count_nonzero(p) for n, p in seg.model.language_model.named_parameters() if "lora_B" in n)


def test_shipped_deepspeed_config_is_the_authors_zero2():
    """``train_ds.py`` (24c5613) ``ds_config``: gradient clipping 1.0, ZeRO stage 2 with
    contiguous gradients, overlapped communication, reduce-scatter and 5e8-element
    reduce and all-gather buckets; bf16 with ``--precision bf16`` (train.sh). Batch
    size and accumulation come from the launcher ("auto" for accelerate)."""
    import json
    from importlib import resources

    cfg = json.loads((resources.files("cxrils.models.rosalia") / "ds_zero2.json").read_text())
    assert cfg["gradient_clipping"] == 1.0
    assert cfg["bf16"] == {"enabled": True}
    assert cfg["zero_optimization"] == {
        "stage": 2,
        "contiguous_gradients": True,
        "overlap_comm": True,
        "reduce_scatter": True,
        "reduce_bucket_size": 5e8,
        "allgather_bucket_size": 5e8,
    }
    assert cfg["train_micro_batch_size_per_gpu"] == cfg["gradient_accumulation_steps"] == "auto"


@pytest.mark.parametrize("shape", [(64, 38), (40, 24)])
def test_pixels_in_the_padding_are_counted_as_validate_counts_them(tiny, monkeypatch, shape):
    """validate() compares the prediction postprocessed to the 1024 label (the padded
    square) with the zero-padded target, so a predicted pixel right of or below the
    resized image is a false positive there. The adapter's mask is the image part; it
    reports those pixels as ``padding_pixels`` (in the image's pixels: exact on SAM's grid,
    (64, 38) here, scaled by H * W / (h * w) otherwise)."""
    model, side = tiny.model, tiny.model.cfg.sam_image_size  # 64
    x = np.zeros(shape, np.uint8)
    h, w = get_preprocess_shape(*x.shape, side)
    assert (h, w) == (64, 38)
    frame = torch.full((side, side), -10.0)
    frame[8:30, 6:30] = 10.0  # a lesion in the image
    frame[20:44, w - 6 : w + 16] = 10.0  # and one across the right edge into the padding
    squeezed = torch.full((side, side), -10.0)
    squeezed[:h, :w] = F.interpolate(frame[None, None], (h, w), mode="bilinear", align_corners=False)[0, 0]
    low_res = F.interpolate(squeezed[None, None], (side // 4, side // 4), mode="bilinear", align_corners=False)
    learned = postprocess_masks(low_res, (h, w), (side, side), side)[0, 0] > 0  # validate()'s prediction
    in_padding = int(learned.sum() - learned[:h, :w].sum())
    assert in_padding > 100  # the blob survives the round trip

    monkeypatch.setattr(model, "low_res_masks", lambda pixels, prompts: [low_res.clone() for _ in prompts])
    pred = tiny.predict_teacher_forced(x, INSTRUCTION, templates.render_answer("basic", "positive"))
    if shape == (h, w):
        assert np.array_equal(pred.mask, learned[:h, :w].numpy())
        assert pred.mask[:, -1].any()  # the lesion reaches the image's last column
        assert pred.padding_pixels == in_padding
        assert int(pred.mask.sum()) + pred.padding_pixels == int(learned.sum())
    else:  # off SAM's grid: the count scaled to the image's pixels (ours, not upstream's)
        assert pred.padding_pixels == round(in_padding * shape[0] * shape[1] / (h * w))
    model.cfg.mask_geometry = "image"  # LISA's own frame has no padding
    try:
        assert (
            tiny.predict_teacher_forced(x, INSTRUCTION, templates.render_answer("basic", "positive")).padding_pixels
            == 0
        )
    finally:
        model.cfg.mask_geometry = "padded"
