"""What a server offers: registered tools, prompts, resources and templates, ready to call.

Each entry keeps the wire definition (what ``*/list`` returns) next to the Python callable and
everything worked out once at registration (schemas, converters, the context parameter), so a
call does no reflection.
"""

from __future__ import annotations

import base64
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs
import orjson
import trio

from ..protocol._envelope import CacheHints
from ..protocol._headers import ParamHeaders, tool_param_headers
from ..protocol._request_state import StateSealer
from ..protocol._types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Implementation,
    Prompt,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    to_wire,
)
from ._media import MEDIA_TYPES
from ._principal import Auth
from ._schema import FunctionSignature
from ._state_claims import StateClaims

if TYPE_CHECKING:
    from ._bus import BusEvent
    from ._middleware import Middleware
    from ._visibility import Visibility

T = TypeVar("T")

CONTENT_TYPES: tuple[type, ...] = (
    TextContent,
    ImageContent,
    AudioContent,
    ResourceLink,
    EmbeddedResource,
)


def context_param(fn: Callable[..., Any], context_type: type) -> str | None:
    """The name of the parameter annotated with ``context_type``, if there is one."""
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        return None
    for name, hint in hints.items():
        if name == "return":
            continue
        candidates = typing.get_args(hint) if typing.get_origin(hint) in _UNIONS else (hint,)
        if any(isinstance(c, type) and issubclass(c, context_type) for c in candidates):
            return name
    return None


_UNIONS = (typing.Union, types.UnionType)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


async def call_user(
    fn: Callable[..., Any],
    is_async: bool,
    kwargs: dict[str, Any],
    *,
    args: tuple[Any, ...] = (),
    in_thread: bool = True,
) -> Any:
    """Call a user's handler: async ones directly, sync ones in a worker thread.

    A thread cannot be killed, so on cancellation the request ends at once (no response is
    sent, shutdown is never held hostage by a blocked call) and the thread is left to notice:
    ``trio.from_thread.check_cancelled()`` and ``ctx.raise_if_cancelled()`` tell it, and
    whatever it returns is discarded.
    """
    if is_async:
        return await fn(*args, **kwargs)
    if not in_thread:
        await trio.lowlevel.checkpoint()
        return fn(*args, **kwargs)
    return await trio.to_thread.run_sync(
        functools.partial(fn, *args, **kwargs), abandon_on_cancel=True
    )


@attrs.define(eq=False)
class Listed:
    """An entry a list shows (a tool, prompt, resource or template). Its wire form is made
    once and kept, not for every list request: what it shows is frozen and changes only
    with the entry itself (a new one, or another object in its place). Lists share it; what
    may change a list's items before they are sent (a middleware, a parent's mount) is given
    copies (see ``_paged``)."""

    _wire: tuple[object, Any] | None = attrs.field(default=None, init=False, repr=False)

    def wire_of(self, shown: object) -> Any:
        """``to_wire(shown)``, kept for as long as ``shown`` is what this entry shows."""
        kept = self._wire
        if kept is None or kept[0] is not shown:
            kept = self._wire = (shown, to_wire(shown))
        return kept[1]


