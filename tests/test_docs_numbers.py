"""Measured-looking numbers (%, rates, ms, MiB) in the audited pages stand only inside the
results blocks that scripts/sync_results.py fills from docs/results/ (written by the
benchmarks with command, date and machine), never in hand-written prose or tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Pages whose numbers this test audits (the other pages have their own owners and checks).
AUDITED = (
    "README.md",
    "docs/pipeline.md",
    "docs/io.md",
    "docs/dataset.md",
    "docs/evaluation.md",
    "docs/instructions.md",
    "docs/serve.md",
    "docs/architecture.md",
    "docs/review.md",
)
#: A number with a unit that only a measurement gives.
MEASURED = re.compile(r"\d[\d,.]*\s?(%|images?/s|reports?/s|studies/s|requests?/s|req/s|records?/s|ms\b|MiB\b|GiB\b)")
BLOCK = re.compile(r"<!-- results: [A-Za-z0-9_-]+ -->\n.*?<!-- /results -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def measured_numbers_outside_blocks(text: str) -> list[str]:
    """Lines with a measured-looking number outside results blocks and code fences;
    a line that cites the paper ("paper", e.g. "the paper's 28.3% (Table 8)") is allowed."""
    text = FENCE.sub("", BLOCK.sub("", text))
    return [line.strip() for line in text.splitlines() if MEASURED.search(line) and "paper" not in line.lower()]


@pytest.mark.parametrize("page", AUDITED)
def test_no_measured_number_outside_a_results_block(page):
    path = REPO_ROOT / page
    found = measured_numbers_outside_blocks(path.read_text(encoding="utf-8"))
    assert found == [], f"{page}: put these numbers in a results block (benchmarks/results.py):\n" + "\n".join(found)


def test_the_check_can_fail():
    text = (
        "intro\nthe pipeline runs at 8.2 images/s on one core\nrecall about 51%\n"
        "the paper's 28.3% (Table 8) is cited\n<!-- results: x -->\n| 9.1 ms |\n<!-- /results -->\n"
        "```\nprinted 3.4 ms\n```\n"
    )
    assert measured_numbers_outside_blocks(text) == [
        "the pipeline runs at 8.2 images/s on one core",
        "recall about 51%",
    ]
