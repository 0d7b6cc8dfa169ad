"""Interoperability over Streamable HTTP, on 127.0.0.1, every peer a real child process.

- The official SDKs' clients (``py_http_client.py``, ``ts_http_client.mjs``) drive trio_mcp's
  demo served over HTTP (``demo_http_server.py``: the demo plus a ``slow`` tool that writes
  ``CANCELLED slow <id>`` when its handler is cancelled, and an ``on_request`` hook that writes
  ``HANDLER <json>`` as each handler ends).
- trio_mcp's client drives small official-SDK servers over HTTP (``py_http_server.py``: the
  Python SDK's Streamable HTTP app under uvicorn; ``ts_http_server.mjs``: node ``http`` and the
  TypeScript SDK's ``StreamableHTTPServerTransport``), whose ``slow`` writes the same marker.

A cancel must reach the peer's handler while the client is still connected: each test waits
for the marker before the client goes away (a handler that went on would trip the hang guard),
so a cancel that only happened when the connection closed cannot pass.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_mcp import HttpTarget, open_client
from trio_mcp._demo import README_TEXT

from ._http_support import ServerProcess, client_driver, start_server
from ._support import HANG_GUARD, HERE, SLEEP_PROGRESS, node, prompt_text, resource_text, text_of

CANCELLED = "CANCELLED slow "
HANDLER = "HANDLER "
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"

DEMO_HTTP = [sys.executable, str(HERE / "demo_http_server.py")]
DEMO_TOOLS = ["add", "echo", "sleep", "slow"]


# -- helpers ---------------------------------------------------------------------------------


def is_marker(line: str) -> bool:
    return line.startswith(CANCELLED)


def handler_records(server: ServerProcess) -> list[dict[str, Any]]:
    """What the demo's ``on_request`` hook reported, in the order the handlers ended."""
    return [json.loads(line.removeprefix(HANDLER)) for line in server.matching(is_handler)]


def is_handler(line: str) -> bool:
    return line.startswith(HANDLER)


def is_slow_record(line: str) -> bool:
    return is_handler(line) and json.loads(line.removeprefix(HANDLER))["name"] == "slow"


