"""Helpers for the evaluation tests: small cxrils datasets built following cxrils.dataset.schema."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from cxrils.dataset.schema import COLUMNS, SCHEMA_VERSION
from cxrils.masks import encode_rle
from cxrils.templates import render_answer, render_instruction
from cxrils.types import AnatomyMasks

H, W = 32, 40  # image size of the test datasets (rows, columns)

# Types of the non-string columns; every other column of COLUMNS is a string (as
# cxrils.dataset.schema documents), so the helper follows the schema as it evolves.
_TYPES = {
    "mask": pa.struct([("size", pa.list_(pa.int32())), ("counts", pa.string())]),
    "locations": pa.list_(pa.string()),
    "mask_area": pa.int64(),
    "height": pa.int32(),
    "width": pa.int32(),
    "sentence_index": pa.int32(),
}
# Columns of the dataset branch (target, Appendix C.3 paraphrases) are written even where
# the schema on this branch predates them.
_NAMES = list(COLUMNS) + [c for c in ("target", "paraphrase_of", "persona") if c not in COLUMNS]
RECORD_SCHEMA = pa.schema([(name, _TYPES.get(name, pa.string())) for name in _NAMES])


def hand_anatomy(shape: tuple[int, int] = (H, W)) -> AnatomyMasks:
    """Hand-built anatomy: patient's right lung = image columns [2, 18), left lung =
    columns [22, 38), rows [4, 28); "right lung base" / "left lung base" = rows [20, 28)."""
    h, w = shape
    masks = {}
    right = np.zeros(shape, bool)
    right[4:28, 2:18] = True
    left = np.zeros(shape, bool)
    left[4:28, 22:38] = True
    masks["right lung"], masks["left lung"] = right, left
    for side, lung in (("right", right), ("left", left)):
        for zone, rows in (("apical zone lung", (4, 8)), ("upper zone lung", (8, 14)), ("mid zone lung", (14, 20))):
            m = lung.copy()
            m[: rows[0]] = False
            m[rows[1] :] = False
            masks[f"{side} {zone}"] = m
        base = lung.copy()
        base[:20] = False
        masks[f"{side} lung base"] = base
    masks["heart"] = np.zeros(shape, bool)
    masks["heart"][16:28, 14:26] = True
    return AnatomyMasks(masks=masks, shape=(h, w), backend="hand")


def make_record(
    rid: str,
    *,
    image_id: str = "img0",
    split: str = "test",
    lesion: str = "pneumonia",
    itype: str = "basic",
    polarity: str = "positive",
    locations=("right lung base",),
    certainty: str = "definitive",
    mask: np.ndarray | None = None,
    answer: str | None = None,
    paraphrase_of: str = "",
    instruction: str | None = None,
) -> dict:
    """One schema row; instruction and answer rendered from the templates."""
    mask = np.zeros((H, W), bool) if mask is None else mask
    target = lesion if itype != "lesion_inference" else None
    instruction = instruction or render_instruction(itype, target, locations)
    if answer is None:
        if itype == "lesion_inference" and polarity == "positive":
            answer = render_answer(itype, polarity, lesion=lesion, certainty=certainty)
        else:
            answer = render_answer(
                itype, polarity, target=lesion if itype != "lesion_inference" else "opacity", locations=locations
            )
    row = {name: "" for name in _NAMES}
    row.update(
        {
            "record_id": rid,
            "study_id": f"s-{image_id}",
            "image_id": image_id,
            "patient_id": "",
            "image_path": f"images/{image_id}.png",
            "split": split,
            "lesion_type": lesion,
            "instruction_type": itype,
            "polarity": polarity,
            "locations": list(locations),
            "certainty": certainty if polarity == "positive" else "",
            "instruction": instruction,
            "answer": answer,
            "mask": encode_rle(mask),
            "mask_area": int(mask.sum()),
            "height": mask.shape[0],
            "width": mask.shape[1],
            "finding_entity": "",
            "sentence_index": 0,
            "sentence": "",
            "provenance": "{}",
        }
    )
    row["paraphrase_of"] = paraphrase_of
    row["persona"] = "layperson" if paraphrase_of else ""
    row["target"] = "opacity" if itype == "lesion_inference" else lesion
    return row


def write_dataset(root: Path, records: list[dict], shard_size: int = 5) -> Path:
    """Write records/*.parquet shards, images/*.png and manifest.json."""
    (root / "records").mkdir(parents=True)
    (root / "images").mkdir()
    for rec in records:
        png = root / rec["image_path"]
        if not png.exists():
            Image.fromarray(np.full((rec["height"], rec["width"]), 100, np.uint8), mode="L").save(png)
    for k in range(0, len(records), shard_size):
        pq.write_table(
            pa.Table.from_pylist(records[k : k + shard_size], RECORD_SCHEMA),
            root / "records" / f"part-{k // shard_size:05d}.parquet",
        )
    (root / "manifest.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
    return root


def box(r0: int, r1: int, c0: int, c1: int, shape=(H, W)) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[r0:r1, c0:c1] = True
    return m


def standard_records() -> list[dict]:
    """Ten test records over lesion types, instruction types and polarities, plus two train records."""
    return [
        make_record("img0:0", lesion="pneumonia", itype="basic", mask=box(20, 26, 4, 12)),  # area 48
        make_record(
            "img0:1",
            lesion="effusion",
            itype="global",
            locations=("right lung base", "left lung base"),
            mask=box(22, 28, 2, 38),
        ),
        make_record(
            "img0:2",
            lesion="atelectasis",
            itype="lesion_inference",
            certainty="tentative",
            locations=("left lung base",),
            mask=box(20, 24, 24, 30),
        ),
        make_record("img0:3", lesion="edema", itype="basic", polarity="negative", locations=("right lung",)),
        make_record("img0:4", lesion="cardiomegaly", itype="global", polarity="negative", locations=()),
        make_record(
            "img1:0",
            image_id="img1",
            lesion="opacity",
            itype="basic",
            certainty="tentative",
            locations=("left upper zone lung",),
            mask=box(9, 12, 25, 35),
        ),
        make_record(
            "img1:1",
            image_id="img1",
            lesion="cardiomegaly",
            itype="global",
            locations=("heart",),
            mask=box(16, 28, 14, 26),
        ),
        make_record(
            "img1:2",
            image_id="img1",
            lesion="pneumonia",
            itype="lesion_inference",
            polarity="negative",
            locations=("right mid zone lung",),
        ),
        make_record(
            "img1:3",
            image_id="img1",
            lesion="consolidation",
            itype="basic",
            polarity="negative",
            locations=("left lung base",),
        ),
        make_record(
            "img1:4",
            image_id="img1",
            lesion="edema",
            itype="lesion_inference",
            locations=("right lung", "left lung"),
            mask=box(6, 26, 3, 37),
        ),
        make_record("img2:0", image_id="img2", split="train", lesion="pneumonia", mask=box(1, 3, 1, 3)),
        make_record("img2:1", image_id="img2", split="train", lesion="effusion", polarity="negative"),
    ]
