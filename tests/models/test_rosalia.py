"""ROSALIA (LISA architecture) on a tiny randomly initialised configuration, on CPU.

These tests run the real code path of the full model — LLaVA forward with LoRA, the
[SEG] hidden state -> MLP -> SAM mask decoder, the paper's loss, a backward step,
save/load, generation turning a [SEG] into a mask and LISA key mapping — at a size a
CPU handles in seconds. Nothing here was run at LISA-7B scale (no GPU, no weights).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from cxrils import templates  # noqa: E402
from cxrils.models.rosalia.configuration import RosaliaConfig  # noqa: E402
from cxrils.models.rosalia.lisa_checkpoint import (  # noqa: E402
    LisaCheckpointError, convert_lisa_state_dict, load_lisa_into, map_sam_key,
)
from cxrils.models.rosalia.losses import mask_dice  # noqa: E402
from cxrils.models.rosalia.segmenter import RosaliaSegmenter, build_model  # noqa: E402
from cxrils.models.rosalia.tiny import build_tiny_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    tok = build_tiny_tokenizer()
    cfg = RosaliaConfig.tiny(vocab_size=len(tok) + 2)
    model, proc = build_model(cfg, tok)
    return RosaliaSegmenter(model, proc)


def _sample(h=40, w=30, positive=True):
    rng = np.random.default_rng(0)
    x = (rng.random((h, w)) * 255).astype(np.uint8)
    m = np.zeros((h, w), bool)
    if positive:
        m[5:20, 5:15] = True
        return x, "Segment the effusion in the left lung base.", templates.render_answer("basic", "positive"), m
    return x, "Segment the pneumonia.", templates.render_answer("global", "negative", "pneumonia"), m


def test_forward_loss_terms_and_backward(tiny):
    model, proc = tiny.model, tiny.processor
    model.train()
    enc = [proc.encode(*(_sample(positive=True))), proc.encode(*(_sample(positive=False)))]
    out = model(**proc.collate(enc))
    cfg = model.cfg
    expected = cfg.lambda_txt * out.loss_txt + cfg.lambda_bce * out.loss_bce + cfg.lambda_dice * out.loss_dice
    assert torch.isclose(out.loss.detach(), expected, atol=1e-5)
    assert [tuple(m.shape) for m in out.mask_logits] == [(40, 30), (40, 30)]
    out.loss.backward()
    # trained: mask decoder, [SEG] MLP, LoRA; frozen: SAM image encoder, CLIP tower
    assert model.sam.mask_decoder.iou_token.weight.grad is not None
    assert model.text_hidden_fcs[0].weight.grad is not None
    assert any(p.grad is not None for n, p in model.named_parameters() if "lora_" in n)
    assert model.sam.vision_encoder.pos_embed.grad is None
    assert not model.sam.vision_encoder.pos_embed.requires_grad
    model.zero_grad()
    model.eval()


def test_seg_position_is_token_before_seg(tiny):
    seg = tiny.model.seg_token_id
    ids = torch.tensor([[5, 6, seg, 7], [5, seg, 6, 7]])
    pos = tiny.model.seg_hidden_positions(ids)
    assert pos.tolist() == [[False, True, False, False], [True, False, False, False]]


def test_dice_only_on_positives():
    logits = [torch.full((4, 4), 5.0), torch.full((4, 4), 5.0)]
    empty, full = torch.zeros(4, 4), torch.ones(4, 4)
    assert float(mask_dice(logits, [empty, empty])) == 0.0
    assert float(mask_dice(logits, [full, empty])) == pytest.approx(float(mask_dice(logits[:1], [full])))


def test_missing_seg_is_an_error(tiny):
    x, ins, _, m = _sample()
    enc = tiny.processor.encode(x, ins, "There is no effusion.", m)
    with pytest.raises(ValueError, match=r"\[SEG\]"):
        tiny.model(**tiny.processor.collate([enc]))


def test_save_load_and_predict_roundtrip(tiny, tmp_path):
    tiny.save_pretrained(tmp_path / "run")
    from cxrils.models.base import Segmenter

    loaded = Segmenter.from_pretrained(tmp_path / "run")
    assert isinstance(loaded, RosaliaSegmenter)
    x = _sample()[0]
    a = tiny.predict(x, "Segment the effusion in the left lung base.")
    b = loaded.predict(x, "Segment the effusion in the left lung base.")
    assert a.answer == b.answer
    assert a.mask.shape == x.shape and np.array_equal(a.mask, b.mask)
    assert 0.0 <= b.presence_score <= 1.0


def test_generated_seg_becomes_mask(tiny, monkeypatch):
    """Force generation of '[SEG]</s>' and check the mask path runs at image size."""
    model, proc = tiny.model, tiny.processor
    seg, eos = model.seg_token_id, proc.tokenizer.eos_token_id

    def fake_generate(input_ids, **kw):  # the LLM's sampling is not under test here
        tail = torch.tensor([[seg, eos]] * input_ids.shape[0])
        return torch.cat([input_ids, tail], dim=1)

    monkeypatch.setattr(model.llava, "generate", fake_generate)
    x = _sample(h=50, w=64)[0]
    pred = tiny.predict(x, "Segment the effusion in the left lung base.")
    assert pred.answer == "[SEG]"
    assert pred.mask.shape == (50, 64) and pred.mask.dtype == bool
    assert pred.presence_score > 0.0


def test_sam_key_renames():
    assert map_sam_key("mask_decoder.output_hypernetworks_mlps.3.layers.0.weight") == \
        "mask_decoder.output_hypernetworks_mlps.3.proj_in.weight"
    assert map_sam_key("mask_decoder.output_hypernetworks_mlps.3.layers.1.bias") == \
        "mask_decoder.output_hypernetworks_mlps.3.layers.0.bias"
    assert map_sam_key("image_encoder.blocks.1.norm1.weight") == "vision_encoder.layers.1.layer_norm1.weight"
    assert map_sam_key("prompt_encoder.pe_layer.positional_encoding_gaussian_matrix") == \
        "prompt_encoder.shared_embedding.positional_embedding"


def _lisa_named_state(model) -> dict:
    """A state dict under LISA-7B-v1's key names, written from LISA's and
    segment-anything's module naming (not by inverting our mapping)."""
    sd = model.state_dict()
    g = lambda k: sd[k].clone()  # noqa: E731
    lisa = {}
    tc = model.llava.config.text_config
    lisa["model.embed_tokens.weight"] = g("llava.model.language_model.embed_tokens.weight")
    lisa["model.norm.weight"] = g("llava.model.language_model.norm.weight")
    lisa["lm_head.weight"] = g("llava.lm_head.weight")
    for i in range(tc.num_hidden_layers):
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            base = f"llava.model.language_model.layers.{i}.self_attn.{p}"
            key = base + (".base_layer.weight" if f"{base}.base_layer.weight" in sd else ".weight")
            lisa[f"model.layers.{i}.self_attn.{p}.weight"] = g(key)
        for p in ("gate_proj", "up_proj", "down_proj"):
            lisa[f"model.layers.{i}.mlp.{p}.weight"] = g(f"llava.model.language_model.layers.{i}.mlp.{p}.weight")
        for p in ("input_layernorm", "post_attention_layernorm"):
            lisa[f"model.layers.{i}.{p}.weight"] = g(f"llava.model.language_model.layers.{i}.{p}.weight")
    lisa["model.mm_projector.weight"] = g("llava.model.multi_modal_projector.linear.weight")
    lisa["model.mm_projector.bias"] = g("llava.model.multi_modal_projector.linear.bias")
    lisa["model.text_hidden_fcs.0.0.weight"] = g("text_hidden_fcs.0.weight")
    lisa["model.text_hidden_fcs.0.2.bias"] = g("text_hidden_fcs.2.bias")
    # SAM, original segment-anything names
    lisa["model.visual_model.image_encoder.patch_embed.proj.weight"] = g("sam.vision_encoder.patch_embed.projection.weight")
    lisa["model.visual_model.image_encoder.blocks.0.attn.qkv.weight"] = g("sam.vision_encoder.layers.0.attn.qkv.weight")
    lisa["model.visual_model.image_encoder.blocks.1.norm2.bias"] = g("sam.vision_encoder.layers.1.layer_norm2.bias")
    lisa["model.visual_model.image_encoder.neck.3.weight"] = g("sam.vision_encoder.neck.layer_norm2.weight")
    lisa["model.visual_model.prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"] = \
        g("sam.prompt_encoder.shared_embedding.positional_embedding")
    lisa["model.visual_model.prompt_encoder.no_mask_embed.weight"] = g("sam.prompt_encoder.no_mask_embed.weight")
    lisa["model.visual_model.prompt_encoder.mask_downscaling.3.weight"] = g("sam.prompt_encoder.mask_embed.conv2.weight")
    lisa["model.visual_model.mask_decoder.iou_token.weight"] = g("sam.mask_decoder.iou_token.weight")
    lisa["model.visual_model.mask_decoder.output_upscaling.1.weight"] = g("sam.mask_decoder.upscale_layer_norm.weight")
    lisa["model.visual_model.mask_decoder.transformer.layers.0.norm3.weight"] = \
        g("sam.mask_decoder.transformer.layers.0.layer_norm3.weight")
    lisa["model.visual_model.mask_decoder.transformer.norm_final_attn.bias"] = \
        g("sam.mask_decoder.transformer.layer_norm_final_attn.bias")
    lisa["model.visual_model.mask_decoder.output_hypernetworks_mlps.0.layers.2.weight"] = \
        g("sam.mask_decoder.output_hypernetworks_mlps.0.proj_out.weight")
    lisa["model.visual_model.mask_decoder.iou_prediction_head.layers.1.weight"] = \
        g("sam.mask_decoder.iou_prediction_head.layers.0.weight")
    lisa["model.visual_model.pixel_mean"] = torch.zeros(3, 1, 1)
    return {k: v + 0.5 for k, v in lisa.items()}  # shift so a real load is visible


