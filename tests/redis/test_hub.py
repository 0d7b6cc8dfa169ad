"""One Redis pool and one subscriber per process, on a real redis-server: every store, the bus
and the relay share the pool, the relay's listeners the subscriber (the bus reads its stream on
a connection of its own), ``CLIENT LIST`` shows it, and the subscriber survives a kill and the
departure of the listener that hosted it."""

from __future__ import annotations

import collections
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import coredis
import pytest
import trio
import trio.testing
from coredis.tokens import PureToken

from trio_mcp.http import EventStoreUnavailable, RelayUnavailable
from trio_mcp.redis import (
    RedisBus,
    RedisEventStore,
    RedisRelay,
    RedisSessionStore,
    RedisTaskStore,
)
from trio_mcp.redis._hub import RedisUnavailable, is_lost, talking
from trio_mcp.redis._link import RedisLink
from trio_mcp.server import BusError, BusEvent

from ..deploy._services import Redis, redis_server

GUARD = 10
SUB = f"trio_mcp:{os.getpid()}:sub"
POOL = f"trio_mcp:{os.getpid()}:pool"
BUS = f"trio_mcp:{os.getpid()}:bus"


@asynccontextmanager
async def raw_redis(redis: Redis) -> AsyncIterator[coredis.Redis[str]]:
    """The test's own client (unnamed, so ``CLIENT LIST`` tells it from the process's)."""
    async with coredis.Redis.from_url(redis.url, decode_responses=True) as raw:
        yield raw


async def ours(raw: coredis.Redis[str]) -> collections.Counter[str]:
    """How many connections of this process there are, by name."""
    names = [str(c["name"]) for c in await raw.client_list()]
    return collections.Counter(n for n in names if n.startswith(f"trio_mcp:{os.getpid()}:"))


async def subscribers(raw: coredis.Redis[str]) -> list[tuple[str, int]]:
    """The pub/sub connections: their names and how many channels each carries."""
    return [(str(c["name"]), int(c["sub"])) for c in await raw.client_list(type_=PureToken.PUBSUB)]


@asynccontextmanager
async def everything(redis: Redis) -> AsyncIterator[tuple[RedisBus, RedisRelay, Any]]:
    """The three stores started, and the bus and the relay (node n1) subscribed; yields the bus,
    the relay and what they received."""
    got: dict[str, list[Any]] = {"bus": [], "relay": []}
    stores: list[RedisEventStore | RedisSessionStore | RedisTaskStore] = [
        RedisEventStore(redis.url),
        RedisSessionStore(redis.url),
        RedisTaskStore(redis.url),
    ]
    bus, relay = RedisBus(redis.url, reconnect_max=0.2), RedisRelay(redis.url, reconnect_max=0.2)
    async with AsyncExitStack() as stack:
        for store in stores:
            await store.start()
            stack.push_async_callback(store.aclose)
        nursery = await stack.enter_async_context(trio.open_nursery())
        await nursery.start(bus.subscribe, got["bus"].append)
        await nursery.start(relay.subscribe, "n1", got["relay"].append)
        yield bus, relay, got
        nursery.cancel_scope.cancel()


async def crossing(bus: RedisBus, relay: RedisRelay, got: Any, tag: str) -> None:
    """Publish on the bus and send on both relay channels until each arrives."""
    event = BusEvent("list_changed", {"kind": tag})
    with trio.fail_after(GUARD):
        while not (
            event in got["bus"] and {b"1" + tag.encode(), b"*" + tag.encode()} <= set(got["relay"])
        ):
            await bus.publish(event)
            await relay.send("n1", b"1" + tag.encode())
            await relay.send(None, b"*" + tag.encode())
            await trio.sleep(0.05)


