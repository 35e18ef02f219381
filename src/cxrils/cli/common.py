"""What every ``cxrils`` command shares: the error exit and the ``--config``/``--set`` reading.

An error is one line on stderr, ``error: <what and where>``, and exit status 2 (typer's
usage-error status), never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from cxrils.config import Config

__all__ = ["check_listen", "fail", "load_config_or_fail", "resumable", "split_or_all"]


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with status 2.

    Raises
    ------
    typer.Exit
        Always, with code 2.
    """
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@contextmanager
def resumable(kept: str) -> Iterator[None]:
    """Ctrl-C (SIGINT) inside the block prints ``interrupted: <kept> is kept; rerun the
    same command to go on`` on stderr and exits with status 130, as the shell's own
    interrupted status (a trial: typer exited 130 without a word). For the commands that
    resume: ``kept`` says what of the run survives.

    Raises
    ------
    typer.Exit
        Code 130, on KeyboardInterrupt.
    """
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: {kept} is kept; rerun the same command to go on", err=True)
        raise typer.Exit(130) from None


def load_config_or_fail(config: Path | None, overrides: Sequence[str]) -> Config:
    """:func:`cxrils.config.load_config` of a ``--config`` file and ``--set`` overrides
    (``section.key=value``), or :func:`fail` with the reason it gives (the file and the key)."""
    from cxrils.config import ConfigError, load_config

    try:
        return load_config(config, list(overrides))
    except ConfigError as err:
        fail(str(err))


def out_folder_or_fail(out: Path, holds: str = "") -> None:
    """Fail with a one-line error (:func:`fail`) when ``-o`` names an existing file: it
    names an output folder (``holds``: what is written into it, for the message)."""
    if out.exists() and not out.is_dir():
        fail(f"{out}: exists and is not a folder; -o names the output folder" + (f" ({holds})" if holds else ""))


def split_or_all(value: str) -> str | None:
    """A ``--split`` option that takes every record with ``all``: the split name
    (:func:`cxrils.vocab.normalize_split`, aliases such as ``val`` read), or None for
    ``all``; any other word is :func:`fail` naming the choices, ``all`` among them."""
    from cxrils.vocab import SplitError, split_filter

    try:
        return split_filter(value)
    except SplitError as err:
        fail(str(err))


def require_prediction_suffix(out: Path, what: str = "predictions") -> None:
    """Exit with a clear error unless ``out`` ends in one of
    :data:`cxrils.evaluation.io.PREDICTION_SUFFIXES`."""
    from cxrils.evaluation.io import PREDICTION_SUFFIXES

    if out.suffix not in PREDICTION_SUFFIXES:
        fail(f"{out}: {what} must end in {' or '.join(PREDICTION_SUFFIXES)}")


def check_listen(host: str, port: int) -> None:
    """Check, before a web server starts, that it can listen at ``host:port``: open, then
    close, the server asyncio would open for uvicorn there (every address ``host``
    resolves to, "" for all interfaces, skipping what asyncio skips).

    Raises
    ------
    typer.Exit
        With one line (:func:`fail`) when the host does not resolve or cannot be bound
        (a port in use, not an address of this machine, a privileged port).
    """
    import asyncio

    async def probe() -> None:
        server = await asyncio.get_running_loop().create_server(
            asyncio.Protocol, host=host, port=port, start_serving=False
        )
        server.close()
        await server.wait_closed()

    where = f"all interfaces, port {port}" if not host else f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        asyncio.run(probe())
    except (OSError, UnicodeError) as err:  # UnicodeError: a malformed name ("a..b")
        errno = getattr(err, "errno", None)
        fail(
            f"cannot listen on {where}: {os.strerror(errno) if errno and errno > 0 else getattr(err, 'strerror', None) or err}"
        )
