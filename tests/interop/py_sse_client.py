"""Drive an MCP server over HTTP+SSE (2024-11-05) with the official Python SDK's client.

    python -m tests.interop.py_sse_client URL    (from the repository root)

The SDK's ``Client`` speaks the handshake through ``mcp.client.sse.sse_client``: a GET of URL,
whose ``endpoint`` event names where to POST. The script speaks to ``demo_http_server.py``
(trio_mcp's demo plus a ``slow`` tool, whose app serves HTTP+SSE at ``/sse``) and prints one JSON
object with what it saw, for ``test_sse_interop.py`` to assert on; it then stays connected
until its stdin is closed (so the test can check the server side first), and closes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import anyio.to_thread
from mcp import Client
from mcp.client.sse import sse_client

from tests.interop._py_drive import cancel_and_go_on, common_calls


async def drive(url: str) -> None:
    out: dict[str, Any] = {}
    sessions: list[str] = []
    # cache=None: every call below reaches the wire.
    async with Client(
        sse_client(url, on_session_created=sessions.append), mode="legacy", cache=None
    ) as client:
        out["session_ids"] = sessions
        await common_calls(client, out)
        # The SDK POSTs notifications/cancelled for the cancelled call.
        await cancel_and_go_on(client, out, "slow", {"steps": 100_000})
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        await anyio.to_thread.run_sync(sys.stdin.read)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: py_sse_client.py URL\n")
        return 2
    anyio.run(drive, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
