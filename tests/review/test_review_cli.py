"""``cxrils review`` and ``cxrils review-stats`` on the command line: output, HTML,
the accepted subset, and one-line errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cxrils.cli import app
from cxrils.review import open_review


def _one_line_error(res) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output
    return lines[0]


def test_review_stats_prints_writes_html_and_exports(dataset, tmp_path):
    r = open_review(dataset)
    for i in range(6):
        r.store.decide(
            "ann", r.record(i)["record_id"], "accept" if i != 2 else "reject", None if i != 2 else "wrong_side"
        )
        r.store.decide("bob", r.record(i)["record_id"], "accept")
    r.close()
    out = tmp_path / "acc"
    res = CliRunner().invoke(app, ["review-stats", str(dataset), "--export-accepted", str(out)])
    assert res.exit_code == 0, res.output
    assert "6 accepted or rejected" in res.output and "83.3% [43.6-97.0]" in res.output  # 5 of 6
    assert "Cohen's kappa" in res.output and "96.4% of 10,701" in res.output
    assert (dataset / "review-stats.html").read_text().count("<table>") >= 8
    assert "accepted: 5 records" in res.output
    assert json.loads((out / "cxrils" / "manifest.json").read_text())["n_records"] == 5
    assert (out / "mimic-ils" / "mimic_ils_instruction_answer.json").is_file()
    res = CliRunner().invoke(app, ["review-stats", str(dataset), "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 0 and (tmp_path / "r.html").is_file()


def test_errors_are_one_line(dataset, tmp_path):
    runner = CliRunner()
    line = _one_line_error(runner.invoke(app, ["review-stats", str(dataset)]))
    assert "no review of this dataset yet" in line and "cxrils review" in line
    line = _one_line_error(runner.invoke(app, ["review", str(tmp_path / "nowhere")]))
    assert "no such dataset folder" in line
    line = _one_line_error(runner.invoke(app, ["review", str(dataset), "--host", "0.0.0.0", "--token", "short"]))
    assert "16 characters" in line
    line = _one_line_error(
        runner.invoke(app, ["review", str(dataset), "--host", "0.0.0.0", "--token", "a token with spaces & more"])
    )
    assert "a letter, a digit or one of" in line  # it must travel in the printed ?token= address as it is
    res = runner.invoke(app, ["review", str(dataset), "--port", "70000"])
    assert res.exit_code == 2 and "Traceback" not in res.output and "65535" in res.output
    line = _one_line_error(runner.invoke(app, ["review", str(dataset), "--margin", "0.9"]))
    assert "margin" in line
    assert not (dataset / "review.sqlite").exists()  # a plan that cannot be drawn leaves no database
    from cxrils.review import ReviewStore

    ReviewStore(dataset / "review.sqlite").close()  # as an older start that failed left it: no sample
    line = _one_line_error(runner.invoke(app, ["review-stats", str(dataset)]))
    assert "no review sample drawn yet" in line
    open_review(dataset).close()  # the default plan is stored
    line = _one_line_error(runner.invoke(app, ["review", str(dataset), "--n", "3"]))
    assert "planned with" in line and "move review.sqlite away" in line


def test_review_stats_never_exports_over_the_dataset(dataset, tmp_path):
    r = open_review(dataset)
    r.store.decide("ann", r.record(0)["record_id"], "accept")
    r.close()
    runner = CliRunner()
    for out in (dataset, dataset.parent):
        line = _one_line_error(runner.invoke(app, ["review-stats", str(dataset), "--export-accepted", str(out)]))
        assert "outside the reviewed dataset" in line
    assert (dataset / "manifest.json").is_file() and (dataset / "review.sqlite").is_file()
    r = open_review(dataset)
    assert r.store.n_rows() == 1
    r.close()


def test_a_port_in_use_is_one_line_before_the_address_to_open(dataset):
    # new-user trial of `cxrils serve` (the same server start): a busy port printed where
    # to open the page, then uvicorn's bind error
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        res = CliRunner().invoke(app, ["review", str(dataset), "--port", str(port)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"]
