"""ROSALIA (LISA architecture) on tiny models, on CPU.

Two kinds of tiny model: a checkpoint written by :mod:`lisa_fixture` in exactly the
released ``LISAForCausalLM`` layout (loaded through the same code path as
ROSALIA-7B-v1), and a randomly initialised one (``RosaliaConfig.tiny()``) for training.
What upstream does is restated in each test (KAIST-Edlab/ROSALIA, dvlab-research/LISA).
Nothing here ran at 7B scale (no GPU, no weights).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
spm = pytest.importorskip("sentencepiece")

from lisa_fixture import (  # noqa: E402
    LAYERS,
    SAM_VIT_H,
    lisa_config,
    lisa_llm_keys,
    sam_original_shapes,
    write_clip,
    write_lisa_checkpoint,
)

from cxrils import templates  # noqa: E402
from cxrils.models.base import ModelLoadError, Segmenter  # noqa: E402
from cxrils.models.rosalia.configuration import SYSTEM_PROMPT, RosaliaConfig  # noqa: E402
from cxrils.models.rosalia.lisa_checkpoint import (  # noqa: E402
    llama_config,
    map_lisa_key,
    sam_config_from_shapes,
)
from cxrils.models.rosalia.losses import mask_dice  # noqa: E402
from cxrils.models.rosalia.segmenter import RosaliaSegmenter, build_model  # noqa: E402
from cxrils.models.rosalia.tiny import build_tiny_tokenizer  # noqa: E402
from cxrils.models.rosalia.tokenizer import IMAGE_TOKEN_INDEX, LisaTokenizer  # noqa: E402

INSTRUCTION = "Segment the effusion in the left lung base."


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """(checkpoint folder, CLIP folder, LISA-named state) of the tiny released layout."""
    root = tmp_path_factory.mktemp("hub")
    ckpt, clip = root / "ROSALIA-7B-v1", root / "clip-vit-large-patch14"
    state = write_lisa_checkpoint(ckpt)
    write_clip(clip)
    return ckpt, clip, state


@pytest.fixture(scope="module")
def released(release):
    ckpt, clip, _ = release
    return Segmenter.from_pretrained(ckpt, clip_path=str(clip))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    tok = build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))
    model, proc = build_model(RosaliaConfig.tiny(), tok)
    return RosaliaSegmenter(model, proc)


def _image(h=40, w=30, seed=0):
    return (np.random.default_rng(seed).random((h, w)) * 255).astype(np.uint8)


def _sample(positive=True):
    x = _image()
    m = np.zeros(x.shape, bool)
    if positive:
        m[5:20, 5:15] = True
        return x, INSTRUCTION, templates.render_answer("basic", "positive"), m
    return x, "Segment the pneumonia.", templates.render_answer("global", "negative", "pneumonia"), m


# ------------------------------------------------------------------ released layout
def test_released_layout_loads_every_weight_and_predicts(release, released):
    ckpt, clip, state = release
    assert isinstance(released, RosaliaSegmenter)
    sd = released.model.state_dict()
    # a few weights by LISA name, against the file (bf16 in the file, fp32 on the CPU)
    pairs = {
        "model.layers.1.self_attn.q_proj.weight": "language_model.model.layers.1.self_attn.q_proj.weight",
        "lm_head.weight": "language_model.lm_head.weight",
        "model.mm_projector.weight": "mm_projector.weight",
        "model.text_hidden_fcs.0.2.weight": "text_hidden_fcs.0.2.weight",
        "model.visual_model.mask_decoder.output_hypernetworks_mlps.2.layers.2.weight": "sam.mask_decoder.output_hypernetworks_mlps.2.proj_out.weight",
        "model.visual_model.image_encoder.blocks.1.attn.rel_pos_h": "sam.vision_encoder.layers.1.attn.rel_pos_h",
        "model.visual_model.prompt_encoder.pe_layer.positional_encoding_gaussian_matrix": "sam.shared_image_embedding.positional_embedding",
    }
    for lisa, ours in pairs.items():
        assert torch.equal(sd[ours].to(torch.bfloat16), state[lisa]), lisa
    # the CLIP tower is the separate folder's, not random
    from safetensors.torch import load_file

    clip_state = load_file(str(clip / "model.safetensors"))
    w = "vision_model.encoder.layers.2.self_attn.q_proj.weight"
    ours = "vision_tower." + (w if "vision_tower." + w in sd else w[len("vision_model.") :])
    assert torch.equal(sd[ours], clip_state[w])
    assert not any("lora_" in k for k in sd)  # a released model is used as it is
    pred = released.predict(_image(50, 64), INSTRUCTION)
    assert pred.mask.shape == (50, 64) and pred.mask.dtype == bool
    assert isinstance(pred.answer, str) and 0.0 <= pred.presence_score <= 1.0


def test_every_checkpoint_key_is_used_or_documented(release, tmp_path):
    ckpt, clip, state = release
    model = Segmenter.from_pretrained(ckpt, clip_path=str(clip)).model
    ours = set(model.state_dict())
    for key in state:
        assert map_lisa_key(key) in ours, key
    # an unexpected key and a missing key are errors naming the keys
    bad = tmp_path / "bad"
    write_lisa_checkpoint(bad, extra={"model.visual_model.mask_decoder.bogus.weight": torch.zeros(2)})
    with pytest.raises(ModelLoadError, match="1 unexpected keys.*bogus"):
        Segmenter.from_pretrained(bad, clip_path=str(clip))
    short = tmp_path / "short"
    write_lisa_checkpoint(short, drop=("model.layers.0.mlp.up_proj.weight",))
    with pytest.raises(ModelLoadError, match="1 missing weights.*layers.0.mlp.up_proj"):
        Segmenter.from_pretrained(short, clip_path=str(clip))
    # vision-tower keys (an unmerged save) and LLaMA's old inv_freq buffers are ignored, as documented
    extra = tmp_path / "extra"
    write_lisa_checkpoint(
        extra,
        extra={
            "model.vision_tower.vision_tower.vision_model.post_layernorm.weight": torch.ones(4),
            "model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(8),
        },
    )
    Segmenter.from_pretrained(extra, clip_path=str(clip))


def test_mask_geometry_is_chosen_at_load(release, released):
    """ROSALIA's weights learned the padded frame (the default); LISA's own weights the
    image frame (dvlab-research/LISA utils/reason_seg_dataset.py keeps the label at the
    image's size), so a LISA checkpoint is loaded with mask_geometry="image"."""
    ckpt, clip, _ = release
    assert released.model.cfg.mask_geometry == "padded"
    lisa = Segmenter.from_pretrained(ckpt, clip_path=str(clip), mask_geometry="image")
    assert lisa.model.cfg.mask_geometry == "image"
    with pytest.raises(ModelLoadError, match="mask_geometry must be one of"):
        Segmenter.from_pretrained(ckpt, clip_path=str(clip), mask_geometry="stretched")


def test_missing_pieces_name_what_to_fetch(release, tmp_path, monkeypatch):
    ckpt, clip, _ = release
    monkeypatch.delenv("CXRILS_CLIP_PATH", raising=False)
    lone = tmp_path / "lone" / "ROSALIA-7B-v1"
    write_lisa_checkpoint(lone)
    with pytest.raises(ModelLoadError, match=r"openai/clip-vit-large-patch14.*clip-vit-large-patch14"):
        Segmenter.from_pretrained(lone)
    monkeypatch.setenv("CXRILS_CLIP_PATH", str(clip))
    assert isinstance(Segmenter.from_pretrained(lone), RosaliaSegmenter)
    (lone / "tokenizer.model").unlink()
    with pytest.raises(ModelLoadError, match="tokenizer.model"):
        Segmenter.from_pretrained(lone)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps(lisa_config(10)))
    with pytest.raises(ModelLoadError, match="ROSALIA-7B-v1"):
        Segmenter.from_pretrained(empty)


