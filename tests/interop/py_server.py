"""A small MCP server built on the official Python SDK (``mcp``), served over stdio.

``test_official_servers.py`` drives it with trio_mcp's client. The ``slow`` tool reports
progress and, when its request is cancelled, writes ``CANCELLED slow <request id>`` to stderr,
which the test captures to prove the cancel reached and stopped the handler.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

server: MCPServer[Any] = MCPServer("py-interop-server", version="1.0.0", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
async def slow(steps: int, ctx: Context[Any, Any]) -> str:
    """Report progress ``steps`` times, 50 ms apart; record a cancellation on stderr."""
    try:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await anyio.sleep(0.05)
    except anyio.get_cancelled_exc_class():
        sys.stderr.write(f"CANCELLED slow {ctx.request_id}\n")
        sys.stderr.flush()
        raise
    return f"done {steps}"


@server.prompt()
def greet(name: str) -> str:
    """A greeting for someone."""
    return f"Please greet {name}."


@server.resource("py://info", mime_type="text/plain")
def info() -> str:
    """About this server."""
    return "served by the official Python SDK"


@server.resource("py://greeting/{name}", mime_type="text/plain")
def greeting(name: str) -> str:
    """A greeting by name."""
    return f"Hello, {name}!"


if __name__ == "__main__":
    server.run()
