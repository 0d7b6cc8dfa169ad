"""The event store behind resumable SSE streams (``http/_event_store.py``): bounded per stream, in
bytes and in time, holding only streams that can still be resumed; the contract the memory and
the Redis stores both meet."""

from __future__ import annotations

import collections
import gc
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_mcp import Server
from trio_mcp._demo import demo_server
from trio_mcp.http import (
    EventStore,
    EventStoreUnavailable,
    HttpOptions,
    MemoryEventStore,
    Replay,
    ScaleOut,
    StreamMeta,
)
from trio_mcp.redis import RedisEventStore

from .._http import call_body, eventually, serving
from .._ports import free_port
from ..deploy._services import redis_server


def events(replay: Replay | None) -> list[tuple[int, bytes]] | None:
    return replay.events if replay is not None else None


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.invariant(11)
async def test_replay_gives_what_came_after_and_refuses_what_was_dropped() -> None:
    store = MemoryEventStore(max_events_per_stream=3)
    for seq in range(1, 6):
        await store.append("s.r1", seq, f"e{seq}".encode())
    assert events(await store.replay("s.r1", 2)) == [(3, b"e3"), (4, b"e4"), (5, b"e5")]
    assert events(await store.replay("s.r1", 5)) == []
    # Event 2 was dropped from the ring: a client that missed it cannot be made whole.
    assert events(await store.replay("s.r1", 1)) is None
    assert events(await store.replay("s.r2", 0)) is None
    await store.forget("s.r1")
    assert events(await store.replay("s.r1", 4)) is None
    assert len(store) == 0


@pytest.mark.invariant(11)
async def test_a_stream_expires_ttl_after_its_last_event() -> None:
    clock = FakeClock()
    store = MemoryEventStore(ttl=10, clock=clock)
    await store.append("s.r1", 1, b"a")
    clock.now = 8
    await store.append("s.r1", 2, b"b")
    clock.now = 15
    assert events(await store.replay("s.r1", 0)) == [(1, b"a"), (2, b"b")]
    clock.now = 19
    assert events(await store.replay("s.r1", 0)) is None


@pytest.mark.invariant(11)
async def test_busy_streams_do_not_keep_idle_ones_from_expiring() -> None:
    """Streams that stay active (a session's GET stream, say) must not shield streams created
    after them from expiry: the store would grow without bound."""
    clock = FakeClock()
    store = MemoryEventStore(ttl=10, clock=clock)
    busy = [f"busy{n}.0" for n in range(20)]
    for stream in busy:
        await store.append(stream, 1, b"x")
    clock.now = 1
    for n in range(500):
        await store.append(f"idle{n}.r1", 1, b"x")
    for tick in range(2, 60):
        clock.now = tick
        for stream in busy:
            await store.append(stream, tick, b"x")
        await store.append(f"new{tick}.r1", 1, b"x")
    assert events(await store.replay("idle0.r1", 0)) is None
    # Only the busy streams and the ones created within the ttl are left.
    assert len(store) == len(busy) + 11


class Seq(int):
    """A sequence number that counts how often the store compares it."""

    compared = 0

    def _plain(self, other: object) -> tuple[int, int]:
        Seq.compared += 1
        assert isinstance(other, int)
        return int(self), int(other)

    def __gt__(self, other: object) -> bool:
        mine, theirs = self._plain(other)
        return mine > theirs

    def __ge__(self, other: object) -> bool:
        mine, theirs = self._plain(other)
        return mine >= theirs

    def __lt__(self, other: object) -> bool:
        mine, theirs = self._plain(other)
        return mine < theirs

    def __le__(self, other: object) -> bool:
        mine, theirs = self._plain(other)
        return mine <= theirs


async def test_a_resume_looks_at_what_it_missed_not_at_the_whole_stream() -> None:
    """Resuming the last few events of a long stream looks at those events (and one more),
    not at every event the stream holds: a resume costs what it gives back."""
    store = MemoryEventStore(max_events_per_stream=10_000)
    for seq in range(1, 10_001):
        await store.append("s.r1", Seq(seq), b"e")
    Seq.compared = 0
    replay = await store.replay("s.r1", 9_995)
    assert [seq for seq, _ in events(replay) or []] == [9_996, 9_997, 9_998, 9_999, 10_000]
    assert Seq.compared <= 5 + 3  # the five, the one before them, the checks of the bounds


@pytest.mark.parametrize("shared", [False, True])
async def test_only_a_shared_store_is_told_which_sessions_live(
    shared: bool, mock_clock: trio.testing.MockClock
) -> None:
    """The liveness of sessions is for the other workers of a shared store; an app's own store
    is never told it, so idle sessions cost the heartbeat nothing (it named every one of them
    every few seconds)."""
    mock_clock.rate = 1
    store = MemoryEventStore(heartbeat=5)
    options = HttpOptions(scale_out=ScaleOut(event_store=store)) if shared else HttpOptions()
    async with serving(Server("alive"), options, guard=700) as served:
        sessions = [await served.initialize() for _ in range(3)]
        mock_clock.jump(30)  # six heartbeats' time (an unused session lives 60 s)
        await trio.sleep(0.5)  # and it beats (half a second of the clock's own flow)
        alive = [await served.app.store.session_alive(s) for s in sessions]
    assert alive == [shared] * 3


