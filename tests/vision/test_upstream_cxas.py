"""The cxas adapter on cxas 0.0.20's own network classes and label table (the
``upstream`` extra).

Installed with ``--no-deps``: ``cxas/__init__.py`` imports its whole application
(SimpleITK, gdown, pydicom-seg, pinned pydicom < 3), none of which the network needs,
so the test imports ``cxas.label_mapper`` (the 159-label table, ``data/paxray_labels.json``)
and ``cxas.models.UNet.backbone_unet`` (``BackboneUNet``, ``UNetHead``, ``Up``...) from
the installed files without the package ``__init__`` (:func:`upstream_code.bare_packages`).
``BackboneUNet`` takes its encoder from ``torchvision.models.resnet50``; torchvision is
never installed here, so that trunk alone is restated: the module names
(``conv1, bn1, relu, maxpool, layer1..layer4``), strides (2, 2, 1, 2, 2, 2) and channels
(64, 256, 512, 1024, 2048) that ``cxas/models/UNet/backbones.py`` reads from
torchvision's ResNet-50, each layer one convolution (tiny). The head is cxas's own,
at the size its ResNet-50 model uses (52 M parameters with the restated trunk).

The adapter normally feeds 512 x 512; the tests run at 128 x 128 (the network is fully
convolutional) to stay fast.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from upstream_code import bare_packages, require

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

SIZE = 128


def restated_resnet50():
    """torchvision's ResNet-50 trunk as cxas's ``Backbone`` reads it (module docstring)."""

    class Trunk(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            chans, strides = [64, 256, 512, 1024, 2048], [1, 2, 2, 2]
            for k in range(4):
                setattr(
                    self,
                    f"layer{k + 1}",
                    nn.Sequential(
                        nn.Conv2d(chans[k], chans[k + 1], 1, stride=strides[k], bias=False),
                        nn.BatchNorm2d(chans[k + 1]),
                        nn.ReLU(inplace=True),
                    ),
                )
            self.inplanes = 2048

    return Trunk()


@pytest.fixture(scope="module")
def cxas_modules():
    require("cxas", "cxas")
    require("colorcet", "colorcet (cxas.label_mapper imports it)")
    tv, models, resnet = (
        types.ModuleType(n) for n in ("torchvision", "torchvision.models", "torchvision.models.resnet")
    )
    models.resnet50, models.resnet, tv.models = restated_resnet50, resnet, models
    resnet.BasicBlock = type("BasicBlock", (nn.Module,), {})
    extra = {"torchvision": tv, "torchvision.models": models, "torchvision.models.resnet": resnet}
    with bare_packages("cxas", "cxas.models", extra=extra):
        from cxas.label_mapper import id2label_dict
        from cxas.models.UNet.backbone_unet import BackboneUNet

        yield id2label_dict, BackboneUNet


@pytest.fixture(scope="module")
def training_checkpoint(cxas_modules, tmp_path_factory):
    """A random BackboneUNet saved as a CXAS training run saves it: the state dict under
    "model" with DataParallel's "module." prefix, next to the run's other state."""
    import argparse

    id2label, backbone_unet = cxas_modules
    torch.manual_seed(0)
    net = backbone_unet("UNet_ResNet50_default", len(id2label)).eval()
    path = tmp_path_factory.mktemp("cxas") / "UNet_ResNet50_default.pth"
    torch.save(
        {
            "model": {f"module.{k}": v for k, v in net.state_dict().items()},
            "epoch": 3,
            "args": argparse.Namespace(lr=1e-3),
            "best": np.float64(0.8),
        },
        path,
    )
    return net, path


def upstream_input(x):
    """cxas 0.0.20 ``FileLoader.load_image`` + ``normalize`` on a grey PNG, restated:
    ``convert("RGB")``, / 255, ImageNet mean/std, ``F.interpolate(..., base_size)``."""
    import torch.nn.functional as F

    rgb = torch.tensor(np.transpose(np.repeat(x[:, :, None], 3, axis=2), [2, 0, 1])).float() / 255
    rgb = (rgb - torch.tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)) / torch.tensor([0.229, 0.224, 0.225]).view(
        -1, 1, 1
    )
    return F.interpolate(rgb.unsqueeze(0), SIZE)


def test_upstream_cxas_label_table_has_every_label_the_pipeline_reads(cxas_modules):
    from cxrils.vision.anatomy.cxas import label_channels
    from cxrils.vocab import ANATOMY_LABELS

    id2label, _ = cxas_modules
    assert len(id2label) == 159
    channels = label_channels(id2label)
    assert set(channels) == set(ANATOMY_LABELS) and len(set(channels.values())) == len(ANATOMY_LABELS)


@pytest.mark.slow
def test_upstream_cxas_network_through_the_adapter(cxas_modules, training_checkpoint, monkeypatch):
    from cxrils.config import Config
    from cxrils.vision.anatomy import cxas as adapter
    from cxrils.vision.anatomy import get_segmenter

    net, path = training_checkpoint
    monkeypatch.setattr(adapter, "CXAS_INPUT_SIZE", SIZE)
    cfg = Config()
    cfg.backends.cxas_weights = str(path)
    seg = get_segmenter("cxas", cfg)  # the adapter's own path: safe load, strict fit, label table
    assert seg.version == "cxas-0.0.20:UNet_ResNet50_default.pth"
    x = np.random.default_rng(0).integers(0, 256, (150, 120), dtype=np.uint8)
    data = seg._input(x)[None]
    assert torch.equal(data, upstream_input(x))  # the adapter's input is CXAS's own
    with torch.inference_mode():
        upstream = net({"data": data})  # BackboneUNet.forward -> get_results (sigmoid > threshold)
        ours = seg.network(data)
    assert torch.allclose(ours, upstream["logits"], atol=1e-5)
    masks = seg.segment(x)
    for label, channel in seg.channels.items():
        want = (
            torch.nn.functional.interpolate(
                upstream["segmentation_preds"][:, channel : channel + 1].float(), size=x.shape, mode="nearest"
            )[0, 0]
            .bool()
            .numpy()
        )
        assert np.array_equal(masks[label], want), label  # CXAS.resize_to_numpy of its own threshold
