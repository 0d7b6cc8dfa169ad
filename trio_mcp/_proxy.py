"""Proxies: ``trio_mcp.proxy(target)``, a :class:`~trio_mcp.Server` fronting any MCP server we
can reach as a client (a command spoken to over stdio, an http(s) URL, an in-memory Server).

Theory of operation. The proxy is a server with one mount (``server/_mount.py``) whose provider
is a :class:`ProxyProvider`. The provider keeps a pool of upstream client sessions, opened with
:func:`~trio_mcp.open_client`: one per *upstream principal*, that is per downstream principal
(who the upstream works for; everyone, without authorization) and per set of questions the
downstream client can answer (elicitation, sampling, roots: the upstream client declares the
same). Every downstream request of that principal, in every era and over every transport,
shares that one session: concurrent calls are concurrent requests on it. A modern-era HTTP
downstream, which makes a connection per request, therefore starts a stdio child once, not per
request. The pool is bounded (``max_upstreams``; when it is full, the longest idle session is
closed, and if none is idle the request fails clearly) and a session with no call in flight and
no downstream connection attached for ``idle_timeout`` is closed.

The sessions live in a nursery of the pool's own (a Trio system task, started at the first
request): never in a downstream request or connection, so a downstream that goes away at any
moment, even while the upstream is starting, only stops waiting. Nothing there is shielded
beyond the bounded close of a child process, so the end of the run (SIGTERM, after the drain
grace) ends every upstream whatever it was doing.

Each forwarded request is the downstream request's own task: the upstream call runs inside
it, so when the downstream client cancels, the call is cancelled and the engine sends the
upstream ``notifications/cancelled``. Progress of the call reaches the downstream request's
progress token; log messages go to the downstream request in flight (else to the attached
connections, honouring their ``logging/setLevel``); list changes and resource updates to the
attached connections (each keeps what it subscribed to); the upstream's questions go to the
downstream client as the downstream request's own nested requests, and their answers back. The
multi round-trip loop (``requestState``, ``inputResponses``) is run on the downstream side
only: a modern downstream request ends with an InputRequiredResult and its retry calls
upstream again, answering the same question from the retry; the retry's own fields never go
upstream (a handshake-era upstream has none; a modern one gets its own loop, run by the
upstream client). When several downstream requests share a session, the upstream's questions
and log messages go to the latest one in flight: the wire does not say which request asked
(all of them are one principal's). An upstream that dies fails the calls in flight with a clear
error (-32603 "Upstream server unavailable: ..."); the next request connects again.

Tasks (SEP-2663) pass through: the upstream client declares the extension, so a task-capable
upstream tool may answer with a task. A downstream request that declared the extension gets
the ``CreateTaskResult`` as it is, and its ``tasks/get``, ``tasks/update`` and ``tasks/cancel``
go upstream on its principal's session; one that did not gets the result, the proxy following
the task upstream (its questions asked of the downstream client). The upstream sees the proxy's
own credentials whoever the downstream principal is, so the proxy keeps which principal each
task it passed down belongs to, and to anyone else that task id is unknown (-32602), as on the
upstream itself.
"""

from __future__ import annotations

import collections
import contextvars
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
from .protocol._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, JSONObject
from .protocol._tasks import TASK_METHODS, declares_tasks, task_id_of
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
#: Params of the downstream hop's multi round-trip loop: the proxy's own sealed state and the
#: answers to the proxy's own questions. Never forwarded: a handshake-era upstream knows
#: neither field, and a modern one runs its own loop with the upstream client.
_ROUND_TRIP_PARAMS = frozenset({"requestState", "inputResponses"})
#: What a downstream client may answer, and the upstream client then declares.
_QUESTIONS = ("elicitation", "sampling", "roots")
#: How long a question handed to a modern downstream waits for the upstream's cancel.
_QUESTION_GRACE = 5.0
#: A bound on waiting for the upstream's notifications that came before an answer.
_CATCH_UP_TIMEOUT = 1.0
#: The pool's defaults.
DEFAULT_MAX_UPSTREAMS = 16
DEFAULT_IDLE_TIMEOUT = 60.0
#: How many tasks passed down the proxy remembers the principal of (the oldest forgotten first:
#: its id is then unknown here, never shown to another principal).
MAX_TASK_OWNERS = 100_000


