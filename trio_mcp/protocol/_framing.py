"""Newline framing (stdio): one JSON-RPC message per line, with a bound on a line's length.

:class:`LineFramer` cuts the bytes of a stream into lines, however they arrive: a busy pipe
brings many lines per read, a slow one part of a line. Each read is cut once. A line longer
than the bound is refused as soon as it is one, and skipped up to its newline, so one oversized
message costs nothing else on the stream, and an unfinished line never holds more than the
bound plus one read. Blank lines are skipped, and a last line needs no newline. Sans-IO: the
transport reads and feeds.
"""

from __future__ import annotations

import collections
import enum
import re

import attrs
import orjson

from ._jsonrpc import INVALID_REQUEST, ErrorObject, Invalid, RequestId, is_valid_id

#: The longest line accepted by default; longer ones are refused, and the stream keeps going.
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024


class Framing(enum.Enum):
    """What :meth:`LineFramer.next_line` says when it has no line to give."""

    #: Feed more bytes (or the end of the stream).
    NEED_DATA = enum.auto()
    #: A line exceeded the bound; it is skipped up to its newline.
    TOO_LONG = enum.auto()
    #: The stream ended and every line was given.
    END = enum.auto()


NEED_DATA = Framing.NEED_DATA
TOO_LONG = Framing.TOO_LONG
END = Framing.END


