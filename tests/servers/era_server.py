"""A server for the era matrix: the same tools answer in either era.

Run as a script it serves over stdio; ``pinned`` pins the handshake version to 2025-06-18.
"""

from __future__ import annotations

import sys

import trio

from trio_mcp import Context, Server

FORM = {"type": "object", "properties": {"answer": {"type": "string"}}}


def era_server(pinned: bool = False) -> Server:
    server = Server("era-matrix", "1.0", protocol_version="2025-06-18" if pinned else None)

    @server.tool()
    async def echo(text: str, ctx: Context) -> str:
        return f"{text} ({'modern' if ctx.modern else 'handshake'})"

    @server.tool()
    async def ask(ctx: Context) -> str:
        reply = await ctx.elicit("Question?", FORM)
        return f"answer: {(reply.content or {}).get('answer')}"

    @server.tool()
    async def slow(ctx: Context) -> str:
        for step in range(1, 10_000):
            await ctx.report_progress(step)
            await trio.sleep(0.05)
        return "never"

    return server


if __name__ == "__main__":
    trio.run(era_server("pinned" in sys.argv[1:]).serve_stdio)