class WireLog:
    """Every HTTP request our client sent (an httpx event hook), with the JSON-RPC method of
    its body, its protocol-version and session headers, and the status it was answered with."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._by_request: dict[int, dict[str, Any]] = {}

    async def on_request(self, request: httpx.Request) -> None:
        body: Any = json.loads(request.content) if request.content else None
        message = body if isinstance(body, dict) else {}
        entry = {
            "http": request.method,
            "rpc": message.get("method"),
            "request": "id" in message and "method" in message,
            "params": message.get("params"),
            "version": request.headers.get("mcp-protocol-version"),
            "session": "mcp-session-id" in request.headers,
            "status": None,
        }
        self.entries.append(entry)
        self._by_request[id(request)] = entry

    async def on_response(self, response: httpx.Response) -> None:
        self._by_request[id(response.request)]["status"] = response.status_code

    def client(self) -> httpx.AsyncClient:
        """An httpx client for ``open_client(http_client=...)`` that logs into this."""
        return httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=None),
            follow_redirects=False,
            event_hooks={"request": [self.on_request], "response": [self.on_response]},
        )

    def posts(self, rpc: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.entries if e["http"] == "POST" and (rpc is None or e["rpc"] == rpc)]


def server_command(peer: str) -> list[str]:
    if peer == "python":
        # As a module, so that it can import py_server's MCPServer.
        return [sys.executable, "-m", "tests.interop.py_http_server"]
    return [node(), str(HERE / "ts_http_server.mjs")]


def result_text(result: object) -> str:
    content = getattr(result, "content", None) or getattr(result, "messages", None)
    assert content is not None and len(content) == 1, result
    block = getattr(content[0], "content", content[0])
    text = getattr(block, "text", None)
    assert isinstance(text, str), block
    return text


async def slow_handler_cancelled(server: ServerProcess) -> dict[str, Any]:
    """Wait, while the client is connected, for the cancelled ``slow`` handler's marker and its
    hook record; the marker names the request the record names. Returns the record."""
    marker = await server.wait_for(is_marker)
    record: dict[str, Any] = json.loads(
        (await server.wait_for(is_slow_record)).removeprefix(HANDLER)
    )
    assert record["method"] == "tools/call"
    assert marker == f"{CANCELLED}{record['id']}"
    assert record["error_code"] is None
    return record


async def stopped(server: ServerProcess) -> list[dict[str, Any]]:
    """Stop the demo (it must exit cleanly) and return every hook record; the one cancelled
    ``slow`` call was the only handler cancelled."""
    assert await server.stop() == 0, "\n".join(server.lines)
    assert len(server.matching(is_marker)) == 1, server.lines
    records = handler_records(server)
    assert [r["name"] for r in records].count("slow") == 1, records
    return records


# -- the official clients drive trio_mcp's demo ---------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_python_client_drives_the_demo_over_http(
    nursery: trio.Nursery, tmp_path: Path, mode: str
) -> None:
    """In its default (auto) mode the official client probes ``server/discover`` and reaches our
    server in the modern era; in legacy mode it speaks the handshake."""
    modern = mode == "auto"
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        command = [sys.executable, "-m", "tests.interop.py_http_client", mode, server.url]
        async with client_driver(command, tmp_path / "client.err") as out:
            assert out["protocol_version"] == (MODERN if modern else HANDSHAKE)
            assert out["server_name"] == "trio-mcp-demo"
            assert out["tools"] == DEMO_TOOLS
            assert text_of(out["echo"]) == "hello from mcp"
            assert out["echo"]["isError"] is False
            assert text_of(out["add"]) == "5"
            assert out["add"]["structuredContent"] == {"result": 5}
            assert text_of(out["add_fraction"]) == "0.75"
            assert prompt_text(out["prompt"]) == "Write a warm greeting for Ada."
            assert resource_text(out["readme"], "demo://readme") == README_TEXT
            assert resource_text(out["templated"], "demo://greeting/Ada") == "Hello, Ada!"
            assert text_of(out["sleep"]) == "slept 0.3s"
            assert out["sleep_progress"] == SLEEP_PROGRESS
            # The cancelled call: the SDK raised the cancellation to the scope that cancelled
            # it, its callback saw one progress before and none after, and the client goes on.
            assert out["cancel_outcome"] == "cancelled"
            assert out["progress_before_cancel"] == [[1, 100000, "step 1"]]
            assert out["progress_after_cancel"] == []
            assert out["barrier_tools"] == DEMO_TOOLS
            assert text_of(out["echo_after_cancel"]) == "still here"

            # The cancel reached our handler while the client was still connected: a
            # notifications/cancelled POST on the handshake session, the response stream
            # closed in the modern era.
            record = await slow_handler_cancelled(server)
            if not modern:
                assert record["cancelled"] is True
            # In the modern era the hook wrongly says cancelled=False: see
            # test_a_modern_http_cancel_is_reported_as_a_cancel below.

    methods = [r["method"] for r in await stopped(server)]
    if modern:
        # No handshake: the client's first request was server/discover.
        assert methods[0] == "server/discover"
        assert "initialize" not in methods
    else:
        assert methods[0] == "initialize"
        assert "server/discover" not in methods


async def test_the_official_typescript_client_drives_the_demo_over_http(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The TypeScript SDK (1.x) speaks only the handshake era: it initializes a session."""
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        command = [node(), str(HERE / "ts_http_client.mjs"), server.url]
        async with client_driver(command, tmp_path / "client.err") as out:
            assert out["protocolVersion"] == HANDSHAKE
            assert isinstance(out["sessionId"], str) and out["sessionId"]
            assert out["serverVersion"] == {
                "name": "trio-mcp-demo",
                "title": "trio-mcp demo",
                "version": "0.1.0",
            }
            assert out["tools"] == DEMO_TOOLS
            assert text_of(out["echo"]) == "hello from ts"
            assert text_of(out["add"]) == "5"
            assert out["add"]["structuredContent"] == {"result": 5}
            assert text_of(out["addFraction"]) == "0.75"
            assert prompt_text(out["prompt"]) == "Write a warm greeting for Ada."
            assert resource_text(out["readme"], "demo://readme") == README_TEXT
            assert resource_text(out["templated"], "demo://greeting/Ada") == "Hello, Ada!"
            assert text_of(out["sleep"]) == "slept 0.3s"
            # The SDK (1.32.2) dispatches a progress notification a microtask later but settles
            # a response at once, dropping the call's progress handler: a progress read in the
            # same chunk as the response can be lost. The first two, 100 ms apart, arrive.
            observed = [[p["progress"], p["total"], p["message"]] for p in out["sleepProgress"]]
            assert len(observed) >= 2
            assert observed == SLEEP_PROGRESS[: len(observed)]
            # The aborted call: the SDK rejected it with the abort reason, the callback saw one
            # progress before and none after, and the session goes on.
            assert out["cancelOutcome"] == "rejected"
            assert "interop cancel" in out["cancelError"]
            assert out["progressBeforeCancel"] == [
                {"progress": 1, "total": 100000, "message": "step 1"}
            ]
            assert out["progressAfterCancel"] == []
            assert out["barrierTools"] == DEMO_TOOLS
            assert text_of(out["echoAfterCancel"]) == "still here"

            # Its notifications/cancelled POST stopped our handler, the session still open.
            record = await slow_handler_cancelled(server)
            assert record["cancelled"] is True

    methods = [r["method"] for r in await stopped(server)]
    assert methods[0] == "initialize"
    assert "server/discover" not in methods


