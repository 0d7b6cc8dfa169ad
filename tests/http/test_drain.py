"""Drain: readiness flips first, new requests are refused with 503 (nothing of them ran), the
requests in flight finish within the grace, and those still running at its end are answered
with a JSON-RPC error telling the client to retry, never a silent end of stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import httpx
import trio

from trio_mcp import HttpTarget, ProtocolError, Server, WebSocketTarget, open_client
from trio_mcp.http import HttpOptions
from trio_mcp.http._sessions import CUT_BY_SHUTDOWN

from .._http import (
    GUARD,
    Park,
    Served,
    SseReader,
    call_body,
    cancel_body,
    parse_sse,
    serving,
)
from .._ports import free_port
from .test_modern import modern_body, modern_headers


class Waiting:
    """A tool that waits for the test without sending anything first (a JSON reply)."""

    def __init__(self, server: Server) -> None:
        self.entered = trio.Event()
        self.release = trio.Event()

        async def wait() -> str:
            self.entered.set()
            await self.release.wait()
            return "released"

        server.tool(name="wait")(wait)


def drained_server() -> tuple[Server, Park, Waiting]:
    server = Server("drained")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server, Park(server), Waiting(server)


async def ready(served: Served) -> httpx.Response:
    return await served.client.get(served.base + "/ready")


async def modern_call(served: Served, rid: int, name: str, args: Any = None) -> httpx.Response:
    body = modern_body(rid, "tools/call", {"name": name, "arguments": args or {}})
    return await served.client.post(
        served.url, json=body, headers=modern_headers("tools/call", name)
    )


def assert_refused_draining(response: httpx.Response, rid: Any) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.headers["connection"] == "close"
    body = response.json()
    assert body["id"] == rid
    assert body["error"]["message"].startswith("Service Unavailable: this server is shutting")


async def test_readiness_says_200_while_serving_and_503_once_draining() -> None:
    server, *_ = drained_server()
    async with serving(server) as served:
        response = await ready(served)
        assert (response.status_code, response.json()) == (200, {"status": "ready"})
        assert response.headers["cache-control"] == "no-store"
        assert (await served.client.head(served.base + "/ready")).status_code == 200
        assert (await served.client.post(served.base + "/ready")).status_code == 405
        served.app.begin_drain()
        response = await ready(served)
        assert (response.status_code, response.json()) == (503, {"status": "draining"})
        assert served.app.draining and not served.app.ready


async def test_an_app_run_again_after_a_drain_is_ready_again() -> None:
    server, *_ = drained_server()
    app = server.http_app()
    assert not app.ready  # its lifespan has not run yet
    async with app.running():
        assert app.ready
        await app.drain(grace=0)
        assert not app.ready
    async with app.running():
        assert app.ready and not app.draining


async def test_the_readiness_path_is_configurable_or_absent() -> None:
    server, *_ = drained_server()
    async with serving(server, HttpOptions(ready_path="/healthz")) as served:
        assert (await served.client.get(served.base + "/healthz")).status_code == 200
        assert (await ready(served)).status_code == 404
    async with serving(server, HttpOptions(ready_path=None)) as served:
        assert (await ready(served)).status_code == 404


async def test_draining_refuses_new_requests_but_takes_answers_and_cancels() -> None:
    server, park, _ = drained_server()
    async with serving(server) as served:
        session = await served.initialize()
        async with trio.open_nursery() as nursery:
            parked: list[str] = []

            async def park_call() -> None:
                response = await served.post(call_body("p", "park"), session)
                parked.append(response.text)

            nursery.start_soon(park_call)
            await park.entered.wait()
            served.app.begin_drain()
            assert_refused_draining(await modern_call(served, 1, "echo", {"text": "x"}), 1)
            assert_refused_draining(await served.post(call_body(2, "echo"), session), 2)
            get = await served.client.get(
                served.url, headers=served.headers(session, accept="text/event-stream")
            )
            assert get.status_code == 503 and get.headers["connection"] == "close"
            # A notification still reaches the session: here, the cancel of the parked call.
            assert (await served.post(cancel_body("p"), session)).status_code == 202
        assert park.cancelled
        assert parked and "second-frame" not in parked[0]


async def test_requests_in_flight_finish_within_the_grace() -> None:
    server, park, waiting = drained_server()
    async with serving(server) as served:
        session = await served.initialize()
        results: dict[str, httpx.Response] = {}
        async with trio.open_nursery() as nursery:

            async def call(key: str, request: Any) -> None:
                results[key] = await request

            nursery.start_soon(call, "sse", served.post(call_body("p", "park"), session))
            nursery.start_soon(call, "json", modern_call(served, 7, "wait"))
            await park.entered.wait()
            await waiting.entered.wait()
            drained = trio.Event()

            async def drain() -> None:
                await served.app.drain(grace=GUARD)
                drained.set()

            nursery.start_soon(drain)
            await trio.sleep(0.2)
            assert not drained.is_set()
            park.release.set()
            waiting.release.set()
            with trio.fail_after(5):
                await drained.wait()
        last = [e.json() for e in parse_sse(results["sse"].text) if e.data][-1]
        assert last["result"]["content"][0]["text"] == "done"
        assert results["json"].json()["result"]["content"][0]["text"] == "released"


async def test_requests_still_running_at_the_end_of_the_grace_end_with_a_retry_error() -> None:
    server, park, waiting = drained_server()
    async with serving(server) as served:
        session = await served.initialize()
        async with trio.open_nursery() as nursery:
            replies: dict[str, Any] = {}

            async def json_call() -> None:
                replies["json"] = await modern_call(served, 7, "wait")

            nursery.start_soon(json_call)
            async with served.stream_post(call_body("p", "park"), session) as sse:
                await park.entered.wait()
                await waiting.entered.wait()
                with trio.fail_after(5):
                    await served.app.drain(grace=0.1)
                with trio.fail_after(5):
                    events = await sse.rest()
        assert park.cancelled
        messages = [e.json() for e in events if e.data]
        assert messages[0]["method"] == "notifications/progress"
        assert_cut(messages[-1], "p")
        json_reply = replies["json"]
        assert json_reply.status_code == 200 and json_reply.headers["content-type"] == (
            "application/json"
        )
        assert_cut(json_reply.json(), 7)


def assert_cut(message: dict[str, Any], rid: Any) -> None:
    assert message["id"] == rid
    assert message["error"] == {
        "code": -32603,
        "message": CUT_BY_SHUTDOWN,
        "data": {"retry": True},
    }


async def test_sigterm_drains_trio_mcp_serve_then_exits() -> None:
    """The whole drain through the entry users run, under a real SIGTERM."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http"]
    command += ["--port", str(port), "--drain-grace", "0.5"]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            with trio.fail_after(GUARD):
                while True:
                    try:
                        if (await client.get(base + "/ready")).status_code == 200:
                            break
                    except httpx.ConnectError:
                        await trio.sleep(0.05)
            body = modern_body(1, "tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
            body["params"]["_meta"]["progressToken"] = "t"
            headers = modern_headers("tools/call", "sleep")
            with trio.fail_after(GUARD):
                async with client.stream("POST", base + "/mcp", json=body, headers=headers) as r:
                    sse = SseReader(r)
                    assert (await sse.message())["method"] == "notifications/progress"
                    os.kill(process.pid, signal.SIGTERM)
                    await eventually_status(client, base + "/ready", 503)
                    refused = await client.post(
                        base + "/mcp",
                        json=modern_body(2, "tools/call", {"name": "echo", "arguments": {}}),
                        headers=modern_headers("tools/call", "echo"),
                    )
                    assert_refused_draining(refused, 2)
                    messages = [e.json() for e in await sse.rest() if e.data]
                assert_cut(messages[-1], 1)
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_sigterm_ends_requests_on_every_transport_with_one_grace_and_one_error() -> None:
    """A real SIGTERM to ``trio-mcp demo --transport http``: a call in flight on Streamable HTTP,
    one on the HTTP+SSE transport and one on a WebSocket are each ended, after the one drain
    grace, with the one retryable error; then the process exits."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http"]
    command += ["--port", str(port), "--drain-grace", "0.5"]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    targets: dict[str, HttpTarget | WebSocketTarget] = {
        "streamable": HttpTarget(base + "/mcp"),
        "sse": HttpTarget(base + "/sse", transport="sse"),
        "ws": WebSocketTarget(f"ws://127.0.0.1:{port}/ws"),
    }
    ended: dict[str, ProtocolError] = {}
    try:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            with trio.fail_after(GUARD):
                while True:
                    try:
                        if (await client.get(base + "/ready")).status_code == 200:
                            break
                    except httpx.ConnectError:
                        await trio.sleep(0.05)
            with trio.fail_after(GUARD):
                async with trio.open_nursery() as nursery:
                    running = {name: trio.Event() for name in targets}

                    async def call(name: str) -> None:
                        async with open_client(targets[name]) as mcp:

                            async def progressed(*_: Any) -> None:
                                running[name].set()

                            try:
                                await mcp.call_tool(
                                    "sleep", {"seconds": 30}, on_progress=progressed
                                )
                            except ProtocolError as error:
                                ended[name] = error

                    for name in targets:
                        nursery.start_soon(call, name)
                    for event in running.values():
                        await event.wait()
                    os.kill(process.pid, signal.SIGTERM)
                assert await process.wait() == 0
        assert sorted(ended) == sorted(targets)
        for name, error in ended.items():
            assert (error.code, error.message, error.data) == (
                -32603,
                CUT_BY_SHUTDOWN,
                {"retry": True},
            ), name
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def eventually_status(client: httpx.AsyncClient, url: str, status: int) -> None:
    with trio.fail_after(2):
        while (await client.get(url)).status_code != status:  # noqa: ASYNC110 - polling a peer
            await trio.sleep(0.02)
