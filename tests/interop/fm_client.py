"""Drive an MCP server with fastmcp's client (4.2), once per mode, in one process.

    python -m tests.interop.fm_client MODES stdio COMMAND [ARG ...]    (from the repository root)
    python -m tests.interop.fm_client MODES http URL

MODES is a comma-separated list of fastmcp's ``mode=`` values (``legacy``: the handshake;
``auto``: its default, a ``server/discover`` probe; ``2026-07-28``: the modern era adopted
directly). The server is ``peer_server.py`` (trio_mcp's demo with the tools that ask). The
script prints one JSON object keyed by mode, for ``test_fastmcp_interop.py`` to assert on.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

#: After the cancel and the request that follows it, how long to keep listening for progress
#: that must not come (it can only make the test fail).
OBSERVATION_WINDOW = 0.3


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def text(result: Any) -> str:
    blocks: Any = getattr(result, "content", None) or getattr(result, "messages", None)
    block = getattr(blocks[0], "content", blocks[0])
    return str(block.text)


async def drive(mode: str, kind: str, target: list[str]) -> dict[str, Any]:
    asked: list[list[str]] = []
    out: dict[str, Any] = {"asked": asked}

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(["elicitation", message])
        return {"dates": "1-3 May"} if message == "Which dates?" else {"ok": True}

    async def on_sample(messages: Any, params: Any, context: Any) -> str:
        first = messages[0].content.text
        asked.append(["sampling", first])
        return f"model says: {first}"

    transport: Any
    if kind == "stdio":
        transport = StdioTransport(command=target[0], args=target[1:], keep_alive=False)
    else:
        transport = StreamableHttpTransport(target[0])
    client = Client(
        transport,
        mode=mode,
        elicitation_handler=on_elicit,
        sampling_handler=on_sample,
    )
    async with client:
        out["protocol_version"] = client.protocol_version
        out["tools"] = sorted(tool.name for tool in await client.list_tools())
        echo = await client.call_tool("echo", {"text": "hello from fastmcp"})
        out["echo"] = [text(echo), echo.is_error]
        added = await client.call_tool("add", {"a": 2, "b": 3})
        out["add"] = [text(added), added.structured_content, added.data]
        out["prompts"] = sorted(prompt.name for prompt in await client.list_prompts())
        out["prompt"] = text(await client.get_prompt("greeting", {"name": "Ada"}))
        out["resources"] = [str(r.uri) for r in await client.list_resources()]
        out["templates"] = [t.uri_template for t in await client.list_resource_templates()]
        (readme,) = await client.read_resource("demo://readme")
        out["readme"] = dump(readme)
        (templated,) = await client.read_resource("demo://greeting/Ada")
        out["templated"] = dump(templated)

        seen: list[list[Any]] = []

        # The parameter names are the SDK's ProgressFnT protocol's.
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append([progress, total, message])

        slept = await client.call_tool("sleep", {"seconds": 0.3}, progress_handler=on_progress)
        out["sleep"] = text(slept)
        out["sleep_progress"] = seen

        out["summarize"] = text(await client.call_tool("summarize", {"text": "a long text"}))
        out["book"] = text(await client.call_tool("book", {"city": "Lisbon"}))
        out["plan"] = text(await client.call_tool("plan", {"city": "Porto"}))
        out["confirm"] = text(await client.get_prompt("confirm", {"topic": "trio"}))

        # Cancel a long slow with anyio's own mechanism at its first progress.
        known = (await client.call_tool("cancelled", {})).data
        before: list[float] = []
        with anyio.CancelScope() as scope:

            async def cancel(progress: float, total: float | None, message: str | None) -> None:
                before.append(progress)
                scope.cancel()

            await client.call_tool("slow", {"steps": 100_000}, progress_handler=cancel)
        out["cancel_outcome"] = "cancelled" if scope.cancelled_caught else "returned"
        out["progress_before_cancel"] = before[:1]
        ids = (await client.call_tool("cancelled", {})).data
        for _ in range(100):
            if len(ids) > len(known):
                break
            await anyio.sleep(0.05)
            ids = (await client.call_tool("cancelled", {})).data
        out["cancelled_ids"] = ids[len(known) :]
        await anyio.sleep(OBSERVATION_WINDOW)
        out["progress_after_cancel"] = before[1:]
        out["echo_after_cancel"] = text(await client.call_tool("echo", {"text": "still here"}))
    return out


async def main(modes: list[str], kind: str, target: list[str]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for mode in modes:
        try:
            report[mode] = await drive(mode, kind, target)
        except Exception as exc:
            report[mode] = {"failed": repr(exc)}
    return report


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] not in ("stdio", "http"):
        sys.stderr.write("usage: fm_client.py MODES stdio COMMAND [ARG ...] | MODES http URL\n")
        sys.exit(2)
    result = anyio.run(main, sys.argv[1].split(","), sys.argv[2], sys.argv[3:])
    sys.stdout.write(json.dumps(result) + "\n")
