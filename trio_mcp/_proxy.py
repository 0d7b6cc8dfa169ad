"""Proxies: ``trio_mcp.proxy(target)``, a :class:`~trio_mcp.Server` fronting any MCP server we
can reach as a client (a command spoken to over stdio, an http(s) URL, an in-memory Server).

Theory of operation. The proxy is a server with one mount (``server/_mount.py``) whose provider
is a :class:`ProxyProvider`. For each connection of the proxy (each downstream client), the
provider opens one upstream client session, with :func:`~trio_mcp.open_client`, in a task of
that connection's own nursery: the upstream lives exactly as long as the downstream connection
(it is opened at the downstream's ``initialize`` or ``server/discover``, or at its first
request, and closed when the downstream goes away). One upstream per downstream connection,
for every kind of target, because what the upstream sends without being asked belongs to one
client: its list changes and resource updates, its log messages, its questions (elicitation,
sampling, roots). A modern-era stateless HTTP downstream makes a connection per request, and
so an upstream per request: front a stdio child with stdio or handshake-era HTTP downstreams.

Each forwarded request is the downstream request's own task: the upstream call runs inside
it, so when the downstream client cancels, the call is cancelled and the engine sends the
upstream ``notifications/cancelled``. Progress of the call reaches the downstream request's
progress token; log messages go to the downstream request in flight (else to the connection,
honouring its ``logging/setLevel``); the upstream's questions go to the downstream client as
the downstream request's own nested requests, and their answers back (in the modern era the
downstream request ends with an InputRequiredResult and its retry calls upstream again,
answering the same question from the retry). When several downstream requests are in flight
at once, the upstream's questions and log messages go to the latest one: the wire does not
say which request asked. An upstream that dies fails the calls in flight with a clear error
(-32603 "Upstream server unavailable: ..."); the next request connects again.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from ._engine import InFlight
from ._exception_groups import single_error
from .client._client import Client, open_client
from .client._target import Command, HttpTarget, Target, WebSocketTarget
from .protocol._errors import ConnectionClosed, ProtocolError
from .protocol._jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, JSONObject
from .protocol._types import LoggingMessageNotificationParams, to_wire
from .server._connection import ServerConnection
from .server._context import CapabilityMissing, Context
from .server._input import InputRequired
from .server._mount import FULL_CAPABILITIES, Mount
from .server._server import Server

logger = logging.getLogger("trio_mcp.proxy")

#: ``open_client`` keywords the proxy sets itself.
_OWN_OPTIONS = frozenset(
    {"on_sample", "on_elicit", "roots", "on_log", "on_notification", "tasks", "cache"}
)
#: Keys of a result that belong to the hop that made it; the proxy stamps its own.
_HOP_KEYS = ("resultType", "ttlMs", "cacheScope")
#: How long an upstream outlives its downstream connection for the calls cut short.
_DRAIN_TIMEOUT = 1.0
#: How long a question handed to a modern downstream waits for the upstream's cancel.
_QUESTION_GRACE = 5.0


def proxy(
    target: Target,
    *,
    name: str | None = None,
    version: str | None = None,
    instructions: str | None = None,
    **client_options: Any,
) -> Server:
    """A server that fronts ``target``: serve it on any transport, or mount it in another.

    ``target`` is what :func:`~trio_mcp.open_client` takes: a command (a stdio child; a
    :class:`~trio_mcp.Command` carries its ``env``, ``cwd`` and ``stderr``), an ``http(s)://``
    URL (an :class:`~trio_mcp.HttpTarget` carries its ``headers`` and ``auth``), or a
    :class:`~trio_mcp.Server` (in memory). ``client_options`` are ``open_client``'s keywords
    for the upstream side (``mode``, ``protocol_version``, ...), except the callbacks, which the
    proxy sets to forward to the downstream client. The upstream's tasks (SEP-2663) are not used:
    a task-capable upstream tool answers the proxy as an ordinary call.

    >>> front = proxy(["python", "server.py"], name="front")
    >>> front.run("http")  # doctest: +SKIP
    """
    taken = sorted(_OWN_OPTIONS & client_options.keys())
    if taken:
        raise TypeError(f"proxy() sets {', '.join(taken)} itself: it forwards them downstream")
    label = name or _describe(target)
    server = Server(label, version or "0.0.0", instructions=instructions)
    server.mount(ProxyProvider(target, client_options, name=label))
    return server


def _describe(target: Target) -> str:
    if isinstance(target, Server):
        return f"proxy of {target.info.name}"
    if isinstance(target, str):
        return f"proxy of {target}"
    if isinstance(target, list | tuple):
        return f"proxy of {' '.join(target)}"
    if isinstance(target, Command | HttpTarget | WebSocketTarget):
        return f"proxy of {target}"
    return "proxy"


@attrs.define(eq=False)
class _Call:
    """One downstream request being answered upstream."""

    context: Context
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    #: A modern downstream's question for its client (the request then ends with it).
    input_required: InputRequired | None = None


class ProxyProvider:
    """A mount's provider that forwards to an upstream MCP server, one client per connection."""

    def __init__(self, target: Target, options: dict[str, Any], *, name: str) -> None:
        self.target = target
        self.options = dict(options)
        self.name = name
        self._upstreams: weakref.WeakKeyDictionary[ServerConnection, _Upstream] = (
            weakref.WeakKeyDictionary()
        )
        self.mount: Mount | None = None

    def attach(self, mount: Mount) -> None:
        self.mount = mount

    def detach(self) -> None:
        self.mount = None
        for upstream in list(self._upstreams.values()):
            upstream.scope.cancel()
        self._upstreams.clear()

    def capabilities(self, conn: ServerConnection) -> JSONObject:
        """The upstream's, once connected; before that, everything it might offer (so nothing
        is refused before the upstream could be asked)."""
        upstream = self._upstreams.get(conn)
        if upstream is not None and upstream.client is not None:
            caps = to_wire(upstream.client.server_capabilities)
            return caps if isinstance(caps, dict) else {}
        return dict(FULL_CAPABILITIES)

    async def prepare(self, conn: ServerConnection, record: InFlight) -> None:
        await self._upstream(conn, record)

    async def forward(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        upstream = await self._upstream(conn, record)
        return await upstream.call(conn, record)

    async def _upstream(self, conn: ServerConnection, record: InFlight) -> _Upstream:
        """This connection's upstream, connected: opened now if it has none (or it died)."""
        while (upstream := self._upstreams.get(conn)) is not None:
            await upstream.ready.wait()  # another request may be opening it
            if upstream.alive:
                return upstream
            if self._upstreams.get(conn) is upstream:  # dead, or it could not connect
                del self._upstreams[conn]
                upstream.scope.cancel()
        upstream = _Upstream(self, conn)
        self._upstreams[conn] = upstream
        nursery = conn.session.nursery
        try:
            await nursery.start(upstream.run, _downstream_capabilities(conn, record))
            nursery.start_soon(upstream.close_after_calls)
        except Exception as exc:
            logger.warning("%s: cannot connect to the upstream server", self.name, exc_info=exc)
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Upstream server unavailable: {self.name} could not connect to it "
                f"({type(single_error(exc)).__name__})",
            ) from None
        finally:
            upstream.ready.set()
            if not upstream.alive and self._upstreams.get(conn) is upstream:
                del self._upstreams[conn]
        return upstream


