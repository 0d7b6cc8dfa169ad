"""A stdio server that ignores SIGTERM and end of input, and leaves a grandchild running.

It writes its own pid and the grandchild's to the file named by STUBBORN_PIDFILE.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import trio

from trio_mcp import Server

server = Server("stubborn")


@server.tool()
async def hello() -> str:
    return "hi"


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
        ]
    )
    with open(os.environ["STUBBORN_PIDFILE"], "w") as pids:
        pids.write(f"{os.getpid()} {grandchild.pid}\n")
    trio.run(server.serve_stdio)
    while True:  # ignore the end of input, too
        time.sleep(1)
