"""SSE streams of a Streamable HTTP session, and the store that makes them resumable.

A stream outlives the HTTP connection that carries it: a request's stream keeps collecting
messages while its client is away, and a client that comes back with ``Last-Event-ID`` is given
what it missed. Event ids encode session, stream and sequence, so a reconnect names exactly one
stream of one session.

Everything here is bounded: the store in events and bytes per stream, in bytes in total and in
age, and it keeps only what can still be resumed; a connection is handed only so much it has
not written yet before it is cut (its client resumes); the standalone stream's backlog for a GET
not open yet keeps only its newest events, within its own bounds and an app-wide budget.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from ..protocol._jsonrpc import RequestId
from ..protocol._sse import event_id, stream_id

logger = logging.getLogger("trio_mcp.http")


class EventStore(Protocol):
    """Where stream events are kept for replay; implement it to keep them elsewhere.

    The HTTP app calls ``forget`` as soon as nobody can resume a stream any more: its events and
    its end reached the client on a live connection, or its session ended. A store may also drop
    a stream on its own (age, size); ``replay`` then answers None, as for one it never had.
    """

    def append(self, stream_id: str, seq: int, data: bytes) -> None: ...

    def replay(self, stream_id: str, after: int) -> list[tuple[int, bytes]] | None:
        """The events after ``after``, or None if the stream is unknown or expired, or if some of
        them were dropped (a silent gap would lose messages)."""
        ...

    def forget(self, stream_id: str) -> None: ...


#: What an event or a stream costs beyond its data, counted in the byte caps (the tuples, the
#: deque and the dict entry), so that many small events cannot slip under them.
EVENT_OVERHEAD = 64
STREAM_OVERHEAD = 1024


class _Kept:
    """One stream in a :class:`MemoryEventStore`: its newest events, and what they cost."""

    __slots__ = ("events", "last_activity", "last_seq", "size")

    def __init__(self, now: float) -> None:
        self.events: collections.deque[tuple[int, bytes]] = collections.deque()
        self.last_activity = now
        self.last_seq = 0
        self.size = STREAM_OVERHEAD


class MemoryEventStore:
    """Ring buffers per stream, bounded in events and bytes per stream and in bytes in total.

    A stream keeps its newest events (``max_events_per_stream``, ``max_stream_bytes``); past
    ``max_bytes`` for the whole store the streams least recently active are dropped first; a
    stream is dropped ``ttl`` seconds after its last event. A resume of a dropped stream, or from
    before its oldest kept event, is refused (``replay`` answers None), never given with a gap.
    """

    def __init__(
        self,
        *,
        max_events_per_stream: int = 256,
        max_stream_bytes: int = 8 * 1024 * 1024,
        max_bytes: int = 32 * 1024 * 1024,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.max_bytes = max_bytes
        # One stream never needs more than the whole store may hold.
        self.max_stream_bytes = min(max_stream_bytes, max_bytes)
        self.ttl = ttl
        self._clock = clock
        # In order of last activity, oldest first: expiry and the byte cap both start there.
        self._streams: dict[str, _Kept] = {}
        self._size = 0

    @property
    def held_bytes(self) -> int:
        """What the kept events cost, as the byte caps count it (data and overhead)."""
        return self._size

    def append(self, stream_id: str, seq: int, data: bytes) -> None:
        now = self._clock()
        self._expire(now)
        kept = self._streams.pop(stream_id, None)
        if kept is None:
            kept = _Kept(now)
            self._size += kept.size
        # Re-inserted at the end, so the dict stays in order of last activity.
        self._streams[stream_id] = kept
        kept.last_activity = now
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
        # Then whole streams, least recently active first; this one is the most recent.
        while self._size > self.max_bytes:
            oldest = next(iter(self._streams))
            if oldest == stream_id:
                break
            self.forget(oldest)

    def replay(self, stream_id: str, after: int) -> list[tuple[int, bytes]] | None:
        kept = self._streams.get(stream_id)
        if kept is None or self._clock() - kept.last_activity > self.ttl:
            return None
        if after >= kept.last_seq:
            return []
        events = kept.events
        if not events or events[0][0] > after + 1:
            return None  # what the client missed was already dropped from the ring
        return [(seq, data) for seq, data in events if seq > after]

    def forget(self, stream_id: str) -> None:
        kept = self._streams.pop(stream_id, None)
        if kept is not None:
            self._size -= kept.size

    def __len__(self) -> int:
        return len(self._streams)

    def _grow(self, kept: _Kept, delta: int) -> None:
        kept.size += delta
        self._size += delta

    def _expire(self, now: float) -> None:
        # Oldest activity first: stop at the first stream still alive (amortized O(1)).
        while self._streams:
            stream_id = next(iter(self._streams))
            if now - self._streams[stream_id].last_activity <= self.ttl:
                return
            self.forget(stream_id)


#: What a listener is sent: an event (id, data), or None, the end of the stream. A listener whose
#: channel closes instead (``EndOfChannel``) was cut: replaced by a newer one, or too far behind;
#: its client resumes with ``Last-Event-ID``.
StreamItem = tuple[str, bytes] | None


@attrs.frozen
class StreamLimits:
    """How much a stream queues for a connection that is behind, and for a GET not there yet."""

    #: Events handed to a connection and not yet written to it: when one more would pass either
    #: bound (and at least one is waiting), the connection is ended after what it has, and its
    #: client resumes from the event store with ``Last-Event-ID``.
    pending_events: int = 1024
    pending_bytes: int = 8 * 1024 * 1024
    #: Events waiting for the next GET (the standalone stream only), the oldest dropped first.
    backlog_events: int = 256
    backlog_bytes: int = 1024 * 1024


class ByteBudget:
    """Bytes shared by many queues (every session's backlog, every connection's pending
    events): what they use together, and how much they may.

    When the backlogs must make room, the oldest event of them all goes first, whichever
    session it waits in: ``_order`` names the stream of every event queued, oldest first. An
    event that left its backlog otherwise (taken by a GET, dropped by its stream's own bounds)
    leaves a stale entry, always among its stream's oldest: the stream counts them, and they
    are skipped, or swept out once they outnumber the live ones.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._order: collections.deque[EventStream] = collections.deque()
        self._live = 0

    @property
    def exceeded(self) -> bool:
        return self.used > self.limit

    def queued(self, stream: EventStream) -> None:
        self._order.append(stream)
        self._live += 1

    def left(self, stream: EventStream, count: int) -> None:
        """``count`` of the oldest events of ``stream``'s backlog left it."""
        stream.stale_entries += count
        self._live -= count
        if len(self._order) > 2 * self._live + 64:
            self._sweep()

    def make_room(self) -> None:
        """Drop the oldest backlog events of all until the budget holds (or none is left)."""
        while self.exceeded and self._live:
            stream = self._order.popleft()
            if stream.stale_entries:
                stream.stale_entries -= 1
                continue
            self._live -= 1
            stream.drop_oldest()

    def _sweep(self) -> None:
        order: collections.deque[EventStream] = collections.deque()
        for stream in self._order:
            if stream.stale_entries:
                stream.stale_entries -= 1
            else:
                order.append(stream)
        self._order = order


@attrs.define(eq=False)
class EventStream:
    """One SSE stream of a session: a request's, or the standalone (GET) one.

    Every event goes to the store, then to the listener if there is one. Nothing else is kept
    for a request's stream: a client that went away resumes from the store. The standalone
    stream also keeps a bounded backlog for the next GET, which may come without
    ``Last-Event-ID``.
    """

    session_id: str
    key: str
    store: EventStore
    request_id: RequestId | None = None
    limits: StreamLimits = attrs.field(factory=StreamLimits)
    #: Shared with the other streams of the app: the bytes of every backlog and of every
    #: connection's pending events together.
    budget: ByteBudget = attrs.field(factory=lambda: ByteBudget(2**63))
    seq: int = 0
    finished: bool = False
    #: Set when the request ended with a response (False: suppressed by a cancel).
    responded: bool = False
    listener: trio.MemorySendChannel[StreamItem] | None = None
    listener_token: object = None
    #: Events no listener has seen yet (the standalone stream keeps them for the next GET).
    backlog: collections.deque[tuple[str, bytes]] = attrs.field(factory=collections.deque)
    backlog_bytes: int = 0
    #: Entries of this stream's events in the budget's order that no longer stand for one.
    stale_entries: int = 0
    #: Sizes of the events handed to the listener, oldest first, not yet known to be written.
    _pending: collections.deque[int] = attrs.field(factory=collections.deque)
    pending_bytes: int = 0
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def stream_id(self) -> str:
        return stream_id(self.session_id, self.key)

    def push(self, data: bytes) -> None:
        self.seq += 1
        self.store.append(self.stream_id, self.seq, data)
        item = (event_id(self.session_id, self.key, self.seq), data)
        if self.listener is not None:
            self._settle()
            if self._pending and self._too_far_behind(len(data)):
                logger.info(
                    "an SSE client fell %d events (%d bytes) behind: its connection is ended, "
                    "and it may resume with Last-Event-ID",
                    len(self._pending),
                    self.pending_bytes,
                )
                self._cut()
            else:
                try:
                    self.listener.send_nowait(item)
                    self._add_pending(len(data))
                    return
                except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
                    self._drop_listener()
        if self.request_id is None and not self.finished:
            # Only the standalone stream waits for a GET to come, and only while its session
            # lives.
            self._queue(item)

    def finish(self, *, responded: bool) -> None:
        if self.finished:
            return
        self.finished = True
        self.responded = responded
        if self.listener is not None:
            try:
                self.listener.send_nowait(None)
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
                pass
        self.done.set()

    def delivered(self) -> None:
        """A listener carried the stream to its end on a live connection: nothing is left to
        resume, so its events leave the store now (a client resumes only a stream that was
        cut)."""
        if self.finished:
            self.store.forget(self.stream_id)

    def attach(self, replay_after: int | None = None) -> trio.MemoryReceiveChannel[StreamItem]:
        """Give this stream a new listener (replacing any old one), with what it missed."""
        send, receive = trio.open_memory_channel[StreamItem](math.inf)
        if self.listener is not None:
            self._cut()  # the stale connection ends, as cut: its client resumes if it can
        missed: list[tuple[str, bytes]]
        if replay_after is not None:
            events = self.store.replay(self.stream_id, replay_after) or []
            missed = [(event_id(self.session_id, self.key, s), d) for s, d in events]
        else:
            missed = list(self.backlog)
        self.discard_backlog()
        self.listener = send
        self.listener_token = receive
        for item in missed:
            send.send_nowait(item)
            self._add_pending(len(item[1]))
        if self.finished:
            send.send_nowait(None)
        return receive

    def detach(self, receive: trio.MemoryReceiveChannel[StreamItem]) -> None:
        """The listener's connection ended; only its own registration is removed."""
        if self.listener_token is receive:
            self._drop_listener()

    def settle(self, receive: trio.MemoryReceiveChannel[StreamItem]) -> None:
        """The listener ``receive`` took an event to write it: it is no longer pending."""
        if self.listener_token is receive:
            self._settle()

    def discard_backlog(self) -> None:
        self.budget.used -= self.backlog_bytes
        self.budget.left(self, len(self.backlog))
        self.backlog.clear()
        self.backlog_bytes = 0

    def drop_oldest(self) -> None:
        """The budget makes room: the oldest event waiting here goes (its entry is spent)."""
        _, old = self.backlog.popleft()
        self.backlog_bytes -= len(old)
        self.budget.used -= len(old)

    # -- the bounds ----------------------------------------------------------------------------

    def _queue(self, item: tuple[str, bytes]) -> None:
        """Keep an event for the next GET; the oldest go first when a bound is passed: this
        stream's own, then the oldest of all the backlogs."""
        size = len(item[1])
        self.backlog.append(item)
        self.backlog_bytes += size
        self.budget.used += size
        self.budget.queued(self)
        limits = self.limits
        while self.backlog and (
            len(self.backlog) > limits.backlog_events or self.backlog_bytes > limits.backlog_bytes
        ):
            self.drop_oldest()
            self.budget.left(self, 1)
        self.budget.make_room()

    def _too_far_behind(self, size: int) -> bool:
        limits = self.limits
        return (
            len(self._pending) >= limits.pending_events
            or self.pending_bytes + size > limits.pending_bytes
            or self.budget.used + size > self.budget.limit
        )

    def _add_pending(self, size: int) -> None:
        self._pending.append(size)
        self.pending_bytes += size
        self.budget.used += size

    def _settle(self) -> None:
        """Forget the pending events the listener has taken (its channel holds the rest)."""
        assert self.listener is not None
        waiting = self.listener.statistics().current_buffer_used
        while len(self._pending) > waiting:
            size = self._pending.popleft()
            self.pending_bytes -= size
            self.budget.used -= size

    def _cut(self) -> None:
        """End the listener's connection after what it already has, as if it had been cut."""
        assert self.listener is not None
        self.listener.close()
        self._drop_listener()

    def _drop_listener(self) -> None:
        self.listener = None
        self.listener_token = None
        self.budget.used -= self.pending_bytes
        self._pending.clear()
        self.pending_bytes = 0
