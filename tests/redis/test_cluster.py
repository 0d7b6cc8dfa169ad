"""Every Redis store, the bus and the relay on a real three-primary Redis Cluster (the session's
``redis_cluster``), through a ``redis+cluster://`` URL; the URL forms; the key layout that keeps
each thing's keys in one slot. Each test keeps to a key prefix of its own on the shared cluster.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import coredis
import pytest
import trio
from coredis.connection import TCPLocation
from coredis.tokens import PureToken

from trio_mcp import Server
from trio_mcp.http import HttpOptions, MemorySessionStore, ScaleOut
from trio_mcp.http._event_store import StreamMeta
from trio_mcp.http._session_store import SessionRecord
from trio_mcp.protocol._tasks import COMPLETED, INPUT_REQUIRED, WORKING, TaskState
from trio_mcp.redis import (
    RedisBus,
    RedisEventStore,
    RedisRelay,
    RedisSessionStore,
    RedisTaskStore,
)
from trio_mcp.redis._client import parse, redact
from trio_mcp.redis._keys import key
from trio_mcp.redis._task_store import WORKER_LOST
from trio_mcp.server import Context
from trio_mcp.server._bus import BusEvent
from trio_mcp.tasks import TaskRecord

from .._http import Served, call_body, parse_sse, request_body, serving
from .._ports import free_port
from ..deploy import system_packages
from ..deploy._services import START_GUARD, RedisCluster

#: Hang guard.
GUARD = 30
#: Enough things that every primary holds some (16384 slots over three primaries).
THINGS = 24


def a_prefix() -> str:
    return f"t{secrets.token_hex(4)}:"


@asynccontextmanager
async def raw(cluster: RedisCluster) -> AsyncIterator[coredis.RedisCluster[Any]]:
    nodes = [TCPLocation("127.0.0.1", port) for port in cluster.ports]
    async with coredis.RedisCluster(startup_nodes=nodes) as client:
        yield client


async def keys_by_node(cluster: RedisCluster, prefix: str) -> dict[int, list[str]]:
    """The keys under ``prefix`` on each primary, by its port."""
    found: dict[int, list[str]] = {}
    for port in cluster.ports:
        async with coredis.Redis("127.0.0.1", port) as node:
            found[port] = [k.decode() async for k in node.scan_iter(match=f"{prefix}*")]
    return found


async def slots_of(client: coredis.RedisCluster[Any], keys: list[str]) -> dict[str, set[int]]:
    """The slots each thing's keys (by hash tag) fall in."""
    out: dict[str, set[int]] = {}
    for name in keys:
        tag = name[name.index("{") + 1 : name.index("}")]
        out.setdefault(tag, set()).add(await client.cluster_keyslot(name))
    return out


# -- URLs ----------------------------------------------------------------------------------------


def test_a_cluster_url_names_its_seed_nodes_and_keeps_its_options() -> None:
    target = parse("redis+cluster://user:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002?x=1")
    assert target.kind == "cluster"
    assert target.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002))
    assert target.base == "redis://user:s3cret@10.0.0.1:7000/?x=1"
    assert "s3cret" not in repr(target)
    assert parse("rediss+cluster://h:1").base == "rediss://h:1/"
    sentinel = parse("redis+sentinel://:pw@s1:26379,s2:26379/mymaster/2")
    assert (sentinel.kind, sentinel.service, sentinel.base) == (
        "sentinel",
        "mymaster",
        "redis://:pw@s1:26379/2",
    )
    assert parse("redis://h:6379/0").kind == "single" and parse("unix:///r.sock").kind == "single"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://h:1", "redis+cluster:// (a Redis Cluster)"),
        ("redis+cluster://", "at least one host:port"),
        ("redis+cluster://h:x", "is not host:port"),
        ("redis+cluster://h:1/0", "a Redis Cluster has no databases"),
        ("redis+sentinel://h:1", "names the service"),
    ],
)
def test_a_wrong_redis_url_is_refused_by_every_store_at_once(url: str, says: str) -> None:
    for store in (RedisBus, RedisEventStore, RedisRelay, RedisSessionStore, RedisTaskStore):
        with pytest.raises(ValueError) as refused:
            store(url)
        assert says in str(refused.value), (store, str(refused.value))


def test_a_prefix_with_a_brace_is_refused() -> None:
    # Its brace would be the hash tag of every key, pairing the wrong keys.
    for store in (RedisEventStore, RedisSessionStore, RedisTaskStore):
        with pytest.raises(ValueError, match="cannot hold"):
            store("redis://h:1", prefix="a{b:")


