"""An HTTP server on the notification bus of ``TRIO_MCP_REDIS_URL`` (for several processes):
``grow`` adds a tool (a tools list change), ``whoami`` says which process answered; its one
prompt gives it the prompts capability (a resync says that list changed too, so a listener
can tell one from the tools' own changes).

    hypercorn --worker-class trio tests.servers.bus_server:app
"""

from __future__ import annotations

import os

from trio_mcp import RedisBus, Server

server = Server("bus", bus=RedisBus(os.environ["TRIO_MCP_REDIS_URL"], reconnect_max=0.5))


@server.tool()
async def whoami() -> int:
    return os.getpid()


@server.tool()
async def grow(name: str) -> str:
    """Add a tool called ``name`` (every worker's listeners hear the tools list change)."""

    async def grown() -> str:
        return name

    server.tool(name=name)(grown)
    return name


@server.prompt()
def hello() -> str:
    return "hello"


app = server.http_app()
