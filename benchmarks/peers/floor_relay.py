"""The proxy's floor: a bare Trio relay between its stdin/stdout and a child's.

    python floor_relay.py COMMAND [ARGS...]

No MCP library, no parsing, no framing: what comes in on stdin goes to the child's stdin as
it was read (one ``send_all`` per read), and what the child writes goes to stdout the same
way, two tasks, one per direction. It crosses the same second process hop as a proxied call
(two extra pipe writes, two extra wake-ups, one extra process scheduled), so a proxied call can
cost no less than a call through it: the floor of any proxy on stdio.
"""

from __future__ import annotations

import os
import subprocess
import sys

import trio
from trio.abc import ReceiveStream, SendStream

#: As much as one read takes (a line of the benchmark is far smaller).
CHUNK = 65536


async def pump(source: ReceiveStream, sink: SendStream) -> None:
    while data := await source.receive_some(CHUNK):
        await sink.send_all(data)


async def main(command: list[str]) -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    child_in, child_out = process.stdin, process.stdout
    async with trio.open_nursery() as nursery:

        async def downstream() -> None:
            await pump(stdin, child_in)
            await child_in.aclose()  # our stdin ended: so does the child's

        async def upstream() -> None:
            await pump(child_out, stdout)
            nursery.cancel_scope.cancel()  # the child ended: so do we

        nursery.start_soon(downstream)
        nursery.start_soon(upstream)
    await process.wait()


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
