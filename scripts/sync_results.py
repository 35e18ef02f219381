"""Copy ``docs/results/*.md`` into the marked blocks of README, docs and model cards.

A block looks like::

    <!-- results: NAME -->
    ...
    <!-- /results -->

and is replaced by the text of ``docs/results/NAME.md``. ``--check`` changes nothing and
exits 1 listing each block that differs from its file or names a missing file (used by
``tests/test_docs_results.py``).

Usage: ``python scripts/sync_results.py [--check]``
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
BLOCK = re.compile(r"(<!-- results: ([A-Za-z0-9_-]+) -->\n)(.*?)(<!-- /results -->)", re.S)


def documents() -> list[Path]:
    """README, every docs page (not the results themselves) and the weights' model cards."""
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if RESULTS not in p.parents]
    return [ROOT / "README.md", *docs, *sorted((ROOT / "src" / "cxrils" / "weights").rglob("*.md"))]


def sync(check: bool) -> list[str]:
    """Update (or, with ``check``, only compare) every block; return the problems found."""
    problems: list[str] = []
    for doc in documents():
        if not doc.is_file():
            continue
        text = doc.read_text(encoding="utf-8")

        def replace(m: re.Match[str]) -> str:
            name = m.group(2)
            src = RESULTS / f"{name}.md"
            if not src.is_file():
                problems.append(f"{doc.relative_to(ROOT)}: block '{name}' names missing {src.relative_to(ROOT)}")
                return m.group(0)
            want = src.read_text(encoding="utf-8")
            if not want.endswith("\n"):
                want += "\n"
            if m.group(3) != want:
                problems.append(f"{doc.relative_to(ROOT)}: block '{name}' differs from {src.relative_to(ROOT)}")
            return m.group(1) + want + m.group(4)

        new = BLOCK.sub(replace, text)
        if not check and new != text:
            doc.write_text(new, encoding="utf-8")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a stale block")
    args = parser.parse_args()
    problems = sync(check=args.check)
    missing = [p for p in problems if "missing" in p]
    for p in problems if args.check else missing:
        print(p, file=sys.stderr)
    if args.check and problems:
        print("run: python scripts/sync_results.py (after the benchmarks that wrote docs/results/)", file=sys.stderr)
    return 1 if (problems if args.check else missing) else 0


if __name__ == "__main__":
    sys.exit(main())
