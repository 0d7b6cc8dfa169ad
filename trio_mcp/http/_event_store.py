"""The store that makes the SSE streams of a Streamable HTTP session resumable.

A stream outlives the HTTP connection that carries it: a request's stream keeps collecting
messages while its client is away, and a client that comes back with ``Last-Event-ID`` is given
what it missed. Event ids encode session, stream and sequence, so a reconnect names exactly one
stream of one session, and any worker that shares the store can serve it. The streams themselves,
and the writer that feeds the store, are in ``_streams.py``.

The store is bounded in events and bytes per stream, in bytes in total and in age, and it keeps
only what can still be resumed.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Collection
from typing import Protocol

import attrs

from ..otel import event_store_bytes
from ..protocol._jsonrpc import RequestId


class EventStoreUnavailable(Exception):
    """The event store cannot be reached (or did not answer in time): what needs it fails with
    this, everything else goes on."""


@attrs.frozen
class StreamMeta:
    """Whose a stream is: its session, the ``Principal.identity`` that opened the session (None
    without authorization), and the request it answers (None: the standalone GET stream). A
    resume is served only to the same session and owner; the request id lets another worker
    end an orphaned stream with an error response for it."""

    session_id: str
    owner: str | None = None
    request_id: RequestId | None = None


@attrs.frozen
class Replay:
    """What a store still holds of a stream after an event: the events, in order, with no gap;
    whether the stream was finished (its last event was its last); whose it is (None if the
    stream was never opened with its metadata)."""

    events: list[tuple[int, bytes]]
    finished: bool = False
    meta: StreamMeta | None = None


class EventStore(Protocol):
    """Where stream events are kept for replay, possibly shared by several workers; implement it
    to keep them elsewhere (:class:`MemoryEventStore` in this process, ``RedisEventStore``
    across processes and hosts).

    The app calls ``forget`` as soon as nobody can resume a stream any more: its events and
    its end reached the client on a live connection, or its session ended. A store also drops a
    stream on its own, ``ttl`` seconds after its last write, or to keep within its byte bounds;
    ``replay`` then answers None, as for one it never had.

    Session liveness: while a session lives, its worker calls ``keep_alive`` with it every
    ``heartbeat`` seconds; ``session_alive`` says whether any worker did within the last three
    heartbeats (``end_session`` says at once that it ended). A worker that serves a resume of a
    stream whose session lives nowhere knows that nothing more will come.

    Every method may raise :class:`EventStoreUnavailable`.
    """

    ttl: float
    heartbeat: float

    async def start(self) -> None:
        """Check that the store can be used (called once, when the app starts): a store that
        cannot be reached raises :class:`EventStoreUnavailable` naming where it is."""
        ...

    async def aclose(self) -> None: ...

    async def open(self, stream_id: str, meta: StreamMeta) -> None:
        """A stream begins (before its first event)."""
        ...

    async def append(self, stream_id: str, seq: int, data: bytes) -> None: ...

    async def finish(self, stream_id: str) -> None:
        """The stream's last event was appended: a replay ends there."""
        ...

    async def replay(self, stream_id: str, after: int) -> Replay | None:
        """The events after ``after``, or None if the stream is unknown or expired, or if some of
        them were dropped (a silent gap would lose messages)."""
        ...

    async def forget(self, stream_id: str) -> None: ...

    async def keep_alive(self, session_ids: Collection[str]) -> None: ...

    async def end_session(self, session_id: str) -> None: ...

    async def session_alive(self, session_id: str) -> bool: ...


#: What an event or a stream costs beyond its data, counted in the byte caps (the tuples, the
#: deque and the dict entry), so that many small events cannot slip under them.
EVENT_OVERHEAD = 64
STREAM_OVERHEAD = 1024


class _Kept:
    """One stream in a :class:`MemoryEventStore`: its newest events, and what they cost."""

    __slots__ = ("events", "finished", "last_activity", "last_seq", "meta", "size")

    def __init__(self, now: float, meta: StreamMeta | None = None) -> None:
        self.events: collections.deque[tuple[int, bytes]] = collections.deque()
        self.last_activity = now
        self.last_seq = 0
        self.size = STREAM_OVERHEAD
        self.meta = meta
        self.finished = False


