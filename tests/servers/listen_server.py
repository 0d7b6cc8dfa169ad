"""A stdio server allowing 2 ``subscriptions/listen`` per connection (``LISTENS`` overrides),
with a tool that announces a tools list change to every listener."""

from __future__ import annotations

import os

import trio

from trio_mcp import Server

server = Server("listen", max_listens=int(os.environ.get("LISTENS", "2")))


@server.tool()
async def touch() -> str:
    server.notify_list_changed("tools")
    return "touched"


if __name__ == "__main__":
    trio.run(server.serve_stdio)
