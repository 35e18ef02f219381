"""The ``cxrils`` command line (typer).

Each pipeline stage keeps its commands in its own ``cli.py`` with a
``register(app)`` function; this module only assembles them. Command modules
import heavy libraries (torch, transformers...) inside the command functions so
that ``cxrils --help`` stays fast.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import List, Optional

import typer

from cxrils import __version__

app = typer.Typer(
    name="cxrils",
    help="Instruction-guided lesion segmentation for chest X-rays (MIMIC-ILS / ROSALIA).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Show or check the configuration (paper thresholds, backends).", no_args_is_help=True)
app.add_typer(config_app, name="config")

#: Stage modules that contribute commands through ``register(app)``.
COMMAND_MODULES: tuple[str, ...] = (
    "cxrils.io.cli",
    "cxrils.report.cli",
    "cxrils.vision.anatomy.cli",
    "cxrils.training.lesion_cli",
    "cxrils.pipeline.ground_cli",
    "cxrils.dataset.cli",
    "cxrils.dataset.mimic_ils.cli",
    "cxrils.evaluation.cli",
    "cxrils.models.cli",
    "cxrils.serve.cli",
    "cxrils.review.cli",
    "cxrils.pipeline.cli",
)


@app.callback()
def _root(ctx: typer.Context,
          verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")) -> None:
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
    from importlib import metadata

    typer.echo(f"cxrils {__version__}")
    for dist in ("numpy", "torch", "pydicom", "pycocotools", "pillow", "scikit-image", "monai",
                 "transformers", "peft", "diffusers", "onnxruntime", "ray", "fastapi"):
        try:
            typer.echo(f"  {dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            typer.echo(f"  {dist} (not installed)")


@config_app.command("show")
def config_show(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="TOML configuration file."),
    set_: List[str] = typer.Option([], "--set", help="Override as section.key=value (repeatable)."),
) -> None:
    """Print the effective configuration as TOML."""
    from cxrils.config import ConfigError, dump_toml, load_config

    try:
        cfg = load_config(config, set_)
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    typer.echo(dump_toml(cfg))


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    """Entry point of the ``cxrils`` console script."""
    app()
