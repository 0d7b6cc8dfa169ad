"""The client: ``open_client`` connects, performs the handshake and hands out a ``Client``.

Every call runs in the caller's task: cancelling the caller's scope cancels the request on the
wire. Requests the server sends us (sampling, elicitation, roots) are answered by callbacks that
each run in their own task under their own scope, so the server's ``notifications/cancelled``
stops them.
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, Unpack
from urllib.parse import urlsplit

import attrs
import trio

from .._engine import Engine, InFlight, ProgressCallback, Route
from .._exception_groups import collapse_exception_groups, single_error
from .._version import __version__
from ..otel import observe
from ..protocol._envelope import SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY, make_envelope
from ..protocol._errors import ConnectionClosed, MCPError, ProtocolError, RequestTimeout
from ..protocol._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    Notification,
    Request,
    RequestId,
    is_valid_id,
)
from ..protocol._types import (
    LOGGING_LEVELS,
    CallToolResult,
    ClientCapabilities,
    CompleteResult,
    Completion,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    GetPromptResult,
    Implementation,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    LoggingMessageNotificationParams,
    Prompt,
    PromptReference,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ResourceTemplateReference,
    Root,
    ServerCapabilities,
    Tool,
    from_wire,
    result_from_wire,
    to_wire,
)
from ..protocol._versions import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_VERSIONS,
    Era,
    check_pin,
)
from ..transports._memory import memory_transport_pair
from ..transports._stdio import open_process_transport
from ..transports._transport import Transport
from ..transports._ws_client import open_ws_transport
from ._cache import ResultCache, invalidates
from ._extensions import ClientExtension, Requester
from ._target import (
    Command,
    HttpTarget,
    MovedOptions,
    Resolved,
    Servable,
    Target,
    WebSocketTarget,
    resolve_target,
)

if TYPE_CHECKING:
    from ..tasks import ToolTask

logger = logging.getLogger("trio_mcp.client")

T = TypeVar("T")
Callback = Callable[..., Any]
RootsSource = Sequence[Root] | Callable[[], Awaitable[Sequence[Root]] | Sequence[Root]]

DEFAULT_CLIENT_INFO = Implementation(name="trio-mcp", version=__version__)


class _Paged(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


P = TypeVar("P", bound=_Paged)


class RequestOptions(TypedDict, total=False):
    """What every typed request method of :class:`Client` accepts besides its own parameters:
    the keywords of :meth:`Client.request`, given by name (``timeout=5``). One definition
    serves every method, and mypy refuses a misspelt one."""

    on_progress: ProgressCallback | None
    timeout: float | None
    max_total: float | None
    request_id: RequestId | None
    meta: JSONObject | None


class InitializeError(MCPError):
    """The handshake failed; the client is not connected."""


@attrs.frozen
class DiscoverInfo:
    """What ``server/discover`` told a modern client."""

    protocol_version: str
    supported_versions: tuple[str, ...]
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None
    ttl_ms: int | None
    cache_scope: str | None

    @classmethod
    def from_result(cls, raw: JSONObject, version: str) -> DiscoverInfo | None:
        """None when the server does not speak ``version``."""
        supported = raw.get("supportedVersions")
        if not isinstance(supported, list) or version not in supported:
            return None
        meta = raw.get("_meta")
        info = meta.get(SERVER_INFO_KEY) if isinstance(meta, dict) else None
        if not isinstance(info, dict):
            info = raw.get("serverInfo")
        try:
            server_info = from_wire(info if isinstance(info, dict) else {}, Implementation)
            capabilities = from_wire(raw.get("capabilities") or {}, ServerCapabilities)
        except ValueError:
            server_info = Implementation(name="unknown", version="unknown")
            capabilities = ServerCapabilities()
        instructions = raw.get("instructions")
        ttl, scope = raw.get("ttlMs"), raw.get("cacheScope")
        return cls(
            version,
            tuple(v for v in supported if isinstance(v, str)),
            capabilities,
            server_info,
            instructions if isinstance(instructions, str) else None,
            ttl if isinstance(ttl, int) else None,
            scope if isinstance(scope, str) else None,
        )


class Subscription:
    """The notifications of one ``subscriptions/listen``, as an async iterator."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[Notification](math.inf)
        #: The filter as the server honours it, once it has acknowledged.
        self.acknowledged: JSONObject | None = None
        self._acknowledged = trio.Event()

    def deliver(self, note: Notification) -> None:
        """Called by the dispatcher, synchronously, for each notification tagged for us."""
        if note.method == "notifications/subscriptions/acknowledged":
            honoured = (note.params or {}).get("notifications")
            self.acknowledged = honoured if isinstance(honoured, dict) else {}
            self._acknowledged.set()
            return
        try:
            self._send.send_nowait(note)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def wait_acknowledged(self) -> JSONObject:
        """The honoured filter, once the server has acknowledged the subscription."""
        await self._acknowledged.wait()
        assert self.acknowledged is not None
        return self.acknowledged

    def close(self) -> None:
        self._send.close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Notification:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


def _shared_modern_version(exc: ProtocolError) -> str | None:
    """From a -32022 error, the newest modern version both sides speak."""
    if exc.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(exc.data, dict):
        return None
    supported = exc.data.get("supported")
    if not isinstance(supported, list):
        return None
    shared = [v for v in MODERN_VERSIONS if v in supported]
    return shared[-1] if shared else None


