"""The engine: one connection, its read loop, its ordered writer and its routing tables.

Every incoming request runs in its own child task of the connection's nursery under its own
:class:`trio.CancelScope`; ``_in_flight`` maps request ids to those scopes. Every outgoing request
lives in its caller's task: when the caller is cancelled the peer is told, unless the request never
reached the wire or its response already arrived. Nothing here knows a method's meaning beyond
what routing needs (cancellation and progress); the server and client supply a
:class:`Dispatcher` for the rest.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import math
import sys
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, Final, Protocol, TypeAlias, assert_never

import attrs
import trio

from ._exception_groups import single_error
from ._lazy_event import LazyEvent
from ._mailbox import Mailbox
from .protocol._errors import (
    ConnectionClosed,
    InvalidAnswer,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
)
from .protocol._framing import Envelope, Oversized
from .protocol._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_DATA,
    Batch,
    ErrorObject,
    ErrorResponse,
    Invalid,
    JSONObject,
    Message,
    Notification,
    Parsed,
    Request,
    RequestId,
    Response,
    describe_id,
    encode,
    is_valid_id,
    parse,
)
from .transports._transport import Deliver, OutgoingMessage, RequestFailed, Sender, Transport

logger = logging.getLogger("trio_mcp")

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]

#: The bytes queued for writing above which the read loop stops reading (backpressure).
DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024
#: The requests of the peer that may run at once on one connection; more are refused.
DEFAULT_MAX_IN_FLIGHT = 4096
#: Roughly the most the writer hands the transport in one write.
_BATCH_BYTES = 1024 * 1024
#: The error a request still running when a half-closed connection's drain timeout ends gets.
INPUT_ENDED_MESSAGE = "Request cancelled: the input ended and it did not finish in time"
#: The name of every request's task: what trio would derive from ``_run_request``, given as a
#: constant so that no task builds (and holds) a string of its own.
_REQUEST_TASK_NAME = "trio_mcp._engine._run_request"


class Dispatcher(Protocol):
    """The server's or client's knowledge of methods, used by the engine."""

    def route(self, request: Request, session: Engine) -> Route:
        """Find the handler for a request, or raise :class:`ProtocolError` (synchronously)."""
        ...

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        """Handle a notification other than cancellation and progress (synchronously).
        ``principal`` is who the transport vouches sent it, as for a request; it is passed only
        when there is one."""
        ...


Handler = Callable[["InFlight"], Awaitable[JSONObject]]


class Observer(Protocol):
    """What watches one connection's traffic (``trio_mcp.otel``'s spans and metrics).

    ``Engine.observer`` is None unless something listens, decided once per connection: then
    each request costs one branch, and nothing here knows what is watching.
    """

    def serve(self, handler: Handler, record: InFlight) -> Awaitable[JSONObject]:
        """Run a received request's handler (in its task and scope), watching it."""
        ...

    def refused(self, request: Request, error: ErrorObject) -> None:
        """A received request answered with ``error`` before anything of it ran."""
        ...

    def notified(self, notification: Notification) -> None:
        """A notification received, before it is acted on."""
        ...

    # The rooms above watch what they send through the same observer:

    def sending(self, method: str, params: JSONObject | None) -> Watch:
        """A request about to be sent (``with``: send ``watch.params``)."""
        ...

    def answering(self, method: str, params: JSONObject | None) -> Watch:
        """A question of the peer's answered outside the engine (a modern input request)."""
        ...

    def notifying(self, method: str, params: JSONObject | None) -> JSONObject | None:
        """A notification about to be sent: the params to send instead."""
        ...


class Watch(Protocol):
    """One request watched while it is sent and answered (a context manager)."""

    #: The params to send (they may carry the watcher's context in ``_meta``).
    params: JSONObject | None

    def sent(self, request_id: RequestId) -> None: ...
    def answered(self, result: JSONObject) -> None: ...
    def __enter__(self) -> Watch: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


@attrs.define(eq=False, weakref_slot=False)
class Route:
    """How a request runs: made by the dispatcher, read by whoever runs it, never changed (not
    frozen only because a frozen attrs class costs three times as much to make, and a modern
    request makes one each)."""

    #: Called in the request's task and scope; what it returns is awaited there. Its value is
    #: the result (a ``JSONObject``), unless ``returned`` makes it one.
    handler: Callable[[InFlight], Awaitable[Any]]
    #: Registered requests can be cancelled and are refused while their id is in flight.
    #: ``initialize`` is never registered.
    register: bool = True
    #: For the one request that is answered when cancelled (a modern ``subscriptions/listen``
    #: ends with a final result): builds that result. Everything else is suppressed.
    on_cancel: Callable[[InFlight], JSONObject] | None = None
    #: For a handler whose awaitable gives a value that is not yet the result (a tool's own
    #: coroutine, awaited by the request's task with no wrapper, so that nothing more is held
    #: while it runs): turns that value into the result, in the request's scope. None: the
    #: value is the result.
    returned: Callable[[InFlight, Any], JSONObject] | None = None
    #: With ``returned``: turns an ``Exception`` the handler raised into the result (a tool's
    #: ``isError``), or raises what the request is answered with instead.
    failed: Callable[[InFlight, Exception], JSONObject] | None = None


@attrs.define(eq=False, weakref_slot=False)
class _Later:
    """What only some requests come to have, made when one does (most never do): why it was
    cancelled, and the handler's own per-request state (:attr:`InFlight.local_state`). Once
    there is one, the request's route and whether it settled are kept here too; a request
    that settles with none of it holds the shared :data:`_SETTLED`."""

    route: Route | None = None
    cancelled: bool = False
    reason: str | None = None
    error: ErrorObject | None = None
    by: str | None = None
    settled: bool = False
    state: dict[str, Any] | None = None


#: The one ``_Later`` of every request that settled uncancelled and with no state: never
#: changed (a change first replaces it with a ``_Later`` of the request's own).
_SETTLED: Final = _Later(settled=True)


