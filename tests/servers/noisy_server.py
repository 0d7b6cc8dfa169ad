"""A stdio server whose tool prints to stdout and runs a child that writes to stdout too."""

from __future__ import annotations

import subprocess
import sys

import trio

from trio_mcp import Server

server = Server("noisy")


@server.tool()
def noisy() -> str:
    print("print() from a tool")
    subprocess.run([sys.executable, "-c", "print('output of a child process')"], check=True)
    sys.stdout.flush()
    return "quiet result"


if __name__ == "__main__":
    trio.run(server.serve_stdio)