def test_cli_predict_detects_the_released_format(release, tmp_path, monkeypatch):
    from PIL import Image
    from typer.testing import CliRunner

    from cxrils.cli import app

    ckpt, clip, _ = release
    monkeypatch.setenv("CXRILS_CLIP_PATH", str(clip))
    img = tmp_path / "cxr.png"
    Image.fromarray(_image(48, 40)).save(img)
    r = CliRunner().invoke(app, ["predict", "--model", str(ckpt), str(img), INSTRUCTION, "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o" / "prediction.json").is_file()


def test_prompt_ids_are_the_authors(released):
    """inference_rosalia_example.py: llava_v1 template, '<im_start><image><im_end>\\n' + instruction;
    tokenizer_image_token with transformers 4.31's slow legacy LlamaTokenizer. Restated on
    sentencepiece directly: [<s>] + sp("...USER:") + <im_start> + -200 + <im_end> +
    sp("Segment ... ASSISTANT:") (the whitespace next to the added tokens is stripped)."""
    proc = released.processor
    tok = proc.tokenizer
    assert proc.prompt(INSTRUCTION) == (
        SYSTEM_PROMPT + " USER: <im_start><image><im_end>\n" + INSTRUCTION + " ASSISTANT:"
    )
    sp = spm.SentencePieceProcessor(model_file=str(tok.folder / "tokenizer.model"))
    added = json.loads((tok.folder / "added_tokens.json").read_text())
    expected = (
        [1]
        + sp.encode(SYSTEM_PROMPT + " USER:")
        + [added["<im_start>"], IMAGE_TOKEN_INDEX, added["<im_end>"]]
        + sp.encode(INSTRUCTION + " ASSISTANT:")
    )
    enc = proc.encode(_image(), INSTRUCTION)
    assert enc.input_ids.tolist() == expected
    assert tok.convert_tokens_to_ids("<image>") is None and len(tok) == sp.get_piece_size() + 4
    # training: " [SEG] There is ...</s>" -> [SEG], sp("There is ..."), </s>; only those are labelled
    answer = templates.render_answer("basic", "negative", "effusion", ["left lung base"])
    enc = proc.encode(_image(), INSTRUCTION, answer, np.zeros((40, 30), bool))
    tail = [added["[SEG]"]] + sp.encode(answer.replace("[SEG] ", "")) + [2]
    assert enc.input_ids.tolist() == expected + tail
    assert [t for t in enc.labels.tolist() if t != -100] == tail


def test_image_inputs_are_the_authors(released):
    """SAM: ResizeLongestSide(1024) (here the tiny SAM's 64): int(side * 64 / longest + 0.5),
    PIL bilinear, (x - mean) / std, zero padding bottom/right. CLIP: its processor."""
    from PIL import Image

    proc = released.processor
    x = _image(50, 30)
    im = proc.images(x)
    h, w = int(50 * 64 / 50 + 0.5), int(30 * 64 / 50 + 0.5)
    assert im["reshaped_size"].tolist() == [h, w] == [64, 38]
    rgb = np.repeat(x[:, :, None], 3, axis=2)
    resized = np.asarray(Image.fromarray(rgb).resize((w, h), Image.BILINEAR), np.float32)
    mean, std = np.array([123.675, 116.28, 103.53], np.float32), np.array([58.395, 57.12, 57.375], np.float32)
    sam = im["sam_pixel_values"].permute(1, 2, 0).numpy()
    assert np.allclose(sam[:h, :w], (resized - mean) / std, atol=1e-5)
    assert not sam[:, w:].any() and not sam[h:].any()
    assert tuple(im["pixel_values"].shape) == (3, 32, 32)


def test_seg_hidden_state_is_the_one_before_seg(released, monkeypatch):
    """LISA.py: the hidden state at the position before each [SEG] (seg_token_mask =
    output_ids[:, 1:] == seg), after the final norm, feeds text_hidden_fcs; force the
    answer '[SEG]</s>' and recompute the mask from a plain forward of prompt + [SEG]."""
    model, proc = released.model, released.processor
    seg, eos = model.seg_token_id, proc.tokenizer.eos_token_id
    monkeypatch.setattr(
        model.language_model,
        "generate",
        lambda inputs_embeds, **kw: torch.tensor([[seg, eos]] * inputs_embeds.shape[0]),
    )
    x = _image(36, 44)
    pred = released.predict(x, INSTRUCTION)
    assert pred.answer == "[SEG]"
    batch = proc.collate([proc.encode(x, INSTRUCTION)])
    ids = torch.cat([batch["input_ids"], torch.tensor([[seg]])], dim=1)
    emb, att, _, _ = model.inputs_embeds(ids, torch.ones_like(ids), batch["pixel_values"])
    with torch.no_grad():
        hidden = model.language_model.model(inputs_embeds=emb, attention_mask=att).last_hidden_state
        prompt = model.text_hidden_fcs[0](hidden[:, -2])
        logits = model.decode_masks(
            batch["sam_pixel_values"], [prompt], batch["reshaped_sizes"], batch["original_sizes"]
        )[0][0][0]
    assert np.array_equal(pred.mask, (logits > 0).numpy())
    assert emb.shape[1] == ids.shape[1] - 1 + 16  # -200 -> (32 / 8)^2 CLIP patches, CLS dropped


def test_lora_targets_all_language_model_linears_by_default(release, tmp_path):
    """train_ds.py find_linear_layers: every nn.Linear outside visual_model, vision_tower,
    mm_projector, text_hidden_fcs (lm_head included), r 128, alpha 256; q/v selectable."""
    ckpt, clip, _ = release
    cfg = RosaliaConfig(checkpoint=str(ckpt), clip_path=str(clip))
    assert (cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout) == (128, 256, 0.05)
    model, _ = build_model(cfg)
    expected = {"lm_head"} | {
        f"model.layers.{i}.{p}"
        for i in range(LAYERS)
        for p in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        )
    }
    with_lora = {n.rsplit(".lora_A", 1)[0] for n, _ in model.language_model.named_modules() if n.endswith(".lora_A")}
    assert with_lora == expected
    assert model.language_model.lm_head.lora_A["default"].weight.shape == (128, 64)
    trainable = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"language_model", "sam", "text_hidden_fcs"}
    assert not any(
        p.requires_grad
        for n, p in model.named_parameters()
        if n.startswith(("vision_tower", "mm_projector", "sam.vision_encoder", "sam.prompt_encoder"))
    )
    qv, _ = build_model(
        RosaliaConfig(checkpoint=str(ckpt), clip_path=str(clip), lora_target_modules=("q_proj", "v_proj"))
    )
    with_lora = {n.rsplit(".lora_A", 1)[0] for n, _ in qv.language_model.named_modules() if n.endswith(".lora_A")}
    assert with_lora == {f"model.layers.{i}.self_attn.{p}" for i in range(LAYERS) for p in ("q_proj", "v_proj")}


