"""The standalone GET stream of a Streamable HTTP session (handshake era) starts once the session
is established (after ``notifications/initialized`` went out); the requests posted since wait for
its answer, so that a server request sent on it at once has somewhere to go, but never for long:
against a real hypercorn whose answer to the GET is held back until the test lets it go."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from trio_mcp import open_client
from trio_mcp._demo import demo_server

from .._http import GUARD, Recorder, Seen, eventually, serving_app, text_of


class SlowGet(Recorder):
    """Holds every GET (no response yet) until ``release`` is set: a server slow to start its
    event stream."""

    def __init__(self, app: Any) -> None:
        super().__init__(app)
        self.release = trio.Event()
        self.get_arrived = trio.Event()

    async def handle(self, seen: Seen, scope: Any, receive: Any, send: Any) -> None:
        if seen.method == "GET":
            self.get_arrived.set()
            await self.release.wait()
        await self.app(scope, receive, send)


class Timeline(Recorder):
    """Notes the arrival of each POST and the moment the GET is answered, in order."""

    def __init__(self, app: Any) -> None:
        super().__init__(app)
        self.timeline: list[str | None] = []

    async def handle(self, seen: Seen, scope: Any, receive: Any, send: Any) -> None:
        if seen.method == "POST":
            self.timeline.append(seen.rpc_method)

        async def noted(message: Any) -> None:
            if seen.method == "GET" and message["type"] == "http.response.start":
                self.timeline.append("GET answered")
            await send(message)

        await self.app(scope, receive, noted)


async def test_the_requests_after_the_handshake_wait_for_the_get_stream_to_open() -> None:
    """A server may send the client a request on the GET stream as soon as the session exists
    (an elicitation); one that drops it when no stream is open (the TypeScript SDK's 1.x
    server) would lose it if the client's next request overtook its GET."""
    app = Timeline(demo_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="legacy") as client:
            await client.list_tools()
    timeline = app.timeline
    assert timeline.index("notifications/initialized") < timeline.index("GET answered")
    assert timeline.index("GET answered") < timeline.index("tools/list"), timeline


async def test_a_get_stream_held_back_by_the_server_delays_no_request_for_long() -> None:
    app = SlowGet(demo_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="legacy") as client:
            # Every request is answered while the GET is still held back by the server (the
            # first after waiting for it at most LISTEN_WAIT).
            tools = await client.list_tools()
            assert tools
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
            await client.ping()
            assert not app.release.is_set()
            await app.get_arrived.wait()
            app.release.set()
    order = [s.rpc_method if s.method == "POST" else s.method for s in app.seen]
    gets = [i for i, s in enumerate(app.seen) if s.method == "GET"]
    assert gets, order
    initialized = order.index("notifications/initialized")
    assert all(i > initialized for i in gets), order
    assert order.index("initialize") < initialized


class SlowStart(Recorder):
    """A server slow to start: ``notifications/initialized`` is accepted only once the first
    request has arrived, and that request is answered only when the test says so."""

    def __init__(self, app: Any) -> None:
        super().__init__(app)
        self.first_arrived = trio.Event()
        self.answer_first = trio.Event()
        self.get_while_held = False

    async def handle(self, seen: Seen, scope: Any, receive: Any, send: Any) -> None:
        if seen.rpc_method == "notifications/initialized":
            await self.first_arrived.wait()
        elif seen.rpc_method == "tools/list":
            self.first_arrived.set()
            await self.answer_first.wait()
        elif seen.method == "GET" and not self.answer_first.is_set():
            self.get_while_held = True
        await self.app(scope, receive, send)


async def test_the_get_stream_waits_for_the_first_requests_answer_on_a_slow_server() -> None:
    app = SlowStart(demo_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="legacy") as client:
            async with trio.open_nursery() as nursery:
                listed: list[Any] = []

                async def first() -> None:
                    listed.append(await client.list_tools())

                nursery.start_soon(first)
                await app.first_arrived.wait()
                # The initialized POST is accepted now; the first request is still unanswered.
                await eventually(
                    lambda: any(s.status for s in app.posts("notifications/initialized"))
                )
                await trio.testing.wait_all_tasks_blocked(cushion=0.05)
                app.answer_first.set()
            assert listed and listed[0]
            await client.ping()
            await eventually(lambda: any(s.method == "GET" for s in app.seen))
    assert not app.get_while_held
    order = [s.rpc_method if s.method == "POST" else s.method for s in app.seen]
    assert order.index("tools/list") < order.index("GET"), order
