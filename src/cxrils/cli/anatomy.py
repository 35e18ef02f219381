"""Commands ``cxrils anatomy`` and ``cxrils train-anatomy``."""

from __future__ import annotations

from pathlib import Path

import typer

from cxrils.cli.common import fail, load_config_or_fail, out_folder_or_fail

#: Image suffixes ``cxrils anatomy`` reads from a folder.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".tif", ".tiff", ".bmp")


def _inputs(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        fail(f"{path}: no such file or folder")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        fail(f"{path}: no {'/'.join(IMAGE_SUFFIXES)} images in this folder")
    stems: dict[str, Path] = {}
    for p in files:
        if p.stem in stems:
            fail(f"{p} and {stems[p.stem]} share the stem {p.stem!r}: output folders would collide")
        stems[p.stem] = p
    return files


def anatomy(
    input_path: Path = typer.Argument(..., metavar="INPUT", help="An image (PNG, JPEG or DICOM) or a folder of them."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output folder (one subfolder per image)."),
    backend: str | None = typer.Option(None, "--backend", "-b", help="builtin | cxas | hybridgnet (default: config)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML configuration file."),
    set_: list[str] = typer.Option([], "--set", help="Override as section.key=value (repeatable)."),
) -> None:
    """Segment lungs, heart, lung zones and lobes; write masks, an overlay and the CTR.

    For each image: OUT/<stem>/overlay.png, one 0/255 PNG per label (spaces ->
    underscores, e.g. right_lung.png, left_lung_base.png) and anatomy.json with the
    cardiothoracic ratio and provenance. "right"/"left" are the patient's sides. The
    label PNGs lie on the input as stored (a DICOM's Rows x Columns, whatever its
    Patient Orientation; anatomy.json: "frame": "source" and "display_ops"); the
    overlay is turned for reading (the patient's right on the image's left).
    """
    from cxrils import __version__
    from cxrils.io import ImageLoadError, load_image
    from cxrils.io.base import source_frame_record
    from cxrils.progress import progress_bar
    from cxrils.vision.anatomy.base import AnatomyBackendError, get_segmenter
    from cxrils.vision.anatomy.measures import cardiothoracic_ratio, frontal_plausibility, implausible_ctr
    from cxrils.vision.anatomy.render import write_outputs

    cfg = load_config_or_fail(config, set_)
    out_folder_or_fail(out_dir)
    files = _inputs(input_path)
    name = backend or cfg.backends.anatomy
    try:
        segmenter = get_segmenter(name, cfg)
    except AnatomyBackendError as err:
        fail(str(err))
    failed = 0
    for path in progress_bar(files, desc="anatomy", unit="image", disable=len(files) < 2):
        try:
            loaded = load_image(path, max_pixels=cfg.io.max_pixels)
        except ImageLoadError as err:
            typer.echo(f"error: {err}", err=True)
            failed += 1
            continue
        x = loaded.pixels
        masks = segmenter.segment(x)
        try:
            ctr, ctr_note = cardiothoracic_ratio(masks), None
        except ValueError as err:
            ctr, ctr_note = None, str(err)
        qc = cfg.qc
        bad_ctr = None if ctr is None else implausible_ctr(ctr, qc)
        if bad_ctr is not None:
            ctr_note = f"{bad_ctr} (qc.ctr_plausible_min/max): a failed heart or lung mask, not a heart size"
        implausible = frontal_plausibility(masks, qc)
        if implausible is not None:
            typer.echo(f"warning: {path}: does not look like a frontal chest radiograph ({implausible})", err=True)
        info = {
            "image": str(path),
            # the mask PNGs lie on the source file as a viewer shows it; the overlay is turned
            **source_frame_record(loaded.meta),
            "ctr": ctr,
            "ctr_note": ctr_note,
            "frontal_plausibility": implausible,
            "ctr_max_cardiomegaly_negative": qc.ctr_max_cardiomegaly_negative,
            "cardiomegaly_negative_allowed": ctr_note is None
            and implausible is None
            and ctr is not None
            and ctr <= qc.ctr_max_cardiomegaly_negative,
            "provenance": {
                "backend": masks.backend,
                "version": masks.version,
                "cxrils": __version__,
                "anatomy_config": cfg.to_dict()["anatomy"],
            },
        }
        write_outputs(out_dir / path.stem, x, masks, info, meta=loaded.meta)
    typer.echo(f"{len(files) - failed} of {len(files)} images segmented into {out_dir}")
    if failed:
        raise typer.Exit(1)


def train_anatomy(
    data: Path = typer.Option(
        Path("../shared/data"), "--data", help="Folder with jsrt_scr/, covid_ieee8023/ and covid_qu_ex/."
    ),
    out: Path = typer.Option(Path("anatomy_builtin.safetensors"), "--out", "-o", help="Weights file to write."),
    epochs: int = typer.Option(20, help="Most training epochs."),
    covid_per_epoch: int = typer.Option(120, help="COVID-19 v7labs images drawn per epoch (all JSRT images are used)."),
    qu_ex_per_epoch: int = typer.Option(240, help="COVID-QU-Ex images drawn per epoch."),
    seed: int = typer.Option(0, help="Random seed."),
    threads: int = typer.Option(1, min=1, help="torch CPU threads."),
    val_percent: int = typer.Option(10, help="Percent of training patients held out to pick the best epoch."),
    init: Path | None = typer.Option(None, help="Builtin weights to fine-tune from (their architecture is used)."),
    lr: float = typer.Option(3e-3, help="Peak learning rate of the one-cycle schedule."),
    max_minutes: float | None = typer.Option(
        None, help="Wall-clock budget: the LR anneals within it, training stops when it is used."
    ),
    channels: str | None = typer.Option(
        None,
        help="U-Net widths from scratch, comma-separated (default: the shipped 12,24,48,96,192); ignored with --init.",
    ),
) -> None:
    """Train the builtin anatomy network on the public JSRT/SCR, COVID-19 and COVID-QU-Ex masks.

    Uses only the 'train' part of the fixed patient-level split (docs/anatomy.md).
    """
    from cxrils.training.anatomy_train import train_anatomy as run
    from cxrils.vision.anatomy.network import DEFAULT_ARCH

    arch = None
    if channels is not None:
        try:
            widths = [int(c) for c in channels.split(",")]
        except ValueError:
            fail(f"--channels {channels!r}: expected comma-separated integers such as 12,24,48,96,192")
        size = int(DEFAULT_ARCH["input_size"])
        if len(widths) < 2 or min(widths) < 1 or size % 2 ** (len(widths) - 1):
            fail(
                f"--channels {channels!r}: need 2 to {size.bit_length()} positive widths "
                f"(each level halves the {size} px input)"
            )
        arch = {**DEFAULT_ARCH, "channels": widths, "strides": [2] * (len(widths) - 1)}
    try:
        summary = run(
            data,
            out,
            epochs=epochs,
            covid_per_epoch=covid_per_epoch,
            qu_ex_per_epoch=qu_ex_per_epoch,
            seed=seed,
            threads=threads,
            val_percent=val_percent,
            init=init,
            lr=lr,
            arch=arch,
            max_seconds=None if max_minutes is None else max_minutes * 60,
            progress=typer.echo,
        )
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    typer.echo(f"wrote {out}: {summary}")


def register(app: typer.Typer) -> None:
    """Add ``anatomy`` and ``train-anatomy`` to the ``cxrils`` app."""
    app.command("anatomy")(anatomy)
    app.command("train-anatomy")(train_anatomy)
