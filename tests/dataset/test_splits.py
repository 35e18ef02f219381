"""Patient-level splits: official mapping or deterministic hash."""

from __future__ import annotations

import gzip
from collections import Counter

import pytest

from cxrils.config import Config
from cxrils.dataset import SplitError, assign_split, load_official_split


def test_hash_split_is_by_patient_deterministic_and_follows_fractions():
    cfg = Config()
    got = [assign_split(f"patient{i}", cfg) for i in range(20000)]
    assert got == [assign_split(f"patient{i}", cfg) for i in range(20000)]
    c = Counter(got)
    assert set(c) == {"train", "validate", "test"}
    assert abs(c["test"] / 20000 - cfg.split.test_fraction) < 0.01
    assert abs(c["validate"] / 20000 - cfg.split.val_fraction) < 0.01
    cfg2 = Config()
    cfg2.split.seed = 1
    assert got != [assign_split(f"patient{i}", cfg2) for i in range(20000)]
    cfg3 = Config()
    cfg3.split.val_fraction, cfg3.split.test_fraction = 0.0, 0.0
    assert {assign_split(f"p{i}", cfg3) for i in range(100)} == {"train"}


def test_official_split_mapping(tmp_path):
    path = tmp_path / "mimic-cxr-2.0.0-split.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(
            "dicom_id,study_id,subject_id,split\nd1,s1,p1,train\nd2,s2,p1,train\nd3,s3,p2,validate\nd4,s4,p3,test\n"
        )
    official = load_official_split(path)
    assert official == {"d1": "train", "d2": "train", "d3": "validate", "d4": "test"}
    assert assign_split("p2", Config(), official=official, key="d3") == "validate"
    by_patient = load_official_split(path, key="subject_id")
    assert assign_split("p3", Config(), official=by_patient) == "test"
    with pytest.raises(SplitError, match="is in the official split mapping"):
        assign_split("p9", Config(), official=official, key="d9")


def test_split_errors(tmp_path):
    bad = tmp_path / "split.csv"
    bad.write_text("dicom_id,split\nd1,train\nd1,test\n")
    with pytest.raises(SplitError, match="two splits"):
        load_official_split(bad)
    bad.write_text("dicom_id,fold\nd1,1\n")
    with pytest.raises(SplitError, match="lacks column 'split'"):
        load_official_split(bad)
    with pytest.raises(SplitError, match="patient id"):
        assign_split("", Config())
    cfg = Config()
    cfg.split.val_fraction = 0.8
    cfg.split.test_fraction = 0.5
    with pytest.raises(SplitError, match="fractions"):
        assign_split("p1", cfg)
