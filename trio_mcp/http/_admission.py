"""Admission: what every endpoint of the app checks before anything of MCP runs.

Host and Origin (against DNS rebinding), CORS and its preflight: the same for Streamable HTTP,
the HTTP+SSE transport and WebSocket handshakes, so that the three can never disagree.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..auth._gate import HttpAuth
from ._asgi import HttpError, Scope, Send, header

if TYPE_CHECKING:
    from ._options import HttpOptions

MCP_HEADERS = "content-type, mcp-session-id, mcp-protocol-version, last-event-id, authorization"


class Admission:
    """The checks of one app: its options, and its authorization gate (None: none)."""

    def __init__(self, options: HttpOptions, gate: HttpAuth | None) -> None:
        self.options = options
        self.gate = gate

    def check_host_and_origin(self, scope: Scope) -> None:
        # The default guards against DNS rebinding: a browser on this machine, tricked into
        # resolving an attacker's name to 127.0.0.1, sends that name as Host and its page's
        # origin as Origin. So a request that reached us on a loopback address (whatever the bind:
        # 127.0.0.1, or 0.0.0.0 reached through loopback, as from a proxy on this host) needs
        # loopback names, unless the names are configured. A request that reached a network
        # address is not checked by default: that server is reachable without any rebinding.
        server_addr = scope.get("server") or ("", None)
        local = str(server_addr[0] or "")
        on_loopback = is_loopback(local)
        host = header(scope, b"host") or ""
        # Compared as a host name (any case) and a port (digits): nothing else slips through.
        parsed = parse_host(host) if host else ("", None)
        if parsed is None:
            raise HttpError(
                400, f"Bad Request: Host {host!r} is not a host name with an optional port number"
            )
        name = f"[{parsed[0]}]" if ":" in parsed[0] else parsed[0]
        allowed_hosts = self.options.allowed_hosts
        if allowed_hosts is not None:
            if not host or not host_allowed(parsed, allowed_hosts):
                raise HttpError(
                    403,
                    f"Forbidden: Host {host!r} is not in allowed_hosts; to accept it, "
                    f"add {name!r} to HttpOptions(allowed_hosts=[...]) "
                    "or pass `--allowed-host` to trio-mcp serve",
                )
        elif on_loopback and not is_loopback(parsed[0]):
            raise HttpError(
                403,
                f"Forbidden: Host {host!r} refused: the request arrived on the loopback address "
                f"{local}, where only loopback names (localhost, 127.0.0.1, [::1]) are accepted "
                "by default, against DNS rebinding; if this name is yours (a proxy in front, "
                f"say), accept it with HttpOptions(allowed_hosts=[{name!r}]) or "
                f"`trio-mcp serve --allowed-host {name}`",
            )
        origin = header(scope, b"origin")
        if origin is None:
            return
        if origin_allowed(origin, self.options.cors_origins or (), wildcard=False):
            return  # an origin explicitly allowed to call us from a browser
        allowed_origins = self.options.allowed_origins
        if allowed_origins is not None:
            if not origin_allowed(origin, allowed_origins):
                raise HttpError(
                    403,
                    f"Forbidden: Origin {origin!r} is not in allowed_origins; to accept it, "
                    "add it to HttpOptions(allowed_origins=[...]) or pass `--allowed-origin` "
                    "to trio-mcp serve",
                )
            return
        origin_parts = parse_origin(origin)
        if on_loopback and (
            origin_parts is None
            or origin_parts[0] not in ("http", "https")
            or not is_loopback(origin_parts[1])
        ):
            raise HttpError(
                403,
                f"Forbidden: Origin {origin!r} refused: the request arrived on the loopback "
                f"address {local}, where only loopback origins are accepted by default, against "
                f"DNS rebinding; accept it with HttpOptions(allowed_origins=[{origin!r}]) or "
                f"`trio-mcp serve --allowed-origin {origin}`",
            )

    def cors_headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        origins = self.options.cors_origins
        origin = header(scope, b"origin")
        if origins is None or origin is None:
            return []
        if not origin_allowed(origin, origins):
            return []
        exposed = b"mcp-session-id, mcp-protocol-version"
        if self.gate is not None:
            exposed += b", www-authenticate"  # a browser client reads the challenge
        return [
            (b"access-control-allow-origin", origin.encode()),
            (b"access-control-expose-headers", exposed),
            (b"vary", b"origin"),
        ]

    async def preflight(
        self, scope: Scope, send: Send, methods: bytes = b"GET, POST, DELETE, OPTIONS"
    ) -> None:
        headers = self.cors_headers(scope)
        if headers:
            headers += [
                (b"access-control-allow-methods", methods),
                (b"access-control-allow-headers", MCP_HEADERS.encode()),
                (b"access-control-max-age", b"600"),
            ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


_PORT = re.compile(r"[0-9]{1,5}")


@functools.lru_cache(maxsize=256)
def parse_host(value: str) -> tuple[str, str | None] | None:
    """A Host header's host (lowercased: names are case-insensitive) and port, or None if it is
    not ``host[:port]``: the port is digits, an IPv6 address is bracketed (``[::1]:8000``)."""
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[1:end], value[end + 1 :]
        if end < 0 or not _is_ipv6(host):
            return None
    else:
        host, colon, port = value.partition(":")
        rest = colon + port
    if not host:
        return None
    if not rest:
        return host.lower(), None
    if rest[0] == ":" and _PORT.fullmatch(rest[1:]):
        return host.lower(), rest[1:]
    return None


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def parse_origin(value: str) -> tuple[str, str, str | None] | None:
    """An Origin's scheme (lowercased), host and port, or None if it is not
    ``scheme://host[:port]`` (``null``, a path, user info)."""
    scheme, sep, rest = value.partition("://")
    if not sep or not scheme or any(c in rest for c in "/?#@\\"):
        return None
    parsed = parse_host(rest)
    return (scheme.lower(), *parsed) if parsed is not None else None


def host_allowed(host: tuple[str, str | None], allowed: Iterable[str]) -> bool:
    """Whether a parsed Host is one of ``allowed`` (``host`` for any port, or ``host:port``)."""
    for entry in allowed:
        parsed = parse_host(entry.strip())
        if parsed is not None and parsed[0] == host[0] and parsed[1] in (None, host[1]):
            return True
    return False


def origin_allowed(origin: str, allowed: Iterable[str], *, wildcard: bool = True) -> bool:
    """Whether an Origin is one of ``allowed``: the same scheme, host and port (scheme and host
    in any case), or the same text (``null``, if it is listed); with ``wildcard``, ``*`` allows
    any."""
    parsed = parse_origin(origin)
    for entry in allowed:
        if (wildcard and entry == "*") or entry.lower() == origin.lower():
            return True
        if parsed is not None and parse_origin(entry) == parsed:
            return True
    return False


@functools.lru_cache(maxsize=256)
def is_loopback(host: str) -> bool:
    """Whether a host (as :func:`parse_host` gives it, or an address) is a loopback name."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
