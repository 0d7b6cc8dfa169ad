"""``Server``: what an MCP server offers, declared with decorators, served on any transport."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar, overload

import orjson
import trio

from .._engine import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED_BYTES, Engine
from ..otel import observe
from ..protocol._bearer import BadCredential
from ..protocol._envelope import CacheHints
from ..protocol._errors import MCPError
from ..protocol._request_state import StateSealer
from ..protocol._types import (
    CallToolResult,
    Icon,
    Implementation,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    Tool,
    ToolAnnotations,
    to_wire,
)
from ..protocol._versions import check_pin
from ..transports._transport import Transport
from ._bus import (
    LIST_CHANGED,
    RESOURCE_UPDATED,
    RESYNC,
    BusEvent,
    LocalBus,
    NotificationBus,
    Notifier,
)
from ._connection import DEFAULT_MAX_LISTENS, ServerConnection
from ._context import Context
from ._extensions import Extension, Extensions
from ._hosting import Hosting
from ._lifespan import Lifespan, LifespanFailed, LifespanFunction
from ._media import MEDIA_TYPES
from ._middleware import Middleware
from ._mount import Mount, Mounts, Provider, ServerProvider
from ._principal import Auth, InvalidToken, Principal, VerifierUnavailable, check_scopes
from ._registry import (
    CONTENT_TYPES,
    CustomMethod,
    Listings,
    PromptEntry,
    RequestRecord,
    ResourceEntry,
    TemplateEntry,
    ToolEntry,
    compile_template,
    context_param,
    is_async_callable,
)
from ._request_log import log_request
from ._request_state_keys import STATE_KEYS_ENV, STATE_KEYS_FILE_ENV, server_state_keys
from ._schema import explicit_signature, function_signature
from ._session_state import (
    DEFAULT_STATE_MAX_BYTES,
    DEFAULT_STATE_MAX_VALUE_BYTES,
    DEFAULT_STATE_TTL,
    HostedSessionStateStore,
    MemorySessionStateStore,
    SessionStateStore,
    state_scope,
)
from ._state_claims import HostedStateClaims, MemoryStateClaims, StateClaims
from ._transform import ArgTransform, prompt_tools, resource_tools, transformed_tool
from ._visibility import Visibility

if TYPE_CHECKING:  # the binding, imported only by http_app() and run("http"): see test_layers
    from pathlib import Path

    import httpx

    from ..http import HttpOptions, McpHttpApp
    from ..tasks import TaskManager, TaskStore

F = TypeVar("F", bound=Callable[..., Any])

#: The version a server reports when it is given none. Not trio_mcp's own version (what
#: fastmcp and the official SDK report): clients show it as the server's, and a library's
#: release number would pass for a release of the server that it is not.
UNVERSIONED = "0.0.0"

#: Marks an output schema whose ``{"result": ...}`` object only wraps a non-object value.
WRAP_RESULT_MARK = "x-fastmcp-wrap-result"

#: Stands for a tasks option not given: the tasks extension's own default applies.
_TASKS_DEFAULT: Any = object()

logger = logging.getLogger("trio_mcp.server")


class Server:
    """An MCP server. Register what it offers, then serve it on a transport.

    >>> server = Server("demo", "1.0.0")
    >>> @server.tool()
    ... async def add(a: int, b: int) -> int:
    ...     return a + b

    Authorization: with ``Server(auth=Auth(...))`` every request acts for a principal, the
    caller its access token names (HTTP: the ``Authorization`` header of each request; stdio:
    the token of the environment, see :meth:`serve_stdio`). Each tool, prompt, resource and
    template may need scopes of its own (``scopes=`` on the decorators) on top of
    ``Auth.required_scopes``; scopes the token's scopes imply (``Auth.implied_scopes``) count.

    - Lists show what the caller may use: ``tools/list``, ``prompts/list``, ``resources/list``
      and ``resources/templates/list`` leave out the entries whose scopes it lacks.
    - A request reaching an entry whose scopes it lacks is refused before the handler runs:
      over HTTP with 403 ``insufficient_scope``; on every transport, inside the connection,
      with the JSON-RPC error -32600 "Forbidden: ..." naming the missing scopes (``data``:
      ``{"error": "insufficient_scope", "scope": <every scope it needs>}``). Without any
      principal only ``initialize``, ``ping`` and ``server/discover`` are answered
      (-32600 "Unauthorized: ...").
    - A multi round-trip ``requestState`` is sealed for the principal, and cacheable results
      say ``cacheScope: "private"`` (the configured ttl stays): results depend on who asks.

    ``middleware``: async functions around every request (``docs/middleware.md``);
    ``lifespan``: ``fn(server)``, an async context manager whose value handlers read as
    ``ctx.lifespan``, entered before anything is served (``docs/lifespan.md``).
    """

    def __init__(
        self,
        name: str,
        version: str = UNVERSIONED,
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: Iterable[Icon] | None = None,
        protocol_version: str | None = None,
        page_size: int | None = 100,
        on_request: Callable[[RequestRecord], None] | None = None,
        log_requests: bool = False,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        state_key: bytes | None = None,
        state_keys: Iterable[bytes] | None = None,
        state_audience: str | None = None,
        single_use_state: bool = False,
        state_claims: StateClaims | None = None,
        session_state_store: SessionStateStore | None = None,
        session_state_ttl: float = DEFAULT_STATE_TTL,
        session_state_max_bytes: int = DEFAULT_STATE_MAX_BYTES,
        session_state_max_value_bytes: int = DEFAULT_STATE_MAX_VALUE_BYTES,
        strict: bool = False,
        max_listens: int = DEFAULT_MAX_LISTENS,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        auth: Auth | None = None,
        bus: NotificationBus | None = None,
        task_store: TaskStore | None = None,
        task_ttl_ms: int | None = _TASKS_DEFAULT,
        max_tasks: int = _TASKS_DEFAULT,
        max_tasks_per_principal: int | None = _TASKS_DEFAULT,
        task_input_timeout: float | None = _TASKS_DEFAULT,
        extensions: Iterable[Extension] = (),
        middleware: Iterable[Middleware] = (),
        lifespan: LifespanFunction | None = None,
    ) -> None:
        self.info = Implementation(
            name=name,
            version=version,
            title=title,
            description=description,
            website_url=website_url,
            icons=list(icons) if icons is not None else None,
        )
        self.info_wire: dict[str, Any] = to_wire(self.info)
        self.instructions = instructions
        #: Cache hints for cacheable results: always sent in the modern era (default 0 and
        #: private); in the handshake era only when configured here.
        self.cache_hints = CacheHints.configure(ttl_ms, cache_scope)
        #: Seals (AES-256-GCM) the requestState of multi round-trip requests under a key ring:
        #: ``state_keys`` newest first (or the one ``state_key``), each at least 16 bytes (32
        #: random ones, say; the AES key is derived with HKDF-SHA256). The first seals, every one
        #: opens. Without either, the keys of ``TRIO_MCP_STATE_KEYS`` or
        #: ``TRIO_MCP_STATE_KEYS_FILE``; without those, a random key of this process. Give
        #: every replica behind a load balancer the same keys.
        keys, origin = server_state_keys(state_key, state_keys)
        self.state_sealer = StateSealer(keys)
        #: Where the keys came from (said in the log); None: drawn at random by this process.
        self.state_keys_origin = origin
        self._state_keys_logged = False
        self._state_audience = state_audience
        #: Whether a requestState opens once, for every request that takes input (a tool may
        #: choose for itself: ``@server.tool(single_use_state=...)``): a replayed retry is
        #: refused as a tampered one is. Claimed in ``state_claims``: a store every worker
        #: shares (``RedisStateClaims``) makes it hold across the fleet; the default,
        #: :class:`MemoryStateClaims`, holds in this process only.
        self.single_use_state = single_use_state
        self.state_claims: StateClaims = (
            state_claims if state_claims is not None else MemoryStateClaims()
        )
        #: Where ``ctx.session_state`` keeps what handlers store for their session: this
        #: process's memory by default; a store every worker shares
        #: (``RedisSessionStateStore``) for a fleet. Each scope lapses ``session_state_ttl``
        #: seconds after its last use and holds at most ``session_state_max_bytes`` (each
        #: value at most ``session_state_max_value_bytes``).
        self.session_state_store: SessionStateStore = (
            session_state_store if session_state_store is not None else MemorySessionStateStore()
        )
        if min(session_state_ttl, session_state_max_bytes, session_state_max_value_bytes) <= 0:
            raise ValueError("the session state's ttl and bounds must be positive")
        self.session_state_ttl = session_state_ttl
        self.session_state_max_bytes = session_state_max_bytes
        self.session_state_max_value_bytes = session_state_max_value_bytes
        #: The handshake version offered for clients asking for one we do not speak.
        self.protocol_version = check_pin(protocol_version)
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be a positive integer or None")
        self.page_size = page_size
        self.on_request = on_request
        #: Log one line per request on the ``trio_mcp.requests`` logger at INFO (method,
        #: target, id, outcome, duration, transport, session, principal: never arguments,
        #: results, tokens or header values), from the record ``on_request`` gets.
        self.log_requests = log_requests
        #: The default of ``@server.tool(strict=...)``: whether a string holding a number or a
        #: boolean is refused for an int, float or bool parameter (by default it is accepted).
        self.strict = strict
        if max_listens < 1:
            raise ValueError("max_listens must be a positive integer")
        #: How many modern ``subscriptions/listen`` requests one connection may have in flight;
        #: the next is refused with -32603 "Subscription limit reached" until one ends.
        self.max_listens = max_listens
        if max_in_flight < 1 or max_queued_bytes < 1:
            raise ValueError("max_in_flight and max_queued_bytes must be positive integers")
        #: Per connection on stdio and in memory: how many requests run at once (one more is
        #: refused with -32600), and how many bytes of answers may wait for the writer before
        #: the connection stops reading (so a peer that does not read blocks its own writes).
        self.max_in_flight = max_in_flight
        self.max_queued_bytes = max_queued_bytes
        #: Who may call what (HTTP: a bearer token on every request; stdio: a token from the
        #: environment). None: no authorization.
        self.auth = auth
        self.tools: dict[str, ToolEntry] = {}
        self.prompts: dict[str, PromptEntry] = {}
        self.resources: dict[str, ResourceEntry] = {}
        self.templates: dict[str, TemplateEntry] = {}
        #: The registries above as the list methods page through them.
        self.listings = Listings(self)
        #: The server's enable/disable rules (:meth:`enable`, :meth:`disable`).
        self.visibility = Visibility()
        self.completion_handler: CustomMethod | None = None
        self.custom_methods: dict[str, CustomMethod] = {}
        self.connections: set[ServerConnection] = set()
        #: Servers and proxies mounted in this one (:meth:`mount`).
        self.mounts = Mounts()
        # ``bus`` carries ``notify_*`` to the other workers (``RedisBus``); None: a LocalBus
        # of its own. Given here, not in ``HttpOptions``, because the server is where
        # ``notify_*`` live and ``connections`` spans every transport it serves (HTTP apps,
        # stdio, memory), so one bus serves them all; the HTTP app's lifespan runs its pump.
        self.notifier = Notifier(bus if bus is not None else LocalBus(), self._deliver)
        #: Told of every notification event this server delivers (list changes and resource
        #: updates, from here or, through the bus, from other workers): caches listen here.
        self.event_listeners: list[Callable[[BusEvent], None]] = []
        #: The extensions (``docs/design.md``): ``extensions=[...]`` and :meth:`use`. The tasks
        #: extension (SEP-2663) is always there: ``task_store`` (in memory by default),
        #: ``task_ttl_ms`` (how long a settled task is kept), ``max_tasks`` (how many run or
        #: wait for input at once here), ``max_tasks_per_principal`` (how many of one
        #: principal's) and ``task_input_timeout`` (how long a task waits for its answers, in
        #: seconds) configure it, unless ``extensions`` gives one already.
        self.extensions = Extensions()
        for extension in extensions:
            self.use(extension)
        self._use_tasks(
            task_store,
            ttl_ms=task_ttl_ms,
            max_running=max_tasks,
            max_per_principal=max_tasks_per_principal,
            input_timeout=task_input_timeout,
        )
        #: Around every request, first outermost: ``Server(middleware=[...])`` and
        #: ``@server.middleware`` (see ``docs/middleware.md``).
        self.middleware_chain: tuple[Middleware, ...] = tuple(middleware)
        self._lifespan = Lifespan(lifespan, self, name)
        #: The entry of :meth:`hosting` that started the services, while it is inside.
        self._hosted_by: Hosting | None = None

    @property
    def state_audience(self) -> str:
        """What a requestState is sealed for besides its request: ``Server(state_audience=...)``
        if given, else ``Auth.resource`` with authorization, else the server's name. Two
        servers sharing a key open each other's states only if they have the same audience."""
        if self._state_audience is not None:
            return self._state_audience
        if self.auth is not None:
            return self.auth.resource
        return self.info.name

    @state_audience.setter
    def state_audience(self, audience: str | None) -> None:
        self._state_audience = audience

    def _log_state_keys(self) -> None:
        """Once, when the server starts serving: what its states are sealed under."""
        if self._state_keys_logged:
            return
        self._state_keys_logged = True
        sealer = self.state_sealer
        if sealer.ephemeral:
            logger.info(
                "%s: requestState is sealed under a random key of this process: multi "
                "round-trip states will not survive a restart nor open on another worker "
                "(give every worker the same keys: %s or %s)",
                self.info.name,
                STATE_KEYS_ENV,
                STATE_KEYS_FILE_ENV,
            )
        else:
            logger.info(
                "%s: requestState is sealed under key %s of %d from %s",
                self.info.name,
                sealer.key_id,
                len(sealer.keys),
                self.state_keys_origin or "the code",
            )

    # -- registration --------------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(
        self,
        fn: str | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: Iterable[Icon] | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        in_thread: bool = True,
        strict: bool | None = None,
        scopes: Iterable[str] | str | None = None,
        task: bool | Literal["required"] = False,
        input_first: bool = False,
        single_use_state: bool | None = None,
        tags: Iterable[str] | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | str | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: Iterable[Icon] | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        in_thread: bool = True,
        strict: bool | None = None,
        scopes: Iterable[str] | str | None = None,
        task: bool | Literal["required"] = False,
        input_first: bool = False,
        single_use_state: bool | None = None,
        tags: Iterable[str] | None = None,
    ) -> F | Callable[[F], F]:
        """Register a tool. The schema comes from the type hints unless ``input_schema`` is given.

        A typed return value (anything but ``str``, ``None`` or content blocks) becomes
        ``structuredContent`` with an ``outputSchema`` and a JSON text fallback. Sync functions
        run in a worker thread unless ``in_thread=False``. ``strict`` (by default the server's)
        refuses strings for numeric and boolean parameters instead of converting exact ones. Use
        it bare (``@server.tool``), called (``@server.tool()``), or with the name first
        (``@server.tool("add")``).

        ``scopes`` (an iterable, or one space-separated string) are the OAuth scopes the
        caller's access token must grant (beyond ``Auth.required_scopes``; implied scopes
        count) for the tool to be listed to them and called: see "Authorization" in the class
        docstring. Without ``Server(auth=...)`` nothing is enforced.

        ``task`` (the tasks extension, SEP-2663, modern era only): ``True`` makes the tool
        task-capable: a request that declares ``io.modelcontextprotocol/tasks`` gets a
        ``CreateTaskResult`` and the work runs as a task; any other request is served as usual.
        ``"required"``: a request without the extension gets -32021. ``input_first=True``: the
        handler runs in the request until ``await ctx.start_task()``, so the questions it asks
        before that are multi round-trips answered before the task is created.

        ``single_use_state=True`` (modern era): each ``requestState`` of its multi round-trips
        opens once; the same retry sent again is refused (-32602, as a tampered state is), on
        any worker sharing ``Server(state_claims=...)``. For a tool whose side effect must
        not repeat. None: the server's ``single_use_state``.

        ``tags``: names that :meth:`enable` and :meth:`disable` (and
        ``ctx.enable_components``) select it by (``docs/components.md``).
        """
        if task not in (False, True, "required"):
            raise ValueError("server.tool(task=...) takes False, True or 'required'")
        if input_first and not task:
            raise ValueError("server.tool(input_first=True) needs task=True or task='required'")
        if isinstance(fn, str):
            if name is not None:
                raise TypeError("server.tool() takes the name once: positionally or as name=")
            name, fn = fn, None
        needed = check_scopes(scopes, "server.tool(scopes=...)")
        tagged = _tags(tags)

        def register(func: F) -> F:
            tool_name = name or func.__name__
            if input_schema is not None:
                signature = explicit_signature(
                    input_schema, output_schema, func, context_type=Context, tool=tool_name
                )
            else:
                signature = function_signature(
                    func,
                    context_type=Context,
                    skip_output_types=(*CONTENT_TYPES, *MEDIA_TYPES, CallToolResult),
                    strict=self.strict if strict is None else strict,
                )
                if output_schema is not None:
                    # Loads jsonschema, which a server with no hand-written schema never needs.
                    from ._schema._handwritten import compile_handwritten

                    compile_handwritten(output_schema, f"tool {tool_name!r}: output_schema")
            derived = signature.output_schema
            if derived is not None and signature.wraps_output:
                # The mark fastmcp puts on a wrapped result, by which its client gives back
                # the value itself rather than an object holding it under "result".
                derived = {**derived, WRAP_RESULT_MARK: True}
            tool = Tool(
                name=tool_name,
                title=title,
                description=description if description is not None else signature.description,
                input_schema=signature.input_schema,
                output_schema=output_schema if output_schema is not None else derived,
                annotations=annotations,
                icons=list(icons) if icons is not None else None,
                meta=meta,
            )
            self.add_tool(
                ToolEntry(
                    tool,
                    func,
                    signature,
                    is_async_callable(func),
                    in_thread,
                    scopes=needed,
                    options={"task": task, "input_first": input_first} if task else {},
                    single_use_state=single_use_state,
                    tags=tagged,
                )
            )
            return func

        return register(fn) if fn is not None else register

    # -- extensions ----------------------------------------------------------------------------

    def use(self, extension: Extension) -> None:
        """Add an extension: its capability, methods, hooks and service (``Extension``)."""
        self.extensions.add(extension, self)

    def _use_tasks(self, store: TaskStore | None, **settings: Any) -> None:
        """The tasks extension (SEP-2663), which every server has unless given its own: so
        ``Server(task_store=..., task_ttl_ms=..., max_tasks=...)``, ``server.tool(task=...)``
        and ``server.tasks`` keep their spelling. Only its given options are passed on."""
        from ..tasks import TasksExtension

        given = self.extensions.get(TasksExtension.name)
        options = {k: v for k, v in settings.items() if v is not _TASKS_DEFAULT}
        if given is not None and (store is not None or options):
            raise ValueError(
                "task_store, task_ttl_ms, max_tasks, max_tasks_per_principal and "
                "task_input_timeout configure the default tasks extension: give them to the "
                "TasksExtension in extensions=[...] instead"
            )
        if given is None:
            given = TasksExtension(store, **options)
            self.use(given)
        assert isinstance(given, TasksExtension)
        #: The tasks' manager (SEP-2663): their store, the ones running here.
        self.tasks: TaskManager = given.manager

    def add_tool(self, entry: ToolEntry) -> None:
        if entry.tool.name in self.tools:
            raise ValueError(f"a tool named {entry.tool.name!r} is already registered")
        self.tools[entry.tool.name] = entry
        self.notify_list_changed("tools")

    def remove_tool(self, name: str) -> None:
        del self.tools[name]
        self.notify_list_changed("tools")

    @overload
    def prompt(self, fn: F, /) -> F: ...
    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Iterable[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        in_thread: bool = True,
        scopes: Iterable[str] | str | None = None,
        tags: Iterable[str] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: F | str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Iterable[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        in_thread: bool = True,
        scopes: Iterable[str] | str | None = None,
        tags: Iterable[str] | None = None,
    ) -> F | Callable[[F], F]:
        """Register a prompt; its parameters are the prompt's arguments.

        Bare (``@server.prompt``), called (``@server.prompt()``) or named
        (``@server.prompt("greet")``). MCP sends prompt arguments as strings: a parameter of
        another type (``int``, ``bool``, an enum, a list, a model) is converted from its text,
        read as JSON first (``"3"``, ``"true"``, ``'["a"]'``), and its argument's description
        ends with the JSON Schema its value must match; a value that does not convert is
        -32602 naming the argument. ``scopes``: what the caller's token must grant for the
        prompt to be listed to them, got, and completed, as for :meth:`tool`. ``tags``: as for
        :meth:`tool`.
        """
        fn = None if name is None or isinstance(name, str) else name
        prompt_name = name if isinstance(name, str) else None
        needed = check_scopes(scopes, "server.prompt(scopes=...)")
        tagged = _tags(tags)

        def register(func: F) -> F:
            signature = function_signature(func, context_type=Context)
            params = inspect.signature(func).parameters
            props = signature.input_schema.get("properties", {})
            typed = frozenset(a for a, schema in props.items() if not _is_string_schema(schema))
            required = frozenset(signature.input_schema.get("required", ()))
            arguments = [
                PromptArgument(
                    name=arg,
                    description=_prompt_argument_description(
                        props.get(arg, {}), typed=arg in typed
                    ),
                    required=arg in required,
                )
                for arg in params
                if arg != signature.context_param
            ]
            prompt = Prompt(
                name=prompt_name or func.__name__,
                title=title,
                description=description if description is not None else signature.description,
                arguments=arguments or None,
                icons=list(icons) if icons is not None else None,
                meta=meta,
            )
            if prompt.name in self.prompts:
                raise ValueError(f"a prompt named {prompt.name!r} is already registered")
            self.prompts[prompt.name] = PromptEntry(
                prompt,
                func,
                signature.context_param,
                tuple(a.name for a in arguments),
                required,
                is_async_callable(func),
                in_thread,
                signature,
                typed,
                scopes=needed,
                tags=tagged,
            )
            self.notify_list_changed("prompts")
            return func

        return register(fn) if fn is not None else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Iterable[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        in_thread: bool = True,
        scopes: Iterable[str] | str | None = None,
        tags: Iterable[str] | None = None,
    ) -> Callable[[F], F]:
        """Register a resource, or a resource template when ``uri`` has ``{variables}``.

        A template's variables are passed to the function as keyword arguments, converted
        to the parameter's type hint (a URI that does not convert is -32602). ``scopes``: what
        the caller's token must grant for the resource (or template) to be listed to them,
        read, subscribed to and completed, as for :meth:`tool`; a URI that an exact resource
        and a template both match needs the resource's. ``tags``: as for :meth:`tool`.
        """
        if not isinstance(uri, str):
            what = getattr(uri, "__name__", type(uri).__name__)
            raise TypeError(
                f"server.resource needs the resource's URI: write "
                f"@server.resource('scheme://...') above {what}, not a bare @server.resource"
            )

        needed = check_scopes(scopes, "server.resource(scopes=...)")
        tagged = _tags(tags)

        def register(func: F) -> F:
            if uri in self.resources or uri in self.templates:
                raise ValueError(f"a resource {uri!r} is already registered")
            signature = function_signature(func, context_type=Context)
            # What a resource and a template describe alike.
            shared: dict[str, Any] = {
                "name": name or func.__name__,
                "title": title,
                "description": description if description is not None else signature.description,
                "mime_type": mime_type,
                "icons": list(icons) if icons is not None else None,
                "meta": meta,
            }
            is_async = is_async_callable(func)
            if "{" in uri:
                pattern, variables = compile_template(uri)
                params = set(inspect.signature(func).parameters) - {signature.context_param}
                if set(variables) != params:
                    raise TypeError(
                        f"the parameters of {func.__name__} ({sorted(params)}) must match the "
                        f"template variables of {uri!r} ({sorted(variables)})"
                    )
                props = signature.input_schema.get("properties", {})
                typed = frozenset(v for v in variables if not _is_string_schema(props.get(v, {})))
                self.templates[uri] = TemplateEntry(
                    ResourceTemplate(uri_template=uri, **shared),
                    pattern,
                    variables,
                    func,
                    signature.context_param,
                    is_async,
                    in_thread,
                    signature,
                    typed,
                    scopes=needed,
                    tags=tagged,
                )
            else:
                self.resources[uri] = ResourceEntry(
                    Resource(uri=uri, **shared),
                    func,
                    signature.context_param,
                    is_async,
                    in_thread,
                    scopes=needed,
                    tags=tagged,
                )
            self.notify_list_changed("resources")
            return func

        return register

    @overload
    def completion(self, fn: F, /) -> F: ...
    @overload
    def completion(self, fn: None = None, /) -> Callable[[F], F]: ...

    def completion(self, fn: F | None = None, /) -> F | Callable[[F], F]:
        """Register the completion handler: ``(ref, argument, context) -> list[str] | Completion``.

        ``ref`` is a ``PromptReference`` or ``ResourceTemplateReference``, ``argument`` a
        ``CompletionArgument`` and ``context`` a ``CompletionContext`` or None. Bare
        (``@server.completion``) or called (``@server.completion()``).
        """

        def register(func: F) -> F:
            self.completion_handler = CustomMethod(
                func, is_async_callable(func), _context_param(func)
            )
            return func

        return register(fn) if fn is not None else register

    def method(self, name: str, *, scopes: Iterable[str] | str | None = None) -> Callable[[F], F]:
        """Register a handler for a custom request or a custom ``notifications/*`` method.

        The handler gets the ``params`` object (a dict) as its first argument, and a ``Context``
        if it asks for one; a request handler returns a dict (None means ``{}``). A notification
        is not a request, so its handler cannot take a ``Context``. ``scopes``: what the
        sender's access token must grant (beyond ``Auth.required_scopes``), as for a tool: a
        request without them is refused (HTTP 403, or -32600 "Forbidden"), a notification
        without them is refused over HTTP (403) and dropped elsewhere, its handler never run.
        """
        from ..protocol._methods import BUILTIN_METHODS

        if not isinstance(name, str):
            what = getattr(name, "__name__", type(name).__name__)
            raise TypeError(
                f"server.method needs the method's name: write @server.method('x/y') above "
                f"{what}, not a bare @server.method"
            )
        if name in BUILTIN_METHODS or name in self.custom_methods:
            raise ValueError(f"method {name!r} is already defined")
        needed = check_scopes(scopes, "server.method(scopes=...)")

        def register(func: F) -> F:
            ctx_param = _context_param(func)
            if ctx_param is not None and name.startswith("notifications/"):
                raise TypeError(
                    f"{func.__name__} handles the notification {name!r}, which has no request "
                    f"to give a Context for; remove the {ctx_param!r} parameter"
                )
            self.custom_methods[name] = CustomMethod(
                func, is_async_callable(func), ctx_param, scopes=needed
            )
            return func

        return register

    def middleware(self, fn: Middleware, /) -> Middleware:
        """Register a middleware (``@server.middleware``), inside those registered before it.

        ``async def mw(ctx: MiddlewareContext, call_next) -> dict``; register before serving:
        a connection builds its chain once per method.
        """
        self.middleware_chain = (*self.middleware_chain, fn)
        return fn

    # -- lifespan ------------------------------------------------------------------------------

    @property
    def lifespan_state(self) -> Any:
        """What ``Server(lifespan=...)`` yielded, while it runs (``ctx.lifespan``)."""
        return self._lifespan.state

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Any]:
        """Hold the server's lifespan for the block, yielding its state.

        Serving holds it already (stdio, the HTTP app's ASGI lifespan, ``serve_transport``);
        hold it yourself to share one entry among connections that come and go, say several
        in-memory clients in a test. Holds that overlap share the entry. A startup that
        raises: :class:`LifespanFailed`.
        """
        async with self._lifespan.hold() as state:
            yield state

    # -- visibility and transforms -------------------------------------------------------------

    def enable(
        self,
        *,
        names: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        components: Iterable[str] | str | None = None,
        only: bool = False,
    ) -> None:
        """Show the components named in ``names`` or tagged with any of ``tags`` to every
        client (neither: all of them); their clients are told the lists changed.

        ``components`` limits the rule to kinds (``"tool"``, ``"prompt"``, ``"resource"``,
        ``"template"``). ``only=True``: everything else (of those kinds) is hidden. Rules apply
        in order, the last that matches deciding; a session's own rules
        (``ctx.enable_components``) come after these. See ``docs/components.md``.
        """
        self._visible(True, names, tags, components, only)

    def disable(
        self,
        *,
        names: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        components: Iterable[str] | str | None = None,
    ) -> None:
        """Hide the components named in ``names`` or tagged with any of ``tags`` from every
        client: left out of their lists and answered as unknown ones (-32602 "Unknown tool",
        "Resource not found"). Their clients are told the lists changed."""
        self._visible(False, names, tags, components, False)

    def _visible(
        self,
        enabled: bool,
        names: Iterable[str] | str | None,
        tags: Iterable[str] | str | None,
        components: Iterable[str] | str | None,
        only: bool,
    ) -> None:
        changed = self.visibility.change(
            enabled, names=names, tags=tags, components=components, only=only
        )
        for kind in sorted(changed):
            self.notify_list_changed(kind)

    def transform_tool(
        self,
        parent: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, ArgTransform] | None = None,
        wrap: Callable[..., Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | str | None = None,
        replace: bool = False,
    ) -> Tool:
        """Register a tool derived from ``parent`` (a registered tool's name).

        ``name`` (default the parent's, which needs ``replace=True``), ``title`` and
        ``description`` replace the parent's. ``arguments`` maps a parent's argument to an
        :class:`ArgTransform`: a new name, description or default, or ``hide=True`` (with a
        ``default`` or ``default_factory``: the value always passed). ``wrap``: ``async def
        wrap(call_parent, **kwargs)``, called with the derived tool's arguments; ``await
        call_parent(**kwargs)`` runs the parent and returns what it returned, so code may run
        before and after. The output schema is the parent's unless ``output_schema`` is given.

        The call keeps what a written tool has: its arguments are checked (a mismatch is an
        ``isError`` result naming the derived argument names), the parent runs in the same
        request task and cancel scope, and its scopes apply besides ``scopes``. Tags default to
        the parent's. ``replace=True`` removes the parent from the lists (it keeps running
        inside the derived tool). Returns the derived tool's definition (what ``tools/list`` shows).
        """
        found = self.tools.get(parent)
        if found is None:
            raise ValueError(f"no tool named {parent!r} is registered")
        entry = transformed_tool(
            found,
            name=name,
            title=title,
            description=description,
            arguments=arguments or {},
            wrap=wrap,
            output_schema=output_schema,
            tags=None if tags is None else _tags(tags),
            scopes=check_scopes(scopes, "server.transform_tool(scopes=...)"),
        )
        if entry.tool.name in self.tools and not (replace and entry.tool.name == parent):
            raise ValueError(f"a tool named {entry.tool.name!r} is already registered")
        if replace:
            del self.tools[parent]
        self.add_tool(entry)
        return entry.tool

    def prompts_as_tools(self, *, tags: Iterable[str] | None = None) -> None:
        """Add the tools ``list_prompts`` and ``get_prompt`` (``name``, ``arguments``), for
        clients that only call tools: they answer what ``prompts/list`` and ``prompts/get``
        would, for the same caller (scopes, visibility and mounts included)."""
        for entry in prompt_tools(_tags(tags)):
            self.add_tool(entry)

    def resources_as_tools(self, *, tags: Iterable[str] | None = None) -> None:
        """Add the tools ``list_resources`` (resources and templates) and ``read_resource``
        (``uri``), answering what ``resources/list``, ``resources/templates/list`` and
        ``resources/read`` would, for the same caller."""
        for entry in resource_tools(_tags(tags)):
            self.add_tool(entry)

    # -- composition ---------------------------------------------------------------------------

    def mount(
        self,
        child: Server | Provider,
        prefix: str | None = None,
        *,
        namespace: str | None = None,
    ) -> Mount:
        """Offer what ``child`` offers as this server's own, under ``prefix``; live.

        ``child`` is a :class:`Server` (served directly, in the requests of this server's
        clients) or a proxy (:func:`trio_mcp.proxy`, or ``proxy(...)``'s server). Tools and
        prompts are listed as ``{prefix}_{name}``, resource and template URIs
        ``scheme://rest`` as ``scheme://{prefix}/rest``; without a prefix, as they are.
        ``namespace=`` is another name for ``prefix``. What the child registers or removes
        later shows in this server's lists, and its list changes and resource updates reach
        this server's clients. Entries of this server win over mounted ones; among mounts,
        the latest wins. Returns the mount, for :meth:`unmount`.
        """
        if namespace is not None:
            if prefix is not None and prefix != namespace:
                raise TypeError("server.mount() takes the prefix once: prefix= or namespace=")
            prefix = namespace
        if prefix is not None and (not prefix or any(c.isspace() or c in "/:" for c in prefix)):
            raise ValueError(
                "a mount prefix must be a non-empty name without '/', ':' or spaces, "
                f"not {prefix!r}"
            )
        if isinstance(child, Server):
            if child is self or child._mounts_server(self):
                raise ValueError("a server cannot be mounted inside itself")
            provider: Provider = ServerProvider(child)
        elif isinstance(child, Provider):
            provider = child
        else:
            raise TypeError(f"server.mount() takes a Server or a proxy, not {type(child).__name__}")
        mount = Mount(provider, prefix, self)
        self.mounts.add(mount)
        self._mounts_changed()
        return mount

    def unmount(self, mount: Mount | Server | str) -> None:
        """Remove a mount: the :class:`Mount` :meth:`mount` returned, the child server, or the
        prefix. Its entries leave the lists (clients are told), and a proxy's upstream
        connections are closed."""
        for candidate in list(self.mounts):
            provider = candidate.provider
            if (
                candidate is mount
                or candidate.prefix == mount
                or (isinstance(provider, ServerProvider) and provider.child is mount)
            ):
                self.mounts.remove(candidate)
                self._mounts_changed()
                return
        raise ValueError(f"nothing is mounted as {mount!r}")

    def _mounts_server(self, server: Server) -> bool:
        """Whether ``server`` is mounted here, or in what is mounted here."""
        for mount in self.mounts:
            provider = mount.provider
            if isinstance(provider, ServerProvider) and (
                provider.child is server
                or (isinstance(provider.child, Server) and provider.child._mounts_server(server))
            ):
                return True
        return False

    def _mounts_changed(self) -> None:
        for kind in ("tools", "prompts", "resources"):
            self.notify_list_changed(kind)

    # -- notifications to connected clients ----------------------------------------------------

    @property
    def bus(self) -> NotificationBus:
        """The notification bus (``Server(bus=...)``); settable until its pump runs."""
        return self.notifier.bus

    @bus.setter
    def bus(self, bus: NotificationBus) -> None:
        if self.notifier.running:
            raise RuntimeError("the notification bus cannot change while its pump runs")
        self.notifier.bus = bus

    def notify_list_changed(self, kind: str) -> None:
        """Queue ``notifications/{kind}/list_changed`` to every initialized client (and, with
        a bus whose pump runs, to those of every other worker on it)."""
        self.listings.forget(kind)
        self.notifier.notify(BusEvent.list_changed(kind))

    def notify_resource_updated(self, uri: str) -> None:
        """Queue ``notifications/resources/updated`` to the clients subscribed to ``uri`` (and
        to those of every other worker on the bus)."""
        self.notifier.notify(BusEvent.resource_updated(uri))

    def _deliver(self, event: BusEvent) -> None:
        """An event, from here or from another worker, to this process's connections."""
        params = event.params
        if event.kind == LIST_CHANGED and isinstance(kind := params.get("kind"), str):
            for connection in list(self.connections):
                connection.send_list_changed(kind)
        elif event.kind == RESOURCE_UPDATED and isinstance(uri := params.get("uri"), str):
            for connection in list(self.connections):
                connection.send_resource_updated(uri)
        elif event.kind == RESYNC:
            # Events were missed somewhere: what may have changed, said again (the
            # extensions hear it too, below, for what they keep).
            for connection in list(self.connections):
                connection.send_resync()
            self.extensions.on_bus_event(event)
        elif not self.extensions.on_bus_event(event):
            logger.debug("ignored a bus event of kind %r", event.kind)
        for listener in self.event_listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("an event listener failed on a %r event", event.kind)

    async def run_notifications(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The bus's pump (its subscriber and the publisher of ``notify_*``), until cancelled.

        The HTTP app's lifespan runs it; started once subscribed, ``BusError`` when the bus
        cannot be reached. Without it, ``notify_*`` reach this process's connections only.
        It is also the home of the server's tasks (SEP-2663): their work runs in its nursery,
        so it outlives the request that created it.
        """
        async with self.hosting(), self._claiming(), self._keeping_state():
            await self.notifier.run(task_status=task_status)

    def hosting(self) -> AbstractAsyncContextManager[None]:
        """The services around this server's work for as long as it is entered: its
        extensions' (the tasks' nursery) and those of the servers mounted in it, so that a task
        created through a mount runs in the child's. Entering it while an entry hosts them is
        a no-op (every connection of a running app does)."""
        return Hosting(self)

    @asynccontextmanager
    async def _claiming(self) -> AsyncIterator[None]:
        """The single-use claim store, started while the server serves (a shared one only:
        the in-memory one has no lifetime); one that cannot be reached fails the start."""
        claims = self.state_claims
        if not isinstance(claims, HostedStateClaims):
            yield
            return
        await claims.start()
        try:
            yield
        finally:
            with trio.CancelScope(shield=True):
                await claims.aclose()

    @asynccontextmanager
    async def _keeping_state(self) -> AsyncIterator[None]:
        """The session state store, started while the server serves (a shared one only)."""
        store = self.session_state_store
        if not isinstance(store, HostedSessionStateStore):
            yield
            return
        await store.start()
        try:
            yield
        finally:
            with trio.CancelScope(shield=True):
                await store.aclose()

    async def session_ended(self, session_id: str) -> None:
        """Drop the session state of a handshake session that ended (an HTTP ``DELETE``, the
        end of a stdio connection); bounded, and a store that cannot answer leaves the state
        to lapse with its ttl."""
        with trio.move_on_after(5, shield=True):
            try:
                await self.session_state_store.drop(state_scope(session_id, None, None))
            except MCPError as error:
                logger.warning("session state of an ended session kept until it lapses: %s", error)

    # -- serving -------------------------------------------------------------------------------

    async def serve_transport(
        self,
        transport: Transport,
        *,
        principal: Principal | None = None,
        transport_name: str = "memory",
        network: Mapping[str, str | int] | None = None,
        task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve one connection until the peer goes away (or the caller cancels).

        ``principal``: who the whole connection acts for, when the transport vouches for one
        (stdio: the token of the environment, verified by :meth:`serve_stdio`); with
        ``Server(auth=...)`` and none, only ``initialize``, ``ping`` and ``server/discover``
        are answered. ``transport_name`` (``stdio``, ``websocket``, ...) and ``network`` (the
        OpenTelemetry network and client attributes) name the wire to the instrumentation.
        """
        connection = ServerConnection(self)
        connection.principal = principal
        connection.transport_name = transport_name
        state = connection.state
        observer = observe(
            "server", transport_name, network=network, version=lambda: state.protocol_version
        )
        session = Engine(
            transport,
            connection,
            max_queued_bytes=self.max_queued_bytes,
            max_in_flight=self.max_in_flight,
            observer=observer,
        )
        connection.session = session
        self.connections.add(connection)
        if observer is not None:
            observer.session_started()
        try:
            # Tasks created here run in the server's task nursery; without one (no HTTP app
            # runs), in this connection's.
            async with self._lifespan.hold(), self.hosting():
                await session.run(task_status=task_status)
        finally:
            self.connections.discard(connection)
            if observer is not None:
                observer.session_ended()
            if state.initialized:
                await self.session_ended(connection.id)

    async def serve_stdio(self, *, max_line_bytes: int | None = None) -> None:
        """Serve on stdin and stdout until stdin ends: ``trio.run(server.serve_stdio)``.

        The protocol uses private copies of fd 0 and 1; fd 1 then points at stderr, so a stray
        ``print()`` cannot corrupt the stream. On end of input what was received is finished
        and answered (bounded; what is still running then gets an error), and this returns.

        With ``Server(auth=...)`` the credentials come from the environment, as the MCP spec
        has stdio do: the host that launches the server puts an access token in
        ``MCP_ACCESS_TOKEN`` (``Auth.stdio_token_env``). It is verified once, before anything
        is read, and the whole connection acts for its principal (its scopes decide what is
        listed and what may be called; a request once it has expired is refused). A token
        that is not set, or is refused, ends the process at once with exit status 1 and one
        line on stderr saying why (say ``MCP_ACCESS_TOKEN is not set``), which a host shows
        in its log: a server that started and then refused every call would leave its user
        guessing. No message ever holds the token.

        With ``Server(lifespan=...)`` the lifespan is entered before anything is read and
        exited at the end of input; a startup that raises ends the process the same way: one
        line on stderr, exit status 1.
        """
        from ..protocol._framing import DEFAULT_MAX_LINE_BYTES
        from ..transports._stdio import serve_stdio_transport

        require_trio("server.serve_stdio()")
        self._log_state_keys()
        principal = await self._stdio_principal() if self.auth is not None else None
        try:
            async with self._lifespan.hold():
                await serve_stdio_transport(
                    functools.partial(
                        self.serve_transport, principal=principal, transport_name="stdio"
                    ),
                    max_line_bytes=DEFAULT_MAX_LINE_BYTES
                    if max_line_bytes is None
                    else max_line_bytes,
                    banner=f"{self.info.name} {self.info.version}: an MCP server on stdio, "
                    "waiting for a client on stdin. Press Ctrl-C to stop.",
                )
        except LifespanFailed as exc:
            # Before the first line is read: one line on stderr, exit status 1.
            _exit_saying(f"{self.info.name}: cannot start: {exc}")

    async def _stdio_principal(self) -> Principal:
        """The principal of the environment's token. Without one, or when it is refused: the
        reason on stderr, then ``SystemExit(1)`` (written here, not carried by the exception,
        so that an entry point that catches ``SystemExit`` for its status still shows it)."""
        auth = self.auth
        assert auth is not None
        name = auth.stdio_token_env
        token = os.environ.get(name, "").strip()
        if not token:
            _exit_saying(
                f"{self.info.name}: {name} is not set: this server requires an access token, "
                f"which the host that launches it passes in the environment variable {name}"
            )
        try:
            principal = await auth.authenticate(["Bearer " + token])
        except (BadCredential, InvalidToken, VerifierUnavailable) as exc:
            reason = str(exc.description if isinstance(exc, InvalidToken) else exc)
            # Verifiers promise never to quote a token; this line holds even one that did.
            reason = reason.replace(token, "[the token]")
            unavailable = isinstance(exc, VerifierUnavailable)
            verdict = "could not be checked" if unavailable else "is refused"
            _exit_saying(f"{self.info.name}: the access token in {name} {verdict}: {reason}")
        logger.info("stdio: serving for %s", principal.subject or principal.client_id or "a client")
        return principal

    def run(
        self,
        transport: str = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        options: HttpOptions | None = None,
    ) -> None:
        """Serve until stopped, blocking: calls ``trio.run`` (so not from inside an event loop).

        ``transport`` is ``"stdio"`` (the default) or ``"http"`` (Streamable HTTP on hypercorn,
        at ``host``:``port``, with ``options``; the 2024-11-05 HTTP+SSE transport and WebSocket
        beside it; ``"streamable-http"``, the specification's name, is the same), ``"sse"``
        (the same, announcing the HTTP+SSE endpoint) or ``"ws"`` (the same, announcing its
        WebSocket endpoint, ``HttpOptions.websocket``). Ctrl-C stops the server without a
        traceback: over stdio it exits with status 130, over HTTP it shuts down gracefully and
        returns.
        """
        if transport == "streamable-http":
            transport = "http"
        if transport not in ("stdio", "http", "sse", "ws"):
            raise ValueError(
                "transport must be 'stdio', 'streamable-http' (or 'http'), 'sse' or 'ws', "
                f"not {transport!r}"
            )
        if _in_an_event_loop():
            raise RuntimeError(
                "server.run() starts its own Trio event loop and cannot be called from async "
                "code; there, await server.serve_stdio() (or serve_http) under Trio instead"
            )
        try:
            if transport == "stdio":
                trio.run(self.serve_stdio)
            else:
                from ..http._binding import run_blocking

                run_blocking(self, transport, host=host, port=port, options=options)
        except KeyboardInterrupt:
            raise SystemExit(130) from None

    @classmethod
    def from_openapi(
        cls,
        document: Mapping[str, Any] | str | Path,
        client: httpx.AsyncClient | None = None,
        **options: Any,
    ) -> Server:
        """A server of an HTTP API's operations, from its OpenAPI 3.x document.

        ``document``: the document (a dict), a JSON or YAML file, or an ``http(s)://`` URL
        fetched once, with ``client``, when the server starts. ``client``: the
        ``httpx.AsyncClient`` that calls the API (its ``base_url``, headers, auth and timeout
        apply), or ``base_url=`` for one the server opens itself. Further options (``routes``,
        ``uri_scheme``, ``upstream_headers``, ...) and the rules: ``docs/openapi.md``.
        """
        from ..openapi import server_from_openapi  # the import's room, loaded only when used

        return server_from_openapi(document, client, **options)

    def http_app(self, options: HttpOptions | None = None) -> McpHttpApp:
        """The Streamable HTTP endpoint as an ASGI app, for ``hypercorn --worker-class trio``.

        ``options``: an :class:`~trio_mcp.http.HttpOptions` (the path, JSON or SSE responses,
        stateless mode, session limits, Host and Origin checks, CORS, the event store, ...);
        None for the defaults, e.g. ``server.http_app(HttpOptions(json_response=True))``.
        Imports the HTTP binding (:mod:`trio_mcp.http`) on first call.
        """
        from ..http._binding import build_app

        self._log_state_keys()
        return build_app(self, options)

    def record(self, record: RequestRecord) -> None:
        if self.log_requests:
            log_request(record)
        if self.on_request is None:
            return
        try:
            self.on_request(record)
        except Exception:
            logger.exception("the on_request hook failed")