async def test_every_store_the_bus_and_the_relay_share_one_pool_and_one_subscriber(
    tmp_path: Path,
) -> None:
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        async with everything(redis) as (bus, relay, got):
            await crossing(bus, relay, got, "a")
            # One subscriber, carrying the relay's two channels.
            assert await subscribers(raw) == [(SUB, 2)]
            # The stores and the relay have no connection of their own: one pool (coredis
            # multiplexes commands on its connections), the subscriber, and the bus's reader.
            names = await ours(raw)
            assert set(names) == {SUB, POOL, BUS} and names[SUB] == names[BUS] == 1
        # The last user gone, so are the connections.
        with trio.fail_after(GUARD):
            while await ours(raw):  # noqa: ASYNC110 - Redis notices a closed socket by itself
                await trio.sleep(0.02)


async def test_a_killed_subscriber_subscribes_every_channel_again(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        raw_redis(redis) as raw,
        everything(redis) as (bus, relay, got),
    ):
        await crossing(bus, relay, got, "before")
        [killed] = await raw.client_list(type_=PureToken.PUBSUB)
        assert await raw.client_kill(type_=PureToken.PUBSUB) == 1
        with trio.fail_after(GUARD):
            while True:
                [again] = await raw.client_list(type_=PureToken.PUBSUB) or [killed]
                if again["id"] != killed["id"] and again["sub"] == 2:
                    break
                await trio.sleep(0.02)
        assert again["name"] == SUB
        await crossing(bus, relay, got, "after")


async def test_a_relay_says_how_many_subscribers_a_message_reached(tmp_path: Path) -> None:
    """What a change waits for (the word of each): one subscriber per process, whatever
    listens through it; none for a node nobody listens as."""
    async with redis_server(tmp_path) as redis:
        relay = RedisRelay(redis.url)
        async with trio.open_nursery() as nursery:
            await nursery.start(relay.subscribe, "n1", lambda _: None)
            assert await relay.send(None, b"to all") == 1
            assert await relay.send("n1", b"to n1") == 1
            assert await relay.send("n9", b"to nobody") == 0
            nursery.cancel_scope.cancel()


async def test_a_relay_says_when_it_could_have_missed_a_message(tmp_path: Path) -> None:
    """Redis stopped: ``hearing`` is None until the subscriber is back, then a new number (what
    a worker's readings of session records stand on); the same after a killed connection."""
    async with redis_server(tmp_path) as redis:
        relay = RedisRelay(redis.url, reconnect_initial=0.05, reconnect_max=0.2)
        assert relay.hearing() is None  # not started
        async with trio.open_nursery() as nursery:
            await nursery.start(relay.subscribe, "n1", lambda _: None)
            first = relay.hearing()
            assert first is not None
            await redis.stop()
            with trio.fail_after(GUARD):
                while relay.hearing() is not None:  # noqa: ASYNC110 - the hub's own state
                    await trio.sleep(0.01)
            await redis.start()
            with trio.fail_after(GUARD):
                while relay.hearing() is None:  # noqa: ASYNC110 - the hub's own state
                    await trio.sleep(0.01)
            second = relay.hearing()
            assert second != first
            async with raw_redis(redis) as raw:
                assert await raw.client_kill(type_=PureToken.PUBSUB) == 1
            with trio.fail_after(GUARD):
                while relay.hearing() in (None, second):  # noqa: ASYNC110 - the hub's own state
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()


async def test_the_subscriber_outlives_the_listener_that_hosted_it(tmp_path: Path) -> None:
    """The relay of node n2 came first and hosts the subscriber; it stops: n1's takes the
    subscriber over, with its own channels only. (The pool is the store's, opened in this
    task, as the HTTP app's lifespan opens it.)"""
    got: list[bytes] = []
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        store = RedisSessionStore(redis.url)
        await store.start()
        first, relay = RedisRelay(redis.url), RedisRelay(redis.url)
        async with trio.open_nursery() as nursery:
            first_scope = trio.CancelScope()

            async def first_alone(task_status: trio.TaskStatus[None]) -> None:
                with first_scope:
                    await first.subscribe("n2", lambda _: None, task_status=task_status)

            await nursery.start(first_alone)
            await nursery.start(relay.subscribe, "n1", got.append)
            assert await subscribers(raw) == [(SUB, 3)]  # n2, n1 and everyone's
            first_scope.cancel()
            with trio.fail_after(GUARD):
                while await subscribers(raw) != [(SUB, 2)]:  # noqa: ASYNC110 - Redis's view
                    await trio.sleep(0.02)
                while b"still" not in got:
                    await relay.send("n1", b"still")
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        await store.aclose()