@attrs.define(eq=False)
class ToolEntry(Listed):
    tool: Tool
    fn: Callable[..., Any]
    signature: FunctionSignature
    is_async: bool
    in_thread: bool
    #: Scopes a caller's token must hold to see and call it (``@server.tool(scopes=...)``).
    scopes: frozenset[str] = frozenset()
    #: What extensions read of it (``server.tool(task=...)`` is the tasks extension's), by
    #: option name; the core never reads them.
    options: Mapping[str, Any] = attrs.field(factory=dict)
    #: Whether a requestState of its multi round-trips opens once (``@server.tool(
    #: single_use_state=...)``); None: the server's choice (``Server(single_use_state=...)``).
    single_use_state: bool | None = None
    #: Its tags (``@server.tool(tags=...)``): what ``server.enable`` / ``disable`` select by.
    tags: frozenset[str] = frozenset()
    #: Its ``x-mcp-header`` declarations once looked for, or why they are invalid.
    _param_headers: ParamHeaders | str | None = attrs.field(default=None, init=False, repr=False)

    @property
    def component(self) -> tuple[str, tuple[str, ...]]:
        """Its kind and the names a visibility rule may call it by."""
        return "tool", (self.tool.name,)

    def param_headers(self) -> ParamHeaders:
        """Its ``x-mcp-header`` declarations (``tool_param_headers``), which a modern POST's
        header check needs: its input schema is walked for them once, not for every call.
        Raises ``ValueError`` (a new one each time) when they are invalid."""
        found = self._param_headers
        if found is None:
            try:
                found = tool_param_headers(self.tool.input_schema)
            except ValueError as exc:
                found = str(exc)
            self._param_headers = found
        if isinstance(found, str):
            raise ValueError(found)
        return found

    def to_result(self, value: Any) -> CallToolResult:
        """Turn what a tool returned into a ``CallToolResult``."""
        if isinstance(value, CallToolResult):
            return value
        if self.signature.output_schema is not None:
            structured = self.signature.convert_result(value)
            shown = structured["result"] if self.signature.wraps_output else structured
            text = shown if isinstance(shown, str) else orjson.dumps(shown).decode()
            return CallToolResult(content=[TextContent(text)], structured_content=structured)
        return CallToolResult(content=content_blocks(value))


def content_blocks(value: Any) -> list[Any]:
    """Content blocks for an unstructured return value: a block, an ``Image``, ``Audio`` or
    ``File``, a string, or a list of them (a list of strings alone is one JSON document)."""
    if value is None:
        return []
    if isinstance(value, CONTENT_TYPES):
        return [value]
    if isinstance(value, MEDIA_TYPES):
        return [value.to_content()]
    if isinstance(value, str):
        return [TextContent(value)]
    if (
        isinstance(value, list | tuple)
        and all(isinstance(v, (*CONTENT_TYPES, *MEDIA_TYPES, str)) for v in value)
        and not all(isinstance(v, str) for v in value)
    ):
        return [_block(v) for v in value]
    return [TextContent(orjson.dumps(value, default=_json_default).decode())]


def _block(value: Any) -> Any:
    if isinstance(value, MEDIA_TYPES):
        return value.to_content()
    return TextContent(value) if isinstance(value, str) else value


def _json_default(value: Any) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


@attrs.define(eq=False)
class PromptEntry(Listed):
    prompt: Prompt
    fn: Callable[..., Any]
    context_param: str | None
    arg_names: tuple[str, ...]
    required: frozenset[str]
    is_async: bool
    in_thread: bool
    #: Converts the arguments to the parameters' types (raises ArgumentsError).
    signature: FunctionSignature | None = None
    #: The arguments whose parameter is not a string: their text is read as JSON first.
    typed: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()

    @property
    def component(self) -> tuple[str, tuple[str, ...]]:
        return "prompt", (self.prompt.name,)

    def arguments(self, given: dict[str, str]) -> dict[str, Any]:
        """The handler's keyword arguments for the strings a client sent; raises
        ArgumentsError naming the argument that does not convert."""
        if self.signature is None:
            return dict(given)
        values = {k: _json_or_text(v) if k in self.typed else v for k, v in given.items()}
        return self.signature.convert_arguments(values)

    def to_result(self, value: Any) -> GetPromptResult:
        if isinstance(value, GetPromptResult):
            return value
        if isinstance(value, str):
            return GetPromptResult(
                messages=[PromptMessage(role="user", content=TextContent(value))]
            )
        if isinstance(value, PromptMessage):
            return GetPromptResult(messages=[value])
        if isinstance(value, list | tuple):
            messages = []
            for item in value:
                if isinstance(item, PromptMessage):
                    messages.append(item)
                elif isinstance(item, str):
                    messages.append(PromptMessage(role="user", content=TextContent(item)))
                elif isinstance(
                    item,
                    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource,
                ):
                    messages.append(PromptMessage(role="user", content=item))
                elif isinstance(item, MEDIA_TYPES):
                    messages.append(PromptMessage(role="user", content=item.to_content()))
                else:
                    raise TypeError(f"a prompt cannot return {type(item).__name__} messages")
            return GetPromptResult(messages=messages)
        raise TypeError(f"a prompt cannot return {type(value).__name__}")


