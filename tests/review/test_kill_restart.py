"""Kill the review server (SIGKILL) in the middle of a review, start it again: every
decision it acknowledged is there, the database is intact, the review resumes."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

SRC = Path(__file__).resolve().parents[2] / "src"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(dataset: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "cxrils", "review", str(dataset), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the review server exited: {proc.stdout.read().decode(errors='replace')}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the review server did not start")


@pytest.mark.slow
def test_sigkill_mid_review_loses_no_acknowledged_decision(dataset):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(dataset, port)
    acknowledged: list[tuple[str, str]] = []
    try:
        with httpx.Client(base_url=base, timeout=10) as c:
            total = c.get("/api/info").json()["total"]
            rec = c.get("/api/next", params={"reviewer": "ann"}).json()["record"]
            for i in range(5):  # a first stretch of the review
                d = "accept" if i % 2 == 0 else "skip"
                res = c.post(
                    "/api/decisions",
                    json={"reviewer": "ann", "position": rec["position"], "record_id": rec["record_id"], "decision": d},
                )
                assert res.status_code == 200
                acknowledged.append((rec["record_id"], d))
                rec = res.json()["record"]

        stop, started = threading.Event(), threading.Event()

        def keep_deciding():  # a second reviewer still working when the server dies
            with httpx.Client(base_url=base, timeout=5) as c:
                try:
                    nxt = c.get("/api/next", params={"reviewer": "bob"}).json()["record"]
                    while nxt is not None and not stop.is_set():
                        res = c.post(
                            "/api/decisions",
                            json={
                                "reviewer": "bob",
                                "position": nxt["position"],
                                "record_id": nxt["record_id"],
                                "decision": "reject",
                                "reason": "wrong_extent",
                            },
                        )
                        if res.status_code != 200:
                            return
                        acknowledged.append((nxt["record_id"], "reject"))
                        if len(acknowledged) >= 15:
                            started.set()
                        nxt = res.json()["record"]
                except httpx.HTTPError:
                    return  # the connection died with the server

        worker = threading.Thread(target=keep_deciding)
        worker.start()
        assert started.wait(timeout=60)
        proc.send_signal(signal.SIGKILL)  # while bob's next decisions are on their way
        proc.wait(timeout=10)
        stop.set()
        worker.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert 15 <= len(acknowledged) < 5 + total  # bob was mid-review

    db = dataset / "review.sqlite"
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    proc = _start(dataset, port)
    try:
        with httpx.Client(base_url=base, timeout=10) as c:
            stats = c.get("/api/stats").json()
            nxt_ann = c.get("/api/next", params={"reviewer": "ann"}).json()
            nxt_bob = c.get("/api/next", params={"reviewer": "bob"}).json()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT reviewer, record_id, decision FROM decisions ORDER BY id").fetchall()
    stored = [(r, d) for _, r, d in rows]
    assert set(acknowledged) <= set(stored)  # nothing acknowledged is lost
    assert len(stored) - len(acknowledged) <= 1  # at most the one decision in flight when it died
    n_bob = sum(1 for who, _, _ in rows if who == "bob")
    assert nxt_ann["record"]["position"] == 5 and nxt_ann["progress"]["decided"] == 5  # resumes
    assert nxt_bob["progress"]["decided"] == n_bob and nxt_bob["record"]["position"] == n_bob
    assert stats["counts"]["decisions"] == len(rows)