@attrs.define(eq=False, weakref_slot=False, init=False)
class InFlight:
    """One incoming request while it runs: the handler's view of its own lifecycle.

    Every request in flight holds one for as long as it runs, so it keeps to a few slots: the
    request's own fields are held here rather than in its parsed :class:`Request` (one object
    less per request in flight); what only some requests come to have (a cancellation, a
    per-request state) is one :class:`_Later`, made when they do; whether it settled is kept in
    the same slot.
    """

    id: RequestId
    method: str
    #: Its params as they came (None: it had none); :attr:`params` gives them as an object.
    _params: JSONObject | None = attrs.field(repr=False)
    #: The engine it came in on; None for a request served alone, with no engine
    #: (:func:`run_alone`: a modern Streamable HTTP POST).
    session: Engine | None
    scope: trio.CancelScope
    #: What the dispatcher learned about the request itself (the modern era's envelope).
    envelope: Any
    #: Who the transport says sent it (the server's authorization principal), or None.
    principal: Any
    #: Its course, in one slot: while it runs uncancelled, how the engine runs it (its
    #: :class:`Route`, given when an engine admits it; None for any other record); once it
    #: is cancelled or has a state, its ``_Later`` (which keeps the route); ``_SETTLED`` once
    #: it settled with neither.
    _course: Route | _Later | None = attrs.field(repr=False)

    def __init__(
        self,
        request: Request,
        session: Engine | None,
        scope: trio.CancelScope | None = None,
        envelope: Any = None,
        principal: Any = None,
        route: Route | None = None,
    ) -> None:
        self.id = request.id
        self.method = request.method
        self._params = request.params
        self.session = session
        self.scope = trio.CancelScope() if scope is None else scope
        self.envelope = envelope
        self.principal = principal
        self._course = route

    @property
    def request(self) -> Request:
        """The request as it stands (a middleware or a mount may have given it other params)."""
        return Request(self.id, self.method, self._params)

    @request.setter
    def request(self, request: Request) -> None:
        self.id, self.method, self._params = request.id, request.method, request.params

    @property
    def params(self) -> JSONObject:
        return self._params or {}

    @property
    def progress_token(self) -> str | int | None:
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return token if is_valid_id(token) else None

    @property
    def _later(self) -> _Later | None:
        course = self._course
        return course if course.__class__ is _Later else None

    @property
    def settled(self) -> bool:
        """True once it has settled: answered, or suppressed."""
        later = self._later
        return later is not None and later.settled

    @settled.setter
    def settled(self, value: bool) -> None:
        course = self._course
        if course.__class__ is _Later and course is not _SETTLED:
            course.settled = value
        elif value:
            self._course = _SETTLED  # what has settled needs its route no more
        elif course is _SETTLED:
            self._course = None

    @property
    def cancel_requested(self) -> bool:
        later = self._later
        return later is not None and later.cancelled

    @property
    def cancel_reason(self) -> str | None:
        later = self._later
        return None if later is None else later.reason

    @property
    def cancel_error(self) -> ErrorObject | None:
        """The answer of a request cancelled by the engine rather than by the peer (None:
        none)."""
        later = self._later
        return None if later is None else later.error

    @property
    def cancelled_by(self) -> str | None:
        """Who cancelled it: ``"peer"`` (``notifications/cancelled``, or a client that went
        away) or ``"local"`` (a drain, a timeout, the connection ending); None until cancelled
        (and for a handler that ended itself by raising ``RequestCancelled``)."""
        later = self._later
        return None if later is None else later.by

    @property
    def finished(self) -> bool:
        """True once nothing more may be sent for this request."""
        later = self._later
        return later is not None and (later.settled or later.cancelled)

    @property
    def _route(self) -> Route | None:
        """How the engine runs it (None for a record no engine admitted, or once settled)."""
        course = self._course
        return course.route if course.__class__ is _Later else course  # type: ignore[return-value]

    @property
    def local_state(self) -> dict[str, Any]:
        """A dict of the handler's own for this request (``Context.state`` outside the modern
        era), made on first use."""
        later = self._own_later()
        if later.state is None:
            later.state = {}
        return later.state

    def _own_later(self) -> _Later:
        course = self._course
        if course.__class__ is _Later and course is not _SETTLED:
            return course
        # A settled request's route is gone (nothing needs it); a running one's is kept.
        later = _Later(settled=True) if course is _SETTLED else _Later(route=course)  # type: ignore[arg-type]
        self._course = later
        return later

    def cancel(
        self, reason: str | None = None, *, error: ErrorObject | None = None, by: str = "local"
    ) -> bool:
        """Cancel the request as ``notifications/cancelled`` would (False: it had already
        settled or been cancelled); with ``error``, it is answered with that error instead of
        nothing. ``by`` says who cancelled it (``"peer"`` or ``"local"``)."""
        if self.finished:
            return False
        self._mark_cancelled(reason, error, by)
        self.scope.cancel()
        return True

    def _mark_cancelled(
        self, reason: str | None, error: ErrorObject | None, by: str | None
    ) -> None:
        later = self._own_later()
        later.cancelled = True
        later.reason, later.error, later.by = reason, error, by


@attrs.define(eq=False)
class _Outgoing:
    data: bytes
    related: RequestId | None
    final: bool = False
    withdrawn: bool = False
    #: Not a message: tells the transport, in order, that this request ended unanswered.
    suppressed: bool = False
    taken: bool = False


#: What a transport's write raises when the peer can no longer be written to.
_WRITE_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionClosed)

#: What :meth:`Engine._enqueue` returns for a message handed to a delivering transport: taken
#: at once, so it can be neither withdrawn nor suppressed (one shared record, not one per message).
_DELIVERED = _Outgoing(b"", None, taken=True)


# What comes back for one of our own requests, through its channel: progress any number of
# times, then one outcome.


@attrs.frozen
class _Answered:
    result: JSONObject


@attrs.frozen
class _Failed:
    error: ErrorObject


@attrs.frozen
class _Cancelled:
    """Cancelled by id (:meth:`Engine.cancel`), not by the caller's own scope."""

    reason: str | None


@attrs.frozen
class _Closed:
    why: BaseException


@attrs.frozen
class _Raised:
    """Failed in the transport, before any answer (:class:`RequestFailed`), or answered with
    what is not an answer (:class:`InvalidAnswer`)."""

    error: Exception


@attrs.frozen
class _Progress:
    params: JSONObject


_Outcome = _Answered | _Failed | _Cancelled | _Closed | _Raised


class _Pending(Mailbox[_Outcome | _Progress]):
    """One of our own requests awaiting its answer: what arrives for it (progress, then its
    outcome), in order, for its caller. The first of response or cancel wins."""

    __slots__ = ("done", "method")

    def __init__(self, method: str) -> None:
        super().__init__()
        self.method = method
        self.done = False

    def settle(self, outcome: _Outcome) -> bool:
        """Hand the caller ``outcome``, unless it has one already (False then)."""
        if self.done:
            return False
        self.done = True
        self.send_nowait(outcome)
        return True


#: Where the answer of a request in a batch goes (its batch's collector). A request answered on
#: its own has none: the engine writes its answer (from its own task when it can). Held as a
#: bound method of the session, it would tie every session to itself in a reference cycle.
Sink: TypeAlias = "Callable[[Message | None], None]"


