"""The limits of a client beyond one session, served for real: modern requests running at
once per client, rate limits per client and per tool (both eras), and a limit store several
apps share (a fleet in one process), which counts sessions and requests across them."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import httpx
import trio

from trio_mcp import Server
from trio_mcp.http import HttpOptions, Limits, MemoryLimitStore, RateLimit, ScaleOut

from .._http import Served, call_body, eventually, request_body, serving

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: No token comes back while a test runs.
SLOW = 0.001


def limited_server() -> tuple[Server, trio.Event, list[str]]:
    server = Server("limited")
    release = trio.Event()
    entered: list[str] = []

    @server.tool()
    async def hold(tag: str) -> str:
        entered.append(tag)
        await release.wait()
        return tag

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def other() -> str:
        return "other"

    return server, release, entered


async def modern_call(
    served: Served, tool: str, arguments: dict[str, Any], rid: int = 1
) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": META},
    }
    headers = served.headers(version=MODERN, mcp_method="tools/call", mcp_name=tool)
    return await served.post(body, headers=headers)


def options(**limits: Any) -> HttpOptions:
    return HttpOptions(json_response=True, limits=Limits(**limits))


async def test_a_client_runs_at_most_its_modern_requests_at_once() -> None:
    server, release, entered = limited_server()
    async with serving(server, options(max_requests_per_client=2)) as served:
        answers: list[httpx.Response] = []

        async def held(tag: str) -> None:
            answers.append(await modern_call(served, "hold", {"tag": tag}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(held, "a")
            nursery.start_soon(held, "b")
            await eventually(lambda: len(entered) == 2)
            refused = await modern_call(served, "echo", {"text": "c"})
            release.set()
        after = await modern_call(served, "echo", {"text": "d"})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert "2 requests in flight" in refused.json()["error"]["message"]
    assert [a.status_code for a in answers] == [200, 200]
    assert after.status_code == 200


async def test_a_modern_request_refused_before_it_runs_gives_its_count_back() -> None:
    # One request at once: each refusal (a method this server does not have, a cancelled
    # request, a tool error) must end its count, or the client would be locked out.
    server, release, _ = limited_server()
    release.set()
    async with serving(server, options(max_requests_per_client=1)) as served:
        unknown = []
        for n in range(3):
            body = {"jsonrpc": "2.0", "id": n, "method": "no/such", "params": {"_meta": META}}
            headers = served.headers(version=MODERN, mcp_method="no/such")
            unknown.append(await served.post(body, headers=headers))
        bad = await modern_call(served, "echo", {"text": 5})  # fails the schema: a tool error
        after = await modern_call(served, "echo", {"text": "still in"})
    assert [r.json()["error"]["code"] for r in unknown] == [-32601] * 3
    assert bad.json()["result"]["isError"] is True
    assert after.status_code == 200
    assert after.json()["result"]["content"][0]["text"] == "still in"


async def test_a_rate_limit_refuses_with_429_retry_after_and_retry_after_ms() -> None:
    server, _, _ = limited_server()
    async with serving(server, options(rate_limit=RateLimit(SLOW, 2))) as served:
        modern = [await modern_call(served, "echo", {"text": str(n)}, n) for n in range(3)]
        # The handshake era counts against the same bucket; initialize never does.
        session = await served.initialize()
        ping = await served.post(request_body(9, "ping"), session)
        legacy = await served.post(call_body(10, "echo", {"text": "x"}), session)
    assert [r.status_code for r in modern] == [200, 200, 429]
    error = modern[2].json()["error"]
    assert error["code"] == -32000 and error["data"]["retryAfterMs"] > 900_000
    assert int(modern[2].headers["retry-after"]) > 900
    assert ping.status_code == 200
    assert legacy.status_code == 429 and legacy.json()["id"] == 10


async def test_a_tool_rate_limit_counts_each_tool_of_a_client_on_its_own() -> None:
    server, _, _ = limited_server()
    async with serving(server, options(tool_rate_limit=RateLimit(SLOW, 1))) as served:
        first = await modern_call(served, "echo", {"text": "a"}, 1)
        again = await modern_call(served, "echo", {"text": "b"}, 2)
        other = await modern_call(served, "other", {}, 3)
    assert [first.status_code, again.status_code, other.status_code] == [200, 429, 200]
    assert "calls of 'echo'" in again.json()["error"]["message"]


async def test_apps_sharing_a_limit_store_share_the_session_budget_and_request_counts() -> None:
    store = MemoryLimitStore()
    shared = HttpOptions(
        json_response=True,
        limits=Limits(max_sessions_per_client=2, max_requests_per_client=1),
        scale_out=ScaleOut(limit_store=store, share_request_limits=True),
    )
    server, release, entered = limited_server()
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(serving(server, shared))
        two = await stack.enter_async_context(serving(server, shared))
        await one.initialize()
        kept = await two.initialize()
        over = await one.post(request_body("init", "initialize", _init()), version=None)
        assert over.status_code == 429 and "across the servers" in over.json()["error"]["message"]
        # A session ended on one app gives its place back to the client on the other.
        assert (await two.client.delete(two.url, headers=two.headers(kept))).status_code < 300
        with trio.fail_after(5):  # the lease goes back in the background
            while True:
                opened = await one.post(request_body("i", "initialize", _init()), version=None)
                if opened.status_code == 200:
                    break
                await trio.sleep(0.01)
        # One modern request of the client at once, over both apps.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(modern_call, one, "hold", {"tag": "a"})
            await eventually(lambda: bool(entered))
            refused = await modern_call(two, "echo", {"text": "b"})
            release.set()
    assert refused.status_code == 429
    assert "across the servers" in refused.json()["error"]["message"]


def _init() -> dict[str, Any]:
    return {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