def proxy(
    target: Target,
    *,
    name: str | None = None,
    version: str | None = None,
    instructions: str | None = None,
    max_upstreams: int = DEFAULT_MAX_UPSTREAMS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    **client_options: Any,
) -> Server:
    """A server that fronts ``target``: serve it on any transport, or mount it in another.

    ``target`` is what :func:`~trio_mcp.open_client` takes: a command (a stdio child; a
    :class:`~trio_mcp.Command` carries its ``env``, ``cwd`` and ``stderr``), an ``http(s)://``
    URL (an :class:`~trio_mcp.HttpTarget` carries its ``headers`` and ``auth``), or a
    :class:`~trio_mcp.Server` (in memory). ``max_upstreams`` bounds the upstream sessions open
    at once (one per downstream principal and set of client capabilities) and
    ``idle_timeout`` closes one unused for that many seconds. ``client_options`` are
    ``open_client``'s keywords for the upstream side (``mode``, ``protocol_version``, ...),
    except the callbacks, which the proxy sets to forward to the downstream client. The
    upstream's tasks (SEP-2663) pass through to a downstream client that declares the
    extension, for the principal that created them only.

    >>> front = proxy(["python", "server.py"], name="front")
    >>> front.run("http")  # doctest: +SKIP
    """
    taken = sorted(_OWN_OPTIONS & client_options.keys())
    if taken:
        raise TypeError(f"proxy() sets {', '.join(taken)} itself: it forwards them downstream")
    if max_upstreams < 1:
        raise ValueError("max_upstreams must be at least 1")
    if not idle_timeout > 0:
        raise ValueError("idle_timeout must be positive")
    label = name or _describe(target)
    server = Server(label, version or "0.0.0", instructions=instructions)
    provider = ProxyProvider(
        target, client_options, name=label, max_upstreams=max_upstreams, idle_timeout=idle_timeout
    )
    server.mount(provider)
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


def _unavailable(message: str) -> ProtocolError:
    return ProtocolError(INTERNAL_ERROR, f"Upstream server unavailable: {message}")


@attrs.frozen(cache_hash=True)
class _Key:
    """Whom an upstream session works for: one session per key."""

    #: The downstream principal's identity (None without authorization).
    principal: str | None
    #: The questions the downstream client answers (the upstream client declares them).
    questions: frozenset[str]


@attrs.define(eq=False)
class _Call:
    """One downstream request being answered upstream."""

    context: Context
    #: What ends a modern downstream's call early, with its question (None: a handshake-era
    #: downstream, whose questions are asked and answered within the call).
    scope: trio.CancelScope | None = None
    #: A modern downstream's question for its client (the request then ends with it).
    input_required: InputRequired | None = None


