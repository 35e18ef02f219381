"""Progress bars in a log file (cxrils.progress): few redraws when stderr is not a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from cxrils.progress import LOG_REDRAW_INTERVAL_S, progress_bar, redraw_interval

_LOOP = (
    "import sys, time\n"
    "from cxrils.progress import progress_bar\n"
    "bar = progress_bar(total=40, desc='work', file=sys.stderr)\n"
    "for _ in range(40):\n"
    "    time.sleep(0.02)\n"
    "    bar.update(1)\n"
    "bar.close()\n"
)


def _bar_states(stderr: str) -> list[str]:
    return [seg for line in stderr.splitlines() for seg in line.split("\r") if "work:" in seg]


def test_a_bar_written_to_a_file_is_drawn_at_start_and_end_only():
    # 40 updates over about 0.8 s: tqdm's 0.1 s default would draw several in between
    res = subprocess.run([sys.executable, "-c", _LOOP], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    states = _bar_states(res.stderr)
    assert len(states) == 2, states
    assert "0/40" in states[0] and "40/40" in states[-1]


def test_a_terminal_keeps_tqdm_default_interval(monkeypatch):
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            monkeypatch.setattr(sys, "stderr", tty)
            assert redraw_interval() == 0.1
            bar = progress_bar(total=1, file=tty)
            assert bar.mininterval == 0.1
            bar.close()
    finally:
        os.close(master)


def test_a_file_or_missing_stderr_gets_the_log_interval(monkeypatch, tmp_path):
    with open(tmp_path / "log.txt", "w") as fh:
        monkeypatch.setattr(sys, "stderr", fh)
        assert redraw_interval() == LOG_REDRAW_INTERVAL_S
        # review (stop 59): tqdm's monitor thread redrew every maxinterval (10 s) regardless
        bar = progress_bar(total=1, file=fh)
        assert bar.mininterval == bar.maxinterval == LOG_REDRAW_INTERVAL_S
        bar.close()
    monkeypatch.setattr(sys, "stderr", None)
    assert redraw_interval() == LOG_REDRAW_INTERVAL_S
    # an explicit interval wins
    bar = progress_bar(total=1, mininterval=2.0, file=io.StringIO())
    assert bar.mininterval == 2.0
    bar.close()


def test_no_bar_in_the_package_forces_a_redraw():
    # a new user's trial (stop 62): the light trainer's set_postfix(loss=...) redrew the
    # bar at every step, 6,000 bar states in the log of a 6,000-step run
    import pathlib
    import re

    import cxrils

    calls = [
        (path.name, call)
        for path in pathlib.Path(cxrils.__file__).parent.rglob("*.py")
        for call in re.findall(r"\.(?:set_postfix|set_description|set_postfix_str)\([^\n]*", path.read_text())
    ]
    assert calls  # the trainers and the importer show their state
    assert [c for c in calls if "refresh=False" not in c[1]] == []
