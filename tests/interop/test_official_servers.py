"""trio_mcp's client drives small servers built on the official SDKs, each a child process.

``py_server.py`` (the Python SDK, ``mcp``) and ``ts_server.mjs`` (the TypeScript SDK) run
behind ``recording_proxy.py``. Their ``slow`` tool writes ``CANCELLED slow <id>`` to stderr
when its handler is cancelled; the client captures stderr line by line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from trio_mcp.testing import stdio_client

from ._support import HANG_GUARD, HERE, check_cancelled_call, node, read_records, recorded

MARKER = "CANCELLED slow "


def server_command(peer: str) -> list[str]:
    if peer == "python":
        return [sys.executable, str(HERE / "py_server.py")]
    return [node(), str(HERE / "ts_server.mjs")]


def text_of(result: object) -> str:
    content = getattr(result, "content", None) or getattr(result, "messages", None)
    assert content is not None and len(content) == 1, result
    block = getattr(content[0], "content", content[0])
    text = getattr(block, "text", None)
    assert isinstance(text, str), block
    return text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(("peer", "scheme"), [("python", "py"), ("typescript", "ts")])
async def test_our_client_drives_an_official_server(
    tmp_path: Path, peer: str, scheme: str, mode: str
) -> None:
    """In auto mode our client reaches the (dual-era) Python SDK server in the modern era and
    falls back to the handshake with the (handshake-only) TypeScript SDK server."""
    log = tmp_path / "wire.jsonl"
    markers: list[str] = []
    handler_cancelled = trio.Event()

    def on_stderr(line: str) -> None:
        if line.startswith(MARKER):
            markers.append(line)
            handler_cancelled.set()

    with trio.fail_after(HANG_GUARD):
        async with stdio_client(
            recorded(log, server_command(peer)), on_stderr=on_stderr, mode=mode
        ) as client:
            modern = mode == "auto" and peer == "python"
            assert client.modern is modern
            assert client.protocol_version == ("2026-07-28" if modern else "2025-11-25")
            assert client.server_info.name == f"{scheme}-interop-server"
            assert sorted(tool.name for tool in await client.list_tools()) == [
                "add",
                "echo",
                "slow",
            ]
            echo = await client.call_tool("echo", {"text": "hello from trio"})
            assert not echo.is_error
            assert text_of(echo) == "hello from trio"
            assert float(text_of(await client.call_tool("add", {"a": 2, "b": 3}))) == 5

            assert [prompt.name for prompt in await client.list_prompts()] == ["greet"]
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert prompt.messages[0].role == "user"
            assert text_of(prompt) == "Please greet Ada."

            resources = await client.list_resources()
            assert [resource.uri for resource in resources] == [f"{scheme}://info"]
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates] == [f"{scheme}://greeting/{{name}}"]
            (info,) = (await client.read_resource(f"{scheme}://info")).contents
            assert getattr(info, "text", None) == (
                "served by the official Python SDK"
                if peer == "python"
                else "served by the official TypeScript SDK"
            )
            (greeting,) = (await client.read_resource(f"{scheme}://greeting/Ada")).contents
            assert greeting.uri == f"{scheme}://greeting/Ada"
            assert getattr(greeting, "text", None) == "Hello, Ada!"

            progress: list[tuple[float, float | None, str | None]] = []

            def record(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            slow = await client.call_tool("slow", {"steps": 3}, on_progress=record)
            assert text_of(slow) == "done 3"
            assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            # Cancel our caller's scope once the first progress arrives: the client sends
            # notifications/cancelled, and the server's handler must stop (its marker says so).
            # A handler that went on would run for 5000 s and trip the hang guard.
            with trio.CancelScope() as scope:
                await client.call_tool(
                    "slow", {"steps": 100_000}, on_progress=lambda *_: scope.cancel()
                )
            assert scope.cancelled_caught
            await handler_cancelled.wait()

            after = await client.call_tool("echo", {"text": "still here"})
            assert text_of(after) == "still here"

    records = read_records(log)
    request_id = check_cancelled_call(records, "slow")
    assert markers == [f"{MARKER}{request_id}"]
