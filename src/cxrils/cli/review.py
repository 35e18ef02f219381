"""``cxrils review`` (the review page) and ``cxrils review-stats`` (rates, agreement,
the paper's rates, the accepted subset)."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import typer

from cxrils.cli.common import check_listen, fail

#: Environment variable that may hold the token of a server started with ``--host``.
TOKEN_ENV = "CXRILS_REVIEW_TOKEN"
#: Default port of the review page (ours; ``cxrils serve`` uses 8000).
DEFAULT_PORT = 8765
#: A token: at least 16 of the characters a URL carries unescaped (RFC 3986 "unreserved"),
#: so the printed address ``...?token=...`` works as it is (``secrets.token_urlsafe`` makes such).
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9._~-]{16,256}$")


def plan_words(plan: dict) -> str:
    """A stored sample plan in words: "per stratum: 95% Wilson interval within +-0.05
    at 0.901 (positives) / 0.977 (negatives), seed 0" or "per stratum: 20 records, seed 0"."""
    if plan.get("n"):
        return f"per stratum: {plan['n']} records, seed {plan['seed']}"
    return (
        f"per stratum: {100 * plan['confidence']:.0f}% Wilson interval within +-{plan['margin']} at "
        f"{plan['planning_positive']} (positives) / {plan['planning_negative']} (negatives), seed {plan['seed']}"
    )


def register(app: typer.Typer) -> None:
    """Add ``review`` and ``review-stats`` to the ``cxrils`` app."""
    app.command("review")(review_cmd)
    app.command("review-stats")(review_stats_cmd)


def review_cmd(
    dataset: Path = typer.Argument(..., help="Finalized cxrils dataset folder; decisions go to DATASET/review.sqlite."),
    n: int | None = typer.Option(None, "--n", min=1, help="Records per stratum (instead of --margin)."),
    margin: float | None = typer.Option(
        None, "--margin", help="Target half-width of each stratum's 95% Wilson interval (default 0.05)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the sample (default 0)."),
    host: str | None = typer.Option(
        None,
        "--host",
        help="Address to listen on (default 127.0.0.1); any "
        "--host requires a token (printed, or --token / $CXRILS_REVIEW_TOKEN).",
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="TCP port."),
    token: str | None = typer.Option(
        None, "--token", help="Token the page and API require (16-256 letters, digits or . _ ~ -)."
    ),
    export_dir: Path | None = typer.Option(
        None, "--export-dir", help="Where the page's export writes (default: DATASET-accepted beside the dataset)."
    ),
) -> None:
    """Start the expert-review page for a dataset: a stratified, seeded sample; accept,
    reject with a reason, or skip each record with the keyboard; resumable."""
    from cxrils.extras import MissingExtraError, require_extra

    try:
        require_extra("serve", "cxrils review")
    except MissingExtraError as err:
        fail(str(err))
    import uvicorn

    from cxrils.dataset import DatasetError
    from cxrils.review.app import create_review_app
    from cxrils.review.sampling import DEFAULT_MARGIN, SamplePlan, SamplingError
    from cxrils.review.session import open_review
    from cxrils.review.store import ReviewError

    plan = None
    if n is not None or margin is not None or seed is not None:
        plan = SamplePlan(margin=DEFAULT_MARGIN if margin is None else margin, n=n, seed=0 if seed is None else seed)
    token = token or os.environ.get(TOKEN_ENV) or (secrets.token_urlsafe(24) if host is not None else None)
    if token is not None and not TOKEN_PATTERN.match(token):
        fail("the token must have at least 16 characters (at most 256), each a letter, a digit or one of . _ ~ -")
    try:
        session = open_review(dataset, plan)
    except (DatasetError, ReviewError, SamplingError) as err:
        fail(str(err))
    bind = host or "127.0.0.1"
    try:
        check_listen(bind, port)  # before the lines that say where to open it
    except typer.Exit:
        session.close()
        raise
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(bind, bind)  # an address that answers there
    url = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/"  # an IPv6 address goes in brackets
    typer.echo(
        f"review of {dataset}: {len(session)} records sampled ({plan_words(session.store.plan())}); "
        f"decisions in {session.store.path}"
    )
    typer.echo(f"open {url}?token={token}" if token else f"open {url}")
    try:
        uvicorn.run(
            create_review_app(session, token=token, export_dir=export_dir), host=bind, port=port, log_level="warning"
        )
    finally:
        session.close()


def review_stats_cmd(
    dataset: Path = typer.Argument(..., help="Reviewed dataset folder (with review.sqlite)."),
    html: Path | None = typer.Option(None, "--html", help="HTML report (default DATASET/review-stats.html)."),
    export_accepted: Path | None = typer.Option(
        None,
        "--export-accepted",
        help="Also write the accepted "
        "records here: OUT/cxrils (a cxrils dataset) and OUT/mimic-ils "
        "(the released MIMIC-ILS layout).",
    ),
) -> None:
    """Print acceptance rates with 95% Wilson intervals (per lesion type, polarity,
    instruction type), inter-reviewer kappa and the paper's rates; write them as HTML."""
    from rich.console import Console

    from cxrils.dataset import DatasetError, read_manifest
    from cxrils.fsutil import atomic_write_text
    from cxrils.review.export import check_export_dir
    from cxrils.review.export import export_accepted as export
    from cxrils.review.report import print_stats, stats_html
    from cxrils.review.stats import review_stats
    from cxrils.review.store import DB_NAME, ReviewError, ReviewStore, dataset_fingerprint

    db = dataset / DB_NAME
    if not db.is_file():
        fail(f"{db}: no review of this dataset yet; start one with: cxrils review {dataset}")
    try:
        fingerprint = dataset_fingerprint(read_manifest(dataset))
        if export_accepted is not None:
            check_export_dir(dataset, export_accepted)  # before anything is printed: a refusal is one line
        store = ReviewStore(db)
    except (DatasetError, ReviewError) as err:
        fail(str(err))
    with store:
        if store.plan() is None:  # a start that failed before it drew the sample
            fail(f"{db}: no review sample drawn yet; start the review with: cxrils review {dataset}")
        if store.meta.get("dataset_fingerprint") != fingerprint:
            fail(f"{db}: the dataset's records changed since its review sample was drawn")
        stats = review_stats(store)
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(140, console.width))
        print_stats(stats, console)
        out = html or dataset / "review-stats.html"
        try:
            atomic_write_text(out, stats_html(stats, dataset.resolve().name))
        except OSError as err:
            fail(f"{out}: cannot write: {err}")
        console.print(f"HTML report: {out}")
        if export_accepted is not None:
            try:
                res = export(dataset, store, export_accepted)
            except (DatasetError, ReviewError) as err:
                fail(str(err))
            except OSError as err:
                fail(f"{export_accepted}: cannot write: {err}")
            console.print(
                f"accepted: {res['records']} records of {res['images']} images -> {res['cxrils']} "
                f"(cxrils dataset) and {res['mimic_ils']} (MIMIC-ILS layout)"
            )