def test_bf16_on_the_gpu_code_path_runs_on_cpu(release):
    """precision bf16 (the authors' default on GPUs): weights in bfloat16, inputs cast,
    masks in float32; exercised on the CPU."""
    ckpt, clip, _ = release
    seg = Segmenter.from_pretrained(ckpt, clip_path=str(clip), precision="bf16", device="cpu")
    assert next(seg.model.language_model.parameters()).dtype == torch.bfloat16
    assert next(seg.model.sam.parameters()).dtype == torch.bfloat16
    pred = seg.predict(_image(30, 26), INSTRUCTION)
    assert pred.mask.shape == (30, 26)


# ------------------------------------------------------------------ full-size shapes (meta device)
def test_sam_vit_h_and_llama_7b_shapes_map_exactly():
    """At full size on the meta device: segment-anything's SAM ViT-H names and shapes
    (build_sam_vit_h: 1280 wide, 32 blocks, 16 heads, global 7/15/23/31, window 14) map
    one to one onto transformers' SamModel of the inferred config, and LISA-7B's LLaMA
    names onto LlamaForCausalLM."""
    from transformers import LlamaForCausalLM, SamModel

    shapes = {"model.visual_model." + k: v for k, v in sam_original_shapes(SAM_VIT_H).items()}
    conf = sam_config_from_shapes(shapes)
    assert conf.vision_config.global_attn_indexes == [7, 15, 23, 31]
    assert (conf.vision_config.num_attention_heads, conf.vision_config.window_size) == (16, 14)
    with torch.device("meta"):
        sam = SamModel(conf)
    theirs = {k: tuple(v.shape) for k, v in sam.state_dict().items()}
    mapped = {map_lisa_key(k)[len("sam.") :]: v for k, v in shapes.items()}
    assert set(theirs) - set(mapped) == {"shared_image_embedding.positional_embedding"}
    assert all(theirs[k] == v for k, v in mapped.items()), [k for k, v in mapped.items() if theirs.get(k) != v][:5]
    cfg7b = {
        **lisa_config(32004),
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
    }
    with torch.device("meta"):
        llm = LlamaForCausalLM(llama_config(cfg7b))
    assert {"language_model." + k for k in llm.state_dict()} == {map_lisa_key(k) for k in lisa_llm_keys(32)}
    n = sum(p.numel() for p in llm.parameters())
    assert 6.7e9 < n < 6.8e9  # LLaMA-7B with 32004 tokens


