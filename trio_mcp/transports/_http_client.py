"""Streamable HTTP, client side (handshake era), on httpx.

Each outgoing message is its own POST in its own task, so a long SSE response never holds up
another send. Whatever arrives on any response stream (a POST's SSE or JSON body, a resumed
stream, the standalone GET stream) goes into one queue that the engine reads. The transport
knows methods only where HTTP forces it to: the session id and protocol version learned from
``initialize``, keeping a cancel behind its request, which requests may be repeated after the
server forgets the session, and (modern era) the headers that repeat a request's method, name
and the tool arguments its ``tools/list`` entry marks with ``x-mcp-header``.

A request the server sends on one of our request's streams (an elicitation, a sampling or a
roots request nested in a tool call) belongs to that request: when we cancel it, the nested
requests still unanswered are cancelled here too, as if the server had said so. The server's
own notice may come later than the end of the stream we close, or never.

Errors are turned into answers, never into hangs: an HTTP error, a lost connection or a bare
202 (no response will come) on a request POST becomes a JSON-RPC error response for that
request id (the caller gets ``ProtocolError``); only a failed ``initialize``, or a session that
cannot be re-established, ends the whole connection.
"""

from __future__ import annotations

import http
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

import attrs
import httpx
import trio

from ..protocol._errors import ConnectionClosed, MCPError
from ..protocol._headers import modern_headers, tool_param_headers
from ..protocol._jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    NO_DATA,
    SESSION_EXPIRED,
    Batch,
    ErrorObject,
    ErrorResponse,
    JSONObject,
    Notification,
    Parsed,
    Request,
    RequestId,
    Response,
    encode,
    is_valid_id,
    parse,
)
from ..protocol._methods import SAFE_TO_REPEAT
from ..protocol._sse import SSEError, SSEParser
from ._transport import BaseTransport, RequestFailed

logger = logging.getLogger("trio_mcp.http.client")

#: How long a ``notifications/cancelled`` waits for its request's POST to be answered, so the
#: cancel does not reach the server first (the server would ignore it and run the request).
CANCEL_ORDER_TIMEOUT = 5.0
#: How long the requests of a new session wait for its standalone GET stream to open (once a
#: session: a server slow to answer the GET delays its first requests by this much at most).
LISTEN_WAIT = 1.0
#: The pause before a request lost to a connection reset is sent again (a breath for a busy
#: server, well below any request's timeout).
RESEND_DELAY = 0.05
#: The reconnection delay when the server sent no ``retry`` field (SSE default).
DEFAULT_RETRY = 1.0
#: Upper bound on any reconnection delay, whatever the server asks for.
MAX_RETRY_DELAY = 60.0
#: A request's broken stream is resumed this many times in a row without getting anything.
MAX_RESUME_ATTEMPTS = 3
#: The standalone stream gives up after this many failed connections in a row.
MAX_LISTEN_FAILURES = 5
#: The largest JSON body or SSE event accepted; a bigger one is a broken stream.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: How much of an error response's body is read to look for a JSON-RPC error.
MAX_ERROR_BODY = 64 * 1024
#: After a request's response arrived, how long its stream may take to end cleanly (so the
#: connection goes back to the pool) before we hang up.
LINGER_AFTER_RESPONSE = 1.0

_SESSION_ID = re.compile(r"[\x21-\x7e]+")
#: Headers the transport manages; a user's value for them would break the protocol.
_MANAGED = ("mcp-session-id", "mcp-protocol-version", "last-event-id")


class SessionExpired(ConnectionClosed):
    """The server ended our session (HTTP 404) and a new one could not be established.

    When the new session *is* established the connection goes on: safe requests are repeated
    transparently, and a request that was not repeated fails alone with a JSON-RPC error of
    code :data:`SESSION_EXPIRED` (-32001, message "Session expired: ..."), which the caller sees
    as ``ProtocolError``.
    """


