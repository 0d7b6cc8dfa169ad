"""Serve an MCP server over Streamable HTTP with hypercorn's trio worker, in this process."""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from typing import Protocol, cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.typing import ASGIFramework

from ._http_app import HttpOptions, McpHttpApp


class HttpServable(Protocol):
    """What :func:`serve_http` serves: a :class:`~trio_mcp.Server` (whose ``run()`` calls this,
    so this module does not import it)."""

    def http_app(self, options: HttpOptions | None = None) -> McpHttpApp: ...


async def serve_http(
    server: HttpServable,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    options: HttpOptions | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``server.http_app(options)`` on hypercorn until SIGINT or SIGTERM.

    Binds 127.0.0.1 unless told otherwise; a wider bind should come with ``allowed_hosts``.
    """
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    # hypercorn types an ASGI app with its own TypedDicts; ours takes the plain mappings the
    # ASGI specification describes. Same protocol, two spellings: hand it over as hypercorn's.
    app = cast(ASGIFramework, server.http_app(options))
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def stop_on_signal() -> None:
            async for _ in signals:
                return

        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                functools.partial(serve, app, config, shutdown_trigger=stop_on_signal)
            )
            if on_ready is not None:
                on_ready(binds)
            task_status.started(binds)