# ------------------------------------------------------------------ tokenizer rules
def test_tokenizer_restates_the_slow_legacy_rules(release):
    ckpt, _, _ = release
    tok = LisaTokenizer(ckpt)
    sp = spm.SentencePieceProcessor(model_file=str(ckpt / "tokenizer.model"))
    seg = tok.convert_tokens_to_ids("[SEG]")
    # both neighbours of an added token lose their whitespace; </s> keeps it (lstrip false)
    assert tok.tokenize_ids("ASSISTANT: [SEG] There is no edema.</s>") == [1] + sp.encode("ASSISTANT:") + [
        seg
    ] + sp.encode("There is no edema.") + [2]
    assert tok.tokenize_ids("no edema. </s>", add_bos=False) == sp.encode("no edema. ") + [2]
    assert tok.decode([seg] + sp.encode("There is no edema.")) == "[SEG] There is no edema."
    assert tok.pad_token_id == tok.unk_token_id == 0  # pad = unk, as the authors set


# ------------------------------------------------------------------ tiny random model: training path
@pytest.mark.slow
def test_forward_loss_terms_and_backward(tiny):
    model, proc = tiny.model, tiny.processor
    model.train()
    enc = [proc.encode(*_sample(True)), proc.encode(*_sample(False))]
    out = model(**proc.collate(enc))
    cfg = model.cfg
    expected = cfg.lambda_txt * out.loss_txt + cfg.lambda_bce * out.loss_bce + cfg.lambda_dice * out.loss_dice
    assert torch.isclose(out.loss.detach(), expected, atol=1e-5)
    assert [tuple(m.shape) for m in out.mask_logits] == [(64, 64), (64, 64)]  # SAM's padded frame (tiny: 64)
    out.loss.backward()
    assert model.sam.mask_decoder.iou_token.weight.grad is not None
    assert model.text_hidden_fcs[0][0].weight.grad is not None
    assert any(p.grad is not None for n, p in model.named_parameters() if "lora_" in n)
    assert not model.sam.vision_encoder.pos_embed.requires_grad
    model.zero_grad()
    model.eval()


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


