"""A server's Server Card (SEP-2127, Draft) and its MCP Registry ``server.json``, from a
:class:`Server`: one piece that ``trio-mcp card`` prints and the HTTP app serves.

Both documents describe a server before anyone connects to it. They share the registry's field
names (``name``, ``version``, ``description``, ``title``, ``websiteUrl``, ``icons``,
``remotes``); the card is the remote's own (``$schema`` :data:`CARD_SCHEMA`, served at
``<endpoint>/server-card`` as :data:`CARD_MEDIA_TYPE`), ``server.json`` is what a publisher
sends the registry (``$schema`` :data:`SERVER_JSON_SCHEMA`, and the installable ``packages``).

What either format has no field for (the tools, prompts, resources and templates, the declared
extensions, the authorization a client will need) goes under :data:`CARD_META_KEY` in ``_meta``,
the namespaced place both schemas leave for vendor data. It is advisory, as the card itself is:
a client lists the live server and never decides access on a card. The one requirement a remote
has a field for, the ``Authorization`` header of a protected server, is in ``remotes[].headers``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..protocol._bearer import metadata_paths
from ..protocol._oauth import origin
from ..protocol._types import to_wire
from ..protocol._versions import KNOWN_VERSIONS
from ._mount import ServerProvider
from ._principal import every_entry_scopes
from ._server import Server

__all__ = [
    "CARD_MEDIA_TYPE",
    "CARD_META_KEY",
    "CARD_SCHEMA",
    "SERVER_JSON_SCHEMA",
    "ServerCardError",
    "server_card",
    "server_json",
]

#: The card's media type (``Content-Type`` of the served card, ``Accept`` of a client).
CARD_MEDIA_TYPE = "application/mcp-server-card+json"
#: The card's required ``$schema``: versioned by ``v1``, never by date.
CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
#: The registry's current dated ``server.json`` schema (release 2025-12-11).
SERVER_JSON_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
#: trio_mcp's key in either document's ``_meta``: what the server offers and needs.
CARD_META_KEY = "dev.trio-mcp/server"
#: The only ``_meta`` key the registry keeps of a published ``server.json``.
PUBLISHER_KEY = "io.modelcontextprotocol.registry/publisher-provided"
#: The most the registry keeps under :data:`PUBLISHER_KEY` (bytes of JSON).
PUBLISHER_MAX_BYTES = 4096

_NAME = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+")
# A version range, which neither schema's text allows: ^1, ~1, >=1, <2, =1, 1 - 2, 1 || 2,
# 1.x, 1.*.
_RANGE = re.compile(r"^[\^~<>=]|\|\||\s-\s|(^|\.)[xX*](\.|$)")
_MAX_TEXT = 100


class ServerCardError(ValueError):
    """The server cannot be described as asked: its name is no registry name, its description
    is missing or too long, its version is a range. The message says which option fixes it."""


def server_card(
    server: Server,
    *,
    name: str | None = None,
    description: str | None = None,
    url: str | None = None,
    sse_url: str | None = None,
    websocket_url: str | None = None,
) -> dict[str, Any]:
    """The Server Card of ``server``, a JSON-ready dict.

    ``name`` defaults to the server's name, which must then be a registry name
    (``NAMESPACE/NAME``, reverse-DNS: ``io.github.you/weather``); ``description`` to the
    server's, else the first line of its instructions (shortened to 100 characters). ``url`` is
    the public URL of the Streamable HTTP endpoint (default: ``Auth.resource`` of a protected
    server, else no remote), ``sse_url`` that of a 2024-11-05 HTTP+SSE event stream,
    ``websocket_url`` a WebSocket endpoint (listed in ``_meta`` only: a card has no WebSocket
    remote). Raises :class:`ServerCardError`.
    """
    card: dict[str, Any] = {"$schema": CARD_SCHEMA}
    card.update(_identity(server, name, description))
    remotes = _remotes(server, url, sse_url, versions=True)
    if remotes:
        card["remotes"] = remotes
    offer = _offer(server)
    if websocket_url is not None:
        offer["websocket"] = {"url": websocket_url}
    card["_meta"] = {CARD_META_KEY: offer}
    return card


def server_json(
    server: Server,
    *,
    name: str | None = None,
    description: str | None = None,
    url: str | None = None,
    sse_url: str | None = None,
    packages: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The MCP Registry ``server.json`` of ``server`` (release 2025-12-11), a JSON-ready dict.

    The options are :func:`server_card`'s; ``packages`` are the registry's package entries
    (``{"registryType": "pypi", "identifier": ..., "version": ..., "transport": {"type":
    "stdio"}}``), copied as given. What the server offers goes in ``_meta`` under the
    registry's publisher key, without descriptions, and as counts alone if even that passes
    the 4096 bytes the registry keeps. Raises :class:`ServerCardError`.
    """
    document: dict[str, Any] = {"$schema": SERVER_JSON_SCHEMA}
    document.update(_identity(server, name, description))
    if "icons" in document:
        # The registry takes https icons of five image types only.
        icons = [icon for icon in document.pop("icons") if _registry_icon(icon)]
        if icons:
            document["icons"] = icons
    if packages:
        document["packages"] = [dict(package) for package in packages]
    remotes = _remotes(server, url, sse_url, versions=False)
    if remotes:
        document["remotes"] = remotes
    document["_meta"] = {PUBLISHER_KEY: {CARD_META_KEY: _brief(_offer(server))}}
    return document