class ProxyProvider:
    """A mount's provider that forwards to an upstream MCP server through a pool of client
    sessions, one per upstream principal."""

    def __init__(
        self,
        target: Target,
        options: dict[str, Any],
        *,
        name: str,
        max_upstreams: int = DEFAULT_MAX_UPSTREAMS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.target = target
        self.options = dict(options)
        self.name = name
        self.mount: Mount | None = None
        self.pool = _Pool(self, max_upstreams, idle_timeout)
        #: The session a downstream connection used last (for its capabilities).
        self._chosen: weakref.WeakKeyDictionary[ServerConnection, _Upstream] = (
            weakref.WeakKeyDictionary()
        )
        #: Task id -> the identity of the downstream principal it was created for.
        self.task_owners: collections.OrderedDict[str, str | None] = collections.OrderedDict()

    def attach(self, mount: Mount) -> None:
        self.mount = mount

    def detach(self) -> None:
        self.mount = None
        self.pool.close_all()
        self._chosen.clear()

    def capabilities(self, conn: ServerConnection) -> JSONObject:
        """The upstream's, once connected; before that, everything it might offer (so nothing
        is refused before the upstream could be asked)."""
        upstream = self._chosen.get(conn)
        if upstream is not None and upstream.alive and upstream.client is not None:
            caps = to_wire(upstream.client.server_capabilities)
            return caps if isinstance(caps, dict) else {}
        return dict(FULL_CAPABILITIES)

    async def prepare(self, conn: ServerConnection, record: InFlight) -> None:
        await self._upstream(conn, record, _identity(record))

    async def forward(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        method = record.method
        identity = _identity(record)
        if method in TASK_METHODS:
            task_id = task_id_of(record.params)
            if task_id is None or self.task_owners.get(task_id, _NOBODY) != identity:
                await trio.lowlevel.checkpoint()
                raise ProtocolError(INVALID_PARAMS, "Invalid params: unknown task")
        upstream = await self._upstream(conn, record, identity)
        result = await upstream.call(conn, record)
        if method == "tools/call" and result.get("resultType") == "task":
            task_id = result.get("taskId")
            if isinstance(task_id, str):
                self.task_owners[task_id] = identity
                while len(self.task_owners) > MAX_TASK_OWNERS:
                    self.task_owners.popitem(last=False)
        return result

    async def _upstream(
        self, conn: ServerConnection, record: InFlight, identity: str | None
    ) -> _Upstream:
        """The connected session for this request's principal, opened if there is none."""
        if record.envelope is None and conn.state.initialized:
            # A handshake-era connection's capabilities are its initialize's: the session it
            # used last is the one, while it lives, is the pool's, and works for this principal.
            chosen = self._chosen.get(conn)
            if (
                chosen is not None
                and chosen.key.principal == identity
                and chosen.alive
                and self.pool.upstreams.get(chosen.key) is chosen
            ):
                return chosen
        caps = _downstream_capabilities(conn, record)
        key = _Key(identity, frozenset(q for q in _QUESTIONS if isinstance(caps.get(q), dict)))
        upstream = await self.pool.get(key)
        upstream.attach(conn)
        self._chosen[conn] = upstream
        return upstream


#: Stands for "no task of anybody's" in :attr:`ProxyProvider.task_owners` lookups.
_NOBODY = object()


def _identity(record: InFlight) -> str | None:
    """The downstream principal's identity (None without authorization)."""
    identity = getattr(record.principal, "identity", None)
    return identity if isinstance(identity, str) else None


def _declares_tasks(record: InFlight) -> bool:
    """Whether the downstream request declared the tasks extension (a modern one only)."""
    envelope = record.envelope
    return envelope is not None and declares_tasks(envelope.client_capabilities)


def _downstream_capabilities(conn: ServerConnection, record: InFlight) -> JSONObject:
    """What the downstream client can answer: the upstream client declares the same."""
    envelope = record.envelope
    if envelope is not None:
        caps = envelope.client_capabilities
    elif record.method == "initialize":
        caps = record.params.get("capabilities")
    else:
        caps = to_wire(conn.state.client_capabilities)
    return caps if isinstance(caps, dict) else {}


class _Pool:
    """The upstream sessions of one provider, in a nursery of their own."""

    def __init__(self, provider: ProxyProvider, max_upstreams: int, idle_timeout: float) -> None:
        self.provider = provider
        self.max_upstreams = max_upstreams
        self.idle_timeout = idle_timeout
        self.upstreams: dict[_Key, _Upstream] = {}
        self._nursery: trio.Nursery | None = None
        self._hosting = False
        self._hosted = trio.Event()

    async def get(self, key: _Key) -> _Upstream:
        """The key's connected session; opened (or reopened, if it died) when there is none.

        Waiting is all a caller does: cancelled, it stops waiting and the session goes on
        starting in the pool (the next request finds it).
        """
        while True:
            upstream = self.upstreams.get(key)
            if upstream is None:
                upstream = await self._open(key)
            await upstream.ready.wait()
            if upstream.alive:
                return upstream
            if upstream.failure is not None and not upstream.connected:
                raise _unavailable(
                    f"{self.provider.name} could not connect to it "
                    f"({type(single_error(upstream.failure)).__name__})"
                )
            self.forget(upstream)  # it died: open another

    async def _open(self, key: _Key) -> _Upstream:
        nursery = await self._host()
        if (existing := self.upstreams.get(key)) is not None:
            return existing  # opened by another request while the host started
        if len(self.upstreams) >= self.max_upstreams:
            idle = [u for u in self.upstreams.values() if u.idle]
            if not idle:
                raise _unavailable(
                    f"{self.provider.name} has all its {self.max_upstreams} upstream "
                    "sessions in use; try again later"
                )
            oldest = min(idle, key=lambda u: u.idle_since)
            self.forget(oldest)
            oldest.scope.cancel()
        upstream = _Upstream(self, key)
        self.upstreams[key] = upstream
        nursery.start_soon(upstream.run, name=f"upstream of {self.provider.name}")
        return upstream

    async def _host(self) -> trio.Nursery:
        """The pool's nursery, in a system task started at the first request: it belongs to
        the run (cancelled when the run's main task ends), not to any downstream request."""
        if not self._hosting:
            self._hosting = True
            trio.lowlevel.spawn_system_task(
                self._serve,
                name=f"upstream pool of {self.provider.name}",
                context=contextvars.Context(),  # nothing of the first request's context
            )
        await self._hosted.wait()
        assert self._nursery is not None
        return self._nursery

    async def _serve(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._hosted.set()
                await trio.sleep_forever()
        except BaseException as exc:  # a system task must not raise
            if not _only_cancelled(exc):
                logger.error("%s: the upstream pool failed", self.provider.name, exc_info=exc)
        finally:
            self._nursery = None
            self._hosting = False
            self._hosted = trio.Event()
            for upstream in list(self.upstreams.values()):
                upstream.ready.set()
            self.upstreams.clear()

    def forget(self, upstream: _Upstream) -> None:
        if self.upstreams.get(upstream.key) is upstream:
            del self.upstreams[upstream.key]

    def close_all(self) -> None:
        for upstream in list(self.upstreams.values()):
            self.forget(upstream)
            upstream.scope.cancel()


def _only_cancelled(exc: BaseException) -> bool:
    """``exc`` is a cancellation (alone, or a group of nothing else): the run ending."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


class _Upstream:
    """One upstream client session, shared by the downstream requests of one key."""

    def __init__(self, pool: _Pool, key: _Key) -> None:
        self.pool = pool
        self.provider = pool.provider
        self.key = key
        self.client: Client | None = None
        self.connected = False
        self.failure: BaseException | None = None
        self.ready = trio.Event()
        self.scope = trio.CancelScope()
        self.calls: list[_Call] = []
        #: The downstream connections it serves, in the order they came (until they end).
        self.attached: dict[ServerConnection, None] = {}
        #: The URIs subscribed upstream, and the downstream connections that asked.
        self.subscribed: dict[str, weakref.WeakSet[ServerConnection]] = {}
        self.idle_since = trio.current_time()
        self._changed = trio.Event()
        #: Whether the session was idle at the last :meth:`_touch` (as the expiry task saw it).
        self._was_idle = True

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.client.session.is_closed

    @property
    def idle(self) -> bool:
        """Connected, with no call in flight and no downstream connection attached (one still
        starting is never idle: requests are waiting for it)."""
        return self.connected and not self.calls and not self.attached

    def _touch(self) -> None:
        """Tell the expiry task, when it matters to it: the session became idle (its clock
        starts), is idle again (its clock restarts) or stopped being idle. A call beginning or
        ending while others run, or a connection attached, wakes nothing."""
        idle = self.idle
        if idle:
            self.idle_since = trio.current_time()
        elif not self._was_idle:
            return
        self._was_idle = idle
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> None:
        """Connected until it dies, is idle too long, or the pool ends."""
        with self.scope:
            try:
                async with self._open() as client:
                    self.client, self.connected = client, True
                    self.idle_since = trio.current_time()
                    self.ready.set()
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._expire, nursery.cancel_scope)
                        # Until it dies, at the latest: then closed at once (a stdio child is
                        # reaped, not left a zombie), and the next request connects again.
                        await client.session.closed.wait()
                        nursery.cancel_scope.cancel()
            except Exception as exc:
                self.failure = exc
                if self.connected:
                    logger.warning("%s: the upstream connection failed", self.provider.name)
                else:
                    logger.warning(
                        "%s: cannot connect to the upstream server",
                        self.provider.name,
                        exc_info=exc,
                    )
            finally:
                self.pool.forget(self)
                self.ready.set()

    async def _expire(self, scope: trio.CancelScope) -> None:
        """Closes the session once it was idle for the pool's ``idle_timeout``."""
        while True:
            changed = self._changed
            if not self.idle:
                await changed.wait()
                continue
            with trio.move_on_at(self.idle_since + self.pool.idle_timeout):
                await changed.wait()
                continue
            if self.idle:
                self.pool.forget(self)
                self.scope.cancel()
                return

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Client]:
        callbacks: dict[str, Any] = {
            "on_log": self._on_log,
            "on_notification": self._on_notification,
            "tasks": True,
        }
        if "elicitation" in self.key.questions:
            callbacks["on_elicit"] = self._on_elicit
        if "sampling" in self.key.questions:
            callbacks["on_sample"] = self._on_sample
        if "roots" in self.key.questions:
            callbacks["roots"] = self._roots
        async with open_client(self.provider.target, **self.provider.options, **callbacks) as c:
            yield c

    # -- the downstream connections it serves -------------------------------------------------

    def attach(self, conn: ServerConnection) -> None:
        """``conn`` hears what this session sends unasked, until ``conn`` ends."""
        if conn in self.attached:
            return
        try:
            nursery = conn.session.nursery
        except RuntimeError:
            return  # not running (yet, or any more): nothing to tell it
        self.attached[conn] = None
        self._touch()
        nursery.start_soon(self._attached_until_the_end, conn)

    async def _attached_until_the_end(self, conn: ServerConnection) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self.attached.pop(conn, None)
            self._touch()

    # -- downstream requests, upstream --------------------------------------------------------

    async def call(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        client = self.client
        assert client is not None
        method = record.method
        params = self._params(method, record.params)
        if method in ("resources/subscribe", "resources/unsubscribe"):
            shared = self._shared_subscription(conn, method, params.get("uri"))
            if shared is not None:
                await trio.lowlevel.checkpoint()
                return shared
        call = _Call(Context(record, conn))
        self.calls.append(call)
        self._touch()
        try:
            if record.envelope is None:
                return await self._answer(client, method, params, record, call)
            with trio.CancelScope() as call.scope:
                return await self._answer(client, method, params, record, call)
            # Cancelled here only to end a modern request with the upstream's question.
            assert call.input_required is not None
            raise call.input_required
        except ConnectionClosed:
            raise _unavailable(f"the connection of {self.provider.name} to it closed") from None
        finally:
            self.calls.remove(call)
            self._touch()

    async def _answer(
        self, client: Client, method: str, params: JSONObject, record: InFlight, call: _Call
    ) -> JSONObject:
        """The upstream's answer to a downstream request, as this hop gives it."""
        on_progress = None
        if record.progress_token is not None:
            context = call.context

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                await context.report_progress(progress, total, message)

        result = await client.request(method, params, on_progress=on_progress)
        if result.get("resultType") == "task" and not _declares_tasks(record):
            # Asked for no task: the proxy follows it upstream to its result.
            result = await self._follow(client, params, result)
        if client.session.ordered_pending:
            await self._caught_up(client)
        if result.get("resultType") == "task" or method in TASK_METHODS:
            # A task's own fields (its ttlMs among them) are not this hop's.
            return {k: v for k, v in result.items() if k != "cacheScope"}
        return {k: v for k, v in result.items() if k not in _HOP_KEYS}

    async def _follow(self, client: Client, params: JSONObject, task: JSONObject) -> JSONObject:
        """An upstream task, followed to its ``CallToolResult`` (its questions asked of the
        downstream client); cancelled upstream if the downstream request is."""
        from .tasks import ToolTask

        async def send(method: str, request_params: JSONObject) -> JSONObject:
            return await client.request(method, request_params)

        async def fulfil(requests: dict[str, Any]) -> JSONObject:
            answers: JSONObject = {}
            for key, request in requests.items():
                method = request.get("method") if isinstance(request, dict) else None
                asked = request.get("params") if isinstance(request, dict) else None
                if isinstance(method, str):
                    answers[key] = await self._ask(method, asked if isinstance(asked, dict) else {})
            return answers

        name = params.get("name")
        handle = ToolTask(name if isinstance(name, str) else "", task, send, fulfil)
        try:
            outcome = await handle.result()
        except BaseException:
            if not handle.terminal:
                await handle.cancel_shielded()
            raise
        wire = to_wire(outcome)
        return wire if isinstance(wire, dict) else {}

    @staticmethod
    def _params(method: str, params: JSONObject) -> JSONObject:
        """The downstream request's params as the upstream may see them: without its ``_meta``
        (the upstream client makes its own envelope) nor the downstream hop's multi round-trip
        fields, whatever era the upstream negotiated."""
        if method == "tasks/update":
            # Its inputResponses are the task's answers, not this hop's round trip.
            return {k: v for k, v in params.items() if k != "_meta"}
        return {k: v for k, v in params.items() if k != "_meta" and k not in _ROUND_TRIP_PARAMS}

    def _shared_subscription(
        self, conn: ServerConnection, method: str, uri: Any
    ) -> JSONObject | None:
        """A subscription is the session's, shared by its downstream connections: subscribed
        upstream by the first, unsubscribed by the last. None: ask the upstream."""
        if not isinstance(uri, str):
            return None
        subscribers = self.subscribed.setdefault(uri, weakref.WeakSet())
        if method == "resources/subscribe":
            first = not subscribers
            subscribers.add(conn)
            return None if first else {}
        subscribers.discard(conn)
        if subscribers:
            return {}
        del self.subscribed[uri]
        return None

    @staticmethod
    async def _caught_up(client: Client) -> None:
        """Until what the upstream sent before its answer (log messages, say, handed to the
        client's ordered jobs as they were read) went downstream: so they come before the
        answer there too. Called only when some of those jobs are still pending."""
        done = trio.Event()

        async def mark() -> None:
            await trio.lowlevel.checkpoint()
            done.set()

        if client.session.is_closed:
            await trio.lowlevel.checkpoint()
            return
        client.session.run_ordered(mark)
        with trio.move_on_after(_CATCH_UP_TIMEOUT):  # a callback that hangs never holds it
            await done.wait()

    # -- what the upstream sends, downstream --------------------------------------------------

    def _current(self) -> _Call | None:
        return self.calls[-1] if self.calls else None

    async def _on_log(self, message: LoggingMessageNotificationParams) -> None:
        call = self._current()
        if call is not None:
            await call.context.log(message.level, message.data, message.logger)
            return
        params = to_wire(message)
        for conn in list(self.attached):
            if conn.state.wants_log(message.level):
                await conn.session.notify("notifications/message", params)

    async def _on_notification(self, method: str, params: JSONObject) -> None:
        await trio.lowlevel.checkpoint()
        mount = self.provider.mount
        if mount is None:
            return
        kind = method.removeprefix("notifications/").removesuffix("/list_changed")
        for conn in list(self.attached):
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
            for conn in reversed(list(self.attached)):
                if conn.state.initialized and conn.state.back_channel:
                    return await conn.session.request(method, params)
            raise ProtocolError(
                INVALID_REQUEST, f"{method}: no client to ask (no request is in flight)"
            )
        try:
            return await call.context.ask_client(method, params)
        except Exception as exc:
            only = single_error(exc)
            if isinstance(only, InputRequired):
                # A modern downstream: its request ends asking this; the retry asks upstream
                # again and finds the answer.
                call.input_required = only
                assert call.scope is not None  # InputRequired: a modern downstream's call
                call.scope.cancel()
                # The upstream call is being cancelled, and this question with it: wait for
                # that (bounded) rather than answer the upstream with an error it would log.
                with trio.move_on_after(_QUESTION_GRACE):
                    await trio.sleep_forever()
                raise ProtocolError(INTERNAL_ERROR, "the question went to the client") from None
            if isinstance(only, CapabilityMissing):
                raise ProtocolError(INVALID_REQUEST, f"{method}: {only}") from None
            raise