class MemoryEventStore:
    """Ring buffers per stream, bounded in events and bytes per stream and in bytes in total.

    A stream keeps its newest events (``max_events_per_stream``, ``max_stream_bytes``); past
    ``max_bytes`` for the whole store the streams least recently active are dropped first; a
    stream is dropped ``ttl`` seconds after its last write. A resume of a dropped stream, or from
    before its oldest kept event, is refused (``replay`` answers None), never given with a gap.

    It lives in one process: several apps in that process may share it (and resume each
    other's streams), but another worker needs a shared store (``RedisEventStore``).
    """

    def __init__(
        self,
        *,
        max_events_per_stream: int = 256,
        max_stream_bytes: int = 8 * 1024 * 1024,
        max_bytes: int = 32 * 1024 * 1024,
        ttl: float = 300.0,
        heartbeat: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.max_bytes = max_bytes
        # One stream never needs more than the whole store may hold.
        self.max_stream_bytes = min(max_stream_bytes, max_bytes)
        self.ttl = ttl
        self.heartbeat = heartbeat
        self._clock = clock
        # In order of last activity, oldest first: expiry and the byte cap both start there.
        # An OrderedDict, whose front is found at once: a dict that has its entries taken out
        # and put back at the end walks past every hole they left to find its first one, so
        # touching each of n streams in turn would cost n^2.
        self._streams: collections.OrderedDict[str, _Kept] = collections.OrderedDict()
        self._size = 0
        #: Live sessions, and when their liveness lapses (three heartbeats after the last).
        self._alive: collections.OrderedDict[str, float] = collections.OrderedDict()

    @property
    def held_bytes(self) -> int:
        """What the kept events cost, as the byte caps count it (data and overhead)."""
        return self._size

    def __del__(self) -> None:
        # A store let go gives back what it held to the count its metric reports.
        if self._size:
            event_store_bytes(-self._size)

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def open(self, stream_id: str, meta: StreamMeta) -> None:
        self.open_now(stream_id, meta)

    async def append(self, stream_id: str, seq: int, data: bytes) -> None:
        self.append_now(stream_id, seq, data)

    async def finish(self, stream_id: str) -> None:
        self.finish_now(stream_id)

    # The writes themselves, which never wait: a :class:`MemorySink` makes them at once.

    def open_now(self, stream_id: str, meta: StreamMeta) -> None:
        self._touch(stream_id).meta = meta
        self._cap(stream_id)

    def append_now(self, stream_id: str, seq: int, data: bytes) -> None:
        kept = self._touch(stream_id)
        kept.last_seq = seq
        # A copy of exactly its size: an encoder may have reserved far more for the bytes it was
        # handed, and the caps count what is kept.
        data = memoryview(data).tobytes()
        kept.events.append((seq, data))
        self._grow(kept, len(data) + EVENT_OVERHEAD)
        # The oldest events of the stream go first; an event larger than the stream may hold is
        # not kept at all (a resume from before it is refused).
        while kept.events and (
            len(kept.events) > self.max_events_per_stream or kept.size > self.max_stream_bytes
        ):
            _, old = kept.events.popleft()
            self._grow(kept, -(len(old) + EVENT_OVERHEAD))
        self._cap(stream_id)

    def finish_now(self, stream_id: str) -> None:
        kept = self._streams.get(stream_id)
        if kept is not None:
            kept.finished = True

    async def replay(self, stream_id: str, after: int) -> Replay | None:
        kept = self._streams.get(stream_id)
        if kept is None or self._clock() - kept.last_activity > self.ttl:
            return None
        if after >= kept.last_seq:
            return Replay([], kept.finished, kept.meta)
        events = kept.events
        if not events or events[0][0] > after + 1:
            return None  # what the client missed was already dropped from the ring
        # From the newest back: a resume costs what it missed, not what the stream holds.
        missed: list[tuple[int, bytes]] = []
        for seq, data in reversed(events):
            if seq <= after:
                break
            missed.append((seq, data))
        missed.reverse()
        return Replay(missed, kept.finished, kept.meta)

    async def forget(self, stream_id: str) -> None:
        self.forget_now(stream_id)

    def forget_now(self, stream_id: str) -> None:
        self._drop(stream_id)

    async def keep_alive(self, session_ids: Collection[str]) -> None:
        until = self._clock() + 3 * self.heartbeat
        alive = self._alive
        for session_id in session_ids:
            alive[session_id] = until
            alive.move_to_end(session_id)  # the dict stays in order of expiry
        now = self._clock()
        while self._alive:
            oldest = next(iter(self._alive))
            if self._alive[oldest] > now:
                break
            del self._alive[oldest]

    async def end_session(self, session_id: str) -> None:
        self._alive.pop(session_id, None)

    async def session_alive(self, session_id: str) -> bool:
        until = self._alive.get(session_id)
        return until is not None and until > self._clock()

    def __len__(self) -> int:
        return len(self._streams)

    def _touch(self, stream_id: str) -> _Kept:
        """The stream's entry, made the most recently active (created if new)."""
        now = self._clock()
        self._expire(now)
        kept = self._streams.get(stream_id)
        if kept is None:
            kept = self._streams[stream_id] = _Kept(now)
            self._size += kept.size
            event_store_bytes(kept.size)
        else:
            self._streams.move_to_end(stream_id)  # the dict stays in order of last activity
        kept.last_activity = now
        return kept

    def _cap(self, stream_id: str) -> None:
        """Whole streams go, least recently active first, until the store is within its byte
        cap; ``stream_id`` is the most recent and stays."""
        while self._size > self.max_bytes:
            oldest = next(iter(self._streams))
            if oldest == stream_id:
                break
            self._drop(oldest)

    def _drop(self, stream_id: str) -> None:
        kept = self._streams.pop(stream_id, None)
        if kept is not None:
            self._size -= kept.size
            event_store_bytes(-kept.size)

    def _grow(self, kept: _Kept, delta: int) -> None:
        kept.size += delta
        self._size += delta
        event_store_bytes(delta)

    def _expire(self, now: float) -> None:
        # Oldest activity first: stop at the first stream still alive (amortized O(1)).
        while self._streams:
            stream_id = next(iter(self._streams))
            if now - self._streams[stream_id].last_activity <= self.ttl:
                return
            self._drop(stream_id)
