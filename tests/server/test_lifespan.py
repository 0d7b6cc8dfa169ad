"""``Server(lifespan=...)``: a state entered once before anything is served, shared by every
connection, closed after the last one; its startup failures on stdio (a real child process) and
HTTP (a real hypercorn); and what happens when an ASGI server runs no lifespan."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.utils import LifespanFailureError

from trio_mcp import Context, LifespanFailed, Server, open_client
from trio_mcp._exception_groups import single_error

from .._http import initialize_body, serving
from ..servers.lifespan_server import Pool, lifespan_server

SERVER = Path(__file__).resolve().parent.parent / "servers" / "lifespan_server.py"
GUARD = 30


def text(result: Any) -> str:
    return str(result.content[0].text)


def events(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def test_one_state_for_two_connections_closed_after_the_last(tmp_path: Path) -> None:
    log = tmp_path / "log"
    server = lifespan_server(log)
    async with open_client(server) as first:
        assert events(log) == ["open"]
        async with open_client(server) as second:
            assert text(await first.call_tool("use")) == "lifespan_server: use 1"
            assert text(await second.call_tool("use")) == "lifespan_server: use 2"
        assert events(log) == ["open"]  # the first connection still serves
        assert text(await first.call_tool("use")) == "lifespan_server: use 3"
    assert events(log) == ["open", "close"]
    with pytest.raises(RuntimeError, match="not running"):
        server.lifespan_state  # noqa: B018


async def test_the_state_outlives_the_first_connection_while_another_serves(
    tmp_path: Path,
) -> None:
    """The first connection ends (its client cancels its serving task) before the second: the
    lifespan runs on in its own task, and is exited once the second ended too."""
    log = tmp_path / "log"
    server = lifespan_server(log)
    second_open, first_closed = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:

        async def second() -> None:
            async with open_client(server) as client:
                second_open.set()
                await first_closed.wait()
                assert text(await client.call_tool("use")) == "lifespan_server: use 2"
                assert events(log) == ["open"]

        async with open_client(server) as first:
            assert text(await first.call_tool("use")) == "lifespan_server: use 1"
            nursery.start_soon(second)
            await second_open.wait()
        first_closed.set()
    assert events(log) == ["open", "close"]


async def test_holding_it_around_connections_that_come_and_go(tmp_path: Path) -> None:
    log = tmp_path / "log"
    server = lifespan_server(log)
    async with server.running() as pool:
        assert isinstance(pool, Pool) and server.lifespan_state is pool
        for expected in ("use 1", "use 2"):
            async with open_client(server) as client:
                assert text(await client.call_tool("use")).endswith(expected)
        assert events(log) == ["open"]
    assert events(log) == ["open", "close"] and pool.closed


async def test_a_lifespan_may_run_tasks_of_its_own(autojump_clock: Any) -> None:
    ticks: list[int] = []

    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[list[int]]:
        async def tick() -> None:
            while True:
                ticks.append(len(ticks))
                await trio.sleep(1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            yield ticks
            nursery.cancel_scope.cancel()

    server = Server("ticking", lifespan=lifespan)

    @server.tool()
    async def count(ctx: Context) -> int:
        state: list[int] = ctx.lifespan  # the typed pattern: an annotation narrows Any
        return len(state)

    async with open_client(server) as client:
        await trio.sleep(2.5)
        assert text(await client.call_tool("count")) == "3"


async def test_lifespan_as_checks_the_type() -> None:
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[str]:
        yield "not a pool"

    server = Server("typed", lifespan=lifespan)

    @server.tool()
    def wrong(ctx: Context) -> str:
        return ctx.lifespan_as(Pool).name

    @server.tool()
    def none(ctx: Context) -> str:
        return repr(ctx.lifespan)

    plain = Server("plain")
    plain.tool()(none)
    async with open_client(server) as client:
        result = await client.call_tool("wrong")
        assert result.is_error and "internal error" in text(result)
        assert text(await client.call_tool("none")) == "'not a pool'"
    async with open_client(plain) as client:
        assert text(await client.call_tool("none")) == "None"


async def test_a_startup_failure_in_memory_is_lifespan_failed(tmp_path: Path) -> None:
    server = lifespan_server(tmp_path / "log", fail=True)
    with pytest.raises(LifespanFailed) as failed:
        async with server.running():
            raise AssertionError("never entered")
    assert str(failed.value) == (
        "the lifespan of server 'lifespan_server' failed at startup: ConnectionRefusedError: "
        "the database at db://nowhere refused the connection"
    )
    assert isinstance(failed.value.__cause__, ConnectionRefusedError)


# -- stdio: a real child process -------------------------------------------------------------


async def test_stdio_enters_the_lifespan_once_and_closes_it_at_the_end(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with trio.fail_after(GUARD):
        async with open_client([sys.executable, str(SERVER), str(log)]) as client:
            assert events(log) == ["open"]
            assert text(await client.call_tool("use")) == "lifespan_server: use 1"
            assert text(await client.call_tool("use")) == "lifespan_server: use 2"
    assert events(log) == ["open", "close"]


async def test_a_stdio_startup_failure_is_one_line_and_exit_1(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with trio.fail_after(GUARD):
        # stdin stays open: the server exits without waiting for a line.
        process = await trio.lowlevel.open_process(
            [sys.executable, str(SERVER), str(log), "fail"],
            stdin=-1,
            stdout=-1,
            stderr=-1,
        )
        assert process.stderr is not None and process.stdout is not None
        stderr = b""
        async for chunk in process.stderr:
            stderr += chunk
        assert await process.wait() == 1
        assert await process.stdout.receive_some() == b""
        assert process.stdin is not None
        await process.stdin.aclose()
    assert stderr.decode().splitlines() == [
        "lifespan_server: cannot start: the lifespan of server 'lifespan_server' failed at "
        "startup: ConnectionRefusedError: the database at db://nowhere refused the connection"
    ]
    assert events(log) == []


# -- HTTP: a real hypercorn ------------------------------------------------------------------


async def test_http_shares_one_state_between_sessions(tmp_path: Path) -> None:
    log = tmp_path / "log"
    server = lifespan_server(log)
    async with serving(server) as served:
        assert events(log) == ["open"]  # at startup, before any request
        async with open_client(served.url, mode="legacy") as a, open_client(served.url) as b:
            assert text(await a.call_tool("use")) == "lifespan_server: use 1"
            assert text(await b.call_tool("use")) == "lifespan_server: use 2"
        assert events(log) == ["open"]
    assert events(log) == ["open", "close"]


async def test_an_http_startup_failure_is_lifespan_startup_failed(tmp_path: Path) -> None:
    app = lifespan_server(tmp_path / "log", fail=True).http_app()
    sent: list[dict[str, Any]] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def record(message: Any) -> None:
            if scope["type"] == "lifespan":
                sent.append(message)
            await send(message)

        await app(scope, receive, record)

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    with trio.fail_after(GUARD), pytest.raises(BaseException) as raised:
        await serve(recording, config, shutdown_trigger=trio.sleep_forever)
    assert isinstance(single_error(raised.value), LifespanFailureError)
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": "the lifespan of server 'lifespan_server' failed at startup: "
            "ConnectionRefusedError: the database at db://nowhere refused the connection",
        }
    ]


async def test_server_run_http_says_why_it_cannot_start(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        done = await trio.run_process(
            [sys.executable, str(SERVER), str(tmp_path / "log"), "fail", "http"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[-1] == (
        "lifespan_server: cannot start: the lifespan of server 'lifespan_server' failed at "
        "startup: ConnectionRefusedError: the database at db://nowhere refused the connection"
    )


async def test_without_an_asgi_lifespan_nothing_is_served_and_nothing_entered(
    tmp_path: Path,
) -> None:
    """Mounted in a host app that forwards no lifespan: every request is a 503 saying so, and
    the server's lifespan never starts; the host can hold it with ``app.running()``."""
    log = tmp_path / "log"
    async with serving(lifespan_server(log), lifespan=False) as served:
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 503
        assert "lifespan did not run" in orjson.loads(response.content)["error"]["message"]
        assert events(log) == []
        async with served.app.running():
            assert events(log) == ["open"]
            async with open_client(served.url, mode="legacy") as client:
                assert text(await client.call_tool("use")) == "lifespan_server: use 1"
        assert events(log) == ["open", "close"]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_both_eras_read_the_state(mode: str, tmp_path: Path) -> None:
    server = lifespan_server(tmp_path / "log")
    async with serving(server) as served, open_client(served.url, mode=mode) as client:
        assert text(await client.call_tool("use")) == "lifespan_server: use 1"
