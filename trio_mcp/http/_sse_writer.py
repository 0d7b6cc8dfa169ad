"""Writing an SSE response as its events come: the one loop every streamed response runs.

A session's request stream (its events handed over by a :class:`~._streams.Listener`, each
with its id) and a modern POST's own stream (its notifications, then its answer) differ only in
where the events come from, which an :class:`EventSource` says. How they go out is the same for
both: every event already waiting when a write is due goes in that write, the end in the same
write as the last events (a request answered at once costs the connection one body, as a JSON
response does), a keep-alive comment whenever nothing came for a while, and a response that is
cut ends as a response, not as a dropped connection.
"""

from __future__ import annotations

from typing import Protocol

import trio

from ..protocol._sse import KEEPALIVE, encode_event
from ._asgi import Send, end_cut_response
from ._streams import EventStream, Listener

#: Events waiting for an SSE connection are written together up to about this many bytes.
WRITE_BYTES = 64 * 1024


class EventSource(Protocol):
    """What an SSE response writes, as it comes."""

    def ready(self) -> bool:
        """Whether :meth:`take` has something now: events, or the end."""
        ...

    async def wait(self) -> None:
        """Return once :meth:`ready` may be true (a checkpoint either way)."""
        ...

    def take(self) -> tuple[bytes, bool]:
        """The events ready, encoded, and whether the end came with them: after it the
        response is complete."""
        ...


async def write_events(
    send: Send, source: EventSource, interval: float, first: bytes = b""
) -> bool:
    """Write ``source``'s events until its end, ``first`` (already encoded) before them; True
    once the end was written: the response is complete. False when the client went away.

    A wait for the next event lasts at most ``interval``, and a keep-alive comment goes out
    after one that saw nothing. Cancelled, it ends the response if the connection is still
    there.
    """
    ended = False
    body = first
    try:
        while True:
            if not body and not source.ready():
                with trio.move_on_after(interval):
                    await source.wait()
                if not source.ready():
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                    continue
            more, ended = source.take()
            body += more
            if ended:
                await send({"type": "http.response.body", "body": body})
                return True
            await send({"type": "http.response.body", "body": body, "more_body": True})
            body = b""
    except OSError:
        return False
    except trio.Cancelled:
        if not ended:
            await end_cut_response(send)
        raise


class ListenedEvents:
    """A session stream's events as its listener takes them, each written with its event id,
    up to about :data:`WRITE_BYTES` a write. The end is the stream's end or the listener's cut
    (a replacing listener, or one too far behind: its client resumes with ``Last-Event-ID``).

    Once the end is taken, every event before it went to a live connection (a disconnect would
    have cancelled the writer): the stream is delivered, nothing is left to resume. Decided
    before the last write, which the disconnect that hypercorn reports once a response is
    complete may interrupt.
    """

    __slots__ = ("_events", "_stream")

    def __init__(self, stream: EventStream, events: Listener) -> None:
        self._stream = stream
        self._events = events

    def ready(self) -> bool:
        return self._events.ready()

    async def wait(self) -> None:
        await self._events.wait()

    def take(self) -> tuple[bytes, bool]:
        stream, events = self._stream, self._events
        body = bytearray()
        while len(body) < WRITE_BYTES:
            try:
                item = events.receive_nowait()
            except trio.WouldBlock:
                break
            except trio.EndOfChannel:
                return bytes(body), True  # cut
            if item is None:
                stream.delivered()
                return bytes(body), True
            stream.settle(events)
            body += encode_event(item[1], event="message", id=item[0])
        return bytes(body), False