def test_redact_hides_the_password_of_a_several_host_url() -> None:
    url = "redis+cluster://u:s3cret@a:1,b:2/?stream_timeout=2"
    assert redact(url) == "redis+cluster://u:***@a:1,b:2/?stream_timeout=2"
    assert redact("redis+sentinel://a:1,b:2/m") == "redis+sentinel://a:1,b:2/m"


def test_the_keys_of_one_thing_carry_its_id_as_the_hash_tag() -> None:
    assert key("trio_mcp:", "abc", "events") == "trio_mcp:{abc}:events"


# -- the stores on a cluster -----------------------------------------------------------------------


async def test_the_event_store_on_a_cluster_keeps_each_streams_keys_in_one_slot(
    redis_cluster: RedisCluster,
) -> None:
    prefix = a_prefix()
    store = RedisEventStore(redis_cluster.url, prefix=prefix)
    await store.start()
    try:
        streams = [f"s{n}.{n}" for n in range(THINGS)]
        for number, stream in enumerate(streams):
            await store.open(stream, StreamMeta(f"s{number}", "alice", number))
            for seq in range(1, 6):
                await store.append(stream, seq, b"event %d" % seq)
        await store.finish(streams[0])
        for number, stream in enumerate(streams):
            replay = await store.replay(stream, 2)
            assert replay is not None
            assert replay.events == [(3, b"event 3"), (4, b"event 4"), (5, b"event 5")]
            assert replay.meta == StreamMeta(f"s{number}", "alice", number)
            assert replay.finished == (number == 0)
        sessions = [f"s{n}" for n in range(THINGS)]
        await store.keep_alive(sessions)
        assert all([await store.session_alive(s) for s in sessions])
        by_node = await keys_by_node(redis_cluster, prefix)
        assert all(by_node.values()), by_node  # every primary holds some
        async with raw(redis_cluster) as client:
            every = [name for names in by_node.values() for name in names]
            for tag, slots in (await slots_of(client, every)).items():
                assert len(slots) == 1, (tag, slots)
        for stream in streams:
            await store.forget(stream)
            assert await store.replay(stream, 0) is None
        await store.end_session(sessions[0])
        assert not await store.session_alive(sessions[0])
    finally:
        await store.aclose()


async def test_the_session_store_on_a_cluster(redis_cluster: RedisCluster) -> None:
    prefix = a_prefix()
    store = RedisSessionStore(redis_cluster.url, prefix=prefix)
    await store.start()
    try:
        record = SessionRecord("alice", "2025-06-18", {"name": "c"}, {}, {"tools": {}})
        for number in range(THINGS):
            await store.put(f"n1.{number}", attrs.evolve(record, log_level=str(number)), 60)
        # Each key in a slot of its own, read and refreshed in one pipeline across the nodes.
        ids = [f"n1.{number}" for number in reversed(range(THINGS))]
        got_many = await store.touch_many(ids, 120)
        assert [r.log_level if r else None for r in got_many] == [i[3:] for i in ids]
        for number in range(THINGS):
            got = await store.touch(f"n1.{number}", 120)
            assert got is not None and got.log_level == str(number)
            assert await store.get(f"n1.{number}") == got
            await store.delete(f"n1.{number}")
            assert await store.get(f"n1.{number}") is None
    finally:
        await store.aclose()


def a_task(task_id: str, owner: str = "alice") -> TaskRecord:
    now = time.time()
    return TaskRecord(TaskState(task_id, WORKING, now, now, 60_000), owner)


async def test_the_task_store_on_a_cluster_creates_caps_answers_and_settles(
    redis_cluster: RedisCluster,
) -> None:
    prefix = a_prefix()
    one = RedisTaskStore(redis_cluster.url, prefix=prefix)
    two = RedisTaskStore(redis_cluster.url, prefix=prefix)
    await one.start()
    await two.start()
    try:
        # The quota (one slot) and the tasks (slots of their own) across two stores racing.
        stored: list[bool] = []

        async def create(store: RedisTaskStore, task_id: str) -> None:
            stored.append(await store.create_capped(a_task(task_id), 3))

        async with trio.open_nursery() as nursery:
            for n in range(10):
                nursery.start_soon(create, one if n % 2 else two, f"a{n}")
        assert sorted(stored) == [False] * 7 + [True] * 3
        mine = [t for t in (f"a{n}" for n in range(10)) if await two.get(t) is not None]
        assert len(mine) == 3
        # Waiting for input, answered through the other store, then settled.
        record = await one.get(mine[0])
        assert record is not None
        asking = attrs.evolve(
            record.state, status=INPUT_REQUIRED, input_requests={"q": {"method": "ping"}}
        )
        assert (await one.transition(mine[0], asking)) is not None
        answered = await two.answer(mine[0], {"q": {"result": {}}})
        assert answered is not None and answered.answers == {"q": {"result": {}}}
        done = attrs.evolve(answered.state, status=COMPLETED)
        settled = await two.transition(mine[0], done)
        assert settled is not None and settled.state.status == COMPLETED
        # Settling gave Alice's seat back, on the quota's slot.
        assert await one.create_capped(a_task("a10"), 3)
        assert not await two.create_capped(a_task("a11"), 3)
        with pytest.raises(ValueError, match="exists already"):
            await one.create(a_task("a10"))
        # A heartbeat renews this worker and its leases, whatever slots they are in.
        assert await one._beat()
    finally:
        await one.aclose()
        await two.aclose()


