"""A handshake-era upstream built on the official Python SDK (``mcp``), served over stdio: its
``book`` tool asks the client for a name (elicitation) before answering.

``test_served_proxy.py`` puts it behind ``trio-mcp proxy`` (through ``recording_proxy.py``, so
the test reads every frame the upstream received).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server: MCPServer[Any] = MCPServer("py-asking-server", version="1.0.0", log_level="WARNING")


class Guest(BaseModel):
    name: str


@server.tool()
async def book(table: int, ctx: Context[Any, Any]) -> str:
    """Ask for the guest's name, then book the table."""
    answer = await ctx.elicit("Whose table?", Guest)
    if answer.action != "accept":
        return f"table {table}: {answer.action}"
    return f"table {table} booked for {answer.data.name}"


if __name__ == "__main__":
    server.run()