@pytest.mark.slow
def test_save_load_and_predict_roundtrip(tiny, tmp_path):
    tiny.save_pretrained(tmp_path / "run")
    loaded = Segmenter.from_pretrained(tmp_path / "run")
    assert isinstance(loaded, RosaliaSegmenter)
    x = _sample()[0]
    a, b = tiny.predict(x, INSTRUCTION), loaded.predict(x, INSTRUCTION)
    assert a.answer == b.answer and np.array_equal(a.mask, b.mask)
    assert Segmenter.from_pretrained(tmp_path / "run", mask_geometry="image").model.cfg.mask_geometry == "image"
    with pytest.raises(ModelLoadError, match="mask_geometry must be one of"):
        Segmenter.from_pretrained(tmp_path / "run", mask_geometry="stretched")


@pytest.mark.slow
def test_training_steps_reduce_loss(tiny, tmp_path):
    from cxrils.models.rosalia.training import train_rosalia

    tiny.model.cfg.lr = 3e-3
    pos, neg = _sample(positive=True), _sample(positive=False)
    batch = [dict(zip(("image", "instruction", "answer", "mask"), s)) for s in (pos, neg)]
    hist = train_rosalia(tiny, [batch] * 24, tmp_path / "run", total_steps=12)
    assert len(hist) == 12
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert (tmp_path / "run" / "model.safetensors").is_file()