# -- the transport -------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Post:
    """One outgoing message and, for a request, what is known about its answer."""

    data: bytes
    request_id: RequestId | None = None
    method: str | None = None
    params: JSONObject | None = None
    #: Set once the POST got its response headers, or failed: a cancel waits for this.
    sent: trio.Event = attrs.field(factory=trio.Event)
    #: For a ``notifications/cancelled``: the request POST it must not overtake.
    cancels: _Post | None = None
    answered: bool = False
    cancelled: bool = False
    retried: bool = False
    #: Waiting for the standalone stream to open (see ``_until_listening``).
    gated: bool = False
    #: For ``notifications/initialized``: what the requests posted after it wait for, opened by
    #: the standalone stream it starts (or when it fails).
    opens: trio.Event | None = None
    #: The server's requests that came on this request's stream and are not answered yet.
    nested: set[RequestId] = attrs.field(factory=set)
    #: Covers the request's whole exchange: its cancel ends it (for a modern request, closing
    #: the stream is the cancel itself).
    reading: trio.CancelScope = attrs.field(factory=trio.CancelScope)


@attrs.define
class _StreamState:
    """Where a stream is, across its reconnections."""

    last_event_id: str | None = None
    retry: float = DEFAULT_RETRY
    delivered: int = 0


class _Unavailable(Exception):
    """The session cannot be used any more; carries the reason."""


def _media_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.split(";")[0].strip().lower()


def _reason(response: httpx.Response) -> str:
    if response.reason_phrase:
        return response.reason_phrase
    try:
        return http.HTTPStatus(response.status_code).phrase
    except ValueError:
        return "Unknown"


def _error_response(rid: RequestId, code: int, message: str, data: Any = NO_DATA) -> ErrorResponse:
    return ErrorResponse(rid, ErrorObject.make(code, message, data=data))


