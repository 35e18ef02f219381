"""``--ray-address`` is checked before Ray's own connection, which retries for minutes."""

import socket
import time

import pytest

from cxrils.pipeline.ray_runner import check_ray_address
from cxrils.pipeline.stages import RunError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_nothing_listens_at_fails_at_once():
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(RunError, match=rf"--ray-address '127\.0\.0\.1:{port}': no Ray cluster answers there"):
        check_ray_address(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_listening_address_passes(scheme):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_ray_address(f"{scheme}127.0.0.1:{server.getsockname()[1]}")


@pytest.mark.parametrize("address", ["auto", "local"])
def test_ray_keywords_are_left_to_ray(address):
    check_ray_address(address)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.1:port", ":6379", "ray://"])
def test_a_malformed_address_is_named(address):
    with pytest.raises(RunError, match="expected host:port, ray://host:port, auto or local"):
        check_ray_address(address)


def test_generate_checks_the_address_before_reading_the_input(tmp_path):
    from cxrils.config import Config
    from cxrils.pipeline.runner import generate

    port = _free_port()
    with pytest.raises(RunError, match="no Ray cluster answers there"):
        generate(
            tmp_path / "no-such-input.csv", tmp_path / "ds", Config(), runner="ray", ray_address=f"127.0.0.1:{port}"
        )
    assert not (tmp_path / "ds").exists()
