"""The notification bus on a Redis stream, on a real redis-server: a reader whose connection
is killed (again and again, under a stream of events) or whose Redis restarts catches up on
every event it missed, in order, once; a reader away past the retention, or whose Redis came
back empty, is told to resync; publishing does not use the reader's connection.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import coredis
import trio

from trio_mcp.redis import RedisBus, RedisSessionStore
from trio_mcp.server import BusEvent

from ..deploy._services import Redis, redis_server

GUARD = 20
READER = f"trio_mcp:{os.getpid()}:bus"


@asynccontextmanager
async def raw_redis(redis: Redis) -> AsyncIterator[coredis.Redis[str]]:
    async with coredis.Redis.from_url(redis.url, decode_responses=True) as raw:
        yield raw


async def kill_reader(raw: coredis.Redis[str]) -> int:
    """``CLIENT KILL`` the bus readers of this process; how many there were."""
    killed = 0
    for client in await raw.client_list():
        if client["name"] == READER:
            killed += await raw.client_kill(identifier=int(client["id"]))
    return killed


def uris(got: list[BusEvent]) -> list[str]:
    return [str(e.params["uri"]) for e in got if e.kind == "resource_updated"]


@asynccontextmanager
async def reading(bus: RedisBus, got: list[BusEvent]) -> AsyncIterator[None]:
    """The bus's reader running for the block, handing its events to ``got``; the pool is a
    store's, as in an app."""
    store = RedisSessionStore(bus.url)
    await store.start()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(bus.subscribe, got.append)
            yield
            nursery.cancel_scope.cancel()
    finally:
        await store.aclose()


async def test_a_reader_killed_under_a_stream_of_events_misses_none(tmp_path: Path) -> None:
    got: list[BusEvent] = []
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        bus = RedisBus(redis.url, reconnect_initial=0.2, reconnect_max=0.2)
        async with reading(bus, got):
            sent = [f"x://{n}" for n in range(200)]
            kills = 0
            for n, uri in enumerate(sent):
                # Published on the pool: a reader away (killed, reconnecting) fails nothing.
                await bus.publish(BusEvent.resource_updated(uri))
                if n % 20 == 10:
                    with trio.fail_after(GUARD):
                        while not bus.connected:  # noqa: ASYNC110 - back from the last kill
                            await trio.sleep(0.01)
                    kills += await kill_reader(raw)
            with trio.fail_after(GUARD):
                while len(uris(got)) < len(sent):  # noqa: ASYNC110 - the reader's view
                    await trio.sleep(0.02)
            assert kills == 10
        # Every event once, in order, and nobody was told to resync.
        assert uris(got) == sent
        assert bus.resyncs == 0 and all(e.kind != "resync" for e in got)


async def test_a_redis_restart_with_persistence_loses_no_event(tmp_path: Path) -> None:
    got: list[BusEvent] = []
    async with redis_server(tmp_path, persistent=True) as redis:
        bus = RedisBus(redis.url, reconnect_initial=0.1, reconnect_max=0.2)
        async with reading(bus, got):
            sent = [f"x://{n}" for n in range(40)]
            for uri in sent[:20]:
                await bus.publish(BusEvent.resource_updated(uri))
            await redis.stop()
            await redis.start()
            with trio.fail_after(GUARD):
                for uri in sent[20:]:
                    while True:  # as the Notifier does: a failed publish is tried again
                        try:
                            await bus.publish(BusEvent.resource_updated(uri))
                            break
                        except Exception:
                            await trio.sleep(0.05)
                while len(uris(got)) < len(sent):  # noqa: ASYNC110 - the reader's view
                    await trio.sleep(0.02)
        assert uris(got) == sent
        assert bus.resyncs == 0


async def test_a_reader_away_past_the_retention_is_told_to_resync(tmp_path: Path) -> None:
    got: list[BusEvent] = []
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        # Small stream nodes, so that MAXLEN ~ trims at about the retention asked.
        await raw.config_set({"stream-node-max-entries": 5})
        # Away for 5 s after each loss: the publishes below take a fraction of that.
        bus = RedisBus(redis.url, retention=10, reconnect_initial=5, reconnect_max=5)
        async with reading(bus, got):
            await bus.publish(BusEvent.resource_updated("x://first"))
            with trio.fail_after(GUARD):
                while not got:  # noqa: ASYNC110 - the reader's view
                    await trio.sleep(0.02)
            assert await kill_reader(raw) == 1
            sent = [f"x://{n}" for n in range(100)]
            for uri in sent:
                await bus.publish(BusEvent.resource_updated(uri))
            assert await raw.xlen("trio_mcp:notifications") < 50  # trimmed past the reader
            with trio.fail_after(GUARD):
                while not uris(got) or uris(got)[-1] != sent[-1]:  # noqa: ASYNC110
                    await trio.sleep(0.05)
        # Told, at the gap: what it missed is gone, what is kept follows, in order.
        kinds = [e.kind for e in got]
        assert kinds.count("resync") == 1 and bus.resyncs == 1
        after = uris(got[kinds.index("resync") + 1 :])
        assert after == sent[-len(after) :] and 0 < len(after) < len(sent)


async def test_a_redis_that_came_back_empty_is_a_resync(tmp_path: Path) -> None:
    got: list[BusEvent] = []
    async with redis_server(tmp_path) as redis:
        bus = RedisBus(redis.url, reconnect_initial=0.1, reconnect_max=0.2)
        async with reading(bus, got):
            await bus.publish(BusEvent.resource_updated("x://before"))
            with trio.fail_after(GUARD):
                while not got:  # noqa: ASYNC110 - the reader's view
                    await trio.sleep(0.02)
            await redis.stop()  # no persistence: what it held is gone
            await redis.start()
            with trio.fail_after(GUARD):
                while not any(e.kind == "resync" for e in got):  # noqa: ASYNC110
                    await trio.sleep(0.02)
                # And the bus goes on: a new event arrives after the resync.
                while "x://after" not in uris(got):
                    try:
                        await bus.publish(BusEvent.resource_updated("x://after"))
                    except Exception:
                        await trio.sleep(0.05)
                        continue
                    await trio.sleep(0.05)
        assert [e.kind for e in got][:2] == ["resource_updated", "resync"]