async def _read_limited(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or None if it is larger than ``limit``."""
    chunks = bytearray()
    async for chunk in response.aiter_bytes():
        chunks += chunk
        if len(chunks) > limit:
            return None
    return bytes(chunks)


class StreamableHttpTransport(BaseTransport):
    """The client end of a Streamable HTTP connection; an engine transport.

    Build it with :func:`open_http_transport`. ``session_id`` and ``protocol_version`` are
    learned from the ``initialize`` exchange and sent on every later request.
    """

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        *,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.url = url
        self._client = client
        self._auth = auth
        self._nursery: trio.Nursery | None = None
        self._stopped = trio.Event()
        user = httpx.Headers(headers or {})
        for name in _MANAGED:
            user.pop(name, None)
        self._user_headers = user
        # The client's own connect/write/pool limits, but no read limit: an SSE stream may be
        # idle for as long as a tool runs. The engine's call timeouts bound the waits.
        base = client.timeout
        self._timeout = httpx.Timeout(
            connect=base.connect, read=None, write=base.write, pool=base.pool
        )
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._init_id: RequestId | None = None
        #: The HTTP status the ``initialize`` POST got (400, 404, 405: an HTTP+SSE server).
        self.initialize_status: int | None = None
        self._init_params: JSONObject | None = None
        self._posts: dict[RequestId, _Post] = {}
        #: The server's unanswered requests that came on one of ours' stream -> that request.
        self._nested: dict[RequestId, _Post] = {}
        # Parsed is a forward-referenced alias, so the channel's type is given by annotation.
        self._in_send: trio.MemorySendChannel[Parsed | Batch | RequestFailed | BaseException]
        self._in_receive: trio.MemoryReceiveChannel[Parsed | Batch | RequestFailed | BaseException]
        self._in_send, self._in_receive = trio.open_memory_channel(math.inf)
        self._reinit_lock = trio.Lock()
        self._reinits = 0
        self._listener: trio.CancelScope | None = None
        #: Set once the session's standalone stream answered (or cannot): requests wait for it.
        self._listening: trio.Event | None = None
        self._closed = False
        #: What each listed tool mirrors into ``Mcp-Param-*`` headers, learned from the
        #: ``tools/list`` results that pass through here (a ``tools/call`` must repeat them).
        self.tool_headers: dict[str, dict[tuple[str, ...], str]] = {}

    # -- running ---------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the tasks of the POSTs and streams until :meth:`aclose`."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._closed = True
            self._stopped.set()

    def _start(self, job: Callable[..., Awaitable[None]], *args: Any) -> None:
        if self._nursery is None:
            raise ConnectionClosed("the HTTP transport is not running")
        self._nursery.start_soon(job, *args)

    # -- the engine's side -----------------------------------------------------------------------

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        """Start the POST of one message and return; its answer arrives through receive().

        The routing hints are the server's concern: every message is its own POST here.
        """
        if self._closed:
            raise ConnectionClosed("the HTTP transport is closed")
        message = parse(data)
        post = _Post(data)
        if isinstance(message, Request):
            post.request_id, post.method, post.params = message.id, message.method, message.params
            self._posts[message.id] = post
            if message.method == "initialize":
                self._init_id, self._init_params = message.id, message.params
        elif isinstance(message, Notification):
            post.method = message.method
            if message.method == "notifications/initialized" and self.session_id is not None:
                post.opens = self._listening = trio.Event()
            if message.method == "notifications/cancelled":
                target = (message.params or {}).get("requestId")
                request = self._posts.get(target) if is_valid_id(target) else None
                if request is not None:
                    request.cancelled = True
                    post.cancels = request
                    self._cancel_nested(request)
        elif isinstance(message, Response | ErrorResponse):
            self._forget_nested(message.id)
        self._start(self._run_post, post)
        await trio.lowlevel.checkpoint()

    async def receive(self) -> Parsed | Batch | RequestFailed:
        item = await self._in_receive.receive()
        if isinstance(item, BaseException):
            raise item
        return item

    def _put(self, item: Parsed | Batch | RequestFailed | BaseException) -> None:
        try:
            self._in_send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # closing: nobody reads any more

    def _fail(self, why: ConnectionClosed) -> None:
        """End the connection: the engine's next receive() raises ``why``."""
        self._put(why)

    def _deliver(self, data: bytes | str, on: _Post | None = None) -> None:
        """Hand one message (or batch) from the server to the engine, noting responses, and
        the requests that came on the stream of ``on`` (one of ours)."""
        parsed = parse(data)
        items = parsed.items if isinstance(parsed, Batch) else (parsed,)
        nested: list[RequestId] = []
        for item in items:
            if isinstance(item, Response | ErrorResponse) and item.id is not None:
                self._on_response(item)
            elif on is not None and isinstance(item, Request):
                nested.append(item.id)
            elif isinstance(item, Notification) and item.method == "notifications/cancelled":
                self._forget_nested((item.params or {}).get("requestId"))
        self._put(parsed)
        if on is not None:
            for rid in nested:
                on.nested.add(rid)
                self._nested[rid] = on
            if on.cancelled:  # it came after our cancel: it is over before it starts
                self._cancel_nested(on)

    def _forget_nested(self, rid: object) -> None:
        """A nested request of the server's is over (answered, or cancelled by the server)."""
        parent = self._nested.pop(rid, None) if is_valid_id(rid) else None
        if parent is not None:
            parent.nested.discard(rid)

    def _cancel_nested(self, parent: _Post) -> None:
        """The server's requests nested in ``parent``, which we cancel, end with it: their
        handlers are cancelled as by the server's own ``notifications/cancelled``."""
        for rid in sorted(parent.nested, key=str):
            self._nested.pop(rid, None)
            params: JSONObject = {
                "requestId": rid,
                "reason": "the request it was part of was cancelled",
            }
            self._put(Notification("notifications/cancelled", params))
        parent.nested.clear()

    def _on_response(self, message: Response | ErrorResponse) -> None:
        if message.id == self._init_id and self._init_id is not None:
            self._init_id = None
            if isinstance(message, Response):
                version = message.result.get("protocolVersion")
                if isinstance(version, str):
                    self.protocol_version = version
        post = self._posts.get(message.id) if message.id is not None else None
        if post is not None:
            post.answered = True
            if post.method == "tools/list" and isinstance(message, Response):
                self._learn_tool_headers(message.result)

    def _learn_tool_headers(self, result: JSONObject) -> None:
        tools = result.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                continue
            try:
                mirrored = tool_param_headers(tool.get("inputSchema"))
            except ValueError:
                mirrored = {}  # an unusable tool: the client drops it from the list
            if mirrored:
                self.tool_headers[name] = mirrored
            else:
                self.tool_headers.pop(name, None)

    def _answer(self, post: _Post, code: int, message: str, data: Any = NO_DATA) -> None:
        """Fail one request (not the connection) with a JSON-RPC error the caller will see."""
        if post.request_id is None or post.answered:
            return
        post.answered = True
        self._put(_error_response(post.request_id, code, message, data))

    # -- headers ---------------------------------------------------------------------------------

    def _headers(
        self,
        accept: str,
        *,
        session_id: str | None,
        json_body: bool = False,
        last_event_id: str | None = None,
    ) -> httpx.Headers:
        headers = self._user_headers.copy()
        headers["accept"] = accept
        if json_body:
            headers["content-type"] = "application/json"
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        if last_event_id:
            headers["last-event-id"] = last_event_id
        return headers

    def _stream(
        self, method: str, headers: httpx.Headers, content: bytes | None = None
    ) -> AbstractAsyncContextManager[httpx.Response]:
        # Never follow a redirect: nothing is sent to any address but the one we were given.
        return self._client.stream(
            method,
            self.url,
            content=content,
            headers=headers,
            timeout=self._timeout,
            follow_redirects=False,
            auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT,
        )

    # -- POST ------------------------------------------------------------------------------------

    async def _run_post(self, post: _Post) -> None:
        target = post.cancels
        if target is not None and modern_headers(target.method, target.params):
            # A modern request is cancelled by closing its response stream; there is no
            # notification to post (and no session it could belong to).
            target.reading.cancel()
            return
        try:
            if post.cancels is not None:
                with trio.move_on_after(CANCEL_ORDER_TIMEOUT):
                    await post.cancels.sent.wait()
            if post.request_id is not None:
                await self._until_listening(post)
            with post.reading:
                await self._post(post)
        finally:
            post.sent.set()
            if post.opens is not None:
                post.opens.set()  # it started no stream: nothing to wait for
            if post.request_id is not None and self._posts.get(post.request_id) is post:
                del self._posts[post.request_id]
            for rid in post.nested:  # its exchange is over: no cancel of ours can follow
                self._nested.pop(rid, None)
            post.nested.clear()
            if post.cancels is not None:
                # The cancel went out: the cancelled request's stream is of no more use.
                post.cancels.reading.cancel()

    async def _post(self, post: _Post) -> None:
        session_id = self.session_id
        expired = False
        try:
            headers = self._headers(
                "application/json, text/event-stream", session_id=session_id, json_body=True
            )
            headers.update(modern_headers(post.method, post.params, self.tool_headers))
            async with self._stream("POST", headers, post.data) as response:
                post.sent.set()
                if post.method == "initialize":
                    self.initialize_status = response.status_code
                if post.method == "initialize" and response.is_success:
                    sid = response.headers.get("mcp-session-id")
                    if sid is not None and not _SESSION_ID.fullmatch(sid):
                        self._answer(post, INTERNAL_ERROR, "the server sent an invalid session id")
                        return
                    self.session_id = sid
                if (
                    response.status_code == 404
                    and session_id is not None
                    and post.request_id is not None
                    and post.method != "initialize"
                ):
                    # A 404 means the session is gone, unless its JSON-RPC body says the
                    # method is unknown (how a 2026-07-28 server answers one).
                    body = await _read_limited(response, MAX_ERROR_BODY)
                    refusal = parse(body) if body else None
                    if (
                        isinstance(refusal, ErrorResponse)
                        and refusal.error.code == METHOD_NOT_FOUND
                    ):
                        self._answer_http_error(post, response, body)
                    else:
                        expired = True
                else:
                    await self._on_post_response(post, response)
        except httpx.HTTPError as exc:
            if self._resend_after_reset(post, exc):
                post.retried = True
                await trio.sleep(RESEND_DELAY)
                await self._post(post)
                return
            post.sent.set()
            if post.request_id is None:
                logger.debug("POST of a message failed: %r", exc)
                return
            if post.method == "initialize":
                self._fail(ConnectionClosed(f"cannot reach {self.url}: {exc!r}"))
                return
            self._answer(
                post,
                INTERNAL_ERROR,
                f"HTTP request failed: {type(exc).__name__}: {exc}",
            )
            return
        except MCPError as exc:
            if isinstance(exc, ConnectionClosed):
                raise
            # The authorization of this POST failed (an ``OAuthError`` from the ``httpx.Auth``:
            # a refresh refused, a grant revoked, the user declined): this request fails with
            # it, and the connection goes on; the next request authorizes afresh.
            post.sent.set()
            self._auth_failed(post, exc)
            return
        if expired:
            await self._session_expired(post, session_id)

    @staticmethod
    def _resend_after_reset(post: _Post, exc: httpx.HTTPError) -> bool:
        """Whether a POST the connection lost before any answer (``sent`` is set once its
        response headers came) is sent again, once.

        A busy server or a proxy may reset a connection it accepted (a full backlog, a worker
        restarting, a pooled connection closed under us): nothing says the request ran, so
        only a request that changes nothing is sent again, over a new connection.
        """
        return (
            isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError)
            and not isinstance(exc, httpx.ConnectError)
            and not post.sent.is_set()
            and post.method in SAFE_TO_REPEAT
            and not post.retried
            and not post.cancelled
        )

    async def _on_post_response(self, post: _Post, response: httpx.Response) -> None:
        status = response.status_code
        if not response.is_success:
            body = await _read_limited(response, MAX_ERROR_BODY)
            if post.request_id is None:
                logger.debug("the server refused a message: HTTP %s", status)
                if post.method == "notifications/initialized":
                    logger.warning("the server refused notifications/initialized: HTTP %s", status)
                return
            self._answer_http_error(post, response, body)
            return
        if post.request_id is None:
            await _read_limited(response, MAX_ERROR_BODY)
            if post.method == "notifications/initialized":
                self._start_listener(post.opens)
                post.opens = None
            return
        if status == 202:
            # A request's POST is answered with its response (JSON or SSE), never elsewhere:
            # a bare 202 means no answer is coming (a server that dropped the request as it
            # stopped, say). Unless we cancelled it ourselves, its caller must hear so.
            await _read_limited(response, MAX_ERROR_BODY)
            if not post.cancelled:
                self._answer(
                    post,
                    INTERNAL_ERROR,
                    "the server accepted the request (HTTP 202) but will send no response to it",
                    {"httpStatus": status},
                )
            return
        media = _media_type(response)
        if media == "text/event-stream":
            await self._request_stream(post, response)
        elif media == "application/json":
            body = await _read_limited(response, MAX_MESSAGE_BYTES)
            if body is None:
                self._answer(post, INTERNAL_ERROR, "the server's response is too large")
                return
            self._deliver(body)
            if not post.answered:
                self._answer(post, INTERNAL_ERROR, "the server's reply held no response")
        else:
            self._answer(
                post,
                INTERNAL_ERROR,
                f"the server replied with unexpected content type {media or 'none'!r}",
            )

    def _auth_failed(self, post: _Post, error: MCPError) -> None:
        if post.request_id is None:
            logger.warning("could not authorize the message %s: %s", post.method, error)
        elif not post.answered:
            post.answered = True
            self._put(RequestFailed(post.request_id, error))

    def _answer_http_error(self, post: _Post, response: httpx.Response, body: bytes | None) -> None:
        assert post.request_id is not None
        if body:
            parsed = parse(body)
            if isinstance(parsed, ErrorResponse):
                post.answered = True
                self._put(ErrorResponse(post.request_id, parsed.error))
                return
        status = response.status_code
        self._answer(
            post,
            INTERNAL_ERROR,
            f"HTTP {status}: {_reason(response)}",
            {"httpStatus": status},
        )

    # -- SSE streams -----------------------------------------------------------------------------

    async def _pump(
        self,
        response: httpx.Response,
        state: _StreamState,
        stop: Callable[[], bool] = lambda: False,
        on: _Post | None = None,
    ) -> None:
        """Deliver a stream's events until it ends or breaks (a break is not an error here);
        ``on``: the request whose stream it is."""
        parser = SSEParser(last_event_id=state.last_event_id, max_event_bytes=MAX_MESSAGE_BYTES)
        linger: trio.CancelScope | None = None
        try:
            with trio.CancelScope() as linger:
                async for chunk in response.aiter_bytes():
                    for event in parser.feed(chunk):
                        state.last_event_id = parser.last_event_id
                        if event.data and event.event == "message":
                            state.delivered += 1
                            self._deliver(event.data, on)
                    if parser.retry is not None:
                        state.retry = min(parser.retry / 1000, MAX_RETRY_DELAY)
                    if stop() and linger.deadline == math.inf:
                        linger.deadline = trio.current_time() + LINGER_AFTER_RESPONSE
        except (httpx.HTTPError, SSEError) as exc:
            logger.debug("an event stream broke: %r", exc)
        state.last_event_id = parser.last_event_id
        if parser.retry is not None:
            state.retry = min(parser.retry / 1000, MAX_RETRY_DELAY)

    async def _request_stream(self, post: _Post, response: httpx.Response) -> None:
        """Read a request's SSE response; if it breaks before the answer, resume it."""
        state = _StreamState()
        done: Callable[[], bool] = lambda: post.answered  # noqa: E731
        await self._pump(response, state, done, post)
        failures = 0
        while not post.answered and not post.cancelled and not self._closed:
            if not state.last_event_id:
                self._answer(
                    post,
                    INTERNAL_ERROR,
                    "the response stream ended before the response, and cannot be resumed",
                )
                return
            if failures >= MAX_RESUME_ATTEMPTS:
                self._answer(
                    post,
                    INTERNAL_ERROR,
                    f"the response stream broke and could not be resumed "
                    f"({MAX_RESUME_ATTEMPTS} attempts)",
                )
                return
            failures += 1
            await trio.sleep(state.retry)
            try:
                async with self._stream(
                    "GET",
                    self._headers(
                        "text/event-stream",
                        session_id=self.session_id,
                        last_event_id=state.last_event_id,
                    ),
                ) as resumed:
                    status = resumed.status_code
                    if status == 404 and self.session_id is not None:
                        self._answer(
                            post,
                            SESSION_EXPIRED,
                            "Session expired: the server ended the session while "
                            f"{post.method} was in flight",
                        )
                        return
                    if status == 200 and _media_type(resumed) == "text/event-stream":
                        before = state.delivered
                        await self._pump(resumed, state, done, post)
                        if state.delivered > before:
                            failures = 0
                    elif status < 500 and status not in (408, 409, 429):
                        self._answer(
                            post,
                            INTERNAL_ERROR,
                            f"the response stream broke and the server refused to resume it "
                            f"(HTTP {status}: {_reason(resumed)})",
                            {"httpStatus": status},
                        )
                        return
            except httpx.HTTPError as exc:
                logger.debug("resuming a response stream failed: %r", exc)

    # -- the standalone GET stream ---------------------------------------------------------------

    def _start_listener(self, opens: trio.Event | None = None) -> None:
        """Listen for server messages not tied to a request, once the session is established
        (``notifications/initialized`` was accepted).

        The GET goes out once every request posted before the session was established has its
        response headers: a server that is slow to start (or answers one HTTP request at a
        time) then sees those requests before the GET, and the GET never holds one of them up.
        The requests posted since wait for the GET's answer (:meth:`_until_listening`).
        """
        listening = opens if opens is not None else trio.Event()
        self._listening = listening
        if self.session_id is None or self._closed:
            listening.set()
            return  # no session: nothing could tell the server's streams apart
        if self._listener is not None:
            self._listener.cancel()
        scope = trio.CancelScope()
        self._listener = scope
        earlier = [p.sent for p in self._posts.values() if not p.sent.is_set() and not p.gated]
        self._start(self._listen, scope, self.session_id, earlier, listening)

    async def _until_listening(self, post: _Post) -> None:
        """Hold a request of a new session until its standalone stream has opened, at most
        :data:`LISTEN_WAIT` (then the wait ends for every request of the session).

        A server may send the client a request of its own (an elicitation, a sampling request)
        as soon as the session exists, on that stream; one that drops such a message when no
        stream is open (as the TypeScript SDK's 1.x server does) would otherwise lose it
        whenever the client's next request overtook its GET.
        """
        listening = self._listening
        if listening is None or listening.is_set() or post.method == "initialize":
            return
        post.gated = True
        with trio.move_on_after(LISTEN_WAIT) as waited:
            await listening.wait()
        post.gated = False
        if waited.cancelled_caught:
            logger.debug("the standalone stream did not open within %s s", LISTEN_WAIT)
            listening.set()

    async def _listen(
        self,
        scope: trio.CancelScope,
        session_id: str,
        earlier: list[trio.Event],
        listening: trio.Event,
    ) -> None:
        state = _StreamState()
        failures = 0
        try:
            with scope:
                for sent in earlier:
                    await sent.wait()
                while self.session_id == session_id and not self._closed:
                    connected = False
                    try:
                        async with self._stream(
                            "GET",
                            self._headers(
                                "text/event-stream",
                                session_id=session_id,
                                last_event_id=state.last_event_id,
                            ),
                        ) as response:
                            listening.set()
                            status = response.status_code
                            if status == 405:
                                return  # the server offers no standalone stream
                            if status == 404:
                                return  # the session is gone; a new one starts a new listener
                            if status == 200 and _media_type(response) == "text/event-stream":
                                connected = True
                                failures = 0
                                await self._pump(response, state)
                    except httpx.HTTPError as exc:
                        logger.debug("the standalone stream failed: %r", exc)
                    except MCPError as exc:
                        if isinstance(exc, ConnectionClosed):
                            raise
                        # Not authorized now: the requests say so to their callers; the stream
                        # starts again with the next session (or never, until then).
                        logger.warning(
                            "the standalone event stream could not be authorized: %s", exc
                        )
                        return
                    if not connected:
                        failures += 1
                        if failures >= MAX_LISTEN_FAILURES:
                            logger.warning(
                                "giving up on the standalone event stream after %d failures",
                                failures,
                            )
                            return
                    delay = state.retry * (2 ** (failures - 1) if failures else 1)
                    await trio.sleep(min(delay, MAX_RETRY_DELAY))
        finally:
            listening.set()  # opened, refused or failed: no request waits for it

    # -- session expiry --------------------------------------------------------------------------

    async def _session_expired(self, post: _Post, stale: str | None) -> None:
        """HTTP 404 for our session: start a new one, then repeat the request if that is safe."""
        assert post.request_id is not None and post.method is not None
        renewed = await self._reinitialize(stale)
        if not renewed or post.cancelled:
            return
        cursor = (post.params or {}).get("cursor")
        if post.method in SAFE_TO_REPEAT and cursor is None and not post.retried:
            post.retried = True
            await self._post(post)
            return
        if post.retried:
            why = "the server ended the session again before the request could be repeated"
        elif cursor is not None:
            why = f"the {post.method} cursor belonged to the old session; list again"
        else:
            why = (
                f"a new session was started, but {post.method} was not sent again because "
                "repeating it may not be safe; the server did not run it"
            )
        self._answer(post, SESSION_EXPIRED, f"Session expired: {why}")

    async def _reinitialize(self, stale: str | None) -> bool:
        """Open a new session with the original ``initialize`` params, once for all waiters."""
        async with self._reinit_lock:
            if self.session_id != stale:
                return self.session_id is not None  # someone else renewed it already
            if self._init_params is None or self.protocol_version is None:
                self._fail(SessionExpired("the server ended the session before it was set up"))
                return False
            try:
                await self._renew_session()
            except _Unavailable as exc:
                self._fail(
                    SessionExpired(f"the server ended the session and a new one failed: {exc}")
                )
                return False
            return True

    async def _renew_session(self) -> None:
        assert self._init_params is not None
        self._reinits += 1
        rid = f"trio-mcp-reinitialize-{self._reinits}"
        result: JSONObject | None = None
        new_session: str | None = None
        try:
            async with self._stream(
                "POST",
                self._headers(
                    "application/json, text/event-stream", session_id=None, json_body=True
                ),
                encode(Request(rid, "initialize", self._init_params)),
            ) as response:
                if not response.is_success:
                    raise _Unavailable(f"HTTP {response.status_code}: {_reason(response)}")
                new_session = response.headers.get("mcp-session-id")
                if new_session is not None and not _SESSION_ID.fullmatch(new_session):
                    raise _Unavailable("the server sent an invalid session id")
                result = await self._initialize_result(response, rid)
        except httpx.HTTPError as exc:
            raise _Unavailable(f"{type(exc).__name__}: {exc}") from None
        except MCPError as exc:
            if isinstance(exc, ConnectionClosed):
                raise
            raise _Unavailable(str(exc)) from None
        version = result.get("protocolVersion")
        if version != self.protocol_version:
            raise _Unavailable(f"the new session speaks {version!r}, not {self.protocol_version!r}")
        self.session_id = new_session
        try:
            async with self._stream(
                "POST",
                self._headers(
                    "application/json, text/event-stream", session_id=new_session, json_body=True
                ),
                encode(Notification("notifications/initialized")),
            ) as response:
                await _read_limited(response, MAX_ERROR_BODY)
                if not response.is_success:
                    raise _Unavailable(f"notifications/initialized got HTTP {response.status_code}")
        except httpx.HTTPError as exc:
            raise _Unavailable(f"{type(exc).__name__}: {exc}") from None
        logger.info("the server ended the session; a new one was started")
        self._start_listener()

    async def _initialize_result(self, response: httpx.Response, rid: str) -> JSONObject:
        """The result of our own re-initialize, from a JSON or SSE reply."""
        found: list[Parsed] = []

        def take(data: bytes | str) -> None:
            parsed = parse(data)
            for item in parsed.items if isinstance(parsed, Batch) else (parsed,):
                if isinstance(item, Response | ErrorResponse) and item.id == rid:
                    found.append(item)
                elif isinstance(item, Notification):
                    self._put(item)  # a log message, say: the engine may want it

        media = _media_type(response)
        if media == "application/json":
            body = await _read_limited(response, MAX_MESSAGE_BYTES)
            if body is not None:
                take(body)
        elif media == "text/event-stream":
            parser = SSEParser(max_event_bytes=MAX_MESSAGE_BYTES)
            try:
                async for chunk in response.aiter_bytes():
                    for event in parser.feed(chunk):
                        if event.data and event.event == "message":
                            take(event.data)
                    if found:
                        break
            except (httpx.HTTPError, SSEError) as exc:
                raise _Unavailable(f"the initialize stream broke: {exc!r}") from None
        if not found:
            raise _Unavailable("no initialize result")
        answer = found[0]
        if isinstance(answer, ErrorResponse):
            raise _Unavailable(f"initialize was refused: {answer.error.message}")
        assert isinstance(answer, Response)
        return answer.result

    # -- closing ---------------------------------------------------------------------------------

    async def terminate(self) -> None:
        """End the session on the server (DELETE); a server that refuses (405) is fine."""
        if self.session_id is None:
            return
        try:
            async with self._stream(
                "DELETE", self._headers("application/json", session_id=self.session_id)
            ) as response:
                await _read_limited(response, MAX_ERROR_BODY)
                if response.status_code not in (200, 202, 204, 404, 405):
                    logger.debug("DELETE of the session got HTTP %s", response.status_code)
        except httpx.HTTPError as exc:
            logger.debug("DELETE of the session failed: %r", exc)
        self.session_id = None

    async def aclose(self, timeout: float) -> None:
        """Stop every task, then end the session on the server; bounded by ``timeout`` each.

        The engine sees the end of the connection. The caller shields this from cancellation.
        """
        self._closed = True
        self._in_send.close()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
            with trio.move_on_after(timeout):
                await self._stopped.wait()
        with trio.move_on_after(timeout):
            await self.terminate()


