"""The in-memory event store behind resumable SSE streams: bounded per stream, in bytes and in
time, and holding only streams that can still be resumed."""

from __future__ import annotations

import pytest

from trio_mcp.server import MemoryEventStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.invariant(11)
def test_replay_gives_what_came_after_and_refuses_what_was_dropped() -> None:
    store = MemoryEventStore(max_events_per_stream=3)
    for seq in range(1, 6):
        store.append("s.r1", seq, f"e{seq}".encode())
    assert store.replay("s.r1", 2) == [(3, b"e3"), (4, b"e4"), (5, b"e5")]
    assert store.replay("s.r1", 5) == []
    # Event 2 was dropped from the ring: a client that missed it cannot be made whole.
    assert store.replay("s.r1", 1) is None
    assert store.replay("s.r2", 0) is None
    store.forget("s.r1")
    assert store.replay("s.r1", 4) is None
    assert len(store) == 0


@pytest.mark.invariant(11)
def test_a_stream_expires_ttl_after_its_last_event() -> None:
    clock = FakeClock()
    store = MemoryEventStore(ttl=10, clock=clock)
    store.append("s.r1", 1, b"a")
    clock.now = 8
    store.append("s.r1", 2, b"b")
    clock.now = 15
    assert store.replay("s.r1", 0) == [(1, b"a"), (2, b"b")]
    clock.now = 19
    assert store.replay("s.r1", 0) is None


@pytest.mark.invariant(11)
def test_busy_streams_do_not_keep_idle_ones_from_expiring() -> None:
    """Streams that stay active (a session's GET stream, say) must not shield streams created
    after them from expiry: the store would grow without bound."""
    clock = FakeClock()
    store = MemoryEventStore(ttl=10, clock=clock)
    busy = [f"busy{n}.0" for n in range(20)]
    for stream in busy:
        store.append(stream, 1, b"x")
    clock.now = 1
    for n in range(500):
        store.append(f"idle{n}.r1", 1, b"x")
    for tick in range(2, 60):
        clock.now = tick
        for stream in busy:
            store.append(stream, tick, b"x")
        store.append(f"new{tick}.r1", 1, b"x")
    assert store.replay("idle0.r1", 0) is None
    # Only the busy streams and the ones created within the ttl are left.
    assert len(store) == len(busy) + 11


def test_the_byte_cap_drops_the_least_recently_active_streams_first() -> None:
    store = MemoryEventStore(max_bytes=10_000)
    for n in range(3):
        store.append(f"s.r{n}", 1, b"x" * 2000)
    store.append("s.r0", 2, b"y")  # active again: now the most recent
    store.append("s.r3", 1, b"x" * 2000)
    assert store.held_bytes <= 10_000
    assert store.replay("s.r0", 0) == [(1, b"x" * 2000), (2, b"y")]
    assert store.replay("s.r2", 0) == [(1, b"x" * 2000)]
    assert store.replay("s.r3", 0) == [(1, b"x" * 2000)]
    # The least recently active went: a resume of it gets the same answer as an expired one.
    assert store.replay("s.r1", 0) is None
    assert len(store) == 3
    for stream in ("s.r0", "s.r2", "s.r3"):
        store.forget(stream)
    assert store.held_bytes == 0


def test_a_stream_keeps_its_newest_bytes_and_refuses_a_resume_across_a_gap() -> None:
    store = MemoryEventStore(max_stream_bytes=5_000)
    for seq in range(1, 5):
        store.append("s.r1", seq, bytes([seq]) * 1500)
    assert [seq for seq, _ in store.replay("s.r1", 2) or []] == [3, 4]
    assert store.replay("s.r1", 1) is None  # event 2 was dropped
    # An event larger than a stream may hold is not kept: nothing before it can be resumed.
    store.append("s.r1", 5, b"z" * 6000)
    assert store.replay("s.r1", 4) is None
    assert store.replay("s.r1", 5) == []
    assert store.held_bytes < 5_000


def test_many_small_events_are_counted_with_their_overhead() -> None:
    store = MemoryEventStore(max_bytes=100_000)
    for n in range(10_000):
        store.append(f"s.r{n}", 1, b"")
    assert store.held_bytes <= 100_000
    assert len(store) < 100
