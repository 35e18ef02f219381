"""Commands ``cxrils train-detector`` and ``cxrils train-anomaly``: the built-in lesion
models, each trained on its own half of the COVID-QU-Ex tuning part (docs/grounding.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import typer

DATA_HELP = "Shared data folder with covid_qu_ex/."


def _run(train: Callable, cfg_cls: type, data: Path, out: Path, epochs: Optional[int], threads: int) -> dict:
    import dataclasses

    import torch

    torch.set_num_threads(threads)
    cfg = cfg_cls() if epochs is None else dataclasses.replace(cfg_cls(), epochs=epochs)
    try:
        return train(data, out, cfg)
    except (FileNotFoundError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err


def train_detector(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    out: Path = typer.Option(Path("detector_builtin.safetensors"), "--out", "-o", help="Weights file to write."),
    epochs: Optional[int] = typer.Option(None, help="Epochs (default: DetectorTrainConfig.epochs)."),
    threads: int = typer.Option(2, help="torch CPU threads."),
) -> None:
    """Train the builtin lesion detector (CenterNet, "Lung Opacity" boxes) on the
    detector half of the COVID-QU-Ex tuning part."""
    from cxrils.config import DetectorTrainConfig
    from cxrils.vision.detection.train import train_detector as train

    s = _run(train, DetectorTrainConfig, data, out, epochs, threads)
    typer.echo(f"wrote {out}: validation AP50 {s['validation_ap50']:.3f} (epoch {s['best_epoch']}), "
               f"{s['images']} images, {s['train_seconds']:.0f} s")


def train_anomaly(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    out: Path = typer.Option(Path("anomaly_builtin.safetensors"), "--out", "-o", help="Weights file to write."),
    epochs: Optional[int] = typer.Option(None, help="Epochs (default: AnomalyTrainConfig.epochs)."),
    threads: int = typer.Option(2, help="torch CPU threads."),
) -> None:
    """Train the builtin anomaly map's lesion network on the anomaly half of the
    COVID-QU-Ex tuning part."""
    from cxrils.config import AnomalyTrainConfig
    from cxrils.vision.anomaly.train import train_anomaly as train

    s = _run(train, AnomalyTrainConfig, data, out, epochs, threads)
    typer.echo(f"wrote {out}: validation IoU {s['validation_iou']:.3f} at p_star {s['p_star']} "
               f"(epoch {s['best_epoch']}), {s['images']} images, {s['train_seconds']:.0f} s")


def register(app: typer.Typer) -> None:
    """Add ``train-detector`` and ``train-anomaly`` to the ``cxrils`` app."""
    app.command("train-detector")(train_detector)
    app.command("train-anomaly")(train_anomaly)
