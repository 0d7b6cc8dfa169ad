"""SSE streams of a Streamable HTTP session, and the store that makes them resumable.

A stream outlives the HTTP connection that carries it: a request's stream keeps collecting
messages while its client is away, and a client that comes back with ``Last-Event-ID`` is given
what it missed. Event ids encode session, stream and sequence, so a reconnect names exactly one
stream of one session.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from ..protocol._jsonrpc import RequestId
from ..protocol._sse import event_id, stream_id


class EventStore(Protocol):
    """Where stream events are kept for replay; implement it to keep them elsewhere."""

    def append(self, stream_id: str, seq: int, data: bytes) -> None: ...

    def replay(self, stream_id: str, after: int) -> list[tuple[int, bytes]] | None:
        """The events after ``after``, or None if the stream is unknown or expired."""
        ...

    def forget(self, stream_id: str) -> None: ...


class MemoryEventStore:
    """Ring buffers per stream; each is dropped ``ttl`` seconds after its last event."""

    def __init__(
        self,
        *,
        max_events_per_stream: int = 256,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.ttl = ttl
        self._clock = clock
        self._streams: dict[str, tuple[float, collections.deque[tuple[int, bytes]]]] = {}

    def append(self, stream_id: str, seq: int, data: bytes) -> None:
        now = self._clock()
        self._expire(now)
        # Re-inserted at the end, so the dict stays in order of last activity.
        entry = self._streams.pop(stream_id, None)
        events = (
            entry[1] if entry is not None else collections.deque(maxlen=self.max_events_per_stream)
        )
        events.append((seq, data))
        self._streams[stream_id] = (now, events)

    def replay(self, stream_id: str, after: int) -> list[tuple[int, bytes]] | None:
        entry = self._streams.get(stream_id)
        if entry is None or self._clock() - entry[0] > self.ttl:
            return None
        events = entry[1]
        if events and events[0][0] > after + 1:
            return None  # what the client missed was already dropped from the ring
        return [(seq, data) for seq, data in events if seq > after]

    def forget(self, stream_id: str) -> None:
        self._streams.pop(stream_id, None)

    def __len__(self) -> int:
        return len(self._streams)

    def _expire(self, now: float) -> None:
        # Oldest activity first: stop at the first stream still alive (amortized O(1)).
        while self._streams:
            stream_id = next(iter(self._streams))
            if now - self._streams[stream_id][0] <= self.ttl:
                return
            del self._streams[stream_id]


#: What a listener is sent: an event (id, data), a keep-alive nudge, or the end of the stream.
StreamItem = tuple[str, bytes] | None


@attrs.define(eq=False)
class EventStream:
    """One SSE stream of a session: a request's, or the standalone (GET) one."""

    session_id: str
    key: str
    store: EventStore
    request_id: RequestId | None = None
    seq: int = 0
    finished: bool = False
    #: Set when the request ended with a response (False: suppressed by a cancel).
    responded: bool = False
    listener: trio.MemorySendChannel[StreamItem] | None = None
    listener_token: object = None
    #: Events no listener has seen yet (the standalone stream keeps them for the next GET).
    backlog: list[tuple[str, bytes]] = attrs.field(factory=list)
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def stream_id(self) -> str:
        return stream_id(self.session_id, self.key)

    def push(self, data: bytes) -> None:
        self.seq += 1
        self.store.append(self.stream_id, self.seq, data)
        item = (event_id(self.session_id, self.key, self.seq), data)
        if self.listener is not None:
            try:
                self.listener.send_nowait(item)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
                self.listener = None
        self.backlog.append(item)

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

    def attach(self, replay_after: int | None = None) -> trio.MemoryReceiveChannel[StreamItem]:
        """Give this stream a new listener (replacing any old one), with what it missed."""
        send, receive = trio.open_memory_channel[StreamItem](math.inf)
        if self.listener is not None:
            try:
                self.listener.send_nowait(None)  # the stale connection ends
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        missed: list[tuple[str, bytes]]
        if replay_after is not None:
            events = self.store.replay(self.stream_id, replay_after) or []
            missed = [(event_id(self.session_id, self.key, s), d) for s, d in events]
        else:
            missed = self.backlog
        self.backlog = []
        for item in missed:
            send.send_nowait(item)
        if self.finished:
            send.send_nowait(None)
        self.listener = send
        self.listener_token = receive
        return receive

    def detach(self, receive: trio.MemoryReceiveChannel[StreamItem]) -> None:
        """The listener's connection ended; only its own registration is removed."""
        if self.listener_token is receive:
            self.listener = None
            self.listener_token = None
