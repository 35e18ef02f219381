"""The benchmarks: each module prints its measurements and, with ``--publish NAME``,
writes them to ``docs/results/NAME.md`` (the harness: :mod:`benchmarks.results`).

Run them from the repository root as modules, e.g. ``python -m benchmarks.anatomy
--help``; a benchmark imports another as ``from benchmarks.results import publish``.
(pysbd, a dependency, installs a top-level ``benchmarks`` package of its own: run from
the repository root, where this folder comes first on ``sys.path``.)
"""
