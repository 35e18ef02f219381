"""The record schema of a cxrils dataset (one row per instruction-answer pair).

Column names and meanings are fixed here so that generation, evaluation, training
and serving agree. A dataset folder holds ``manifest.json`` (schema version, shards,
counts, provenance), ``images/{image_id}.png`` (the 8-bit image x the masks refer to)
and ``records/*.parquet`` shards with these columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1

#: column -> meaning. Masks are COCO compressed RLE structs {"size": [H, W], "counts": str}.
COLUMNS: dict[str, str] = {
    "record_id": "unique id of the pair: '{image_id}:{index}' (str)",
    "study_id": "study id (str)",
    "image_id": "image id (str)",
    "patient_id": "patient id or '' (str)",
    "image_path": "path of the 8-bit PNG relative to the dataset folder (str)",
    "split": "train | validate | test",
    "lesion_type": "one of cxrils.vocab.LESION_TYPES: the source finding's type (lesion inference: the inferred type; its negatives: 'opacity')",
    "target": "the [Target] word of the instruction: the lesion type, or 'opacity' (tentative findings, lesion inference)",
    "instruction_type": "basic | global | lesion_inference",
    "polarity": "positive | negative",
    "locations": "instruction locations named by instruction or answer (list[str])",
    "certainty": "definitive | tentative | '' for negatives",
    "instruction": "instruction text (cxrils.templates)",
    "answer": "answer text (cxrils.templates)",
    "mask": "COCO RLE struct {size: [H, W], counts: str}; empty for negatives",
    "mask_area": "foreground pixels (int64)",
    "height": "image height in pixels (int32)",
    "width": "image width in pixels (int32)",
    "finding_entity": "entity of the source finding or '' (str)",
    "sentence_index": "1-based sentence index of the source finding, 0 if none (int32)",
    "sentence": "sentence text of the source finding or '' (str)",
    "source_findings": "JSON text: [{entity, sentence_index, sentence}] of every finding the record merges or relies on",
    "paraphrase_of": "record_id of the template record this row paraphrases, '' for template rows (Appendix C.3)",
    "persona": "medical_expert | layperson | ai_developer for paraphrases, '' otherwise (Appendix C.3)",
    "provenance": "JSON text: code version, grounding backends and versions, stage settings, config_sha256 (full config in the manifest)",
}


def arrow_schema() -> pa.Schema:
    """The pyarrow schema of a records shard (columns in :data:`COLUMNS` order)."""
    import pyarrow as pa

    types = {
        "mask": pa.struct([("size", pa.list_(pa.int32())), ("counts", pa.string())]),
        "locations": pa.list_(pa.string()),
        "mask_area": pa.int64(),
        "height": pa.int32(),
        "width": pa.int32(),
        "sentence_index": pa.int32(),
    }
    return pa.schema(
        [(name, types.get(name, pa.string())) for name in COLUMNS],
        metadata={"cxrils_schema_version": str(SCHEMA_VERSION)},
    )
