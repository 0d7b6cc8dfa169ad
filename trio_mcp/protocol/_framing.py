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
                return TOO_LONG
            if line.strip():
                return line
        if len(self._partial) > self.max_line_bytes:
            # Refuse an oversized line as soon as it is one; skip the rest of it.
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