@pytest.mark.slow
def test_bf16_training_step_keeps_float32_master_weights(release, tmp_path):
    """Fine-tuning a LISA-format checkpoint with precision bf16: frozen weights bf16,
    trained ones float32, forward under autocast; one step on the CPU."""
    from cxrils.models.rosalia.training import train_rosalia

    ckpt, clip, _ = release
    cfg = RosaliaConfig(
        checkpoint=str(ckpt),
        clip_path=str(clip),
        precision="bf16",
        lora_r=4,
        lora_alpha=8,
        batch_size=2,
        micro_batch_size=2,
        warmup_steps=1,
    )
    model, proc = build_model(cfg, dtype=torch.bfloat16)
    seg = RosaliaSegmenter(model, proc)
    before = model.sam.mask_decoder.iou_token.weight.detach().float().clone()
    pos, neg = _sample(positive=True), _sample(positive=False)
    batch = [dict(zip(("image", "instruction", "answer", "mask"), s)) for s in (pos, neg)]
    hist = train_rosalia(seg, [batch, batch], tmp_path / "ft", total_steps=2)
    assert len(hist) == 2 and all(np.isfinite(h["loss"]) for h in hist)
    m = seg.model
    assert m.sam.mask_decoder.iou_token.weight.dtype == torch.float32
    assert m.sam.vision_encoder.pos_embed.dtype == torch.bfloat16
    assert not torch.equal(m.sam.mask_decoder.iou_token.weight.detach(), before)
    again = Segmenter.from_pretrained(tmp_path / "ft")  # trained parameters on top of the checkpoint, in bf16
    assert torch.equal(
        again.model.sam.mask_decoder.iou_token.weight, m.sam.mask_decoder.iou_token.weight.detach().to(torch.bfloat16)
    )


@pytest.mark.slow
def test_cli_train_tiny_rosalia_on_a_dataset(tmp_path):
    """`cxrils train --model rosalia --set tiny=true` on a synthetic dataset: trains,
    saves, resumes to a longer schedule, evaluates the validation split."""
    from light_synthetic import make_tiny_dataset
    from typer.testing import CliRunner

    from cxrils.cli import app

    ds = make_tiny_dataset(tmp_path / "ds", n_train=8, n_val=2, n_test=1)
    run = tmp_path / "run"
    common = [
        "train",
        "--model",
        "rosalia",
        "--dataset",
        str(ds),
        "-o",
        str(run),
        "--set",
        "tiny=true",
        "--set",
        "batch_size=2",
        "--set",
        "micro_batch_size=2",
    ]
    r = CliRunner().invoke(app, common + ["--set", "steps=2", "--no-evaluate"])
    assert r.exit_code == 0, r.output
    assert len((run / "train_log.jsonl").read_text().splitlines()) == 2
    r = CliRunner().invoke(app, common + ["--set", "steps=3"])
    assert r.exit_code == 0, r.output
    resumed = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in resumed] == [1, 2, 3]
    assert json.loads((run / "eval_validate.json").read_text())
    seg = Segmenter.from_pretrained(run)
    assert seg.predict(np.zeros((40, 30), np.uint8), "Segment the edema.").mask.shape == (40, 30)


def test_cli_train_rosalia_without_weights_says_what_to_get(tmp_path):
    from light_synthetic import make_tiny_dataset
    from typer.testing import CliRunner

    from cxrils.cli import app

    ds = make_tiny_dataset(tmp_path / "ds", n_train=4, n_val=1, n_test=1)
    r = CliRunner().invoke(app, ["train", "--model", "rosalia", "--dataset", str(ds), "-o", str(tmp_path / "r")])
    assert r.exit_code == 2
    assert "checkpoint=DIR" in r.output and "LISA-7B-v1" in r.output and "clip-vit-large-patch14" in r.output