async def test_the_byte_cap_drops_the_least_recently_active_streams_first() -> None:
    store = MemoryEventStore(max_bytes=10_000)
    for n in range(3):
        await store.append(f"s.r{n}", 1, b"x" * 2000)
    await store.append("s.r0", 2, b"y")  # active again: now the most recent
    await store.append("s.r3", 1, b"x" * 2000)
    assert store.held_bytes <= 10_000
    assert events(await store.replay("s.r0", 0)) == [(1, b"x" * 2000), (2, b"y")]
    assert events(await store.replay("s.r2", 0)) == [(1, b"x" * 2000)]
    assert events(await store.replay("s.r3", 0)) == [(1, b"x" * 2000)]
    # The least recently active went: a resume of it gets the same answer as an expired one.
    assert events(await store.replay("s.r1", 0)) is None
    assert len(store) == 3
    for stream in ("s.r0", "s.r2", "s.r3"):
        await store.forget(stream)
    assert store.held_bytes == 0


async def test_a_stream_keeps_its_newest_bytes_and_refuses_a_resume_across_a_gap() -> None:
    store = MemoryEventStore(max_stream_bytes=5_000)
    for seq in range(1, 5):
        await store.append("s.r1", seq, bytes([seq]) * 1500)
    assert [seq for seq, _ in events(await store.replay("s.r1", 2)) or []] == [3, 4]
    assert events(await store.replay("s.r1", 1)) is None  # event 2 was dropped
    # An event larger than a stream may hold is not kept: nothing before it can be resumed.
    await store.append("s.r1", 5, b"z" * 6000)
    assert events(await store.replay("s.r1", 4)) is None
    assert events(await store.replay("s.r1", 5)) == []
    assert store.held_bytes < 5_000


async def test_many_small_events_are_counted_with_their_overhead() -> None:
    store = MemoryEventStore(max_bytes=100_000)
    for n in range(10_000):
        await store.append(f"s.r{n}", 1, b"")
    assert store.held_bytes <= 100_000
    assert len(store) < 100


# -- through a real hypercorn ----------------------------------------------------------------------

MIB = 1024 * 1024


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def big_result_server(size: int) -> tuple[Server, dict[int, trio.Event]]:
    """A tool whose result is ``size`` bytes of text; ``big(gate=n)`` answers once the test
    sets ``gates[n]``."""
    server = demo_server()
    gates: dict[int, trio.Event] = collections.defaultdict(trio.Event)

    @server.tool()
    async def big(gate: int | None = None) -> str:
        if gate is not None:
            await gates[gate].wait()
        return "x" * size

    return server, gates


@pytest.mark.invariant(11)
async def test_results_delivered_on_a_live_stream_are_not_kept() -> None:
    """Every event of a stream that reached its client, up to the response, has nothing left to
    resume: 40 results of 2 MiB leave the server's memory where it was (they used to be kept
    for the store's ttl)."""
    server, _ = big_result_server(2 * MIB)
    async with serving(server) as served:
        session = await served.initialize()
        assert "result" in await served.call(session, call_body(0, "big"))
        tracemalloc.start()
        try:
            before = traced()
            for rid in range(1, 41):
                message = await served.call(session, call_body(rid, "big"))
                assert len(message["result"]["content"][0]["text"]) == 2 * MIB
                del message
            # The engine's writer holds the last batch it wrote until the next one: a small
            # call takes its place.
            assert "result" in await served.call(session, call_body(41, "echo", {"text": "x"}))
            after = traced()
        finally:
            tracemalloc.stop()
        assert after - before < 8 * MIB, (before, after)
        store = served.app.store
        assert isinstance(store, MemoryEventStore)
        assert len(store) == 0
        assert store.held_bytes == 0


@pytest.mark.parametrize("json_response", [False, True])
async def test_only_a_stream_that_can_be_resumed_is_stored(json_response: bool) -> None:
    """An SSE answer's stream is in the store while its request runs (a client may resume it);
    a JSON answer has no event ids, so nothing of its stream is ever written there."""
    server, gates = big_result_server(10)
    async with serving(server, HttpOptions(json_response=json_response)) as served:
        session = await served.initialize()
        store = served.app.store
        assert isinstance(store, MemoryEventStore)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(served.call, session, call_body(1, "big", {"gate": 1}))
            await eventually(lambda: bool(served.app.sessions[session].request_streams))
            assert len(store) == (0 if json_response else 1)
            gates[1].set()
        assert len(store) == 0


