"""Serve an MCP server over Streamable HTTP with hypercorn's trio worker, in this process."""

from __future__ import annotations

import functools
import signal
import socket
from collections.abc import AsyncIterator, Callable
from typing import Protocol, cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.typing import ASGIFramework

from ._app import McpHttpApp
from ._options import HttpOptions


class HttpServable(Protocol):
    """What :func:`serve_http` serves: a :class:`~trio_mcp.Server` (whose ``run()`` calls this,
    so this module does not import it)."""

    def http_app(self, options: HttpOptions | None = None) -> McpHttpApp: ...


async def serve_http(
    server: HttpServable,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    fd: int | None = None,
    options: HttpOptions | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``server.http_app(options)`` on hypercorn until SIGINT or SIGTERM, then drain.

    Binds 127.0.0.1 unless told otherwise; a wider bind should come with
    ``HostRules.allowed_hosts``. ``fd`` serves on a TCP socket that is bound and listening
    already (one a supervisor holds across restarts, systemd's socket activation) instead of
    binding ``host:port``; the serving closes it.

    The app starts (its stores, its bus, its relay, the server's lifespan) before any port is
    bound (a socket handed over by ``fd`` is bound already, and nothing is served on it
    before then): a start that fails raises its own error (``TaskStoreUnavailable``, ``BusError``,
    ...) and nothing is ever served, so a process manager sees the process end and restarts
    it; hypercorn's own lifespan, which goes on serving without the app after a lifespan
    error, is not trusted with it. A task of the app that fails while serving (a fault: the
    stores ride out a Redis that comes and goes) ends the serving too.

    The first signal starts :meth:`McpHttpApp.drain`: the readiness path answers 503 at once,
    new requests get 503 with ``Retry-After`` and ``Connection: close``, the requests in flight
    get ``HttpOptions.drain_grace`` seconds to finish, and those still running then end with a
    JSON-RPC error that tells their clients to retry; only then does hypercorn stop. A second
    signal cuts the grace short.
    """
    config = Config()
    if fd is None:
        config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    else:
        _no_delay(fd)
        config.bind = [f"fd://{fd}"]
    config.accesslog = None
    # The drain did the waiting: what is left once hypercorn stops are GET streams and idle
    # keep-alive connections, which it may end at once.
    config.graceful_timeout = 1.0
    mcp_app = server.http_app(options)
    # hypercorn types an ASGI app with its own TypedDicts; ours takes the plain mappings the
    # ASGI specification describes. Same protocol, two spellings: hand it over as hypercorn's.
    app = cast(ASGIFramework, mcp_app)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def stop_on_signal() -> None:
            async for _ in signals:
                break
            await _drain(mcp_app, signals)

        # Held here, the app's lifespan answers hypercorn's at once (it is running already).
        async with mcp_app.running(), trio.open_nursery() as nursery:
            binds = await nursery.start(
                functools.partial(serve, app, config, shutdown_trigger=stop_on_signal)
            )
            if on_ready is not None:
                on_ready(binds)
            task_status.started(binds)


def _no_delay(fd: int) -> None:
    """TCP_NODELAY on a listening socket handed over: hypercorn sets it only on the sockets it
    binds, and the accepted ones inherit it (without it a small answer can wait for an ACK)."""
    sock = socket.socket(fileno=fd)
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    finally:
        sock.detach()


async def _drain(app: McpHttpApp, signals: AsyncIterator[int]) -> None:
    """``app.drain()``, whose grace a second signal cuts short."""
    app.begin_drain()
    with trio.move_on_after(app.options.drain_grace) as grace:
        async with trio.open_nursery() as nursery:

            async def cut_on_signal() -> None:
                async for _ in signals:
                    grace.cancel()
                    return

            nursery.start_soon(cut_on_signal)
            await app.wait_idle()
            nursery.cancel_scope.cancel()
    await app.end_requests()