@pytest.mark.slow
def test_interrupted_training_resumes_on_schedule(tmp_path):
    """A run stopped after 2 of 4 steps and resumed from its checkpoint follows the
    same learning-rate schedule as an uninterrupted 4-step run."""
    from cxrils.models.rosalia.training import train_rosalia

    def fresh(k):
        torch.manual_seed(0)
        tok = build_tiny_tokenizer(tmp_path / f"tok{k}")
        cfg = RosaliaConfig.tiny()
        cfg.batch_size = cfg.micro_batch_size = 2
        model, proc = build_model(cfg, tok)
        return RosaliaSegmenter(model, proc)

    pos, neg = _sample(positive=True), _sample(positive=False)
    batch = [dict(zip(("image", "instruction", "answer", "mask"), s)) for s in (pos, neg)]
    straight = train_rosalia(fresh(0), [batch] * 4, tmp_path / "a", total_steps=4)
    first = train_rosalia(fresh(1), [batch] * 2, tmp_path / "b", total_steps=4)  # "killed" after step 2
    assert len(first) == 2 and (tmp_path / "b" / "optimizer.pt").is_file()
    # the scores of the saved weights survive a run stopped before it saves, and go with
    # the weights the next save replaces (review, stop 62: deleted before training began)
    scores = tmp_path / "b" / "eval_validate.json"
    scores.write_text("{}")

    def stopped():
        raise KeyboardInterrupt
        yield

    with pytest.raises(KeyboardInterrupt):
        train_rosalia(Segmenter.from_pretrained(tmp_path / "b"), stopped(), tmp_path / "b", total_steps=4, start_step=2)
    assert scores.is_file()
    resumed = train_rosalia(
        Segmenter.from_pretrained(tmp_path / "b"), [batch] * 2, tmp_path / "b", total_steps=4, start_step=2
    )
    assert not scores.exists()
    assert [e["step"] for e in resumed] == [1, 2, 3, 4]
    assert [e["lr"] for e in resumed] == pytest.approx([e["lr"] for e in straight])


@pytest.mark.slow
def test_teacher_forced_masks_as_the_authors_validate(release, released, tmp_path, monkeypatch):
    """validate() runs model_forward(inference=True) on the conversation with the reference
    answer: the mask of the reference [SEG], no generation. With the answer '[SEG]' that is
    the state after 'ASSISTANT:', the one a generated first [SEG] uses."""
    from light_synthetic import make_tiny_dataset
    from typer.testing import CliRunner

    from cxrils.cli import app

    model = released.model
    seg, eos = model.seg_token_id, released.processor.tokenizer.eos_token_id
    x = _image(36, 44)
    forced = released.predict_teacher_forced(x, INSTRUCTION, "[SEG]")
    with monkeypatch.context() as mp:
        mp.setattr(
            model.language_model,
            "generate",
            lambda inputs_embeds, **kw: torch.tensor([[seg, eos]] * inputs_embeds.shape[0]),
        )
        generated = released.predict(x, INSTRUCTION)
    assert np.array_equal(forced.mask, generated.mask)
    assert forced.padding_pixels == generated.padding_pixels
    assert not released.predict_teacher_forced(x, INSTRUCTION, "There is no effusion.").mask.any()

    ckpt, clip, _ = release
    monkeypatch.setenv("CXRILS_CLIP_PATH", str(clip))
    ds = make_tiny_dataset(tmp_path / "ds", n_train=1, n_val=1, n_test=2)
    preds = tmp_path / "tf.jsonl"
    r = CliRunner().invoke(
        app,
        [
            "predict",
            "--model",
            str(ckpt),
            "--dataset",
            str(ds),
            "--split",
            "test",
            "--teacher-forced",
            "-o",
            str(preds),
        ],
    )
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    assert rows and all("answer" not in row for row in rows)
    assert all(isinstance(row["padding_pixels"], int) and row["padding_pixels"] >= 0 for row in rows)
    r = CliRunner().invoke(app, ["evaluate", "-d", str(ds), "-p", str(preds), "-o", str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    assert "giou_pos" in r.output and "text accuracy n/a" in r.output
    assert f"false positives: {sum(row['padding_pixels'] for row in rows)} in " in r.output