def test_lisa_checkpoint_keys_load_into_fresh_model():
    torch.manual_seed(1)
    tok = build_tiny_tokenizer()
    cfg = RosaliaConfig.tiny(vocab_size=len(tok) + 2)
    donor, _ = build_model(cfg, tok)
    lisa = _lisa_named_state(donor)
    from cxrils.models.rosalia.modeling import RosaliaForSegmentation, build_llava, build_sam
    from cxrils.models.rosalia.processing import RosaliaProcessor

    tok2 = RosaliaProcessor.prepare_tokenizer(build_tiny_tokenizer())
    fresh = RosaliaForSegmentation(cfg, build_llava(cfg, tok2.convert_tokens_to_ids("<image>")), build_sam(cfg),
                                   tok2.convert_tokens_to_ids("[SEG]"))
    if fresh.llava.get_input_embeddings().weight.shape[0] != len(tok2):
        fresh.llava.resize_token_embeddings(len(tok2))
    load_lisa_into(fresh, lisa)
    sd = fresh.state_dict()
    assert torch.equal(sd["llava.model.language_model.layers.1.self_attn.q_proj.weight"],
                       lisa["model.layers.1.self_attn.q_proj.weight"])
    assert torch.equal(sd["sam.mask_decoder.output_hypernetworks_mlps.0.proj_out.weight"],
                       lisa["model.visual_model.mask_decoder.output_hypernetworks_mlps.0.layers.2.weight"])
    assert torch.equal(sd["sam.shared_image_embedding.positional_embedding"],
                       lisa["model.visual_model.prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"])
    assert torch.equal(sd["text_hidden_fcs.0.weight"], lisa["model.text_hidden_fcs.0.0.weight"])
    with pytest.raises(LisaCheckpointError):
        convert_lisa_state_dict({"model.visual_model.mask_decoder.bogus.weight": torch.zeros(1)}, set(sd))