def _downstream_capabilities(conn: ServerConnection, record: InFlight) -> JSONObject:
    """What the downstream client can answer: the upstream client declares the same."""
    envelope = record.envelope
    if envelope is not None:
        caps = envelope.client_capabilities
    elif record.request.method == "initialize":
        caps = record.params.get("capabilities")
    else:
        caps = to_wire(conn.state.client_capabilities)
    return caps if isinstance(caps, dict) else {}


class _Upstream:
    """The upstream client session of one downstream connection."""

    def __init__(self, provider: ProxyProvider, conn: ServerConnection) -> None:
        self.provider = provider
        self._conn = weakref.ref(conn)
        self.client: Client | None = None
        self.failure: BaseException | None = None
        self.ready = trio.Event()
        #: Shielded from the downstream connection's cancellation (``close_after_calls``
        #: cancels it), so that the cancels of the calls cut short reach the upstream.
        self.scope = trio.CancelScope(shield=True)
        self.calls: list[_Call] = []
        self._no_calls = trio.Event()
        self._no_calls.set()
        self._finished = trio.Event()

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.client.session.is_closed

    async def run(
        self, caps: JSONObject, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Connected until the downstream connection's nursery ends (or the mount goes)."""
        started = False
        with self.scope:
            try:
                async with self._open(caps) as client:
                    self.client = client
                    started = True
                    self.ready.set()
                    task_status.started()
                    # Until it dies, at the latest: then closed at once (a stdio child is
                    # reaped, not left a zombie), and the next request connects again.
                    await client.session.closed.wait()
            except Exception as exc:
                self.failure = exc
                if not started:
                    raise
                # Never into the downstream connection's nursery: its calls already failed.
                logger.warning("%s: the upstream connection failed", self.provider.name)
            finally:
                self.ready.set()
                self._finished.set()

    async def close_after_calls(self) -> None:
        """When the downstream connection ends, its requests in flight are cancelled at the
        same moment as its nursery's other tasks: the upstream stays until their cancels
        were written (bounded), then closes."""
        try:
            await self._finished.wait()  # or cancelled, with the downstream connection
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(_DRAIN_TIMEOUT):
                    await self._no_calls.wait()
                # Written before the upstream is cancelled, which stops its writer at once.
                if self.client is not None:
                    await self.client.session.flush(_DRAIN_TIMEOUT)
            self.scope.cancel()

    @asynccontextmanager
    async def _open(self, caps: JSONObject) -> AsyncIterator[Client]:
        callbacks: dict[str, Any] = {
            "on_log": self._on_log,
            "on_notification": self._on_notification,
            "tasks": False,
        }
        if isinstance(caps.get("elicitation"), dict):
            callbacks["on_elicit"] = self._on_elicit
        if isinstance(caps.get("sampling"), dict):
            callbacks["on_sample"] = self._on_sample
        if isinstance(caps.get("roots"), dict):
            callbacks["roots"] = self._roots
        async with open_client(self.provider.target, **self.provider.options, **callbacks) as c:
            yield c

    # -- downstream requests, upstream --------------------------------------------------------

    async def call(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        client = self.client
        assert client is not None
        method = record.request.method
        params = {k: v for k, v in record.params.items() if k != "_meta"}
        context = Context(record, conn)
        call = _Call(context)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await context.report_progress(progress, total, message)

        self.calls.append(call)
        self._no_calls = trio.Event()
        try:
            with call.scope:
                result = await client.request(
                    method,
                    params,
                    on_progress=on_progress if record.progress_token is not None else None,
                )
                await self._caught_up(client)
                return {k: v for k, v in result.items() if k not in _HOP_KEYS}
            # Cancelled here only to end a modern request with the upstream's question.
            assert call.input_required is not None
            raise call.input_required
        except ConnectionClosed:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Upstream server unavailable: the connection of {self.provider.name} to it closed",
            ) from None
        finally:
            self.calls.remove(call)
            if not self.calls:
                self._no_calls.set()

    @staticmethod
    async def _caught_up(client: Client) -> None:
        """Until what the upstream sent before its answer (log messages, say, handed to the
        client's ordered jobs as they were read) went downstream: so they come before the
        answer there too."""
        done = trio.Event()

        async def mark() -> None:
            await trio.lowlevel.checkpoint()
            done.set()

        if client.session.is_closed:
            await trio.lowlevel.checkpoint()
            return
        client.session.run_ordered(mark)
        with trio.move_on_after(_DRAIN_TIMEOUT):  # a callback that hangs never holds the answer
            await done.wait()

    # -- what the upstream sends, downstream --------------------------------------------------

    def _current(self) -> _Call | None:
        return self.calls[-1] if self.calls else None

    async def _on_log(self, message: LoggingMessageNotificationParams) -> None:
        call = self._current()
        if call is not None:
            await call.context.log(message.level, message.data, message.logger)
            return
        conn = self._conn()
        if conn is not None and conn.state.wants_log(message.level):
            params = to_wire(message)
            await conn.session.notify("notifications/message", params)

    async def _on_notification(self, method: str, params: JSONObject) -> None:
        await trio.lowlevel.checkpoint()
        mount, conn = self.provider.mount, self._conn()
        if mount is None or conn is None:
            return
        kind = method.removeprefix("notifications/").removesuffix("/list_changed")
        if method.endswith("/list_changed") and kind in ("tools", "prompts", "resources"):
            mount.list_changed(kind, conn)
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            mount.resource_updated(params["uri"], conn)

    async def _on_elicit(self, params: Any) -> JSONObject:
        return await self._ask("elicitation/create", to_wire(params))

    async def _on_sample(self, params: Any) -> JSONObject:
        return await self._ask("sampling/createMessage", to_wire(params))

    async def _roots(self) -> list[Any]:
        answer = await self._ask("roots/list", {})
        roots = answer.get("roots")
        return list(roots) if isinstance(roots, list) else []

    async def _ask(self, method: str, params: JSONObject) -> JSONObject:
        """The upstream's question, to the downstream client; its answer, back."""
        call = self._current()
        if call is None:
            conn = self._conn()
            if conn is None or not conn.state.initialized or not conn.state.back_channel:
                raise ProtocolError(
                    INVALID_REQUEST, f"{method}: no client to ask (no request is in flight)"
                )
            return await conn.session.request(method, params)
        try:
            return await call.context.ask_client(method, params)
        except Exception as exc:
            only = single_error(exc)
            if isinstance(only, InputRequired):
                # A modern downstream: its request ends asking this; the retry asks upstream
                # again and finds the answer.
                call.input_required = only
                call.scope.cancel()
                # The upstream call is being cancelled, and this question with it: wait for
                # that (bounded) rather than answer the upstream with an error it would log.
                with trio.move_on_after(_QUESTION_GRACE):
                    await trio.sleep_forever()
                raise ProtocolError(INTERNAL_ERROR, "the question went to the client") from None
            if isinstance(only, CapabilityMissing):
                raise ProtocolError(INVALID_REQUEST, f"{method}: {only}") from None
            raise
