"""A modern-era POST (2026-07-28), served with one light object and no engine.

A modern request is the whole of its connection: it carries its own version and capabilities,
and nothing outlives its POST. So none of what a handshake-era session needs is built for it (an
``HttpSession``, an engine, event streams and their listeners): one :class:`ModernPost` is at
once the connection its handler reads (a ``ServerConnection``: the server, the request's
``subscriptions/listen`` filter, its id for middleware), where its notifications go, and its
HTTP answer.

The request runs in the POST's own task, under its own cancel scope (the engine's
``run_alone``, after the server's ``admit_alone``), and settles as any request does. A request
that never yields (most tools) is answered with one JSON body, and nothing else runs. One that
yields gets a watcher of ``receive``: the client going away is its cancel. A notification that
comes before the answer (progress, a log message, a listen's acknowledgement) starts an SSE
response, written by a task of the POST's own as the events come, the answer last.

The app (``McpHttpApp._post_modern``) checks the envelope against the headers first; a server
with mounted servers or proxies, whose providers read a connection's engine, takes the
session-based path instead.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

import trio

from .._engine import InFlight, encode_response, run_alone
from ..protocol._errors import ConnectionClosed, ProtocolError
from ..protocol._jsonrpc import (
    ErrorObject,
    ErrorResponse,
    JSONObject,
    Message,
    Notification,
    Request,
    RequestId,
    encode,
)
from ..protocol._sse import encode_event
from ..server._connection import ServerConnection, admit_alone
from ..server._principal import Principal
from ..server._registry import Registrations
from ._asgi import Receive, Responder, Scope, Send
from ._modern import status_for
from ._sessions import SessionRegistry
from ._sse_writer import write_events
from ._streams import ByteBudget, StreamLimits
from ._telemetry import observe_http

logger = logging.getLogger("trio_mcp.http")

_T = TypeVar("_T")

#: How long a POST whose response is complete waits for its disconnect watcher to see the end.
_DISCONNECT_GRACE = 5.0
#: How long a POST that fails waits for its helpers to end once they are cancelled.
_ABANDON_GUARD = 2.0


class _Server(Registrations, Protocol):
    @property
    def connections(self) -> set[ServerConnection]: ...


class _Options(Protocol):
    @property
    def json_response(self) -> bool: ...
    @property
    def keepalive_interval(self) -> float: ...


class ModernHost(Responder, Protocol):
    """What a modern POST needs of the app it is part of (``McpHttpApp``, which imports this
    module: named here by its shape)."""

    @property
    def server(self) -> _Server: ...
    @property
    def options(self) -> _Options: ...
    @property
    def limits(self) -> StreamLimits: ...
    @property
    def budget(self) -> ByteBudget: ...
    @property
    def registry(self) -> SessionRegistry: ...


async def serve_modern(
    app: ModernHost,
    scope: Scope,
    receive: Receive,
    send: Send,
    request: Request,
    principal: Principal | None,
    ended: Callable[[], None] | None = None,
) -> None:
    """Serve a modern request, its envelope already checked, in this POST's task; ``ended``
    (the end of its client's count, if the caller took one) is called once it is over."""
    post = ModernPost(app, scope, receive, send)
    post.transport_name = "streamable-http"
    try:
        route, record = admit_alone(post, request, principal)
    except BaseException as refused:
        if ended is not None:
            ended()
        if not isinstance(refused, ProtocolError):
            raise
        refusal = encode(ErrorResponse(request.id, refused.error))
        await app.respond(scope, send, status_for(refused.code), refusal)
        return
    post.record = record
    server = app.server
    # Registered while it runs, so that list changes reach its listen stream; and with the app,
    # so that a drain can end its request.
    server.connections.add(post)
    registry = app.registry
    registry.alone.add(post)
    registry.request_started()
    try:
        observer = observe_http(scope, "streamable-http")
        answer = await _on_first_yield(run_alone(route, record, observer), post._yielded)
        post._keep_answer(answer)
        if post._own is None and not post._gone:  # nothing was streamed: the answer alone
            await post._answer_whole(answer)
        if post._helpers:
            await post._wind_down()
    finally:
        if post._helpers:
            await post._abandon()
        post._end()
        server.connections.discard(post)
        registry.alone.discard(post)
        registry.request_ended()
        if ended is not None:
            ended()


class ModernPost(ServerConnection):
    """One modern POST: the connection of its one request, and that request's answer.

    A ``ServerConnection`` with no engine: what its handler sends (:meth:`notify`,
    :meth:`notify_nowait`) is kept here, in order, for the POST's SSE response. It holds
    nothing that holds it, so reference counting frees it when its POST ends.

    Its helpers, a watcher of ``receive`` and the task that writes its SSE response, are
    started only when needed (most requests need neither), in the app's nursery rather than
    in a nursery of the POST's own, whose opening and closing (a scope, and a checkpoint)
    would cost every request; the POST waits for them before it returns
    (:meth:`_wind_down`), so neither outlives it.
    """

    # What a POST starts with, as class attributes: most requests change none of them, and an
    # instance sets only what changes.
    #: The request, once admitted.
    record: InFlight | None = None
    #: Once the request has settled (its answer decided): nothing more is sent for it.
    settled = False
    #: The client went away before the request settled, or fell too far behind its stream:
    #: the request is cancelled, nothing more is written.
    _gone = False
    #: The helper tasks running, their scopes, and what the POST waits on while any runs.
    _helpers = 0
    _watcher: trio.CancelScope | None = None
    _streamer: trio.CancelScope | None = None
    _helper_ended: trio.Event | None = None
    #: The SSE response's events, once it was started; then whether it was written whole.
    _own: _OwnStream | None = None
    _streamed = False

    def __init__(self, app: ModernHost, scope: Scope, receive: Receive, send: Send) -> None:
        super().__init__(app.server)
        self._app = app
        self._scope = scope
        self._receive = receive
        self._send = send

    # -- what the handler sends ----------------------------------------------------------------

    async def notify(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None:
        if self.settled:
            raise ConnectionClosed("the request has ended")
        self.notify_nowait(method, params, related_request_id=related_request_id)
        await trio.lowlevel.checkpoint()

    def notify_nowait(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None:
        record = self.record
        # Only what belongs to the request has a way to the client (the POST's own stream),
        # and none in JSON mode, whose response carries one message.
        if (
            self.settled
            or self._gone
            or record is None
            or related_request_id != record.id
            or self._app.options.json_response
        ):
            return
        self._push(encode(Notification(method, params)))

    def _push(self, data: bytes) -> None:
        app = self._app
        own = self._own
        if own is None:
            # The first event that is not the answer: from here on the answer is SSE.
            self._own = own = _OwnStream(app.budget)
            self._streamer = self._start(self._stream)
            if self._streamer is None:
                self._own = None
                return  # the app is shutting down: no stream starts, the answer goes alone
        size = len(data)
        limits, budget = app.limits, app.budget
        if own.events and (
            len(own.events) >= limits.pending_events
            or own.pending_bytes + size > limits.pending_bytes
            or budget.used + size > budget.limit
        ):
            logger.info(
                "an SSE client fell %d events (%d bytes) behind: its stream is ended, and its "
                "request cancelled",
                len(own.events),
                own.pending_bytes,
            )
            self._cancel()
            return
        own.push(data)

    # -- the request's life --------------------------------------------------------------------

    def _yielded(self) -> None:
        """The request blocked for the first time: from now on the client may go away while it
        runs, so a watcher looks out for that."""
        self._watcher = self._start(self._watch)

    def _keep_answer(self, answer: Message | None) -> None:
        """The request ended: ``answer`` is its response (None: suppressed). Decided with no
        checkpoint since it ended."""
        self.settled = True
        if self._own is not None:
            self._own.finish(answer)

    def end_request(self, reason: str, error: ErrorObject) -> None:
        """End the request with ``error`` (the drain's retryable one), as any engine does."""
        if self.record is not None:
            self.record.cancel(reason, error=error)

    def _cancel(self) -> None:
        """The client is gone, or cannot keep up with its stream: the request is cancelled, its
        stream ends, nothing more is written."""
        self._gone = True
        if self.record is not None:
            self.record.cancel("the client closed the connection", by="peer")
        if self._streamer is not None:
            self._streamer.cancel()

    def _end(self) -> None:
        """The POST is over: whatever is still pending leaves the byte budget."""
        if self._own is not None:
            self._own.discard()

    # -- its helpers ---------------------------------------------------------------------------

    def _start(self, helper: Callable[[], Awaitable[None]]) -> trio.CancelScope | None:
        """Start a helper in the app's nursery, under a scope of its own (returned, made now
        so that it can be cancelled before the task first runs); None when the app is
        shutting down and takes no new task."""
        nursery = self._app.registry.nursery
        if nursery is None:
            return None
        scope = trio.CancelScope()
        try:
            nursery.start_soon(self._helper, helper, scope)
        except RuntimeError:
            return None  # the nursery is closing
        self._helpers += 1
        return scope

    async def _helper(self, helper: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
        try:
            with scope:
                await helper()
        except Exception:
            # The app's nursery must never see it: it would end every session.
            logger.exception("a modern POST's %s failed", getattr(helper, "__name__", helper))
        finally:
            self._helpers -= 1
            ended = self._helper_ended
            if ended is not None:
                self._helper_ended = None
                ended.set()

    async def _wait_helpers(self) -> None:
        while self._helpers:
            self._helper_ended = ended = trio.Event()
            await ended.wait()

    async def _wind_down(self) -> None:
        """Wait for the helpers once the request has settled: the SSE task writes the answer
        (or gives up), then the watcher ends by itself, on the disconnect that an ASGI server
        reports once a response is complete (hypercorn does so before the last ``send``
        returns), which costs less than cancelling it. A server that never reports it is waited
        for only ``_DISCONNECT_GRACE``; after a response that was cut, not at all."""
        if self._own is not None:
            while self._helpers > (self._watcher is not None):
                self._helper_ended = ended = trio.Event()
                await ended.wait()
        if self._watcher is not None:
            if self._own is not None and not self._streamed:
                self._watcher.cancel()
            else:
                self._watcher.deadline = trio.current_time() + _DISCONNECT_GRACE
        await self._wait_helpers()

    async def _abandon(self) -> None:
        """The POST is ending with its helpers running (it failed, or was cancelled): they are
        cancelled, and waited for, shielded and bounded, so that neither outlives it."""
        for scope in (self._watcher, self._streamer):
            if scope is not None:
                scope.cancel()
        with trio.move_on_after(_ABANDON_GUARD) as guard:
            guard.shield = True
            await self._wait_helpers()

    async def _watch(self) -> None:
        """Cancel the request once the client has gone away. A disconnect once the request has
        settled cancels nothing: an ASGI server reports the end of a complete response as a
        disconnect too."""
        receive = self._receive
        while (await receive())["type"] != "http.disconnect":
            pass
        if not self.settled:
            self._cancel()

    # -- the answer ----------------------------------------------------------------------------

    def _answer_whole(self, answer: Message | None) -> Awaitable[None]:
        """The whole answer, once the request has settled with nothing streamed: its response
        as JSON, with the status its error code calls for; an empty 202 when it was cancelled
        with no response, never the 500 an ASGI server answers for an app that sent nothing.
        (The app's response to await: no coroutine of this method's in between.)"""
        app = self._app
        if answer is None:
            return app.respond(self._scope, self._send, 202)
        status = status_for(answer.error.code) if isinstance(answer, ErrorResponse) else 200
        return app.respond(self._scope, self._send, status, encode_response(answer))

    async def _stream(self) -> None:
        """The SSE response of a request whose notifications come before its answer, as they
        come, the answer last. A cut or a client gone cancels the request, which nobody could
        read any more."""
        own = self._own
        assert own is not None  # started with it
        app = self._app
        await app.sse_start(self._scope, self._send)
        self._streamed = await write_events(self._send, own, app.options.keepalive_interval)
        if not self._streamed:
            self._cancel()


class _OwnStream:
    """A modern POST's own SSE stream, as :func:`write_events` takes it: its request's
    notifications as they come (their bytes counted in the app's byte budget until written, as
    every connection's pending events are), then its answer, which ends it."""

    __slots__ = ("_budget", "_end", "_wake", "events", "pending_bytes")

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        #: The notifications not yet written, in order, and their bytes.
        self.events: list[bytes] = []
        self.pending_bytes = 0
        #: The answer's event once the request has settled (empty when it was suppressed).
        self._end: bytes | None = None
        #: What the writer waits on while there is nothing to write.
        self._wake: trio.Event | None = None

    def push(self, data: bytes) -> None:
        self.events.append(data)
        self.pending_bytes += len(data)
        self._budget.used += len(data)
        self._wake_up()

    def finish(self, answer: Message | None) -> None:
        """The request settled: ``answer`` (None: suppressed) is the stream's last event."""
        if answer is None:
            self._end = b""
        else:
            self._end = encode_event(encode_response(answer), event="message")
        self._wake_up()

    def discard(self) -> None:
        """The POST is over: whatever is still pending leaves the byte budget."""
        self.events.clear()
        self._budget.used -= self.pending_bytes
        self.pending_bytes = 0

    def ready(self) -> bool:
        return bool(self.events) or self._end is not None

    async def wait(self) -> None:
        if self.ready():
            await trio.lowlevel.checkpoint()
            return
        self._wake = wake = trio.Event()
        try:
            await wake.wait()
        finally:
            self._wake = None

    def take(self) -> tuple[bytes, bool]:
        body = b"".join(encode_event(data, event="message") for data in self.events)
        self.discard()
        if self._end is None:
            return body, False
        return body + self._end, True

    def _wake_up(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()


@types.coroutine
def _on_first_yield(
    coro: Coroutine[Any, Any, _T], first: Callable[[], None]
) -> Generator[Any, Any, _T]:
    """Await ``coro``, calling ``first`` when it first yields to trio, before trio acts on it.

    A POST's own request that ends without ever yielding (most tools) needs no disconnect
    watcher: nothing else could have run while it did, the watcher included. Started at the
    first yield, the watcher runs when it would have run had it been started before the
    request, and a request that never blocks saves its task.
    """
    try:
        trap = coro.send(None)
    except StopIteration as done:
        result: _T = done.value
        return result
    first()
    while True:
        try:
            sent = yield trap
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                trap = coro.throw(exc)
            except StopIteration as done:
                result = done.value
                return result
        else:
            try:
                trap = coro.send(sent)
            except StopIteration as done:
                result = done.value
                return result
