"""The review database: append-only decisions, undo as a new row, resume, several
reviewers, validation, the dataset fingerprint."""

from __future__ import annotations

import json
import sqlite3
import threading

import pandas as pd
import pytest

from cxrils.review import ReviewError, ReviewStore, open_review
from cxrils.review.sampling import SamplePlan
from cxrils.review.store import REJECT_REASONS, RequestConflict


def _store(tmp_path, n=6) -> ReviewStore:
    s = ReviewStore(tmp_path / "review.sqlite")
    sample = pd.DataFrame(
        {
            "position": range(n),
            "record_id": [f"im{i}:0" for i in range(n)],
            "lesion_type": "edema",
            "polarity": "positive",
            "instruction_type": "basic",
            "stratum_size": n,
            "stratum_sampled": n,
        }
    )
    s.create_sample(sample, {"n": n}, "fingerprint")
    return s


def test_decisions_and_undo_are_rows_and_nothing_is_ever_changed(tmp_path):
    s = _store(tmp_path)
    s.decide("ann", "im0:0", "accept")
    s.decide("ann", "im1:0", "reject", "wrong_side")
    assert s.undo("ann") == "im1:0"
    s.decide("ann", "im1:0", "reject", "wrong_extent")
    assert s.undo("ann") == "im1:0" and s.undo("ann") == "im0:0" and s.undo("ann") is None
    s.decide("ann", "im0:0", "skip")
    log = s.log()
    assert log["decision"].tolist() == ["accept", "reject", "undo", "reject", "undo", "undo", "skip"]
    assert log["undoes"].dropna().astype(int).tolist() == [2, 4, 1]
    assert {k: (d.decision, d.reason) for k, d in s.current().items()} == {("ann", "im0:0"): ("skip", None)}
    for sql in (
        "UPDATE decisions SET decision = 'accept'",
        "DELETE FROM decisions",
        "DELETE FROM sample",
        "UPDATE meta SET value = 'x'",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            s._db.execute(sql)
    assert len(s.log()) == 7


def test_resume_after_reopening_and_the_next_record(tmp_path):
    s = _store(tmp_path)
    for i, d in enumerate(["accept", "skip", "accept"]):
        s.decide("ann", f"im{i}:0", d)
    s.decide("bob", "im0:0", "reject", "not_a_lesion")
    s.close()
    s = ReviewStore(tmp_path / "review.sqlite")  # a new process after a crash
    assert s.next_position("ann") == 3 and s.next_position("bob") == 1 and s.next_position("carl") == 0
    assert s.next_position("ann", skipped=True) == 1 and s.next_position("ann", after=1, skipped=True) is None
    assert s.next_position("ann", after=4) == 5
    assert s.reviewers() == ["ann", "bob"]
    assert s.plan() == {"n": 6} and s.meta["dataset_fingerprint"] == "fingerprint"
    with pytest.raises(ReviewError, match="already holds"):
        s.create_sample(s.sample(), {"n": 6}, "fingerprint")


def test_bad_input_is_refused_in_words(tmp_path):
    s = _store(tmp_path)
    cases = [
        (("ann", "im9:0", "accept"), "not in the review sample"),
        (("ann", "im0:0", "maybe"), "not one of"),
        (("ann", "im0:0", "reject"), "needs a reason"),
        (("ann", "im0:0", "reject", "bad_light"), "needs a reason"),
        (("ann", "im0:0", "accept", "wrong_side"), "only a rejection"),
        (("", "im0:0", "accept"), "reviewer name"),
        (("../etc", "im0:0", "accept"), "reviewer name"),
    ]
    for args, words in cases:
        with pytest.raises(ReviewError, match=words):
            s.decide(*args)
    with pytest.raises(ReviewError, match="request id"):
        s.decide("ann", "im0:0", "accept", request_id="x; DROP")
    assert len(s.log()) == 0
    (tmp_path / "junk.sqlite").write_bytes(b"this is not a database at all" * 10)
    with pytest.raises(ReviewError, match="not a usable review database"):
        ReviewStore(tmp_path / "junk.sqlite")


def test_a_reviewer_name_is_one_person_whatever_its_case_or_spaces(tmp_path):
    # new-user trial (stop 58): "Alice" after "alice" made a second reviewer, who then
    # counted in the agreement; "alice " was stripped while "  alice  " was refused
    s = _store(tmp_path)
    s.decide("alice", "im0:0", "accept")
    with pytest.raises(ReviewError, match="differs from the existing reviewer 'alice' only in case; decide as 'alice'"):
        s.decide("Alice", "im1:0", "accept")
    s.decide("  alice  ", "im1:0", "accept")
    assert s.reviewers() == ["alice"] and len(s.log()) == 2
    # review (stop 59): imports checked the same way, a batch against itself too
    with pytest.raises(ReviewError, match="'ALICE' differs from the existing reviewer 'alice'"):
        s.add_decisions([("ALICE", "im2:0", "accept", None)])
    with pytest.raises(ReviewError, match="'Bob' differs from the existing reviewer 'bob'"):
        s.add_decisions([("bob", "im2:0", "accept", None), ("Bob", "im3:0", "accept", None)])
    assert len(s.log()) == 2  # the refused batch wrote nothing


def test_a_database_with_two_spellings_of_a_name_locks_no_one_out(tmp_path):
    # review (stop 59): a database from before the check held "alice" and "Alice"; each
    # was then refused and told to decide as the other
    s = _store(tmp_path)
    s.decide("alice", "im0:0", "accept")
    s._db.execute(
        "INSERT INTO decisions (reviewer, record_id, decision, reason, decided_at) VALUES (?, ?, ?, ?, ?)",
        ("Alice", "im1:0", "accept", None, "2026-01-01T00:00:00"),
    )
    s.decide("alice", "im2:0", "accept")
    s.decide("Alice", "im3:0", "accept")
    assert len(s.log()) == 4


def test_a_resent_request_counts_once(tmp_path):
    s = _store(tmp_path)
    first = s.decide("ann", "im0:0", "accept", request_id="req-000001")
    assert s.decide("ann", "im0:0", "accept", request_id="req-000001") == first
    assert len(s.log()) == 1
    # the same id for another decision is a conflict, not a silent replay of the first
    with pytest.raises(RequestConflict, match="already used for ann's 'accept' of 'im0:0'"):
        s.decide("ann", "im1:0", "reject", reason=next(iter(REJECT_REASONS)), request_id="req-000001")
    assert len(s.log()) == 1


def test_concurrent_reviewers_lose_nothing(tmp_path):
    s = _store(tmp_path, n=40)
    other = ReviewStore(tmp_path / "review.sqlite")  # a second process on the same file

    def work(store, name):
        for i in range(40):
            store.decide(name, f"im{i}:0", "accept" if i % 3 else "reject", None if i % 3 else "wrong_location")

    threads = [threading.Thread(target=work, args=(st, n)) for st, n in ((s, "ann"), (s, "bob"), (other, "carl"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s.log()) == 120
    assert len(s.current()) == len(other.current()) == 120  # each sees the other's rows


def test_open_review_keeps_the_plan_and_refuses_another_dataset(dataset):
    r = open_review(dataset, SamplePlan(n=3, seed=5))
    n = len(r)
    r.store.decide("ann", r.record(0)["record_id"], "accept")
    r.close()
    r = open_review(dataset)  # no plan given: the stored one
    assert len(r) == n and r.store.plan()["seed"] == 5
    assert r.store.next_position("ann") == 1
    r.close()
    with pytest.raises(ReviewError, match="planned with"):
        open_review(dataset, SamplePlan(n=4))
    from cxrils.dataset import DatasetWriter

    prov = json.loads((dataset / "provenance.json").read_text())
    (dataset / "parts" / "im7.parquet").unlink()  # the dataset is finalized again without one study
    with DatasetWriter(dataset, prov) as w:
        w.finalize()
    with pytest.raises(ReviewError, match="changed since"):
        open_review(dataset)
