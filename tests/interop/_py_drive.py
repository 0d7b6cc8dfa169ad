"""The scenario both official-Python-client drivers run (stdio and Streamable HTTP): the
calls, progress, and a cancel with the SDK's own mechanism, collected into one report."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client
from pydantic import BaseModel

#: After the cancel and the request that follows it, how long to keep listening for progress
#: that must not come. This bounded window can only make the test fail (by catching a late
#: progress), never make it pass.
OBSERVATION_WINDOW = 0.5


def dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def common_calls(client: Client, out: dict[str, Any]) -> None:
    """The handshake facts and the calls every driver makes (cache off: all reach the wire)."""
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


async def cancel_and_go_on(
    client: Client, out: dict[str, Any], tool: str, arguments: dict[str, Any]
) -> None:
    """Cancel a long call with the SDK's own mechanism (cancel the scope around it once its
    first progress arrives), then show the connection goes on and no progress follows."""
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
            await client.call_tool(tool, arguments, progress_callback=cancel_on_progress)
            outcome = "returned"
        finally:
            cancelled = True
    if scope.cancelled_caught:
        outcome = "cancelled"
    out["cancel_outcome"] = outcome
    out["progress_before_cancel"] = before_cancel
    # A request after the cancel (the barrier): its answer proves the server has read the
    # cancel, and that the connection still works. tools/list rather than ping, which the SDK
    # deprecates (2026-07-28 removed it).
    out["barrier_tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
    await anyio.sleep(OBSERVATION_WINDOW)
    out["progress_after_cancel"] = after_cancel
    out["echo_after_cancel"] = dump(await client.call_tool("echo", {"text": "still here"}))
