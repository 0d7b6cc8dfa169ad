"""A stdio server that can be made to die mid-call: ``die`` ends the process before answering.

Run as a script it serves over stdio (for the proxy's upstream-death tests).
"""

from __future__ import annotations

import os

import trio

from trio_mcp import Server

server = Server("mortal", "1.0")


@server.tool()
def echo(text: str) -> str:
    return f"{text} (pid {os.getpid()})"


@server.tool()
async def die() -> str:
    await trio.sleep(0.05)
    os._exit(3)


if __name__ == "__main__":
    trio.run(server.serve_stdio)