@attrs.define(eq=False)
class ResourceEntry(Listed):
    resource: Resource
    fn: Callable[..., Any]
    context_param: str | None
    is_async: bool
    in_thread: bool
    scopes: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()

    @property
    def component(self) -> tuple[str, tuple[str, ...]]:
        return "resource", (self.resource.uri, self.resource.name)


@attrs.define(eq=False)
class TemplateEntry(Listed):
    template: ResourceTemplate
    pattern: re.Pattern[str]
    variables: tuple[str, ...]
    fn: Callable[..., Any]
    context_param: str | None
    is_async: bool
    in_thread: bool
    #: Converts the variables to the parameters' types (raises ArgumentsError).
    signature: FunctionSignature
    #: The variables whose parameter is not a string: their text is read as JSON first
    #: (``"5"`` for an ``int``), then converted like tool arguments.
    typed: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()

    @property
    def component(self) -> tuple[str, tuple[str, ...]]:
        return "template", (self.template.uri_template, self.template.name)

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        return None if found is None else found.groupdict()

    def arguments(self, variables: dict[str, str]) -> dict[str, Any]:
        """The handler's keyword arguments for matched variables; raises ArgumentsError."""
        values: dict[str, Any] = {}
        for name, text in variables.items():
            values[name] = _json_or_text(text) if name in self.typed else text
        return self.signature.convert_arguments(values)


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


_VARIABLE = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