async def test_a_listener_that_leaves_unsubscribes_what_nobody_else_hears(
    tmp_path: Path,
) -> None:
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        first, relay = RedisRelay(redis.url), RedisRelay(redis.url)
        async with trio.open_nursery() as nursery:
            await nursery.start(first.subscribe, "n2", lambda _: None)
            relay_scope = trio.CancelScope()

            async def relay_alone(task_status: trio.TaskStatus[None]) -> None:
                with relay_scope:
                    await relay.subscribe("n1", lambda _: None, task_status=task_status)

            await nursery.start(relay_alone)
            assert await subscribers(raw) == [(SUB, 3)]
            relay_scope.cancel()
            with trio.fail_after(GUARD):
                while await subscribers(raw) != [(SUB, 2)]:  # noqa: ASYNC110 - Redis's view
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()


async def test_the_task_that_opened_the_pool_closes_it_after_the_others(tmp_path: Path) -> None:
    """Stores closed out of order: the one whose task opened the pool waits for the other,
    and the pool serves it meanwhile."""
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        first, second = RedisEventStore(redis.url), RedisSessionStore(redis.url)
        first_started, second_started = trio.Event(), trio.Event()
        closed, release_second = trio.Event(), trio.Event()

        async def opener() -> None:
            await first.start()
            first_started.set()
            await second_started.wait()
            await first.aclose()
            closed.set()

        async def user() -> None:
            await second.start()
            second_started.set()
            await release_second.wait()
            await second.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(opener)
            await first_started.wait()
            nursery.start_soon(user)
            await trio.testing.wait_all_tasks_blocked()
            assert not closed.is_set()
            assert await second.get("no such session") is None
            assert POOL in await ours(raw)
            release_second.set()
        assert closed.is_set()
        with trio.fail_after(GUARD):
            while await ours(raw):  # noqa: ASYNC110 - Redis notices a closed socket by itself
                await trio.sleep(0.02)


@pytest.mark.parametrize("kind", ["bus", "relay"])
async def test_a_redis_that_stalls_fails_publish_and_send_alike(tmp_path: Path, kind: str) -> None:
    async with redis_server(tmp_path) as redis, raw_redis(redis) as raw:
        bus, relay = RedisBus(redis.url, timeout=0.5), RedisRelay(redis.url, timeout=0.5)
        async with trio.open_nursery() as nursery:
            await nursery.start(bus.subscribe, lambda _: None)
            await nursery.start(relay.subscribe, "n1", lambda _: None)
            await raw.client_pause(3000, PureToken.WRITE)  # PUBLISH waits, unanswered
            error: type[Exception] = BusError if kind == "bus" else RelayUnavailable
            with pytest.raises(error, match="failed: no answer in time"):
                if kind == "bus":
                    await bus.publish(BusEvent("list_changed", {"kind": "tools"}))
                else:
                    await relay.send(None, b"x")
            await raw.client_unpause()
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "error",
    [TimeoutError("timed out"), coredis.exceptions.ConnectionError("refused"), OSError("refused")],
)
@pytest.mark.parametrize("unavailable", [BusError, RelayUnavailable, EventStoreUnavailable])
async def test_every_user_sees_a_lost_redis_as_its_own_error(
    error: Exception, unavailable: type[Exception]
) -> None:
    assert is_lost(error)
    link = RedisLink("redis://127.0.0.1:1/0", what="probe", unavailable=unavailable, timeout=1)
    with pytest.raises(unavailable, match=r"probe's Redis at redis://127\.0\.0\.1:1/0 failed"):
        async with link.errors():
            raise error
    with pytest.raises(RedisUnavailable, match=r"timed out|refused"):
        async with talking("redis://127.0.0.1:1/0", 1):
            raise error
