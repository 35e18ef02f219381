"""The benchmarks' harness: one argument convention, and publishing a benchmark's printed
table as ``docs/results/<name>.md``.

Every benchmark is a module of the ``benchmarks`` package, run from the repository root
as ``python -m benchmarks.NAME`` (``python -m benchmarks.NAME --help`` lists its options).
They share these options (:func:`benchmark_parser`):

``--publish NAME``
    Also write the printed text to ``docs/results/NAME.md`` (every benchmark; without
    it nothing is written). A benchmark that prints more than one page writes
    ``NAME_PART.md`` for each (``generate``: ``NAME_speed.md`` and ``NAME_summary.md``).
``--data DIR``
    The shared data folder, default ``../shared/data`` beside the checkout
    (:data:`DEFAULT_DATA`), where a benchmark reads it.
``--threads N``
    Torch threads, where a benchmark lets them vary (others pin their own count, which
    is part of what they measure).

Every number that README, docs or a model card quotes comes from one of these files:
a benchmark prints its table and, with ``--publish``, :func:`publish` writes the same
text under a header with the command that made it, the date, the machine and the
commit. It refuses to write when tracked code differs from the commit (the header must
name the code that printed the numbers) or when the text names an absolute path of
this machine (:func:`machine_paths`; paths in the command are rewritten relative to the
repository root). Documents embed a results file between markers, and
``python scripts/sync_results.py`` copies the file in::

    <!-- results: anatomy -->
    (generated text, do not edit)
    <!-- /results -->

``tests/test_docs_results.py`` fails when an embedded copy differs from its file or
names a file that does not exist, so a stale number cannot stay in the docs.

Use from a benchmark::

    from benchmarks.results import benchmark_parser, publish_if_asked

    ap = benchmark_parser(__doc__.splitlines()[0], data=True, page="anatomy")
    args = ap.parse_args()
    ...
    print(text)
    publish_if_asked(args, text)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: The repository root (benchmarks run from here: ``python -m benchmarks.NAME``).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: Folder of the published results, relative to the repository root.
RESULTS_DIR = REPO_ROOT / "docs" / "results"
#: Default of ``--data``: the shared data folder beside the checkout (``../shared/data``).
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
#: Tracked paths a benchmark run may leave changed without changing the code that ran:
#: the results themselves, the pages they are synced into, and the model cards.
RESULT_PAGES = re.compile(r"^(docs/|README\.md$|src/cxrils/weights/[^/]+\.md$)")
#: An absolute path inside a command-line token (after the start, "=", ":" or ",").
_ABSOLUTE = re.compile(r"(?:(?<=^)|(?<=[=:,]))/[^\s=:,]+")
#: A token of text starting with "/" (at the start, after a space, a bracket, a quote or
#: "=", ",", ":", ";", "|"), its first component captured.
_ROOTED = re.compile(r"""(?<![^\s(\[{<`'"=,:;|])/([\w.+@-]+)[^\s`'"|()<>\[\]{},;]*""")


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


def benchmark_parser(
    description: str | None = None,
    *,
    data: bool = False,
    threads: int | None = None,
    page: str | None = None,
    parts: tuple[str, ...] = (),
    formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter,
) -> argparse.ArgumentParser:
    """An argument parser with the harness's options (module docstring).

    Parameters
    ----------
    description : str, optional
        The ``--help`` text above the options.
    data : bool
        Add ``--data DIR`` (a Path, default :data:`DEFAULT_DATA`).
    threads : int, optional
        Add ``--threads N`` with this default (apply it with :func:`apply_threads`).
    page : str, optional
        The results name the docs quote this benchmark under (``--publish page``),
        named in the help of ``--publish``; every parser has ``--publish NAME``.
    parts : tuple of str
        For a benchmark that prints several pages: their parts, written as
        ``NAME_PART.md`` (:func:`publish_if_asked` with a mapping).
    formatter_class : type
        As for :class:`argparse.ArgumentParser`.
    """
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    prog = f"python -m {spec.name}" if spec is not None and spec.name.startswith("benchmarks.") else None
    ap = argparse.ArgumentParser(prog=prog, description=description, formatter_class=formatter_class)
    if data:
        ap.add_argument(
            "--data",
            type=Path,
            default=DEFAULT_DATA,
            metavar="DIR",
            help="the shared data folder (default: ../shared/data beside the checkout)",
        )
    if threads is not None:
        ap.add_argument("--threads", type=int, default=threads, metavar="N", help=f"torch threads (default {threads})")
    files = " and ".join(f"NAME_{part}.md" for part in parts) if parts else "NAME.md"
    quoted = f"; the docs quote --publish {page}" if page else ""
    ap.add_argument(
        "--publish",
        metavar="NAME",
        default=None,
        help=f"also write the printed results to docs/results/{files}{quoted}",
    )
    return ap


def apply_threads(args: argparse.Namespace) -> None:
    """``torch.set_num_threads(args.threads)`` (the ``--threads`` of :func:`benchmark_parser`)."""
    import torch

    torch.set_num_threads(args.threads)


def publish_if_asked(args: argparse.Namespace, body: str | Mapping[str, str]) -> list[Path]:
    """With ``--publish NAME``: :func:`publish` ``body`` as ``NAME``, or each page of a
    mapping ``{part: text}`` as ``NAME_part``; without it nothing. Returns the files written."""
    name = args.publish
    if not name:
        return []
    if isinstance(body, str):
        return [publish(name, body)]
    return [publish(f"{name}_{part}", text) for part, text in body.items()]


def invocation(argv: list[str] | None = None) -> list[str]:
    """This process's command line after ``python``: ``["-m", "benchmarks.NAME", *args]``
    when it runs a module (``python -m``), else ``argv`` (script and arguments)."""
    argv = list(sys.argv if argv is None else argv)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name and not spec.name.endswith("__main__"):
        return ["-m", spec.name, *argv[1:]]
    return argv


def portable_command(argv: list[str], root: Path) -> str:
    """The command line ``python ARGV`` with every absolute path written relative to the
    repository root ``root`` (``/work/shared/data`` -> ``../shared/data``), so a results
    header never holds a machine's own folders."""

    def rel(match: re.Match[str]) -> str:
        return os.path.relpath(match.group(0), root)

    return "python " + shlex.join(_ABSOLUTE.sub(rel, arg) for arg in argv)


def machine_paths(text: str) -> list[str]:
    """Absolute paths of this machine that ``text`` names, in order.

    A token starting with ``/`` counts when its first component is a folder at this
    machine's root (``/work/shared/data``, ``/tmp/x``, ``/home/...``), so the path part of
    a URL (``POST /v1/segment``) and fractions (``3/4``, ``µs/char``) do not. A results
    page must not hold them: they say nothing on another machine and can name a person.
    """
    return [m.group(0) for m in _ROOTED.finditer(text) if os.path.isdir("/" + m.group(1))]


def uncommitted_code(root: Path) -> list[str]:
    """Tracked files outside :data:`RESULT_PAGES` that differ from ``HEAD`` (empty when
    the code that runs is the commit the header names, or outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    changed = [line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip()]
    return [path for path in changed if not RESULT_PAGES.match(path)]


def _code_version() -> str:
    root = REPO_ROOT
    try:
        import cxrils

        version = cxrils.__version__
    except Exception:  # noqa: BLE001 - the header must never stop a benchmark
        version = "?"
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
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
        The command that ran; default: this process's ``python`` command line
        (``python -m benchmarks.NAME ...``, :func:`invocation`), absolute paths in it
        written relative to the repository root.

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
        must name the code that printed it, so commit first. Or if the header or
        ``body`` names an absolute path of this machine (:func:`machine_paths`).
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"results name {name!r}: use letters, digits, '-' and '_'")
    root = REPO_ROOT
    changed = uncommitted_code(root)
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise SystemExit(
            f"not publishing docs/results/{name}.md: the code differs from its commit ({shown}); "
            "commit, then rerun, so the header names the code that printed the numbers"
        )
    if command is None:
        command = portable_command(invocation(), root)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = f"Printed by `{command}` on {when}; {machine_description()}; {_code_version()}.\n"
    text = header + "\n" + body.strip() + "\n"
    paths = machine_paths(text)
    if paths:
        shown = ", ".join(dict.fromkeys(paths[:5]))
        raise SystemExit(
            f"not publishing docs/results/{name}.md: the text names absolute paths of this machine "
            f"({shown}); print them relative to the repository (or as a file name)"
        )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    print(f"results written to {path.relative_to(RESULTS_DIR.parents[1])}")
    return path
