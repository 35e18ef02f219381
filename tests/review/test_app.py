"""The review API through FastAPI's TestClient: decide, undo, resume, images and masks,
and what it refuses (other hosts, missing token, forms from other sites, bad input,
unknown records)."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from PIL import Image  # noqa: E402

from cxrils.masks import decode_rle  # noqa: E402
from cxrils.overlay import LESION_RGB  # noqa: E402
from cxrils.review import open_review  # noqa: E402
from cxrils.review.app import create_review_app  # noqa: E402

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture
def review(dataset):
    r = open_review(dataset)
    yield r
    r.close()


@pytest.fixture
def client(review):
    return TestClient(create_review_app(review), base_url=LOCAL)


def _decide(client, rec, decision, reason=None, reviewer="ann", **extra):
    return client.post(
        "/api/decisions",
        json={
            "reviewer": reviewer,
            "position": rec["position"],
            "record_id": rec["record_id"],
            "decision": decision,
            "reason": reason,
            **extra,
        },
    )


def test_review_flow_decide_undo_resume(client, review):
    info = client.get("/api/info").json()
    assert info["total"] == len(review) and set(info["reasons"]) >= {"wrong_side", "report_misread"}
    first = client.get("/api/next", params={"reviewer": "ann"}).json()
    assert first["record"]["position"] == 0 and first["progress"]["decided"] == 0 and first["upcoming"] == 1
    rec = first["record"]
    res = _decide(client, rec, "accept").json()
    assert res["record"]["position"] == 1 and res["progress"]["accept"] == 1
    res = _decide(client, res["record"], "reject", "wrong_location").json()
    assert res["record"]["position"] == 2
    undone = client.post("/api/undo", json={"reviewer": "ann"}).json()
    assert undone["record"]["position"] == 1 and undone["progress"]["decided"] == 1
    assert undone["record"]["current"] is None
    # a new page (closed tab, restarted server) starts at the first record ann has not decided
    assert client.get("/api/next", params={"reviewer": "ann"}).json()["record"]["position"] == 1
    assert client.get("/api/next", params={"reviewer": "bob"}).json()["record"]["position"] == 0
    # new-user trial (stop 58): a position past the sample answered null, which reads "done"
    past = client.get("/api/next", params={"reviewer": "ann", "after": len(review)})
    assert past.status_code == 404 and "there is no record" in past.json()["detail"]
    last = client.get("/api/next", params={"reviewer": "ann", "after": len(review) - 1})
    assert last.status_code == 200 and last.json()["record"] is None
    _decide(client, undone["record"], "skip")
    again = client.get("/api/next", params={"reviewer": "ann", "skipped": 1}).json()
    assert again["record"]["position"] == 1 and again["record"]["current"]["decision"] == "skip"
    page = client.get("/api/records/0", params={"reviewer": "ann"}).json()
    assert page["current"]["decision"] == "accept" and page["chain"]["recorded"]
    assert [d.decision for d in review.store.current("ann").values()] == ["accept", "skip"]


def test_image_and_mask_are_the_records_own(client, review):
    pos = next(i for i in range(len(review)) if review.record(i)["mask_area"] > 0)
    rec = review.record(pos)
    img = client.get(f"/api/records/{pos}/image.png")
    assert img.status_code == 200 and img.headers["content-type"] == "image/png"
    x = np.asarray(Image.open(io.BytesIO(img.content)))
    assert x.shape == (rec["height"], rec["width"]) and x.dtype == np.uint8
    m = np.asarray(Image.open(io.BytesIO(client.get(f"/api/records/{pos}/mask.png").content)))
    assert m.shape == (rec["height"], rec["width"], 4)
    want = decode_rle(rec["mask"])
    assert np.array_equal(m[..., 3] == 255, want) and (m[want][:, :3] == LESION_RGB).all()


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"decision": "maybe"}, 422, "decision"),
        ({"decision": "reject"}, 400, "needs a reason"),
        ({"decision": "reject", "reason": "ugly"}, 422, "reason"),
        ({"reviewer": "<script>"}, 422, "reviewer"),
        ({"position": 10_000}, 404, "no record 10000"),
        ({"record_id": "im9:99"}, 409, "reload the page"),
        ({"extra": 1}, 422, "extra"),
    ],
)
def test_bad_decisions_are_refused_in_words(client, review, body, status, words):
    rec = review.record(0)
    payload = {"reviewer": "ann", "position": 0, "record_id": rec["record_id"], "decision": "accept", **body}
    res = client.post("/api/decisions", json=payload)
    assert res.status_code == status and words in res.json()["detail"]
    assert review.store.n_rows() == 0


def test_unknown_records_and_pages(client, review):
    for path in (f"/api/records/{len(review)}", f"/api/records/{len(review)}/image.png", "/api/records/-1/mask.png"):
        res = client.get(path)
        assert res.status_code in (404, 422) and "detail" in res.json()
    assert client.get("/api/records/..%2F..%2Fmanifest.json/image.png").status_code in (404, 422)
    assert client.get("/nope").json()["detail"].startswith("there is nothing at /nope")
    assert client.get("/api/next", params={"reviewer": "a/b"}).status_code == 422


def test_only_loopback_hosts_without_a_token(review):
    other = TestClient(create_review_app(review), base_url="http://attacker.example:8765")
    res = other.get("/api/info")
    assert res.status_code == 421 and "127.0.0.1" in res.json()["detail"]
    for host in ("http://localhost:8765", "http://[::1]:8765"):
        assert TestClient(create_review_app(review), base_url=host).get("/api/info").status_code == 200


def test_posts_must_be_json_from_the_page_itself(client, review):
    rec = review.record(0)
    form = client.post(
        "/api/decisions", data={"reviewer": "ann", "position": 0, "record_id": rec["record_id"], "decision": "accept"}
    )
    assert form.status_code == 415  # what a cross-site HTML form can send
    res = client.post(
        "/api/decisions",
        json={"reviewer": "ann", "position": 0, "record_id": rec["record_id"], "decision": "accept"},
        headers={"Origin": "http://evil.example"},
    )
    assert res.status_code == 403
    big = client.post(
        "/api/undo", content=b'{"reviewer": "' + b"a" * 20_000 + b'"}', headers={"Content-Type": "application/json"}
    )
    assert big.status_code == 413
    assert review.store.n_rows() == 0
    ok = client.post(
        "/api/decisions",
        json={"reviewer": "ann", "position": 0, "record_id": rec["record_id"], "decision": "accept"},
        headers={"Origin": LOCAL},
    )
    assert ok.status_code == 200 and review.store.n_rows() == 1


def test_a_token_guards_every_request(review):
    token = "s3cret-token-for-tests"
    app = create_review_app(review, token=token)
    anyone = TestClient(app, base_url="http://10.1.2.3:8765")
    for path in ("/", "/api/info", "/api/records/0/image.png", "/stats"):
        assert anyone.get(path).status_code == 401
    assert anyone.get("/?token=wrong").status_code == 401
    for bad in ({"Authorization": b"Bearer \xc3\xa9t\xc3\xa9"}, {"Cookie": b"cxrils_review_token=\xff"}):
        assert anyone.get("/api/info", headers=bad).status_code == 401  # refused in words, not a crash
    assert anyone.get("/", params={"token": "jeton-sécurisé-long"}).status_code == 401
    assert anyone.get("/api/info", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    browser = TestClient(app, base_url="http://10.1.2.3:8765")
    first = browser.get(f"/?token={token}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert (
        "httponly" in first.headers["set-cookie"].lower() and "samesite=strict" in first.headers["set-cookie"].lower()
    )
    assert browser.get("/").status_code == 200 and browser.get("/api/info").status_code == 200  # the cookie


def test_stats_and_export_from_the_page(client, review, tmp_path):
    _decide(client, review.payload(0), "accept")
    stats = client.get("/api/stats").json()
    assert stats["counts"]["with_consensus"] == 1 and stats["rates"]["all"][0]["accepted"] == 1
    page = client.get("/stats")
    assert page.status_code == 200 and "beside the paper" in page.text
    app = create_review_app(review, export_dir=tmp_path / "out")
    res = TestClient(app, base_url=LOCAL).post("/api/export", json={}).json()
    assert res["records"] == 1 and (tmp_path / "out" / "cxrils" / "manifest.json").is_file()
    assert (tmp_path / "out" / "mimic-ils" / "mimic_ils_instruction_answer.json").is_file()


def test_a_dataset_without_grounding_files_is_reviewed_from_its_records(dataset):
    import shutil

    shutil.rmtree(dataset / "grounding")  # written before cxrils kept them, imported, or built by hand
    r = open_review(dataset)
    c = TestClient(create_review_app(r), base_url=LOCAL)
    res = c.get("/api/next", params={"reviewer": "ann"})
    assert res.status_code == 200
    rec = res.json()["record"]
    assert rec["chain"]["recorded"] is False and "no grounding file" in rec["chain"]["note"]
    assert rec["instruction"] == r.record(0)["instruction"] and rec["chain"]["findings"] == []
    assert _decide(c, rec, "accept").status_code == 200 and r.store.n_rows() == 1
    r.close()


def test_a_dataset_opened_as_dot_is_named_and_exports_beside_itself(dataset, monkeypatch):
    monkeypatch.chdir(dataset)
    r = open_review(".")
    c = TestClient(create_review_app(r), base_url=LOCAL)
    assert c.get("/api/info").json()["dataset"] == dataset.name
    _decide(c, r.payload(0), "accept")
    res = c.post("/api/export", json={})
    assert res.status_code == 200 and res.json()["out"] == str(dataset.resolve().with_name(f"{dataset.name}-accepted"))
    r.close()


def test_a_request_id_reused_for_another_decision_is_a_409(client, review):
    first, second = ({**review.record(k), "position": k} for k in (0, 1))
    assert _decide(client, first, "accept", request_id="req00001").status_code == 200
    assert _decide(client, first, "accept", request_id="req00001").status_code == 200  # a resend: counted once
    res = _decide(client, second, "reject", "wrong_location", request_id="req00001")
    assert res.status_code == 409 and "already used" in res.json()["detail"]
    assert review.store.n_rows() == 1