@pytest.mark.slow
def test_training_steps_reduce_loss(tiny, tmp_path):
    from cxrils.models.rosalia.training import train_rosalia

    tiny.model.cfg.hist_eq_prob = 0.0
    tiny.model.cfg.lr = 3e-3
    pos, neg = _sample(positive=True), _sample(positive=False)
    batch = [dict(zip(("image", "instruction", "answer", "mask"), s)) for s in (pos, neg)]
    hist = train_rosalia(tiny, [batch] * 24, tmp_path / "run", total_steps=12)
    assert len(hist) == 12
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert (tmp_path / "run" / "model.safetensors").is_file()


@pytest.mark.slow
def test_cli_train_tiny_rosalia_on_a_dataset(tmp_path):
    """`cxrils train --model rosalia --set tiny=true` on a synthetic dataset: trains,
    saves, resumes to a longer schedule, evaluates the validation split."""
    import json

    from typer.testing import CliRunner

    from cxrils.cli import app
    from cxrils.models.base import Segmenter
    from light_synthetic import make_tiny_dataset

    ds = make_tiny_dataset(tmp_path / "ds", n_train=8, n_val=2, n_test=1)
    run = tmp_path / "run"
    common = ["train", "--model", "rosalia", "--dataset", str(ds), "-o", str(run), "--set", "tiny=true",
              "--set", "batch_size=2", "--set", "micro_batch_size=2"]
    r = CliRunner().invoke(app, common + ["--set", "steps=2", "--no-evaluate"])
    assert r.exit_code == 0, r.output
    assert len((run / "train_log.jsonl").read_text().splitlines()) == 2
    assert (run / "optimizer.pt").is_file()
    r = CliRunner().invoke(app, common + ["--set", "steps=3"])
    assert r.exit_code == 0, r.output
    resumed = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in resumed] == [1, 2, 3]

    ev = json.loads((run / "eval_validate.json").read_text())
    assert ev  # the validation split was predicted and scored
    seg = Segmenter.from_pretrained(run)
    x = np.zeros((40, 30), np.uint8)
    assert seg.predict(x, "Segment the edema.").mask.shape == (40, 30)


