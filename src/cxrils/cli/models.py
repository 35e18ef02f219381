"""``cxrils train`` and ``cxrils predict``: the model commands.

``train --model NAME`` dispatches to the trainer registered in :data:`TRAINERS`
(a function returning the trainer, which takes ``(dataset, run_dir, overrides, *, resume, evaluate,
progress)``), so a new model only adds an entry. ``predict`` loads any run folder
through :meth:`cxrils.models.Segmenter.from_pretrained`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from cxrils.cli.common import fail, out_folder_or_fail, require_prediction_suffix, resumable, split_or_all
from cxrils.templates import MAX_INSTRUCTION_CHARS


def _light_trainer() -> Callable[..., dict]:
    from cxrils.training.light_train import cli_train

    return cli_train


def _rosalia_trainer() -> Callable[..., dict]:
    from cxrils.models.rosalia.training import cli_train

    return cli_train


#: ``--model`` name -> a function returning its trainer (imported only when called, so
#: that torch and transformers load only for ``train``).
TRAINERS: dict[str, Callable[[], Callable[..., dict]]] = {"light": _light_trainer, "rosalia": _rosalia_trainer}


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            fail(f"--set {item!r} is not of the form key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


#: Settings with their own ``cxrils train`` option (each is also a ``--set`` key of
#: every trainer): option name -> config key.
TRAIN_OPTIONS: dict[str, str] = {"steps": "steps", "batch_size": "batch_size", "lr": "lr", "seed": "seed"}


def _set_value(value) -> str:
    """A default as it would be typed after ``--set KEY=``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return "(see config.json)"
    return str(value) if value != "" else "''"


def settings_help() -> str:
    """The ``--set`` keys of each trainer with their defaults, for ``cxrils train --help``
    (read from the models' config dataclasses, so the list cannot go stale)."""
    import dataclasses

    from cxrils.models.light.config import LightConfig
    from cxrils.models.rosalia.configuration import RosaliaConfig

    lines = ["Settings: --set KEY=VALUE (repeatable), shown with their defaults; --threads sets torch threads."]
    for name, cls, extra in (
        ("light", LightConfig, {}),
        ("rosalia", RosaliaConfig, {"steps": "(epochs x batches)", "save_every": 200, "tiny": False}),
    ):
        defaults = cls()
        items = [f"{f.name}={_set_value(getattr(defaults, f.name))}" for f in dataclasses.fields(cls) if f.init]
        items += [f"{k}={_set_value(v)}" for k, v in extra.items()]
        lines.append(f"--model {name}: " + ", ".join(items))
    lines.append("Meanings: docs/models.md (light) and docs/rosalia.md.")
    return "\n\n".join(lines)


