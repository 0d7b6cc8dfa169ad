"""The modern era's per-request envelope, ``server/discover``, ``resultType`` and cache hints.

In the 2026-07-28 revision every request carries its protocol version and the client's
capabilities in ``params._meta``: nothing is inferred from earlier requests. These functions read
and check that envelope and stamp what a modern result must carry. Sans-IO: plain values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ._errors import ProtocolError
from ._jsonrpc import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, JSONObject
from ._methods import CACHEABLE
from ._versions import MODERN_VERSIONS

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"

CacheScope = Literal["public", "private"]


@attrs.frozen
class Envelope:
    """What one modern request says about itself."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None
    log_level: str | None = None


def has_envelope(params: Mapping[str, Any] | None) -> bool:
    """A request is modern when its ``_meta`` carries a protocol version; other ``_meta``
    (a progress token, trace context) does not make it so."""
    meta = params.get("_meta") if params else None
    return meta is not None and isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def read_envelope(
    params: Mapping[str, Any] | None, supported: tuple[str, ...] = MODERN_VERSIONS
) -> Envelope:
    """Check a request's envelope; raise :class:`ProtocolError` with the error to answer when
    it is missing, malformed, or names a version we do not speak."""
    meta = params.get("_meta") if params else None
    if not isinstance(meta, dict) or PROTOCOL_VERSION_KEY not in meta:
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: missing or invalid `{PROTOCOL_VERSION_KEY}` in `_meta`",
        )
    version = meta[PROTOCOL_VERSION_KEY]
    if not isinstance(version, str):
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: missing or invalid `{PROTOCOL_VERSION_KEY}` in `_meta`",
        )
    if version not in supported:
        raise ProtocolError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(supported), "requested": version},
        )
    capabilities = meta.get(CLIENT_CAPABILITIES_KEY)
    if not isinstance(capabilities, dict):
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: missing or invalid `{CLIENT_CAPABILITIES_KEY}` in `_meta`",
        )
    info = meta.get(CLIENT_INFO_KEY)
    level = meta.get(LOG_LEVEL_KEY)
    return Envelope(
        version,
        capabilities,
        info if isinstance(info, dict) else None,
        level if isinstance(level, str) else None,
    )


def make_envelope(
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None = None,
    log_level: str | None = None,
) -> JSONObject:
    """The ``_meta`` keys a modern client puts on every request."""
    meta: JSONObject = {
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES_KEY: dict(capabilities),
    }
    if client_info is not None:
        meta[CLIENT_INFO_KEY] = dict(client_info)
    if log_level is not None:
        meta[LOG_LEVEL_KEY] = log_level
    return meta


@attrs.frozen
class CacheHints:
    """A server's cache hints: ``ttl_ms`` (0: do not reuse) and ``cache_scope``.

    ``explicit`` records whether they were configured: handshake-era results carry hints only
    when they were.
    """

    ttl_ms: int = 0
    cache_scope: CacheScope = "private"
    explicit: bool = False

    @classmethod
    def configure(cls, ttl_ms: int | None = None, cache_scope: str | None = None) -> CacheHints:
        if ttl_ms is not None and (
            not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0
        ):
            raise ValueError("ttl_ms must be an integer of at least 0")
        if cache_scope is not None and cache_scope not in ("public", "private"):
            raise ValueError('cache_scope must be "public" or "private"')
        return cls(
            ttl_ms if ttl_ms is not None else 0,
            "public" if cache_scope == "public" else "private",
            ttl_ms is not None or cache_scope is not None,
        )


def stamp_result(
    result: JSONObject,
    method: str,
    *,
    modern: bool,
    hints: CacheHints,
    server_info: Mapping[str, Any] | None = None,
) -> JSONObject:
    """Add what a result must carry in its era.

    Modern: ``resultType`` (a value the handler set is kept), cache hints on complete cacheable
    results (a handler's own ``ttlMs``/``cacheScope`` win), and the server's identity in
    ``_meta``. Handshake era: nothing, except cache hints where the server configured them.
    """
    if modern:
        result.setdefault("resultType", "complete")
        if server_info is not None:
            meta = result.get("_meta")
            meta = dict(meta) if isinstance(meta, dict) else {}
            meta.setdefault(SERVER_INFO_KEY, dict(server_info))
            result["_meta"] = meta
    complete = result.get("resultType", "complete") == "complete"
    if method in CACHEABLE and (modern or hints.explicit) and complete:
        result.setdefault("ttlMs", hints.ttl_ms)
        result.setdefault("cacheScope", hints.cache_scope)
    return result


def discover_result(
    *,
    capabilities: Mapping[str, Any],
    server_info: Mapping[str, Any],
    instructions: str | None,
    hints: CacheHints,
    supported: tuple[str, ...] = MODERN_VERSIONS,
    listen: bool = False,
) -> JSONObject:
    """The ``server/discover`` result.

    ``listChanged`` and ``subscribe`` are promises kept through ``subscriptions/listen``; a
    transport that does not serve it must not make them.
    """
    caps: JSONObject = {}
    for key, value in capabilities.items():
        if isinstance(value, dict) and not listen:
            value = {k: v for k, v in value.items() if k not in ("listChanged", "subscribe")}
        caps[key] = value
    result: JSONObject = {"supportedVersions": list(supported), "capabilities": caps}
    if instructions is not None:
        result["instructions"] = instructions
    result["_meta"] = {SERVER_INFO_KEY: dict(server_info)}
    result["ttlMs"] = hints.ttl_ms
    result["cacheScope"] = hints.cache_scope
    result["resultType"] = "complete"
    return result
