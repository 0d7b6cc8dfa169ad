"""The contract between the engine and a transport: framed messages in and out.

A transport moves whole messages and never interprets them. The engine calls every method of
:class:`Transport` directly; :class:`BaseTransport` gives the two that most transports need no
more than a default for, so a new transport writes ``send`` and ``receive`` and nothing else.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import attrs

from ..protocol._jsonrpc import Batch, Parsed, RequestId


@attrs.frozen
class OutgoingMessage:
    """One encoded message on its way out, with the hints a routing transport needs."""

    data: bytes
    #: The incoming request this message belongs to: a response's own id, or the request a
    #: notification or nested request was made for. None for anything else.
    related_request_id: RequestId | None = None
    #: True for the response that ends ``related_request_id``.
    final: bool = False


@runtime_checkable
class Transport(Protocol):
    """What the engine needs from a transport. Subclass :class:`BaseTransport` to write one."""

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        """Write one encoded message.

        Transports that route by request (Streamable HTTP) learn from the keywords which
        incoming request the message belongs to; byte streams ignore them.
        """
        ...

    async def send_many(self, messages: Iterable[OutgoingMessage]) -> None:
        """Write several messages, in order, as the engine's writer found them queued.

        ``messages`` is consumed once. The engine decides each message as it is taken, so a
        transport that writes one at a time never sends a message withdrawn meanwhile.
        """
        ...

    async def receive(self) -> bytes | Parsed | Batch:
        """The next framed message; raise ``trio.EndOfChannel`` when the peer is done."""
        ...

    def request_suppressed(self, request_id: RequestId) -> None:
        """An incoming request ended with no response (it was cancelled).

        Called in order with the writes, after everything queued before it, so a transport can
        end that request's stream once the messages for it are out.
        """
        ...


class BaseTransport(abc.ABC):
    """A :class:`Transport` with the defaults: ``send_many`` sends each message in turn, and a
    suppressed request needs nothing done."""

    @abc.abstractmethod
    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None: ...

    @abc.abstractmethod
    async def receive(self) -> bytes | Parsed | Batch: ...

    async def send_many(self, messages: Iterable[OutgoingMessage]) -> None:
        for message in messages:
            await self.send(
                message.data, related_request_id=message.related_request_id, final=message.final
            )

    def request_suppressed(self, request_id: RequestId) -> None:  # noqa: B027 - a no-op default
        """Nothing to finish by default: the response simply never comes."""
