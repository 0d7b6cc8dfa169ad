"""A request on a Streamable HTTP session, answered: fed to the session's engine, and what
the engine sends for it written back to its POST, as one JSON body or as SSE while it comes.

Two kinds of session end here. A handshake-era session (``Mcp-Session-Id``) runs its engine in
a task of its own; its request's stream is registered before the engine sees the request
(:func:`serve_on_session`), and an SSE answer can be resumed from the event store. A POST's own
engine (stateless, or a modern request a mount needs an engine for) runs its one request in
the POST's task, beside a watcher of the client (:func:`serve_alone`); nothing of it is kept.

The app (``McpHttpApp``) makes every check first (the session, its owner, the headers, the
request id); a session's GET stream is written by :func:`stream_sse` too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Protocol

import trio

from ..protocol._jsonrpc import ErrorResponse, Request, RequestId, parse
from ..protocol._sse import encode_event, event_id
from ..protocol._versions import V2025_11_25, is_at_least
from ..server._principal import Principal
from ._asgi import HttpError, Receive, Responder, Scope, Send, cancel_on_disconnect
from ._fleet import Fleet
from ._http_session import HttpSession, SessionKind
from ._modern import status_for
from ._modern_post import _DISCONNECT_GRACE, _on_first_yield
from ._options import HttpOptions
from ._sessions import SessionRegistry
from ._sse_writer import ListenedEvents, write_events
from ._streams import EventStream, Listener

#: The checkpoints a POST waits for a task that is already runnable to take its step: two, because
#: trio runs the tasks of a scheduling round in either order. An SSE response waits so, before its
#: first write, for a request about to end; a cancel's POST, for the request it cancelled.
PATIENCE = 2


class SessionPostHost(Responder, Protocol):
    """What answering a request on a session needs of its app."""

    @property
    def options(self) -> HttpOptions: ...
    @property
    def registry(self) -> SessionRegistry: ...
    @property
    def fleet(self) -> Fleet[HttpSession] | None: ...


async def serve_on_session(
    app: SessionPostHost,
    scope: Scope,
    receive: Receive,
    send: Send,
    session: HttpSession,
    request: Request,
    principal: Principal | None,
) -> None:
    """Feed one request to its session's engine and answer this POST with what it sends.

    Every POST that carries a request on a session (``Mcp-Session-Id``) ends here, once its
    caller has picked the session and made its checks; a POST's own engine is served by
    :func:`serve_alone`. The request's stream is registered and listened to before the
    engine sees the request, so nothing the engine sends for it can be missed, and ``feed``
    takes no checkpoint, so the engine's routing and this stream cannot disagree. The
    request carries the principal of this POST's own token (``ctx.auth``), whoever opened
    the session. The reply:

    - the ``initialize`` that opens a session: once complete, with the session id only if
      it succeeded (:func:`_answer_initialize`);
    - JSON mode: the response alone, once the request ends (:func:`_answer_json`);
    - otherwise SSE as the events come, which the client can resume (a priming event id
      first, from 2025-11-25); a client that goes away leaves the request running.
    """
    stream, events = _begin(app, session, request)
    try:
        session.engine.feed(request, principal=principal)
        if request.method == "initialize":
            items = await _ended(stream, events)
            stream.delivered()  # answered whole, at once: there is nothing to resume
            await _answer_initialize(app, scope, send, session, items, request.id)
        elif app.options.json_response:
            items = await _ended(stream, events)
            stream.delivered()  # a JSON response carries no event id to resume from
            await _answer_json(app, scope, send, stream, items)
        else:
            prime = _priming(session, stream)
            await stream_sse(app, scope, receive, send, stream, events, prime)
    finally:
        _end(app, session, stream, events)


async def serve_alone(
    app: SessionPostHost,
    scope: Scope,
    receive: Receive,
    send: Send,
    session: HttpSession,
    request: Request,
    principal: Principal | None,
) -> None:
    """Serve the one request of this POST's own engine (modern, stateless) in this task.

    The engine runs the request right here (``Engine.serve_one``): no engine task and no
    writer. A watcher beside it sees the client go away, which is the request's cancel.
    The answer is written once the request has ended (one JSON object, or an SSE body of
    its one event), unless a notification comes first: a task of this POST then streams
    SSE from that event on, while the request runs. Nothing is stored: nothing of a POST's
    own engine can be resumed.
    """
    stream, events = _begin(app, session, request)
    app.registry.posts.add(session)  # so that a drain can end its request
    try:
        async with trio.open_nursery() as nursery:
            watcher = _Watcher(receive, nursery, session, request.id)

            def stream_now() -> None:
                nursery.start_soon(
                    _stream_alone, app, scope, send, stream, events, nursery, watcher
                )

            session.on_event = stream_now
            await _on_first_yield(
                session.engine.serve_one(request, nursery, principal=principal),
                watcher.start,
            )
            if session.on_event is not None:  # nothing was streamed: answer it whole
                session.on_event = None
                await _answer_alone(app, scope, send, session, stream, events)
                _wind_down(nursery, ended=True, own=watcher.running)
    finally:
        app.registry.posts.discard(session)
        _end(app, session, stream, events)
        session.release()


def _begin(
    app: SessionPostHost, session: HttpSession, request: Request
) -> tuple[EventStream, Listener]:
    """Register a request's stream, and listen to it, before the engine sees the request."""
    if session.closing:
        # A session winding down takes nothing new (its engine may be gone); the same
        # refusal as an expired one. No checkpoint between here and the feed.
        raise HttpError(404, "Session not found", request_id=request.id)
    stream = session.new_request_stream(request.id)
    events = stream.attach()
    session.busy()
    app.registry.request_started()
    return stream, events