#: How long the client keeps an idle connection for its next request: under the 5 s after which
#: hypercorn, uvicorn and Node close one, as Node's own fetch does (4 s). Kept as long as the
#: server, a request sent as the server closes meets the close ("Server disconnected without
#: sending a response"), and a request that is not safe to repeat cannot be sent again.
KEEPALIVE_EXPIRY = 4.0


def own_http_client() -> httpx.AsyncClient:
    """The ``httpx.AsyncClient`` a transport makes when it is given none: no read timeout (a
    stream may idle for minutes), no redirects followed, idle connections let go before the
    usual servers drop them."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(30.0, read=None),
        follow_redirects=False,
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY),
    )


class _Runs(Protocol):
    """What :func:`running` runs: a client transport with a task of its own."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    async def aclose(self, timeout: float) -> None: ...


_T = TypeVar("_T", bound=_Runs)


@asynccontextmanager
async def running(
    make: Callable[[httpx.AsyncClient], _T],
    http_client: httpx.AsyncClient | None,
    nursery: trio.Nursery,
    close_timeout: float,
) -> AsyncIterator[_T]:
    """An HTTP client transport, made on ``http_client`` (or on one of its own, closed after
    it), its task run in ``nursery``, and closed in a shield on the way out, each step bounded
    by ``close_timeout``: what both HTTP transports' openers share."""
    client = http_client or own_http_client()
    transport = make(client)
    try:
        await nursery.start(transport.run)
        yield transport
    finally:
        with trio.CancelScope(shield=True):
            await transport.aclose(close_timeout)
            if http_client is None:
                with trio.move_on_after(close_timeout):
                    await client.aclose()


@asynccontextmanager
async def open_http_transport(
    url: str,
    nursery: trio.Nursery,
    *,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
    auth: httpx.Auth | None = None,
    close_timeout: float = 2.0,
) -> AsyncIterator[StreamableHttpTransport]:
    """A Streamable HTTP transport to ``url`` whose tasks run in ``nursery``.

    ``headers`` go on every request (authorization, say). ``http_client`` is an
    ``httpx.AsyncClient`` to reuse, and is left open; without it one is made and closed here.
    On exit the session is ended with a DELETE; each closing step is bounded by
    ``close_timeout``. ``auth`` (an ``httpx.Auth``, such as ``trio_mcp.client.OAuth``)
    authorizes every request, in place of the client's own.
    """
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r}")

    def make(client: httpx.AsyncClient) -> StreamableHttpTransport:
        return StreamableHttpTransport(url, client, headers=headers, auth=auth)

    async with running(make, http_client, nursery, close_timeout) as transport:
        yield transport
