"""A tiny folder in the exact layout of the MIMIC-CXR-Ext-ILS 1.0.0 release, and a
restatement of how the authors' ``ReasonSegDataset`` (KAIST-Edlab/ROSALIA
``utils/reason_seg_dataset.py``) reads it.

Layout (as train.sh passes it to train_ds.py)::

    mimic-cxr-jpg/2.1.0/files/p1X/p1XXXXXXX/sXXXXXXXX/<dicom_id>.jpg   --base_image_dir
    mimic-cxr-ext-ils/1.0.0/lesion_mask/<...>.png                      --base_mask_dir (0/255)
    mimic-cxr-ext-ils/1.0.0/mimic_ils_instruction_answer.json          --json_dir

JSON: {split: {sample_key: {"image_path", "instruction_answer_pairs":
{"positive_pairs": [{"instruction", "answer", "target", "seg_mask_path"}],
"negative_pairs": [{"instruction", "answer", "target"}]}}}} with splits train, val, test.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from cxrils import templates

T = templates


@dataclass
class Release:
    root: Path
    json: Path
    images: Path
    masks: Path
    masks_by_path: dict  # seg_mask_path -> bool mask at the image's original size
    image_sizes: dict  # sample_key -> (H, W)


def _disc(shape, r, c, rad):
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    return (rr - r) ** 2 + (cc - c) ** 2 <= rad**2


def make_release(root: Path, big: tuple[int, int] = (90, 72)) -> Release:
    """Write the release fixture: 5 images (train 2, val 1, test 1, plus a train sample
    whose image is missing), masks, positive and negative pairs of every instruction type,
    one positive whose mask file is missing, one 3-channel mask, one mask stored at
    another size than its image, one non-template instruction."""
    files = root / "mimic-cxr-jpg" / "2.1.0" / "files"
    ils = root / "mimic-cxr-ext-ils" / "1.0.0"
    masks = ils / "lesion_mask"
    masks.mkdir(parents=True)
    rng = np.random.default_rng(0)
    data: dict = {"train": {}, "val": {}, "test": {}}
    masks_by_path: dict = {}
    sizes: dict = {}
    samples = [  # split, patient, study, dicom, shape
        ("train", "p10000032", "s50414267", "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014", big),
        ("train", "p10000764", "s57375967", "096052b7-d256dc40-453a102b-fa7d01c6-1b22c6b4", (64, 80)),
        ("val", "p10001217", "s52067803", "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962", (70, 60)),
        ("test", "p10002013", "s58327420", "1e2d4d0c-5a4b2f45-0f8c0ea3-7b9f1bc1-7f0e9e12", (60, 60)),
        ("train", "p10003019", "s59003314", "deadbeef-00000000-00000000-00000000-00000000", (50, 50)),
    ]
    for i, (split, patient, study, dicom, shape) in enumerate(samples):
        rel = f"{patient[:3]}/{patient}/{study}/{dicom}.jpg"
        sizes[dicom] = shape
        if i < 4:  # the fifth image is missing on purpose
            x = np.clip(rng.normal(90, 25, shape), 0, 255).astype(np.uint8)
            (files / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(x, mode="L").save(files / rel, quality=95)
        h, w = shape
        m_right = _disc(shape, int(0.7 * h), int(0.3 * w), max(3, h // 8))  # image left = patient right
        m_left = _disc(shape, int(0.4 * h), int(0.7 * w), max(3, h // 9))
        pos, neg = [], []

        def add_mask(name, m, mode="L", size=None):
            path = masks / name
            path.parent.mkdir(parents=True, exist_ok=True)
            arr = m.astype(np.uint8) * 255
            img = Image.fromarray(arr, mode="L")
            if size is not None:  # stored at another size (stretched), as a square release mask might be
                img = img.resize((size[1], size[0]), Image.NEAREST)
            if mode == "RGB":
                img = img.convert("RGB")
            img.save(path)
            masks_by_path[name] = m
            return name

        base = f"{patient}/{study}/{dicom}"
        if i in (0, 2, 3):
            p1 = add_mask(f"{base}_effusion.png", m_right, mode="RGB" if i == 2 else "L")
            pos.append(
                {
                    "instruction": T.render_instruction("basic", "effusion", ["right lung base"]),
                    "answer": T.render_answer("basic", "positive"),
                    "target": "effusion",
                    "seg_mask_path": p1,
                }
            )
            pos.append(
                {
                    "instruction": T.render_instruction("global", "effusion"),
                    "answer": T.render_answer("global", "positive", locations=["right lung base"]),
                    "target": "effusion",
                    "seg_mask_path": p1,
                }
            )
            neg.append(
                {
                    "instruction": T.render_instruction("basic", "effusion", ["left upper zone lung"]),
                    "answer": T.render_answer("basic", "negative", "effusion", ["left upper zone lung"]),
                    "target": "effusion",
                }
            )
            neg.append(
                {
                    "instruction": T.render_instruction("global", "edema"),
                    "answer": T.render_answer("global", "negative", "edema"),
                    "target": "edema",
                }
            )
        if i == 0:
            p2 = add_mask(f"{base}_atelectasis.png", m_left, size=(64, 64))
            pos.append(
                {
                    "instruction": T.render_instruction("lesion_inference", None, ["left mid zone lung"]),
                    "answer": T.render_answer(
                        "lesion_inference", "positive", lesion="atelectasis", certainty="tentative"
                    ),
                    "target": "atelectasis",
                    "seg_mask_path": p2,
                }
            )
            pos.append(
                {
                    "instruction": T.render_instruction("basic", "opacity", ["left mid zone lung"]),
                    "answer": T.render_answer("basic", "positive"),
                    "target": "atelectasis",
                    "seg_mask_path": p2,
                }
            )
            pos.append(
                {
                    "instruction": T.render_instruction("basic", "pneumonia", ["right lung"]),
                    "answer": T.render_answer("basic", "positive"),
                    "target": "pneumonia",
                    "seg_mask_path": f"{base}_pneumonia.png",
                }
            )  # mask file missing on purpose
            neg.append(
                {
                    "instruction": T.render_instruction("lesion_inference", None, ["right upper zone lung"]),
                    "answer": T.render_answer("lesion_inference", "negative", locations=["right upper zone lung"]),
                    "target": "pneumonia",
                }
            )
        if i == 1:
            neg.append(
                {
                    "instruction": T.render_instruction("global", "cardiomegaly"),
                    "answer": T.render_answer("global", "negative", "cardiomegaly"),
                    "target": "cardiomegaly",
                }
            )
            neg.append(
                {
                    "instruction": "Is there any consolidation?",  # not a template text
                    "answer": T.render_answer("global", "negative", "consolidation"),
                    "target": "consolidation",
                }
            )
        if i == 4:
            neg.append(
                {
                    "instruction": T.render_instruction("global", "edema"),
                    "answer": T.render_answer("global", "negative", "edema"),
                    "target": "edema",
                }
            )
        data[split][dicom] = {
            "image_path": rel,
            "instruction_answer_pairs": {"positive_pairs": pos, "negative_pairs": neg},
        }
    js = ils / "mimic_ils_instruction_answer.json"
    js.write_text(json.dumps(data, indent=1))
    return Release(root, js, files, masks, masks_by_path, sizes)


def reason_seg_samples(json_dir: Path, base_image_dir: Path, base_mask_dir: Path, split: str) -> list[dict]:
    """Restatement of ``ReasonSegDataset.__init__`` (no batch balance, no pos/neg-only):
    for each sample of ``json[split]`` in file order, its positive pairs then its
    negative pairs as {question, answer, disease, image_path, mask_path (None for
    negatives)}, paths joined with os.path.join as the authors do."""
    with open(json_dir) as f:
        items = json.load(f)[split]
    out = []
    for _key, item in items.items():
        pos_qa = item["instruction_answer_pairs"]["positive_pairs"]
        neg_qa = item["instruction_answer_pairs"]["negative_pairs"]
        image_path = os.path.join(str(base_image_dir), item["image_path"])
        for qa in pos_qa:
            out.append(
                {
                    "question": qa["instruction"],
                    "answer": qa["answer"],
                    "disease": qa["target"],
                    "image_path": image_path,
                    "mask_path": os.path.join(str(base_mask_dir), qa["seg_mask_path"]),
                }
            )
        for qa in neg_qa:
            out.append(
                {
                    "question": qa["instruction"],
                    "answer": qa["answer"],
                    "disease": qa["target"],
                    "image_path": image_path,
                    "mask_path": None,
                }
            )
    return out


def authors_mask(mask_path: str | None, image_shape: tuple[int, int]) -> np.ndarray:
    """The authors' ground truth before SAM resizing: ``(cv2.imread(mask) == 255)`` on all
    three channels (a 3-channel read; gray PNGs replicate), zeros for negatives."""
    if mask_path is None:
        return np.zeros(image_shape, bool)
    arr = np.asarray(Image.open(mask_path).convert("RGB"))
    return (arr == 255).all(axis=-1)
