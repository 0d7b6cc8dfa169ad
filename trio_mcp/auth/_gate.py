"""The HTTP app's authorization gate (``Server(auth=...)``): who sent a request, and whether
they may, decided before the engine sees anything of it.

Every request to the MCP path but a CORS preflight is authenticated first, after the Host and
Origin checks and before anything of MCP is read (:meth:`HttpAuth.authenticate`):

============================================  =====  ==============================================
the request                                   HTTP   ``WWW-Authenticate: Bearer ...``
============================================  =====  ==============================================
no token (no header, another scheme)          401    ``scope``, ``resource_metadata``
a token the verifier refuses (InvalidToken)   401    ``error="invalid_token"``, its description,
                                                     ``scope``, ``resource_metadata``
two headers, an oversized one, bad grammar,   400    ``error="invalid_request"``, what is wrong,
``access_token`` in the query string                 ``resource_metadata``
the verifier cannot check now                 503    none (``Retry-After``): signing in again
                                                     would not help
============================================  =====  ==============================================

The ``scope`` of a 401 is what a token needs to be of any use here: ``Auth.required_scopes``
when there are some, else every scope the metadata lists (what a client would ask for anyway,
RFC 9728 ``scopes_supported``). A request that then needs more (a tool with scopes of its own)
gets a 403 ``insufficient_scope`` naming every scope it needs, the base ones included, in one
challenge (:meth:`HttpAuth.authorize`), and the client steps up.

The Protected Resource Metadata (RFC 9728) is published at the path-based well-known URI of
``Auth.resource`` and at the root one (:attr:`HttpAuth.metadata_paths`); the challenges point at
the path-based one, on the resource's origin: the public URL, which behind a proxy or a mount
point differs from what this app sees. Bearer-only mode (no authorization servers) publishes
nothing and its challenges name no metadata.

Nothing here keeps, logs or repeats a token: a refusal says what is wrong with the credential,
never what it was; a verifier's message is checked for the credential before it is used.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..protocol._bearer import (
    INSUFFICIENT_SCOPE,
    INVALID_REQUEST,
    INVALID_TOKEN,
    BadCredential,
    format_challenge,
    metadata_paths,
    resource_metadata,
    token_in_query,
)
from ..protocol._jsonrpc import INTERNAL_ERROR
from ..protocol._jsonrpc import INVALID_REQUEST as JSONRPC_INVALID_REQUEST
from ..protocol._oauth import origin
from ..server._principal import (
    Auth,
    InvalidToken,
    Principal,
    VerifierUnavailable,
    every_entry_scopes,
    needed_scopes,
)
from ..server._registry import Registrations

logger = logging.getLogger("trio_mcp.auth")

#: How long a client may cache the metadata (``Cache-Control: max-age``), in seconds.
METADATA_MAX_AGE = 300
#: ``Retry-After`` of a 503 when the verifier cannot check a token now, in seconds.
UNAVAILABLE_RETRY_AFTER = 5

Header = tuple[bytes, bytes]


class Refused(Exception):
    """A request the gate turns away: the HTTP status, the JSON-RPC error its body carries
    (``code`` and ``message``) and its headers (the challenge). Nothing in it quotes the
    token."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: Iterable[Header] = (),
        *,
        code: int = JSONRPC_INVALID_REQUEST,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = list(headers)
        self.code = code


def authorization_values(scope: MutableMapping[str, Any]) -> list[str]:
    """Every ``Authorization`` header of an ASGI request, each on its own (two are refused,
    never joined or picked from)."""
    return [
        bytes(value).decode("latin-1")
        for key, value in scope.get("headers", ())
        if bytes(key).lower() == b"authorization"
    ]


def _redacted(text: str, values: Iterable[str], fallback: str) -> str:
    """``text``, unless it holds the credential of one of the header values: a verifier must
    never say what the token was, and if one does, its words are not used."""
    for value in values:
        credential = value.strip().partition(" ")[2].strip()
        if credential and credential in text:
            return fallback
    return text


