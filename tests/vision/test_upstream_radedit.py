"""The radedit adapter with BioViL-T's own text classes (the ``upstream`` extra).

microsoft/BiomedVLP-BioViL-T is loaded with ``trust_remote_code`` as a ``CXRBertModel``
and a ``CXRBertTokenizer``: the classes of hi-ml-multimodal 0.2.2
(``health_multimodal/text/model/modelling_cxrbert.py``, ``configuration_cxrbert.py``),
installed here and built tiny and random (a vocabulary file written by the test). Its
``forward(input_ids, attention_mask, ...)`` has no default for ``attention_mask``: the
adapter used to call ``text_encoder(input_ids)`` and failed there with a TypeError.
The UNet and VAE are diffusers' own classes (tiny), as in test_radedit.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from upstream_code import bare_packages, require

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers", reason="radedit extra (diffusers) not installed")

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "no", "acute", "cardiopulmonary", "process"]


@pytest.fixture(scope="module")
def biovil_classes():
    require("health_multimodal", "hi-ml-multimodal")
    # health_multimodal.text's __init__ imports the image side (torchvision); the model
    # module itself needs transformers only.
    with bare_packages("health_multimodal", "health_multimodal.text"):
        from health_multimodal.text.model import CXRBertConfig, CXRBertModel, CXRBertTokenizer

        yield CXRBertConfig, CXRBertModel, CXRBertTokenizer


def tiny_biovil(classes, tmp_path):
    config_cls, model_cls, tokenizer_cls = classes
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tokenizer = tokenizer_cls(vocab_file=str(vocab), model_max_length=12)
    torch.manual_seed(0)
    config = config_cls(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        projection_size=8,
    )
    return model_cls(config).eval(), tokenizer


def test_upstream_radedit_biovil_text_encoder_through_the_adapter(biovil_classes, tmp_path):
    from test_radedit import model_card_scheduler, phantom, small_cfg, tiny_components

    from cxrils.vision.anomaly.radedit import RadEditAnomalyMapper

    text, tok = tiny_biovil(biovil_classes, tmp_path)
    with pytest.raises(TypeError, match="attention_mask"):  # what the old adapter's call raised
        text(tok(["no acute cardiopulmonary process"], return_tensors="pt").input_ids)
    unet, vae, _, _, _ = tiny_components(tmp_path)
    m = RadEditAnomalyMapper(unet, vae, text, tok, model_card_scheduler(), cfg=small_cfg(), device="cpu")
    got = m.embed(["", "no acute cardiopulmonary process"])
    assert got.shape == (2, 12, 16) and got.dtype == torch.float32
    # diffusers' encode_prompt rule: CXRBertConfig sets no use_attention_mask, so the mask
    # passed is None and the padding is attended to
    assert not getattr(text.config, "use_attention_mask", False)
    ids = tok(
        ["", "no acute cardiopulmonary process"],
        padding="max_length",
        truncation=True,
        max_length=12,
        return_tensors="pt",
    )
    with torch.inference_mode():
        want = text(ids.input_ids, attention_mask=None).last_hidden_state
        masked = text(ids.input_ids, attention_mask=ids.attention_mask).last_hidden_state
    assert torch.equal(got, want) and not torch.allclose(got, masked, atol=1e-4)
    x, region = phantom()
    res = m.map(x, region)  # the whole edit runs on the real text encoder
    assert res.x_hat.shape == x.shape and np.array_equal(res.x_hat[~region], x[~region])


def test_upstream_radedit_uses_the_mask_when_the_config_asks(biovil_classes, tmp_path):
    from test_radedit import model_card_scheduler, small_cfg, tiny_components

    from cxrils.vision.anomaly.radedit import RadEditAnomalyMapper

    text, tok = tiny_biovil(biovil_classes, tmp_path)
    text.config.use_attention_mask = True  # diffusers then passes the tokenizer's mask
    unet, vae, _, _, _ = tiny_components(tmp_path)
    m = RadEditAnomalyMapper(unet, vae, text, tok, model_card_scheduler(), cfg=small_cfg(), device="cpu")
    ids = tok(
        ["no acute cardiopulmonary process"], padding="max_length", truncation=True, max_length=12, return_tensors="pt"
    )
    with torch.inference_mode():
        want = text(ids.input_ids, attention_mask=ids.attention_mask).last_hidden_state
    assert torch.equal(m.embed(["no acute cardiopulmonary process"]), want)
