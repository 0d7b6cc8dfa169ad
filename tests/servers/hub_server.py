"""The demo server plus what crosses workers on Redis, each kind once: ``grow`` (a tools list
change, on the bus), ``ask`` (an elicitation whose answer may reach another worker, on the
relay) and ``hold`` (a task whose cancel may come through another worker, a task status
change on the bus). ``hold`` writes ``<tag>.waiting`` into ``$HUB_DIR`` once it waits, and
``<tag>.cancelled`` (with its pid) if its work is cancelled.

    trio-mcp serve tests/servers/hub_server.py --transport http --port P --node-id n1 \\
        --redis-url URL --any-worker
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from trio_mcp import Context
from trio_mcp._demo import demo_server

server = demo_server()

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
async def grow(name: str) -> int:
    """Add a tool called ``name``; say which process did."""

    async def grown() -> str:
        return name

    server.tool(name=name)(grown)
    return os.getpid()


@server.tool()
async def ask(ctx: Context) -> dict[str, int | str | None]:
    """Ask a name; say which process asked."""
    answer = await ctx.elicit("Your name?", FORM)
    name = answer.content.get("name") if answer.content is not None else None
    return {"asked_by": os.getpid(), "name": name if isinstance(name, str) else None}


@server.tool(task=True)
async def hold(tag: str) -> int:
    """Wait until cancelled (saying so in files); the pid that ran it, if ever it ends."""
    directory = Path(os.environ["HUB_DIR"])
    (directory / f"{tag}.waiting").write_text(str(os.getpid()))
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        (directory / f"{tag}.cancelled").write_text(str(os.getpid()))
        raise
    return os.getpid()  # pragma: no cover
