"""The demo server plus a ``backend`` tool that says which process answered (what the fleet
tests count per backend behind the load balancer); ``ask``, a multi round-trip tool that says
which process asked and which one took the answer; ``chatty``, logs at two levels; ``grow``,
a tools list change.

    trio-mcp serve tests/servers/fleet_server.py --transport http --port P --node-id n1
"""

from __future__ import annotations

import os

from trio_mcp import Context
from trio_mcp._demo import demo_server

server = demo_server()


@server.tool()
async def backend() -> dict[str, int | str | None]:
    """The pid of the process that ran this call, and its node id (``TRIO_MCP_NODE_ID``)."""
    return {"pid": os.getpid(), "node": os.environ.get("TRIO_MCP_NODE_ID")}


FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
async def ask(ctx: Context) -> dict[str, int | str | None]:
    """Ask a name; in the modern era the answer arrives on a retry, which any process may take
    when all share the state keys."""
    ctx.state.setdefault("asked_by", os.getpid())
    answer = await ctx.elicit("Your name?", FORM)
    name = answer.content.get("name") if answer.content is not None else None
    return {"asked_by": ctx.state["asked_by"], "answered_by": os.getpid(), "name": name}


@server.tool()
async def chatty(ctx: Context) -> dict[str, int | str | None]:
    """Log at info and at error (the client's ``logging/setLevel`` decides which it gets),
    and say which node sent them."""
    await ctx.info("fine")
    await ctx.error("bad")
    return {"pid": os.getpid(), "node": os.environ.get("TRIO_MCP_NODE_ID")}


@server.tool()
async def grow(name: str) -> dict[str, int | str]:
    """Add a tool called ``name``: a tools list change, which the listeners of every process
    hear when the processes share a bus (``--redis-url``)."""

    async def grown() -> str:
        return name

    server.tool(name=name)(grown)
    return {"name": name, "pid": os.getpid()}


@server.tool()
async def keep(ctx: Context, name: str, value: str) -> dict[str, int | str | None]:
    """Store ``value`` in the session state (the fleet's, with ``--redis-url``)."""
    await ctx.session_state.set(name, value)
    return {"node": os.environ.get("TRIO_MCP_NODE_ID"), "value": value}


@server.tool()
async def kept(ctx: Context, name: str) -> dict[str, int | str | None]:
    """What the session state holds under ``name``, and which node read it."""
    return {"node": os.environ.get("TRIO_MCP_NODE_ID"), "value": await ctx.session_state.get(name)}
