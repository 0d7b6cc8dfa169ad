"""Admission: what every endpoint of the app checks before anything of MCP runs.

One step, in one order, for Streamable HTTP, the HTTP+SSE transport and WebSocket handshakes,
so that the three can never disagree: Host and Origin (against DNS rebinding), the CORS
preflight, who the request is (the authorization gate) and its base scopes, then whether the
app serves at all. Each condition has one answer, whatever the endpoint:

- a lifespan that did not run: 503 (:data:`NOT_STARTED`), no Retry-After (waiting will not
  help: the app is mounted wrong);
- shutting down, or draining (new work only): 503 with ``Retry-After: 1`` and
  ``Connection: close`` (:data:`DRAINING`), nothing of the request ran, so a proxy may send it
  elsewhere; a JSON-RPC error whose data says ``retry``.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..auth._gate import HttpAuth, Refused
from ..protocol._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ErrorObject,
    Notification,
    Request,
    RequestId,
)
from ..server._principal import Principal
from ._asgi import HttpError, Scope, Send, _refusal, header, header_table

if TYPE_CHECKING:
    from ._options import HttpOptions
    from ._sessions import SessionRegistry

MCP_HEADERS = "content-type, mcp-session-id, mcp-protocol-version, last-event-id, authorization"


#: What a request is told when the app's lifespan never ran (a host app that forwards none).
NOT_STARTED = (
    "Service Unavailable: the app's lifespan did not run; serve it with an ASGI server that runs "
    "lifespan (hypercorn does), or wrap it in `async with app.running()`"
)
#: What a request refused while draining (or shutting down) is told: nothing of it ran.
DRAINING = (
    "Service Unavailable: this server is shutting down; retry the request (another server takes it)"
)


def draining_error() -> ErrorObject:
    """The JSON-RPC error of a request refused while draining, on every transport."""
    return ErrorObject.make(INVALID_REQUEST, DRAINING, data={"retry": True})


#: How many passing (rules, address, Host, Origin) combinations an app remembers.
_PASSED_MAX = 1024


class Admission:
    """The checks of one app: its options, its authorization gate (None: none), and the
    registry that knows whether the app serves."""

    def __init__(
        self, options: HttpOptions, gate: HttpAuth | None, registry: SessionRegistry
    ) -> None:
        self.options = options
        self.gate = gate
        self.registry = registry
        #: The (host rules, local address, Host, Origin) a request passed the checks with: a
        #: client sends the same ones on every request, so its every request after the first
        #: costs a lookup, not a parse. Only passes are kept (a refusal is decided afresh each
        #: time), and at most ``_PASSED_MAX``: a client cannot grow it past that.
        self._passed: set[tuple[int, str, str, str | None]] = set()

    async def admit(
        self, scope: Scope, *, authenticate: bool = True, base_scopes: bool = True
    ) -> Principal | None:
        """The step every request and handshake takes first: Host and Origin, then (with
        ``authenticate``) who it is and, with ``base_scopes``, whether it holds the base
        scopes (a POST's are checked once its body says what it asks for, by
        :meth:`authorize`), then whether the app serves (:meth:`check_serving`, for what is
        no new work: a draining app still takes answers and cancels). Raises
        :class:`HttpError`; returns who the request acts for."""
        gate = self.gate
        if gate is None or not authenticate:
            self.admit_anonymous(scope)
            return None
        self.check_host_and_origin(scope)
        try:
            principal = await gate.authenticate(scope)
            if base_scopes:
                gate.authorize(principal, gate.needed(None, None))
        except Refused as refused:
            raise _refusal(refused) from None
        self.check_serving(new_work=False)
        return principal

    def admit_anonymous(self, scope: Scope) -> None:
        """:meth:`admit` for a request that needs no token (an app with no gate): the same
        checks, decided without a checkpoint, so a POST of such an app runs no coroutine for
        them."""
        self.check_host_and_origin(scope)
        self.check_serving(new_work=False)

    def check_serving(self, *, new_work: bool = True, request_id: RequestId | None = None) -> None:
        """503 unless the app serves: its lifespan not run, shutting down, or (for
        ``new_work``: a request, a new session or socket) draining."""
        registry = self.registry
        if registry.nursery is None:
            raise HttpError(503, ErrorObject.make(INTERNAL_ERROR, NOT_STARTED))
        if registry.shutting_down or (new_work and registry.draining):
            raise self.refused_draining(request_id)

    def refused_draining(self, request_id: RequestId | None = None) -> HttpError:
        return HttpError(
            503,
            draining_error(),
            request_id=request_id,
            headers=[(b"retry-after", b"1"), (b"connection", b"close")],
        )

    def authorize(
        self,
        principal: Principal | None,
        messages: Sequence[Request | Notification],
        request_id: RequestId | None = None,
    ) -> None:
        """A POST's body, once read: every scope its requests and notifications need (the base
        ones for what carries none: a client's answer), in one challenge, before the engine
        sees any of it."""
        gate = self.gate
        if gate is None:
            return
        assert principal is not None
        needed = gate.needed(None, None)
        for message in messages:
            needed |= gate.needed(message.method, message.params)
        try:
            gate.authorize(principal, needed)
        except Refused as refused:
            raise _refusal(refused, request_id) from None

    async def answer_preflight(self, scope: Scope, send: Send, methods: bytes) -> bool:
        """A CORS preflight (``OPTIONS`` with CORS on) answered: True. Nothing else is."""
        if scope["method"] != "OPTIONS" or self.options.hosts.cors_origins is None:
            return False
        self.check_host_and_origin(scope)
        await self.preflight(scope, send, methods)
        return True

    def check_host_and_origin(self, scope: Scope) -> None:
        # The default guards against DNS rebinding: a browser on this machine, tricked into
        # resolving an attacker's name to 127.0.0.1, sends that name as Host and its page's
        # origin as Origin. So a request that reached us on a loopback address (whatever the bind:
        # 127.0.0.1, or 0.0.0.0 reached through loopback, as from a proxy on this host) needs
        # loopback names, unless the names are configured. A request that reached a network
        # address is not checked by default: that server is reachable without any rebinding.
        server_addr = scope.get("server") or ("", None)
        local = str(server_addr[0] or "")
        headers = header_table(scope)
        host = headers.get(b"host") or ""
        origin = headers.get(b"origin")
        seen = (id(self.options.hosts), local, host, origin)
        if seen in self._passed:
            return
        self._check_host_and_origin(local, host, origin)
        if len(self._passed) >= _PASSED_MAX:
            self._passed.clear()
        self._passed.add(seen)

    def _check_host_and_origin(self, local: str, host: str, origin: str | None) -> None:
        on_loopback = is_loopback(local)
        # Compared as a host name (any case) and a port (digits): nothing else slips through.
        parsed = parse_host(host) if host else ("", None)
        if parsed is None:
            raise HttpError(
                400, f"Bad Request: Host {host!r} is not a host name with an optional port number"
            )
        name = f"[{parsed[0]}]" if ":" in parsed[0] else parsed[0]
        allowed_hosts = self.options.hosts.allowed_hosts
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
        if origin is None:
            return
        if origin_allowed(origin, self.options.hosts.cors_origins or (), wildcard=False):
            return  # an origin explicitly allowed to call us from a browser
        allowed_origins = self.options.hosts.allowed_origins
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
        origins = self.options.hosts.cors_origins
        if origins is None:
            return []
        origin = header(scope, b"origin")
        if origin is None:
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
