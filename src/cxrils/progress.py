"""Progress bars that suit both a terminal and a batch job's log file.

tqdm redraws a bar at most every 0.1 s. On a terminal a redraw overwrites the line;
in a log file (stderr redirected, as under ``nohup`` or a cluster scheduler) each
redraw is appended, so a MIMIC-CXR-scale run of ``cxrils generate`` (377,110
images at a few images per second) would write hundreds of thousands of bar states.
:func:`progress_bar` redraws every :data:`LOG_REDRAW_INTERVAL_S` seconds when
stderr is not a terminal, and as tqdm does otherwise.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

#: Seconds between two redraws of a bar written to a file or pipe (ours: a line per
#: half minute keeps a day-long run's log under 3,000 bar states).
LOG_REDRAW_INTERVAL_S = 30.0


def redraw_interval() -> float:
    """Least seconds between two redraws: tqdm's default 0.1 when stderr is a
    terminal, :data:`LOG_REDRAW_INTERVAL_S` otherwise (a closed or missing stderr
    counts as not a terminal)."""
    try:
        tty = sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        tty = False
    return 0.1 if tty else LOG_REDRAW_INTERVAL_S


def progress_bar(*args: Any, **kwargs: Any) -> tqdm:
    """A :class:`tqdm.tqdm` bar (same arguments) whose ``mininterval`` defaults to
    :func:`redraw_interval`, and ``maxinterval`` to at least that (tqdm's monitor
    thread otherwise redraws a slow bar every 10 s); the final state is always drawn
    when the bar closes."""
    kwargs.setdefault("mininterval", redraw_interval())
    kwargs.setdefault("maxinterval", max(10.0, float(kwargs["mininterval"])))
    return tqdm(*args, **kwargs)
