"""What the test modules share: the ``invariant`` marker, the hypothesis settings, and fixtures
used by several modules (built on the pytest plugin ``trio_mcp.testing``)."""

from __future__ import annotations

import pytest

# Imported below before pytest loads it as the plugin: rewrite its asserts all the same.
pytest.register_assert_rewrite("trio_mcp.testing")

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import settings  # noqa: E402

from trio_mcp import Server  # noqa: E402
from trio_mcp._demo import demo_server  # noqa: E402
from trio_mcp.testing import HttpServer  # noqa: E402

from ._http import Served  # noqa: E402
from .deploy._services import RedisCluster  # noqa: E402

# The plugin is registered by trio_mcp's entry point once installed; named here too, so the
# suite runs from a checkout (pytest skips a plugin registered already under this name).
pytest_plugins = ["trio_mcp.testing"]

# A deadline per example is a timing assertion, and these machines are shared and noisy: a
# property test fails on what it checks, never on how long an example took.
settings.register_profile("trio_mcp", deadline=None)
settings.load_profile("trio_mcp")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "invariant(n): this test fails without invariant n of the design (the table in "
        "docs/design.md lists them; tests/test_invariants.py keeps the two in step)",
    )


@pytest.fixture
def mcp_server() -> Server:
    """The server of the plugin's fixtures (``mcp_client``, ``mcp_http``, ...) in a module that
    names none of its own: the demo server."""
    return demo_server()


@pytest.fixture
def demo_http(mcp_http: HttpServer) -> Served:
    """The demo server on Streamable HTTP with the default options, behind a real hypercorn on
    loopback (the plugin's ``mcp_http``); ``demo_http.app.server`` is the server itself."""
    return Served.of(mcp_http)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A real three-primary Redis Cluster on 127.0.0.1, started once for the session by the
    first test that asks (a few seconds) and shared: a test empties it (``flush()``) or keeps
    to a key prefix of its own."""
    cluster = RedisCluster(Path(tmp_path_factory.mktemp("redis-cluster")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
