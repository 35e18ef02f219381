"""The ``cxrils`` command line (typer).

Every command lives in this package, one module per command group, each with a
``register(app)`` function; this module only assembles them, by static imports.
Command modules import heavy libraries (torch, transformers...) inside the command
functions so that ``cxrils --help`` stays fast. What they share (the error exit,
``--config``/``--set``) is in :mod:`cxrils.cli.common`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
import typer
from typer.core import TyperGroup

from cxrils import __version__
from cxrils.cli import (
    anatomy,
    evaluate,
    generate,
    ground,
    image_info,
    lesion_train,
    mimic_ils,
    models,
    review,
    serve,
    stats,
    structure,
)
from cxrils.cli.common import fail, load_config_or_fail


class _Commands(TyperGroup):
    """Lists each command with its whole first sentence, wrapped (click cuts it at
    the terminal's width with "...")."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    name="cxrils",
    cls=_Commands,
    help="Instruction-guided lesion segmentation for chest X-rays (MIMIC-ILS / ROSALIA).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help wraps every column; rich's panels cut long option names and
    # defaults with "…" on an 80-column terminal (e.g. predict's --teacher-forced)
    rich_markup_mode=None,
)
config_app = typer.Typer(
    help="Show the effective configuration (paper thresholds, backends); `config show` also checks a --config file "
    "and --set overrides.",
    no_args_is_help=True,
    cls=_Commands,
    rich_markup_mode=None,
)
app.add_typer(config_app, name="config")

#: The command modules, in the order their commands are listed by ``cxrils --help``.
COMMAND_MODULES = (
    image_info,
    structure,
    anatomy,
    lesion_train,
    ground,
    stats,
    mimic_ils,
    evaluate,
    models,
    serve,
    review,
    generate,
)


@app.callback()
def _root(
    ctx: typer.Context, verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")
) -> None:
    from tqdm.contrib.logging import logging_redirect_tqdm

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Log lines go through tqdm.write for the whole command, so that they never share a
    # line with a progress bar (a bar is cleared, the line written, the bar redrawn).
    ctx.with_resource(logging_redirect_tqdm())


@app.command()
def version() -> None:
    """Print the version of cxrils and of its key dependencies."""
    from cxrils.pipeline.provenance import dependency_versions

    typer.echo(f"cxrils {__version__}")
    for dist, found in dependency_versions().items():
        typer.echo(f"  {dist} {found or '(not installed)'}")


@config_app.command("show")
def config_show(
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML configuration file."),
    set_: list[str] = typer.Option([], "--set", help="Override as section.key=value (repeatable)."),
) -> None:
    """Print the effective configuration as TOML (a backend name that no registry knows
    is refused, as ``generate`` would refuse it)."""
    from cxrils.config import dump_toml
    from cxrils.report import LOCATION_MAPPERS, STRUCTURERS
    from cxrils.vision.anatomy.base import BACKENDS as ANATOMY
    from cxrils.vision.anomaly.base import BACKENDS as ANOMALY
    from cxrils.vision.detection.base import BACKENDS as DETECTOR

    cfg = load_config_or_fail(config, set_)
    b = cfg.backends
    for key, registry in (
        ("report_structurer", STRUCTURERS),
        ("location_mapper", LOCATION_MAPPERS),
        ("anatomy", ANATOMY),
        ("anatomy_edit_region", ANATOMY),
        ("anomaly", ANOMALY),
        ("detector", DETECTOR),
    ):
        name = getattr(b, key)
        if (name or key != "anatomy_edit_region") and name not in registry:
            fail(f"backends.{key}: unknown {registry.kind} {name!r}; choose one of {registry.names()}")
    typer.echo(dump_toml(cfg))


for _module in COMMAND_MODULES:
    _module.register(app)


def main() -> None:
    """Entry point of the ``cxrils`` console script."""
    app()
