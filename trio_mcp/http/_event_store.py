"""SSE streams of a Streamable HTTP session, and the store that makes them resumable.

A stream outlives the HTTP connection that carries it: a request's stream keeps collecting
messages while its client is away, and a client that comes back with ``Last-Event-ID`` is given
what it missed. Event ids encode session, stream and sequence, so a reconnect names exactly one
stream of one session, and any worker that shares the store can serve it.

The store is async (it may be across a network), so it is never called on the engine's routing
path: a stream hands its events to the app's :class:`EventWriter`, one task that writes them to
the store in order through a bounded queue. When that queue is full, or the store fails, the
stream loses its resumability (logged), and the live stream goes on.

Everything here is bounded: the store in events and bytes per stream, in bytes in total and in
age, and it keeps only what can still be resumed; the writer's queue in operations and bytes; a
connection is handed only so much it has not written yet before it is cut (its client resumes);
the standalone stream's backlog for a GET not open yet keeps only its newest events, within its
own bounds and an app-wide budget.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol

import attrs
import trio

from ..protocol._jsonrpc import RequestId
from ..protocol._sse import event_id, stream_id

logger = logging.getLogger("trio_mcp.http")


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
        self._streams: dict[str, _Kept] = {}
        self._size = 0
        #: Live sessions, and when their liveness lapses (three heartbeats after the last).
        self._alive: dict[str, float] = {}

    @property
    def held_bytes(self) -> int:
        """What the kept events cost, as the byte caps count it (data and overhead)."""
        return self._size

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
        return Replay([(s, d) for s, d in events if s > after], kept.finished, kept.meta)

    async def forget(self, stream_id: str) -> None:
        self.forget_now(stream_id)

    def forget_now(self, stream_id: str) -> None:
        self._drop(stream_id)

    async def keep_alive(self, session_ids: Collection[str]) -> None:
        until = self._clock() + 3 * self.heartbeat
        for session_id in session_ids:
            self._alive.pop(session_id, None)
            self._alive[session_id] = until  # re-inserted: the dict stays in order of expiry
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
        kept = self._streams.pop(stream_id, None)
        if kept is None:
            kept = _Kept(now)
            self._size += kept.size
        # Re-inserted at the end, so the dict stays in order of last activity.
        self._streams[stream_id] = kept
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

    def _grow(self, kept: _Kept, delta: int) -> None:
        kept.size += delta
        self._size += delta

    def _expire(self, now: float) -> None:
        # Oldest activity first: stop at the first stream still alive (amortized O(1)).
        while self._streams:
            stream_id = next(iter(self._streams))
            if now - self._streams[stream_id].last_activity <= self.ttl:
                return
            self._drop(stream_id)


class StreamSink(Protocol):
    """Where a stream hands what it writes: synchronous, and it never waits (the engine's
    routing path calls it). :class:`EventWriter` is the one that keeps them."""

    def open(self, stream_id: str, meta: StreamMeta) -> None: ...

    def append(self, stream_id: str, seq: int, data: bytes) -> None: ...

    def finish(self, stream_id: str) -> None: ...

    def forget(self, stream_id: str) -> None: ...

    def end_session(self, session_id: str) -> None: ...

    def is_lost(self, stream_id: str) -> bool:
        """Whether the stream can no longer be resumed from the store."""
        ...


class NoStore:
    """The sink of a stream nobody can resume (stateless and modern requests): keeps nothing."""

    def open(self, stream_id: str, meta: StreamMeta) -> None:
        pass

    def append(self, stream_id: str, seq: int, data: bytes) -> None:
        pass

    def finish(self, stream_id: str) -> None:
        pass

    def forget(self, stream_id: str) -> None:
        pass

    def end_session(self, session_id: str) -> None:
        pass

    def is_lost(self, stream_id: str) -> bool:
        return True


NO_STORE = NoStore()


class MemorySink:
    """The sink of an app's own :class:`MemoryEventStore`, whose writes never wait: made at
    once, in the caller, in the order given. No queue, no task switch, no timeout; nothing can
    fail, so no stream is ever lost. Session ends still go through ``writer`` (with its
    heartbeat, which keeps the sessions' liveness)."""

    def __init__(self, store: MemoryEventStore, writer: EventWriter) -> None:
        self.store = store
        self.writer = writer

    def open(self, stream_id: str, meta: StreamMeta) -> None:
        self.store.open_now(stream_id, meta)

    def append(self, stream_id: str, seq: int, data: bytes) -> None:
        self.store.append_now(stream_id, seq, data)

    def finish(self, stream_id: str) -> None:
        self.store.finish_now(stream_id)

    def forget(self, stream_id: str) -> None:
        self.store.forget_now(stream_id)

    def end_session(self, session_id: str) -> None:
        self.writer.end_session(session_id)

    def is_lost(self, stream_id: str) -> bool:
        return False


#: One operation for the writer: its kind, the stream (or session) it concerns, its argument.
_Op = tuple[str, str, object]


class EventWriter:
    """The ordered writer: the one task of an app that writes its streams' events to the store.

    Streams hand it their events synchronously (:class:`StreamSink`); it writes them in the
    order given, through a queue bounded in operations (``max_queued``) and in bytes
    (``max_queued_bytes``), each write bounded in time (``timeout``). The engine never waits for
    the store: when the queue is full, or a write fails, that stream is *lost*: it can no longer
    be resumed (an error is logged, its partial events leave the store, its further events are
    not written), and its live connection goes on.

    A forgotten stream's writes still queued are skipped, and its events leave the store (retried
    until the store answers, so that no partial stream is served). It also refreshes the
    liveness of the app's sessions (``live_sessions``) every ``store.heartbeat`` seconds.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        max_queued: int = 4096,
        max_queued_bytes: int = 32 * 1024 * 1024,
        timeout: float = 5.0,
        live_sessions: Callable[[], Collection[str]] = tuple,
    ) -> None:
        self.store = store
        self.max_queued_bytes = max_queued_bytes
        self.timeout = timeout
        self.live_sessions = live_sessions
        self._send, self._receive = trio.open_memory_channel[_Op](max_queued)
        self.queued_bytes = 0
        #: Operations queued per stream.
        self._queued: collections.Counter[str] = collections.Counter()
        #: Streams that can no longer be resumed; kept until the app forgets them.
        self._lost: set[str] = set()
        #: Streams the app forgot whose operations are still queued (skipped).
        self._forgotten: set[str] = set()
        #: Streams whose events must leave the store (retried until they do).
        self._to_forget: set[str] = set()
        self._failing = False

    def is_lost(self, stream_id: str) -> bool:
        return stream_id in self._lost

    # -- the sink --------------------------------------------------------------------------------

    def open(self, stream_id: str, meta: StreamMeta) -> None:
        self._submit(("open", stream_id, meta), 0)

    def append(self, stream_id: str, seq: int, data: bytes) -> None:
        self._submit(("append", stream_id, (seq, data)), len(data))

    def finish(self, stream_id: str) -> None:
        self._submit(("finish", stream_id, None), 0)

    def forget(self, stream_id: str) -> None:
        self._lost.discard(stream_id)
        self._to_forget.add(stream_id)
        if self._queued[stream_id]:
            self._forgotten.add(stream_id)
        else:
            del self._queued[stream_id]
        self._nudge()

    def end_session(self, session_id: str) -> None:
        try:
            self._send.send_nowait(("end", session_id, None))
        except trio.WouldBlock:
            pass  # its liveness lapses by itself within three heartbeats

    async def flush(self) -> None:
        """Wait until everything handed over so far is in the store (or lost), and forgotten
        streams have left it; :class:`EventStoreUnavailable` if that takes over ``timeout``."""
        done = trio.Event()
        with trio.move_on_after(self.timeout):
            await self._send.send(("flush", "", done))
            await done.wait()
            return
        raise EventStoreUnavailable("the event store did not answer in time")

    def _submit(self, op: _Op, size: int) -> None:
        stream = op[1]
        if stream in self._lost or stream in self._forgotten:
            return
        if self.queued_bytes + size > self.max_queued_bytes:
            self._lose(stream, f"its writer has {self.queued_bytes} bytes queued, the limit")
            return
        try:
            self._send.send_nowait(op)
        except trio.WouldBlock:
            self._lose(stream, "its writer's queue is full (the store is too slow)")
            return
        self._queued[stream] += 1
        self.queued_bytes += size

    def _nudge(self) -> None:
        try:
            self._send.send_nowait(("tick", "", None))
        except trio.WouldBlock:
            pass  # the writer is busy: it sweeps after every operation

    def _lose(self, stream: str, why: str) -> None:
        logger.error("SSE stream %s can no longer be resumed: %s", stream, why)
        self._lost.add(stream)
        self._to_forget.add(stream)
        self._nudge()

    # -- the task --------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write until cancelled (the app's lifespan owns this task, once the store started)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat)
            task_status.started()
            async for op in self._receive:
                await self._do(op)
                if self._to_forget:
                    await self._sweep()

    async def _do(self, op: _Op) -> None:
        kind, stream, argument = op
        if kind == "flush":
            assert isinstance(argument, trio.Event)
            if self._to_forget:
                await self._sweep()
            argument.set()
            return
        if kind == "tick":
            return
        if kind == "end":
            await self._call(self.store.end_session(stream), None)
            return
        self._queued[stream] -= 1
        if kind == "append":
            assert isinstance(argument, tuple)
            self.queued_bytes -= len(argument[1])
        skip = stream in self._lost or stream in self._forgotten
        if not self._queued[stream]:
            del self._queued[stream]
            self._forgotten.discard(stream)
        if skip:
            return
        if kind == "open":
            assert isinstance(argument, StreamMeta)
            await self._call(self.store.open(stream, argument), stream)
        elif kind == "append":
            assert isinstance(argument, tuple)
            await self._call(self.store.append(stream, argument[0], argument[1]), stream)
        else:
            await self._call(self.store.finish(stream), stream)

    async def _call(self, write: Awaitable[None], stream: str | None) -> bool:
        """One write, bounded in time; a failure loses ``stream``'s resumability."""
        why = f"the event store did not answer within {self.timeout} s"
        with trio.move_on_after(self.timeout):
            try:
                await write
            except Exception as error:  # a store's own fault as much as its network's
                why = f"the event store failed: {error}"
            else:
                if self._failing:
                    logger.warning("the event store answers again")
                    self._failing = False
                return True
        if stream is not None and stream not in self._lost:
            self._lose(stream, why)
        elif not self._failing:
            logger.error("%s", why)
        self._failing = True
        return False

    async def _sweep(self) -> None:
        for stream in list(self._to_forget):
            if not await self._call(self.store.forget(stream), None):
                return  # retried after the next operation, or the next heartbeat
            self._to_forget.discard(stream)

    async def _heartbeat(self) -> None:
        while True:
            sessions = list(self.live_sessions())
            if sessions:
                await self._call(self.store.keep_alive(sessions), None)
            if self._to_forget:
                self._nudge()
            await trio.sleep(self.store.heartbeat)


#: What a listener is sent: an event (id, data), or None, the end of the stream. A listener whose
#: channel closes instead (``EndOfChannel``) was cut: replaced by a newer one, or too far behind;
#: its client resumes with ``Last-Event-ID``.
StreamItem = tuple[str, bytes] | None


class Listener:
    """The events a stream hands to the one connection listening to it, in order; that
    connection takes them from here (:meth:`receive`, :meth:`receive_nowait`).

    What an unbounded trio memory channel is for one sender and one receiver, as one small
    object: every POST that carries a request attaches one, and a channel's pair of endpoints
    and shared state cost more to make than the rest of the POST's stream. :meth:`close` is a
    cut: the receiver gets what was sent before it, then ``EndOfChannel``.
    """

    __slots__ = ("_closed", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[StreamItem] = collections.deque()
        self._closed = False
        self._waiter: trio.lowlevel.Task | None = None

    def __len__(self) -> int:
        """How many of the items sent are not taken yet."""
        return len(self._items)

    def send_nowait(self, item: StreamItem) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the listener was cut")
        self._items.append(item)
        self._wake()

    def close(self) -> None:
        self._closed = True
        self._wake()

    def receive_nowait(self) -> StreamItem:
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> StreamItem:
        """The next item, waiting for it (one receiving task at a time); a checkpoint either
        way, as a channel's ``receive`` is."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._items and not self._closed:
            self._waiter = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return self.receive_nowait()

    def _wake(self) -> None:
        task = self._waiter
        if task is not None:
            self._waiter = None
            trio.lowlevel.reschedule(task)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED


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
    store: StreamSink
    request_id: RequestId | None = None
    limits: StreamLimits = attrs.field(factory=StreamLimits)
    #: Shared with the other streams of the app: the bytes of every backlog and of every
    #: connection's pending events together.
    budget: ByteBudget = attrs.field(factory=lambda: ByteBudget(2**63))
    seq: int = 0
    finished: bool = False
    #: Set when the request ended with a response (False: suppressed by a cancel).
    responded: bool = False
    listener: Listener | None = None
    #: Events no listener has seen yet (the standalone stream keeps them for the next GET);
    #: read it as :attr:`backlog`. Made with the first event it keeps: an empty deque holds a
    #: block of 64 slots (about 760 bytes), and most streams never keep one, so every idle
    #: session would pay for it.
    _backlog: collections.deque[tuple[str, bytes]] | None = None
    backlog_bytes: int = 0
    #: Entries of this stream's events in the budget's order that no longer stand for one.
    stale_entries: int = 0
    #: Sizes of the events handed to the listener, oldest first, not yet known to be written;
    #: made with the first, like the backlog.
    _pending: collections.deque[int] | None = None
    pending_bytes: int = 0
    done: trio.Event = attrs.field(factory=trio.Event)
    #: Whose it is, for the store; the stream is opened there by :meth:`open`, or at its first
    #: event.
    meta: StreamMeta | None = None
    opened: bool = False

    @property
    def stream_id(self) -> str:
        return stream_id(self.session_id, self.key)

    @property
    def backlog(self) -> Sequence[tuple[str, bytes]]:
        """The events kept for the next GET, oldest first."""
        return self._backlog if self._backlog is not None else ()

    def open(self) -> None:
        """Make the stream known to the store (a request's stream, before its priming event id
        goes out: a resume of it must find it even if no event follows)."""
        if not self.opened and self.meta is not None:
            self.opened = True
            self.store.open(self.stream_id, self.meta)

    def push(self, data: bytes) -> None:
        self.open()
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
                except trio.ClosedResourceError:
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
        if self.opened:
            self.store.finish(self.stream_id)
        if self.listener is not None:
            try:
                self.listener.send_nowait(None)
            except trio.ClosedResourceError:
                pass
        self.done.set()

    def delivered(self) -> None:
        """A listener carried the stream to its end on a live connection: nothing is left to
        resume, so its events leave the store now (a client resumes only a stream that was
        cut)."""
        if self.finished:
            self.store.forget(self.stream_id)

    def attach(self, *, resumed: bool = False) -> Listener:
        """Give this stream a new listener (replacing any old one), with what it missed: the
        backlog, unless the listener ``resumed`` from an event id (its caller replays what came
        after it from the store, the backlog included, and writes that first)."""
        listener = Listener()
        if self.listener is not None:
            self._cut()  # the stale connection ends, as cut: its client resumes if it can
        if not resumed and self._backlog:
            for item in self._backlog:
                listener.send_nowait(item)
                self._add_pending(len(item[1]))
        self.discard_backlog()
        self.listener = listener
        if self.finished:
            listener.send_nowait(None)
        return listener

    def detach(self, listener: Listener) -> None:
        """The listener's connection ended; only its own registration is removed."""
        if self.listener is listener:
            self._drop_listener()

    def settle(self, listener: Listener) -> None:
        """The ``listener`` took an event to write it: it is no longer pending."""
        if self.listener is listener:
            self._settle()

    def discard_backlog(self) -> None:
        self.budget.used -= self.backlog_bytes
        self.budget.left(self, len(self.backlog))
        self._backlog = None
        self.backlog_bytes = 0

    def drop_oldest(self) -> None:
        """The budget makes room: the oldest event waiting here goes (its entry is spent)."""
        assert self._backlog is not None
        _, old = self._backlog.popleft()
        self.backlog_bytes -= len(old)
        self.budget.used -= len(old)

    # -- the bounds ----------------------------------------------------------------------------

    def _queue(self, item: tuple[str, bytes]) -> None:
        """Keep an event for the next GET; the oldest go first when a bound is passed: this
        stream's own, then the oldest of all the backlogs."""
        size = len(item[1])
        if self._backlog is None:
            self._backlog = collections.deque()
        self._backlog.append(item)
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
            len(self._pending or ()) >= limits.pending_events
            or self.pending_bytes + size > limits.pending_bytes
            or self.budget.used + size > self.budget.limit
        )

    def _add_pending(self, size: int) -> None:
        if self._pending is None:
            self._pending = collections.deque()
        self._pending.append(size)
        self.pending_bytes += size
        self.budget.used += size

    def _settle(self) -> None:
        """Forget the pending events the listener has taken (it holds the rest)."""
        assert self.listener is not None
        waiting = len(self.listener)
        pending = self._pending
        while pending and len(pending) > waiting:
            size = pending.popleft()
            self.pending_bytes -= size
            self.budget.used -= size

    def _cut(self) -> None:
        """End the listener's connection after what it already has, as if it had been cut."""
        assert self.listener is not None
        self.listener.close()
        self._drop_listener()

    def _drop_listener(self) -> None:
        self.listener = None
        self.budget.used -= self.pending_bytes
        self._pending = None
        self.pending_bytes = 0
