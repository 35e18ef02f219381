"""``cxrils import-mimic-ils`` and ``cxrils export --format mimic-ils``."""

from __future__ import annotations

from pathlib import Path

import typer

from cxrils.cli.common import fail, resumable

EXPORT_FORMATS = ("mimic-ils",)


def register(app: typer.Typer) -> None:
    """Add ``import-mimic-ils`` and ``export`` to the ``cxrils`` app."""
    app.command("import-mimic-ils")(import_mimic_ils_cmd)
    app.command("export")(export_cmd)


def import_mimic_ils_cmd(
    json_path: Path = typer.Option(..., "--json", help="mimic_ils_instruction_answer.json of MIMIC-CXR-Ext-ILS 1.0.0."),
    images: Path = typer.Option(
        ..., "--images", help="MIMIC-CXR-JPG 2.1.0 files/ folder (image_path is relative to it)."
    ),
    masks: Path = typer.Option(
        ..., "--masks", help="The release's lesion_mask/ folder (seg_mask_path is relative to it)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="cxrils dataset folder to write; rerun on it to resume."),
    max_side: int | None = typer.Option(
        None, "--max-side", min=0, help="Longest stored image side (default: 1024, ROSALIA's SAM input; 0 = original)."
    ),
    workers: int = typer.Option(1, "--workers", "-j", min=1, help="Processes reading images and masks."),
) -> None:
    """Import the released MIMIC-ILS (streamed, resumable); missing images or masks are listed, not fatal.

    Exits 2 when the dataset holds no record at the end (an empty JSON, a wrong --images).
    """
    from cxrils.config import MimicIlsConfig
    from cxrils.dataset.mimic_ils.importer import PROBLEMS_NAME, import_mimic_ils
    from cxrils.dataset.writer import DatasetError

    cfg = MimicIlsConfig() if max_side is None else MimicIlsConfig(max_side=max_side)
    with resumable("every image imported so far"):
        try:
            report = import_mimic_ils(json_path, images, masks, out, cfg=cfg, workers=workers)
        except DatasetError as err:
            fail(str(err))
        except OSError as err:
            fail(f"{out}: cannot write: {err}")
    typer.echo(
        f"{report['records_in_dataset']} records of {report['images_in_dataset']} images in {out} "
        f"({report['records_by_split']}); this run: {report['samples_imported_this_run']} samples, "
        f"{report['pairs_imported_this_run']} pairs; {report['samples_already_done']} samples already done"
    )
    if report["n_problems"]:
        typer.echo(f"{report['n_problems']} problems {report['problems_by_kind']} listed in {out / PROBLEMS_NAME}")
    kinds = report["problems_by_kind"]
    if kinds.get("missing_image"):
        typer.echo(
            f"{kinds['missing_image']} images not found under {images}: download MIMIC-CXR-JPG 2.1.0 (PhysioNet) "
            "and give its files/ folder as --images; rerun on the same -o to add them"
        )
    if kinds.get("missing_mask"):
        typer.echo(
            f"{kinds['missing_mask']} masks not found (each problem names the path its run looked under): the "
            "release's lesion_mask/ folder given as --masks lacks them. Their pairs are not imported, and a sample "
            "imported without them counts as done: to add them once the masks are there, import into a new folder"
        )
    if report["samples_in_json"] == 0:
        fail(
            f"{json_path}: no sample under 'train', 'val' or 'test': is it the release's mimic_ils_instruction_answer.json?"
        )
    if report["records_in_dataset"] == 0:
        fail(f"{out}: no record imported (the problems above say why)")


def export_cmd(
    dataset: Path = typer.Argument(..., help="Finalized cxrils dataset folder."),
    fmt: str = typer.Option("mimic-ils", "--format", help="Output format: mimic-ils (KAIST-Edlab/ROSALIA layout)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the JSON and lesion_mask/."),
    images: Path | None = typer.Option(
        None,
        "--images",
        help="Images folder (train_ds.py --base_image_dir); image_path is relative to it (default: OUT/files).",
    ),
    paraphrases: str = typer.Option(
        "exclude", "--paraphrases", help="Paraphrased rows (Appendix C.3): exclude | include."
    ),
) -> None:
    """Write a dataset in the released MIMIC-ILS layout (JSON + 0/255 mask PNGs) for the authors' train_ds.py."""
    from cxrils.dataset.mimic_ils.exporter import export_mimic_ils
    from cxrils.dataset.writer import DatasetError

    if fmt not in EXPORT_FORMATS:
        fail(f"unknown format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    try:
        counts = export_mimic_ils(dataset, out, images_dir=images, paraphrases=paraphrases)
    except DatasetError as err:
        fail(str(err))
    except OSError as err:
        fail(f"{out}: cannot write: {err}")
    typer.echo(
        f"samples {counts['samples']}, positive pairs {counts['positive_pairs']}, negative pairs "
        f"{counts['negative_pairs']}, {counts['masks']} masks -> {counts['json']}"
    )
    if counts["stale_masks_removed"]:
        typer.echo(
            f"removed {counts['stale_masks_removed']} mask files of an earlier export that this one does not name"
        )
    if counts["other_files_kept"]:
        typer.echo(
            f"{counts['masks_dir']} also holds {counts['other_files_kept']} files this export did not write "
            "(kept; the JSON names only its own masks)"
        )
    typer.echo(
        f"train_ds.py --json_dir {counts['json']} --base_image_dir {counts['images_dir']} "
        f"--base_mask_dir {counts['masks_dir']}"
    )
