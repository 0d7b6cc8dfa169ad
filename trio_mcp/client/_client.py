"""The client: ``open_client`` connects, performs the handshake and hands out a ``Client``.

Every call runs in the caller's task: cancelling the caller's scope cancels the request on the
wire. Requests the server sends us (sampling, elicitation, roots) are answered by callbacks that
each run in their own task under their own scope, so the server's ``notifications/cancelled``
stops them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._exceptions import MCPError, ProtocolError, collapse_exception_groups
from .._session import InFlight, ProgressCallback, Route, Session, Transport
from ..protocol._jsonrpc import METHOD_NOT_FOUND, JSONObject, Notification, Request, RequestId
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
    to_wire,
)
from ..protocol._versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_VERSIONS
from ..transports._stdio import DEFAULT_MAX_LINE_BYTES, StderrTarget, open_process_transport

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("trio_mcp.client")

T = TypeVar("T")
Callback = Callable[..., Any]
RootsSource = Sequence[Root] | Callable[[], Awaitable[Sequence[Root]] | Sequence[Root]]

DEFAULT_CLIENT_INFO = Implementation(name="trio-mcp", version="0.1.0")


class InitializeError(MCPError):
    """The handshake failed; the client is not connected."""


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

    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            sampling={} if self.on_sample is not None else None,
            elicitation={"form": {}, "url": {}} if self.on_elicit is not None else None,
            roots={"listChanged": True} if self.roots is not None else None,
        )

    def route(self, request: Request, session: Session) -> Route:
        method = request.method
        if method == "ping":
            return Route(self._ping)
        if method == "sampling/createMessage" and self.on_sample is not None:
            return Route(self._sample)
        if method == "elicitation/create" and self.on_elicit is not None:
            return Route(self._elicit)
        if method == "roots/list" and self.roots is not None:
            return Route(self._roots)
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)

    async def _ping(self, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        return {}

    async def _sample(self, record: InFlight) -> JSONObject:
        assert self.on_sample is not None
        params = _structure_params(record.params, CreateMessageRequestParams)
        result = await _maybe_await(self.on_sample(params))
        return _result_wire(result, CreateMessageResult)

    async def _elicit(self, record: InFlight) -> JSONObject:
        assert self.on_elicit is not None
        cls: type[Any] = (
            ElicitRequestURLParams
            if record.params.get("mode") == "url"
            else ElicitRequestFormParams
        )
        params = _structure_params(record.params, cls)
        result = await _maybe_await(self.on_elicit(params))
        return _result_wire(result, ElicitResult)

    async def _roots(self, record: InFlight) -> JSONObject:
        roots = self.roots
        listed = await _maybe_await(roots()) if callable(roots) else roots
        await trio.lowlevel.checkpoint()
        return {"roots": [to_wire(root) for root in listed or ()]}

    def on_notification(self, notification: Notification, session: Session) -> None:
        params = notification.params or {}
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
        raise ProtocolError(-32602, f"Invalid params: {exc}") from None


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
        session: Session,
        dispatcher: ClientDispatcher,
        *,
        client_info: Implementation,
        default_timeout: float | None = None,
    ) -> None:
        self.session = session
        self._dispatcher = dispatcher
        self.client_info = client_info
        self.default_timeout = default_timeout
        self.initialize_result: InitializeResult | None = None

    # -- handshake -----------------------------------------------------------------------------

    async def _initialize(self, version: str, timeout: float | None) -> None:
        params = {
            "protocolVersion": version,
            "capabilities": to_wire(self._dispatcher.capabilities()),
            "clientInfo": to_wire(self.client_info),
        }
        # The spec forbids cancelling initialize: a timeout abandons it without a cancel.
        raw = await self.session.request("initialize", params, max_total=timeout, cancellable=False)
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
        await self.session.notify("notifications/initialized")

    def _result(self) -> InitializeResult:
        if self.initialize_result is None:
            raise MCPError("the client is not connected")
        return self.initialize_result

    @property
    def protocol_version(self) -> str:
        """The negotiated protocol version (the server's counter-offer, if it made one)."""
        return self._result().protocol_version

    @property
    def server_info(self) -> Implementation:
        return self._result().server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self._result().capabilities

    @property
    def instructions(self) -> str | None:
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
        return await self.session.request(
            method,
            body,
            on_progress=on_progress,
            timeout=self.default_timeout if timeout is None else timeout,
            max_total=max_total,
            request_id=request_id,
        )

    async def ping(self, **options: Any) -> None:
        await self.request("ping", None, **options)

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, **options: Any
    ) -> CallToolResult:
        """Call a tool. A tool's own failure is a result with ``is_error`` set, not an error."""
        params: JSONObject = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return from_wire(await self.request("tools/call", params, **options), CallToolResult)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None, **options: Any
    ) -> GetPromptResult:
        params: JSONObject = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return from_wire(await self.request("prompts/get", params, **options), GetPromptResult)

    async def read_resource(self, uri: str, **options: Any) -> ReadResourceResult:
        raw = await self.request("resources/read", {"uri": uri}, **options)
        return from_wire(raw, ReadResourceResult)

    async def subscribe_resource(self, uri: str, **options: Any) -> None:
        await self.request("resources/subscribe", {"uri": uri}, **options)

    async def unsubscribe_resource(self, uri: str, **options: Any) -> None:
        await self.request("resources/unsubscribe", {"uri": uri}, **options)

    async def set_logging_level(self, level: str, **options: Any) -> None:
        if level not in LOGGING_LEVELS:
            raise ValueError(f"level must be one of {LOGGING_LEVELS}")
        await self.request("logging/setLevel", {"level": level}, **options)

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: str,
        value: str,
        *,
        context_arguments: dict[str, str] | None = None,
        **options: Any,
    ) -> Completion:
        params: JSONObject = {"ref": to_wire(ref), "argument": {"name": argument, "value": value}}
        if context_arguments is not None:
            params["context"] = {"arguments": context_arguments}
        raw = await self.request("completion/complete", params, **options)
        return from_wire(raw, CompleteResult).completion

    async def notify_roots_list_changed(self) -> None:
        await self.session.notify("notifications/roots/list_changed")

    async def notify(self, method: str, params: JSONObject | None = None) -> None:
        await self.session.notify(method, params)

    # -- lists ---------------------------------------------------------------------------------

    async def list_tools_page(self, cursor: str | None = None, **options: Any) -> ListToolsResult:
        return await self._page("tools/list", ListToolsResult, cursor, options)

    async def list_prompts_page(
        self, cursor: str | None = None, **options: Any
    ) -> ListPromptsResult:
        return await self._page("prompts/list", ListPromptsResult, cursor, options)

    async def list_resources_page(
        self, cursor: str | None = None, **options: Any
    ) -> ListResourcesResult:
        return await self._page("resources/list", ListResourcesResult, cursor, options)

    async def list_resource_templates_page(
        self, cursor: str | None = None, **options: Any
    ) -> ListResourceTemplatesResult:
        return await self._page(
            "resources/templates/list", ListResourceTemplatesResult, cursor, options
        )

    async def list_tools(self, **options: Any) -> list[Tool]:
        """Every tool, walking all pages."""
        return await self._walk(self.list_tools_page, "tools", options)

    async def list_prompts(self, **options: Any) -> list[Prompt]:
        return await self._walk(self.list_prompts_page, "prompts", options)

    async def list_resources(self, **options: Any) -> list[Resource]:
        return await self._walk(self.list_resources_page, "resources", options)

    async def list_resource_templates(self, **options: Any) -> list[ResourceTemplate]:
        return await self._walk(self.list_resource_templates_page, "resource_templates", options)

    async def _page(
        self, method: str, cls: type[T], cursor: str | None, options: dict[str, Any]
    ) -> T:
        params = {"cursor": cursor} if cursor is not None else None
        return from_wire(await self.request(method, params, **options), cls)

    async def _walk(
        self, fetch: Callable[..., Awaitable[Any]], field: str, options: dict[str, Any]
    ) -> list[Any]:
        items: list[Any] = []
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            result = await fetch(cursor, **options)
            items.extend(getattr(result, field))
            cursor = result.next_cursor
            if cursor is None:
                return items
            if cursor in seen:
                raise PaginationError(f"the server repeated the cursor {cursor!r}")
            seen.add(cursor)