class HttpAuth:
    """The gate of one HTTP app: its policy (``Auth``), the registrations whose scopes it
    checks, and the metadata it publishes."""

    def __init__(self, server: Registrations, auth: Auth) -> None:
        self.server = server
        self.auth = auth
        #: Where the metadata is served, as the public URL has it: path-based, then root; none
        #: in bearer-only mode. A host app that mounts this app routes them to it.
        self.metadata_paths: tuple[str, ...] = ()
        #: The ``resource_metadata`` of every challenge: the path-based URL, on the origin of
        #: ``Auth.resource``.
        self.metadata_url: str | None = None
        if not auth.bearer_only:
            self.metadata_paths = tuple(dict.fromkeys(metadata_paths(urlsplit(auth.resource).path)))
            self.metadata_url = origin(auth.resource) + self.metadata_paths[0]

    # -- the metadata --------------------------------------------------------------------------

    def scopes_supported(self) -> list[str]:
        """What the metadata lists: ``Auth.supported`` over the current registrations, never
        ``offline_access``."""
        supported = self.auth.supported(every_entry_scopes(self.server))
        return [scope for scope in supported if scope != "offline_access"]

    def metadata(self) -> bytes:
        """The Protected Resource Metadata document, as served (computed per request: tools
        registered later add their scopes)."""
        auth = self.auth
        document = resource_metadata(
            auth.resource,
            authorization_servers=auth.authorization_servers,
            scopes_supported=self.scopes_supported(),
            resource_name=auth.resource_name,
            resource_documentation=auth.resource_documentation,
        )
        return orjson.dumps(document)

    # -- challenges ----------------------------------------------------------------------------

    def challenge(
        self, *, error: str | None = None, description: str | None = None, scope: Iterable[str] = ()
    ) -> Header:
        value = format_challenge(
            error=error, description=description, scope=scope, resource_metadata=self.metadata_url
        )
        return (b"www-authenticate", value.encode("ascii"))

    def sign_in_scopes(self) -> list[str]:
        """The ``scope`` of a 401: the base scopes, else everything the metadata lists."""
        required = self.auth.required_scopes
        return sorted(required) if required else self.scopes_supported()

    # -- the gate ------------------------------------------------------------------------------

    async def authenticate(self, scope: MutableMapping[str, Any]) -> Principal:
        """The principal of a request, or :class:`Refused` (400, 401, 503; 500 for a verifier
        that fails in a way it should not)."""
        if token_in_query(bytes(scope.get("query_string") or b"")):
            # Checked even with a header: the URL is in logs and histories already.
            message = "an access token goes in the Authorization header, never in the URL"
            raise Refused(
                400,
                "Bad Request: " + message,
                [self.challenge(error=INVALID_REQUEST, description=message)],
            )
        values = authorization_values(scope)
        try:
            return await self.auth.authenticate(values)
        except BadCredential as bad:
            if bad.missing:
                raise Refused(
                    401,
                    "Unauthorized: " + bad.message,
                    [self.challenge(scope=self.sign_in_scopes())],
                ) from None
            raise Refused(
                400,
                "Bad Request: " + bad.message,
                [self.challenge(error=INVALID_REQUEST, description=bad.message)],
            ) from None
        except InvalidToken as invalid:
            description = _redacted(invalid.description, values, InvalidToken().description)
            raise Refused(
                401,
                "Unauthorized: " + description,
                [
                    self.challenge(
                        error=INVALID_TOKEN, description=description, scope=self.sign_in_scopes()
                    )
                ],
            ) from None
        except VerifierUnavailable as unavailable:
            logger.warning(
                "an access token could not be verified now: %s",
                _redacted(str(unavailable), values, "(the verifier's message quoted the token)"),
            )
            raise Refused(
                503,
                "Service Unavailable: the access token cannot be verified now; retry later",
                [(b"retry-after", str(UNAVAILABLE_RETRY_AFTER).encode())],
            ) from None
        except Exception as exc:
            # A fault of the verifier's: its message may quote the token (a parser's error
            # often does), so only the exception's type and where it was raised are logged.
            logger.error(
                "the token verifier failed with %s (its message is not logged: it may quote "
                "the token)\n%s",
                type(exc).__qualname__,
                "".join(traceback.format_tb(exc.__traceback__)),
            )
            raise Refused(500, "Internal error", code=INTERNAL_ERROR) from None

    def needed(self, method: str | None, params: Mapping[str, Any] | None) -> frozenset[str]:
        """Every scope a request needs: the base ones, and those of the entry it reaches (a
        request of ``method``; None for what carries no request: a GET, a DELETE, a
        notification or a response)."""
        base = self.auth.required_scopes
        if method is None:
            return base
        return base | needed_scopes(self.server, method, params)

    def authorize(self, principal: Principal, needed: frozenset[str]) -> None:
        """Raises :class:`Refused` (403 ``insufficient_scope``) unless the principal holds
        every scope of ``needed``; the challenge names all of them, so that one step-up is
        enough."""
        if not self.auth.missing(principal, needed):
            return
        wanted = " ".join(sorted(needed))
        description = f"this request needs the scopes: {wanted}"
        raise Refused(
            403,
            f"Forbidden: insufficient scope: {description}",
            [self.challenge(error=INSUFFICIENT_SCOPE, description=description, scope=needed)],
        )
