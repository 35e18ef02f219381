"""``cxrils image-info``: load one image as the pipeline would and show what was done."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cxrils.cli.common import fail


def image_info(
    path: Path = typer.Argument(..., help="DICOM, PNG, JPEG, TIFF or BMP file."),
    save: Path | None = typer.Option(None, "--save", help="Also write the 8-bit image as this PNG."),
    max_pixels: int | None = typer.Option(
        None, "--max-pixels", min=1, help="Pixel limit (default: io.max_pixels of the config)."
    ),
    voi: str = typer.Option("auto", "--voi", help="DICOM VOI (io.voi): auto | lut[:K] | window[:K] | minmax."),
) -> None:
    """Load an image as the pipeline does and print its metadata and transforms as JSON."""
    from PIL import Image

    from cxrils.fsutil import atomic_path
    from cxrils.io import ImageLoadError, load_image

    if save is not None and save.suffix.lower() != ".png":
        fail(f"{save}: --save writes a PNG; give a file name ending in .png")
    try:
        img = load_image(path, max_pixels=max_pixels, voi=voi)
    except (ImageLoadError, ValueError) as err:
        fail(str(err))
    info = {"shape": list(img.pixels.shape), **img.meta.to_dict()}
    if save is not None:
        try:
            with atomic_path(save, suffix=".png") as tmp:
                Image.fromarray(img.pixels).save(tmp, format="PNG")
        except OSError as err:
            typer.echo(f"error: {save}: cannot write: {err}", err=True)
            raise typer.Exit(2) from err
        info["saved"] = str(save)
    typer.echo(json.dumps(info, indent=2))


def register(app: typer.Typer) -> None:
    """Add the image-loading commands to the ``cxrils`` app."""
    app.command("image-info")(image_info)
