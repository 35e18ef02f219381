"""The review database: one SQLite file in the dataset folder, append-only.

``DATASET/review.sqlite`` (standard library :mod:`sqlite3`, write-ahead log,
``synchronous=FULL``) holds

* ``meta``: schema version, the dataset's fingerprint (its shards' SHA-256, so a
  review never mixes two versions of a dataset), the sample plan, when it was made;
* ``sample``: the records to review, in review order (:func:`cxrils.review.sampling.draw_sample`);
* ``decisions``: one row per decision: reviewer, record id, ``accept`` / ``reject``
  (with a reason) / ``skip``, or ``undo`` naming the row it withdraws, and the UTC
  time.

Each decision is one transaction, committed before the caller hears back, so a server
killed at any point keeps every decision it acknowledged. Nothing is updated or deleted
(triggers refuse it): an undo is a new row, so the whole history survives. A reviewer's
decision on a record is their latest decision on it that no undo withdrew.

Records themselves are never touched: the dataset is only read.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

#: File name of the review database inside the dataset folder.
DB_NAME = "review.sqlite"
#: Version of the tables below; a file of another version is refused.
SCHEMA_VERSION = 1
#: What a reviewer can decide about a record.
DECISIONS: tuple[str, ...] = ("accept", "reject", "skip")
#: Reasons of a rejection (issue 31), key -> words shown on the page. For a negative
#: record ("There is no X in Y") the lesion is there after all: "wrong location" (the
#: location is not empty) or "report misread" (the report says X is present).
REJECT_REASONS: dict[str, str] = {
    "wrong_location": "wrong location",
    "wrong_extent": "wrong extent",
    "not_a_lesion": "not a lesion",
    "wrong_side": "wrong side",
    "report_misread": "report misread",
}
#: A reviewer name: letters, digits, space and ``._@-``, 1-64 characters, starting with
#: a letter or digit.
REVIEWER_PATTERN = r"^\s*[A-Za-z0-9][A-Za-z0-9 ._@-]{0,63}$"  # surrounding spaces are stripped
_REVIEWER = re.compile(REVIEWER_PATTERN)
#: A client's request id (makes a resent decision count once): 8-64 of ``[A-Za-z0-9_-]``.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sample (
    position INTEGER PRIMARY KEY,
    record_id TEXT NOT NULL UNIQUE,
    lesion_type TEXT NOT NULL,
    polarity TEXT NOT NULL,
    instruction_type TEXT NOT NULL,
    stratum_size INTEGER NOT NULL,
    stratum_sampled INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    reviewer TEXT NOT NULL,
    record_id TEXT NOT NULL REFERENCES sample(record_id),
    decision TEXT NOT NULL CHECK (decision IN ('accept', 'reject', 'skip', 'undo')),
    reason TEXT CHECK ((decision = 'reject') = (reason IS NOT NULL)),
    undoes INTEGER REFERENCES decisions(id) CHECK ((decision = 'undo') = (undoes IS NOT NULL)),
    decided_at TEXT NOT NULL,
    request_id TEXT UNIQUE
);
CREATE INDEX IF NOT EXISTS decisions_by_reviewer ON decisions (reviewer, id);
"""
_APPEND_ONLY = [
    f"""
CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table}
BEGIN SELECT RAISE(ABORT, 'the review database is append-only: {table} rows are never changed'); END;
"""
    for table in ("meta", "sample", "decisions")
    for op in ("UPDATE", "DELETE")
]


class ReviewError(ValueError):
    """Raised for bad review input (unknown record, bad reviewer name, reason) or a
    database that belongs to another dataset or version; the message says which."""


class RequestConflict(ReviewError):
    """Raised when a request id already stored names another decision (the page answers 409)."""


def check_reviewer(name: str) -> str:
    """The reviewer name, stripped, if it matches :data:`REVIEWER_PATTERN`.

    Raises
    ------
    ReviewError
        Otherwise.
    """
    text = str(name or "").strip()
    if not _REVIEWER.match(text):
        raise ReviewError(
            f"reviewer name {name!r} is not usable: 1-64 letters, digits, spaces or ._@-, "
            "starting with a letter or digit"
        )
    return text


