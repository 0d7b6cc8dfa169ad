"""The demo server plus a ``backend`` tool that says which process answered: what the fleet
tests count per backend behind the load balancer.

    trio-mcp serve tests/servers/fleet_server.py --transport http --port P --node-id n1
"""

from __future__ import annotations

import os

from trio_mcp._demo import demo_server

server = demo_server()


@server.tool()
async def backend() -> dict[str, int | str | None]:
    """The pid of the process that ran this call, and its node id (``TRIO_MCP_NODE_ID``)."""
    return {"pid": os.getpid(), "node": os.environ.get("TRIO_MCP_NODE_ID")}
