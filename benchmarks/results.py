"""Publish a benchmark's printed table as ``docs/results/<name>.md``.

Every number that README, docs or a model card quotes comes from one of these files:
a benchmark prints its table and calls :func:`publish`, which writes the same text with
the command that made it, the date and the machine. Documents embed a results file
between markers, and ``python scripts/sync_results.py`` copies the file in::

    <!-- results: anatomy -->
    (generated text, do not edit)
    <!-- /results -->

``tests/test_docs_results.py`` fails when an embedded copy differs from its file or
names a file that does not exist, so a stale number cannot stay in the docs.

Use from a benchmark (run as ``python benchmarks/NAME.py``, so this folder is on
``sys.path``)::

    from results import publish
    publish("anatomy", table_markdown)
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

#: Folder of the published results, relative to the repository root.
RESULTS_DIR = Path(__file__).resolve().parents[1] / "docs" / "results"
#: Tracked paths a benchmark run may leave changed without changing the code that ran:
#: the results themselves, the pages they are synced into, and the model cards.
RESULT_PAGES = re.compile(r"^(docs/|README\.md$|src/cxrils/weights/[^/]+\.md$)")
#: An absolute path inside a command-line token (after the start, "=", ":" or ",").
_ABSOLUTE = re.compile(r"(?:(?<=^)|(?<=[=:,]))/[^\s=:,]+")


def machine_description() -> str:
    """One line naming the machine: OS, CPU model, logical CPUs, 1-minute load average."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
        load_txt = f", load {load:.1f}"
    except OSError:
        load_txt = ""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}){load_txt}, no GPU used"


def portable_command(argv: list[str], root: Path) -> str:
    """The command line ``python ARGV`` with every absolute path written relative to the
    repository root ``root`` (``/work/shared/data`` -> ``../shared/data``), so a results
    header never holds a machine's own folders."""
    def rel(match: re.Match[str]) -> str:
        return os.path.relpath(match.group(0), root)
    return "python " + shlex.join(_ABSOLUTE.sub(rel, arg) for arg in argv)


def uncommitted_code(root: Path) -> list[str]:
    """Tracked files outside :data:`RESULT_PAGES` that differ from ``HEAD`` (empty when
    the code that runs is the commit the header names, or outside a git checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True, check=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    changed = [line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip()]
    return [path for path in changed if not RESULT_PAGES.match(path)]


def _code_version() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        import cxrils

        version = cxrils.__version__
    except Exception:  # noqa: BLE001 - the header must never stop a benchmark
        version = "?"
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        # results pages and cards an earlier benchmark just wrote are not code
        commit += "+changes" if uncommitted_code(root) else ""
    except (OSError, subprocess.SubprocessError):
        commit = "unknown commit"
    return f"cxrils {version} at {commit}"


def publish(name: str, body: str, command: str | None = None) -> Path:
    """Write ``docs/results/<name>.md``: a provenance header, then ``body``.

    Parameters
    ----------
    name : str
        File stem, letters, digits, ``-`` and ``_`` (e.g. ``"anatomy"``).
    body : str
        Markdown the benchmark printed (tables, short lines), without a header.
    command : str, optional
        The command that ran; default: this process's ``python`` command line,
        with the script path relative to the repository root.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ValueError
        If ``name`` holds other characters.
    SystemExit
        If tracked code differs from the commit (:func:`uncommitted_code`): a result
        must name the code that printed it, so commit first.
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"results name {name!r}: use letters, digits, '-' and '_'")
    root = Path(__file__).resolve().parents[1]
    changed = uncommitted_code(root)
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise SystemExit(f"not publishing docs/results/{name}.md: the code differs from its commit ({shown}); "
                         "commit, then rerun, so the header names the code that printed the numbers")
    if command is None:
        argv = list(sys.argv)
        try:
            argv[0] = str(Path(argv[0]).resolve().relative_to(root))
        except ValueError:
            pass
        command = portable_command(argv, root)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"Printed by `{command}` on {when}; {machine_description()}; {_code_version()}.\n")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(header + "\n" + body.strip() + "\n", encoding="utf-8")
    tmp.replace(path)
    print(f"results written to {path.relative_to(RESULTS_DIR.parents[1])}")
    return path