async def test_on_a_cluster_a_task_whose_worker_died_fails_and_frees_its_seat(
    redis_cluster: RedisCluster,
) -> None:
    prefix = a_prefix()
    heartbeat, grace = 0.1, 0.3
    dead = RedisTaskStore(redis_cluster.url, prefix=prefix, heartbeat=heartbeat, grace=grace)
    observer = RedisTaskStore(redis_cluster.url, prefix=prefix, heartbeat=heartbeat, grace=grace)
    await dead.start()
    await observer.start()
    try:
        assert await dead.create_capped(a_task("d0", "dave"), 1)
        await dead.aclose()  # no heartbeat, its liveness key gone
        async with trio.open_nursery() as nursery:
            nursery.start_soon(observer.run)
            with trio.fail_after(GUARD):
                while True:
                    record = await observer.get("d0")
                    assert record is not None
                    if record.state.status != WORKING:
                        break
                    await trio.sleep(heartbeat)
            assert record.state.status_message == WORKER_LOST
            # Failing it gave Dave's seat back.
            assert await observer.create_capped(a_task("d1", "dave"), 1)
            nursery.cancel_scope.cancel()
    finally:
        await observer.aclose()


async def test_the_bus_and_the_relay_on_a_cluster_deliver_what_is_published(
    redis_cluster: RedisCluster,
) -> None:
    prefix = a_prefix()
    bus = RedisBus(redis_cluster.url, prefix=prefix)
    relay = RedisRelay(redis_cluster.url, prefix=prefix)
    heard: list[BusEvent] = []
    relayed: list[bytes] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(bus.subscribe, heard.append)
        await nursery.start(relay.subscribe, "n1", relayed.append)
        await bus.probe()
        await relay.probe()
        await bus.publish(BusEvent.list_changed("tools"))
        assert await relay.send("n1", b"to n1") == 1
        assert await relay.send(None, b"to all") == 1  # sharded: its one subscriber, counted
        with trio.fail_after(GUARD):
            while len(heard) < 1 or len(relayed) < 2:  # noqa: ASYNC110 - delivered by Redis
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert heard[0].kind == BusEvent.list_changed("tools").kind
    assert relayed == [b"to n1", b"to all"]


# -- Sentinel ------------------------------------------------------------------------------------


@asynccontextmanager
async def a_sentinel(directory: Path) -> AsyncIterator[int]:
    """A primary and one Sentinel watching it (as ``mymaster``), on 127.0.0.1: the
    Sentinel's port."""
    await trio.to_thread.run_sync(system_packages.ensure)
    command = system_packages.find("redis-server")
    assert command is not None
    primary, sentinel = free_port(), free_port()
    conf = directory / "sentinel.conf"
    conf.write_text(
        f"port {sentinel}\nbind 127.0.0.1\ndir {directory}\n"
        f"sentinel monitor mymaster 127.0.0.1 {primary} 1\n"
    )
    processes = [
        await trio.lowlevel.open_process(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for arguments in (
            [command, "--bind", "127.0.0.1", "--port", str(primary), "--save", ""],
            [command, str(conf), "--sentinel"],
        )
    ]
    try:
        with trio.fail_after(START_GUARD):
            while True:
                with contextlib.suppress(Exception):
                    async with coredis.Redis("127.0.0.1", sentinel) as asked:
                        if await asked.sentinel_get_master_addr_by_name("mymaster"):
                            break
                await trio.sleep(0.1)
        yield sentinel
    finally:
        with trio.CancelScope(shield=True):
            for process in processes:
                process.kill()
                await process.wait()


async def test_the_stores_reach_a_sentinels_primary(tmp_path: Path) -> None:
    async with a_sentinel(tmp_path) as port:
        url = f"redis+sentinel://127.0.0.1:{port}/mymaster/0"
        sessions = RedisSessionStore(url)
        tasks = RedisTaskStore(url)
        await sessions.start()
        await tasks.start()
        try:
            record = SessionRecord("", "2025-06-18", {}, {}, {})
            await sessions.put("n1.a", record, 60)
            assert await sessions.get("n1.a") == record
            await tasks.create(a_task("t1"))
            assert await tasks.get("t1") is not None
            await sessions.probe()
        finally:
            await tasks.aclose()
            await sessions.aclose()
        unknown = RedisSessionStore(f"redis+sentinel://127.0.0.1:{port}/nosuch", timeout=2)
        with pytest.raises(Exception, match="No primary found for 'nosuch'"):
            await unknown.start()


def another_url(cluster: RedisCluster) -> str:
    """The same cluster by its seed nodes in another order: a process holds one subscriber per
    URL, so a second URL gives a second worker in this process a subscriber of its own, as a
    second process would have."""
    return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in reversed(cluster.ports))


