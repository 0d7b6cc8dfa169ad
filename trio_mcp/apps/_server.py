"""The MCP Apps extension as a server extension: UI resources, tools linked to them, and what a
``tools/list`` shows a host that renders no apps.

A UI resource is an ordinary resource of the server (read with ``resources/read``, listed with
``resources/list``) whose URI is ``ui://...``, whose MIME type is the Apps one and whose
``_meta.ui`` says how to sandbox it; a tool names it in its ``_meta.ui``. :class:`Apps` writes
both through the server's own decorators, so everything else (authorization, middleware, both
eras, every transport) is the server's as usual.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, TypedDict, TypeVar, Unpack

import attrs

from ..protocol._jsonrpc import JSONObject
from ..protocol._types import (
    BlobResourceContents,
    Icon,
    TextResourceContents,
    ToolAnnotations,
    to_wire,
)
from ..server import Context, Extension, ExtensionHost, Server
from ..server._registry import ToolEntry, is_async_callable
from ._meta import (
    APP_MIME_TYPE,
    LEGACY_RESOURCE_URI_KEY,
    UI_EXTENSION,
    VISIBILITIES,
    AppMeta,
    Csp,
    Permissions,
    ToolUi,
    check_ui_uri,
    declares_apps,
    is_app_mime_type,
)

F = TypeVar("F", bound=Callable[..., Any])


class ToolOptions(TypedDict, total=False):
    """The keywords of ``server.tool`` that :meth:`Apps.tool` passes on as they are."""

    title: str | None
    description: str | None
    annotations: ToolAnnotations | None
    icons: Iterable[Icon] | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    meta: dict[str, Any] | None
    in_thread: bool
    strict: bool | None
    scopes: Iterable[str] | str | None
    task: bool | Literal["required"]
    input_first: bool


def client_supports_apps(ctx: Context) -> bool:
    """Whether the client of this request renders apps: it declared ``io.modelcontextprotocol/ui``
    with the Apps MIME type (in this request's capabilities in the modern era, in
    ``initialize`` in the handshake era). A tool may shape its text for a host without one."""
    return declares_apps(to_wire(ctx.client_capabilities))


class Apps(Extension):
    """MCP Apps (SEP-1865) for a server: ``Apps(server)`` (or ``Server(extensions=[Apps()])``)
    declares ``io.modelcontextprotocol/ui``, in ``server/discover`` and in ``initialize``.

    :meth:`resource` (or :meth:`html`) registers a UI resource, :meth:`tool` a tool linked to
    one. A tool stays an ordinary tool: a host without apps calls it and reads its text
    content, and a tool visible to the app alone (``visibility=["app"]``) is left out of the
    ``tools/list`` of a client that did not declare the extension (only an app could use it).
    A tool linked to a ``ui://`` URI that no :meth:`resource` registered stops the server
    before it serves anything (:meth:`check`).
    """

    name = UI_EXTENSION
    handshake_era = True

    def __init__(self, server: Server | None = None) -> None:
        self._server: Server | None = None
        #: Each UI resource's metadata, by URI.
        self.views: dict[str, AppMeta] = {}
        #: Each linked tool's UI, by tool name.
        self.links: dict[str, ToolUi] = {}
        if server is not None:
            server.use(self)

    def attach(self, host: ExtensionHost) -> None:
        if not isinstance(host, Server):
            raise TypeError("Apps is added to a trio_mcp Server")
        self._server = host

    @property
    def server(self) -> Server:
        if self._server is None:
            raise RuntimeError("add Apps to a server first: Apps(server) or server.use(apps)")
        return self._server

    # -- the extension's part --------------------------------------------------------------------

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        return {}

    def lists_tool(self, entry: ToolEntry, client_capabilities: Mapping[str, Any]) -> bool:
        # Read from the tool's own metadata: a link written by hand counts as one made here.
        try:
            ui = ToolUi.of(entry.tool.meta)
        except ValueError:
            return True
        if ui is None or ui.for_model:
            return True
        return declares_apps(client_capabilities)

    def hosting(self) -> AbstractAsyncContextManager[None]:
        self.check()
        return _nothing()

    def check(self) -> None:
        """Refuse a tool linked to a ``ui://`` URI that no UI resource has (the SEP: the
        resource a tool names MUST exist): a ``ValueError`` naming both."""
        for tool, ui in self.links.items():
            if tool not in self.server.tools:
                continue  # removed since
            if ui.resource_uri is not None and ui.resource_uri not in self.views:
                raise ValueError(
                    f"the tool {tool!r} is linked to {ui.resource_uri!r}, which is not a UI "
                    "resource of this server: register it with apps.resource() or apps.html()"
                )

    # -- registration ----------------------------------------------------------------------------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Iterable[Icon] | None = None,
        csp: Csp | None = None,
        permissions: Permissions | None = None,
        domain: str | None = None,
        prefers_border: bool | None = None,
        meta: dict[str, Any] | None = None,
        in_thread: bool = True,
        scopes: Iterable[str] | str | None = None,
    ) -> Callable[[F], F]:
        """Register a UI resource: a function returning its HTML document (``str``, or
        ``bytes`` of UTF-8), served as ``text/html;profile=mcp-app`` with ``_meta.ui`` (``csp``,
        ``permissions``, ``domain``, ``prefers_border``) on the listing and on the content.

        ``uri`` starts with ``ui://``; the other keywords are ``server.resource``'s.
        """
        check_ui_uri(uri)
        ui = AppMeta(csp=csp, permissions=permissions, domain=domain, prefers_border=prefers_border)
        full_meta = _with_ui(meta, ui.to_wire(), "apps.resource")
        server = self.server

        def register(func: F) -> F:
            contents = functools.partial(_contents, uri, full_meta)
            read: Callable[..., Any]
            if is_async_callable(func):

                async def read_async(**kwargs: Any) -> Any:
                    return contents(await func(**kwargs))

                read = read_async
            else:

                def read_sync(**kwargs: Any) -> Any:
                    return contents(func(**kwargs))

                read = read_sync
            functools.update_wrapper(read, func)
            server.resource(
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=APP_MIME_TYPE,
                icons=icons,
                meta=full_meta,
                in_thread=in_thread,
                scopes=scopes,
            )(read)
            self.views[uri] = ui
            return func

        return register

    def html(
        self,
        uri: str,
        document: str,
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        icons: Iterable[Icon] | None = None,
        csp: Csp | None = None,
        permissions: Permissions | None = None,
        domain: str | None = None,
        prefers_border: bool | None = None,
        meta: dict[str, Any] | None = None,
        scopes: Iterable[str] | str | None = None,
    ) -> None:
        """Register a UI resource whose HTML ``document`` is fixed (see :meth:`resource`)."""
        if not isinstance(document, str) or not document.strip():
            raise ValueError(f"{uri!r}: the app's HTML document is empty")

        def read() -> str:
            return document

        read.__name__ = name
        read.__doc__ = None
        self.resource(
            uri,
            name=name,
            title=title,
            description=description,
            icons=icons,
            csp=csp,
            permissions=permissions,
            domain=domain,
            prefers_border=prefers_border,
            meta=meta,
            in_thread=False,
            scopes=scopes,
        )(read)

    def tool(
        self,
        name: str | None = None,
        /,
        *,
        ui: str | None = None,
        visibility: Iterable[str] = VISIBILITIES,
        **options: Unpack[ToolOptions],
    ) -> Callable[[F], F]:
        """Register a tool linked to the UI resource ``ui`` (a ``ui://`` URI), visible to
        ``visibility``: ``["model", "app"]`` (the default), ``["model"]`` or ``["app"]``.

        Everything else is ``server.tool``'s (``@apps.tool("name", ui=...)`` names it). The
        tool still returns what a host without apps shows: its text content (a typed value's
        JSON text, or a string) beside any ``structuredContent`` the app reads.
        """
        link = ToolUi.declare(ui, visibility)
        meta = _with_ui(options.get("meta"), link.to_wire(), "apps.tool")
        if link.resource_uri is not None:
            meta[LEGACY_RESOURCE_URI_KEY] = link.resource_uri
        options["meta"] = meta
        server = self.server

        def register(func: F) -> F:
            tool_name = name or func.__name__
            server.tool(tool_name, **options)(func)
            self.links[tool_name] = link
            return func

        return register


def _with_ui(meta: dict[str, Any] | None, ui: dict[str, Any], where: str) -> dict[str, Any]:
    if meta and ("ui" in meta or LEGACY_RESOURCE_URI_KEY in meta):
        raise ValueError(f"{where}: give the UI with its keywords, not in meta['ui']")
    return {**(meta or {}), "ui": ui}


def _contents(uri: str, meta: dict[str, Any], value: Any) -> Any:
    """What a UI resource's function returned, as its one content item: the Apps MIME type
    and the resource's ``_meta`` on it (a host reads the item's first)."""
    if isinstance(value, bytes | bytearray | memoryview):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return BlobResourceContents(uri=uri, blob=blob, mime_type=APP_MIME_TYPE, meta=meta)
    if isinstance(value, str):
        return TextResourceContents(uri=uri, text=value, mime_type=APP_MIME_TYPE, meta=meta)
    if isinstance(value, TextResourceContents | BlobResourceContents):
        if value.mime_type is not None and not is_app_mime_type(value.mime_type):
            raise TypeError(
                f"{uri!r}: a UI resource's content is {APP_MIME_TYPE}, not {value.mime_type}"
            )
        return attrs.evolve(value, mime_type=APP_MIME_TYPE, meta={**meta, **(value.meta or {})})
    raise TypeError(
        f"{uri!r}: a UI resource's function returns its HTML (str or bytes), "
        f"not {type(value).__name__}"
    )


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield
