"""Drive an MCP server over Streamable HTTP with the official Python SDK's client (``mcp``).

    python py_http_client.py MODE URL

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
from pydantic import BaseModel

#: After the cancel and the request that follows it, how long to keep listening for progress
#: that must not come. This bounded window can only make the test fail (by catching a late
#: progress), never make it pass.
OBSERVATION_WINDOW = 0.5


def dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def drive(mode: str, url: str) -> None:
    out: dict[str, Any] = {}
    # cache=None: every call below reaches the wire.
    async with Client(url, mode=mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        info = client.server_info
        out["server_name"] = info.name if info is not None else None
        out["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        out["echo"] = dump(await client.call_tool("echo", {"text": "hello from mcp"}))
        out["add"] = dump(await client.call_tool("add", {"a": 2, "b": 3}))
        out["add_fraction"] = dump(await client.call_tool("add", {"a": 0.5, "b": 0.25}))
        out["prompt"] = dump(await client.get_prompt("greeting", {"name": "Ada"}))
        out["readme"] = dump(await client.read_resource("demo://readme"))
        out["templated"] = dump(await client.read_resource("demo://greeting/Ada"))

        sleep_progress: list[list[Any]] = []

        # The parameter names are the SDK's ProgressFnT protocol's.
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            sleep_progress.append([progress, total, message])

        slept = await client.call_tool("sleep", {"seconds": 0.3}, progress_callback=on_progress)
        out["sleep"] = dump(slept)
        out["sleep_progress"] = sleep_progress

        # Cancel a long `slow` call with the SDK's own mechanism: cancel the scope around the
        # call once its first progress arrives. On a handshake-era session the SDK then POSTs
        # notifications/cancelled; in the modern era it closes the call's response stream.
        before_cancel: list[list[Any]] = []
        after_cancel: list[list[Any]] = []
        cancelled = False
        outcome = "pending"
        with anyio.CancelScope() as scope:

            async def cancel_on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                (after_cancel if cancelled else before_cancel).append([progress, total, message])
                scope.cancel()

            try:
                await client.call_tool(
                    "slow", {"steps": 100_000}, progress_callback=cancel_on_progress
                )
                outcome = "returned"
            finally:
                cancelled = True
        if scope.cancelled_caught:
            outcome = "cancelled"
        out["cancel_outcome"] = outcome
        out["progress_before_cancel"] = before_cancel

        # The connection still works after the cancel.
        out["barrier_tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        await anyio.sleep(OBSERVATION_WINDOW)
        out["progress_after_cancel"] = after_cancel
        out["echo_after_cancel"] = dump(await client.call_tool("echo", {"text": "still here"}))

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