async def test_the_relay_on_a_cluster_counts_every_worker_its_message_reached(
    redis_cluster: RedisCluster,
) -> None:
    # A plain PUBLISH on a cluster counts only the subscribers of the node that took it, so
    # a change waited out record_cache there; a sharded one counts every subscriber.
    prefix = a_prefix()
    one = RedisRelay(redis_cluster.url, prefix=prefix)
    two = RedisRelay(another_url(redis_cluster), prefix=prefix)
    heard: dict[str, list[bytes]] = {"n1": [], "n2": []}
    async with trio.open_nursery() as nursery:
        await nursery.start(one.subscribe, "n1", heard["n1"].append)
        await nursery.start(two.subscribe, "n2", heard["n2"].append)
        assert await one.send(None, b"to all") == 2
        assert await two.send("n1", b"to n1") == 1
        assert await one.send("n3", b"to nobody") == 0
        with trio.fail_after(GUARD):
            while len(heard["n1"]) < 2 or not heard["n2"]:  # noqa: ASYNC110 - by Redis
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert heard == {"n1": [b"to all", b"to n1"], "n2": [b"to all"]}


def logging_server() -> Server:
    server = Server("logs", "1.0.0")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        await ctx.info("fine")
        await ctx.error("bad")
        return "done"

    return server


async def test_on_a_cluster_a_change_is_answered_once_every_worker_said_so(
    redis_cluster: RedisCluster,
) -> None:
    # record_cache of a minute: a change answered only once that passed would fail the guard.
    prefix = a_prefix()
    store = MemorySessionStore()

    def options(node: str, url: str) -> HttpOptions:
        relay = RedisRelay(url, prefix=prefix)
        scale_out = ScaleOut(session_store=store, node_id=node, relay=relay, record_cache=60)
        return HttpOptions(scale_out=scale_out)

    async def logs(served: Served, session: str, rid: int) -> list[str]:
        response = await served.post(call_body(rid, "chatty"), session)
        assert response.status_code == 200, response.text
        found = [e.json() for e in parse_sse(response.text) if e.data]
        return [m["params"]["data"] for m in found if m.get("method") == "notifications/message"]

    async with (
        serving(logging_server(), options("a", redis_cluster.url)) as a,
        serving(logging_server(), options("b", another_url(redis_cluster))) as b,
    ):
        session = await a.initialize()
        assert await logs(b, session, 1) == ["fine", "bad"]  # b keeps a reading of the record
        with trio.fail_after(GUARD):
            level = await a.call(session, request_body(2, "logging/setLevel", {"level": "error"}))
        assert level["result"] == {}
        assert await logs(b, session, 3) == ["bad"]  # b dropped its reading before the answer


async def test_on_a_cluster_a_killed_subscriber_subscribes_again_and_says_so(
    redis_cluster: RedisCluster,
) -> None:
    # The sharded subscriber holds a connection per shard its channels fall in: killing them
    # is noticed (``hearing`` changes, so no reading made before stands) and it subscribes
    # every channel again, counted by the next send.
    prefix = a_prefix()
    relay = RedisRelay(redis_cluster.url, prefix=prefix, reconnect_initial=0.05)
    heard: list[bytes] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(relay.subscribe, "n1", heard.append)
        first = relay.hearing()
        assert first is not None
        killed = 0
        for port in redis_cluster.ports:
            async with coredis.Redis("127.0.0.1", port) as node:
                killed += await node.client_kill(type_=PureToken.PUBSUB)
        assert killed >= 1
        with trio.fail_after(GUARD):
            while relay.hearing() in (None, first):  # noqa: ASYNC110 - the hub's own state
                await trio.sleep(0.01)
            while await relay.send(None, b"again") != 1:  # noqa: ASYNC110 - until subscribed
                await trio.sleep(0.01)
            while not heard:  # noqa: ASYNC110 - delivered by Redis
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert set(heard) == {b"again"}
