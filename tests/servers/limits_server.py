"""The demo server plus ``backend`` (which process answered) and ``pay``: a tool whose
confirmation (a multi round-trip) is single use, and whose side effect is a line in the file
``LIMITS_ACTS_FILE`` names (each line the pid of the process that paid), so a test counts how
many times it ran over every worker.

    trio-mcp serve tests/servers/limits_server.py --transport http --redis-url URL
"""

from __future__ import annotations

import os

import trio

from trio_mcp import Context
from trio_mcp._demo import demo_server

server = demo_server()


@server.tool()
async def backend() -> dict[str, int]:
    """The pid of the process that ran this call."""
    return {"pid": os.getpid()}


FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@server.tool(single_use_state=True)
async def pay(ctx: Context) -> str:
    """Ask for a confirmation, then pay (once per confirmation, on any worker)."""
    answer = await ctx.elicit("Pay?", FORM)
    if answer.content is None or not answer.content.get("ok"):
        return "not paid"
    async with await trio.open_file(os.environ["LIMITS_ACTS_FILE"], "a") as acts:
        await acts.write(f"{os.getpid()}\n")
    return "paid"
