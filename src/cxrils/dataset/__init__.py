"""The cxrils dataset: record schema, atomic resumable writer, readers, splits,
the torch ``Dataset``, the 1:1 batch sampler and the paper's augmentation.

See ``docs/dataset.md``. Torch is imported only when :class:`ILSDataset` items are
built.
"""

from cxrils.dataset.augment import HIST_EQ_PROB, HistogramEqualization
from cxrils.dataset.sampler import BalancedBatchSampler
from cxrils.dataset.schema import COLUMNS, SCHEMA_VERSION
from cxrils.dataset.splits import SPLITS, SplitError, assign_split, load_official_split, normalize_split
from cxrils.dataset.torch_dataset import ILSDataset
from cxrils.dataset.writer import (
    DatasetError,
    DatasetWriter,
    ProvenanceMismatch,
    grounding_relpath,
    image_relpath,
    read_exclusions,
    read_grounding,
    read_manifest,
    read_records,
    shard_paths,
)

__all__ = [
    "HIST_EQ_PROB",
    "HistogramEqualization",
    "BalancedBatchSampler",
    "COLUMNS",
    "SCHEMA_VERSION",
    "SPLITS",
    "SplitError",
    "assign_split",
    "load_official_split",
    "normalize_split",
    "ILSDataset",
    "DatasetError",
    "ProvenanceMismatch",
    "DatasetWriter",
    "grounding_relpath",
    "image_relpath",
    "read_grounding",
    "read_exclusions",
    "read_manifest",
    "read_records",
    "shard_paths",
]