@pytest.mark.invariant(11)
async def test_cut_streams_are_kept_within_the_stores_byte_cap_oldest_dropped_first() -> None:
    """Streams whose client went away before the response are kept for a resume, but only up to
    the store's byte cap: 40 cut streams of 2 MiB under the default 32 MiB keep the newest ones;
    the newest resumes whole, the oldest gets the same 400 as an expired one."""
    server, gates = big_result_server(2 * MIB)
    async with serving(server) as served:
        store = served.app.store
        session = await served.initialize()
        state = served.app.sessions[session]
        primes: list[str] = []

        async def cut(rid: int) -> None:
            async with served.stream_post(call_body(rid, "big", {"gate": rid}), session) as r:
                prime = await r.next()
                assert prime is not None and prime.id is not None
                primes.append(prime.id)
            # Once the server has seen the client go, the result comes: it waits for a resume.
            await eventually(lambda: state.request_streams[rid].listener is None)
            gates[rid].set()
            await eventually(lambda: rid not in state.request_streams)

        tracemalloc.start()
        try:
            before = traced()
            for rid in range(1, 41):
                await cut(rid)
            # The engine's writer holds the last batch it wrote until the next one: a small
            # call takes its place.
            assert "result" in await served.call(session, call_body(41, "echo", {"text": "x"}))
            after = traced()
        finally:
            tracemalloc.stop()
        assert after - before < 40 * MIB, (before, after)
        assert isinstance(store, MemoryEventStore)
        assert 8 * MIB < store.held_bytes <= 32 * MIB
        async with served.stream_get(session, last_event_id=primes[-1]) as resumed:
            (event,) = await resumed.rest()
        assert len(event.json()["result"]["content"][0]["text"]) == 2 * MIB
        headers = served.headers(session, accept="text/event-stream", last_event_id=primes[0])
        response = await served.client.get(served.url, headers=headers)
        assert response.status_code == 400
        assert response.json()["error"]["message"] == "Bad Request: unknown Last-Event-ID"


# -- the contract, both stores; the Redis one on a real redis-server ------------------------------


@asynccontextmanager
async def a_store(
    kind: str, tmp_path: Path, *, max_events_per_stream: int = 256, max_stream_bytes: int = 2**23
) -> AsyncIterator[EventStore]:
    per_stream, stream_bytes = max_events_per_stream, max_stream_bytes
    if kind == "memory":
        yield MemoryEventStore(
            heartbeat=0.1, max_events_per_stream=per_stream, max_stream_bytes=stream_bytes
        )
        return
    async with redis_server(tmp_path) as redis:
        store = RedisEventStore(
            redis.url,
            heartbeat=0.1,
            max_events_per_stream=per_stream,
            max_stream_bytes=stream_bytes,
        )
        await store.start()
        try:
            yield store
        finally:
            await store.aclose()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_store_replays_after_an_id_with_its_owner_and_its_end(
    kind: str, tmp_path: Path
) -> None:
    async with a_store(kind, tmp_path, max_events_per_stream=3) as store:
        await store.open("s.r1", StreamMeta("s", "alice", 7))
        for seq in range(1, 6):
            await store.append("s.r1", seq, f"e{seq}".encode())
        replay = await store.replay("s.r1", 2)
        assert replay == Replay(
            [(3, b"e3"), (4, b"e4"), (5, b"e5")], False, StreamMeta("s", "alice", 7)
        )
        assert await store.replay("s.r1", 1) is None  # event 2 was dropped: no gap is served
        await store.finish("s.r1")
        assert await store.replay("s.r1", 5) == Replay([], True, StreamMeta("s", "alice", 7))
        await store.forget("s.r1")
        assert await store.replay("s.r1", 0) is None
        assert await store.replay("never.r1", 0) is None


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_store_keeps_a_streams_newest_bytes(kind: str, tmp_path: Path) -> None:
    async with a_store(kind, tmp_path, max_stream_bytes=5_000) as store:
        for seq in range(1, 5):
            await store.append("s.r1", seq, bytes([seq]) * 1500)
        assert [seq for seq, _ in events(await store.replay("s.r1", 2)) or []] == [3, 4]
        assert await store.replay("s.r1", 1) is None


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_session_lives_while_its_worker_says_so(kind: str, tmp_path: Path) -> None:
    async with a_store(kind, tmp_path) as store:
        await store.keep_alive(["a", "b"])
        assert await store.session_alive("a")
        await store.end_session("b")
        assert not await store.session_alive("b")
        await trio.sleep(0.5)  # three heartbeats of 0.1 s without a word
        assert not await store.session_alive("a")


async def test_redis_down_at_start_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    url = f"redis://probe:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(EventStoreUnavailable) as raised:
        await RedisEventStore(url).start()
    message = str(raised.value)
    assert "127.0.0.1" in message and "cannot be reached" in message
    assert "hunter2" not in message


async def test_redis_lost_mid_run_fails_clearly_and_recovers(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        store = RedisEventStore(redis.url, timeout=2)
        await store.start()
        try:
            await store.append("s.r1", 1, b"a")
            await redis.stop()
            with pytest.raises(EventStoreUnavailable, match="failed"):
                await store.append("s.r1", 2, b"b")
            with pytest.raises(EventStoreUnavailable):
                await store.replay("s.r1", 0)
            await redis.start()
            await store.append("s.r9", 1, b"back")
            assert events(await store.replay("s.r9", 0)) == [(1, b"back")]
        finally:
            await store.aclose()