def _end(
    app: SessionPostHost,
    session: HttpSession,
    stream: EventStream,
    events: Listener,
) -> None:
    stream.detach(events)
    session.idle()
    app.registry.request_ended()


async def _answer_alone(
    app: SessionPostHost,
    scope: Scope,
    send: Send,
    session: HttpSession,
    stream: EventStream,
    events: Listener,
) -> None:
    """The whole answer of a POST's own request, once it has ended. A modern request's
    status follows its error code; an empty 202 when it was cancelled with no response
    (the client went away), never the 500 an ASGI server answers for an app that sent
    nothing."""
    items = _drain_now(events)
    stream.delivered()
    if not stream.responded or not items:
        await app.respond(scope, send, 202)
    elif session.kind is SessionKind.MODERN:
        data = items[-1][1]
        await app.respond(scope, send, status_for(_error_code(data)), data)
    elif app.options.json_response:
        await app.respond(scope, send, 200, items[-1][1])
    else:
        await send_sse(app, scope, send, items, ())


async def _stream_alone(
    app: SessionPostHost,
    scope: Scope,
    send: Send,
    stream: EventStream,
    events: Listener,
    done: trio.Nursery,
    watcher: _Watcher,
) -> None:
    """SSE for a POST's own request whose notifications come before its response, as they
    come; then the POST winds down (``done``, its nursery). A cut or a client gone cancels
    the request, which nobody could read any more."""
    ended = False
    try:
        await app.sse_start(scope, send)
        ended = await _relay(app, send, stream, events)
    finally:
        _wind_down(done, ended=ended, own=1 + watcher.running)


async def _answer_initialize(
    app: SessionPostHost,
    scope: Scope,
    send: Send,
    session: HttpSession,
    items: list[tuple[str, bytes]],
    request_id: RequestId,
) -> None:
    """The session is kept, and its id sent, only once its ``initialize`` succeeded."""
    if not session.connection.state.initialized:
        # Refused (bad params): no session is kept.
        session.close()
        data = items[-1][1] if items else b""
        await app.respond(scope, send, 200, data)
        return
    if app.fleet is not None:
        await app.fleet.initialized(session, request_id)
    app.registry.keep(session)
    headers = [(b"mcp-session-id", session.id.encode())]
    if app.options.json_response:
        await app.respond(scope, send, 200, items[-1][1], headers)
        return
    await send_sse(app, scope, send, items, headers)


async def _answer_json(
    app: SessionPostHost,
    scope: Scope,
    send: Send,
    stream: EventStream,
    items: list[tuple[str, bytes]],
) -> None:
    """JSON mode: the response alone; 202 with no body when the request was cancelled."""
    if not stream.responded or not items:
        await app.respond(scope, send, 202)
        return
    await app.respond(scope, send, 200, items[-1][1])


async def send_sse(
    app: SessionPostHost,
    scope: Scope,
    send: Send,
    items: list[tuple[str, bytes]],
    headers: Iterable[tuple[bytes, bytes]],
) -> None:
    """A complete SSE response whose events are already known (:func:`send_whole`)."""
    body = b"".join(encode_event(data, event="message", id=event) for event, data in items)
    await send_whole(app, scope, send, body, headers)


async def send_whole(
    app: SessionPostHost,
    scope: Scope,
    send: Send,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]],
) -> None:
    """An SSE response known whole when it starts: with its ``Content-Length``, so that no
    hop frames it in chunks. The ASGI server writes it with one write fewer (no last chunk),
    and a proxy in front reads and forwards one fewer: through nginx, a fifth of nginx's CPU
    per call. A client already gone is no error: there is nobody left to answer."""
    await app.sse_start(scope, send, headers, length=len(body))
    try:
        await send({"type": "http.response.body", "body": body})
    except OSError:
        pass