def _load_model(model: Path, threads: int | None):
    """The model of a run folder (``cxrils predict``), or exit 2 with the loader's message."""
    from cxrils.models.base import ModelLoadError, Segmenter

    try:
        return Segmenter.from_pretrained(model, **({} if threads is None else {"num_threads": threads}))
    except ModelLoadError as err:
        fail(str(err))


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``predict`` to the ``cxrils`` app."""

    @app.command(epilog=settings_help())
    def train(
        model: str = typer.Option("light", "--model", "-m", help=f"Model to train: {' | '.join(TRAINERS)}."),
        dataset: Path = typer.Option(..., "--dataset", "-d", help="cxrils dataset folder (cxrils generate)."),
        out: Path = typer.Option(..., "--out", "-o", help="Run folder: checkpoints, metrics.jsonl, weights."),
        set_: list[str] = typer.Option(
            [],
            "--set",
            help="Model config override key=value (repeatable), e.g. --set steps=2000 --set text_encoder=minilm.",
        ),
        resume: bool = typer.Option(True, "--resume/--no-resume", help="Continue from the run's checkpoint."),
        evaluate: bool = typer.Option(
            True, "--evaluate/--no-evaluate", help="Evaluate on the validation split at the end."
        ),
        threads: int | None = typer.Option(None, "--threads", min=1, help="torch CPU threads."),
        steps: int | None = typer.Option(None, "--steps", min=1, help="Optimisation steps (= --set steps=N)."),
        batch_size: int | None = typer.Option(
            None, "--batch-size", min=2, help="Records per batch, half positive (= --set batch_size=N)."
        ),
        lr: float | None = typer.Option(None, "--lr", help="AdamW learning rate (= --set lr=X)."),
        seed: int | None = typer.Option(None, "--seed", help="Seed of initialisation and sampling (= --set seed=N)."),
    ) -> None:
        """Train an ILS model on a dataset; resumable, with a metrics log and validation at the end.

        Every setting of the chosen model can be changed with --set KEY=VALUE; the common
        ones have their own option. The list below gives all of them with their defaults.
        """
        if model not in TRAINERS:
            fail(f"unknown model {model!r}; choose one of {sorted(TRAINERS)}")
        if not (dataset / "manifest.json").is_file():
            fail(f"{dataset}: not a finalized cxrils dataset (no manifest.json)")
        if (out / "manifest.json").is_file() or (out / "provenance.json").is_file():
            # a new user's trial: -o the dataset's folder wrote the weights into it
            fail(f"{out}: is a cxrils dataset folder; write the run to a folder of its own (-o)")
        overrides = _parse_overrides(set_)
        for option, value in (("steps", steps), ("batch_size", batch_size), ("lr", lr), ("seed", seed)):
            if value is not None:
                key = TRAIN_OPTIONS[option]
                if key in overrides and overrides[key] != str(value):
                    fail(f"--{option.replace('_', '-')} {value} contradicts --set {key}={overrides[key]}")
                overrides[key] = str(value)
        try:
            trainer = TRAINERS[model]()
        except ImportError as err:
            fail(f"model {model!r} is not available: {err}")
        if model == "rosalia":
            from cxrils.extras import MissingExtraError, require_extra

            try:
                require_extra("models", "cxrils train --model rosalia")
            except MissingExtraError as err:
                fail(str(err))
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        with resumable("the last checkpoint"):
            try:
                result = trainer(dataset, out, overrides, resume=resume, evaluate=evaluate, progress=True)
            except (ValueError, RuntimeError) as err:  # bad settings or data; anatomy stage unavailable
                fail(str(err))
        typer.echo(
            f"trained {model} for {result['steps']} steps in {result['train_seconds']:.1f} s of training steps (model loading aside) -> {out}"
        )
        val = result.get("validate")
        if val:
            fmt = {
                k: ("n/a" if val[k] is None else f"{100 * val[k]:.1f}%")
                for k in ("gIoU", "cIoU", "n_acc", "text_accuracy")
            }
            typer.echo(
                "validate: "
                + ", ".join(f"{k} {v}" for k, v in fmt.items())
                + f" ({val['n_positive']} positives, {val['n_negative']} negatives)"
            )

    @app.command()
    def predict(
        model: Path | None = typer.Option(
            None,
            "--model",
            "-m",
            help="Trained run folder (cxrils train -o); default: the light model shipped in the package.",
        ),
        image: Path | None = typer.Argument(None, help="Image file (DICOM, PNG, JPEG)."),
        instruction: str | None = typer.Argument(None, help='e.g. "Segment the effusion in the left lung base."'),
        out: Path = typer.Option(
            ..., "--out", "-o", help="Output folder (single image) or predictions .parquet/.jsonl file (--dataset)."
        ),
        dataset: Path | None = typer.Option(
            None, "--dataset", "-d", help="Batch mode: predict a dataset split (instead of IMAGE and INSTRUCTION)."
        ),
        split: str = typer.Option("test", "--split", help="Split of --dataset: train, validate, test or all."),
        threads: int | None = typer.Option(None, "--threads", min=1, help="torch CPU threads."),
        teacher_forced: bool = typer.Option(
            False,
            "--teacher-forced",
            help="--dataset with ROSALIA: masks from the reference answers' [SEG], as "
            "the authors' validate() (no text generated, text not scored).",
        ),
        dicom_seg: bool | None = typer.Option(
            None,
            "--dicom-seg/--no-dicom-seg",
            help="Also write the mask as DICOM SEG (mask.seg.dcm) referencing "
            "the source image; default: when IMAGE is a DICOM file.",
        ),
        max_instruction_chars: int = typer.Option(
            MAX_INSTRUCTION_CHARS,
            min=1,
            help="Longest accepted instruction (as cxrils serve's --max-instruction-chars).",
        ),
    ) -> None:
        """Segment what an instruction asks for; write mask PNG + RLE, answer and overlay (or batch predictions).

        Prints the instruction as the model read it, the answer and where the files are.
        For a DICOM image the mask is also written as DICOM SEG (extra 'dicom').
        """
        from cxrils.evaluation.io import PREDICTION_SUFFIXES
        from cxrils.io.base import image_too_small
        from cxrils.models.base import default_model_dir

        if dataset is not None and (image is not None or instruction is not None):
            fail(
                "give IMAGE and INSTRUCTION (one image) or --dataset (batch mode), not both: "
                "batch mode predicts every record of the dataset split"
            )
        if instruction is not None and not instruction.strip():
            fail("the instruction is empty")
        if instruction is not None and len(instruction.strip()) > max_instruction_chars:  # counted as the service does
            fail(
                f"the instruction has {len(instruction.strip())} characters; the limit is {max_instruction_chars} "
                "(--max-instruction-chars)"
            )
        model = model or default_model_dir()
        if model is None:
            fail(
                "no --model given and no built-in light model is installed; train one with "
                "cxrils train --model light --dataset DATASET -o RUN_DIR"
            )
        if dataset is not None:
            from cxrils.dataset import DatasetError
            from cxrils.models.predict import predict_dataset

            require_prediction_suffix(out, "batch predictions")
            chosen = split_or_all(split)
            seg = _load_model(model, threads)
            try:
                predict_dataset(seg, dataset, chosen, out, teacher_forced=teacher_forced)
            except (DatasetError, ValueError) as err:
                fail(str(err))
            typer.echo(f"predictions -> {out}")
            return
        if image is None or instruction is None:
            fail("give IMAGE and INSTRUCTION, or --dataset for batch mode")
        out_folder_or_fail(out, "mask.png, overlay.png and prediction.json are written into it")
        if not out.exists() and out.suffix.lower() in (".png", ".jpg", ".jpeg", ".json", ".dcm", *PREDICTION_SUFFIXES):
            fail(
                f"{out}: -o names the output folder for one image (mask.png, overlay.png and prediction.json "
                "are written into it), not a file; .parquet/.jsonl files are for --dataset"
            )
        from cxrils.extras import MissingExtraError
        from cxrils.io import ImageLoadError, load_image
        from cxrils.models.output import write_prediction

        try:  # the image first: a file that is no usable radiograph fails before the model loads
            loaded = load_image(image)
        except ImageLoadError as err:
            fail(str(err))
        x = loaded.pixels
        small = image_too_small(x.shape)
        if small:
            fail(f"{image}: {small}")
        is_dicom = loaded.meta.format == "dicom"
        if dicom_seg and not is_dicom:
            fail(
                f"{image}: --dicom-seg needs a DICOM image (a SEG references its source DICOM); "
                f"this is {loaded.meta.format}"
            )
        if is_dicom and dicom_seg is not False:
            from cxrils.extras import missing_module

            if missing_module(["highdicom"]) is not None:
                missing = MissingExtraError("DICOM SEG output", "dicom", "highdicom")
                if dicom_seg:  # asked for explicitly: refuse before any work
                    fail(str(missing))
                typer.echo(f"note: {missing}", err=True)
                dicom_seg = False
            else:
                dicom_seg = True
        seg = _load_model(model, threads)
        try:
            answered = seg.read_instruction(instruction)
        except ValueError as err:  # InstructionError: the model cannot read it; says what it accepts
            fail(str(err))
        try:
            pred = seg.predict(x, instruction)
        except (RuntimeError, ValueError) as err:
            fail(f"{image}: {err}")
        notes = write_prediction(
            out,
            x,
            instruction,
            pred,
            meta=loaded.meta,
            answered=answered,
            dicom_source=image if dicom_seg else None,
            model_name=f"cxrils {seg.model_type}",
        )
        for note in notes:  # the SEG could not be written: everything else was
            typer.echo(
                f"note: no DICOM SEG written: {note} (mask.png and prediction.json are; --no-dicom-seg skips the SEG)",
                err=True,
            )
        typer.echo(f"instruction answered: {answered}")
        typer.echo(f"answer: {pred.answer}")
        if pred.note:
            typer.echo(f"note: {pred.note}")
        files = "mask.png, overlay.png, prediction.json" + (
            ", mask.seg.dcm (DICOM SEG)" if dicom_seg and not notes else ""
        )
        shown = ""
        if pred.presence_threshold is not None:
            shown = f" (a mask from {pred.presence_threshold:.3f}"
            if (pred.presence_score >= pred.presence_threshold) != bool(pred.mask.any()) and pred.note:
                shown += "; answered otherwise, as the note says"
            shown += ")"
        typer.echo(f"presence {pred.presence_score:.3f}{shown}, mask {int(pred.mask.sum())} px -> {out} ({files})")
