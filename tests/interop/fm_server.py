"""A small MCP server built on fastmcp (4.2), served over stdio or Streamable HTTP.

    python -m tests.interop.fm_server stdio|http      (from the repository root)

Tools echo, add, slow (progress; a cancel writes ``CANCELLED slow <request id>`` to stderr),
book (an elicitation) and summarize (a sampling request); the prompt greet; the resource
fm://info and the template fm://greeting/{name}. fastmcp asks the client in two ways, one per
era: ``ctx.elicit`` and the session's ``create_message`` send a request in the handshake era;
in 2026-07-28 a tool returns an ``InputRequiredResult`` and reads ``ctx.input_responses`` on
the retry (its "guard pattern"); book and summarize do both. Over HTTP it serves fastmcp's
ASGI app with uvicorn on 127.0.0.1 at a free port and writes ``serving MCP at URL`` to stderr.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio
import mcp_types
import uvicorn
from fastmcp import Context, FastMCP

CANCELLED = "CANCELLED slow "
DATES = {"type": "object", "properties": {"dates": {"type": "string"}}, "required": ["dates"]}

server = FastMCP("fm-interop-server")


def modern(ctx: Context) -> bool:
    request = ctx.request_context
    return request is not None and request.protocol_version == "2026-07-28"


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool
async def slow(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times, 50 ms apart; record a cancellation on stderr."""
    try:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await anyio.sleep(0.05)
    except anyio.get_cancelled_exc_class():
        sys.stderr.write(f"{CANCELLED}{ctx.request_id}\n")
        sys.stderr.flush()
        raise
    return f"done {steps}"


@server.tool
async def book(city: str, ctx: Context) -> Any:
    """Book a trip: asks which dates."""
    if modern(ctx):
        answer = (ctx.input_responses or {}).get("dates")
        if answer is None:
            request = mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(
                    message="Which dates?", requested_schema=DATES
                )
            )
            return mcp_types.InputRequiredResult(input_requests={"dates": request})
        content = getattr(answer, "content", None) or {}
        return f"{city}, {content['dates']}"
    result = await ctx.elicit("Which dates?", response_type=str)
    return f"{city}, {getattr(result, 'data', None)}"


@server.tool
async def summarize(text: str, ctx: Context) -> Any:
    """Summarize with the client's model."""
    if modern(ctx):
        answer = (ctx.input_responses or {}).get("summary")
        if answer is None:
            request = mcp_types.CreateMessageRequest(
                params=mcp_types.CreateMessageRequestParams(
                    messages=[
                        mcp_types.SamplingMessage(
                            role="user",
                            content=mcp_types.TextContent(type="text", text=f"Summarize: {text}"),
                        )
                    ],
                    max_tokens=50,
                )
            )
            return mcp_types.InputRequiredResult(input_requests={"summary": request})
        return f"summary: {answer.content.text}"  # type: ignore[union-attr]
    # fastmcp 4.2 has no ctx.sample any more: the session's own request.
    result = await ctx.session.create_message(
        messages=[
            mcp_types.SamplingMessage(
                role="user", content=mcp_types.TextContent(type="text", text=f"Summarize: {text}")
            )
        ],
        max_tokens=50,
        related_request_id=ctx.request_id,
    )
    return f"summary: {result.content.text}"  # type: ignore[union-attr]


@server.prompt
def greet(name: str) -> str:
    """A greeting for someone."""
    return f"Please greet {name}."


@server.resource("fm://info", mime_type="text/plain")
def info() -> str:
    """About this server."""
    return "served by fastmcp"


@server.resource("fm://greeting/{name}", mime_type="text/plain")
def greeting(name: str) -> str:
    """A greeting by name."""
    return f"Hello, {name}!"


async def serve_http() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(server.http_app(path="/mcp"), log_level="warning", lifespan="on")
    sys.stderr.write(f"serving MCP at http://127.0.0.1:{port}/mcp\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("stdio", "http"):
        sys.stderr.write("usage: python -m tests.interop.fm_server stdio|http\n")
        sys.exit(2)
    if sys.argv[1] == "http":
        anyio.run(serve_http)
    else:
        server.run(transport="stdio", show_banner=False)
