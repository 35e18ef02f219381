"""A tiny synthetic cxrils dataset for the light model's tests.

Two images in three (uint8, 80 x 96, dark noise) have one bright disc in one of four places:
the lower or upper band of the image's left or right half. With the block anatomy
of :func:`block_anatomy` (patient right lung = image left half, zones = four
horizontal bands), those places are the instruction locations "right lung base",
"right upper zone lung", "left lung base", "left upper zone lung". Records of an
image with a disc: basic positive and negative (effusion), global positive (effusion),
global negative (edema), and a lesion-inference positive (atelectasis) on odd images;
of an image without: basic and global negatives (effusion) and global negative (edema).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cxrils import templates, vocab
from cxrils.dataset import DatasetWriter
from cxrils.masks import encode_rle
from cxrils.types import AnatomyMasks

H, W = 80, 96
PLACES = ("right lung base", "right upper zone lung", "left lung base", "left upper zone lung")


def block_anatomy(x: np.ndarray) -> AnatomyMasks:
    """Hand-built anatomy: right lung = image left half (patient right = image left),
    zones = apex-to-base quarters of the rows; heart = a central box."""
    h, w = x.shape
    rows = np.arange(h)[:, None]
    cols = np.arange(w)[None, :]
    right = np.broadcast_to(cols < w // 2, (h, w))
    left = ~right
    masks = {"right lung": right.copy(), "left lung": left.copy()}
    for zones, lung in ((vocab.RIGHT_ZONES, right), (vocab.LEFT_ZONES, left)):
        for k, zone in enumerate(zones):
            band = (rows >= k * h // 4) & (rows < (k + 1) * h // 4)
            masks[zone] = lung & band
    masks["heart"] = np.zeros((h, w), bool)
    masks["heart"][h // 2 :, w // 3 : 2 * w // 3] = True
    return AnatomyMasks(masks=masks, shape=(h, w), backend="test-blocks")


def bright_anomaly(x: np.ndarray, edit_region: np.ndarray, lungs: np.ndarray) -> np.ndarray:
    """Stand-in anomaly map for the synthetic images: brightness above 150 (the discs
    are 200-255, the background 0-59), scaled to [0, 1], inside the lungs."""
    return np.clip((x.astype(np.float32) - 150.0) / 105.0, 0.0, 1.0) * lungs


def disc_mask(place: str, h: int = H, w: int = W) -> np.ndarray:
    """A disc of radius h/8 centred in the place's band (rows) and half (columns)."""
    side_col = w // 4 if place.startswith("right") else 3 * w // 4
    row = 7 * h // 8 if place.endswith("base") else 3 * h // 8
    rr, cc = np.mgrid[:h, :w]
    return (rr - row) ** 2 + (cc - side_col) ** 2 <= (h // 8) ** 2


def _record(
    image_id: str,
    k: int,
    split: str,
    itype: str,
    polarity: str,
    lesion: str,
    target: str,
    locs: list[str],
    mask: np.ndarray,
    certainty: str = "",
) -> dict:
    instr = templates.render_instruction(itype, target, locs if itype != "global" else ())
    if itype == "lesion_inference" and polarity == "positive":
        answer = templates.render_answer(itype, polarity, lesion=lesion, certainty=certainty)
    else:
        answer = templates.render_answer(itype, polarity, target=target, locations=locs)
    return {
        "record_id": f"{image_id}:{k}",
        "study_id": f"s{image_id}",
        "image_id": image_id,
        "patient_id": f"p{image_id}",
        "split": split,
        "lesion_type": lesion,
        "instruction_type": itype,
        "polarity": polarity,
        "locations": list(locs),
        "certainty": certainty if polarity == "positive" else "",
        "instruction": instr,
        "answer": answer,
        "mask": dict(encode_rle(mask)),
        "mask_area": int(mask.sum()),
        "height": H,
        "width": W,
        "finding_entity": "",
        "sentence_index": 0,
        "sentence": "",
        "provenance": "{}",
        "target": target,
        "source_findings": "[]",
        "paraphrase_of": "",
        "persona": "",
    }


def make_tiny_dataset(root: Path, n_train: int = 24, n_val: int = 8, n_test: int = 4, seed: int = 0) -> Path:
    """Write and finalize the synthetic dataset under ``root``; return its folder."""
    rng = np.random.default_rng(seed)
    writer = DatasetWriter(root, {"source": "light model tests (synthetic)"})
    splits = ["train"] * n_train + ["validate"] * n_val + ["test"] * n_test
    empty = np.zeros((H, W), bool)
    for i, split in enumerate(splits):
        image_id = f"img{i:03d}"
        place = PLACES[i % 4]
        other = PLACES[(i + 1 + int(rng.integers(0, 3))) % 4]
        has_disc = i % 3 != 2
        m = disc_mask(place) if has_disc else empty
        x = rng.integers(0, 60, size=(H, W)).astype(np.uint8)
        x[m] = rng.integers(200, 256, size=int(m.sum())).astype(np.uint8)
        if has_disc:
            recs = [
                _record(image_id, 0, split, "basic", "positive", "effusion", "effusion", [place], m, "definitive"),
                _record(image_id, 1, split, "basic", "negative", "effusion", "effusion", [other], empty),
                _record(image_id, 2, split, "global", "positive", "effusion", "effusion", [place], m, "definitive"),
            ]
        else:
            recs = [
                _record(image_id, 0, split, "basic", "negative", "effusion", "effusion", [place], empty),
                _record(image_id, 1, split, "global", "negative", "effusion", "effusion", [], empty),
            ]
        recs.append(_record(image_id, len(recs), split, "global", "negative", "edema", "edema", [], empty))
        if has_disc and i % 2:
            recs.append(
                _record(
                    image_id,
                    len(recs),
                    split,
                    "lesion_inference",
                    "positive",
                    "atelectasis",
                    "opacity",
                    [place],
                    m,
                    "definitive",
                )
            )
        writer.commit_study(image_id, x, recs)
    writer.finalize()
    return root