def _check_decision(decision: str, reason: str | None) -> None:
    if decision not in DECISIONS:
        raise ReviewError(f"decision {decision!r} is not one of {', '.join(DECISIONS)}")
    if decision == "reject" and reason not in REJECT_REASONS:
        raise ReviewError(f"a rejection needs a reason, one of {', '.join(REJECT_REASONS)}; got {reason!r}")
    if decision != "reject" and reason is not None:
        raise ReviewError(f"only a rejection takes a reason ({decision} given with {reason!r})")


def _remove(items: list, item: object) -> None:
    """Remove ``item`` from ``items``, searching from the end (undo withdraws recent rows)."""
    for i in range(len(items) - 1, -1, -1):
        if items[i] is item:
            del items[i]
            return


def dataset_fingerprint(manifest: dict) -> str:
    """SHA-256 over a finalized dataset's shard paths and hashes (its records exactly)."""
    shards = sorted((s["path"], s["sha256"]) for s in manifest.get("shards", []))
    return hashlib.sha256(json.dumps(shards).encode("utf-8")).hexdigest()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass(slots=True)
class Decision:
    """One live (not withdrawn) decision: the row id, reviewer, record, decision, reason."""

    id: int
    reviewer: str
    record_id: str
    decision: str
    reason: str | None
    decided_at: str


