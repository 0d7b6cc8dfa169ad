"""The benchmark server built on the official Python SDK (``mcp``), served over stdio.

    python py_server.py [--stamps PATH]

The same tools as every benchmark server: ``echo``, and ``sleep`` with progress every 100 ms when
the caller sent a progress token (with none, one wait). A cancelled ``sleep`` appends a
CLOCK_MONOTONIC timestamp in nanoseconds to the stamps file from its ``finally`` clause.
Tools are ``async def`` (a plain ``def`` tool would run in a worker thread) and return plain
content (``structured_output=False``), so every server answers ``echo`` with the same bytes.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def build(stamps_fd: int | None) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("py-sdk-bench", version="1.0.0", log_level="WARNING")

    @server.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(structured_output=False)
    async def sleep(seconds: float, ctx: Context[Any, Any]) -> str:
        """Sleep, reporting progress every 100 ms when asked to; cancellable at any moment."""
        finished = False
        try:
            params = ctx.request_context.params or {}
            meta = params.get("_meta") or {}
            if meta.get("progressToken") is None:
                await anyio.sleep(seconds)
            else:
                deadline = anyio.current_time() + seconds
                ticks = max(1, round(seconds * 10))
                for tick in range(1, ticks + 1):
                    wake = min(deadline, anyio.current_time() + 0.1)
                    await anyio.sleep(max(0.0, wake - anyio.current_time()))
                    await ctx.report_progress(min(tick / 10, seconds), seconds, "sleeping")
            finished = True
        finally:
            if not finished and stamps_fd is not None:
                os.write(stamps_fd, f"{now_ns()}\n".encode())
        return f"slept {seconds:g}s"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stamps", help="append cancellation timestamps (ns) to this file")
    args = parser.parse_args()
    fd = None
    if args.stamps:
        fd = os.open(args.stamps, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    build(fd).run()


if __name__ == "__main__":
    main()
