"""The DICOM reader over pydicom's own test files: how many it reads, and why it refuses
the others.

pydicom ships its test files with the package (``pydicom.data.get_testdata_files()``;
those of the separate ``pydicom-data`` package are used only when it is installed, this
script never downloads). Each file goes through :func:`cxrils.io.load_image`; a refusal is
an :class:`cxrils.io.ImageLoadError` whose reason is grouped by its kind (the text before
the first detail: the element or property it names).

Prints the counts (read / refused by reason) and, with ``--show``, each refused file with
its message. ``tests/test_io_pydicom_files.py`` checks the messages themselves.

Run: ``nice -n 10 python -m benchmarks.pydicom_files [--show] [--publish pydicom_files]`` (single process);
``--publish pydicom_files`` writes ``docs/results/pydicom_files.md`` (``benchmarks/results.py``).
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from pathlib import Path

from benchmarks.results import benchmark_parser, publish_if_asked
from cxrils.io import ImageLoadError, load_image

#: Patterns that turn a refusal reason into its kind (first match wins; else the reason
#: up to its first ":" or "(").
KINDS = (
    (re.compile(r"^multi-frame"), "multi-frame DICOM"),
    (re.compile(r"^DICOM file has no Pixel Data"), "no Pixel Data (not an image object)"),
    (re.compile(r"^unsupported Photometric Interpretation"), "unsupported Photometric Interpretation"),
    (re.compile(r"no decoder for it is installed|has no pixel-data decoder"), "no decoder for the transfer syntax"),
    (re.compile(r"^cannot decode pixel data"), "pixel data fails to decode"),
    (re.compile(r"^the DICOM header lacks|^the DICOM header has no|malformed"), "missing or malformed element"),
    (re.compile(r"^not a DICOM file|^cannot read DICOM header"), "not a readable DICOM file"),
    (re.compile(r"Patient Orientation"), "Patient Orientation"),
    (re.compile(r"^expected"), "pixel data of an unsupported shape or type"),
)


def kind(reason: str) -> str:
    """The group of a refusal reason (:data:`KINDS`)."""
    for pattern, name in KINDS:
        if pattern.search(reason):
            return name
    return re.split(r"[:(]", reason, maxsplit=1)[0].strip()


def run(paths: list[Path]) -> tuple[int, dict[str, list[tuple[Path, str]]]]:
    """Load every file; return the number read and the refusals by kind (path, message)."""
    read, refused = 0, {}
    for p in paths:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pydicom warns about many of its own odd files
                load_image(p)
            read += 1
        except ImageLoadError as err:
            refused.setdefault(kind(err.reason), []).append((p, str(err)))
    return read, refused


def sample_files() -> list[Path]:
    """pydicom's test files present on this machine (no download; folders left out)."""
    from pydicom.data import get_testdata_files

    return sorted(Path(p) for p in get_testdata_files() if Path(p).is_file())


def main() -> None:
    parser = benchmark_parser(__doc__.splitlines()[0], page="pydicom_files")
    parser.add_argument("--show", action="store_true", help="print each refused file and its message")
    args = parser.parse_args()
    import pydicom

    paths = sample_files()
    read, refused = run(paths)
    counts = Counter({k: len(v) for k, v in refused.items()})
    lines = [
        f"pydicom {pydicom.__version__}: {len(paths)} test files; read {read}, refused {sum(counts.values())}.",
        "",
        "| refused because | files |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {n} |" for k, n in counts.most_common()]
    body = "\n".join(lines)
    print(body)
    if args.show:
        for k, items in sorted(refused.items()):
            print(f"\n## {k}")
            for _, message in items:
                print(message)
    publish_if_asked(args, body)


if __name__ == "__main__":
    main()
