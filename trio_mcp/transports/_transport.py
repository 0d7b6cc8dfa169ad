"""The contract between the engine and a transport: framed messages in and out.

A transport moves whole messages and never interprets them. The engine calls every method of
the contract directly. :class:`Transport` is one the engine reads (byte streams, memory
channels); :class:`Sender`, its output half, is all a transport that pushes what it receives
(``Engine.feed``) must be. :class:`BaseTransport` and :class:`BaseSender` give the defaults, so
a new transport writes ``send`` (and ``receive``) and nothing else.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Protocol, TypeAlias, runtime_checkable

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


@attrs.frozen
class RequestFailed:
    """What a transport's ``receive`` may return in place of a message: one of our own
    requests failed here, before any answer could come (its authorization failed, say), and
    its caller gets ``error``. The connection goes on; only that request ends."""

    request_id: RequestId
    error: Exception


@runtime_checkable
class Sender(Protocol):
    """The output half of a transport: all the engine needs from one that pushes what it
    receives (``Engine.feed``, as the Streamable HTTP server does) instead of being read."""

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

    def request_suppressed(self, request_id: RequestId) -> None:
        """An incoming request ended with no response (it was cancelled).

        Called in order with the writes, after everything queued before it, so a transport can
        end that request's stream once the messages for it are out.
        """
        ...


#: A sender's optional ``deliver(data, related_request_id, final)``: a write that never waits,
#: because it only routes the message in memory (Streamable HTTP's streams). The engine calls it
#: in the task that decided the message, instead of queueing it for its writer task; ``send`` is
#: then never called. It must not raise, and ``request_suppressed`` is called the same way.
Deliver: TypeAlias = "Callable[[bytes, RequestId | None, bool], None]"


@runtime_checkable
class Transport(Sender, Protocol):
    """What the engine needs from a transport it reads. Subclass :class:`BaseTransport`."""

    async def receive(self) -> bytes | Parsed | Batch | RequestFailed:
        """The next framed message (or a request of ours that failed in the transport);
        raise ``trio.EndOfChannel`` when the peer is done."""
        ...


class BaseSender(abc.ABC):
    """A :class:`Sender` with the defaults: ``send_many`` sends each message in turn, and a
    suppressed request needs nothing done."""

    __slots__ = ()  # a subclass with slots of its own keeps them (one without has a dict)

    #: Whether the end of the input leaves the output working (a byte stream's half-close).
    #: If so, the engine finishes what it received (bounded by its ``drain_timeout``) and
    #: writes the answers before it closes; if not (the peer is gone, nothing it is sent can
    #: arrive), what is in flight is cancelled at once. The engine reads it with a default of
    #: False, so a transport that does not subclass this class need not have it.
    half_close: bool = False

    @abc.abstractmethod
    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None: ...

    async def send_many(self, messages: Iterable[OutgoingMessage]) -> None:
        for message in messages:
            await self.send(
                message.data, related_request_id=message.related_request_id, final=message.final
            )

    def request_suppressed(self, request_id: RequestId) -> None:  # noqa: B027 - a no-op default
        """Nothing to finish by default: the response simply never comes."""


class BaseTransport(BaseSender):
    """A :class:`Transport` with :class:`BaseSender`'s defaults: write ``send`` and ``receive``."""

    __slots__ = ()

    @abc.abstractmethod
    async def receive(self) -> bytes | Parsed | Batch | RequestFailed: ...