def compile_template(uri_template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A regex for an RFC 6570 level-1/2 URI template: ``{x}`` stops at ``/``, ``{+x}`` does not."""
    parts: list[str] = []
    names: list[str] = []
    pos = 0
    for found in _VARIABLE.finditer(uri_template):
        parts.append(re.escape(uri_template[pos : found.start()]))
        operator, name = found.groups()
        if name in names:
            raise ValueError(f"variable {name!r} appears twice in {uri_template!r}")
        names.append(name)
        body = ".+?" if operator else "[^/?#]+"
        parts.append(f"(?P<{name}>{body})")
        pos = found.end()
    parts.append(re.escape(uri_template[pos:]))
    return re.compile("".join(parts)), tuple(names)


def resource_contents(uri: str, mime_type: str | None, value: Any) -> list[Any]:
    """Contents for what a resource handler returned."""
    if isinstance(value, ReadResourceResult):
        return list(value.contents)
    if isinstance(value, TextResourceContents | BlobResourceContents):
        return [value]
    if isinstance(value, str):
        return [TextResourceContents(uri=uri, text=value, mime_type=mime_type)]
    if isinstance(value, bytes | bytearray | memoryview):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return [
            BlobResourceContents(
                uri=uri, blob=blob, mime_type=mime_type or "application/octet-stream"
            )
        ]
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, TextResourceContents | BlobResourceContents) for v in value)
    ):
        return list(value)  # several contents, as given; any other list is one JSON document
    text = orjson.dumps(value, default=_json_default).decode()
    return [TextResourceContents(uri=uri, text=text, mime_type=mime_type or "application/json")]


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode("ascii")


def decode_cursor(cursor: object) -> int | None:
    """The offset inside a cursor we issued, or None if it is not one of ours."""
    if not isinstance(cursor, str):
        return None
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
    except (ValueError, UnicodeError):
        return None
    prefix, _, number = text.partition(":")
    if prefix != "offset" or not number.isdigit():
        return None
    return int(number)


def page(
    items: Sequence[T], cursor: object, size: int | None, keep: Callable[[T], bool] | None = None
) -> tuple[list[T], str | None]:
    """One page of ``items`` after ``cursor``, of those ``keep`` lets through (None: all);
    raises ValueError for a cursor we did not issue.

    The cursor is an index into ``items``, past what the last page looked at: a page looks at
    its own items and those kept out between them, never at the ones before it (indexed past,
    not walked or copied), so walking a list of n items page by page looks at each about
    once (n, not n times the pages)."""
    chosen, _, end = _window(items, cursor, size, keep)
    return chosen, (encode_cursor(end) if end < len(items) else None)


def _window(
    items: Sequence[T], cursor: object, size: int | None, keep: Callable[[T], bool] | None
) -> tuple[list[T], int, int]:
    """:func:`page`'s items, and the indices of the first item it looked at and of the
    first it did not (where the next page starts; ``len(items)`` after the last)."""
    start = 0
    count = len(items)
    if cursor is not None:
        decoded = decode_cursor(cursor)
        if decoded is None or decoded > count:
            raise ValueError("Invalid cursor")
        start = decoded
    if keep is None:
        end = count if size is None else min(count, start + size)
        return list(items[start:end]), start, end
    chosen: list[T] = []
    for index in range(start, count):
        item = items[index]
        if size is not None and len(chosen) == size:
            # The next page starts at the next item kept (none: this page was the last).
            if keep(item):
                return chosen, start, index
        elif keep(item):
            chosen.append(item)
    return chosen, start, count


class Listing(Generic[T]):
    """The entries of one of a server's registries (its tools, say) in their order, as a
    sequence a page can start anywhere in: a dict's values can only be walked from the first,
    so that each page of a long list walked past every entry before it.

    Taken from the registry again whenever it may have changed: :meth:`forget` (the server
    says its list changed), a length that differs, or an entry the page looked at that is no
    longer the registry's under its name (a registry changed in place).
    """

    __slots__ = ("_entries", "_names", "_stale", "source")

    def __init__(self, source: Mapping[str, T]) -> None:
        self.source = source
        self._names: tuple[str, ...] = ()
        self._entries: tuple[T, ...] = ()
        self._stale = True

    def forget(self) -> None:
        self._stale = True

    def page(
        self, cursor: object, size: int | None, keep: Callable[[T], bool] | None = None
    ) -> tuple[list[T], str | None]:
        """:func:`page` of the registry's entries."""
        while True:
            source = self.source
            if self._stale or len(self._entries) != len(source):
                self._names = tuple(source)
                self._entries = tuple(source.values())
                self._stale = False
            entries, names, get = self._entries, self._names, source.get
            chosen, start, end = _window(entries, cursor, size, keep)
            if all(get(names[index]) is entries[index] for index in range(start, end)):
                return chosen, (encode_cursor(end) if end < len(entries) else None)
            self._stale = True


class Listings:
    """A server's registries as :class:`Listing` s, each made when first paged through (and
    again if the server's registry was replaced by another dict)."""

    __slots__ = ("_made", "_server")

    def __init__(self, server: Registrations) -> None:
        self._server = server
        self._made: dict[str, Listing[Any]] = {}

    def tools(self) -> Listing[ToolEntry]:
        return self._of("tools", self._server.tools)

    def prompts(self) -> Listing[PromptEntry]:
        return self._of("prompts", self._server.prompts)

    def resources(self) -> Listing[ResourceEntry]:
        return self._of("resources", self._server.resources)

    def templates(self) -> Listing[TemplateEntry]:
        return self._of("templates", self._server.templates)

    def forget(self, kind: str) -> None:
        """The list of ``kind`` changed (as ``notifications/{kind}/list_changed`` names it:
        ``resources`` for resources and templates)."""
        for name in ("resources", "templates") if kind == "resources" else (kind,):
            made = self._made.get(name)
            if made is not None:
                made.forget()

    def _of(self, kind: str, source: Mapping[str, T]) -> Listing[T]:
        made = self._made.get(kind)
        if made is None or made.source is not source:
            made = self._made[kind] = Listing(source)
        return made


@attrs.frozen
class RequestRecord:
    """What the instrumentation hook is told after every request."""

    method: str
    request_id: str | int
    #: The tool or prompt name, or the resource URI, when the method has one.
    name: str | None
    duration: float
    cancelled: bool
    cancel_reason: str | None
    #: The JSON-RPC error code the request was answered with, if any.
    error_code: int | None
    #: True when a tool answered with ``isError: true``.
    tool_error: bool = False
    #: Who cancelled it: ``"peer"`` (``notifications/cancelled``, a client gone) or
    #: ``"local"`` (a drain, the connection ending, the handler itself); None if not cancelled.
    cancelled_by: str | None = None
    #: The protocol version it was served under.
    protocol_version: str | None = None
    #: The connection's id (the ``Mcp-Session-Id`` of an HTTP session; see
    #: ``MiddlewareContext.session_id``).
    session_id: str | None = None
    #: The wire: ``memory``, ``stdio``, ``streamable-http``, ``sse`` or ``websocket``.
    transport: str | None = None
    #: Who it acted for (the principal's subject, else its client id), under ``Server(auth=...)``.
    subject: str | None = None


@attrs.define(eq=False)
class CustomMethod:
    """A ``@server.method`` handler (or the completion handler)."""

    fn: Callable[..., Any]
    is_async: bool
    context_param: str | None
    #: The scopes a request or notification of this method needs beyond the base ones.
    scopes: frozenset[str] = frozenset()


class MountTable(Protocol):
    """What a connection asks of its server's mounts (``_mount.Mounts``; typed loosely here,
    where the connection's types cannot be named without a circle)."""

    def __bool__(self) -> bool: ...
    def handler(self, method: str, own: Any, server: Any) -> Any: ...
    def by_handle(self, own: Any) -> Any: ...
    def capabilities(self, conn: Any, caps: dict[str, Any]) -> None: ...


class ExtensionTable(Protocol):
    """What a connection asks of its server's extensions (``_extensions.Extensions``; typed
    loosely here, where the connection's types cannot be named without a circle)."""

    def __bool__(self) -> bool: ...
    def capabilities(self, host: Any, *, handshake: bool = False) -> dict[str, Any]: ...
    def route(
        self, method: str, client_capabilities: Mapping[str, Any], *, handshake: bool = False
    ) -> Any: ...
    def tool_filter(
        self, client_capabilities: Callable[[], Mapping[str, Any]]
    ) -> Callable[[ToolEntry], bool] | None: ...
    def forwards(self, method: str) -> bool: ...
    def tool_call(self, entry: ToolEntry, client_capabilities: Mapping[str, Any]) -> Any: ...
    async def watch(
        self, conn: Any, record: Any, wanted: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, frozenset[str]]]: ...


