"""A server with a tool that asks before it acts (a multi round-trip request in the modern era),
for the requestState tests across processes: ``trio-mcp serve tests/servers/asking_server.py``.
Its keys come from the command line or the environment, as a deployed server's do."""

from __future__ import annotations

from trio_mcp import Context, Server

server = Server("asking")

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
async def greet(ctx: Context) -> str:
    """Ask the user's name, then greet them (the answer arrives on the retry)."""
    ctx.state["asked_by"] = ctx.state.get("asked_by", "this process")
    answer = await ctx.elicit("Your name?", FORM)
    if answer.action != "accept" or answer.content is None:
        return "no name"
    return f"Hello {answer.content['name']}"