class _BatchSink:
    """Collects the responses of one batch and writes them as one array."""

    def __init__(self, session: Engine) -> None:
        self._session = session
        self._responses: list[Message] = []
        self._waiting = 0
        self._sealed = False

    def expect(self) -> Sink:
        self._waiting += 1
        return self._deliver

    def add(self, message: Message) -> None:
        self._responses.append(message)

    def _deliver(self, message: Message | None) -> None:
        if message is not None:
            self._responses.append(message)
        self._waiting -= 1
        self._flush()

    def seal(self) -> None:
        self._sealed = True
        self._flush()

    def _flush(self) -> None:
        if self._sealed and self._waiting == 0 and self._responses:
            encoded = b",".join(encode_response(m) for m in self._responses)
            self._session._queue_message(b"[" + encoded + b"]", None)
            self._responses = []


def encode_response(message: Message) -> bytes:
    """Encode an answer; a result that cannot be serialized becomes a generic -32603."""
    try:
        return encode(message)
    except TypeError:
        rid = message.id if isinstance(message, Response | ErrorResponse) else None
        logger.exception("the result of request %r cannot be serialized", rid)
        return encode(ErrorResponse(rid, ErrorObject.make(INTERNAL_ERROR)))


def _error(
    rid: RequestId | None, code: int, message: str | None = None, data: Any = NO_DATA
) -> ErrorResponse:
    return ErrorResponse(rid, ErrorObject.make(code, message, data=data))


