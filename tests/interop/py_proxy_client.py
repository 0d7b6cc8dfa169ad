"""Drive a proxy in front of ``server-everything`` with the official Python SDK's client.

    python -m tests.interop.py_proxy_client MODE URL    (from the repository root)

MODE is the SDK client's ``mode=`` (``legacy``: the handshake; ``auto``: it probes
``server/discover`` first). The script lists the tools, echoes, starts server-everything's
long-running operation and cancels it (the SDK's own way: the scope around the call) once its
first progress arrives, echoes again, and prints one JSON report for
``test_proxy_interop.py``; it then stays connected until its stdin is closed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import anyio.to_thread
from mcp import Client

from tests.interop._py_drive import dump

LONG = "trigger-long-running-operation"


async def drive(mode: str, url: str) -> None:
    out: dict[str, Any] = {}
    async with Client(url, mode=mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        out["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        out["echo"] = dump(await client.call_tool("echo", {"message": "through the proxy"}))
        seen: list[list[Any]] = []
        with anyio.CancelScope() as scope:

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append([progress, total, message])
                scope.cancel()

            await client.call_tool(
                LONG, {"duration": 30, "steps": 30}, progress_callback=on_progress
            )
        out["cancelled"] = scope.cancelled_caught
        out["progress_before_cancel"] = seen
        out["echo_after_cancel"] = dump(await client.call_tool("echo", {"message": "still here"}))
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        await anyio.to_thread.run_sync(sys.stdin.read)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: py_proxy_client.py MODE URL\n")
        return 2
    anyio.run(drive, argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
