"""What the server's conveniences call: ``Server.http_app()`` and ``Server.run("http")``.

The server module imports this room only inside those two methods, so a server that is never
served over HTTP loads nothing of it (nor hypercorn, h11 or wsproto).
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING

import trio

from ._app import McpHttpApp, start_refusal
from ._hypercorn import serve_http
from ._legacy_sse import SseEndpoint
from ._options import HttpOptions

if TYPE_CHECKING:
    from ..server import Server


def build_app(server: Server, options: HttpOptions | None) -> McpHttpApp:
    """The server's ASGI app: Streamable HTTP, with the HTTP+SSE endpoint unless
    ``legacy_sse`` is None (WebSocket is the app's own, at ``websocket.path``)."""
    app = McpHttpApp(server, options)
    legacy = app.options.legacy_sse
    if legacy is not None:
        app.sse = SseEndpoint(app, legacy.path, legacy.messages_path)
    return app


def run_blocking(
    server: Server,
    transport: str,
    *,
    host: str,
    port: int,
    options: HttpOptions | None,
    prog: str | None = None,
    fd: int | None = None,
) -> None:
    """``trio.run`` of :func:`serve_http`, announcing the endpoint ``transport`` names ("http",
    "sse" or "ws") on standard error; a start the app refuses (a store, the bus or the
    server's lifespan that cannot start) is one line, ``PROG: cannot start: why`` (``prog``:
    the server's name unless given), and exit status 1, not a traceback."""
    chosen = options or HttpOptions()
    endpoint = chosen.path
    if transport == "sse":
        endpoint = chosen.legacy_sse.path if chosen.legacy_sse is not None else ""
        if not endpoint:
            raise ValueError("transport 'sse' needs HttpOptions(legacy_sse=LegacySse()), not None")
    ws_path = chosen.websocket.path if chosen.websocket is not None else None
    if transport == "ws" and ws_path is None:
        raise ValueError(
            "transport 'ws' needs a WebSocket endpoint: HttpOptions(websocket=WebSocketOptions())"
        )
    serving = False

    def ready(binds: list[str]) -> None:
        nonlocal serving
        serving = True
        if transport == "ws":  # http://... -> ws://..., https://... -> wss://...
            lines = [f"serving MCP over WebSocket at ws{b[4:]}{ws_path}\n" for b in binds]
        else:
            lines = [f"serving MCP at {b}{endpoint}\n" for b in binds]
        sys.stderr.write("".join(lines))
        sys.stderr.flush()

    try:
        trio.run(
            functools.partial(
                serve_http,
                server,
                host=host,
                port=port,
                fd=fd,
                options=options,
                on_ready=ready,
            )
        )
    except Exception as exc:
        reason = None if serving else start_refusal(exc)
        if reason is None:
            raise
        sys.stderr.write(f"{prog or server.info.name}: cannot start: {reason}\n")
        sys.stderr.flush()
        raise SystemExit(1) from None
