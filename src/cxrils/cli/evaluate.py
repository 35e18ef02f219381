"""``cxrils evaluate`` and ``cxrils baseline`` commands."""

from __future__ import annotations

from pathlib import Path

import typer

from cxrils.cli.common import fail, out_folder_or_fail, require_prediction_suffix, split_or_all


def register(app: typer.Typer) -> None:
    """Add ``evaluate`` and ``baseline`` to the ``cxrils`` app."""

    @app.command()
    def evaluate(
        dataset: Path = typer.Option(..., "--dataset", "-d", help="cxrils dataset folder (records/*.parquet)."),
        predictions: Path = typer.Option(
            ...,
            "--predictions",
            "-p",
            help="Predictions: .parquet or .jsonl with record_id, mask (COCO RLE), optional answer.",
        ),
        out: Path = typer.Option(..., "--out", "-o", help="Report folder (report.json, table*.csv, report.md)."),
        split: str = typer.Option("test", "--split", help="Split to evaluate: train | validate | test | all."),
        paraphrases: str = typer.Option(
            "exclude", "--paraphrases", help="Paraphrased-instruction rows (Appendix C.3): exclude | include | only."
        ),
        batch_size: int = typer.Option(1024, "--batch-size", min=1, help="Records per batch (memory only)."),
    ) -> None:
        """Score predictions: gIoU, cIoU (positives), N-Acc (negatives), text accuracy (paper Tables 4-6, 14)."""
        from cxrils.evaluation.evaluate import evaluate_predictions
        from cxrils.evaluation.io import EvaluationError
        from cxrils.evaluation.report import padding_note, pct

        chosen = split_or_all(split)
        out_folder_or_fail(out, "the evaluation report")  # before scoring, not after
        try:
            report = evaluate_predictions(
                dataset, predictions, split=chosen, paraphrases=paraphrases, batch_size=batch_size
            )
            files = report.write(out)
        except EvaluationError as err:
            fail(str(err))
        except OSError as err:
            fail(f"{out}: cannot write the report: {err}")
        t4 = report.table4()
        typer.echo(f"{report.n_samples} records ({t4['n_positive']} positive, {t4['n_negative']} negative)")
        typer.echo(
            f"gIoU {pct(t4['gIoU'])}  cIoU {pct(t4['cIoU'])}  N-Acc {pct(t4['n_acc'])}  "
            f"text accuracy {pct(t4['text_accuracy'])}  (%)"
        )
        o = report.official_protocol()
        typer.echo(
            f"authors' protocol (ROSALIA train_ds.py validate()): giou_pos {pct(o['giou_pos'])}  "
            f"ciou_pos {pct(o['ciou_pos'])}  giou_neg {pct(o['giou_neg'])}  (%)"
        )
        typer.echo(padding_note(o, report.metadata.get("padding_counted")))
        typer.echo("wrote " + ", ".join(str(f) for f in files))

    @app.command()
    def baseline(
        name: str = typer.Argument(..., help="always-empty | whole-lung | oracle"),
        dataset: Path = typer.Option(..., "--dataset", "-d", help="cxrils dataset folder (records/*.parquet)."),
        out: Path = typer.Option(..., "--out", "-o", help="Predictions file to write (.parquet or .jsonl)."),
        split: str = typer.Option("test", "--split", help="Split to predict: train | validate | test | all."),
        paraphrases: str = typer.Option(
            "exclude", "--paraphrases", help="Paraphrased-instruction rows (Appendix C.3): exclude | include | only."
        ),
        config: Path | None = typer.Option(
            None, "--config", "-c", help="TOML configuration (anatomy backend for whole-lung)."
        ),
        set_: list[str] = typer.Option([], "--set", help="Config override section.key=value (repeatable)."),
    ) -> None:
        """Write the predictions of a reference baseline (always-empty, whole-lung, oracle)."""
        from cxrils.config import ConfigError, load_config
        from cxrils.evaluation.baselines import (
            BASELINES,
            BASELINES_WITH_ANSWERS,
            baseline_predictions,
            default_anatomy_fn,
        )
        from cxrils.evaluation.io import EvaluationError, write_predictions

        if name not in BASELINES:
            fail(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
        require_prediction_suffix(out)
        chosen = split_or_all(split)
        try:
            cfg = load_config(config, set_)
            anatomy_fn = default_anatomy_fn(cfg) if name == "whole-lung" else None
            rows = baseline_predictions(name, dataset, split=chosen, paraphrases=paraphrases, anatomy_fn=anatomy_fn)
            n = write_predictions(out, rows, with_answers=name in BASELINES_WITH_ANSWERS)
        except (EvaluationError, ConfigError) as err:
            fail(str(err))
        except OSError as err:
            fail(f"{out}: cannot write predictions: {err}")
        if n == 0:
            out.unlink(missing_ok=True)
            fail(f"{dataset}: no {'paraphrased ' if paraphrases == 'only' else ''}records in split {split!r}")
        typer.echo(f"wrote {n} {name} predictions to {out}")
