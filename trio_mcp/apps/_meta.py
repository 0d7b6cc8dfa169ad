"""The MCP Apps wire (SEP-1865, ``io.modelcontextprotocol/ui``): its names, a UI resource's
metadata and a tool's link to its UI, each read from and written to its ``_meta`` form.

Plain values and functions, no I/O: the server half writes these, the client half reads and
checks them, and both raise ``ValueError`` naming the field that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

#: The extension's identifier: its key under ``extensions`` in both sides' capabilities.
UI_EXTENSION = "io.modelcontextprotocol/ui"
#: The MIME type of a UI resource (MUST on its ``resources/read`` content, SHOULD when listed).
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: Where a UI resource lives: only ``ui://`` URIs name one.
UI_SCHEME = "ui://"
#: The flat key older hosts read a tool's UI from (deprecated in favour of ``_meta.ui``); a
#: tool declared here carries both, as the official server helpers do.
LEGACY_RESOURCE_URI_KEY = "ui/resourceUri"
#: Who may see and call a tool: the model (the agent's tool list), the app (its own calls).
VISIBILITIES = ("model", "app")

# A CSP source is spliced into a policy by the host: nothing that could end a directive or
# start another (whitespace, ';', ',', quotes) may get in.
_SOURCE = re.compile(r"[^\s;,'\"]+")
_PERMISSIONS = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboard_write": "clipboardWrite",
}


def _origins(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ValueError(f"a CSP entry is a list of origins, not one string ({value!r})")
    return tuple(value)


def _sources(value: Iterable[str], what: str) -> tuple[str, ...]:
    found = _origins(value)
    for source in found:
        if not isinstance(source, str) or not _SOURCE.fullmatch(source):
            raise ValueError(
                f"{what}: {source!r} is not an origin (like 'https://api.example.com' or "
                "'https://*.example.com'; no spaces, ';', ',' or quotes)"
            )
    return found


@attrs.frozen
class Csp:
    """The origins a UI may reach, which the host turns into its Content Security Policy.

    Each is a list of origins (``https://api.example.com``, ``https://*.cdn.example``):
    ``connect_domains`` for fetch/XHR/WebSocket, ``resource_domains`` for scripts, styles,
    images, fonts and media, ``frame_domains`` for nested frames, ``base_uri_domains`` for
    ``<base>``. Empty: none (a self-contained app declares nothing).
    """

    connect_domains: tuple[str, ...] = attrs.field(default=(), converter=_origins)
    resource_domains: tuple[str, ...] = attrs.field(default=(), converter=_origins)
    frame_domains: tuple[str, ...] = attrs.field(default=(), converter=_origins)
    base_uri_domains: tuple[str, ...] = attrs.field(default=(), converter=_origins)

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(Csp):
            _sources(getattr(self, field.name), f"csp.{_camel(field.name)}")

    def to_wire(self) -> dict[str, Any]:
        return {
            _camel(f.name): list(getattr(self, f.name))
            for f in attrs.fields(Csp)
            if getattr(self, f.name)
        }

    @classmethod
    def from_wire(cls, value: object) -> Csp:
        if not isinstance(value, Mapping):
            raise ValueError("_meta.ui.csp must be an object")
        found: dict[str, tuple[str, ...]] = {}
        for field in attrs.fields(Csp):
            key = _camel(field.name)
            origins = value.get(key)
            if origins is None:
                continue
            if not isinstance(origins, list):
                raise ValueError(f"_meta.ui.csp.{key} must be a list of origins")
            found[field.name] = _sources(origins, f"_meta.ui.csp.{key}")
        return cls(**found)


@attrs.frozen
class Permissions:
    """The browser features a UI asks for (the host MAY grant them; the app must still check)."""

    camera: bool = False
    microphone: bool = False
    geolocation: bool = False
    clipboard_write: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {key: {} for name, key in _PERMISSIONS.items() if getattr(self, name)}

    @classmethod
    def from_wire(cls, value: object) -> Permissions:
        if not isinstance(value, Mapping):
            raise ValueError("_meta.ui.permissions must be an object")
        asked: dict[str, bool] = {}
        for name, key in _PERMISSIONS.items():
            if key in value:
                if not isinstance(value[key], Mapping):
                    raise ValueError(f"_meta.ui.permissions.{key} must be an object ({{}})")
                asked[name] = True
        return cls(**asked)


@attrs.frozen
class AppMeta:
    """A UI resource's ``_meta.ui``: what the host needs to sandbox and frame it.

    ``domain``: a dedicated sandbox origin (its form is the host's to define); ``prefers_border``:
    whether the host should draw a border and background (None: the host decides).
    """

    csp: Csp | None = None
    permissions: Permissions | None = None
    domain: str | None = None
    prefers_border: bool | None = None

    def __attrs_post_init__(self) -> None:
        if self.domain is not None and (
            not isinstance(self.domain, str) or not _SOURCE.fullmatch(self.domain)
        ):
            raise ValueError(f"_meta.ui.domain: {self.domain!r} is not a domain")
        if self.prefers_border is not None and not isinstance(self.prefers_border, bool):
            raise ValueError("_meta.ui.prefersBorder must be a boolean")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        if self.csp is not None:
            wire["csp"] = self.csp.to_wire()
        if self.permissions is not None:
            wire["permissions"] = self.permissions.to_wire()
        if self.domain is not None:
            wire["domain"] = self.domain
        if self.prefers_border is not None:
            wire["prefersBorder"] = self.prefers_border
        return wire

    @classmethod
    def from_wire(cls, value: object) -> AppMeta:
        """The ``ui`` entry of a resource's or a content item's ``_meta``."""
        if not isinstance(value, Mapping):
            raise ValueError("_meta.ui must be an object")
        csp, permissions = value.get("csp"), value.get("permissions")
        return cls(
            csp=Csp.from_wire(csp) if csp is not None else None,
            permissions=Permissions.from_wire(permissions) if permissions is not None else None,
            domain=value.get("domain"),
            prefers_border=value.get("prefersBorder"),
        )


@attrs.frozen
class ToolUi:
    """A tool's link to its UI (``_meta.ui`` of the tool): the ``ui://`` resource that renders
    its results, if any, and who may see and call it (``visibility``)."""

    resource_uri: str | None = None
    visibility: tuple[str, ...] = VISIBILITIES

    @property
    def for_model(self) -> bool:
        """Whether the agent's tool list shows it."""
        return "model" in self.visibility

    @property
    def for_app(self) -> bool:
        """Whether an app (of this server) may call it."""
        return "app" in self.visibility

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        if self.resource_uri is not None:
            wire["resourceUri"] = self.resource_uri
        wire["visibility"] = list(self.visibility)
        return wire

    @classmethod
    def declare(cls, resource_uri: str | None, visibility: Iterable[str]) -> ToolUi:
        """A link as a server declares it: checked strictly."""
        if resource_uri is not None:
            check_ui_uri(resource_uri)
        if isinstance(visibility, str):
            raise ValueError("visibility is a list: ['model'], ['app'] or ['model', 'app']")
        seen = tuple(dict.fromkeys(visibility))
        if not seen or not set(seen) <= set(VISIBILITIES):
            raise ValueError(
                f"visibility {list(seen)!r} must be a non-empty list of 'model' and 'app'"
            )
        return cls(resource_uri, seen)

    @classmethod
    def of(cls, meta: Mapping[str, Any] | None) -> ToolUi | None:
        """The link a tool's ``_meta`` holds (the ``ui`` object, or the older flat key), None
        if it has none; unknown visibility values are kept (a later revision may add some)."""
        if not meta:
            return None
        ui, flat = meta.get("ui"), meta.get(LEGACY_RESOURCE_URI_KEY)
        if ui is None and flat is None:
            return None
        if ui is None:
            ui = {}
        if not isinstance(ui, Mapping):
            raise ValueError("the tool's _meta.ui must be an object")
        uri = ui.get("resourceUri", flat)
        if uri is not None and not isinstance(uri, str):
            raise ValueError("the tool's _meta.ui.resourceUri must be a string")
        visibility = ui.get("visibility", list(VISIBILITIES))
        if not isinstance(visibility, list) or not all(isinstance(v, str) for v in visibility):
            raise ValueError("the tool's _meta.ui.visibility must be a list of strings")
        return cls(uri, tuple(visibility))


def check_ui_uri(uri: object) -> str:
    """``uri`` if it names a UI resource, else a ``ValueError`` saying why."""
    if not isinstance(uri, str) or not uri.startswith(UI_SCHEME) or len(uri) == len(UI_SCHEME):
        raise ValueError(f"{uri!r} is not a UI resource URI: those start with {UI_SCHEME!r}")
    if "{" in uri:
        raise ValueError(f"{uri!r}: a UI resource is one fixed URI, not a template")
    return uri


def is_app_mime_type(mime_type: object) -> bool:
    """Whether ``mime_type`` is the Apps MIME type (case and spaces around ';' aside)."""
    if not isinstance(mime_type, str):
        return False
    kind, _, params = mime_type.partition(";")
    found = [p.strip().lower() for p in params.split(";")] if params else []
    return kind.strip().lower() == "text/html" and "profile=mcp-app" in found


def declares_apps(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether client ``capabilities`` (wire form) declare the extension with the Apps MIME
    type among its ``mimeTypes``: a host that renders apps."""
    extensions = capabilities.get("extensions") if capabilities else None
    settings = extensions.get(UI_EXTENSION) if isinstance(extensions, Mapping) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(mime_types, list) and any(is_app_mime_type(m) for m in mime_types)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