class PaginationError(MCPError):
    """A server returned a cursor it had already returned; walking on would loop forever."""


async def _maybe_await(value: Any) -> Any:
    if isinstance(value, Awaitable):
        return await value
    return value


class ClientDispatcher:
    """The engine's dispatcher for the client role: server requests and notifications."""

    def __init__(
        self,
        *,
        on_sample: Callback | None,
        on_elicit: Callback | None,
        roots: RootsSource | None,
        on_log: Callback | None,
        on_notification: Callback | None,
    ) -> None:
        self.on_sample = on_sample
        self.on_elicit = on_elicit
        self.roots = roots
        self.on_log = on_log
        self.notification_hook = on_notification
        self.cache: ResultCache | None = None
        #: Live subscriptions (modern ``subscriptions/listen``), by the listen request's id.
        self.listeners: dict[RequestId, Subscription] = {}

    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            sampling={} if self.on_sample is not None else None,
            elicitation={"form": {}, "url": {}} if self.on_elicit is not None else None,
            roots={"listChanged": True} if self.roots is not None else None,
        )

    def route(self, request: Request, session: Engine) -> Route:
        method = request.method
        if method == "ping":
            return Route(self._ping)
        if self.can_fulfil(method):

            async def answer(record: InFlight) -> JSONObject:
                return await self.fulfil(method, record.params)

            return Route(answer)
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)

    def can_fulfil(self, method: str) -> bool:
        return (
            (method == "sampling/createMessage" and self.on_sample is not None)
            or (method == "elicitation/create" and self.on_elicit is not None)
            or (method == "roots/list" and self.roots is not None)
        )

    async def fulfil(self, method: str, params: JSONObject) -> JSONObject:
        """Answer a server's question with the user's callback, in either era: a handshake-era
        request, or an input request of a modern InputRequiredResult."""
        if method == "sampling/createMessage" and self.on_sample is not None:
            sample = _structure_params(params, CreateMessageRequestParams)
            return _result_wire(await _maybe_await(self.on_sample(sample)), CreateMessageResult)
        if method == "elicitation/create" and self.on_elicit is not None:
            cls: type[Any] = (
                ElicitRequestURLParams if params.get("mode") == "url" else ElicitRequestFormParams
            )
            elicit = _structure_params(params, cls)
            answer = _result_wire(await _maybe_await(self.on_elicit(elicit)), ElicitResult)
            if isinstance(elicit, ElicitRequestFormParams):
                answer = _with_defaults(answer, elicit.requested_schema)
            return answer
        if method == "roots/list" and self.roots is not None:
            roots = self.roots
            listed = await _maybe_await(roots()) if callable(roots) else roots
            await trio.lowlevel.checkpoint()
            return {"roots": [to_wire(root) for root in listed or ()]}
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)

    async def _ping(self, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        return {}

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        params = notification.params or {}
        if self.cache is not None and invalidates(notification.method):
            self.cache.invalidate(notification.method, params)
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_ID_KEY) if isinstance(meta, dict) else None
        listener = self.listeners.get(subscription) if is_valid_id(subscription) else None
        if listener is not None:
            listener.deliver(notification)
            return
        if notification.method == "notifications/message" and self.on_log is not None:
            on_log = self.on_log
            try:
                message = from_wire(params, LoggingMessageNotificationParams)
            except ValueError:
                logger.warning("ignoring a malformed notifications/message")
                return

            async def log_job() -> None:
                await _maybe_await(on_log(message))

            session.run_ordered(log_job)
            return
        if self.notification_hook is not None:
            hook = self.notification_hook

            async def job() -> None:
                await _maybe_await(hook(notification.method, params))

            session.run_ordered(job)


def _structure_params(params: JSONObject, cls: type[T]) -> T:
    try:
        return from_wire(params, cls)
    except ValueError as exc:
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {exc}") from None


def _with_defaults(answer: JSONObject, schema: dict[str, Any]) -> JSONObject:
    """An accepted form, with the schema's ``default`` for each field the answer leaves out
    (SEP-1034): the user saw those values filled in and accepted them, so the server gets
    them too, whatever the UI returned."""
    properties = schema.get("properties")
    if answer.get("action") != "accept" or not isinstance(properties, dict):
        return answer
    content = answer.get("content")
    filled = dict(content) if isinstance(content, dict) else {}
    for name, field in properties.items():
        if name not in filled and isinstance(field, dict) and "default" in field:
            filled[name] = field["default"]
    if content is None and not filled:
        return answer
    return {**answer, "content": filled}


def _without_unusable_tools(result: JSONObject) -> JSONObject:
    """A ``tools/list`` result minus the tools whose ``x-mcp-header`` declarations are invalid:
    the spec has clients drop them (their headers cannot be sent), and keep the others."""
    from ..protocol._headers import tool_param_headers

    tools = result.get("tools")
    if not isinstance(tools, list):
        return result
    kept = []
    for tool in tools:
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        try:
            tool_param_headers(schema)
        except ValueError as exc:
            logger.warning("ignoring the tool %r of the server: %s", tool.get("name"), exc)
            continue
        kept.append(tool)
    return result if len(kept) == len(tools) else {**result, "tools": kept}


def _result_wire(result: Any, cls: type[Any]) -> JSONObject:
    if isinstance(result, dict):
        return result
    if not isinstance(result, cls):
        raise TypeError(f"the callback must return {cls.__name__}, not {type(result).__name__}")
    wire = to_wire(result)
    assert isinstance(wire, dict)
    return wire


