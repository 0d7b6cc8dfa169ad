"""Outages of the shared Redis, with real worker processes.

- Each worker's bus reader killed (``CLIENT KILL``), again and again, under a stream of list
  changes, then ``redis-server`` restarted (with its append-only file) under load: a listener
  on the other worker hears every change, and no resync (a resync would say that the prompts
  list changed too; nothing changes it).
- Redis hung (SIGSTOP) under three ``--any-worker`` backends: once a worker noticed, each
  request that needs Redis is refused at once with 503 and ``Retry-After``, without a word to
  Redis (the records those requests would have written never appear, even after Redis wakes
  up and works through what it was sent); requests that do not need it go on; after SIGCONT
  every worker recovers by itself.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

from pathlib import Path

import coredis
import httpx
import trio

from trio_mcp import open_client

from .._http import GUARD, VERSION, call_body, initialize_body, request_body
from ._fleet import FLEET_SERVER, fleet
from ._services import redis_server
from .test_bus_across_processes import _hypercorn

CHANGES = 30


async def _kill_readers(raw: coredis.Redis[str]) -> int:
    """``CLIENT KILL`` each worker's bus reader (and any subscriber), once both are connected;
    how many went. (This test process has no connection of its own by those names.)"""
    while True:  # both readers back from the last kill
        found = [
            client
            for client in await raw.client_list()
            if str(client["name"]).startswith("trio_mcp:")
            and str(client["name"]).endswith((":bus", ":sub"))
        ]
        if sum(str(c["name"]).endswith(":bus") for c in found) == 2:
            break
        await trio.sleep(0.02)
    return sum([await raw.client_kill(identifier=int(c["id"])) for c in found])


async def test_no_change_is_lost_to_killed_readers_or_a_redis_restart(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path, persistent=True) as redis,
        _hypercorn(redis.url) as url_a,
        _hypercorn(redis.url) as url_b,
        open_client(url_a, mode="modern") as on_a,
        open_client(url_b, mode="modern") as on_b,
    ):
        heard = {"tools": 0, "prompts": 0}

        async def count(subscription: object) -> None:
            async for note in subscription:  # type: ignore[attr-defined]
                heard[note.method.split("/")[1]] += 1

        async with (
            coredis.Redis.from_url(redis.url, decode_responses=True) as raw,
            on_a.listen(tools=True, prompts=True) as subscription,
            trio.open_nursery() as nursery,
        ):
            with trio.fail_after(GUARD):
                await subscription.wait_acknowledged()
            nursery.start_soon(count, subscription)
            kills = 0
            with trio.fail_after(4 * GUARD):
                for n in range(CHANGES):
                    await on_b.call_tool("grow", {"name": f"k{n}"})
                    if n % 5 == 2:
                        kills += await _kill_readers(raw)
                while heard["tools"] < CHANGES:  # noqa: ASYNC110 - the listener's view
                    await trio.sleep(0.05)
            assert kills >= 2 * (CHANGES // 5) and heard == {"tools": CHANGES, "prompts": 0}

            # Restarted under load: B's changes go on while Redis is away and comes back.
            async def restart() -> None:
                await trio.sleep(0.2)
                await redis.stop()
                await trio.sleep(0.3)
                await redis.start()

            with trio.fail_after(4 * GUARD):
                async with trio.open_nursery() as restarting:
                    restarting.start_soon(restart)
                    for n in range(CHANGES):
                        await on_b.call_tool("grow", {"name": f"r{n}"})
                        await trio.sleep(0.02)
                while heard["tools"] < 2 * CHANGES:  # noqa: ASYNC110 - the listener's view
                    await trio.sleep(0.05)
            await trio.sleep(0.5)
            # Every change, and no resync: nothing was lost to be resynced for. (A publish
            # whose answer the restart cut off may be retried, so one may come twice.)
            assert 2 * CHANGES <= heard["tools"] <= 2 * CHANGES + 2
            assert heard["prompts"] == 0
            nursery.cancel_scope.cancel()


HANDSHAKE = "2025-06-18"
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": HANDSHAKE,
}
MODERN = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/list",
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "outage", "version": "1"},
}


async def _records(raw: coredis.Redis[str]) -> int:
    """How many session records Redis holds."""
    return len([key async for key in raw.scan_iter(match="*session*")])


async def test_a_hung_redis_is_refused_at_once_and_every_worker_recovers(
    tmp_path: Path,
) -> None:
    (tmp_path / "fleet").mkdir()
    async with (
        redis_server(tmp_path) as redis,
        fleet(
            tmp_path / "fleet",
            2,
            server=str(FLEET_SERVER),
            options=["--redis-url", redis.url, "--any-worker"],
            routing="any",
        ) as running,
        httpx.AsyncClient(timeout=GUARD) as http,
        coredis.Redis.from_url(redis.url, decode_responses=True) as raw,
    ):
        a, b = (backend.base + "/mcp" for backend in running.backends)
        opened = await http.post(a, json=initialize_body(HANDSHAKE), headers=HEADERS)
        assert opened.status_code == 200
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(a, json=note, headers=session)).status_code == 202
        before = await _records(raw)

        redis.pause()
        try:
            with trio.fail_after(GUARD):
                # Until this worker noticed (its watcher's ping, or this very request).
                while True:
                    first = await http.post(a, json=initialize_body(HANDSHAKE), headers=HEADERS)
                    if first.status_code == 503:
                        break
                    assert first.status_code == 200  # sent before the hang
                    before += 1
                # Noticed: each request that needs Redis is refused, on every worker.
                for url in (a, b, a, b):
                    refused = await http.post(url, json=initialize_body(VERSION), headers=HEADERS)
                    assert refused.status_code == 503
                    assert refused.headers["retry-after"] == "1"
                # What does not need Redis goes on: a session held here, the modern era.
                called = await http.post(a, json=call_body(2, "backend"), headers=session)
                assert called.status_code == 200, called.text
                listed = await http.post(
                    b, json=request_body(3, "tools/list", {"_meta": MODERN_META}), headers=MODERN
                )
                assert listed.status_code == 200, listed.text
        finally:
            redis.resume()
        with trio.fail_after(GUARD):
            # Every worker recovers by itself.
            for url in (a, b):
                while True:
                    again = await http.post(url, json=initialize_body(HANDSHAKE), headers=HEADERS)
                    if again.status_code == 200:
                        break
                    assert again.status_code == 503
                    await trio.sleep(0.1)
            # Redis worked through what it was sent while hung: the refused requests sent
            # nothing (the first may have, before its worker noticed), the two opened since
            # are recorded.
            assert await _records(raw) <= before + 1 + 2