# -- identity -------------------------------------------------------------------------------------


def _identity(server: Server, name: str | None, description: str | None) -> dict[str, Any]:
    info = server.info
    chosen = info.name if name is None else name
    if not (3 <= len(chosen) <= 200 and _NAME.fullmatch(chosen)):
        where = "the server's name" if name is None else "the name"
        raise ServerCardError(
            f"{where} {chosen!r} is not a registry name: NAMESPACE/NAME in reverse-DNS form "
            f"(io.github.you/{_slug(info.name)}, 3-200 letters, digits, '.', '-', '_'); "
            "give one with --name (server_card(name=...))"
        )
    version = info.version
    if len(version) > 255 or version == "latest" or _RANGE.search(version):
        raise ServerCardError(
            f"the server's version {version!r} is not one release (no ranges, no 'latest')"
        )
    document: dict[str, Any] = {
        "name": chosen,
        "version": version,
        "description": _description(server, description),
    }
    if info.title and len(info.title) <= _MAX_TEXT:
        document["title"] = info.title
    if info.website_url:
        document["websiteUrl"] = info.website_url
    if info.icons:
        document["icons"] = [to_wire(icon) for icon in info.icons]
    return document


def _description(server: Server, given: str | None) -> str:
    if given is not None:
        given = given.strip()
        if not 1 <= len(given) <= _MAX_TEXT:
            raise ServerCardError(
                f"the description must be 1 to {_MAX_TEXT} characters, not {len(given)}"
            )
        return given
    for text in (server.info.description, server.instructions):
        line = next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
        if line:
            return line if len(line) <= _MAX_TEXT else line[: _MAX_TEXT - 1].rstrip() + "…"
    raise ServerCardError(
        "the server has no description (Server(description=...)) nor instructions to take one "
        "from; give one with --description (server_card(description=...))"
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", name).strip("-") or "server"


def _registry_icon(icon: Mapping[str, Any]) -> bool:
    src = icon.get("src", "")
    types = ("image/png", "image/jpeg", "image/jpg", "image/svg+xml", "image/webp")
    return (
        isinstance(src, str)
        and src.startswith("https://")
        and len(src) <= 255
        and icon.get("mimeType", "image/png") in types
    )


# -- remotes --------------------------------------------------------------------------------------


def _remotes(
    server: Server, url: str | None, sse_url: str | None, *, versions: bool
) -> list[dict[str, Any]]:
    auth = server.auth
    if url is None and auth is not None:
        url = auth.resource
    remotes: list[dict[str, Any]] = []
    for kind, where in (("streamable-http", url), ("sse", sse_url)):
        if where is None:
            continue
        if not where.lower().startswith(("http://", "https://")) or any(c.isspace() for c in where):
            raise ServerCardError(f"a remote's URL must be an http(s):// URL, got {where!r}")
        remote: dict[str, Any] = {"type": kind, "url": where}
        if versions and kind == "streamable-http":
            # Newest first; Streamable HTTP serves every revision we speak, both eras.
            remote["supportedProtocolVersions"] = list(reversed(KNOWN_VERSIONS))
        if auth is not None:
            remote["headers"] = [_authorization_header(server)]
        remotes.append(remote)
    return remotes


def _authorization_header(server: Server) -> dict[str, Any]:
    auth = server.auth
    assert auth is not None
    if auth.bearer_only:
        source = "from the service that issues this server's tokens"
    else:
        source = "from " + ", ".join(auth.authorization_servers)
    return {
        "name": "Authorization",
        "description": f"An OAuth 2.1 access token for {auth.resource}, {source}",
        "isRequired": True,
        "isSecret": True,
        "value": "Bearer {access_token}",
        "variables": {
            "access_token": {
                "description": "the access token (a client that speaks MCP authorization gets "
                "one itself, through the Protected Resource Metadata)",
                "isRequired": True,
                "isSecret": True,
            }
        },
    }


# -- what the server offers -----------------------------------------------------------------------


def _offer(server: Server) -> dict[str, Any]:
    """What the server offers and needs: its lists (with every mounted server's, renamed),
    the extensions it declares, and its authorization."""
    lists = _lists(server)
    offer: dict[str, Any] = {kind: list(entries.values()) for kind, entries in lists.items()}
    offer["extensions"] = server.extensions.capabilities(server) if server.extensions else {}
    if server.auth is not None:
        offer["authorization"] = _authorization(server)
    return offer


_KEYS = {
    "tools": ("name", "title", "description"),
    "prompts": ("name", "title", "description"),
    "resources": ("uri", "name", "title", "description", "mimeType"),
    "resourceTemplates": ("uriTemplate", "name", "title", "description", "mimeType"),
}


def _lists(server: Server) -> dict[str, dict[str, dict[str, Any]]]:
    """Each list by name (or URI), as the live server merges them: its own entries first, then
    the mounts' (renamed; among mounts the latest wins), never over one of its own."""
    found: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _KEYS}
    own = (
        ("tools", [(e.tool, e.scopes) for e in server.tools.values()]),
        ("prompts", [(e.prompt, e.scopes) for e in server.prompts.values()]),
        ("resources", [(e.resource, e.scopes) for e in server.resources.values()]),
        ("resourceTemplates", [(e.template, e.scopes) for e in server.templates.values()]),
    )
    for kind, items in own:
        for item, scopes in items:
            wire = to_wire(item)
            entry = {key: wire[key] for key in _KEYS[kind] if wire.get(key) is not None}
            if scopes:
                entry["scopes"] = sorted(scopes)
            found[kind][_key(entry)] = entry
    mounted: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _KEYS}
    for mount in server.mounts:
        provider = mount.provider
        child = provider.child if isinstance(provider, ServerProvider) else None
        if not isinstance(child, Server):
            continue  # a proxy's lists are its upstream's, known only live
        for kind, entries in _lists(child).items():
            for entry in entries.values():
                renamed = dict(entry)
                if kind in ("tools", "prompts"):
                    renamed["name"] = mount.name(renamed["name"])
                for key in ("uri", "uriTemplate"):
                    if key in renamed:
                        renamed[key] = mount.uri(renamed[key])
                mounted[kind][_key(renamed)] = renamed
    for kind, entries in mounted.items():
        for key, entry in entries.items():
            found[kind].setdefault(key, entry)
    return found


