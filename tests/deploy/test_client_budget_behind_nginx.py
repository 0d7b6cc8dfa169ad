"""The per-client session budget behind a real nginx (run from ``deploy/nginx.conf``, which sets
``X-Forwarded-For`` with ``$proxy_add_x_forwarded_for``) in front of one ``trio-mcp serve``
backend with ``--max-sessions-per-client 2``. The clients connect to nginx from two loopback
addresses (Linux routes all of 127.0.0.0/8 to ``lo``), so nginx sees two clients while the
backend sees one peer, nginx. With ``--client-address-header x-forwarded-for`` each client has
its own budget, which it cannot dodge by sending a header of its own; without it, every client
shares one.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import trio

from .._http import VERSION, initialize_body
from ._fleet import fleet
from ._streams import open_session, session_headers

#: A hang guard for each test (a backend and nginx started, a few requests).
GUARD = 60
#: The per-client budget the backend is given.
BUDGET = 2
LIMIT = ["--max-sessions-per-client", str(BUDGET)]
TRUST_NGINX = ["--client-address-header", "x-forwarded-for"]


@asynccontextmanager
async def clients_from(*addresses: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """An HTTP client per source address, each connecting from that address."""
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=httpx.AsyncHTTPTransport(local_address=address), timeout=10
                )
            )
            for address in addresses
        ]


async def initialize(
    client: httpx.AsyncClient, url: str, forwarded_for: str | None = None
) -> httpx.Response:
    """One ``initialize`` POST (a handshake-era session's first request)."""
    extra = {} if forwarded_for is None else {"x_forwarded_for": forwarded_for}
    return await client.post(url, json=initialize_body(VERSION), headers=session_headers(**extra))


def assert_over_budget(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert "retry-after" in response.headers
    assert "mcp-session-id" not in response.headers


async def test_behind_nginx_each_client_has_its_own_session_budget(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with (
            fleet(tmp_path, 1, options=[*LIMIT, *TRUST_NGINX]) as running,
            clients_from("127.0.0.2", "127.0.0.3") as (first, second),
        ):
            for _ in range(BUDGET):
                await open_session(first, running.url)
            assert_over_budget(await initialize(first, running.url))
            # A header of the client's own is kept by nginx, which appends the address it
            # sees; the backend reads the last value, so the client stays what it is.
            assert_over_budget(await initialize(first, running.url, forwarded_for="127.0.0.9"))
            assert_over_budget(
                await initialize(first, running.url, forwarded_for="127.0.0.9, 127.0.0.8")
            )
            # The other client's budget is untouched by the first one's.
            for _ in range(BUDGET):
                await open_session(second, running.url)
            assert_over_budget(await initialize(second, running.url))


async def test_without_the_header_every_client_behind_nginx_shares_one_budget(
    tmp_path: Path,
) -> None:
    """What ``--client-address-header`` fixes: the backend's peer is nginx, for every client."""
    with trio.fail_after(GUARD):
        async with (
            fleet(tmp_path, 1, options=LIMIT) as running,
            clients_from("127.0.0.2", "127.0.0.3") as (first, second),
        ):
            for _ in range(BUDGET):
                await open_session(first, running.url)
            assert_over_budget(await initialize(second, running.url))
