"""Drive an MCP server with the official Python SDK's client (``mcp``), as a child process.

    python py_client.py MODE -- COMMAND [ARG ...]

MODE is the SDK client's ``mode=`` (``legacy``: the ``initialize`` handshake; ``auto``: the
SDK's default, which probes ``server/discover`` and falls back to the handshake). The script
speaks to ``trio-mcp demo`` (possibly behind a recording proxy) and prints one JSON object with
what it saw, for ``test_official_clients.py`` to assert on.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from pydantic import BaseModel

#: After the cancel and the ping that follows it, how long to keep listening for frames that
#: must not come (a response or progress for the cancelled call). This bounded window can only
#: make the test fail (by catching a late frame), never make it pass.
OBSERVATION_WINDOW = 0.5


def dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def drive(mode: str, command: list[str]) -> dict[str, Any]:
    server = StdioServerParameters(command=command[0], args=command[1:])
    out: dict[str, Any] = {}
    # cache=None: every call below reaches the wire.
    async with Client(server, mode=mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        info = client.server_info
        out["server_name"] = info.name if info is not None else None
        out["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        out["echo"] = dump(await client.call_tool("echo", {"text": "hello from mcp"}))
        out["add"] = dump(await client.call_tool("add", {"a": 2, "b": 3}))
        out["add_fraction"] = dump(await client.call_tool("add", {"a": 0.5, "b": 0.25}))
        out["prompts"] = [dump(prompt) for prompt in (await client.list_prompts()).prompts]
        out["prompt"] = dump(await client.get_prompt("greeting", {"name": "Ada"}))
        out["prompt_styled"] = dump(
            await client.get_prompt("greeting", {"name": "Ada", "style": "formal"})
        )
        out["resources"] = [dump(r) for r in (await client.list_resources()).resources]
        templates = await client.list_resource_templates()
        out["templates"] = [dump(t) for t in templates.resource_templates]
        out["readme"] = dump(await client.read_resource("demo://readme"))
        out["templated"] = dump(await client.read_resource("demo://greeting/Ada"))

        sleep_progress: list[list[Any]] = []

        # The parameter names are the SDK's ProgressFnT protocol's.
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            sleep_progress.append([progress, total, message])

        slept = await client.call_tool("sleep", {"seconds": 0.3}, progress_callback=on_progress)
        out["sleep"] = dump(slept)
        out["sleep_progress"] = sleep_progress

        # Cancel a long sleep with the SDK's own mechanism: cancel the scope around the call
        # once its first progress arrives. The SDK then sends notifications/cancelled.
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
                    "sleep", {"seconds": 60}, progress_callback=cancel_on_progress
                )
                outcome = "returned"
            finally:
                cancelled = True
        if scope.cancelled_caught:
            outcome = "cancelled"
        out["cancel_outcome"] = outcome
        out["progress_before_cancel"] = before_cancel

        # A request after the cancel (the barrier): its response proves the server has read
        # the cancel (one ordered stream), and the connection still works. tools/list rather
        # than ping, which the SDK deprecates (the 2026-07-28 revision removed it).
        barrier = await client.list_tools()
        out["barrier_tools"] = sorted(tool.name for tool in barrier.tools)
        await anyio.sleep(OBSERVATION_WINDOW)
        out["progress_after_cancel"] = after_cancel
        out["echo_after_cancel"] = dump(await client.call_tool("echo", {"text": "still here"}))
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: py_client.py MODE -- COMMAND [ARG ...]\n")
        return 2
    result = anyio.run(drive, argv[0], argv[2:])
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
