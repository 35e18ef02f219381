"""The review sample: strata, sizes from the Wilson margin or --n, seeded and
order-free, nested, paraphrases left out."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from cxrils.review.intervals import wilson_sample_size
from cxrils.review.sampling import SamplePlan, SamplingError, draw_sample


def _records(sizes: dict[tuple[str, str, str], int]) -> pd.DataFrame:
    rows = []
    for (lesion, pol, itype), n in sizes.items():
        for i in range(n):
            rows.append(
                {
                    "record_id": f"{lesion}-{pol}-{itype}-{i}:0",
                    "lesion_type": lesion,
                    "polarity": pol,
                    "instruction_type": itype,
                    "paraphrase_of": "",
                }
            )
    return pd.DataFrame(rows)


SIZES = {
    ("edema", "positive", "basic"): 400,
    ("edema", "negative", "global"): 300,
    ("effusion", "positive", "global"): 12,
    ("cardiomegaly", "negative", "global"): 90,
}


def test_each_stratum_gets_the_wilson_size_or_all_of_it():
    recs = _records(SIZES)
    plan = SamplePlan(margin=0.05)
    s = draw_sample(recs, plan)
    got = s.groupby(["lesion_type", "polarity", "instruction_type"]).size().to_dict()
    # planning rates of the paper's Table 3: positives 0.901, negatives 0.977
    want_pos, want_neg = wilson_sample_size(0.901, 0.05), wilson_sample_size(0.977, 0.05)
    assert got == {
        ("edema", "positive", "basic"): want_pos,
        ("edema", "negative", "global"): want_neg,
        ("effusion", "positive", "global"): 12,
        ("cardiomegaly", "negative", "global"): want_neg,
    }
    row = s[s["lesion_type"] == "effusion"].iloc[0]
    assert (row["stratum_size"], row["stratum_sampled"]) == (12, 12)  # a small stratum is reviewed whole
    assert s["position"].tolist() == list(range(len(s)))
    assert s["record_id"].is_unique


def test_fixed_n_per_stratum_and_bad_plans():
    s = draw_sample(_records(SIZES), SamplePlan(n=20))
    assert s.groupby("lesion_type").size().to_dict() == {"cardiomegaly": 20, "edema": 40, "effusion": 12}
    with pytest.raises(SamplingError, match="at least 1"):
        draw_sample(_records(SIZES), SamplePlan(n=0))
    with pytest.raises(SamplingError, match="margin"):
        draw_sample(_records(SIZES), SamplePlan(margin=0.8))
    with pytest.raises(SamplingError, match="no records"):
        draw_sample(
            _records({}).reindex(columns=["record_id", "lesion_type", "polarity", "instruction_type", "paraphrase_of"]),
            SamplePlan(),
        )


def test_the_sample_is_the_hash_order_prefix_whatever_the_row_order():
    recs = _records(SIZES)
    plan = SamplePlan(n=30, seed=7)
    a = draw_sample(recs, plan)
    b = draw_sample(recs.sample(frac=1.0, random_state=3), plan)
    pd.testing.assert_frame_equal(a, b)
    # Independent restatement: per stratum, the 30 ids with the smallest SHA-256 of "seed:id".
    for (lesion, pol, itype), n in SIZES.items():
        ids = [f"{lesion}-{pol}-{itype}-{i}:0" for i in range(n)]
        want = sorted(ids, key=lambda r: hashlib.sha256(f"7:{r}".encode()).hexdigest())[:30]
        assert set(a.loc[a["lesion_type"].eq(lesion) & a["polarity"].eq(pol), "record_id"]) == set(want)
    # review order: the same hash over the whole sample, so strata are interleaved
    keys = [hashlib.sha256(f"7:{r}".encode()).hexdigest() for r in a["record_id"]]
    assert keys == sorted(keys)
    assert a["lesion_type"].head(20).nunique() > 1
    c = draw_sample(recs, SamplePlan(n=30, seed=8))
    assert set(c["record_id"]) != set(a["record_id"])


def test_a_larger_sample_contains_the_smaller_one():
    recs = _records(SIZES)
    small = set(draw_sample(recs, SamplePlan(n=10, seed=1))["record_id"])
    large = set(draw_sample(recs, SamplePlan(n=50, seed=1))["record_id"])
    assert small < large


def test_paraphrases_are_not_sampled():
    recs = _records({("edema", "positive", "basic"): 5})
    para = recs.assign(record_id=[f"p{i}:9" for i in range(5)], paraphrase_of=recs["record_id"])
    s = draw_sample(pd.concat([recs, para]), SamplePlan(n=100))
    assert sorted(s["record_id"]) == sorted(recs["record_id"]) and (s["stratum_size"] == 5).all()


def test_the_fixture_dataset_sample_covers_every_stratum(dataset):
    from cxrils.dataset import read_records

    recs = read_records(dataset)
    s = draw_sample(recs, SamplePlan())
    strata = recs.groupby(["lesion_type", "polarity", "instruction_type"]).size()
    assert len(s) == len(recs) == int(strata.sum())  # every stratum is smaller than its Wilson size
    assert np.array_equal(np.sort(s["record_id"].to_numpy()), np.sort(recs["record_id"].to_numpy()))
