"""trio_mcp's demo with the tools that ask the client, for the new-generation peers' clients.

    python -m tests.interop.peer_server stdio|http      (from the repository root)

The demo server (echo, add, sleep; the greeting prompt; the readme and greeting resources) and:

- ``slow``: progress ``steps`` times, 50 ms apart; when cancelled it writes
  ``CANCELLED slow <request id>`` to stderr, and ``cancelled`` lists the ids of the ``slow``
  calls cancelled so far in this process (so a client shows its cancel reached the handler
  while it was still connected);
- ``book``: one form elicitation (``Which dates?``);
- ``summarize``: one sampling request;
- ``plan``: an elicitation and a sampling request asked together, then a second elicitation
  (two round trips in the modern era, MRTR);
- the ``confirm`` prompt, which elicits before it answers (``prompts/get`` may ask too).

Over HTTP it binds 127.0.0.1 at a free port and writes ``serving MCP at URL`` to stderr.
"""

from __future__ import annotations

import sys

import trio

from trio_mcp import Context, Server
from trio_mcp._demo import demo_server
from trio_mcp.http._hypercorn import serve_http
from trio_mcp.protocol._types import PromptMessage, TextContent

CANCELLED = "CANCELLED slow "
DATES = {"type": "object", "properties": {"dates": {"type": "string"}}, "required": ["dates"]}
#: The request ids of the cancelled ``slow`` calls, in this process.
CANCELLED_IDS: list[str] = []
YES = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def sampled_text(result: object) -> str:
    content = getattr(result, "content", None)
    return str(getattr(content, "text", content))


def peer_server() -> Server:
    server = demo_server()

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times, 50 ms apart; record a cancellation on stderr."""
        try:
            for step in range(1, steps + 1):
                await ctx.report_progress(step, steps, f"step {step}")
                await trio.sleep(0.05)
        except trio.Cancelled:
            CANCELLED_IDS.append(str(ctx.request_id))
            sys.stderr.write(f"{CANCELLED}{ctx.request_id}\n")
            sys.stderr.flush()
            raise
        return f"done {steps}"

    @server.tool()
    async def cancelled() -> list[str]:
        """The ids of the ``slow`` calls cancelled so far."""
        return list(CANCELLED_IDS)

    @server.tool()
    async def book(city: str, ctx: Context) -> str:
        """Book a trip: asks the user which dates."""
        answer = await ctx.elicit("Which dates?", DATES)
        if answer.action != "accept" or answer.content is None:
            return f"nothing booked ({answer.action})"
        return f"{city}, {answer.content['dates']}"

    @server.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """Summarize ``text`` with the client's model."""
        result = await ctx.sample(f"Summarize: {text}", max_tokens=50)
        return f"summary: {sampled_text(result)}"

    @server.tool()
    async def plan(city: str, ctx: Context) -> str:
        """Ask for dates and a model's idea together, then for a confirmation."""
        dates, idea = await ctx.ask_together(
            ctx.elicit("Which dates?", DATES, key="dates"),
            ctx.sample(f"An idea for {city}", max_tokens=50, key="idea"),
        )
        ok = await ctx.elicit(f"Plan {city}?", YES, key="ok")
        if dates.content is None or ok.content is None or not ok.content["ok"]:
            return "not planned"
        return f"{city}, {dates.content['dates']}: {sampled_text(idea)}"

    @server.prompt(description="A prompt that asks the user first")
    async def confirm(topic: str, ctx: Context) -> list[PromptMessage]:
        answer = await ctx.elicit(f"Write about {topic}?", YES)
        ok = answer.content is not None and answer.content["ok"]
        text = f"Write about {topic}." if ok else "Write nothing."
        return [PromptMessage(role="user", content=TextContent(text))]

    return server


def ready(binds: list[str]) -> None:
    sys.stderr.write("".join(f"serving MCP at {bind}/mcp\n" for bind in binds))
    sys.stderr.flush()


async def main(transport: str) -> None:
    server = peer_server()
    if transport == "http":
        await serve_http(server, port=0, on_ready=ready)
    else:
        await server.serve_stdio()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("stdio", "http"):
        sys.stderr.write("usage: python -m tests.interop.peer_server stdio|http\n")
        sys.exit(2)
    trio.run(main, sys.argv[1])