class Engine:
    """One MCP connection, in either role. Run it with :meth:`run` in a nursery."""

    def __init__(
        self,
        transport: Sender,
        dispatcher: Dispatcher,
        *,
        id_prefix: str = "",
        drain_timeout: float = 2.0,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        observer: Observer | None = None,
    ) -> None:
        self.transport = transport
        #: What watches this connection (spans, metrics), or None: decided once, here.
        self.observer = observer
        #: After the peer stops sending: how long cancelled requests may take to finish and
        #: already-decided messages may take to flush before the connection is torn down. On a
        #: half-closed transport, first how long what was received may take to finish.
        self.drain_timeout = drain_timeout
        #: Above this many bytes queued for writing, the read loop waits for the writer before
        #: it reads on, so a peer that does not read makes its own writes block.
        self.max_queued_bytes = max_queued_bytes
        #: At most this many requests of the peer run at once; one more is refused (-32600).
        self.max_in_flight = max_in_flight
        self._queued_bytes = 0
        #: Set when the writer has caught up; made only while the read loop waits for that.
        self._writer_caught_up: trio.Event | None = None
        self._running = 0
        #: Set when ``_running`` drops to zero; made only while someone waits for that.
        self._all_done: trio.Event | None = None
        self._writer_done = LazyEvent()
        #: A transport whose writes never wait (it routes each message in memory) is handed
        #: every message as it is decided, in the deciding task: no writer task, no hop.
        self._deliver: Deliver | None = getattr(transport, "deliver", None)
        if self._deliver is not None:
            self._writer_done.set()
        self.dispatcher = dispatcher
        self._in_flight: dict[RequestId, InFlight] = {}
        self._pending: dict[RequestId, _Pending] = {}
        self._progress: dict[str | int, _Pending] = {}
        self._ids = itertools.count(1)
        self._id_prefix = id_prefix
        #: What the writer has still to write, in order; closed by :meth:`_close_queue`.
        #: (A list: every session has one, and an empty deque holds a block of 64 slots.) A
        #: message nothing may withdraw (an answer, a notification) is queued as the
        #: ``OutgoingMessage`` the transport takes; our own requests and the marks of
        #: suppressed ones as an ``_Outgoing``.
        self._queue: list[_Outgoing | OutgoingMessage] = []
        self._queue_closed = False
        #: The writer's task while it waits for the queue to fill (None: it is not waiting).
        self._writer_parked: trio.lowlevel.Task | None = None
        #: A request's task is writing its response in the idle writer's place: the writer is
        #: not woken meanwhile (what is queued then waits for that write to end).
        self._borrowed = False
        #: The jobs of :meth:`run_ordered`: the channel, and the task that runs them, are made
        #: with the first job (most connections never have one). ``_ordered_jobs`` is the
        #: channel's end until its task is started.
        self._ordered_send: trio.MemorySendChannel[Callable[[], Awaitable[None]]] | None = None
        #: The jobs handed to :meth:`run_ordered` that have not finished yet.
        self._ordered_pending = 0
        self._ordered_jobs: trio.MemoryReceiveChannel[Callable[[], Awaitable[None]]] | None = None
        self._nursery: trio.Nursery | None = None
        self._closed: BaseException | None = None
        #: Set once the engine has stopped.
        self.closed = LazyEvent()
        self._input_ended = LazyEvent()
        #: Why the input of a half-closed transport ended, while the output still works.
        self._input_closed: BaseException | None = None

    # -- running -------------------------------------------------------------------------------

    async def run(
        self,
        *,
        pull: bool = True,
        task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Dispatch and write until the peer goes away or the caller cancels.

        With ``pull`` (byte streams, memory channels) the engine reads its :class:`Transport`
        itself: its read loop takes each frame from ``receive()`` and feeds it, until the
        transport ends. With ``pull=False`` (Streamable HTTP, where every POST carries one
        message) nothing is read: the transport hands each message to :meth:`feed` as it comes
        and calls :meth:`feed_eof` when its peer is gone, which the engine's task waits for.
        Either way, what is in flight is then cancelled and what was already decided is
        written (bounded by ``drain_timeout``).
        """
        why: BaseException = ConnectionClosed("connection closed")
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self._deliver is None:
                    nursery.start_soon(self._write_loop)
                self._start_ordered()
                task_status.started(self)
                try:
                    why = await (self._read_loop() if pull else self._until_input_ends())
                    if getattr(self.transport, "half_close", False) and self._closed is None:
                        await self._finish_received(why)
                    await self._drain(why)
                finally:
                    self._close(why)
                    nursery.cancel_scope.cancel()
        finally:
            self._close(why)

    async def _finish_received(self, why: BaseException) -> None:
        """The input of a half-closed transport ended, its output still works: give what was
        received ``drain_timeout`` to finish; answer what is still running then with an error.

        Our own requests cannot be answered any more, so they fail at once, and new ones are
        refused; the requests of the peer go on, their notifications included.
        """
        self._input_closed = why
        self._fail_pending(why)
        with trio.move_on_after(self.drain_timeout):
            await self._wait_all_done()
        error = ErrorObject.make(INTERNAL_ERROR, INPUT_ENDED_MESSAGE)
        for record in list(self._in_flight.values()):
            self.cancel_incoming(record.id, "input ended", error=error)

    async def _drain(self, why: BaseException) -> None:
        """The peer stopped sending: cancel what is in flight, then flush what was decided."""
        self._close(why)
        for record in list(self._in_flight.values()):
            self.cancel_incoming(record.id, "connection closed")
        with trio.move_on_after(self.drain_timeout):
            await self._wait_all_done()
            self._close_queue()
            await self._writer_done.wait()

    async def _wait_all_done(self) -> None:
        """Wait until no request of the peer is running."""
        if self._running == 0:
            await trio.lowlevel.checkpoint()
            return
        if self._all_done is None:
            self._all_done = trio.Event()
        await self._all_done.wait()

    def _close(self, why: BaseException) -> None:
        if self._closed is not None:
            return
        self._closed = why
        self._fail_pending(why)
        self.closed.set()
        self._catch_up()  # a read loop waiting for the writer stops waiting

    def _fail_pending(self, why: BaseException) -> None:
        for pending in list(self._pending.values()):
            pending.settle(_Closed(why))
        self._pending.clear()
        self._progress.clear()

    def feed_eof(self) -> None:
        """The peer is gone: for a session run with ``pull=False``, what a transport's end is
        to the read loop. Whatever is in flight is cancelled and the session winds down."""
        self._input_ended.set()

    @property
    def is_closed(self) -> bool:
        return self._closed is not None

    @property
    def nursery(self) -> trio.Nursery:
        """The nursery this connection's own tasks run in: :meth:`run`'s, or the caller's one
        under :meth:`serve_one`.

        For a task that belongs to the connection and must not outlive it (a proxy's upstream
        client session): it is cancelled when the connection ends, with the requests in
        flight, so what runs there cleans up promptly under cancellation and never holds the
        connection open. Raises :class:`RuntimeError` before the connection runs.
        """
        if self._nursery is None:
            raise RuntimeError("the connection is not running")
        return self._nursery

    @property
    def idle(self) -> bool:
        """True when no request of the peer is in flight (``initialize`` is never counted)."""
        return not self._in_flight

    async def _read_loop(self) -> BaseException:
        """The driver of a transport the engine reads: pull a frame, feed it, repeat."""
        transport = self.transport
        if not isinstance(transport, Transport):
            raise TypeError(
                f"{type(transport).__name__} has no receive(): run its session with pull=False "
                "and feed() it what arrives"
            )
        while True:
            while self._queued_bytes > self.max_queued_bytes and self._closed is None:
                # Backpressure: read nothing more until the writer has caught up, so the
                # peer's writes block instead of our queue growing.
                caught_up = self._writer_caught_up = trio.Event()
                await caught_up.wait()
            try:
                data = await transport.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
                return ConnectionClosed("the peer closed the connection")
            except ConnectionClosed as exc:
                return exc
            if type(data) is bytes:  # a byte stream's line: told with no call
                self.feed(parse(data))
            elif isinstance(data, RequestFailed):
                self._on_request_failed(data)
            else:
                self.feed(
                    parse(data) if isinstance(data, bytes | bytearray | memoryview | str) else data
                )

    async def _until_input_ends(self) -> BaseException:
        await self._input_ended.wait()
        return ConnectionClosed("the peer closed the connection")

    def feed(self, parsed: Parsed | Batch, *, principal: Any = None) -> None:
        """The engine's entry: act on one parsed frame from the peer, while :meth:`run` runs.

        A transport that pushes what it receives (one message per HTTP POST) calls this
        directly; for one that is read, the read loop calls it. Synchronous: no checkpoint is
        taken between the routing decision and the registration of a request, so a caller can
        register its own bookkeeping for the request first (an HTTP stream for its id) and know
        that the engine's decision and its own cannot disagree. A request is then running as a
        task of the session (see :meth:`in_flight`); an invalid frame is answered at once.
        ``principal`` is who the transport vouches sent a request or a notification (a
        request's ``InFlight.principal``).
        """
        if type(parsed) is Request:  # the commonest, told apart with no call
            self._on_request(parsed, None, principal)
        elif isinstance(parsed, Batch):
            self._feed_batch(parsed, principal)
        elif isinstance(parsed, Request):
            self._on_request(parsed, None, principal)
        elif isinstance(parsed, Notification):
            self._on_notification(parsed, principal)
        elif isinstance(parsed, Response | ErrorResponse):
            self._on_response(parsed)
        else:
            if isinstance(parsed, Oversized):
                self._on_oversized(parsed)
            elif parsed.answer and self._on_invalid_answer(parsed):
                return
            self._queue_message(encode(parsed.response()), None)

    def _on_invalid_answer(self, frame: Invalid) -> bool:
        """An answer that is not a JSON-RPC response (a ``result`` that is not an object, an
        ``error`` with no integer code, a lone surrogate) to a request of ours waiting for it:
        that request fails with :class:`InvalidAnswer` now, instead of waiting for an answer
        that will not come in any other form, and nothing is sent back (an answer is not
        answered). False if no request of ours waits for its id."""
        pending = self._pending.get(frame.id) if frame.id is not None else None
        if pending is None or pending.done:
            return False
        why = frame.error.data if isinstance(frame.error.data, str) else frame.error.message
        failure = InvalidAnswer(f"the peer's answer is not a JSON-RPC response: {why}")
        return pending.settle(_Raised(failure))

    def _on_oversized(self, frame: Oversized) -> None:
        """A message over the transport's limit was skipped. If it may have been the answer
        to requests of ours, they fail now rather than wait for an answer that was dropped:
        the one its start names, or, when its start does not say, every one waiting."""
        if frame.kind is Envelope.REQUEST:
            return
        named = frame.peer_id if frame.kind is Envelope.RESPONSE else None
        victims = [named] if named is not None and named in self._pending else list(self._pending)
        error = ErrorObject.make(
            INVALID_REQUEST,
            f"Message too large: the peer sent a message over the limit of {frame.limit} "
            "bytes; it was skipped",
        )
        for rid in victims:
            self._pending[rid].settle(_Failed(error))

    def _feed_batch(self, batch: Batch, principal: Any = None) -> None:
        sink = _BatchSink(self)
        for item in batch.items:
            if isinstance(item, Request):
                self._on_request(item, sink.expect(), principal)
            elif isinstance(item, Notification):
                self._on_notification(item, principal)
            elif isinstance(item, Response | ErrorResponse):
                self._on_response(item)
            elif not (item.answer and self._on_invalid_answer(item)):
                sink.add(item.response())
        sink.seal()

    async def _write_loop(self) -> None:
        """The one writer: messages reach the wire in the order they were decided.

        Whatever is queued when the writer wakes goes to the transport together (one write on
        a byte stream): under load that saves a system call and a checkpoint per message.
        """
        queue = self._queue
        try:
            while True:
                if not queue:
                    if self._queue_closed:
                        return
                    self._writer_parked = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._unpark_writer)
                    continue
                if not await self._write_queued():
                    return
        finally:
            self._writer_done.set()

    async def _write_queued(self) -> bool:
        """Write what is queued, in one batch; False once the peer cannot be written to.

        Its own frame, so that nothing written stays referenced while the writer waits (the
        last message of an idle session would otherwise be held until the next one)."""
        queue = self._queue
        size = self._queued_bytes  # what is queued: all of it, unless that is too much
        if size < _BATCH_BYTES:
            batch = queue[:]
            del queue[:]
        else:
            size = taken = 0
            for item in queue:
                size += len(item.data)
                taken += 1
                if size >= _BATCH_BYTES:  # one write is not a second copy of the queue
                    break
            batch = queue[:taken]
            del queue[:taken]
        try:
            await self._write_batch(batch)
        except _WRITE_ERRORS as exc:
            self._write_failed(exc)
            return False
        self._written(size)
        return True

    def _write_failed(self, exc: BaseException) -> None:
        self._close(ConnectionClosed(f"could not write to the peer: {exc}"))
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def _unpark_writer(self, _: Any) -> trio.lowlevel.Abort:
        self._writer_parked = None  # the writer was cancelled while it waited
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake_writer(self) -> None:
        task = self._writer_parked
        if task is not None and not self._borrowed:
            self._writer_parked = None
            trio.lowlevel.reschedule(task)

    def _close_queue(self) -> None:
        """Accept nothing more; the writer ends once what is queued is written."""
        self._queue_closed = True
        self._wake_writer()

    def _written(self, size: int) -> None:
        self._queued_bytes -= size
        if self._queued_bytes <= self.max_queued_bytes:
            self._catch_up()

    def _catch_up(self) -> None:
        if self._writer_caught_up is not None:
            self._writer_caught_up.set()
            self._writer_caught_up = None

    async def _write_batch(self, batch: list[_Outgoing | OutgoingMessage]) -> None:
        for message in batch:
            if type(message) is not OutgoingMessage:
                break
        else:
            # Answers and notifications alone, as under load: handed over as they are.
            if len(batch) == 1:
                only: OutgoingMessage = batch[0]  # type: ignore[assignment] # as just told
                await self.transport.send(
                    only.data, related_request_id=only.related_request_id, final=only.final
                )
            else:
                await self.transport.send_many(batch)  # type: ignore[arg-type]
            return
        if len(batch) == 1 and not batch[0].suppressed:  # type: ignore[union-attr]
            # One of our own requests, alone: no batch to build.
            item: Any = batch[0]
            if not item.withdrawn:
                item.taken = True
                await self.transport.send(
                    item.data, related_request_id=item.related, final=item.final
                )
            return
        run: list[_Outgoing | OutgoingMessage] = []
        for item in batch:
            if type(item) is OutgoingMessage or not item.suppressed:
                run.append(item)
                continue
            if run:
                await self.transport.send_many(_take(run))
                run = []
            if not item.withdrawn:
                # After everything queued before it (a nested request's cancel, say), so a
                # transport ends the request's stream only once those are on it.
                assert item.related is not None
                self.transport.request_suppressed(item.related)
        if run:
            await self.transport.send_many(_take(run))

    async def flush(self, timeout: float) -> None:
        """Stop accepting messages and wait (bounded) until everything queued is written."""
        self._close_queue()
        with trio.move_on_after(timeout):
            await self._writer_done.wait()

    async def _ordered_loop(
        self, jobs: trio.MemoryReceiveChannel[Callable[[], Awaitable[None]]]
    ) -> None:
        async for job in jobs:
            try:
                await job()
            except Exception:
                logger.exception("notification callback failed")
            finally:
                self._ordered_pending -= 1

    def run_ordered(self, job: Callable[[], Awaitable[None]]) -> None:
        """Run ``job`` after every job queued before it, off the read loop."""
        if self._ordered_send is None:
            self._ordered_send, self._ordered_jobs = trio.open_memory_channel[
                Callable[[], Awaitable[None]]
            ](math.inf)
            self._start_ordered()
        self._ordered_send.send_nowait(job)
        self._ordered_pending += 1

    @property
    def ordered_pending(self) -> int:
        """How many jobs handed to :meth:`run_ordered` have not finished: with none, whatever
        the peer sent so far has been handled (a caller may skip waiting for its turn)."""
        return self._ordered_pending

    def _start_ordered(self) -> None:
        """Start the task of the ordered jobs, once there are some and :meth:`run` runs."""
        jobs = self._ordered_jobs
        if jobs is None or self._nursery is None:
            return
        self._ordered_jobs = None
        try:
            self._nursery.start_soon(self._ordered_loop, jobs)
        except RuntimeError:
            pass  # the session has ended: its jobs would never have run

    def _queue_message(self, data: bytes, related: RequestId | None, final: bool = False) -> None:
        """Queue a message nothing may withdraw (an answer, a notification): as the
        ``OutgoingMessage`` the transport is handed, with no record of ours."""
        if self._queue_closed:
            return  # the connection is shutting down
        if self._deliver is not None:
            self._deliver(data, related, final)
            return
        self._queue.append(OutgoingMessage(data, related, final))
        self._queued_bytes += len(data)
        if self._writer_parked is not None:
            self._wake_writer()

    def _enqueue(self, data: bytes, related: RequestId | None, final: bool = False) -> _Outgoing:
        """Queue one of our own requests, or the mark of a suppressed one: its record says
        whether it was taken, and lets it be withdrawn until it is."""
        if self._deliver is not None and not self._queue_closed:
            self._deliver(data, related, final)
            return _DELIVERED
        item = _Outgoing(data, related, final)
        if self._queue_closed:
            item.withdrawn = True  # the connection is shutting down
            return item
        self._queue.append(item)
        self._queued_bytes += len(data)
        if self._writer_parked is not None:
            self._wake_writer()
        return item

    # -- incoming requests ---------------------------------------------------------------------

    def _write_response(self, message: Message | None) -> None:
        if message is None:
            return
        assert isinstance(message, Response | ErrorResponse)
        self._queue_message(encode_response(message), message.id, final=True)

    def _on_request(self, request: Request, sink: Sink | None, principal: Any = None) -> None:
        record = self._admit(request, sink, principal)
        if record is not None:
            assert self._nursery is not None
            if sink is None:
                self._nursery.start_soon(_run_request, record, name=_REQUEST_TASK_NAME)
            else:
                self._nursery.start_soon(_run_in_batch, record, sink, name=_REQUEST_TASK_NAME)

    async def serve_one(
        self, request: Request, nursery: trio.Nursery, *, principal: Any = None
    ) -> None:
        """Be the engine of one request alone, and run it in the caller's task.

        For a connection that carries one request and ends with it (a modern or a stateless
        Streamable HTTP POST), over a transport that delivers (routes each message in memory):
        no read loop, no writer, and no task of the engine's own. ``nursery`` is the caller's,
        for whatever the handler starts there. The request runs under its own scope and is
        cancelled as any other (:meth:`cancel_incoming`); once it has settled, the engine is
        closed.
        """
        if self._deliver is None:
            raise TypeError("serve_one needs a transport that delivers (see Sender)")
        self._nursery = nursery
        try:
            record = self._admit(request, None, principal)
            if record is not None:
                await _run_request(record)
        finally:
            self._close(ConnectionClosed("the request has ended"))
            self._close_queue()

    def release(self) -> None:
        """Let go of the transport and the dispatcher, once nothing of this engine runs.

        Each may hold the engine in turn (a connection's ``session``; an HTTP session is its
        engine's transport), in a reference cycle that only the cycle collector would free:
        released, an engine made for one request is freed by reference counting as soon as
        its owner drops it. Whatever is sent afterwards (by a handler's context kept past its
        request) is dropped, as on any closed engine.
        """
        self._close_queue()
        self._deliver = None
        del self.transport, self.dispatcher

    def _admit(self, request: Request, sink: Sink | None, principal: Any) -> InFlight | None:
        """Route and register a request; or answer it at once (None) when it is refused.

        A request answered on its own (no ``sink``) is refused through ``_write_response``,
        looked up only then: the admitted ones, nearly all, make no bound method for it."""
        if request.method.startswith("notifications/"):
            self._refuse(
                request,
                sink,
                _error(request.id, METHOD_NOT_FOUND, "Method not found", request.method),
            )
            return None
        try:
            route = self.dispatcher.route(request, self)
        except ProtocolError as exc:
            self._refuse(request, sink, ErrorResponse(request.id, exc.error))
            return None
        record = InFlight(request, self, principal=principal, route=route)
        if route.register:
            if len(self._in_flight) >= self.max_in_flight:
                self._refuse(
                    request,
                    sink,
                    _error(
                        request.id,
                        INVALID_REQUEST,
                        "Invalid Request",
                        f"Invalid Request: more than {self.max_in_flight} requests in flight "
                        "on this connection",
                    ),
                )
                return None
            if request.id in self._in_flight:
                self._refuse(
                    request,
                    sink,
                    _error(
                        request.id,
                        INVALID_REQUEST,
                        "Invalid Request",
                        f"Invalid Request: request id {describe_id(request.id)} is already in "
                        "flight",
                    ),
                )
                return None
            self._in_flight[request.id] = record
        self._running += 1
        return record

    def _refuse(self, request: Request, sink: Sink | None, answer: ErrorResponse) -> None:
        if self.observer is not None:
            self.observer.refused(request, answer.error)
        (sink or self._write_response)(answer)

    def claim(self, request_id: RequestId) -> bool:
        """Whether ``request_id`` is free (not in flight); used by transports to refuse early."""
        return request_id not in self._in_flight

    def in_flight(self, request_id: RequestId) -> InFlight | None:
        return self._in_flight.get(request_id)

    def incoming(self) -> list[RequestId]:
        """The ids of the peer's requests in flight (a server's drain ends them)."""
        return list(self._in_flight)

    async def _answer_settled(self, record: InFlight, outcome: Message | None) -> None:
        """Write the answer a request settled with, or tell the transport it has none.

        From the request's own task when the writer is idle (nothing queued, nothing being
        written): one task hop fewer between a response and the wire, which is most of a
        sequential call's wait. Otherwise it is queued behind what the writer has, as ever."""
        if outcome is None:
            self._suppressed(record.id)
            return
        assert isinstance(outcome, Response | ErrorResponse)
        if (
            self._writer_parked is None
            or self._borrowed
            or self._queue
            or self._queue_closed
            or self._deliver is not None
        ):
            self._queue_message(encode_response(outcome), outcome.id, final=True)
            return
        self._borrowed = True
        try:
            await self.transport.send(
                encode_response(outcome), related_request_id=outcome.id, final=True
            )
        except _WRITE_ERRORS as exc:
            self._write_failed(exc)
        finally:
            self._borrowed = False
            if self._queue or self._queue_closed:
                self._wake_writer()  # what was queued meanwhile, or the end

    def _suppressed(self, request_id: RequestId) -> None:
        """Tell the transport, in order with the writes, that a request ended unanswered."""
        if self._deliver is not None:
            if not self._queue_closed:
                self.transport.request_suppressed(request_id)
            return
        self._enqueue(b"", request_id).suppressed = True

    def _settled(self, record: InFlight) -> None:
        course = record._course
        if course.__class__ is _Later and course is not _SETTLED:
            course.settled = True
        else:
            record._course = _SETTLED  # its route is needed no more
        rid = record.id
        if self._in_flight.get(rid) is record:
            del self._in_flight[rid]
        self._running -= 1
        if self._running == 0 and self._all_done is not None:
            self._all_done.set()
            self._all_done = None

    def cancel_incoming(
        self,
        request_id: RequestId,
        reason: str | None = None,
        *,
        error: ErrorObject | None = None,
        by: str = "local",
    ) -> bool:
        """Cancel an incoming request as ``notifications/cancelled`` would; with ``error``, it
        is answered with that error instead of nothing. ``by``: ``"peer"`` or ``"local"``."""
        record = self._in_flight.get(request_id)
        return record is not None and record.cancel(reason, error=error, by=by)

    # -- notifications -------------------------------------------------------------------------

    def _on_notification(self, note: Notification, principal: Any = None) -> None:
        params = note.params or {}
        if self.observer is not None:
            self.observer.notified(note)
        if note.method == "notifications/cancelled":
            rid = params.get("requestId")
            reason = params.get("reason")
            if is_valid_id(rid):
                self.cancel_incoming(rid, reason if isinstance(reason, str) else None, by="peer")
            return
        if note.method == "notifications/progress":
            token = params.get("progressToken")
            pending = self._progress.get(token) if is_valid_id(token) else None
            progress = params.get("progress")
            if (
                pending is not None
                and not pending.done
                and isinstance(progress, int | float)
                and not isinstance(progress, bool)
            ):
                pending.send_nowait(_Progress(params))
            return
        try:
            if principal is None:  # a dispatcher written before principals still works
                self.dispatcher.on_notification(note, self)
            else:
                self.dispatcher.on_notification(note, self, principal)
        except Exception:
            logger.exception("error handling %s", note.method)

    async def notify(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None:
        """Send a notification (it is queued in order; this never waits for the peer)."""
        self.notify_nowait(method, params, related_request_id=related_request_id)
        await trio.lowlevel.checkpoint()

    def notify_nowait(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None:
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        self._queue_message(encode(Notification(method, params)), related_request_id)

    # -- outgoing requests ---------------------------------------------------------------------

    def new_request_id(self) -> RequestId:
        """A fresh id for an outgoing request."""
        n = next(self._ids)
        return f"{self._id_prefix}{n}" if self._id_prefix else n

    def cancel(self, request_id: RequestId, reason: str | None = None) -> bool:
        """Cancel one of our own pending requests by id; its caller gets RequestCancelled."""
        pending = self._pending.get(request_id)
        if pending is None or pending.done:
            return False
        pending.send_nowait(_Cancelled(reason))
        return True

    async def request(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
        max_total: float | None = None,
        request_id: RequestId | None = None,
        related_request_id: RequestId | None = None,
        cancellable: bool = True,
    ) -> JSONObject:
        """Send a request and wait for its result, in the caller's task and scope.

        Cancellation of the caller: if the request was never written, nothing reaches the wire;
        if it was, ``notifications/cancelled`` follows it (unless ``cancellable`` is false, as
        for ``initialize``); if its response already arrived, nothing more is sent.
        """
        # A caller that is already cancelled must not put anything on the wire.
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        if self._input_closed is not None:
            raise ConnectionClosed(str(self._input_closed))  # no answer could arrive
        rid = self.new_request_id() if request_id is None else request_id
        if not is_valid_id(rid):
            raise ValueError("a request id must be a string or an integer")
        if rid in self._pending:
            raise ValueError(f"request id {describe_id(rid)} is already in use")
        pending = _Pending(method)
        body: JSONObject = dict(params) if params else {}
        track_progress = on_progress is not None or timeout is not None
        if track_progress:
            meta = body.get("_meta")
            body["_meta"] = {**(meta if isinstance(meta, dict) else {}), "progressToken": rid}
            self._progress[rid] = pending
        self._pending[rid] = pending
        item = self._enqueue(encode(Request(rid, method, body or None)), related_request_id)
        cancel_reason: str | None = None
        try:
            if timeout is None and max_total is None and on_progress is None:
                # The common case needs no timer scopes: just the answer.
                arrival = await pending.receive()
                assert not isinstance(arrival, _Progress)  # no progress token was sent
                return self._outcome(rid, arrival)
            with trio.move_on_after(math.inf if max_total is None else max_total):
                idle = trio.CancelScope()
                if timeout is not None:
                    idle.deadline = trio.current_time() + timeout
                with idle:
                    while True:
                        arrival = await pending.receive()
                        if isinstance(arrival, _Progress):
                            if timeout is not None:
                                idle.deadline = trio.current_time() + timeout
                            if on_progress is not None:
                                await _call_progress(on_progress, arrival.params)
                            continue
                        return self._outcome(rid, arrival)
            cancel_reason = "Request timed out"
            raise RequestTimeout(method, timeout, max_total)
        except RequestCancelled as exc:
            cancel_reason = exc.reason
            raise
        finally:
            self._pending.pop(rid, None)
            if self._progress.get(rid) is pending:
                del self._progress[rid]
            if not pending.done:
                pending.done = True
                if item.taken and cancellable:
                    self._send_cancel(rid, cancel_reason, related_request_id)
                else:
                    item.withdrawn = True

    @staticmethod
    def _outcome(rid: RequestId, outcome: _Outcome) -> JSONObject:
        """What the caller of a request gets for what came back for it."""
        match outcome:
            case _Answered(result):
                return result
            case _Failed(error):
                raise ProtocolError.from_error(error)
            case _Cancelled(reason):
                raise RequestCancelled(rid, reason)
            case _Closed(why):
                raise why
            case _Raised(error):
                try:
                    raise error
                finally:
                    del error, outcome  # held here, the error would hold this frame in a cycle
            case _:
                assert_never(outcome)

    def _send_cancel(self, rid: RequestId, reason: str | None, related: RequestId | None) -> None:
        params: JSONObject = {"requestId": rid}
        if reason is not None:
            params["reason"] = reason
        self._queue_message(encode(Notification("notifications/cancelled", params)), related)

    def _on_request_failed(self, failure: RequestFailed) -> None:
        """One of our requests failed in the transport: its caller gets the error, and the
        connection goes on (nothing is sent: the request never reached the peer's handler, or
        its answer cannot reach us)."""
        pending = self._pending.get(failure.request_id)
        if pending is None or not pending.settle(_Raised(failure.error)):
            logger.debug("ignoring a failure of unknown request %r", failure.request_id)

    def _on_response(self, message: Response | ErrorResponse) -> None:
        rid = message.id
        pending = self._pending.get(rid) if rid is not None else None
        outcome = (
            _Answered(message.result) if isinstance(message, Response) else _Failed(message.error)
        )
        if pending is None or not pending.settle(outcome):
            logger.debug("ignoring a response for unknown or finished request %r", rid)


# The task of a request an engine runs. Its frame is held by every request for as long as the
# request runs (tens of thousands may be parked on one connection), so it holds as little as can
# be: the record and its outcome. Everything else (entering the scope, calling the handler,
# leaving the scope, settling) is done by the plain functions below, whose frames are gone once
# they return; no ``with`` (it keeps the scope's bound ``__exit__`` on the stack) and no
# ``except ... as`` (its name is one more slot).


async def _run_request(record: InFlight) -> None:
    """Run a request answered on its own, in its task and scope, settle it and answer it."""
    outcome: Any  # the handler's result, then the answer: one slot for both
    try:
        outcome = await _started(record)
    except BaseException:
        outcome = _raised(record)
    else:
        outcome = _returned(record, outcome)
    # An engine runs only records it admitted, each with itself as their session.
    await record.session._answer_settled(record, outcome)  # type: ignore[union-attr]


async def _run_in_batch(record: InFlight, sink: Sink) -> None:
    """Run a request of a batch; its answer goes to the batch's collector."""
    try:
        result = await _started(record)
    except BaseException:
        outcome = _raised(record)
    else:
        outcome = _returned(record, result)
    sink(outcome)
    if outcome is None:
        record.session._suppressed(record.id)  # type: ignore[union-attr]


def _started(record: InFlight) -> Awaitable[Any]:
    """Enter the request's scope and call its handler (what it returns is awaited in the
    scope: whatever the handler starts lives and dies there)."""
    record.scope.__enter__()
    course = record._course  # an engine's record has a route (in a _Later once cancelled)
    route: Route = course.route if course.__class__ is _Later else course  # type: ignore[assignment]
    observer = record.session.observer  # type: ignore[union-attr]
    if observer is None:
        return route.handler(record)
    # An observer watches the result: it awaits the handler with the route's hooks applied.
    return observer.serve(_finishing(route), record)


def _returned(record: InFlight, value: Any) -> Message | None:
    """The handler returned ``value``: make it the result, leave the scope and settle."""
    course = record._course
    route: Route = course.route if course.__class__ is _Later else course  # type: ignore[assignment]
    returned = route.returned
    if returned is not None and record.session.observer is None:  # type: ignore[union-attr]
        try:
            value = returned(record, value)
        except BaseException as exc:
            return _left(record, exc)
    try:
        record.scope.__exit__(None, None, None)
    except BaseException as exc:
        return _settle(record, exc)
    return _settle(record, Response(record.id, value))


def _raised(record: InFlight) -> Message | None:
    """The handler raised (called in the ``except`` block that caught it): leave the scope
    with the error, and settle; an ``Exception`` the route's ``failed`` turns into a result
    is answered with that result instead."""
    exc = sys.exc_info()[1]
    assert exc is not None
    failed = record._route.failed  # type: ignore[union-attr] # an engine's record has one
    observed = record.session.observer is not None  # type: ignore[union-attr]
    if failed is not None and isinstance(exc, Exception) and not observed:
        try:
            result = failed(record, exc)
        except BaseException as error:
            return _left(record, error)
        del exc  # held here, the error's traceback would hold this frame in a cycle
        try:
            record.scope.__exit__(None, None, None)
        except BaseException as error:
            return _settle(record, error)
        return _settle(record, Response(record.id, result))
    return _left(record, exc)


def _left(record: InFlight, exc: BaseException) -> Message | None:
    """Leave the request's scope with ``exc``, and settle."""
    try:
        absorbed = record.scope.__exit__(type(exc), exc, exc.__traceback__)
    except BaseException as error:
        return _settle(record, error)
    return _settle(record, None if absorbed else exc)


def _finishing(route: Route) -> Handler:
    """``route``'s handler with its ``returned`` and ``failed`` applied: what an observer, or
    a caller with no engine, awaits for the result."""
    if route.returned is None and route.failed is None:
        return route.handler

    async def finished(record: InFlight) -> JSONObject:
        try:
            value = await route.handler(record)
        except Exception as exc:
            if route.failed is None:
                raise
            return route.failed(record, exc)
        return value if route.returned is None else route.returned(record, value)

    return finished


def _settle(record: InFlight, ended: Message | BaseException | None) -> Message | None:
    """Settle exactly once, synchronously: the answer to write (None: suppressed). A cancel
    that arrived first suppresses it (or answers with its error); what is not the handler's
    to answer (the connection going away) is raised, once the request is settled."""
    try:
        outcome = _error_outcome(record, ended) if isinstance(ended, BaseException) else ended
        course = record._course
        if course.__class__ is _Later and course.cancelled:
            outcome = _cancelled_outcome(course.route, record)  # type: ignore[arg-type]
    finally:
        record.session._settled(record)  # type: ignore[union-attr]
    return outcome


def _error_outcome(record: InFlight, exc: BaseException) -> Message | None:
    """Map a handler's exception to its answer; re-raise what is not the handler's."""
    only = single_error(exc)
    if only is None and all_cancelled(exc):
        raise exc  # the connection itself is going away
    if isinstance(only, RequestCancelled):
        if not record.cancel_requested:
            record._mark_cancelled(only.reason, None, None)
        return None
    if isinstance(only, ProtocolError):
        return ErrorResponse(record.id, only.error)
    if only is not None and not isinstance(only, Exception):
        raise exc  # Cancelled from an outer scope, KeyboardInterrupt, ...
    logger.error(
        "unhandled error in %s (request id %r)",
        record.method,
        record.id,
        exc_info=exc,
    )
    return ErrorResponse(record.id, ErrorObject.make(INTERNAL_ERROR))


async def run_alone(
    route: Route, record: InFlight, observer: Observer | None = None
) -> Message | None:
    """Run one request in the caller's task, with no engine, and settle it: its answer, or
    None when it is suppressed.

    For a request that is the whole of its connection (a modern Streamable HTTP POST): routed
    by its dispatcher, it runs under its own scope and settles exactly as a request of an
    engine does (``Engine._run_request``): a cancel (:meth:`InFlight.cancel`) that came first
    suppresses it, or answers it with its error; a handler's error becomes its answer, never
    leaking internals. What to do with the answer (:func:`encode_response`) is the caller's.
    ``observer`` watches it, as ``Engine.observer`` watches an engine's requests.
    """
    outcome: Message | None = None
    try:
        try:
            with record.scope:
                handler = _finishing(route)
                outcome = Response(
                    record.id,
                    await (
                        handler(record) if observer is None else observer.serve(handler, record)
                    ),
                )
        except BaseException as exc:
            outcome = _error_outcome(record, exc)
        if record.cancel_requested:
            outcome = _cancelled_outcome(route, record)
    finally:
        record.settled = True
    return outcome


def _cancelled_outcome(route: Route, record: InFlight) -> Message | None:
    """The answer of a request cancelled before it settled: none (suppressed), unless its
    route answers a cancel, or the engine cancelled it with an error."""
    if route.on_cancel is not None:
        return Response(record.id, route.on_cancel(record))
    if record.cancel_error is not None:
        return ErrorResponse(record.id, record.cancel_error)
    return None


def _take(items: list[_Outgoing | OutgoingMessage]) -> Iterator[OutgoingMessage]:
    """The messages of ``items`` still wanted, each marked written as the transport takes it:
    a message withdrawn while an earlier one is being written is never sent."""
    for item in items:
        if type(item) is OutgoingMessage:
            yield item
        else:
            record: _Outgoing = item  # type: ignore[assignment] # not an OutgoingMessage
            if not record.withdrawn:
                record.taken = True
                yield OutgoingMessage(record.data, record.related, record.final)


def all_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(all_cancelled(e) for e in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


async def _call_progress(callback: ProgressCallback, params: JSONObject) -> None:
    total = params.get("total")
    message = params.get("message")
    maybe = callback(
        params["progress"],
        total if isinstance(total, int | float) and not isinstance(total, bool) else None,
        message if isinstance(message, str) else None,
    )
    if inspect.isawaitable(maybe):
        await maybe