def check_offer(protocol_version: str | None) -> str:
    """The handshake version to offer; a modern version is refused before anything starts."""
    if protocol_version is None:
        return LATEST_HANDSHAKE_VERSION
    if protocol_version in MODERN_VERSIONS:
        raise ValueError(
            f"protocol version {protocol_version!r} cannot be negotiated through the legacy "
            "`initialize` handshake; it is a modern version, reached without a handshake"
        )
    if protocol_version not in HANDSHAKE_VERSIONS:
        raise ValueError(
            f"unknown protocol version {protocol_version!r}; use one of "
            + ", ".join(HANDSHAKE_VERSIONS)
        )
    return protocol_version


@asynccontextmanager
async def open_client(
    target: Any,
    *,
    client_info: Implementation | None = None,
    protocol_version: str | None = None,
    on_sample: Callback | None = None,
    on_elicit: Callback | None = None,
    roots: RootsSource | None = None,
    on_log: Callback | None = None,
    on_notification: Callback | None = None,
    default_timeout: float | None = None,
    initialize_timeout: float | None = 60.0,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stderr: StderrTarget = "inherit",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    close_timeout: float = 2.0,
    terminate_timeout: float = 2.0,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> AsyncIterator[Client]:
    """Connect to ``target`` and perform the handshake.

    ``target`` is one of:

    - a :class:`~trio_mcp.Server`: served in memory, inside this context;
    - a command (a list of strings): spawned as a child process in its own process group and
      spoken to over stdio (``env`` adds to the environment, ``cwd``, ``stderr`` is
      ``"inherit"``, ``"discard"``, a path or file, or a callable given each line). On exit its
      stdin is closed, then it is sent SIGTERM after ``close_timeout``, then SIGKILL after
      ``terminate_timeout``; nothing it started is left behind;
    - an ``http://`` or ``https://`` URL: Streamable HTTP. ``headers`` are sent with every
      HTTP request; ``http_client`` is an ``httpx.AsyncClient`` to reuse (left open). On exit
      the session is ended with a DELETE bounded by ``close_timeout``. If the server forgets
      the session (HTTP 404), a new one is started and safe requests are repeated; others
      fail with ``ProtocolError`` code -32001 ("Session expired: ...");
    - a transport object (``send``/``receive``/``request_suppressed``, optional ``close``).
    """
    version = check_offer(protocol_version)
    dispatcher = ClientDispatcher(
        on_sample=on_sample,
        on_elicit=on_elicit,
        roots=roots,
        on_log=on_log,
        on_notification=on_notification,
    )
    process_options: dict[str, Any] = {
        "env": env,
        "cwd": cwd,
        "stderr": stderr,
        "max_line_bytes": max_line_bytes,
        "close_timeout": close_timeout,
        "terminate_timeout": terminate_timeout,
    }
    http_options: dict[str, Any] = {"headers": headers, "http_client": http_client}
    with collapse_exception_groups():
        async with trio.open_nursery() as nursery:
            try:
                async with _connect(target, nursery, process_options, http_options) as transport:
                    session = Session(transport, dispatcher)
                    await nursery.start(session.run)
                    client = Client(
                        session,
                        dispatcher,
                        client_info=client_info or DEFAULT_CLIENT_INFO,
                        default_timeout=default_timeout,
                    )
                    await client._initialize(version, initialize_timeout)
                    try:
                        yield client
                    finally:
                        # Write what was already decided (a cancel, say) before hanging up.
                        with trio.CancelScope(shield=True):
                            await session.flush(1.0)
            finally:
                nursery.cancel_scope.cancel()


@asynccontextmanager
async def _connect(
    target: Any,
    nursery: trio.Nursery,
    process_options: dict[str, Any],
    http_options: dict[str, Any] | None = None,
) -> AsyncIterator[Transport]:
    from ..server._server import Server
    from ..transports._memory import memory_transport_pair

    http_options = {k: v for k, v in (http_options or {}).items() if v is not None}
    is_url = isinstance(target, str) and target.lower().startswith(("http://", "https://"))
    if http_options and not is_url:
        raise TypeError("headers= and http_client= apply only to an http(s) URL target")
    if is_url:
        from ..transports._http_client import open_http_transport

        async with open_http_transport(
            target,
            nursery,
            close_timeout=process_options.get("close_timeout", 2.0),
            **http_options,
        ) as http_transport:
            yield http_transport
    elif isinstance(target, Server):
        ours, theirs = memory_transport_pair()
        nursery.start_soon(target.serve_transport, theirs)
        try:
            yield ours
        finally:
            ours.close()
    elif isinstance(target, list | tuple) and all(isinstance(a, str) for a in target):
        async with open_process_transport(target, nursery, **process_options) as transport:
            yield transport
    elif callable(getattr(target, "send", None)) and callable(getattr(target, "receive", None)):
        try:
            yield target
        finally:
            close = getattr(target, "close", None)
            if callable(close):
                close()
    else:
        raise TypeError(
            f"cannot connect to {target!r}: expected a Server, a command (list of strings), "
            "an http(s) URL or a transport"
        )
