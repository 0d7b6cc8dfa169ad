"""SSE streams of a Streamable HTTP session, and the writer that hands their events to the event
store (``_event_store.py``).

The store is async (it may be across a network), so it is never called on the engine's routing
path: a stream hands its events to the app's :class:`EventWriter`, one task that writes them to
the store in order through a bounded queue. When that queue is full, or the store fails, the
stream loses its resumability (logged), and the live stream goes on.

Everything here is bounded: the writer's queue in operations and bytes; a connection is handed
only so much it has not written yet before it is cut (its client resumes); the standalone
stream's backlog for a GET not open yet keeps only its newest events, within its own bounds and
an app-wide budget.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol

import attrs
import trio

from .._lazy_event import LazyEvent
from .._mailbox import Mailbox
from ..protocol._jsonrpc import RequestId
from ..protocol._sse import event_id, stream_id
from ._event_store import EventStore, EventStoreUnavailable, MemoryEventStore, StreamMeta

logger = logging.getLogger("trio_mcp.http")


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


#: One write of a stream, waiting for the writer: its kind (``open``, ``append`` or ``finish``)
#: and its argument (the stream's meta, an event's ``(seq, data)``, None).
_Write = tuple[str, object]


class EventWriter:
    """The ordered writer: the one task of an app that writes its streams' events to the store.

    Streams hand it their events synchronously (:class:`StreamSink`); it writes each stream's in
    the order given, bounded in writes waiting (``max_queued``) and in bytes
    (``max_queued_bytes``), each write bounded in time (``timeout``). The engine never waits for
    the store: when the bound is reached, or a write fails, that stream is *lost*: it can no
    longer be resumed (an error is logged, its partial events leave the store, its further
    events are not written), and its live connection goes on.

    A forgotten stream's writes still waiting are dropped, and what was written of it leaves the
    store (retried until the store answers, so that no partial stream is served). It also
    refreshes the liveness of the app's sessions (``live_sessions``) every ``store.heartbeat``
    seconds.

    It writes in batches, each started ``coalesce`` seconds after its first write came: most
    request streams are answered and delivered on their live connection within that time, and
    are forgotten before any of their writes was made, so they cost the store nothing at all
    (no write, and no delete of what was never written); measured through a fleet on one
    Redis, that was four of the five round trips a handshake-era call made. The price is the
    window: a worker killed outright loses, for a resume elsewhere, at most the events of its
    last ``coalesce`` seconds, as the store's answer time lost them before. The writes wait by
    stream (a dict of lists), so a stream forgotten before its batch costs the writer nothing
    either: its writes leave with it, with no step of the writer's task for each.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        max_queued: int = 4096,
        max_queued_bytes: int = 32 * 1024 * 1024,
        timeout: float = 5.0,
        live_sessions: Callable[[], Collection[str]] = tuple,
        coalesce: float = 0.02,
    ) -> None:
        self.store = store
        self.coalesce = coalesce
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes
        self.timeout = timeout
        self.live_sessions = live_sessions
        #: The writes waiting, by stream, each stream's in order; streams in the order they
        #: first handed one over.
        self._waiting: dict[str, list[_Write]] = {}
        self.queued_writes = 0
        self.queued_bytes = 0
        #: Sessions whose end the store is to be told of.
        self._ended: list[str] = []
        #: Flushes waiting for everything handed over before them.
        self._flushes: list[trio.Event] = []
        #: Set when there is something to do: the writer waits for it between batches.
        self._work = trio.Event()
        #: Set by a flush: the writer stops waiting out its coalescing window.
        self._hurry = trio.Event()
        #: Streams that can no longer be resumed; kept until the app forgets them.
        self._lost: set[str] = set()
        #: Streams whose events must leave the store (retried until they do).
        self._to_forget: set[str] = set()
        #: Streams the store was asked to write (until they are forgotten): only those need
        #: deleting there.
        self._written: set[str] = set()
        self._failing = False

    def is_lost(self, stream_id: str) -> bool:
        return stream_id in self._lost

    # -- the sink --------------------------------------------------------------------------------

    def open(self, stream_id: str, meta: StreamMeta) -> None:
        self._submit(stream_id, ("open", meta), 0)

    def append(self, stream_id: str, seq: int, data: bytes) -> None:
        self._submit(stream_id, ("append", (seq, data)), len(data))

    def finish(self, stream_id: str) -> None:
        self._submit(stream_id, ("finish", None), 0)

    def forget(self, stream_id: str) -> None:
        self._lost.discard(stream_id)
        self._take(stream_id)  # dropped
        if stream_id in self._written:
            self._written.discard(stream_id)
            self._to_forget.add(stream_id)
            self._work.set()

    def end_session(self, session_id: str) -> None:
        if len(self._ended) < self.max_queued:  # else its liveness lapses within 3 heartbeats
            self._ended.append(session_id)
            self._work.set()

    async def flush(self) -> None:
        """Wait until everything handed over so far is in the store (or lost), and forgotten
        streams have left it; :class:`EventStoreUnavailable` if that takes over ``timeout``."""
        done = trio.Event()
        self._flushes.append(done)
        self._work.set()
        self._hurry.set()
        with trio.move_on_after(self.timeout):
            await done.wait()
            return
        raise EventStoreUnavailable("the event store did not answer in time")

    def _submit(self, stream: str, write: _Write, size: int) -> None:
        if stream in self._lost:
            return
        if self.queued_bytes + size > self.max_queued_bytes:
            self._lose(stream, f"its writer has {self.queued_bytes} bytes queued, the limit")
            return
        if self.queued_writes >= self.max_queued:
            self._lose(stream, "its writer's queue is full (the store is too slow)")
            return
        waiting = self._waiting.get(stream)
        if waiting is None:
            self._waiting[stream] = [write]
        else:
            waiting.append(write)
        self.queued_writes += 1
        self.queued_bytes += size
        self._work.set()

    def _take(self, stream: str) -> list[_Write] | None:
        """The stream's writes still waiting, no longer counted as queued (None: none)."""
        writes = self._waiting.pop(stream, None)
        if writes is not None:
            self.queued_writes -= len(writes)
            self.queued_bytes -= sum(_size(write) for write in writes)
        return writes

    def _lose(self, stream: str, why: str) -> None:
        logger.error("SSE stream %s can no longer be resumed: %s", stream, why)
        self._lost.add(stream)
        self._take(stream)  # dropped
        self._to_forget.add(stream)
        self._work.set()

    # -- the task --------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write until cancelled (the app's lifespan owns this task, once the store started)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat)
            task_status.started()
            while True:
                await self._work.wait()
                self._work = trio.Event()
                if self.coalesce > 0 and self._waiting and not self._flushes:
                    self._hurry = trio.Event()
                    with trio.move_on_after(self.coalesce):
                        await self._hurry.wait()  # a flush cuts the window short
                # What was handed over before a flush is written before it is answered.
                flushes, self._flushes = self._flushes, []
                await self._write_waiting()
                ended, self._ended = self._ended, []
                for session_id in ended:
                    await self._call(self.store.end_session(session_id), None)
                if self._to_forget:
                    await self._sweep()
                for done in flushes:
                    done.set()

    async def _write_waiting(self) -> None:
        """Write the streams waiting now, each stream's writes in order. A stream forgotten or
        lost while an earlier write was made has its writes dropped meanwhile; one handed
        more writes meanwhile has them written in the next batch, after these."""
        batch = list(self._waiting)
        for stream in batch:
            writes = self._take(stream)
            if writes is None:
                continue  # forgotten (or lost) while an earlier stream was written
            self._written.add(stream)
            for kind, argument in writes:
                if stream in self._lost or stream not in self._written:
                    break  # lost or forgotten while its last write was made
                if kind == "open":
                    assert isinstance(argument, StreamMeta)
                    write = self.store.open(stream, argument)
                elif kind == "append":
                    assert isinstance(argument, tuple)
                    write = self.store.append(stream, argument[0], argument[1])
                else:
                    write = self.store.finish(stream)
                await self._call(write, stream)

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
                return  # retried after the next batch, or the next heartbeat
            self._to_forget.discard(stream)

    async def _heartbeat(self) -> None:
        while True:
            sessions = list(self.live_sessions())
            if sessions:
                await self._call(self.store.keep_alive(sessions), None)
            if self._to_forget:
                self._work.set()
            await trio.sleep(self.store.heartbeat)


def _size(write: _Write) -> int:
    """The bytes a waiting write counts against ``max_queued_bytes``: an event's data."""
    argument = write[1]
    return len(argument[1]) if isinstance(argument, tuple) else 0


#: What a listener is sent: an event (id, data), or None, the end of the stream. A listener whose
#: channel closes instead (``EndOfChannel``) was cut: replaced by a newer one, or too far behind;
#: its client resumes with ``Last-Event-ID``.
StreamItem = tuple[str, bytes] | None


class Listener(Mailbox[StreamItem]):
    """The events a stream hands to the one connection listening to it, in order; that
    connection takes them from here (:meth:`wait`, then :meth:`receive_nowait`). Every POST that
    carries a request attaches one. :meth:`close` is a cut."""

    __slots__ = ()


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
    done: LazyEvent = attrs.field(factory=LazyEvent)
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