def _key(entry: Mapping[str, Any]) -> str:
    return str(entry.get("uri") or entry.get("uriTemplate") or entry["name"])


def _authorization(server: Server) -> dict[str, Any]:
    auth = server.auth
    assert auth is not None
    found: dict[str, Any] = {
        "resource": auth.resource,
        "authorizationServers": list(auth.authorization_servers),
        "bearerMethodsSupported": ["header"],
        "requiredScopes": sorted(auth.required_scopes),
        "scopesSupported": [
            scope
            for scope in auth.supported(every_entry_scopes(server))
            if scope != "offline_access"
        ],
    }
    if not auth.bearer_only:
        path = urlsplit(auth.resource).path
        found["resourceMetadata"] = origin(auth.resource) + metadata_paths(path)[0]
    return found


def _brief(offer: dict[str, Any]) -> dict[str, Any]:
    """The offer as the registry keeps it: no descriptions; counts alone past its limit."""
    brief = {
        key: [{k: v for k, v in entry.items() if k != "description"} for entry in value]
        if key in _KEYS
        else value
        for key, value in offer.items()
    }
    if len(orjson.dumps({CARD_META_KEY: brief})) <= PUBLISHER_MAX_BYTES:
        return brief
    return {key: len(value) if key in _KEYS else value for key, value in brief.items()}
