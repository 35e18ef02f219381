"""End-to-end: Debian's headless Chromium, driven by Playwright with the keyboard, against
the review page on 127.0.0.1: review 10 records (accept, the five reject reasons, skip,
undo), reload and resume, export the accepted records, read the statistics page.
Skips where Chromium or Playwright is absent (``.ci/run`` installs both)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("uvicorn")

from cxrils.dataset import read_records  # noqa: E402
from cxrils.review import open_review  # noqa: E402
from cxrils.review.app import create_review_app  # noqa: E402
from cxrils.review.intervals import wilson_interval  # noqa: E402

pytestmark = [pytest.mark.browser]

RED_PIXELS = """() => { const c = document.getElementById('view');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > d[i + 1] + 60) n++; return n; }"""
# key -> (decision, reason) it stands for; "u" withdraws the previous one
# letters in either case (docs audit, stop 59: Shift or Caps Lock made "A" and "U" do nothing)
KEYS = ["a", "Shift+A", "1", "s", "a", "2", "a", "a", "Shift+U", "5", "3", "a"]
WANT = {
    0: ("accept", None),
    1: ("accept", None),
    2: ("reject", "wrong_location"),
    3: ("skip", None),
    4: ("accept", None),
    5: ("reject", "wrong_extent"),
    6: ("accept", None),
    7: ("reject", "report_misread"),
    8: ("reject", "not_a_lesion"),
    9: ("accept", None),
}


@pytest.fixture
def served(dataset, tmp_path, live_server):
    review = open_review(dataset)
    yield live_server(create_review_app(review, export_dir=tmp_path / "accepted")), review
    review.close()


def _wait_for(page, position: int) -> None:
    page.wait_for_selector(f"body[data-state=ready][data-position='{position}']", timeout=20_000)


def test_keyboard_review_resume_export_and_stats(served, chromium, tmp_path):
    url, review = served
    page = chromium.new_page(viewport={"width": 1300, "height": 900})
    page.goto(url + "/")
    page.wait_for_selector("#reasons button")
    page.keyboard.type("ann")  # the name field has the focus on a first visit
    page.keyboard.press("Enter")
    _wait_for(page, 0)
    checked_mask = False
    position = 0
    for key in KEYS:
        if not checked_mask and review.record(position)["mask_area"] > 0:  # the overlay: toggle, opacity, zoom
            assert page.evaluate(RED_PIXELS) > 0
            page.keyboard.press("m")
            assert page.evaluate(RED_PIXELS) == 0
            page.keyboard.press("Shift+M")
            page.keyboard.press("[")
            assert page.inner_text("#opacity-value") == "35%"
            page.keyboard.press("+")
            assert page.inner_text("#zoom-value") == "125%"
            page.keyboard.press("0")
            assert page.inner_text("#zoom-value") == "100%"
            page.screenshot(path=str(tmp_path / "review.png"))
            checked_mask = True
        page.keyboard.press(key)
        position = position - 1 if key.lower().endswith("u") else position + 1
        _wait_for(page, position)
    assert checked_mask
    page.keyboard.press("Control+Shift+Z")  # the browsers' redo: no undo here (review, stop 59)
    page.wait_for_timeout(300)
    assert page.get_attribute("body", "data-position") == str(position)
    total = len(review)
    assert page.inner_text("#progress") == f"ann: 10 of {total} decided · accepted 5 · rejected 4 · skipped 1"
    current = review.store.current("ann")
    got = {review.position_of(rid): (d.decision, d.reason) for (_, rid), d in current.items()}
    assert got == WANT
    assert review.store.log()["decision"].tolist().count("undo") == 1

    # a reload (or a closed tab) resumes at the first record not decided
    page.reload()
    _wait_for(page, 10)
    assert page.inner_text("#progress").startswith(f"ann: 10 of {total} decided")
    assert f"record 11 of {total}" in page.inner_text("#meta")

    # export, from the keyboard
    page.focus("#export")
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-exported]", timeout=60_000)
    assert page.get_attribute("body", "data-exported") == "5"
    accepted = read_records(tmp_path / "accepted" / "cxrils")
    want_ids = {review.record(p)["record_id"] for p, (d, _) in WANT.items() if d == "accept"}
    assert set(accepted["record_id"]) == want_ids
    release = json.loads((tmp_path / "accepted" / "mimic-ils" / "mimic_ils_instruction_answer.json").read_text())
    assert (
        sum(
            len(s["instruction_answer_pairs"]["positive_pairs"]) + len(s["instruction_answer_pairs"]["negative_pairs"])
            for split in release.values()
            for s in split.values()
        )
        == 5
    )

    # the statistics page: 9 accepted or rejected, 5 accepted, with the Wilson interval
    page.focus("#stats-link")
    page.keyboard.press("Enter")
    page.wait_for_selector("h1")
    text = page.inner_text("body")
    lo, hi = wilson_interval(5, 9)
    assert f"55.6% [{100 * lo:.1f}-{100 * hi:.1f}]" in text
    assert "9 accepted or rejected, 1 only skipped" in text
    assert "96.4% of 10,701" in text and "90.1% (Table 3)" in text
    shot = (tmp_path / "review.png").read_bytes()
    assert shot[:4] == b"\x89PNG" and len(shot) > 10_000
