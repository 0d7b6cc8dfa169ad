"""``trio-mcp demo`` over Streamable HTTP, plus a ``slow`` tool that records its cancellation.

    python demo_http_server.py

It serves the demo server (tools echo, add, sleep; the prompt and resources) with one more tool,
``slow``, on 127.0.0.1 at a free port, the way ``trio-mcp demo --transport http --port 0`` does,
and writes ``serving MCP at URL`` to stderr when ready. Like the official-SDK peers' ``slow``
(``py_server.py``, ``ts_server.mjs``), it reports progress and, when its handler is cancelled,
writes ``CANCELLED slow <request id>`` to stderr. The server's ``on_request`` hook, called as
each request's handler ends, writes ``HANDLER <json>`` (method, request id, name, cancelled,
error code), which shows the era a client reached (``initialize`` or ``server/discover``).
SIGINT or SIGTERM stops it.
"""

from __future__ import annotations

import json
import sys

import trio

from trio_mcp import Context, RequestRecord
from trio_mcp._demo import demo_server
from trio_mcp.http._hypercorn import serve_http

CANCELLED = "CANCELLED slow "
HANDLER = "HANDLER "


def report(record: RequestRecord) -> None:
    entry = {
        "method": record.method,
        "id": record.request_id,
        "name": record.name,
        "cancelled": record.cancelled,
        "error_code": record.error_code,
    }
    sys.stderr.write(HANDLER + json.dumps(entry) + "\n")
    sys.stderr.flush()


def ready(binds: list[str]) -> None:
    sys.stderr.write("".join(f"serving MCP at {bind}/mcp\n" for bind in binds))
    sys.stderr.flush()


async def main() -> None:
    server = demo_server()
    server.on_request = report

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times, 50 ms apart; record a cancellation on stderr."""
        try:
            for step in range(1, steps + 1):
                await ctx.report_progress(step, steps, f"step {step}")
                await trio.sleep(0.05)
        except trio.Cancelled:
            sys.stderr.write(f"{CANCELLED}{ctx.request_id}\n")
            sys.stderr.flush()
            raise
        return f"done {steps}"

    await serve_http(server, port=0, on_ready=ready)


if __name__ == "__main__":
    trio.run(main)