class ReviewStore:
    """The review database of one dataset (module docstring).

    Thread-safe: one connection behind a lock (a web server's request threads share
    it). Several processes may open the same file; SQLite serialises their writes.

    Parameters
    ----------
    path : path
        The database file; created with its tables when missing.

    Raises
    ------
    ReviewError
        If the file is not a review database of this schema version.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30)
        except sqlite3.Error as err:
            raise ReviewError(f"{self.path}: cannot open the review database: {err}") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(
                "BEGIN IMMEDIATE;"
                + _SCHEMA
                + "".join(_APPEND_ONLY)
                + f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
                + "COMMIT;"
            )
            version = self._meta().get("schema_version")
            if version != str(SCHEMA_VERSION):
                raise ReviewError(
                    f"{self.path}: review database of schema version {version}; "
                    f"this cxrils reads version {SCHEMA_VERSION}"
                )
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise ReviewError(f"{self.path}: not a usable review database: {err}") from None
        except ReviewError:
            self._db.close()
            raise
        self._seen = 0  # highest decision id replayed into the state below
        self._stack: dict[tuple[str, str], list[Decision]] = {}  # live decisions per (reviewer, record)
        self._history: dict[str, list[Decision]] = {}  # live decisions per reviewer, oldest first
        self._by_id: dict[int, Decision] = {}
        self._order: list[str] | None = None
        self._sample_ids: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ plan

    def _meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    @property
    def meta(self) -> dict[str, str]:
        """The ``meta`` table: ``schema_version``, and once a sample exists
        ``dataset_fingerprint``, ``plan`` (JSON) and ``created_at``."""
        with self._lock:
            return self._meta()

    def create_sample(self, sample: pd.DataFrame, plan: dict, fingerprint: str) -> None:
        """Store the sample and its plan, in one transaction.

        Parameters
        ----------
        sample : pandas.DataFrame
            :func:`cxrils.review.sampling.draw_sample`'s output.
        plan : dict
            The plan it was drawn with (JSON-ready).
        fingerprint : str
            :func:`dataset_fingerprint` of the dataset.

        Raises
        ------
        ReviewError
            If the database already holds a sample.
        """
        rows = [
            (
                int(r.position),
                str(r.record_id),
                str(r.lesion_type),
                str(r.polarity),
                str(r.instruction_type),
                int(r.stratum_size),
                int(r.stratum_sampled),
            )
            for r in sample.itertuples(index=False)
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if "plan" in self._meta():
                    raise ReviewError(f"{self.path} already holds a review sample")
                self._db.executemany("INSERT INTO sample VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                self._db.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [
                        ("dataset_fingerprint", fingerprint),
                        ("plan", json.dumps(plan, sort_keys=True)),
                        ("created_at", _now()),
                    ],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._order = None

    def plan(self) -> dict | None:
        """The stored plan, or None before a sample was made."""
        text = self.meta.get("plan")
        return json.loads(text) if text else None

    def sample(self) -> pd.DataFrame:
        """The sample in review order (columns of the ``sample`` table)."""
        with self._lock:
            return pd.read_sql_query("SELECT * FROM sample ORDER BY position", self._db)

    def _sample_order(self) -> list[str]:
        """Record ids in review order (cached; the sample never changes once made)."""
        if not self._order:  # not cached, or no sample yet (another process may make it)
            self._order = [r for (r,) in self._db.execute("SELECT record_id FROM sample ORDER BY position")]
            self._sample_ids = frozenset(self._order)
        return self._order

    def _sample_set(self) -> frozenset[str]:
        self._sample_order()
        return self._sample_ids

    def next_position(self, reviewer: str, *, after: int = -1, skipped: bool = False) -> int | None:
        """The next sample position for a reviewer: the first one after ``after`` they
        have not decided (with ``skipped``: the first one they skipped), or None.

        Raises
        ------
        ReviewError
            For a bad reviewer name.
        """
        reviewer = check_reviewer(reviewer)
        with self._lock:
            order = self._sample_order()
            self._refresh()
            for pos in range(max(after + 1, 0), len(order)):
                live = self._stack.get((reviewer, order[pos]))
                current = live[-1].decision if live else None
                if (current == "skip") if skipped else (current is None):
                    return pos
            return None

    # ------------------------------------------------------------------ decisions

    def _refresh(self) -> None:
        """Replay decisions written since the last call (by this or another process)."""
        rows = self._db.execute(
            "SELECT id, reviewer, record_id, decision, reason, undoes, decided_at "
            "FROM decisions WHERE id > ? ORDER BY id",
            (self._seen,),
        ).fetchall()
        for row_id, reviewer, record_id, decision, reason, undoes, decided_at in rows:
            self._apply(row_id, reviewer, record_id, decision, reason, undoes, decided_at)

    def _apply(
        self,
        row_id: int,
        reviewer: str,
        record_id: str,
        decision: str,
        reason: str | None,
        undoes: int | None,
        decided_at: str,
    ) -> None:
        self._seen = row_id
        if decision == "undo":
            gone = self._by_id.pop(undoes, None)
            if gone is not None:
                _remove(self._stack[(gone.reviewer, gone.record_id)], gone)
                _remove(self._history[gone.reviewer], gone)
            return
        d = Decision(row_id, reviewer, record_id, decision, reason, decided_at)
        self._by_id[row_id] = d
        self._stack.setdefault((reviewer, record_id), []).append(d)
        self._history.setdefault(reviewer, []).append(d)

    def decide(
        self, reviewer: str, record_id: str, decision: str, reason: str | None = None, request_id: str | None = None
    ) -> int:
        """Append one decision (one committed transaction).

        Parameters
        ----------
        reviewer : str
            :func:`check_reviewer` applies.
        record_id : str
            A record of the sample.
        decision : {"accept", "reject", "skip"}
        reason : str, optional
            A key of :data:`REJECT_REASONS`; required for "reject", refused otherwise.
        request_id : str, optional
            The client's id of this request (8-64 letters, digits, ``_`` or ``-``): a
            decision sent again with the same id is stored once (the first row's id is
            returned); another decision under a used id raises :class:`RequestConflict`.

        Returns
        -------
        int
            The decision's row id.

        Raises
        ------
        ReviewError
            For a record outside the sample, an unknown decision or reason, a bad
            reviewer name (or one that differs from an existing reviewer's only in case)
            or request id; :class:`RequestConflict` for a request id used by another
            decision.
        """
        reviewer = check_reviewer(reviewer)
        _check_decision(decision, reason)
        if request_id is not None and not _REQUEST_ID.match(request_id):
            raise ReviewError("request id must be 8-64 letters, digits, '_' or '-'")
        with self._lock:
            if record_id not in self._sample_set():
                raise ReviewError(f"record {record_id!r} is not in the review sample")
            return self._write(reviewer, record_id, decision, reason, None, request_id)

    def undo(self, reviewer: str) -> str | None:
        """Withdraw the reviewer's latest live decision (appends an ``undo`` row).

        Returns
        -------
        str or None
            The record id whose decision was withdrawn, or None when the reviewer has
            nothing left to undo.
        """
        reviewer = check_reviewer(reviewer)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._refresh()
                history = self._history.get(reviewer) or []
                if not history:
                    self._db.execute("COMMIT")
                    return None
                last = history[-1]
                self._insert(reviewer, last.record_id, "undo", None, last.id, None)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._refresh()
            return last.record_id

    def _write(
        self,
        reviewer: str,
        record_id: str,
        decision: str,
        reason: str | None,
        undoes: int | None,
        request_id: str | None,
    ) -> int:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._check_new_names([reviewer])  # in the transaction: two processes cannot both pass
            if request_id is not None:
                found = self._db.execute(
                    "SELECT id, reviewer, record_id, decision, reason FROM decisions WHERE request_id = ?",
                    (request_id,),
                ).fetchone()
                if found:
                    if tuple(found[1:]) != (reviewer, record_id, decision, reason):  # rolled back below
                        raise RequestConflict(
                            f"request id {request_id!r} was already used for {found[1]}'s {found[3]!r} of "
                            f"{found[2]!r}; send a new id for a new decision"
                        )
                    self._db.execute("COMMIT")
                    return int(found[0])
            row_id = self._insert(reviewer, record_id, decision, reason, undoes, request_id)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._refresh()
        return row_id

    def _check_new_names(self, names: Iterable[str]) -> None:
        """Refuse a reviewer name that is new to the database and differs from a name
        already there (or from another new one) only in case: one person under two
        spellings would count twice in the agreement. A name already in the database is
        always accepted, also where an older database holds two spellings. Call inside
        the write transaction.

        Raises
        ------
        ReviewError
            Naming both spellings and the one to decide as.
        """
        known = {r for (r,) in self._db.execute("SELECT DISTINCT reviewer FROM decisions")}
        folded = {r.casefold(): r for r in sorted(known)}
        for name in names:
            if name in known:
                continue
            twin = folded.get(name.casefold())
            if twin is not None:
                raise ReviewError(
                    f"reviewer name {name!r} differs from the existing reviewer {twin!r} only in case; "
                    f"decide as {twin!r}"
                )
            known.add(name)
            folded[name.casefold()] = name

    def _insert(
        self,
        reviewer: str,
        record_id: str,
        decision: str,
        reason: str | None,
        undoes: int | None,
        request_id: str | None,
    ) -> int:
        cur = self._db.execute(
            "INSERT INTO decisions (reviewer, record_id, decision, reason, undoes, decided_at, request_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (reviewer, record_id, decision, reason, undoes, _now(), request_id),
        )
        return int(cur.lastrowid)

    def add_decisions(self, rows: Iterable[tuple[str, str, str, str | None]]) -> int:
        """Append many ``(reviewer, record_id, decision, reason)`` rows in one
        transaction (imports and benchmarks; the page writes one at a time). Each row is
        checked as :meth:`decide` checks it. Returns the number of rows written."""
        checked = []
        with self._lock:
            ids = self._sample_set()
            for reviewer, record_id, decision, reason in rows:
                reviewer = check_reviewer(reviewer)
                _check_decision(decision, reason)
                if record_id not in ids:
                    raise ReviewError(f"record {record_id!r} is not in the review sample")
                checked.append((reviewer, record_id, decision, reason, _now()))
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._check_new_names([c[0] for c in checked])
                self._db.executemany(
                    "INSERT INTO decisions (reviewer, record_id, decision, reason, decided_at) VALUES (?, ?, ?, ?, ?)",
                    checked,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._refresh()
        return len(checked)

    def current(self, reviewer: str | None = None) -> dict[tuple[str, str], Decision]:
        """Each reviewer's decision per record: ``{(reviewer, record_id): Decision}``
        (the latest live decision), of one reviewer or all."""
        with self._lock:
            self._refresh()
            return {k: v[-1] for k, v in self._stack.items() if v and (reviewer is None or k[0] == reviewer)}

    def reviewers(self) -> list[str]:
        """Names of everyone who decided something, sorted."""
        with self._lock:
            self._refresh()
            return sorted(r for r, h in self._history.items() if h)

    def n_rows(self) -> int:
        """Rows in ``decisions``, undos included."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM decisions").fetchone()[0])

    def log(self) -> pd.DataFrame:
        """Every row of ``decisions``, undos included, oldest first."""
        with self._lock:
            return pd.read_sql_query("SELECT * FROM decisions ORDER BY id", self._db)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> ReviewStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
