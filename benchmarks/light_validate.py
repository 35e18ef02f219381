"""What the benchmarks that answer a light training dataset's validation split share
(``light_cardiomegaly``, ``light_prior_shift``): their options, the model they load,
and how they print a count."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_light_validate_options(ap: argparse.ArgumentParser) -> None:
    """Add ``--run RUN`` (default: the shipped model) and ``--dataset LIGHT_DATA`` (required)
    to a parser of :func:`benchmarks.results.benchmark_parser`."""
    ap.add_argument("--run", type=Path, default=None, help="light run folder (default: the shipped model)")
    ap.add_argument("--dataset", type=Path, required=True, help="the light training dataset (validate split)")


def load_light_run(args: argparse.Namespace):
    """``(run folder, Segmenter)``: ``args.run`` or the shipped model, loaded."""
    from cxrils.models import Segmenter, default_model_dir

    run = args.run or default_model_dir()
    return run, Segmenter.from_pretrained(run)


def out_of_fold_segmenters(run: Path, seg) -> dict:
    """``{half: Segmenter}``: the light model of ``run`` answering with the priors of the
    lesion models that never saw an image of that half of the tuning part (its
    ``oof_anomaly_weights`` / ``oof_detector_weights``, :mod:`cxrils.training.prior_folds`).

    Raises
    ------
    ValueError, RuntimeError
        If the run names no out-of-fold lesion models or they are not of the other half.
    """
    from cxrils.models import Segmenter
    from cxrils.training.lesion_data import ROLES
    from cxrils.training.prior_folds import check_out_of_fold_weights, out_of_fold_stages

    check_out_of_fold_weights(seg.config)
    out = {}
    for half in ROLES:
        anomaly, detector = out_of_fold_stages(seg.config, half)
        out[half] = Segmenter.from_pretrained(run, anomaly=anomaly, detector=detector)
    return out


def count_cell(k: int, n: int) -> str:
    """``"k/n = pct"`` (one decimal), ``"n/a"`` when ``n`` is 0."""
    return f"{k}/{n} = {100 * k / n:.1f}" if n else "n/a"
