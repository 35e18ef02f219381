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
    monkeypatch.setattr(uvicorn, "run", lambda application, **kw: served.setdefault("app", application))
    monkeypatch.setattr("cxrils.cli.serve.check_listen", lambda host, port: None)
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


def test_every_address_of_the_host_is_checked_and_a_bad_host_is_named(monkeypatch):
    # review: a name with several addresses (localhost: 127.0.0.1 and ::1) is served on
    # all of them by uvicorn, so each must be free; "" is every interface
    import socket

    import typer

    from cxrils.cli import common

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        two = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in ("127.0.0.2", "127.0.0.1")]
        monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: two)
        with pytest.raises(typer.Exit):
            common.check_listen("twohomed", port)
        monkeypatch.undo()
        common.check_listen("", 0)  # every interface, any free port: no error
    from cxrils.cli import app

    res = CliRunner().invoke(app, ["serve", "--host", "no.such.host.invalid", "--port", "8000"])
    assert res.exit_code == 2 and res.output.startswith("error: cannot listen on no.such.host.invalid:8000: ")
    assert "Unknown error" not in res.output and len(res.output.strip().splitlines()) == 1
    # a malformed name is one line too, not a traceback of the idna codec
    res = CliRunner().invoke(app, ["serve", "--host", "a..b", "--port", "8000"])
    assert res.exit_code == 2 and res.output.startswith("error: cannot listen on a..b:8000: ")
