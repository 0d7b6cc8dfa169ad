"""The HTTP+SSE client transport: against our own server on a real hypercorn, and against
small ASGI apps that misbehave in the ways the transport must name clearly."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp import ConnectionClosed, Context, HttpTarget, ProtocolError, Server, open_client
from trio_mcp.http import HttpOptions, Limits
from trio_mcp.transports._sse_client import (
    SseClientTransport,
    open_sse_transport,
    resolve_endpoint,
)

from .._http import GUARD, Park, serving
from ..http.test_legacy_sse import sse_sessions
from ..http.test_mount import hypercorn


def demo() -> Server:
    server = Server("sse-demo")

    @server.tool()
    async def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def steps(n: int, ctx: Context) -> str:
        for step in range(1, n + 1):
            await ctx.report_progress(step, n, f"step {step}")
        return f"did {n}"

    return server


def test_the_endpoint_is_resolved_against_the_stream_and_must_stay_on_its_origin() -> None:
    base = "http://127.0.0.1:8000/svc/sse"
    assert resolve_endpoint(base, "/svc/messages/?session_id=ab") == (
        "http://127.0.0.1:8000/svc/messages/?session_id=ab"
    )
    assert resolve_endpoint(base, "messages?session_id=ab") == (
        "http://127.0.0.1:8000/svc/messages?session_id=ab"
    )
    assert resolve_endpoint("http://h/sse", "http://h:80/m") == "http://h:80/m"
    for elsewhere in ("http://evil.example/m", "https://127.0.0.1:8000/m", "//other/m"):
        with pytest.raises(ValueError, match="another origin"):
            resolve_endpoint(base, elsewhere)


async def test_explicit_sse_tools_progress_and_the_handshake_version() -> None:
    async with serving(demo()) as served:
        async with open_client(HttpTarget(served.base + "/sse", transport="sse")) as client:
            assert isinstance(client.session.transport, SseClientTransport)
            assert client.initialize_result is not None
            assert client.initialize_result.protocol_version == "2025-11-25"
            tools = await client.list_tools()
            assert sorted(tool.name for tool in tools) == ["add", "steps"]
            seen: list[Any] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append((progress, total, message))

            result = await client.call_tool("steps", {"n": 3}, on_progress=on_progress)
            assert result.content[0].text == "did 3"  # type: ignore[union-attr]
            assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        async with open_client(
            HttpTarget(served.base + "/sse", transport="sse"), protocol_version="2024-11-05"
        ) as client:
            assert client.initialize_result is not None
            assert client.initialize_result.protocol_version == "2024-11-05"


async def test_a_cancelled_call_stops_the_servers_handler() -> None:
    server = demo()
    park = Park(server)
    async with (
        serving(server) as served,
        open_client(HttpTarget(served.base + "/sse", transport="sse")) as c,
    ):
        with trio.move_on_after(GUARD) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(c.call_tool, "park", {})
                await park.entered.wait()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
        await park.finished.wait()
        assert park.cancelled
        assert (await c.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


async def test_auto_detection_falls_back_to_sse_when_the_post_gets_405() -> None:
    """POST /sse is 405 on an HTTP+SSE server: the legacy signal; the GET then finds it."""
    async with serving(demo()) as served:
        for mode in (None, "auto", "legacy"):
            async with open_client(served.base + "/sse", mode=mode) as client:
                assert isinstance(client.session.transport, SseClientTransport)
                assert (await client.call_tool("add", {"a": 2, "b": 2})).structured_content == {
                    "result": 4
                }
        # Not when Streamable HTTP is asked for.
        with pytest.raises(ConnectionClosed, match="transport='sse'"):
            async with open_client(HttpTarget(served.base + "/sse", transport="streamable-http")):
                pass
        # A Streamable HTTP server stays one.
        async with open_client(served.url) as client:
            assert not isinstance(client.session.transport, SseClientTransport)


async def test_modern_mode_has_no_sse_transport() -> None:
    with pytest.raises(ValueError, match="no modern era"):
        async with open_client(
            HttpTarget("http://127.0.0.1:1/sse", transport="sse"), mode="modern"
        ):
            pass
    with pytest.raises(TypeError, match=r"transport= is an option of an HTTP target"):
        async with open_client(demo(), transport="sse"):
            pass


# -- errors, clear ---------------------------------------------------------------------------------


def sse_app(*events: bytes, status: int = 200, content_type: bytes = b"text/event-stream") -> Any:
    """An ASGI app whose GET answers the given raw events, then waits (or ends, with ``b""``
    as the last one)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": message["type"] + ".complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = [(b"content-type", content_type)]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": bool(event)})
            if not event:
                return
        await trio.sleep_forever()

    return app


@pytest.mark.parametrize(
    ("app", "message"),
    [
        (sse_app(status=404), "got HTTP 404"),
        (sse_app(content_type=b"application/json"), "did not answer with an event stream"),
        (sse_app(b": hello\n\n", b""), "ended before its endpoint event"),
        (sse_app(b"event: endpoint\ndata: http://evil.example/m\n\n"), "another origin"),
    ],
)
async def test_a_stream_that_names_no_usable_endpoint_fails_saying_why(
    app: Any, message: str
) -> None:
    async with hypercorn(app) as base:
        with pytest.raises(ConnectionClosed, match=message):
            async with open_client(HttpTarget(base + "/sse", transport="sse")):
                pass


async def test_no_endpoint_within_the_timeout() -> None:
    async with hypercorn(sse_app(b": waiting\n\n")) as base, trio.open_nursery() as nursery:
        with pytest.raises(ConnectionClosed, match=r"no endpoint event .* within 0\.2 s"):
            async with open_sse_transport(base + "/sse", nursery, endpoint_timeout=0.2):
                pass


async def test_the_stream_ending_fails_the_calls_in_flight() -> None:
    server = demo()
    park = Park(server)
    async with serving(server) as served:
        with pytest.raises(ConnectionClosed):
            async with (
                open_client(HttpTarget(served.base + "/sse", transport="sse")) as client,
                trio.open_nursery() as nursery,
            ):

                async def end_the_session() -> None:
                    await park.entered.wait()
                    for session in list(sse_sessions(served).values()):
                        session.close()

                nursery.start_soon(end_the_session)
                with trio.fail_after(GUARD):
                    await client.call_tool("park", {})


async def test_a_refused_post_fails_its_request() -> None:
    """413 from the messages endpoint: that call fails with a ProtocolError, the rest goes on."""
    options = HttpOptions(limits=Limits(max_body_bytes=2000))
    async with (
        serving(demo(), options) as served,
        open_client(HttpTarget(served.base + "/sse", transport="sse")) as client,
    ):
        with pytest.raises(ProtocolError, match="Payload Too Large"):
            await client.call_tool("add", {"a": 1, "b": 2, "pad": "x" * 4000})
        added = await client.call_tool("add", {"a": 1, "b": 2})
        assert added.structured_content == {"result": 3}