def _exit_saying(message: str) -> NoReturn:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    raise SystemExit(1)


def _in_an_event_loop() -> bool:
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        pass
    else:
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def require_trio(what: str) -> None:
    """Fail with the real cause when ``what`` is awaited outside Trio (say under asyncio)."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        raise RuntimeError(
            f"{what} must run under Trio: trio_mcp is Trio-native and does not run on asyncio. "
            "Use trio.run(server.serve_stdio), or server.run() to serve without writing async code"
        ) from None


def _prompt_argument_description(schema: dict[str, Any], *, typed: bool) -> str | None:
    """A prompt argument's description; for one that is not a plain string, followed by the
    JSON Schema of its value, since a prompt argument's listing has no schema of its own."""
    described = schema.get("description")
    choices = schema.get("enum")
    if typed:
        shape = {k: v for k, v in schema.items() if k not in ("description", "title", "default")}
        hint = f"A JSON value matching the schema {orjson.dumps(shape).decode()}."
    elif isinstance(choices, list) and all(isinstance(c, str) for c in choices):
        hint = f"One of: {', '.join(choices)}."
    else:
        return described if isinstance(described, str) else None
    return f"{described}\n\n{hint}" if isinstance(described, str) and described else hint


def _is_string_schema(schema: dict[str, Any]) -> bool:
    """Whether a parameter's schema admits exactly strings (optionally null, or anything)."""
    kinds = {k for k in schema if k not in ("description", "default", "title")}
    if not kinds:
        return True  # unannotated or Any
    if schema.get("type") == "string":
        return True
    options = schema.get("anyOf")
    return isinstance(options, list) and all(
        o.get("type") in ("string", "null") for o in options if isinstance(o, dict)
    )


def _tags(tags: Iterable[str] | None) -> frozenset[str]:
    if tags is None:
        return frozenset()
    if isinstance(tags, str):
        raise TypeError("tags= takes a set of names, not one string: tags={'name'}")
    found = frozenset(tags)
    if not all(isinstance(t, str) and t for t in found):
        raise TypeError("tags= takes non-empty strings")
    return found


def _context_param(func: Callable[..., Any]) -> str | None:
    return context_param(func, Context)
