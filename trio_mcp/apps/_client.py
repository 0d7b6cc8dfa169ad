"""The client half of MCP Apps: declare the extension, find a tool's UI, fetch it and check it.

What a host needs before it renders anything: which tools show the model and which an app,
the ``ui://`` resource a tool's results are rendered with, and that resource's HTML with the
metadata the sandbox is built from, each checked against the SEP (a wrong MIME type or bad
metadata is refused with a typed error naming the reason, never rendered).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Any, Unpack

import attrs

from ..client import Client, ClientExtension, RequestOptions
from ..protocol._errors import MCPError, ProtocolError
from ..protocol._jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND, JSONObject
from ..protocol._types import BlobResourceContents, TextResourceContents, Tool
from ._meta import APP_MIME_TYPE, UI_EXTENSION, AppMeta, ToolUi, check_ui_uri, is_app_mime_type

# An HTML document, as far as a host can tell before rendering it: a doctype or an <html>.
_HTML = re.compile(r"<!doctype\s+html|<html[\s>]", re.IGNORECASE)


class AppError(MCPError):
    """An app could not be had: the base of :class:`AppNotFound` and :class:`InvalidApp`.
    ``uri`` is the ``ui://`` URI concerned (None when a tool names none)."""

    def __init__(self, message: str, uri: str | None = None) -> None:
        super().__init__(message)
        self.uri = uri


class AppNotFound(AppError):
    """The tool links no UI, or the server has no resource at the URI it links."""


class InvalidApp(AppError):
    """The UI resource breaks the SEP's rules (``reason`` says which): not a ``ui://`` URI, not
    the Apps MIME type, no HTML document, or metadata of the wrong shape."""

    def __init__(self, uri: str | None, reason: str) -> None:
        super().__init__(f"{uri or 'the tool'}: {reason}", uri)
        self.reason = reason


class ClientApps(ClientExtension):
    """Declares the MCP Apps extension: ``open_client(..., extensions=[ClientApps()])``.

    The client then says it renders ``mime_types`` (the Apps MIME type by default) in
    ``initialize`` and on every modern request, so a server lists its app-only tools to it.
    """

    name = UI_EXTENSION

    def __init__(self, mime_types: Iterable[str] = (APP_MIME_TYPE,)) -> None:
        self.mime_types = tuple(mime_types)
        if not self.mime_types:
            raise ValueError("ClientApps needs at least one MIME type it renders")

    def declares(self, method: str) -> bool:
        return True

    def capability(self) -> JSONObject:
        return {"mimeTypes": list(self.mime_types)}


def server_apps(client: Client) -> JSONObject | None:
    """The server's settings for the extension (``{}`` today) if it declared
    ``io.modelcontextprotocol/ui`` (in ``initialize`` or ``server/discover``), else None."""
    extensions = client.server_capabilities.extra.get("extensions")
    settings = extensions.get(UI_EXTENSION) if isinstance(extensions, dict) else None
    return settings if isinstance(settings, dict) else None


def tool_ui(tool: Tool) -> ToolUi | None:
    """The tool's link to its UI (``_meta.ui``, or the older flat key), None if it has none;
    :class:`InvalidApp` if the link is malformed."""
    try:
        return ToolUi.of(tool.meta)
    except ValueError as exc:
        raise InvalidApp(None, f"tool {tool.name!r}: {exc}") from None


def model_tools(tools: Iterable[Tool]) -> list[Tool]:
    """The tools a host hands its model: all but those visible to apps alone."""
    found = []
    for tool in tools:
        ui = tool_ui(tool)
        if ui is None or ui.for_model:
            found.append(tool)
    return found


@attrs.frozen
class AppView:
    """A UI resource as fetched and checked: render ``html`` sandboxed by ``meta`` (the
    content item's ``_meta.ui``, else the listing's)."""

    uri: str
    html: str
    meta: AppMeta
    mime_type: str = APP_MIME_TYPE


async def read_app(
    client: Client, target: Tool | str, **options: Unpack[RequestOptions]
) -> AppView:
    """Fetch the UI of ``target`` (a tool, or a ``ui://`` URI) with ``resources/read`` and check
    it: the URI, the Apps MIME type, an HTML document, and ``_meta.ui`` of the right shape (on
    the content item, else on the ``resources/list`` entry).

    :class:`AppNotFound` when the tool links no UI or the server has none there;
    :class:`InvalidApp` (``reason``) when what it serves breaks the rules.
    """
    if isinstance(target, Tool):
        ui = tool_ui(target)
        if ui is None or ui.resource_uri is None:
            raise AppNotFound(f"the tool {target.name!r} links no UI resource")
        uri = ui.resource_uri
    else:
        uri = target
    try:
        check_ui_uri(uri)
    except ValueError as exc:
        raise InvalidApp(uri, str(exc)) from None
    try:
        result = await client.read_resource(uri, **options)
    except ProtocolError as exc:
        if _is_not_found(exc):
            raise AppNotFound(f"the server has no UI resource {uri!r}", uri) from None
        raise
    items = [c for c in result.contents if c.uri == uri] or list(result.contents)
    if len(items) != 1:
        raise InvalidApp(uri, f"expected one content item, got {len(result.contents)}")
    (item,) = items
    if not is_app_mime_type(item.mime_type):
        raise InvalidApp(uri, f"its content is {item.mime_type!r}, not {APP_MIME_TYPE!r}")
    html = _text_of(uri, item)
    if not _HTML.search(html):
        raise InvalidApp(uri, "its content is not an HTML document (no doctype, no <html>)")
    meta = await _meta_of(client, uri, item.meta, options)
    return AppView(uri=uri, html=html, meta=meta, mime_type=item.mime_type or APP_MIME_TYPE)


def _is_not_found(exc: ProtocolError) -> bool:
    # -32002 in the handshake era; -32602 with the URI as its data in the modern era.
    if exc.code == RESOURCE_NOT_FOUND:
        return True
    return exc.code == INVALID_PARAMS and "not found" in exc.message.lower()


def _text_of(uri: str, item: TextResourceContents | BlobResourceContents) -> str:
    if isinstance(item, TextResourceContents):
        return item.text
    try:
        return base64.b64decode(item.blob, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidApp(uri, "its blob is not base64 of a UTF-8 document") from None


async def _meta_of(
    client: Client, uri: str, item_meta: dict[str, Any] | None, options: RequestOptions
) -> AppMeta:
    """The content item's ``_meta.ui`` wins; without one, the listing's (the SEP: a host
    checks both); without either, no metadata (the host's restrictive defaults)."""
    raw = (item_meta or {}).get("ui")
    if raw is None:
        for resource in await client.list_resources(**options):
            if resource.uri == uri:
                raw = (resource.meta or {}).get("ui")
                break
    if raw is None:
        return AppMeta()
    try:
        return AppMeta.from_wire(raw)
    except ValueError as exc:
        raise InvalidApp(uri, str(exc)) from None