async def stream_sse(
    app: SessionPostHost,
    scope: Scope,
    receive: Receive,
    send: Send,
    stream: EventStream,
    events: Listener,
    prime: str | None,
    headers: Iterable[tuple[bytes, bytes]] = (),
    *,
    first: Iterable[tuple[str, bytes]] = (),
) -> None:
    """Relay a stream's events until it ends, its listener is cut (replaced, or too far
    behind), or the client goes; ``first`` (replayed from the store) before them.

    The stream itself outlives a client that goes away: it waits for a resume. A watcher
    of ``receive`` sees the client go, only while there is something to wait for.
    """
    # The priming event, then what was replayed: written first, with whatever events are
    # ready by then (alone if none is, so that a client can resume a slow request).
    prefix = b"".join(
        [
            encode_event(b"", id=prime, retry=app.options.retry_ms) if prime else b"",
            *(encode_event(data, event="message", id=event) for event, data in first),
        ]
    )
    for _ in range(PATIENCE):
        # A request about to be answered (already runnable) gets a scheduling round or two
        # to end: then its whole stream goes in one write with the priming event, not one
        # write for each, and it needs no watcher.
        if stream.finished:
            break
        await trio.lowlevel.checkpoint()
    if stream.finished:  # nothing left to wait for: the whole stream in one response
        await send_whole(app, scope, send, prefix + _taken(stream, events), headers)
        return
    await app.sse_start(scope, send, headers)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_on_disconnect, receive, nursery.cancel_scope)
        _wind_down(nursery, ended=await _relay(app, send, stream, events, prefix), own=1)


def _relay(
    app: SessionPostHost, send: Send, stream: EventStream, events: Listener, first: bytes = b""
) -> Awaitable[bool]:
    """Write a stream's events as SSE until its end or a cut, ``first`` (already encoded)
    before them; True once the end was written (the response is complete)."""
    source = ListenedEvents(stream, events)
    return write_events(send, source, app.options.keepalive_interval, first)


def _taken(stream: EventStream, events: Listener) -> bytes:
    """Every event of a finished stream, encoded; the stream is delivered (or was cut)."""
    source = ListenedEvents(stream, events)
    parts: list[bytes] = []
    ended = False
    while not ended:
        more, ended = source.take()
        parts.append(more)
    return b"".join(parts)


def _priming(session: HttpSession, stream: EventStream) -> str | None:
    """A priming event id, sent first so that a client can resume the stream (2025-11-25)."""
    if is_at_least(session.connection.state.protocol_version, V2025_11_25):
        return event_id(session.id, stream.key, stream.seq)
    return None


class _Watcher:
    """The disconnect watcher of a POST's own request (:func:`_watch_disconnect`), started
    once the request first yields (:func:`_on_first_yield`). ``running`` until it ends: a
    watcher that already saw the end of a complete response is no task of the POST's any more
    (counting it would leave a handler's task, a proxy's, say, running for the whole grace)."""

    __slots__ = ("_nursery", "_receive", "_request_id", "_session", "running")

    def __init__(
        self, receive: Receive, nursery: trio.Nursery, session: HttpSession, request_id: RequestId
    ) -> None:
        self._receive = receive
        self._nursery = nursery
        self._session = session
        self._request_id = request_id
        self.running = False

    def start(self) -> None:
        self.running = True
        nursery = self._nursery
        nursery.start_soon(
            _watch_disconnect,
            self,
            self._receive,
            nursery.cancel_scope,
            self._session,
            self._request_id,
        )


async def _watch_disconnect(
    watcher: _Watcher,
    receive: Receive,
    scope: trio.CancelScope,
    session: HttpSession,
    rid: RequestId,
) -> None:
    """:func:`cancel_on_disconnect` for a POST's own engine: a disconnect once its request has
    ended cancels nothing, for hypercorn reports the end of a complete response as a
    disconnect too."""
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    finally:
        watcher.running = False
    if session.has_ended(rid):
        return
    session.engine.cancel_incoming(rid, "the client closed the connection", by="peer")
    scope.cancel()


def _wind_down(nursery: trio.Nursery, *, ended: bool, own: int) -> None:
    """End a POST's nursery once its response is written (``ended``) or given up.

    A complete response lets its disconnect watcher end by itself: an ASGI server reports the
    end of a complete response as a disconnect (hypercorn does so before the last ``send``
    returns), which costs less than cancelling the watcher. Only when the response was cut,
    or something more than the POST's ``own`` tasks (its watcher, its stream's task) is left in
    the nursery (a handler's), is it cancelled; and a server that never reports the end is
    waited for only ``_DISCONNECT_GRACE``.
    """
    left = len(nursery.child_tasks)
    if not ended or left > own:
        nursery.cancel_scope.cancel()
    elif left:
        nursery.cancel_scope.deadline = trio.current_time() + _DISCONNECT_GRACE


def _error_code(data: bytes) -> int | None:
    """The error code of an encoded response of ours; None for a result. A result whose body
    does not even contain the key ``"error"`` is not parsed again."""
    if b'"error"' not in data:
        return None
    parsed = parse(data)
    return parsed.error.code if isinstance(parsed, ErrorResponse) else None


async def _ended(stream: EventStream, events: Listener) -> list[tuple[str, bytes]]:
    """Everything a request's stream carried, once the request has ended."""
    await stream.done.wait()
    return _drain_now(events)


def _drain_now(events: Listener) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    while True:
        try:
            item = events.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return out
        if item is None:
            return out
        out.append(item)
