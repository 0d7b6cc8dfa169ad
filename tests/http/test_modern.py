"""The modern era over Streamable HTTP, and its routing beside the handshake era:
seed-behaviors (e) 7-12 and 32-34, through a real hypercorn trio worker."""

from __future__ import annotations

import base64
import gc
from collections.abc import MutableMapping
from typing import Annotated, Any

import httpx
import orjson
import pytest
import trio

from trio_mcp import Context, Server
from trio_mcp.http import HttpOptions, Limits
from trio_mcp.http._http_session import HttpSession
from trio_mcp.http._modern_post import _DISCONNECT_GRACE
from trio_mcp.http._sessions import CUT_BY_SHUTDOWN
from trio_mcp.lowlevel import Engine
from trio_mcp.protocol._headers import tool_param_headers
from trio_mcp.server._connection import ServerConnection

from .._http import (
    VERSION,
    Served,
    SseComment,
    SseEvent,
    SseParser,
    asgi_exchange,
    call_body,
    error_of,
    initialize_body,
    parse_sse,
    request_body,
    serving,
)

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_body(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return request_body(rid, method, {**(params or {}), "_meta": dict(ENVELOPE)})


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    headers.update(extra)
    return headers


def modern_server(log: list[str]) -> Server:
    server = Server("modern-http", "1.0")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def steps(ctx: Context) -> str:
        for step in (1, 2):
            await ctx.report_progress(step, 2)
        return "stepped"

    @server.tool()
    async def parked(ctx: Context) -> str:
        log.append("parked")
        try:
            await trio.sleep_forever()
        finally:
            log.append(f"cancelled={trio.current_effective_deadline() == float('-inf')}")
        return "never"  # pragma: no cover

    @server.tool()
    async def mirrored(
        region: Annotated[str, {"x-mcp-header": "Region"}],
        count: Annotated[int, {"x-mcp-header": "Count"}],
    ) -> str:
        return f"{region}:{count}"

    @server.tool()
    async def asks(ctx: Context) -> str:
        await ctx.elicit("?", {"type": "object", "properties": {}})
        return "asked"  # pragma: no cover

    return server


async def post(served: Served, body: Any, headers: dict[str, str]) -> httpx.Response:
    return await served.client.post(served.url, json=body, headers=headers)


async def test_a_modern_post_is_one_stateless_exchange() -> None:
    async with serving(modern_server([])) as served:
        response = await post(
            served,
            modern_body(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
            modern_headers("tools/call", "echo"),
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert "mcp-session-id" not in response.headers
        result = response.json()["result"]
        assert result["content"] == [{"type": "text", "text": "hi"}]
        assert result["resultType"] == "complete"
        assert served.app.sessions == {}
        discover = await post(
            served, modern_body(2, "server/discover"), modern_headers("server/discover")
        )
        assert discover.json()["result"]["supportedVersions"] == [MODERN]


async def test_notifications_come_first_on_an_sse_stream() -> None:
    async with serving(modern_server([])) as served:
        body = modern_body(1, "tools/call", {"name": "steps"})
        body["params"]["_meta"]["progressToken"] = "p"
        response = await post(served, body, modern_headers("tools/call", "steps"))
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        messages = [e.json() for e in parse_sse(response.text) if e.data]
        assert [m.get("method") for m in messages] == [
            "notifications/progress",
            "notifications/progress",
            None,
        ]
        assert messages[-1]["result"]["content"][0]["text"] == "stepped"


async def test_a_stream_that_waits_gets_keepalive_comments_and_then_its_answer() -> None:
    server = Server("modern-keepalive", "1.0")
    release = trio.Event()

    @server.tool()
    async def waits(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await release.wait()
        return "released"

    async with serving(server, HttpOptions(keepalive_interval=0.05)) as served:
        body = modern_body(1, "tools/call", {"name": "waits"})
        body["params"]["_meta"]["progressToken"] = "p"
        seen: list[SseEvent | SseComment] = []
        parser = SseParser()
        with trio.fail_after(10):
            async with served.client.stream(
                "POST", served.url, json=body, headers=modern_headers("tools/call", "waits")
            ) as response:
                assert response.headers["content-type"] == "text/event-stream"
                async for line in response.aiter_lines():
                    if (item := parser.feed(line)) is not None:
                        seen.append(item)
                        if isinstance(item, SseComment):
                            release.set()  # the answer comes once the stream was kept alive
    progress, *between, answer = seen
    assert isinstance(progress, SseEvent) and progress.json()["method"] == "notifications/progress"
    assert between and set(between) == {SseComment("keepalive")}
    assert isinstance(answer, SseEvent)
    assert answer.json()["result"]["content"][0]["text"] == "released"


async def test_header_problems_are_400_with_the_modern_codes() -> None:
    async with serving(modern_server([])) as served:
        call = modern_body(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        cases: list[tuple[dict[str, Any], dict[str, str], int, str]] = [
            (
                call,
                modern_headers("tools/call", "echo", **{"mcp-protocol-version": "2030-01-01"}),
                -32022,
                "",
            ),
            (call, modern_headers("tools/list", "echo"), -32020, "Mcp-Method"),
            (call, modern_headers("tools/call"), -32020, "Mcp-Name"),
            (call, modern_headers("tools/call", "other"), -32020, "Mcp-Name"),
            (
                call,
                modern_headers("tools/call", "echo", **{"mcp-session-id": "abc"}),
                -32600,
                "session",
            ),
            (
                request_body(2, "server/discover"),
                modern_headers("server/discover"),
                -32602,
                "protocolVersion",
            ),
            (
                request_body(
                    3, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}
                ),
                modern_headers("tools/list"),
                -32602,
                "clientCapabilities",
            ),
        ]
        headers_no_method = modern_headers("tools/call", "echo")
        del headers_no_method["mcp-method"]
        cases.append((call, headers_no_method, -32020, "Mcp-Method"))
        mismatched = modern_body(4, "tools/list")
        mismatched["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2027-01-01"
        cases.append((mismatched, modern_headers("tools/list"), -32020, "MCP-Protocol-Version"))
        for body, headers, code, fragment in cases:
            response = await post(served, body, headers)
            assert response.status_code == 400, (body, headers, response.text)
            error = error_of(response)
            assert error["code"] == code, (headers, error)
            assert fragment in error["message"] or fragment in str(error.get("data")), error
        unsupported = await post(
            served,
            call,
            modern_headers("tools/call", "echo", **{"mcp-protocol-version": "2030-01-01"}),
        )
        assert error_of(unsupported)["data"] == {"supported": [MODERN], "requested": "2030-01-01"}


async def test_base64_names_and_mirrored_parameters() -> None:
    async with serving(modern_server([])) as served:
        encoded = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
        ok = await post(
            served,
            modern_body(1, "tools/call", {"name": "echo", "arguments": {"text": "b"}}),
            modern_headers("tools/call", encoded),
        )
        assert ok.status_code == 200
        call = modern_body(
            2, "tools/call", {"name": "mirrored", "arguments": {"region": "eu", "count": 3}}
        )
        good = await post(
            served,
            call,
            modern_headers(
                "tools/call", "mirrored", **{"mcp-param-region": "eu", "mcp-param-count": "3"}
            ),
        )
        assert good.json()["result"]["content"][0]["text"] == "eu:3"
        for extra in ({"mcp-param-region": "us", "mcp-param-count": "3"}, {"mcp-param-count": "3"}):
            bad = await post(served, call, modern_headers("tools/call", "mirrored", **extra))
            assert bad.status_code == 400 and error_of(bad)["code"] == -32020


async def test_mirrored_numbers_compare_numerically_and_absent_ones_have_no_header() -> None:
    async with serving(modern_server([])) as served:
        call = modern_body(
            1, "tools/call", {"name": "mirrored", "arguments": {"region": "eu", "count": 3.0}}
        )
        for count in ("3", "3.0"):
            headers = {"mcp-param-region": "eu", "mcp-param-count": count}
            ok = await post(served, call, modern_headers("tools/call", "mirrored", **headers))
            assert ok.status_code == 200, (count, ok.text)
            assert ok.json()["result"]["content"][0]["text"] == "eu:3"
        for count in ("3.5", "3e0", "=?base64?Mw?="):
            headers = {"mcp-param-region": "eu", "mcp-param-count": count}
            bad = await post(served, call, modern_headers("tools/call", "mirrored", **headers))
            assert bad.status_code == 400 and error_of(bad)["code"] == -32020, count
        # No region in the body, so a Region header is one no client sends.
        partial = modern_body(2, "tools/call", {"name": "mirrored", "arguments": {"count": 1}})
        headers = {"mcp-param-region": "eu", "mcp-param-count": "1"}
        bad = await post(served, partial, modern_headers("tools/call", "mirrored", **headers))
        assert bad.status_code == 400 and "Mcp-Param-Region" in error_of(bad)["message"]


async def test_a_tools_header_declarations_are_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool's input schema is walked for its ``x-mcp-header`` declarations once, not for every
    modern call; a tool whose declarations are invalid is refused on every call alike."""
    walks: list[Any] = []
    real = tool_param_headers

    def counted(schema: Any) -> Any:
        walks.append(schema)
        return real(schema)

    monkeypatch.setattr("trio_mcp.server._registry.tool_param_headers", counted)
    server = modern_server([])

    @server.tool()
    async def clash(
        a: Annotated[str, {"x-mcp-header": "Same"}], b: Annotated[str, {"x-mcp-header": "same"}]
    ) -> str:
        return a + b  # pragma: no cover

    app = server.http_app()
    async with app.running():
        for rid in range(3):
            arguments = {"region": "eu", "count": rid}
            body = modern_body(rid, "tools/call", {"name": "mirrored", "arguments": arguments})
            headers = modern_headers(
                "tools/call", "mirrored", **{"mcp-param-region": "eu", "mcp-param-count": str(rid)}
            )
            done = await asgi_exchange(app, "POST", headers, body)
            assert orjson.loads(done.body)["result"]["content"][0]["text"] == f"eu:{rid}"
            body = modern_body(rid, "tools/call", {"name": "clash", "arguments": {"a": "x"}})
            refused = await asgi_exchange(app, "POST", modern_headers("tools/call", "clash"), body)
            error = orjson.loads(refused.body)["error"]
            assert error["code"] == -32020 and "cannot be called over HTTP" in error["message"]
    assert len(walks) == 2  # one per tool


async def test_statuses_follow_the_error_code() -> None:
    async with serving(modern_server([])) as served:
        unknown = await post(served, modern_body(1, "no/such"), modern_headers("no/such"))
        assert unknown.status_code == 404 and error_of(unknown)["code"] == -32601
        removed = await post(served, modern_body(2, "ping"), modern_headers("ping"))
        assert removed.status_code == 404
        capability = await post(
            served,
            modern_body(3, "tools/call", {"name": "asks"}),
            modern_headers("tools/call", "asks"),
        )
        assert capability.status_code == 400 and error_of(capability)["code"] == -32021
        bad_tool = await post(
            served,
            modern_body(4, "tools/call", {"name": "nope"}),
            modern_headers("tools/call", "nope"),
        )
        assert bad_tool.status_code == 400 and error_of(bad_tool)["code"] == -32602
        for verb in ("GET", "DELETE"):
            response = await served.client.request(verb, served.url, headers=modern_headers("x"))
            assert response.status_code == 405
        big = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/list",
            "params": {"pad": "x" * 5_000_000},
        }
        assert (await post(served, big, modern_headers("tools/list"))).status_code == 413


async def test_closing_the_stream_cancels_the_handler() -> None:
    log: list[str] = []
    async with serving(modern_server(log)) as served:
        body = modern_body(1, "tools/call", {"name": "parked"})
        with trio.move_on_after(0.5):
            await post(served, body, modern_headers("tools/call", "parked"))
        with trio.fail_after(10):
            while len(log) < 2:  # noqa: ASYNC110 - the handler's finally writes the log
                await trio.sleep(0.01)
        assert log == ["parked", "cancelled=True"]


async def test_routing_between_the_eras() -> None:
    """(e) 7-12: a session decides; the header alone never turns a session modern."""
    async with serving(modern_server([])) as served:
        base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        opened = await post(
            served, initialize_body(MODERN), {**base, "mcp-protocol-version": MODERN}
        )
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        first = [e.json() for e in parse_sse(opened.text) if e.data][-1]
        assert first["result"]["protocolVersion"] == VERSION
        in_session = {**base, "mcp-session-id": session, "mcp-protocol-version": MODERN}
        listed = await post(served, request_body(2, "tools/list"), in_session)
        assert listed.status_code == 200
        tools = [e.json() for e in parse_sse(listed.text) if e.data][-1]["result"]
        assert "resultType" not in tools
        enveloped = await post(served, modern_body(3, "tools/list"), in_session)
        assert enveloped.status_code == 400
        assert "legacy lifecycle" in error_of(enveloped)["message"]
        legacy_header = {**in_session, "mcp-protocol-version": VERSION}
        mismatch = await post(served, modern_body(4, "tools/list"), legacy_header)
        assert mismatch.status_code == 400 and error_of(mismatch)["code"] == -32020
        deleted = await served.client.delete(served.url, headers=in_session)
        assert deleted.status_code == 200
        # On initialize the body's version decides; a foreign header goes the modern way.
        for header, body_version, expected in (
            ("2025-06-18", "2025-11-25", "2025-11-25"),
            (MODERN, "2025-06-18", "2025-06-18"),
            ("2024-11-05", "2025-11-25", "2025-11-25"),
        ):
            answer = await post(
                served, initialize_body(body_version), {**base, "mcp-protocol-version": header}
            )
            assert answer.status_code == 200
            assert [e.json() for e in parse_sse(answer.text) if e.data][-1]["result"][
                "protocolVersion"
            ] == expected
        foreign = await post(
            served, initialize_body(), {**base, "mcp-protocol-version": "1900-01-01"}
        )
        assert foreign.status_code == 400
        assert error_of(foreign)["data"]["requested"] == "1900-01-01"
        for verb in ("GET", "DELETE"):
            refused = await served.client.request(
                verb,
                served.url,
                headers={**base, "mcp-session-id": session, "mcp-protocol-version": "1999-01-01"},
            )
            assert refused.status_code == 405


def _engine_objects() -> int:
    """How many engines, connections and HTTP sessions the cycle collector tracks, dead or alive."""
    kinds = (HttpSession, Engine, ServerConnection)
    return sum(1 for o in gc.get_objects() if isinstance(o, kinds))


@pytest.mark.parametrize("stateless", [False, True], ids=["modern", "stateless"])
async def test_a_posts_own_engine_is_freed_when_the_post_ends(stateless: bool) -> None:
    """A modern (or stateless) POST builds an engine of its own; once the POST has ended,
    reference counting frees it, with its connection and HTTP session: nothing of it is left
    in a reference cycle for the cycle collector, which would otherwise run every few hundred
    requests. Answered whole, streamed with progress, and refused, each alike."""
    server = modern_server([])
    app = server.http_app(HttpOptions(stateless=True) if stateless else None)
    calls = [("echo", {"text": "hi"}), ("steps", {}), ("nosuch", {})]
    async with app.running():
        gc.collect()
        gc.disable()
        try:
            before = _engine_objects()
            for rid, (tool, arguments) in enumerate(calls * 3):
                if stateless:
                    body = call_body(rid, tool, arguments)
                    headers = {
                        "accept": "application/json, text/event-stream",
                        "content-type": "application/json",
                    }
                else:
                    body = modern_body(rid, "tools/call", {"name": tool, "arguments": arguments})
                    headers = modern_headers("tools/call", tool)
                done = await asgi_exchange(app, "POST", headers, body, reports_the_end=True)
                assert done.status in (200, 400), done
            assert _engine_objects() == before
        finally:
            gc.enable()


async def test_a_complete_response_ends_the_post_without_waiting(mock_clock: Any) -> None:
    """Once its response is written, a POST's disconnect watcher ends by itself on the end the
    server reports; a server that never reports it is waited for only a bounded grace. A
    request that never yields has no watcher at all: nothing to wait for either way."""
    mock_clock.autojump_threshold = 0
    server = modern_server([])

    @server.tool()
    async def once(text: str) -> str:
        await trio.lowlevel.checkpoint()  # the request yields: its watcher is started
        return text

    app = server.http_app()
    async with app.running():
        for tool, reports_the_end, waited in (
            ("once", True, 0.0),
            ("once", False, _DISCONNECT_GRACE),
            ("echo", True, 0.0),
            ("echo", False, 0.0),
        ):
            body = modern_body(1, "tools/call", {"name": tool, "arguments": {"text": "hi"}})
            headers = modern_headers("tools/call", tool)
            start = trio.current_time()
            done = await asgi_exchange(app, "POST", headers, body, reports_the_end=reports_the_end)
            assert trio.current_time() - start == waited, tool
            assert done.status == 200
            result = orjson.loads(done.body)["result"]
            assert result["content"] == [{"type": "text", "text": "hi"}]
        assert not app.server.connections


async def test_a_streamed_request_cut_by_a_drain_ends_its_stream_with_the_retry_error() -> None:
    """A modern request whose progress already went out as SSE, still running at the end of a
    drain's grace: its stream ends with the error that tells the client to retry."""
    server = Server("drained-modern")
    entered = trio.Event()

    @server.tool()
    async def slow(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        entered.set()
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    async with serving(server) as served:
        body = modern_body(1, "tools/call", {"name": "slow"})
        body["params"]["_meta"]["progressToken"] = "p"
        replies: dict[str, httpx.Response] = {}
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                replies["slow"] = await post(served, body, modern_headers("tools/call", "slow"))

            nursery.start_soon(call)
            await entered.wait()
            with trio.fail_after(10):
                await served.app.drain(grace=0.1)
        response = replies["slow"]
        assert response.headers["content-type"] == "text/event-stream"
        messages = [e.json() for e in parse_sse(response.text) if e.data]
        assert messages[0]["method"] == "notifications/progress"
        assert messages[-1]["id"] == 1
        assert messages[-1]["error"] == {
            "code": -32603,
            "message": CUT_BY_SHUTDOWN,
            "data": {"retry": True},
        }
        assert not served.app.server.connections


async def test_a_client_that_does_not_read_its_stream_is_cut_and_its_request_cancelled(
    mock_clock: Any,
) -> None:
    """A modern request's events wait for the client within the stream's bounds; a client
    that reads none of them falls behind, and then its request is cancelled rather than its
    events piling up."""
    mock_clock.autojump_threshold = 0
    log: list[str] = []
    server = Server("unread")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        try:
            for step in range(100):
                await ctx.report_progress(step)
        finally:
            log.append(f"cancelled={ctx.cancelled}")
        return "done"  # pragma: no cover

    app = server.http_app(HttpOptions(limits=Limits(max_pending_events=4)))
    body = modern_body(1, "tools/call", {"name": "chatty"})
    body["params"]["_meta"]["progressToken"] = "p"
    headers = modern_headers("tools/call", "chatty")
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": "/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in {"host": "localhost", **headers}.items()],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }
    given = False
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": orjson.dumps(body), "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            await trio.sleep_forever()  # the client reads nothing

    async with app.running():
        with trio.fail_after(60):
            await app(scope, receive, send)
        assert log == ["cancelled=True"]
        assert (b"content-type", b"text/event-stream") in sent[0]["headers"]
        assert app.budget.used == 0
        assert not app.server.connections
