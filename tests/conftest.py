"""What the test modules share: the ``invariant`` marker, the hypothesis settings, and fixtures
used by several modules."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import settings

from trio_mcp._demo import demo_server

from ._http import Served, serving

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
async def demo_http() -> AsyncIterator[Served]:
    """The demo server on Streamable HTTP with the default options, behind a real hypercorn on
    loopback; ``demo_http.app.server`` is the server itself."""
    async with serving(demo_server()) as served:
        yield served
