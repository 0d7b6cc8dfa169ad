"""``Server.hosting()``: a server's services start at the first entry and stop when it leaves;
every entry while they run (each connection of a running server) is a no-op."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import trio
import trio.testing

from trio_mcp import Server, open_client
from trio_mcp._exception_groups import single_error
from trio_mcp.server import Extension
from trio_mcp.server._hosting import Hosting


class Counted(Extension):
    """An extension whose service counts its starts and stops."""

    name = "test/counted"

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    def hosting(self) -> AbstractAsyncContextManager[None]:
        return self._hosting()

    @asynccontextmanager
    async def _hosting(self) -> AsyncIterator[None]:
        self.started += 1
        try:
            yield
        finally:
            self.stopped += 1


async def test_an_entry_while_the_services_run_starts_nothing_and_stops_nothing() -> None:
    server = Server("hosted")
    counted = Counted()
    server.use(counted)
    first, inner = server.hosting(), server.hosting()
    async with first:
        assert (counted.started, counted.stopped) == (1, 0)
        async with inner:
            assert (counted.started, counted.stopped) == (1, 0)
            assert isinstance(inner, Hosting) and inner._stack is None  # nothing kept for it
        assert (counted.started, counted.stopped) == (1, 0)
    assert (counted.started, counted.stopped) == (1, 1)
    async with server.hosting():  # the next entry starts them again
        assert (counted.started, counted.stopped) == (2, 1)
    assert (counted.started, counted.stopped) == (2, 2)


async def test_connections_of_a_running_server_share_its_services() -> None:
    """What serves the server (the HTTP app's lifespan) hosts them; three connections open and
    close inside it, and the service neither starts again nor stops until it ends."""
    server = Server("running")
    counted = Counted()
    server.use(counted)

    @server.tool()
    def ping() -> str:
        return "pong"

    async with server.hosting():
        assert (counted.started, counted.stopped) == (1, 0)
        for _ in range(3):
            async with open_client(server) as client:
                result = await client.call_tool("ping", {})
                assert result.content[0].text == "pong"  # type: ignore[union-attr]
        await trio.testing.wait_all_tasks_blocked()
        assert (counted.started, counted.stopped) == (1, 0)
    assert (counted.started, counted.stopped) == (1, 1)


async def test_a_failed_start_leaves_nothing_started_and_the_next_entry_tries_again() -> None:
    server = Server("failing")
    counted = Counted()
    server.use(counted)

    class Broken(Extension):
        name = "test/broken"
        fail = True

        def hosting(self) -> AbstractAsyncContextManager[None]:
            return self._hosting()

        @asynccontextmanager
        async def _hosting(self) -> AsyncIterator[None]:
            if self.fail:
                raise RuntimeError("cannot start")
            yield

    broken = Broken()
    server.use(broken)
    with pytest.raises(BaseException) as failed:
        async with server.hosting():
            raise AssertionError("the entry must fail")  # pragma: no cover
    assert "cannot start" in repr(single_error(failed.value))
    assert (counted.started, counted.stopped) == (1, 1)  # what had started was stopped
    broken.fail = False
    async with server.hosting():
        assert (counted.started, counted.stopped) == (2, 1)