class Client:
    """A connected MCP client. Get one from :func:`open_client`."""

    def __init__(
        self,
        session: Engine,
        dispatcher: ClientDispatcher,
        *,
        client_info: Implementation,
        default_timeout: float | None = None,
        tasks: bool = True,
        extensions: Iterable[ClientExtension] = (),
    ) -> None:
        self.session = session
        self._dispatcher = dispatcher
        self.client_info = client_info
        self.default_timeout = default_timeout
        self.initialize_result: InitializeResult | None = None
        #: ``Era.HANDSHAKE`` after an initialize handshake, ``Era.MODERN`` after server/discover.
        self.era = Era.HANDSHAKE
        self.discovered: DiscoverInfo | None = None
        #: How many InputRequiredResults one modern call may answer before giving up.
        self.max_input_rounds = 10
        #: The modern era's per-request log level (sent in the envelope when set).
        self.log_level: str | None = None
        #: Whether modern ``tools/call`` (and ``tasks/*``) requests declare the tasks extension.
        self.tasks = tasks
        #: The client halves of extensions (``ClientExtension``): the tasks extension's unless
        #: ``tasks=False``.
        self.extensions: list[ClientExtension] = []
        if tasks:
            self._use_tasks()
        for extension in extensions:
            if not extension.name:
                raise ValueError("a client extension needs a name (its key under 'extensions')")
            if any(e.name == extension.name for e in self.extensions):
                raise ValueError(f"a client extension named {extension.name!r} is already added")
            self.extensions.append(extension)

    # -- handshake -----------------------------------------------------------------------------

    async def _initialize(self, version: str, timeout: float | None) -> None:
        capabilities = to_wire(self._dispatcher.capabilities())
        # The handshake declares the extensions that declare themselves on ``initialize``.
        if entries := {e.name: e.capability() for e in self.extensions if e.declares("initialize")}:
            capabilities["extensions"] = {**capabilities.get("extensions", {}), **entries}
        params = {
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": to_wire(self.client_info),
        }
        # The spec forbids cancelling initialize: a timeout abandons it without a cancel.
        raw = await self._traced("initialize", params, max_total=timeout, cancellable=False)
        offered = raw.get("protocolVersion")
        if offered not in HANDSHAKE_VERSIONS:
            raise InitializeError(
                "Server initialization failed: unsupported protocol version "
                + (f'"{offered}"' if isinstance(offered, str) else repr(offered))
            )
        try:
            self.initialize_result = from_wire(raw, InitializeResult)
        except ValueError as exc:
            raise InitializeError(f"Server initialization failed: {exc}") from None
        await self.notify("notifications/initialized")

    async def _connect(
        self, mode: str, version: str, timeout: float | None, probe_timeout: float
    ) -> None:
        if mode == "legacy":
            await self._initialize(version, timeout)
            return
        caps = self._dispatcher.capabilities()
        if mode == "modern":
            await self._discover(version, timeout, fallback=False)
        elif not await self._discover(version, probe_timeout, fallback=True):
            await self._initialize(LATEST_HANDSHAKE_VERSION, timeout)
            return
        if caps.roots is not None or caps.sampling is not None:
            warnings.warn(
                "roots and sampling are deprecated in the modern protocol (2026-07-28); the "
                "server may still ask for them, but new code should not rely on them",
                DeprecationWarning,
                stacklevel=4,
            )

    async def _discover(self, version: str, timeout: float | None, *, fallback: bool) -> bool:
        """Connect in the modern era with ``server/discover``.

        With ``fallback`` (auto mode), any failure but a modern one means "speak the handshake
        instead" and returns False; -32022 naming a version we share is retried with it.
        """
        for attempt in range(2):
            params = {"_meta": self._envelope(version)}
            try:
                raw = await self._traced("server/discover", params, max_total=timeout)
            except ProtocolError as exc:
                # Retried once, even with the version just refused if the server names it as
                # supported (an instance behind the same URL may have been older).
                shared = _shared_modern_version(exc)
                if shared is not None and attempt == 0:
                    version = shared
                    continue
                if fallback:
                    return False
                raise InitializeError(f"server/discover failed: {exc.message}") from None
            except RequestTimeout:
                if fallback:
                    return False
                raise InitializeError("server/discover got no answer") from None
            info = DiscoverInfo.from_result(raw, version)
            if info is None:
                if fallback:
                    return False
                raise InitializeError(
                    f"no mutually supported modern protocol version (we speak {version})"
                )
            self.discovered = info
            self.era = Era.MODERN
            return True
        if fallback:
            return False
        raise InitializeError("no mutually supported modern protocol version")

    def _use_tasks(self) -> None:
        """The tasks extension's client half, which a client has unless ``tasks=False``."""
        from ..tasks import ClientTasks

        self.extensions.append(ClientTasks())

    def _envelope(
        self, version: str | None = None, *, declared: Iterable[ClientExtension] = ()
    ) -> JSONObject:
        caps = to_wire(self._dispatcher.capabilities())
        if entries := {e.name: e.capability() for e in declared}:
            caps["extensions"] = {**caps.get("extensions", {}), **entries}
        return make_envelope(
            version or (self.discovered.protocol_version if self.discovered else "2026-07-28"),
            caps,
            to_wire(self.client_info),
            self.log_level,
        )

    def _result(self) -> InitializeResult:
        if self.initialize_result is None:
            raise MCPError("the client is not connected")
        return self.initialize_result

    @property
    def modern(self) -> bool:
        """True when connected in the modern era (2026-07-28)."""
        return self.era is Era.MODERN

    @property
    def version_in_use(self) -> str | None:
        """The protocol version in use, or None before the connection has one."""
        if self.discovered is not None:
            return self.discovered.protocol_version
        return self.initialize_result.protocol_version if self.initialize_result else None

    @property
    def protocol_version(self) -> str:
        """The protocol version in use (after a handshake, the server's counter-offer if any)."""
        if self.discovered is not None:
            return self.discovered.protocol_version
        return self._result().protocol_version

    @property
    def server_info(self) -> Implementation:
        if self.discovered is not None:
            return self.discovered.server_info
        return self._result().server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        if self.discovered is not None:
            return self.discovered.capabilities
        return self._result().capabilities

    @property
    def instructions(self) -> str | None:
        if self.discovered is not None:
            return self.discovered.instructions
        return self._result().instructions

    # -- requests ------------------------------------------------------------------------------

    def new_request_id(self) -> RequestId:
        """A fresh request id, to pass as ``request_id=`` and later to :meth:`cancel`."""
        return self.session.new_request_id()

    def cancel(self, request_id: RequestId, reason: str | None = None) -> bool:
        """Cancel a pending request by id; its caller gets ``RequestCancelled``."""
        return self.session.cancel(request_id, reason)

    async def request(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
        max_total: float | None = None,
        request_id: RequestId | None = None,
        meta: JSONObject | None = None,
    ) -> JSONObject:
        """Send any request and return its raw result (the typed methods are built on this).

        ``timeout`` is an inactivity limit that progress notifications reset; ``max_total``
        bounds the whole call. Either expiring cancels the request on the wire and raises
        ``RequestTimeout``.
        """
        body = dict(params or {})
        if meta:
            body["_meta"] = {**body.get("_meta", {}), **meta}
        timeout = self.default_timeout if timeout is None else timeout
        cache = self._dispatcher.cache
        if cache is not None:
            cached = cache.get(method, body)
            if cached is not None:
                await trio.lowlevel.checkpoint()
                return cached
        observer = self.session.observer
        if observer is None:
            result = await self._send(method, body, on_progress, timeout, max_total, request_id)
        else:
            # One CLIENT span for the call, current across a modern call's rounds and the
            # answers to the server's questions: each round carries its context in _meta.
            with observer.sending(method, body) as call:
                if request_id is None:
                    request_id = self.session.new_request_id()
                call.sent(request_id)
                result = await self._send(
                    method, call.params or {}, on_progress, timeout, max_total, request_id
                )
                call.answered(result)
        if method == "tools/list" and self.era is Era.MODERN:
            result = _without_unusable_tools(result)
        if cache is not None:
            cache.put(method, body, result)
        return result

    async def _send(
        self,
        method: str,
        body: JSONObject,
        on_progress: ProgressCallback | None,
        timeout: float | None,
        max_total: float | None,
        request_id: RequestId | None,
    ) -> JSONObject:
        if self.era is Era.MODERN:
            return await self._modern_request(
                method, body, on_progress, timeout, max_total, request_id
            )
        return await self.session.request(
            method,
            body,
            on_progress=on_progress,
            timeout=timeout,
            max_total=max_total,
            request_id=request_id,
        )

    async def _traced(
        self, method: str, params: JSONObject, *, max_total: float | None, cancellable: bool = True
    ) -> JSONObject:
        """A request of the connection's own (``initialize``, ``server/discover``), in a CLIENT
        span when something listens."""
        observer = self.session.observer
        if observer is None:
            return await self.session.request(
                method, params, max_total=max_total, cancellable=cancellable
            )
        with observer.sending(method, params) as call:
            request_id = self.session.new_request_id()
            call.sent(request_id)
            return await self.session.request(
                method,
                call.params,
                max_total=max_total,
                cancellable=cancellable,
                request_id=request_id,
            )

    async def _modern_request(
        self,
        method: str,
        body: JSONObject,
        on_progress: ProgressCallback | None,
        timeout: float | None,
        max_total: float | None,
        request_id: RequestId | None,
    ) -> JSONObject:
        """One modern call: the envelope on every round, and the input-required loop.

        Each InputRequiredResult is fulfilled through the same callbacks the handshake era
        uses (concurrently, in the caller's scope, so cancelling the caller cancels them), then
        retried with a new id, the answers, and the requestState echoed untouched.
        """
        deadline = math.inf if max_total is None else trio.current_time() + max_total
        declared = [e for e in self.extensions if e.declares(method)]
        envelope = self._envelope(declared=declared)
        retry: JSONObject = {}
        for round_number in range(self.max_input_rounds + 1):
            user_meta = body.get("_meta")
            meta = {**(user_meta if isinstance(user_meta, dict) else {}), **envelope}
            remaining = None if deadline == math.inf else max(0.0, deadline - trio.current_time())
            result = await self.session.request(
                method,
                {**body, **retry, "_meta": meta},
                on_progress=on_progress,
                timeout=timeout,
                max_total=remaining,
                request_id=request_id if round_number == 0 else None,
            )
            kind = result.get("resultType", "complete")
            if kind == "complete" or any(e.accepts(method, kind) for e in declared):
                return result
            if kind != "input_required":
                raise MCPError(f"the server answered {method} with an unknown resultType {kind!r}")
            requests = result.get("inputRequests") or {}
            if not isinstance(requests, dict):
                raise MCPError("the server sent malformed inputRequests")
            retry = {}
            if requests:
                retry["inputResponses"] = await self._fulfil_all(requests)
            if "requestState" in result:
                retry["requestState"] = result["requestState"]
        raise MCPError(
            f"{method} still needed input after {self.max_input_rounds} rounds; giving up"
        )

    async def _fulfil_all(self, requests: dict[str, Any]) -> JSONObject:
        answers: JSONObject = {}
        for request in requests.values():
            method = request.get("method") if isinstance(request, dict) else None
            if not isinstance(method, str) or not self._dispatcher.can_fulfil(method):
                raise MCPError(
                    f"the server needs input ({method!r}) that no callback of this client gives"
                )

        observer = self.session.observer

        async def one(key: str, request: dict[str, Any]) -> None:
            params = request.get("params")
            params = params if isinstance(params, dict) else {}
            if observer is None:
                answers[key] = await self._dispatcher.fulfil(request["method"], params)
                return
            with observer.answering(request["method"], params):
                answers[key] = await self._dispatcher.fulfil(request["method"], params)

        with collapse_exception_groups():
            async with trio.open_nursery() as nursery:
                for key, request in requests.items():
                    nursery.start_soon(one, key, request)
        return answers

    async def _call(
        self, method: str, params: JSONObject | None, options: RequestOptions
    ) -> JSONObject:
        return await self.request(method, params, **options)

    async def ping(self, **options: Unpack[RequestOptions]) -> None:
        """``ping``; the modern era removed it, so there a ``server/discover`` stands in."""
        await self._call("server/discover" if self.modern else "ping", None, options)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        **options: Unpack[RequestOptions],
    ) -> CallToolResult:
        """Call a tool. A tool's own failure is a result with ``is_error`` set, not an error.

        In the modern era a refusal for mismatched headers (-32020) usually means the tool's
        ``x-mcp-header`` declarations are unknown or stale: the tools are listed again and the
        call is made once more (the server refused it before running it).

        A server may answer a modern call with a task (the tasks extension, declared unless
        ``open_client(tasks=False)``): the task is followed to its end as :class:`ToolTask`
        does, and its result returned, so the caller sees a plain call. A ``failed`` task raises
        its error as ``ProtocolError``. Leaving early (the caller's scope cancelled, or
        ``max_total``, which bounds the whole call, expiring) sends ``tasks/cancel``.
        """
        max_total = options.get("max_total")
        deadline = math.inf if max_total is None else trio.current_time() + max_total
        raw = await self._tool_call(name, arguments, options)
        kind = raw.get("resultType", "complete")
        if kind != "complete":
            for extension in self.extensions:
                if extension.declares("tools/call") and extension.accepts("tools/call", kind):
                    send, fulfil = self._sender(options), self._fulfil_all
                    try:
                        return await extension.follow_tool_call(name, raw, send, fulfil, deadline)
                    except trio.TooSlowError:
                        raise RequestTimeout(
                            "tools/call", options.get("timeout"), max_total
                        ) from None
        return result_from_wire(raw, CallToolResult)

    async def call_tool_task(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        **options: Unpack[RequestOptions],
    ) -> ToolTask:
        """Call a tool and return the task the server made of it, without waiting for its end.

        The :class:`ToolTask` has ``task_id`` and ``status``, and ``refresh()``, ``answer()``,
        ``cancel()`` and ``result()``. When the server answers at once (any handshake-era call,
        a tool that is not task-capable, ``open_client(tasks=False)``), ``task_id`` is None and
        the handle is already ``completed``. Its requests use this call's ``timeout``.
        """
        from ..tasks import ToolTask

        raw = await self._tool_call(name, arguments, options)
        return ToolTask(name, raw, self._sender(options), self._fulfil_all)

    async def _tool_call(
        self, name: str, arguments: dict[str, Any] | None, options: RequestOptions
    ) -> JSONObject:
        """A ``tools/call``'s raw answer; made again once after a header mismatch (-32020)."""
        params: JSONObject = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        try:
            raw = await self._call("tools/call", params, options)
        except ProtocolError as exc:
            if exc.code != HEADER_MISMATCH or not self.modern:
                raise
            if self._dispatcher.cache is not None:
                self._dispatcher.cache.invalidate("notifications/tools/list_changed", {})
            await self.list_tools()
            raw = await self._call("tools/call", params, {**options, "request_id": None})
        return raw

    def _sender(self, options: RequestOptions) -> Requester:
        """Sends an extension's follow-up requests of a call, with the call's ``timeout``."""
        timeout = options.get("timeout")

        async def send(method: str, params: JSONObject) -> JSONObject:
            return await self.request(method, params, timeout=timeout)

        return send

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> GetPromptResult:
        params: JSONObject = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return result_from_wire(await self._call("prompts/get", params, options), GetPromptResult)

    async def read_resource(
        self,
        uri: str,
        **options: Unpack[RequestOptions],
    ) -> ReadResourceResult:
        raw = await self._call("resources/read", {"uri": uri}, options)
        return result_from_wire(raw, ReadResourceResult)

    async def subscribe_resource(
        self,
        uri: str,
        **options: Unpack[RequestOptions],
    ) -> None:
        await self._call("resources/subscribe", {"uri": uri}, options)

    async def unsubscribe_resource(
        self,
        uri: str,
        **options: Unpack[RequestOptions],
    ) -> None:
        await self._call("resources/unsubscribe", {"uri": uri}, options)

    async def set_logging_level(
        self,
        level: str,
        **options: Unpack[RequestOptions],
    ) -> None:
        """``logging/setLevel``; in the modern era the level travels with every request."""
        if level not in LOGGING_LEVELS:
            raise ValueError(f"level must be one of {LOGGING_LEVELS}")
        if self.modern:
            self.log_level = level
            return
        await self._call("logging/setLevel", {"level": level}, options)

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: str,
        value: str,
        *,
        context_arguments: dict[str, str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> Completion:
        params: JSONObject = {"ref": to_wire(ref), "argument": {"name": argument, "value": value}}
        if context_arguments is not None:
            params["context"] = {"arguments": context_arguments}
        raw = await self._call("completion/complete", params, options)
        return result_from_wire(raw, CompleteResult).completion

    @asynccontextmanager
    async def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        max_relistens: int = 5,
    ) -> AsyncIterator[Subscription]:
        """Subscribe to change notifications (modern ``subscriptions/listen``).

        Iterate the subscription for its notifications; leaving the block ends it (the listen
        request is cancelled, which is how the protocol ends one). If the server drops it, it
        is re-sent, up to ``max_relistens`` times in a row.
        """
        if not self.modern:
            raise MCPError(
                "subscriptions/listen is a modern-era method; in the handshake era use "
                "on_notification= and subscribe_resource()"
            )
        wanted: JSONObject = {}
        if tools:
            wanted["toolsListChanged"] = True
        if prompts:
            wanted["promptsListChanged"] = True
        if resources:
            wanted["resourcesListChanged"] = True
        if resource_uris:
            wanted["resourceSubscriptions"] = list(resource_uris)
        subscription = Subscription()

        async def run() -> None:
            failures = 0
            while True:
                rid = self.new_request_id()
                self._dispatcher.listeners[rid] = subscription
                try:
                    await self.request(
                        "subscriptions/listen", {"notifications": wanted}, request_id=rid
                    )
                    return  # the server ended the subscription
                except ProtocolError as exc:
                    if exc.code != INTERNAL_ERROR or failures >= max_relistens:
                        raise
                    failures += 1
                    await trio.sleep(min(2.0**failures / 10, 5.0))
                finally:
                    self._dispatcher.listeners.pop(rid, None)

        with collapse_exception_groups():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                try:
                    yield subscription
                finally:
                    nursery.cancel_scope.cancel()
                    subscription.close()

    async def notify_roots_list_changed(self) -> None:
        await self.notify("notifications/roots/list_changed")

    async def notify(self, method: str, params: JSONObject | None = None) -> None:
        observer = self.session.observer
        if observer is not None:  # a CLIENT span, and its context in the params' _meta
            params = observer.notifying(method, params)
        await self.session.notify(method, params)

    # -- lists ---------------------------------------------------------------------------------

    async def list_tools_page(
        self, cursor: str | None = None, **options: Unpack[RequestOptions]
    ) -> ListToolsResult:
        return await self._page("tools/list", ListToolsResult, cursor, options)

    async def list_prompts_page(
        self, cursor: str | None = None, **options: Unpack[RequestOptions]
    ) -> ListPromptsResult:
        return await self._page("prompts/list", ListPromptsResult, cursor, options)

    async def list_resources_page(
        self, cursor: str | None = None, **options: Unpack[RequestOptions]
    ) -> ListResourcesResult:
        return await self._page("resources/list", ListResourcesResult, cursor, options)

    async def list_resource_templates_page(
        self, cursor: str | None = None, **options: Unpack[RequestOptions]
    ) -> ListResourceTemplatesResult:
        return await self._page(
            "resources/templates/list", ListResourceTemplatesResult, cursor, options
        )

    async def list_tools(self, **options: Unpack[RequestOptions]) -> list[Tool]:
        """Every tool, walking all pages (likewise ``list_prompts``, ``list_resources`` and
        ``list_resource_templates``); a cursor the server repeats is a ``PaginationError``."""
        pages = await self._walk(lambda cursor: self.list_tools_page(cursor, **options))
        return [each for page in pages for each in page.tools]

    async def list_prompts(self, **options: Unpack[RequestOptions]) -> list[Prompt]:
        pages = await self._walk(lambda cursor: self.list_prompts_page(cursor, **options))
        return [each for page in pages for each in page.prompts]

    async def list_resources(self, **options: Unpack[RequestOptions]) -> list[Resource]:
        pages = await self._walk(lambda cursor: self.list_resources_page(cursor, **options))
        return [each for page in pages for each in page.resources]

    async def list_resource_templates(
        self, **options: Unpack[RequestOptions]
    ) -> list[ResourceTemplate]:
        pages = await self._walk(
            lambda cursor: self.list_resource_templates_page(cursor, **options)
        )
        return [each for page in pages for each in page.resource_templates]

    async def _page(
        self, method: str, cls: type[T], cursor: str | None, options: RequestOptions
    ) -> T:
        params = {"cursor": cursor} if cursor is not None else None
        return result_from_wire(await self._call(method, params, options), cls)

    async def _walk(self, fetch: Callable[[str | None], Awaitable[P]]) -> list[P]:
        """Every page of a list, following the cursors."""
        pages: list[P] = []
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = await fetch(cursor)
            pages.append(page)
            cursor = page.next_cursor
            if cursor is None:
                return pages
            if cursor in seen:
                raise PaginationError(f"the server repeated the cursor {cursor!r}")
            seen.add(cursor)


