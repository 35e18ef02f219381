"""Command ``cxrils ground``: run the image side of mask generation on one case.

It runs the generation pipeline's own steps (:class:`cxrils.pipeline.Pipeline`), so it
lives in the pipeline package, above the grounding stage whose result it writes
(imports flow one way: the grounding stage never imports the pipeline).
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

import typer

from cxrils.cli.common import fail, load_config_or_fail, out_folder_or_fail
from cxrils.vocab import VIEW_POSITIONS


def ground(
    image: Path = typer.Argument(..., metavar="IMAGE", help="Chest X-ray: DICOM, PNG or JPEG (frontal)."),
    report_text: str = typer.Argument(
        ..., metavar="REPORT_TEXT", help="The radiology report text, or the path of a text file holding it."
    ),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output folder."),
    view: str | None = typer.Option(
        None,
        "--view",
        help="View position (PA, AP, LATERAL...); default: from DICOM metadata, else unknown (not excluded).",
    ),
    study_id: str = typer.Option("study", "--study-id", help="Study id written to grounding.json."),
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML configuration file."),
    set_: list[str] = typer.Option([], "--set", help="Override as section.key=value (repeatable)."),
) -> None:
    """Ground the report's findings in the image (paper section 3.1, Algorithm 1).

    Writes to OUT: overlay_anatomy.png, overlay_anomaly.png (x_ano heat map, A
    outlined), overlay_boxes.png (kept boxes green; rejected red with the failed
    conditions per finding, e.g. F1:c1,c3), overlay_masks.png, x_hat.png, x_ano.png
    (x_ano x 255, 8-bit), lesion_<i>_<type>.png (0/255) per grounded finding, and
    grounding.json (every box with its four condition values and verdicts; reported,
    grounded and empty locations of every finding; CTR; exclusion reason). The masks,
    x_hat, x_ano and the boxes lie on IMAGE as stored (a DICOM's Rows x Columns,
    whatever its Patient Orientation); the overlays are turned for reading.
    The steps are the generation pipeline's own (cxrils.pipeline.Pipeline), so
    the result is what "cxrils generate" would ground. Exit status 1 when the case
    is excluded before grounding (view, report, a failing stage), 2 on bad input.
    """
    import numpy as np

    from cxrils.fsutil import atomic_write_json
    from cxrils.grounding import grounding_to_dict
    from cxrils.grounding.render import (
        anomaly_overlay,
        boxes_overlay,
        mask_filename,
        masks_overlay,
        write_png,
    )
    from cxrils.io import ImageLoadError, load_image
    from cxrils.io.base import source_frame_record, source_frame_shape, to_source_frame
    from cxrils.pipeline.stages import BuiltinStages, StageLoadError
    from cxrils.pipeline.study import Pipeline
    from cxrils.sources import StudyInput
    from cxrils.sources.base import read_view, stem_id
    from cxrils.vision.anatomy.render import overlay as anatomy_overlay

    cfg = load_config_or_fail(config, set_)
    out_folder_or_fail(out_dir)
    given, view = view, read_view(view) if view else None  # "" = from the file's metadata
    if given and view not in VIEW_POSITIONS:
        fail(f"--view {given!r}: not a view position; one of {', '.join(sorted(VIEW_POSITIONS))}")
    if not report_text.strip():  # Path("") is the current folder
        fail("REPORT_TEXT is empty: give the report itself or the path of a text file holding it")
    text_path = Path(report_text)
    try:
        is_file, is_dir = text_path.is_file(), text_path.is_dir()
    except (OSError, ValueError):  # e.g. a report longer than a file name may be: it is text
        is_file = is_dir = False
    if is_dir:
        fail(f"{report_text}: is a folder; REPORT_TEXT is the report itself or the path of a text file holding it")
    if not is_file and _missing_report_path(report_text):
        fail(
            f"{report_text}: no such report file (REPORT_TEXT is the report itself or the path of a text file "
            "holding it)"
        )
    try:
        text = text_path.read_text(encoding="utf-8") if is_file else report_text
    except (OSError, UnicodeDecodeError) as err:
        fail(f"{text_path}: cannot read report text: {err}")
    if not text.strip():
        fail("REPORT_TEXT is empty")
    try:
        loaded = load_image(image, max_pixels=cfg.io.max_pixels, voi=cfg.io.voi)
    except ImageLoadError as err:
        fail(str(err))

    class _Loaded(BuiltinStages):
        """The pipeline's stages, with the image already loaded (its metadata is kept)."""

        def load_image(self, path: Path, cfg) -> tuple[np.ndarray, str | None]:
            return loaded.pixels, loaded.meta.view_position

    pipe = Pipeline(cfg, _Loaded())
    try:
        pipe.load_models(paraphrase=False)  # ground writes no records
    except StageLoadError as err:
        fail(str(err))
    study = StudyInput(
        study_id=study_id,
        image_id=stem_id(image.name),  # a UID file name hashed, as generate does
        patient_id=study_id,
        image_path=image,
        report=text,
        view=view,
        split=None,
    )
    try:
        state = pipe.start(study, None)
    except StageLoadError as err:
        fail(str(err))
    for step in pipe.image_steps:
        state = step(state)
    sg = pipe.ground(state)
    if sg is None:  # excluded before Algorithm 1 could run (view, report, a failing stage)
        typer.echo(f"{image}: excluded, nothing grounded: {state.excluded}", err=True)
        raise typer.Exit(1)
    x, anatomy, anomaly, boxes, report = state.x, state.anatomy, state.anomaly, state.boxes, state.report
    earlier = _earlier_mask_files(out_dir / "grounding.json")
    out_dir.mkdir(parents=True, exist_ok=True)
    # arrays that lie on the image are written in the source file's frame (as a viewer
    # shows it), the overlays in the display frame the pipeline works in (docs/io.md)
    source = partial(to_source_frame, meta=loaded.meta)
    write_png(out_dir / "x_hat.png", source(anomaly.x_hat))
    write_png(out_dir / "x_ano.png", source(np.clip(np.rint(anomaly.x_ano * 255), 0, 255).astype(np.uint8)))
    write_png(out_dir / "overlay_anatomy.png", anatomy_overlay(x, anatomy))
    write_png(out_dir / "overlay_anomaly.png", anomaly_overlay(x, anomaly, cfg.grounding.tau_ano))
    write_png(out_dir / "overlay_boxes.png", boxes_overlay(x, sg, boxes))
    write_png(out_dir / "overlay_masks.png", masks_overlay(x, sg))
    summary = grounding_to_dict(sg)
    for i, (gf, entry) in enumerate(zip(sg.findings, summary["findings"]), start=1):
        entry["index"] = i
        entry["mask_file"] = None
        if gf.mask is not None:
            entry["mask_file"] = mask_filename(i, gf.lesion_type)
            write_png(out_dir / entry["mask_file"], source(gf.mask.astype(np.uint8) * 255))
    summary.update(
        {
            **source_frame_record(loaded.meta),
            "shape": list(source_frame_shape(sg.shape, loaded.meta)),
            # the loaded image's metadata: its pixel_spacing is the display frame's (io.base.ImageMeta);
            # display_ops stands once, above
            "image": {
                "file": image.name,
                **{k: v for k, v in loaded.meta.to_dict().items() if k != "display_ops"},
                "pixel_spacing_frame": "display",
            },
            "report": report.to_dict(),
            "detector_boxes": [b.to_dict() for b in boxes],
            "backends": {
                "anatomy": anatomy.backend,
                "anomaly": anomaly.backend,
                "detector": getattr(pipe.detector, "name", type(pipe.detector).__name__),
            },
        }
    )
    _boxes_to_source(summary, sg.shape, loaded.meta)
    atomic_write_json(out_dir / "grounding.json", summary)
    for name in earlier - {e["mask_file"] for e in summary["findings"] if e["mask_file"]}:
        (out_dir / name).unlink(missing_ok=True)  # an earlier run's lesion mask this one does not write
    grounded = [f"F{e['index']} {e['lesion_type']} {e['grounded']}" for e in summary["findings"] if e["mask_file"]]
    typer.echo(
        f"{out_dir}: {len(sg.findings)} findings, {len(grounded)} grounded"
        + (f" ({'; '.join(grounded)})" if grounded else "")
        + (f"; excluded: {sg.excluded}" if sg.excluded else "")
    )
    for gf, e in zip(sg.findings, summary["findings"]):  # why each positive lesion finding got no mask
        if not e["mask_file"] and gf.lesion_type and gf.finding.presence == "positive" and gf.drop_reason:
            typer.echo(f"  F{e['index']} {gf.lesion_type}: not grounded: {gf.drop_reason}")