class LineFramer:
    """The lines of a byte stream: :meth:`feed` it bytes, then take :meth:`next_line` until it
    says :data:`NEED_DATA`. Lines come without their ``\\n`` (a ``\\r`` before it stays: JSON
    ignores it)."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._lines: collections.deque[bytes] = collections.deque()
        self._partial = bytearray()
        self._discarding = False
        self._eof = False
        #: The first bytes of the last line refused as too long (see :func:`peek_envelope`).
        self.refused_head = b""

    def feed(self, chunk: bytes) -> None:
        """Bytes read from the stream; an empty chunk is the end of the stream."""
        if not chunk:
            self._eof = True
            return
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            if not self._discarding:
                self._partial += chunk
            return
        head = parts[0]
        if self._discarding:
            self._discarding = False  # the oversized line ends here
        else:
            if self._partial:
                head = bytes(self._partial) + head
                self._partial.clear()
            self._lines.append(head)
        self._lines.extend(parts[1:-1])
        self._partial += parts[-1]

    def next_line(self) -> bytes | Framing:
        """The next line; or :data:`TOO_LONG` once for each oversized line; or
        :data:`NEED_DATA`; or, after the end of the stream, :data:`END`."""
        while self._lines:
            line = self._lines.popleft()
            if len(line) > self.max_line_bytes:
                self.refused_head = line[:HEAD_BYTES]
                return TOO_LONG
            if line.strip():
                return line
        if len(self._partial) > self.max_line_bytes:
            # Refuse an oversized line as soon as it is one; skip the rest of it.
            self.refused_head = bytes(self._partial[:HEAD_BYTES])
            self._partial.clear()
            self._discarding = True
            return TOO_LONG
        if not self._eof:
            return NEED_DATA
        line = bytes(self._partial)
        self._partial.clear()
        if line.strip() and not self._discarding:
            return line
        return END


#: How much of a refused line is kept to read its envelope from (:func:`peek_envelope`).
HEAD_BYTES = 1024

# One member of a JSON object whose value is a scalar, with what follows it.
_STRING = rb'"(?:[^"\\]|\\.)*"'
_MEMBER = re.compile(
    rb"\s*("
    + _STRING
    + rb")\s*:\s*("
    + _STRING
    + rb"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)\s*,"
)
_NEXT_KEY = re.compile(rb"\s*(" + _STRING + rb")\s*:")


class Envelope(enum.Enum):
    """What the start of a message says it is (:func:`peek_envelope`)."""

    #: A request or a notification (it has a ``method``).
    REQUEST = enum.auto()
    #: A response (``result`` or ``error``).
    RESPONSE = enum.auto()
    #: Its start does not say.
    UNKNOWN = enum.auto()


def peek_envelope(head: bytes) -> tuple[Envelope, RequestId | None]:
    """What kind of message ``head``, the start of a message too long to parse, begins, and its
    id, read from the scalar members before the first nested value.

    ``{"jsonrpc":"2.0","id":7,"result":{...`` is the response to 7; ``{"result":{...`` (a peer
    that writes the id last) says nothing. Only members at the top level are read: a JSON string
    cannot hold an unescaped quote, so a key found this way is never inside a value.
    """
    start = head.lstrip()
    if not start.startswith(b"{"):
        return Envelope.UNKNOWN, None
    position = len(head) - len(start) + 1
    keys: dict[bytes, bytes] = {}
    while match := _MEMBER.match(head, position):
        keys[match.group(1)] = match.group(2)
        position = match.end()
    following = _NEXT_KEY.match(head, position)
    if following is not None:
        keys.setdefault(following.group(1), b"")
    if b'"method"' in keys:
        kind = Envelope.REQUEST
    elif b'"result"' in keys or b'"error"' in keys:
        kind = Envelope.RESPONSE
    else:
        return Envelope.UNKNOWN, None
    raw_id = keys.get(b'"id"')
    try:
        rid = orjson.loads(raw_id) if raw_id else None
    except orjson.JSONDecodeError:
        rid = None
    return kind, rid if is_valid_id(rid) else None


@attrs.frozen
class Oversized(Invalid):
    """A line over the bound, skipped: answered like any :class:`Invalid` (-32600), with the
    request's id when its start names one (so the caller's request fails instead of waiting),
    and read for what it was, since it may have been the answer to one of our own requests."""

    #: The bound it exceeded, in bytes.
    limit: int = 0
    #: What its start says it was, and its id (:func:`peek_envelope`).
    kind: Envelope = Envelope.UNKNOWN
    peer_id: RequestId | None = None

    @classmethod
    def from_head(cls, limit: int, head: bytes) -> Oversized:
        kind, rid = peek_envelope(head)
        error = ErrorObject.make(
            INVALID_REQUEST, "Invalid Request", data=f"message exceeds the limit of {limit} bytes"
        )
        answer_to = rid if kind is Envelope.REQUEST else None
        return cls(answer_to, error, limit=limit, kind=kind, peer_id=rid)


class CuttingLineSplitter:
    """The lines of a byte stream meant for a person (a child's stderr), each cut at
    ``max_line_bytes``: the rest of a longer line is dropped and counted, so an endless line
    never holds more than the cap. Linear in the bytes fed; lines come as text, without their
    line ending, a cut one ending in ``... (N bytes cut)``."""

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = bytearray()
        self._cut = 0
        self._cut_cr = False  # the last byte cut was a \r (of a \r\n line ending)

    def feed(self, chunk: bytes | bytearray) -> list[str]:
        """The lines that ``chunk`` completes."""
        lines: list[str] = []
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk, start, newline)
            lines.append(self._take())
            start = newline + 1
        self._keep(chunk, start, len(chunk))
        return lines

    def end(self) -> list[str]:
        """The stream ended: its last line, if it had no newline."""
        if not self._partial and not self._cut:
            return []
        return [self._take()]

    def _keep(self, chunk: bytes | bytearray, start: int, stop: int) -> None:
        room = max(0, self.max_line_bytes - len(self._partial))
        keep = min(room, stop - start)
        self._partial += chunk[start : start + keep]
        if stop - start > keep:
            self._cut += stop - start - keep
            self._cut_cr = chunk[stop - 1] == 0x0D

    def _take(self) -> str:
        cut = self._cut - self._cut_cr
        if cut:
            line = self._partial.decode(errors="replace") + f"... ({cut} bytes cut)"
        else:
            line = self._partial.rstrip(b"\r").decode(errors="replace")
        self._partial.clear()
        self._cut = 0
        self._cut_cr = False
        return line
