"""``cxrils serve``: the web page and REST API."""

from __future__ import annotations

from pathlib import Path

import typer

from cxrils.cli.common import check_listen, fail
from cxrils.templates import MAX_INSTRUCTION_CHARS


def default_model_dir() -> Path | None:
    """The light model shipped in the package (``cxrils/weights/light_ils``), if present."""
    from cxrils.models.base import default_model_dir as shipped

    return shipped()


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``cxrils`` command line."""

    @app.command()
    def serve(
        model: Path | None = typer.Option(None, "--model", "-m", help="Trained model folder (cxrils train -o ...)."),
        host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback by default)."),
        port: int = typer.Option(8000, min=1, max=65535, help="TCP port."),
        max_upload_mb: int = typer.Option(50, min=1, help="Largest accepted upload, MB."),
        max_instruction_chars: int = typer.Option(MAX_INSTRUCTION_CHARS, min=1, help="Longest accepted instruction."),
        keep_uploads: Path | None = typer.Option(
            None,
            help="Keep uploads in this folder, as uploaded: DICOM headers (patient name, ID, dates) included (off by default).",
        ),
    ) -> None:
        """Serve the segmentation page and REST API (POST /v1/segment) with one loaded model."""
        from cxrils.extras import MissingExtraError, require_extra

        try:
            require_extra("serve", "cxrils serve")
        except MissingExtraError as err:
            fail(str(err))
        import uvicorn

        from cxrils.models.base import ModelLoadError, Segmenter
        from cxrils.serve.app import ServiceConfig, check_writable, create_app

        run_dir = model or default_model_dir()
        if run_dir is None:
            typer.echo(
                "error: no --model given and no built-in light model is installed.\n"
                "Train one: cxrils demo (generates a dataset from ../shared/data), then\n"
                "  cxrils train --model light --dataset DATASET -o RUN_DIR\n"
                "and start the service with: cxrils serve --model RUN_DIR",
                err=True,
            )
            raise typer.Exit(2)
        if keep_uploads is not None:  # before the model load, which can take minutes
            try:
                check_writable(keep_uploads)
            except ValueError as err:
                fail(str(err))
        try:
            segmenter = Segmenter.from_pretrained(run_dir)
        except ModelLoadError as err:
            fail(str(err))
        cfg = ServiceConfig(
            max_upload_bytes=max_upload_mb * 1024 * 1024,
            max_instruction_chars=max_instruction_chars,
            keep_uploads_dir=keep_uploads,
        )
        try:
            app = create_app(segmenter, model_name=Path(run_dir).name, config=cfg)
        except ValueError as err:
            fail(str(err))
        check_listen(host, port)  # before saying it serves: a port in use is one line
        shown = f"[{host}]" if ":" in host else host or "127.0.0.1"  # IPv6 in brackets; "" is every interface
        typer.echo(f"cxrils: serving {run_dir} on http://{shown}:{port}/ (API docs at /docs)")
        uvicorn.run(app, host=host, port=port, log_level="info")
