"""The Server Card endpoint: ``GET <endpoint>/server-card`` (SEP-2127's recommended location,
``/mcp/server-card`` by default), as :data:`~trio_mcp.server.CARD_MEDIA_TYPE`.

The card is built by :func:`~trio_mcp.server.server_card` for each request (a tool registered
later is listed at once), and is admitted as every other request of the app is
(:meth:`Admission.admit`): the same Host and Origin checks, and on a protected server the same
token and base scopes, since its ``_meta`` lists what the server offers. It is cacheable
(``public`` without authorization, ``private`` with), with an ``ETag`` that ``If-None-Match``
revalidates (304). Its remotes are the public URLs: ``Auth.resource`` on a protected server,
else the scheme and Host the request arrived with.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

import orjson

from ..server import CARD_MEDIA_TYPE, Server, ServerCardError, server_card
from ._admission import Admission
from ._asgi import HttpError, Responder, Scope, Send, header
from ._options import HttpOptions

#: The card's path below the MCP endpoint.
CARD_SEGMENT = "/server-card"
#: How long a client or a cache may keep a card (the discovery document's recommendation).
CARD_MAX_AGE = 3600


class CardHost(Responder, Protocol):
    """What the endpoint needs of the app it is part of (``McpHttpApp``, which imports this
    module: named here by its shape)."""

    @property
    def options(self) -> HttpOptions: ...
    @property
    def server(self) -> object: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def gate(self) -> object | None: ...
    @property
    def sse(self) -> object | None: ...


class ServerCardEndpoint:
    """The card of one app's server, at ``HttpOptions.path`` + ``/server-card``."""

    def __init__(self, app: CardHost) -> None:
        self.app = app
        self.path = app.options.path.rstrip("/") + CARD_SEGMENT

    def handles(self, route: str) -> bool:
        return route == self.path

    async def __call__(self, scope: Scope, send: Send) -> None:
        app = self.app
        method = scope["method"]
        if method == "OPTIONS" and await app.admission.answer_preflight(
            scope, send, b"GET, HEAD, OPTIONS"
        ):
            return
        if method not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, HEAD, OPTIONS")])
        await app.admission.admit(scope)
        server = app.server
        try:
            if not isinstance(server, Server):
                raise ServerCardError("only a trio_mcp.Server describes itself")
            card = server_card(server, **self._urls(scope, server))
        except ServerCardError as exc:
            raise HttpError(404, f"Not Found: this server has no card: {exc}") from None
        body = orjson.dumps(card)
        etag = b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"'
        cache = b"private" if app.gate is not None else b"public"
        headers = [
            (b"cache-control", cache + b", max-age=%d" % CARD_MAX_AGE),
            (b"etag", etag),
            (b"vary", b"authorization" if app.gate is not None else b"host"),
        ]
        if _matches(header(scope, b"if-none-match"), etag):
            await app.respond(scope, send, 304, b"", headers)
            return
        if method == "HEAD":
            headers.append((b"content-type", CARD_MEDIA_TYPE.encode()))
            await app.respond(scope, send, 200, b"", headers)
            return
        await app.respond(scope, send, 200, body, headers, content_type=CARD_MEDIA_TYPE.encode())

    def _urls(self, scope: Scope, server: Server) -> dict[str, str | None]:
        """The public URLs of the endpoints the app serves: the protected resource's, or those
        of the origin the request reached (its Host passed the checks already)."""
        app = self.app
        options = app.options
        auth = server.auth
        base: str | None
        if auth is not None:
            url = auth.resource
            path = options.path.rstrip("/")
            # The other endpoints only where the resource is this app's path on its origin.
            base = url.removesuffix(path) if path and url.endswith(path) else None
        else:
            scheme = str(scope.get("scheme") or "http")
            host = header(scope, b"host") or _address(scope)
            base = f"{scheme}://{host}{str(scope.get('root_path') or '').rstrip('/')}"
            url = base + options.path
        sse = options.legacy_sse
        ws = options.websocket
        return {
            "url": url,
            "sse_url": base + sse.path if base and sse and app.sse is not None else None,
            "websocket_url": "ws" + base.removeprefix("http") + ws.path if base and ws else None,
        }


def _address(scope: Scope) -> str:
    host, port = scope.get("server") or ("localhost", None)
    name = f"[{host}]" if ":" in str(host) else str(host)
    return name if port is None else f"{name}:{port}"


def _matches(if_none_match: str | None, etag: bytes) -> bool:
    if if_none_match is None:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag.decode() in tags