def test_cli_train_rosalia_without_weights_says_what_to_get(tmp_path):
    from typer.testing import CliRunner

    from cxrils.cli import app
    from light_synthetic import make_tiny_dataset

    ds = make_tiny_dataset(tmp_path / "ds", n_train=4, n_val=1, n_test=1)
    r = CliRunner().invoke(app, ["train", "--model", "rosalia", "--dataset", str(ds), "-o", str(tmp_path / "r")])
    assert r.exit_code == 2
    assert "lisa_checkpoint" in r.output


@pytest.mark.slow
def test_interrupted_training_resumes_on_schedule(tmp_path):
    """A run stopped after 2 of 4 steps and resumed from its checkpoint follows the
    same learning-rate schedule as an uninterrupted 4-step run."""
    from cxrils.models.rosalia.training import train_rosalia

    def fresh():
        torch.manual_seed(0)
        tok = build_tiny_tokenizer()
        cfg = RosaliaConfig.tiny(vocab_size=len(tok) + 2)
        cfg.batch_size = cfg.micro_batch_size = 2
        model, proc = build_model(cfg, tok)
        return RosaliaSegmenter(model, proc)

    pos, neg = _sample(positive=True), _sample(positive=False)
    batch = [dict(zip(("image", "instruction", "answer", "mask"), s)) for s in (pos, neg)]
    straight = train_rosalia(fresh(), [batch] * 4, tmp_path / "a", total_steps=4)
    first = train_rosalia(fresh(), [batch] * 2, tmp_path / "b", total_steps=4)  # "killed" after step 2
    assert len(first) == 2 and (tmp_path / "b" / "optimizer.pt").is_file()
    from cxrils.models.base import Segmenter

    resumed = train_rosalia(Segmenter.from_pretrained(tmp_path / "b"), [batch] * 2, tmp_path / "b",
                            total_steps=4, start_step=2)
    assert [e["step"] for e in resumed] == [1, 2, 3, 4]
    assert [e["lr"] for e in resumed] == pytest.approx([e["lr"] for e in straight])
