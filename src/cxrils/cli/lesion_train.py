"""Commands ``cxrils train-detector`` and ``cxrils train-anomaly``: the built-in lesion
models, each trained on its own half of the COVID-QU-Ex tuning part (docs/grounding.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from cxrils.cli.common import fail

DATA_HELP = "Shared data folder with covid_qu_ex/ and jsrt_scr/."
INIT_HELP = "Weights file of the same network to fine-tune from."
ROLE_HELP = (
    "Half of the COVID-QU-Ex tuning part to train on: the model's own (default) or the other "
    "one, for an out-of-fold model whose maps the light model trains on (docs/models.md)."
)
SEED_HELP = "Seed of the initial weights, batch order and augmentation (default: the config's, 0)."
SYNTHETIC_HELP = (
    "Add the role's JSRT nodule images and draw synthetic effusions, opacities and plate "
    "atelectasis on a share of the training images (SyntheticConfig)."
)


def _run(
    train: Callable,
    cfg_cls: type,
    data: Path,
    out: Path,
    epochs: int | None,
    threads: int,
    init: Path | None,
    lr: float | None,
    synthetic: bool,
    seed: int | None,
    role: str,
) -> dict:
    import dataclasses

    import torch

    from cxrils.config import SyntheticConfig

    torch.set_num_threads(threads)
    changes = {k: v for k, v in (("epochs", epochs), ("lr", lr), ("seed", seed)) if v is not None}
    cfg = dataclasses.replace(cfg_cls(), **changes)
    try:
        return train(data, out, cfg, synthetic=SyntheticConfig() if synthetic else None, init=init, role=role)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))


def train_detector(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    out: Path = typer.Option(Path("detector_builtin.safetensors"), "--out", "-o", help="Weights file to write."),
    epochs: int | None = typer.Option(None, help="Epochs (default: DetectorTrainConfig.epochs)."),
    threads: int = typer.Option(2, min=1, help="torch CPU threads."),
    init: Path | None = typer.Option(None, help=INIT_HELP),
    lr: float | None = typer.Option(None, help="Peak learning rate (default: the config's)."),
    synthetic: bool = typer.Option(True, "--synthetic/--no-synthetic", help=SYNTHETIC_HELP),
    seed: int | None = typer.Option(None, help=SEED_HELP),
    role: str = typer.Option("detector", help=ROLE_HELP),
) -> None:
    """Train the builtin lesion detector (CenterNet, "Lung Opacity" boxes) on the
    detector half of the COVID-QU-Ex tuning part (and of the JSRT nodule images)."""
    from cxrils.config import DetectorTrainConfig
    from cxrils.training.detector_train import train_detector as train

    s = _run(train, DetectorTrainConfig, data, out, epochs, threads, init, lr, synthetic, seed, role)
    typer.echo(
        f"wrote {out}: validation AP50 {s['validation_ap50']:.3f} (epoch {s['best_epoch']}), "
        f"{s['images']} images, {s['train_seconds']:.0f} s"
    )


def train_anomaly(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    out: Path = typer.Option(Path("anomaly_builtin.safetensors"), "--out", "-o", help="Weights file to write."),
    epochs: int | None = typer.Option(None, help="Epochs (default: AnomalyTrainConfig.epochs)."),
    threads: int = typer.Option(2, min=1, help="torch CPU threads."),
    init: Path | None = typer.Option(None, help=INIT_HELP),
    lr: float | None = typer.Option(None, help="Peak learning rate (default: the config's)."),
    synthetic: bool = typer.Option(True, "--synthetic/--no-synthetic", help=SYNTHETIC_HELP),
    seed: int | None = typer.Option(None, help=SEED_HELP),
    role: str = typer.Option("anomaly", help=ROLE_HELP),
) -> None:
    """Train the builtin anomaly map's lesion network on the anomaly half of the
    COVID-QU-Ex tuning part (and of the JSRT nodule images)."""
    from cxrils.config import AnomalyTrainConfig
    from cxrils.training.anomaly_train import train_anomaly as train

    s = _run(train, AnomalyTrainConfig, data, out, epochs, threads, init, lr, synthetic, seed, role)
    typer.echo(
        f"wrote {out}: epoch {s['best_epoch']} by its validation pixel AUROC {s['validation_auroc']:.3f}; "
        f"p_star {s['p_star']} (validation IoU {s['validation_iou']:.3f}), {s['images']} images, "
        f"{s['train_seconds']:.0f} s"
    )


def register(app: typer.Typer) -> None:
    """Add ``train-detector`` and ``train-anomaly`` to the ``cxrils`` app."""
    app.command("train-detector")(train_detector)
    app.command("train-anomaly")(train_anomaly)