class Registrations(Protocol):
    """What a connection reads of its server: the registrations and the settings.

    ``Server`` is the one implementation; a connection is typed against this, so the server's
    module can build connections without the connection's module importing it back.
    """

    @property
    def info(self) -> Implementation: ...
    @property
    def info_wire(self) -> dict[str, Any]: ...
    @property
    def instructions(self) -> str | None: ...
    @property
    def cache_hints(self) -> CacheHints: ...
    @property
    def state_sealer(self) -> StateSealer: ...
    @property
    def state_audience(self) -> str: ...
    @property
    def single_use_state(self) -> bool: ...
    @property
    def state_claims(self) -> StateClaims: ...
    @property
    def protocol_version(self) -> str: ...
    @property
    def page_size(self) -> int | None: ...
    @property
    def tools(self) -> dict[str, ToolEntry]: ...
    @property
    def prompts(self) -> dict[str, PromptEntry]: ...
    @property
    def resources(self) -> dict[str, ResourceEntry]: ...
    @property
    def templates(self) -> dict[str, TemplateEntry]: ...
    @property
    def listings(self) -> Listings: ...
    @property
    def visibility(self) -> Visibility: ...
    @property
    def completion_handler(self) -> CustomMethod | None: ...
    @property
    def mounts(self) -> MountTable: ...
    @property
    def custom_methods(self) -> dict[str, CustomMethod]: ...
    @property
    def on_request(self) -> Callable[[RequestRecord], None] | None: ...
    @property
    def log_requests(self) -> bool: ...
    @property
    def max_listens(self) -> int: ...
    @property
    def auth(self) -> Auth | None: ...
    @property
    def extensions(self) -> ExtensionTable: ...
    @property
    def middleware_chain(self) -> Sequence[Middleware]: ...
    @property
    def lifespan_state(self) -> Any: ...
    @property
    def event_listeners(self) -> list[Callable[[BusEvent], None]]: ...

    def record(self, record: RequestRecord) -> None:
        """Tell the instrumentation hook (and the request log) about a finished request."""
        ...
