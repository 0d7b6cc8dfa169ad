"""Token introspection (RFC 7662): the authorization server says whether a token is active.

:class:`IntrospectionVerifier` takes any token the authorization server issued, opaque ones
included, and learns of a revocation within ``cache_ttl`` seconds, at the cost of one call per
token per ``cache_ttl``. Each call posts ``token=...&token_type_hint=access_token`` with this
server's client credentials (``client_secret_basic`` or ``client_secret_post``).

An inactive token is an :class:`InvalidToken`; a call that gets no RFC 7662 answer (the
endpoint unreachable, an error status such as a 401 for wrong client credentials, a body that
is not one) is a :class:`VerifierUnavailable`: the token could not be checked, which says
nothing about the token.

Answers are cached under a SHA-256 digest of the token, never the token itself: an entry is
kept at most ``cache_ttl`` seconds and never past the token's ``exp``, and at most
``max_cache`` entries are kept (the oldest go first). A refused token is remembered apart, for
``negative_ttl`` seconds in at most ``max_negative`` entries, so a client that retries a bad
token (or an attacker who repeats one) costs the authorization server one call, and a flood of
made-up tokens cannot push the real ones out. Concurrent verifications of one token share one
call: a burst of requests with a fresh token is one introspection, not one each. An answer the
endpoint could not give (:class:`VerifierUnavailable`) is shared by the callers waiting on it
and never cached.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import quote_plus

import attrs
import httpx
import trio

from ..server._principal import InvalidToken, Principal, VerifierUnavailable
from ._authorization_server import AuthServerCalls, shown
from ._jwt import is_time, read_principal

logger = logging.getLogger("trio_mcp.auth")

AuthMethod = Literal["client_secret_basic", "client_secret_post"]
#: The ``token_type`` values (RFC 7662 §2.2, the types of RFC 6749 §7.1) of a bearer access token.
_BEARER_TYPES = frozenset({"bearer", "access_token"})


def _basic(client_id: str, client_secret: str) -> str:
    # RFC 6749 §2.3.1: each part form-urlencoded before the Basic encoding.
    pair = f"{quote_plus(client_id)}:{quote_plus(client_secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


@attrs.define
class _Flight:
    """One introspection call in progress, and what it came to for the callers waiting on it
    (nothing, if its caller was cancelled: then one of them calls again)."""

    done: trio.Event = attrs.Factory(trio.Event)
    principal: Principal | None = None
    refused: str | None = None
    unavailable: str | None = None


class IntrospectionVerifier:
    """Verifies tokens at an RFC 7662 introspection ``endpoint`` (a :class:`TokenVerifier`).

    ``client_id`` and ``client_secret`` are this server's credentials at the authorization
    server, sent as ``auth_method`` says (without a secret, only the ``client_id`` is sent).
    ``issuer``, when given, must be the answer's ``iss`` if it names one. ``timeout`` bounds
    each call; ``http_client`` is used for the calls if given (left open). ``clock`` is the
    Unix time the cache and ``exp`` are measured with. ``negative_ttl`` is how long a refused
    token stays refused without a call (0: not remembered): short, since a token refused as
    unknown may be one the authorization server has only just issued.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str | None = None,
        auth_method: AuthMethod = "client_secret_basic",
        issuer: str | None = None,
        cache_ttl: float = 30.0,
        max_cache: int = 10_000,
        negative_ttl: float = 5.0,
        max_negative: int = 10_000,
        timeout: float = 10.0,
        http_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if auth_method not in ("client_secret_basic", "client_secret_post"):
            raise ValueError(
                f"auth_method is client_secret_basic or client_secret_post, not {auth_method!r}"
            )
        if min(cache_ttl, max_cache, negative_ttl, max_negative) < 0:
            raise ValueError(
                "cache_ttl, max_cache, negative_ttl and max_negative must not be negative"
            )
        self.endpoint = endpoint
        self.client_id = client_id
        self._client_secret = client_secret
        self.auth_method = auth_method
        self.issuer = issuer
        self.cache_ttl = cache_ttl
        self.max_cache = max_cache
        self.negative_ttl = negative_ttl
        self.max_negative = max_negative
        self.clock = clock
        self._calls = AuthServerCalls(http_client=http_client, timeout=timeout)
        #: digest of the token -> (principal, cached at, kept until); oldest first.
        self._cache: dict[bytes, tuple[Principal, float, float]] = {}
        #: digest of a refused token -> (why, refused at, refused until); oldest first.
        self._refused: dict[bytes, tuple[str, float, float]] = {}
        #: digest of the token -> the call in progress for it.
        self._flights: dict[bytes, _Flight] = {}

    def __repr__(self) -> str:
        return f"IntrospectionVerifier({shown(self.endpoint)!r})"

    async def verify(self, token: str) -> Principal:
        digest = hashlib.sha256(token.encode()).digest()
        while True:
            principal = self._cached(digest)
            if principal is not None:
                return principal
            flight = self._flights.get(digest)
            if flight is None:
                break
            await flight.done.wait()
            if flight.principal is not None:
                return flight.principal
            if flight.refused is not None:
                raise InvalidToken(flight.refused)
            if flight.unavailable is not None:
                raise VerifierUnavailable(flight.unavailable)
            # Its caller was cancelled before an answer: look again, and call if no one is.
        flight = self._flights[digest] = _Flight()
        try:
            principal = self._principal(await self._introspect(token))
        except InvalidToken as exc:
            logger.debug("introspected token refused: %s", exc.description)
            flight.refused = exc.description
            self._refuse(digest, exc.description)
            raise
        except VerifierUnavailable as exc:
            flight.unavailable = str(exc)
            raise
        else:
            flight.principal = principal
            self._keep(digest, principal)
        finally:
            del self._flights[digest]
            flight.done.set()
        return principal

    def _cached(self, digest: bytes) -> Principal | None:
        """The principal kept for the token, None if none is; raises :class:`InvalidToken`
        for a token refused less than ``negative_ttl`` ago."""
        now = self.clock()
        cached = self._cache.get(digest)
        if cached is not None:
            principal, since, until = cached
            if since <= now < until:
                return principal
            del self._cache[digest]
        refused = self._refused.get(digest)
        if refused is not None:
            why, since, until = refused
            if since <= now < until:
                raise InvalidToken(why)
            del self._refused[digest]
        return None

    async def _introspect(self, token: str) -> Mapping[str, Any]:
        form = {"token": token, "token_type_hint": "access_token"}
        headers: dict[str, str] = {}
        secret = self._client_secret
        if secret is not None and self.auth_method == "client_secret_basic":
            headers["Authorization"] = _basic(self.client_id, secret)
        else:
            form["client_id"] = self.client_id
            if secret is not None:
                form["client_secret"] = secret
        status, body = await self._calls.call(
            "POST", self.endpoint, what="the token introspection", form=form, headers=headers
        )
        if status in (401, 403):
            raise VerifierUnavailable(
                f"the introspection endpoint refused this server's client credentials "
                f"(HTTP {status}): check client_id and client_secret"
            )
        if body is None or status != 200:
            raise VerifierUnavailable(f"the introspection endpoint answered HTTP {status}")
        if not isinstance(body, dict) or not isinstance(body.get("active"), bool):
            raise VerifierUnavailable(
                "the introspection endpoint's answer is not an RFC 7662 response"
            )
        return body

    def _principal(self, answer: Mapping[str, Any]) -> Principal:
        if answer["active"] is not True:
            raise InvalidToken("the access token is not active (revoked or expired)")
        token_type = answer.get("token_type")
        if token_type is not None and (
            not isinstance(token_type, str) or token_type.lower() not in _BEARER_TYPES
        ):
            raise InvalidToken("the token is not a bearer access token")
        issuer = answer.get("iss")
        if issuer is not None and not isinstance(issuer, str):
            raise InvalidToken("the introspection answer's issuer is not a string")
        if self.issuer is not None and issuer is not None and issuer != self.issuer:
            raise InvalidToken("the access token was issued by another authorization server")
        expires = answer.get("exp")
        if expires is not None:
            if not is_time(expires):
                raise InvalidToken("the introspection answer's exp is not a time")
            if expires <= self.clock():
                raise InvalidToken("the access token expired")
        return read_principal(answer, issuer=issuer or self.issuer)

    def _keep(self, digest: bytes, principal: Principal) -> None:
        if self.cache_ttl <= 0 or self.max_cache <= 0:
            return
        now = self.clock()
        until = now + self.cache_ttl
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if until <= now:
            return
        self._refused.pop(digest, None)
        _put(self._cache, self.max_cache, digest, (principal, now, until))

    def _refuse(self, digest: bytes, why: str) -> None:
        if self.negative_ttl <= 0 or self.max_negative <= 0:
            return
        now = self.clock()
        _put(self._refused, self.max_negative, digest, (why, now, now + self.negative_ttl))


def _put(cache: dict[bytes, Any], bound: int, digest: bytes, entry: Any) -> None:
    """Keeps ``entry`` as the newest of at most ``bound`` entries, the oldest going first."""
    cache.pop(digest, None)
    while len(cache) >= bound:
        del cache[next(iter(cache))]
    cache[digest] = entry
