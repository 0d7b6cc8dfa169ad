"""Server-Sent Events (``text/event-stream``), the wire format of Streamable HTTP's streams.

The three pieces of the format, once: the parser a client reads a stream with, the encoder a
server writes one with, and the event ids a server gives each event so that a client can resume
a stream with ``Last-Event-ID``. Sans-IO: bytes in, events out, and back.
"""

from __future__ import annotations

import re

import attrs

#: The largest event the parser accepts by default; a bigger one is a broken stream.
MAX_EVENT_BYTES = 32 * 1024 * 1024
#: The largest ``retry`` the parser reports (ms; some 30,000 years): a larger one is taken as it.
MAX_RETRY_MS = 10**15

# -- parsing -------------------------------------------------------------------------------------


@attrs.frozen
class ServerSentEvent:
    """One dispatched SSE event; ``id`` is the stream's last event id when it was dispatched."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEError(ValueError):
    """The event stream broke a limit (an event larger than allowed)."""


_LINE_END = re.compile(rb"\r\n|\r|\n")


class SSEParser:
    """An incremental parser of ``text/event-stream`` (the WHATWG rules), fed raw chunks.

    Lines end in CRLF, LF or CR, even when a chunk ends between the CR and the LF. Comments
    (``:``) and unknown fields are ignored, ``data`` lines are joined with ``\\n``, an event
    with no data line is not dispatched, and an unfinished event at the end is dropped by never
    being dispatched. ``last_event_id`` and ``retry`` (milliseconds) persist across events, and
    a parser for a reconnection starts from the previous one's ``last_event_id``.
    """

    def __init__(
        self, *, last_event_id: str | None = None, max_event_bytes: int = MAX_EVENT_BYTES
    ) -> None:
        self.last_event_id = last_event_id
        self.retry: int | None = None
        self.max_event_bytes = max_event_bytes
        self._buffer = bytearray()
        self._skip_lf = False
        self._first_line = True
        self._data: list[str] = []
        self._event_type = ""
        self._id_buffer = last_event_id
        self._event_bytes = 0

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Parse a chunk; return the events it completed, in order."""
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        self._buffer += chunk
        events: list[ServerSentEvent] = []
        start = 0
        while True:
            end = _LINE_END.search(self._buffer, start)
            if end is None:
                break
            event = self._line(bytes(self._buffer[start : end.start()]))
            if event is not None:
                events.append(event)
            start = end.end()
            if end.group() == b"\r" and start == len(self._buffer):
                self._skip_lf = True  # the LF of a CRLF may come in the next chunk
        del self._buffer[:start]
        if len(self._buffer) + self._event_bytes > self.max_event_bytes:
            raise SSEError(f"an event exceeds the limit of {self.max_event_bytes} bytes")
        return events

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        line = raw.decode("utf-8", "replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix("\ufeff")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._event_bytes += len(raw)
            if self._event_bytes > self.max_event_bytes:
                raise SSEError(f"an event exceeds the limit of {self.max_event_bytes} bytes")
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry" and value.isascii() and value.isdigit():
            # Capped before int(), which refuses thousands of digits (a stream could send them).
            self.retry = min(int(value), MAX_RETRY_MS) if len(value) <= 16 else MAX_RETRY_MS
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        self.last_event_id = self._id_buffer
        data, event_type = self._data, self._event_type
        self._data, self._event_type, self._event_bytes = [], "", 0
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event_type or "message", self.last_event_id)


# -- encoding ------------------------------------------------------------------------------------


def _field(name: str, value: str) -> bytes:
    if "\n" in value or "\r" in value:
        raise ValueError(f"an SSE {name} cannot hold a line break: {value!r}")
    return f"{name}: {value}\n".encode()


def encode_event(
    data: bytes, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> bytes:
    """One event, as :class:`SSEParser` reads it back: ``event``, ``id`` and ``retry`` (ms)
    fields when given, then ``data`` (one ``data`` line per line of it, so a CR or CRLF in it
    reads back as LF), then the blank line that dispatches it. Empty ``data`` is one empty
    ``data`` line (a priming event)."""
    head = b""
    if event is not None:
        head += _field("event", event)
    if id is not None:
        if "\0" in id:
            raise ValueError(f"an SSE id cannot hold NUL: {id!r}")  # the parser would drop it
        head += _field("id", id)
    if retry is not None:
        head += f"retry: {int(retry)}\n".encode()
    if b"\n" in data or b"\r" in data:
        lines = _LINE_END.split(data)
        return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return head + b"data: " + data + b"\n\n"


def encode_comment(text: str) -> bytes:
    """A comment line: ignored by parsers, it keeps an idle connection alive."""
    if "\n" in text or "\r" in text:
        raise ValueError(f"an SSE comment cannot hold a line break: {text!r}")
    return f": {text}\n\n".encode()


#: The comment that keeps an idle stream's connection alive through proxies.
KEEPALIVE = encode_comment("keepalive")


# -- event ids -----------------------------------------------------------------------------------

#: The longest sequence number an event id may carry (a 64-bit counter's digits).
_SEQ_DIGITS = 19


def stream_id(session_id: str, stream_key: str) -> str:
    """The name of one stream of one session: what its event ids begin with, and the key its
    events are stored under. The key holds no ``.``, so an id parses from the right whatever
    the session id holds (a routing-tagged one is ``node.hex``)."""
    if "." in stream_key:
        raise ValueError(f"a stream key cannot hold '.': {stream_key!r}")
    return f"{session_id}.{stream_key}"


def event_id(session_id: str, stream_key: str, seq: int) -> str:
    """The id of event number ``seq`` of one stream of one session; a priming event carries
    the number of the last event before it (0 for none), so a resume replays what follows."""
    return f"{stream_id(session_id, stream_key)}.{seq}"


def parse_event_id(value: str) -> tuple[str, str, int] | None:
    """The session, stream key and sequence number an event id names, or None if it is not
    one of ours (a ``Last-Event-ID`` comes from the client: anything may be in it)."""
    parts = value.rsplit(".", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    seq = parts[2]
    if not (seq.isascii() and seq.isdigit() and len(seq) <= _SEQ_DIGITS):
        return None
    return parts[0], parts[1], int(seq)