async def test_a_modern_http_cancel_is_reported_as_a_cancel(nursery: trio.Nursery) -> None:
    """docs/cancellation.md: ``Context.cancelled`` tells a handler it was cancelled, and the
    ``on_request`` hook reports it. In the modern era over HTTP the cancel is the client closing
    its response stream; the handler is stopped (its marker), but is it told?"""
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        async with open_client(server.url, mode="modern") as client:
            assert client.protocol_version == MODERN
            request_id = client.new_request_id()
            with trio.CancelScope() as scope:
                await client.call_tool(
                    "slow",
                    {"steps": 100_000},
                    request_id=request_id,
                    on_progress=lambda *_: scope.cancel(),
                )
            assert scope.cancelled_caught
            record = await slow_handler_cancelled(server)
            assert record["id"] == request_id
    assert record["cancelled"] is True


async def test_a_modern_http_cancel_posts_no_notification(nursery: trio.Nursery) -> None:
    """2026-07-28 over Streamable HTTP: closing the response stream is the cancel; the client
    sends no client-to-server notification, and every POST carries ``MCP-Protocol-Version``."""
    wire = WireLog()
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        async with (
            wire.client() as http,
            open_client(HttpTarget(server.url, http_client=http), mode="modern") as client,
        ):
            request_id = client.new_request_id()
            with trio.CancelScope() as scope:
                await client.call_tool(
                    "slow",
                    {"steps": 100_000},
                    request_id=request_id,
                    on_progress=lambda *_: scope.cancel(),
                )
            assert scope.cancelled_caught
            assert (await slow_handler_cancelled(server))["id"] == request_id
            assert result_text(await client.call_tool("echo", {"text": "after"})) == "after"
    for post in wire.posts():
        assert post["version"] == MODERN, post
        assert post["request"], post
    assert wire.posts("notifications/cancelled") == []


# -- trio_mcp's client drives the official SDKs' servers ------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(("peer", "scheme"), [("python", "py"), ("typescript", "ts")])
async def test_our_client_drives_an_official_http_server(
    nursery: trio.Nursery, peer: str, scheme: str, mode: str
) -> None:
    """In auto mode our client reaches the Python SDK server (2.3.0, which serves both eras over
    HTTP) in the modern era, and falls back to the handshake with the TypeScript SDK server
    (1.32.2, handshake only), whose transport refuses the ``server/discover`` probe."""
    modern = mode == "auto" and peer == "python"
    wire = WireLog()
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, server_command(peer))
        async with (
            wire.client() as http,
            open_client(HttpTarget(server.url, http_client=http), mode=mode) as client,
        ):
            assert client.modern is modern
            assert client.protocol_version == (MODERN if modern else HANDSHAKE)
            assert client.server_info.name == f"{scheme}-interop-server"
            tools = sorted(tool.name for tool in await client.list_tools())
            assert tools == ["add", "echo", "slow"]
            echo = await client.call_tool("echo", {"text": "hello from trio"})
            assert not echo.is_error
            assert result_text(echo) == "hello from trio"
            assert float(result_text(await client.call_tool("add", {"a": 2, "b": 3}))) == 5

            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert result_text(prompt) == "Please greet Ada."
            (greeting,) = (await client.read_resource(f"{scheme}://greeting/Ada")).contents
            assert getattr(greeting, "text", None) == "Hello, Ada!"

            progress: list[tuple[float, float | None, str | None]] = []

            def record(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            slow = await client.call_tool("slow", {"steps": 3}, on_progress=record)
            assert result_text(slow) == "done 3"
            assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            # Cancel our caller's scope once the first progress arrives: the peer's handler
            # must stop (its marker says so) while we are still connected. A handler that went
            # on would run for 5000 s and trip the hang guard.
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

        # Only that handler was cancelled, by the time the peer has exited.
        await server.stop()
    assert server.matching(is_marker) == [f"{CANCELLED}{request_id}"]

    # The wire: the era, and how the cancel travelled.
    cancels = wire.posts("notifications/cancelled")
    if modern:
        assert wire.posts("initialize") == []
        assert wire.posts()[0]["rpc"] == "server/discover"
        requests = [post for post in wire.posts() if post["request"]]
        for post in requests:
            assert post["version"] == MODERN, post
            assert not post["session"], post
            assert post["params"]["_meta"][VERSION_KEY] == MODERN, post
            assert post["status"] == 200, post
        # The cancel is closing the response stream (the marker proves it reached the
        # handler); that our client also POSTs a stray notifications/cancelled is a bug, see
        # test_a_modern_http_cancel_posts_no_notification.
    else:
        (initialize,) = wire.posts("initialize")
        probes = wire.posts("server/discover")
        if mode == "auto":
            # The TypeScript server refused the probe (no session); our client fell back.
            (probe,) = probes
            assert 400 <= probe["status"] < 500, probe
            assert wire.posts()[:2] == [probe, initialize]
        else:
            assert probes == []
        assert initialize["status"] == 200
        after_handshake = wire.posts()[wire.posts().index(initialize) + 1 :]
        assert after_handshake
        for post in after_handshake:
            assert post["version"] == HANDSHAKE, post
            assert post["session"], post
        (cancel,) = cancels
        assert cancel["params"]["requestId"] == request_id
