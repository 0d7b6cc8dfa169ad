"""The benchmark server built on trio_mcp, served over stdio.

    python trio_server.py [--stamps PATH]

The same two tools as ``trio-mcp demo`` (``echo``, and ``sleep`` with progress every 100 ms when
the caller sent a progress token), and the same as every other benchmark server. When ``sleep``
ends without finishing (it was cancelled), its ``finally`` clause appends a CLOCK_MONOTONIC
timestamp in nanoseconds to the stamps file: the moment the handler observed the cancellation.

One difference from the demo, shared by every benchmark server: with no progress token, ``sleep``
waits once instead of waking every 100 ms, so that 10,000 parked calls cost no CPU.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Annotated

import trio

from trio_mcp import Context, Server


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def build(stamps_fd: int | None) -> Server:
    # The scale benchmark parks 10,000 requests on one connection: above the default bound on
    # requests in flight (4,096, which refuses more with -32600), so it is raised here; the SDK
    # servers it is compared with have no bound.
    server = Server("trio-mcp-bench", "0.1.0", max_in_flight=20_000)

    @server.tool()
    async def echo(text: Annotated[str, "The text to send back"]) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def sleep(
        seconds: Annotated[float, {"minimum": 0, "maximum": 3600, "description": "How long"}],
        ctx: Context,
    ) -> str:
        """Sleep, reporting progress every 100 ms when asked to; cancellable at any moment."""
        finished = False
        try:
            if ctx.meta.get("progressToken") is None:
                await trio.sleep(seconds)
            else:
                deadline = trio.current_time() + seconds
                ticks = max(1, round(seconds * 10))
                for tick in range(1, ticks + 1):
                    await trio.sleep_until(min(deadline, trio.current_time() + 0.1))
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
    trio.run(build(fd).serve_stdio)


if __name__ == "__main__":
    main()
