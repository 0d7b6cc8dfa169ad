"""The sessions of every transport of the app, and who holds them."""

from __future__ import annotations

from ..server._principal import Principal
from . import _asgi
from ._asgi import Scope


def client_address(scope: Scope, *, header: str | None = None) -> str:
    """The address a request came from: the peer of its connection (the ASGI ``client``), or,
    with ``header``, the last value of that header, as a trusted proxy in front appends it
    (``x-forwarded-for``) or sets it (``x-real-ip``); the peer when the header is absent.

    Behind a proxy the peer is the proxy itself, so every client would share one key: name the
    proxy's header (``HttpOptions.client_address_header``), or let the ASGI server rewrite the
    scope (hypercorn's ``ProxyFixMiddleware``). Never trust the header without a proxy that
    writes it: a client can send any value.
    """
    if header is not None:
        value = _asgi.header(scope, header.lower().encode("latin-1"))
        if value:
            last = value.rsplit(",", 1)[-1].strip()
            if last:
                return last
    peer = scope.get("client")
    return str(peer[0]) if peer else ""


def identity(principal: Principal | None) -> str | None:
    return principal.identity if principal is not None else None
