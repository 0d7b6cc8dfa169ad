"""Drive an MCP server over Streamable HTTP with the official Python SDK's client (``mcp``).

    python -m tests.interop.py_http_client MODE URL    (from the repository root)

MODE is the SDK client's ``mode=`` (``legacy``: the ``initialize`` handshake; ``auto``: the
SDK's default, which probes ``server/discover`` and falls back to the handshake). Given a URL,
the SDK's ``Client`` speaks through its Streamable HTTP client transport. The script speaks to
``demo_http_server.py`` (trio_mcp's demo plus a ``slow`` tool) and prints one JSON object with
what it saw, for ``test_http_interop.py`` to assert on; it then stays connected until its stdin
is closed (so the test can check the server side first), and closes the client.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import anyio.to_thread
from mcp import Client

from tests.interop._py_drive import cancel_and_go_on, common_calls


async def drive(mode: str, url: str) -> None:
    out: dict[str, Any] = {}
    # cache=None: every call below reaches the wire.
    async with Client(url, mode=mode, cache=None) as client:
        await common_calls(client, out)
        # On a handshake-era session the SDK then POSTs notifications/cancelled; in the modern
        # era it closes the call's response stream.
        await cancel_and_go_on(client, out, "slow", {"steps": 100_000})
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        await anyio.to_thread.run_sync(sys.stdin.read)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: py_http_client.py MODE URL\n")
        return 2
    anyio.run(drive, argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
