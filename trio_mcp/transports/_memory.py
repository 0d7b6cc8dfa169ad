"""In-memory transport: two trio memory channels carrying encoded frames.

Frames are bytes, as on every other transport, so in-memory tests run the same parser and the
same engine that stdio and HTTP do; no object is shared between the two sides.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import trio

from ..protocol._errors import ConnectionClosed
from ..protocol._jsonrpc import RequestId
from ._transport import BaseTransport, OutgoingMessage


class MemoryTransport(BaseTransport):
    """One end of an in-memory connection."""

    def __init__(
        self, send: trio.MemorySendChannel[bytes], receive: trio.MemoryReceiveChannel[bytes]
    ) -> None:
        self._send = send
        self._receive = receive

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self._put(data)
        await trio.lowlevel.checkpoint()

    async def send_many(self, messages: Iterable[OutgoingMessage]) -> None:
        # Everything queued goes into the channel at once, with one checkpoint, as a byte stream
        # writes it in one call. Nothing waits between two messages, so none can be withdrawn
        # once the first is taken.
        for message in messages:
            self._put(message.data)
        await trio.lowlevel.checkpoint()

    def _put(self, data: bytes) -> None:
        try:
            self._send.send_nowait(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionClosed("the peer closed the connection") from exc

    async def receive(self) -> bytes:
        return await self._receive.receive()

    def close(self) -> None:
        """Tell the peer we are done (it sees end-of-stream) and stop receiving."""
        self._send.close()
        self._receive.close()


def memory_transport_pair() -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected ends: what one sends, the other receives."""
    a_send, b_receive = trio.open_memory_channel[bytes](math.inf)
    b_send, a_receive = trio.open_memory_channel[bytes](math.inf)
    return MemoryTransport(a_send, a_receive), MemoryTransport(b_send, b_receive)