def _boxes_to_source(doc, shape: tuple[int, int], meta) -> None:
    """Every ``"box": [x0, y0, x1, y1]`` in ``doc`` (display-frame pixels of an image of
    ``shape``), in place, in the source frame (:func:`cxrils.io.base.box_to_source_frame`)."""
    from cxrils.io.base import box_to_source_frame

    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "box" and isinstance(value, list) and len(value) == 4:
                doc[key] = list(box_to_source_frame(tuple(value), shape, meta))
            else:
                _boxes_to_source(value, shape, meta)
    elif isinstance(doc, list):
        for item in doc:
            _boxes_to_source(item, shape, meta)


def _missing_report_path(arg: str) -> bool:
    """Whether a REPORT_TEXT that is no file was meant as one: a single word with a text
    file's suffix, or whose folder exists ("reports/s1.txt", "/data/r1"; not "N/A")."""
    if len(arg.split()) != 1:
        return False
    path = Path(arg)
    if path.suffix.lower() in (".txt", ".md", ".csv", ".json"):
        return True
    try:
        return ("/" in arg or "\\" in arg) and str(path.parent) not in ("", ".") and path.parent.is_dir()
    except (OSError, ValueError):
        return False


def register(app: typer.Typer) -> None:
    """Add ``cxrils ground`` to ``app``."""
    app.command("ground")(ground)


def _earlier_mask_files(path: Path) -> set[str]:
    """The lesion mask files an earlier ``cxrils ground`` into the same folder named in its
    ``grounding.json`` (``lesion_*.png`` names only); empty when there is none or it
    cannot be read (then nothing is removed)."""
    try:
        findings = json.loads(path.read_text(encoding="utf-8")).get("findings", [])
        names = {f.get("mask_file") for f in findings if isinstance(f, dict)}
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in names if isinstance(n, str) and Path(n).name == n and re.fullmatch(r"lesion_\w+\.png", n)}
