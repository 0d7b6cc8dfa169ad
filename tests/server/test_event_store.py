"""The in-memory event store behind resumable SSE streams: bounded per stream and in time."""

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
