"""``cxrils serve``'s /v1/info names the model folder, not its path on the server."""

import pytest
from typer.testing import CliRunner

pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")


def test_info_names_the_model_without_the_servers_folders(monkeypatch):
    # a new user's trial (stop 58): /v1/info returned the server's absolute model path
    import uvicorn
    from fastapi.testclient import TestClient

    from cxrils.cli import app
    from cxrils.models.base import default_model_dir

    served = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: served.setdefault("app", self.config.app))
    monkeypatch.setattr("cxrils.cli.serve.listen", lambda host, port: None)
    res = CliRunner().invoke(app, ["serve"])
    assert res.exit_code == 0, res.output
    info = TestClient(served["app"]).get("/v1/info").json()
    assert info["model"] == default_model_dir().name and "/" not in info["model"]


def test_the_page_file_picker_offers_every_dicom_suffix_the_loader_reads():
    # a new user's trial (stop 58): .dicom and .dic were left out of the picker
    import re
    from importlib.resources import files

    from cxrils.io import _DICOM_SUFFIXES

    page = (files("cxrils.serve") / "static" / "index.html").read_text(encoding="utf-8")
    (accept,) = re.findall(r'id="file" type="file" accept="([^"]+)"', page)
    assert set(_DICOM_SUFFIXES) | {".png", ".jpg", ".jpeg"} <= set(accept.split(","))


def test_a_port_in_use_is_one_line_before_any_claim_of_serving():
    # new-user trial: `cxrils serve` on a busy port printed "serving ... on http://..."
    # and then uvicorn's bind error and shutdown log
    import socket

    from cxrils.cli import app

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        res = CliRunner().invoke(app, ["serve", "--port", str(port)])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