MODES = ("auto", "legacy", "modern")


def resolve_mode(mode: str | None, protocol_version: str | None) -> tuple[str, str]:
    """The connect mode and the version to offer; bad combinations fail before anything starts.

    No mode: an explicit modern version means modern (it never falls back to the handshake),
    anything else the handshake. ``auto`` probes ``server/discover`` and falls back.
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if protocol_version in MODERN_VERSIONS:
        if mode == "legacy":
            check_pin(protocol_version)  # raises: a modern version has no handshake
        return "modern", protocol_version
    if mode == "modern":
        if protocol_version is not None:
            raise ValueError(
                f"protocol version {protocol_version!r} is a handshake version; modern mode "
                f"speaks {', '.join(MODERN_VERSIONS)}"
            )
        return "modern", LATEST_MODERN_VERSION
    if mode == "auto":
        if protocol_version is not None:
            check_pin(protocol_version)
            return "legacy", protocol_version  # an explicit handshake version: no probe
        return "auto", LATEST_MODERN_VERSION
    return "legacy", check_pin(protocol_version)


def open_client(
    target: Target,
    *,
    client_info: Implementation | None = None,
    protocol_version: str | None = None,
    mode: str | None = None,
    probe_timeout: float = 5.0,
    cache: bool = False,
    on_sample: Callback | None = None,
    on_elicit: Callback | None = None,
    roots: RootsSource | None = None,
    on_log: Callback | None = None,
    on_notification: Callback | None = None,
    default_timeout: float | None = None,
    tasks: bool = True,
    extensions: Iterable[ClientExtension] = (),
    initialize_timeout: float | None = 60.0,
    **moved: Unpack[MovedOptions],
) -> AbstractAsyncContextManager[Client]:
    """Connect to ``target`` and perform the handshake: ``async with open_client(...) as c``.

    ``target`` is one of:

    - a :class:`~trio_mcp.Server`, or anything else with its ``serve_transport``
      (:class:`Servable`): served in memory, inside this context;
    - a :class:`Command` (or, with its defaults, a program alone as a string, or a list of the
      program and its arguments): spawned as a child process in its own process group and
      spoken to over stdio;
    - an :class:`HttpTarget` (or an ``http(s)://`` URL): Streamable HTTP, falling back to
      HTTP+SSE for a 2024-11-05 server. If the server forgets the session (HTTP 404), a new
      one is started and safe requests are repeated; others fail with ``ProtocolError`` code
      ``SESSION_EXPIRED``;
    - a :class:`WebSocketTarget` (or a ``ws(s)://`` URL): WebSocket;
    - a :class:`~trio_mcp.lowlevel.Transport` (its ``close()``, if it has one, is called on
      exit).

    The settings of a transport live with its target (``Command(argv, env=..., cwd=...)``,
    ``HttpTarget(url, headers=..., auth=...)``); those keywords given here with a string or
    list target still work, with a ``DeprecationWarning``, and are a ``TypeError`` naming
    their home anywhere else.

    ``tasks`` (on by default) declares the tasks extension on modern ``tools/call`` requests,
    so a server may answer one with a task; ``call_tool`` then polls it to its end, so its
    callers see an ordinary call (see ``Client.call_tool_task`` for the task itself).

    ``extensions``: the client halves of more extensions (:class:`ClientExtension`), declared
    in ``initialize`` and on the modern requests each says it declares (the MCP Apps
    extension's is :class:`trio_mcp.apps.ClientApps`).
    """
    # Read here, not on entry: a deprecated spelling is reported at the caller's line.
    resolved = resolve_target(target, moved)
    return _open_client(
        resolved,
        client_info=client_info or DEFAULT_CLIENT_INFO,
        modes=(mode, protocol_version, initialize_timeout, probe_timeout),
        default_timeout=default_timeout,
        tasks=tasks,
        extensions=tuple(extensions),
        cache=cache,
        dispatcher=ClientDispatcher(
            on_sample=on_sample,
            on_elicit=on_elicit,
            roots=roots,
            on_log=on_log,
            on_notification=on_notification,
        ),
    )


@asynccontextmanager
async def _open_client(
    target: Resolved,
    *,
    client_info: Implementation,
    modes: tuple[str | None, str | None, float | None, float],
    default_timeout: float | None,
    tasks: bool,
    extensions: tuple[ClientExtension, ...],
    cache: bool,
    dispatcher: ClientDispatcher,
) -> AsyncIterator[Client]:
    wanted, protocol_version, initialize_timeout, probe_timeout = modes
    mode, version = resolve_mode(wanted, protocol_version)
    if cache:
        dispatcher.cache = ResultCache()
    transport = target.transport if isinstance(target, HttpTarget) else None
    if transport == "sse" and mode == "modern":
        raise ValueError("the HTTP+SSE transport has no modern era: it speaks the handshake")
    connect = functools.partial(
        _connected,
        target,
        dispatcher,
        client_info=client_info,
        default_timeout=default_timeout,
        tasks=tasks,
        extensions=extensions,
        connect=(mode, version, initialize_timeout, probe_timeout),
    )
    with collapse_exception_groups():
        if transport != "sse":
            try:
                async with connect(transport or "streamable-http") as client:
                    yield client
                return
            except _LegacyHttp:
                if transport is not None:
                    raise ConnectionClosed(
                        f"{target} answered the Streamable HTTP initialize as an HTTP+SSE "
                        "server does (HTTP 400, 404 or 405): connect with transport='sse'"
                    ) from None
        # The server is not a Streamable HTTP one: the 2024-11-05 HTTP+SSE transport, whose
        # GET of the same URL names the endpoint to POST to (the spec's fallback). It speaks
        # the handshake only: nothing is probed.
        if mode == "auto":
            mode, version = "legacy", LATEST_HANDSHAKE_VERSION
        connect = functools.partial(
            connect, connect=(mode, version, initialize_timeout, probe_timeout)
        )
        async with connect("sse") as client:
            yield client


#: The HTTP statuses of a POST ``initialize`` that say "an HTTP+SSE server" (the spec's list).
LEGACY_STATUSES = (400, 404, 405)


class _LegacyHttp(Exception):
    """A Streamable HTTP attempt got the legacy signals: retry over HTTP+SSE."""


@asynccontextmanager
async def _connected(
    target: Resolved,
    dispatcher: ClientDispatcher,
    kind: str,
    *,
    client_info: Implementation,
    default_timeout: float | None,
    tasks: bool,
    extensions: tuple[ClientExtension, ...],
    connect: tuple[str, str, float | None, float],
) -> AsyncIterator[Client]:
    """One attempt: the transport of ``kind`` (for a URL), its session, the handshake."""
    connected = False
    try:
        async with trio.open_nursery() as nursery:
            try:
                async with _connect(target, nursery, kind=kind) as transport:
                    clients: list[Client] = []
                    observer = observe(
                        "client",
                        _transport_name(target, kind),
                        network=_network_of(target),
                        version=lambda: clients[0].version_in_use if clients else None,
                        session_id=lambda: getattr(transport, "session_id", None),
                    )
                    session = Engine(transport, dispatcher, observer=observer)
                    await nursery.start(session.run)
                    client = Client(
                        session,
                        dispatcher,
                        client_info=client_info,
                        default_timeout=default_timeout,
                        tasks=tasks,
                        extensions=extensions,
                    )
                    clients.append(client)
                    if observer is not None:
                        observer.session_started()
                    try:
                        await client._connect(*connect)
                    except (ProtocolError, InitializeError, ConnectionClosed):
                        status = getattr(transport, "initialize_status", None)
                        if kind == "streamable-http" and status in LEGACY_STATUSES:
                            raise _LegacyHttp from None
                        raise
                    connected = True
                    try:
                        yield client
                    finally:
                        if observer is not None:
                            observer.session_ended()
                        # Write what was already decided (a cancel, say) before hanging up.
                        with trio.CancelScope(shield=True):
                            await session.flush(1.0)
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if not connected and isinstance(single_error(group), _LegacyHttp):
            raise _LegacyHttp from None
        raise


def _transport_name(target: Resolved, kind: str) -> str:
    """Our name of a target's wire, for the instrumentation."""
    if isinstance(target, WebSocketTarget):
        return "websocket"
    if isinstance(target, HttpTarget):
        return "sse" if kind == "sse" else "streamable-http"
    if isinstance(target, Command):
        return "stdio"
    return "memory"


def _network_of(target: Resolved) -> dict[str, str | int]:
    """The conventions' ``server.address`` and ``server.port`` of a URL target."""
    if not isinstance(target, HttpTarget | WebSocketTarget):
        return {}
    url = urlsplit(str(target.url))
    if not url.hostname:
        return {}
    found: dict[str, str | int] = {"server.address": url.hostname}
    port = url.port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(url.scheme)
    if port is not None:
        found["server.port"] = port
    return found


@asynccontextmanager
async def _connect(
    target: Resolved, nursery: trio.Nursery, *, kind: str = "streamable-http"
) -> AsyncIterator[Transport]:
    """The transport of ``target``, open for the duration of the block."""
    if isinstance(target, WebSocketTarget):
        async with open_ws_transport(
            target.url, headers=target.headers, close_timeout=target.close_timeout
        ) as ws_transport:
            yield ws_transport
    elif isinstance(target, HttpTarget):
        from ..transports._http_client import open_http_transport
        from ..transports._sse_client import open_sse_transport

        opener = open_sse_transport if kind == "sse" else open_http_transport
        async with opener(
            target.url,
            nursery,
            headers=target.headers,
            http_client=target.http_client,
            auth=target.auth,
            close_timeout=target.close_timeout,
        ) as http_transport:
            yield http_transport
    elif isinstance(target, Command):
        async with open_process_transport(
            target.argv,
            nursery,
            env=target.env,
            cwd=target.cwd,
            stderr=target.stderr,
            max_line_bytes=target.max_line_bytes,
            close_timeout=target.close_timeout,
            terminate_timeout=target.terminate_timeout,
        ) as process_transport:
            yield process_transport
    elif isinstance(target, Servable):
        ours, theirs = memory_transport_pair()
        nursery.start_soon(target.serve_transport, theirs)
        try:
            yield ours
        finally:
            ours.close()
    elif isinstance(target, Transport):
        try:
            yield target
        finally:
            close = getattr(target, "close", None)
            if callable(close):
                close()
    else:
        raise TypeError(
            f"cannot connect to {target!r}: expected a Server (anything with serve_transport), "
            "a Command, an HttpTarget, a WebSocketTarget or a transport (see "
            "trio_mcp.lowlevel.BaseTransport)"
        )
