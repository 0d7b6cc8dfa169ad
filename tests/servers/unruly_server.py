"""A stdio server that misbehaves on request, for the client's limits.

- ``UNRULY_STDERR_FLOOD=N``: first writes N bytes to stderr without a newline, then the line
  ``after the flood``.
- ``UNRULY_PIDFILE=path``: starts a grandchild in a session of its own (``setsid``, so it
  leaves the process group) and writes its pid there.
- the tool ``big(size)`` returns a text of ``size`` bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import trio

from trio_mcp import Server

server = Server("unruly")


@server.tool()
def big(size: int) -> str:
    return "x" * size


@server.tool()
def hello() -> str:
    return "hi"


if __name__ == "__main__":
    flood = int(os.environ.get("UNRULY_STDERR_FLOOD", "0"))
    if flood:
        block = b"x" * 65536
        for _ in range(flood // len(block)):
            sys.stderr.buffer.write(block)
        sys.stderr.buffer.write(b"x" * (flood % len(block)) + b"\nafter the flood\n")
        sys.stderr.buffer.flush()
    if pidfile := os.environ.get("UNRULY_PIDFILE"):
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(pidfile, "w") as pids:
            pids.write(f"{grandchild.pid}\n")
    trio.run(server.serve_stdio)
