"""Signed JWT access tokens (RFC 9068), checked against the keys the issuer publishes.

:class:`JWTVerifier` needs no shared secret and no call per request: the authorization server
signs its access tokens, publishes the public keys as a JWKS (RFC 7517), and this server checks
each token's signature and claims locally. In order:

1. the header: an ``alg`` from the allow-list (never ``none``, never an HMAC algorithm: a
   symmetric key would have to be shared, and "HMAC with the public key as the secret" is the
   classic forgery), no ``crit``, a ``typ`` that is an access token's or absent. ``jku``,
   ``x5u``, ``jwk`` and ``x5c`` are ignored: a token never chooses the key it is checked with;
2. the key: the one of the issuer's key set that the ``kid`` names, fit for the algorithm. The
   key set is fetched over httpx (metadata first, unless ``jwks_uri`` is given), kept for
   ``cache_ttl``, and fetched again for a ``kid`` it lacks (the issuer rotated its keys) at
   most once per ``min_refresh_interval``: a flood of tokens with made-up ``kid`` values costs
   one fetch per interval, and concurrent verifications wait for one fetch, never start their
   own;
3. the signature, then the claims: ``iss`` exactly the issuer, ``exp`` present and not past,
   ``nbf`` and ``iat`` not in the future (each within ``leeway`` seconds of clock skew), a
   ``sub`` or a client, and no ``cnf`` (a token bound to a key needs a proof this server does
   not check). The audience is :meth:`Auth.accept`'s to check, against the server's resource.

A token that fails is an :class:`InvalidToken` saying why in words a user can act on; keys that
cannot be had (the issuer unreachable, a broken key set) are a :class:`VerifierUnavailable`,
since a 401 would send the client to sign in again for nothing. No message, and no log line,
carries the token.

The JOSE work is joserfc's: it is typed, does no I/O (so it runs on Trio unchanged, with the
fetching done here over httpx), covers JWS, JWK and JWT the most completely of the Python JOSE
libraries, and is what fastmcp verifies tokens with; the client side of this package already
signs its DPoP proofs and assertions with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import httpx
import orjson
import trio
from joserfc import jwk, jws
from joserfc.errors import JoseError

from ..protocol._oauth import OAUTH_WELL_KNOWN, OIDC_WELL_KNOWN, OAuthInvalid, check_url, origin
from ..server._principal import InvalidToken, Principal, VerifierUnavailable
from ._authorization_server import MAX_RESPONSE_BYTES, AuthServerCalls

logger = logging.getLogger("trio_mcp.auth")

#: The asymmetric JWS algorithms accepted unless told otherwise.
DEFAULT_ALGORITHMS = ("ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "PS384", "EdDSA")
#: The ``typ`` values of an access token (RFC 9068 §2.1), and the generic one; compared without
#: case, as media types are (RFC 7515 §4.1.9).
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt", "jwt"})
#: The largest key set kept: more keys than this is a broken (or hostile) document.
MAX_KEYS = 100
#: Never accepted, whatever the allow-list says: no signature, or a shared secret.
_REFUSED_ALGORITHMS = frozenset({"none", "HS256", "HS384", "HS512"})


def is_time(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes of a claim set: ``scope`` (space-separated, RFC 9068 §2.2.3) or ``scp`` (a
    list, or a string, as some providers send it). Raises :class:`InvalidToken` if malformed."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list) and all(isinstance(scope, str) for scope in value):
            return frozenset(value)
        raise InvalidToken(f"the access token's {name} claim is not a list of scopes")
    return frozenset()


def read_audience(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``aud`` claim as a tuple (empty when absent, so no resource can match it)."""
    value = claims.get("aud")
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(aud, str) for aud in value):
        return tuple(value)
    raise InvalidToken("the access token's audience (aud) is not a resource or a list of them")


def read_principal(claims: Mapping[str, Any], *, issuer: str | None) -> Principal:
    """The principal of a checked claim set: ``sub``, the client (``client_id``, else
    ``azp``), scopes, ``exp``, ``aud``. Refuses a token bound to a key (``cnf``), and one that
    names neither a subject nor a client."""
    if "cnf" in claims:
        raise InvalidToken(
            "the access token is bound to a key (cnf: DPoP or mutual TLS), "
            "which this server cannot check: send an unbound bearer token"
        )
    subject = claims.get("sub")
    client_id = claims.get("client_id", claims.get("azp"))
    if not isinstance(subject, str | None) or not isinstance(client_id, str | None):
        raise InvalidToken("the access token's subject or client is not a string")
    if not subject and not client_id:
        raise InvalidToken("the access token names no subject (sub) and no client")
    expires = claims.get("exp")
    return Principal(
        subject=subject or None,
        client_id=client_id or None,
        scopes=read_scopes(claims),
        claims=dict(claims),
        issuer=issuer,
        expires_at=float(expires) if is_time(expires) else None,
        audience=read_audience(claims),
    )


def _import_keys(body: Any) -> list[jwk.Key]:
    """The signature keys of a JWKS document. Keys that are not for signatures (``use:
    enc``), symmetric keys, and keys of a kind joserfc does not know are skipped; a document
    with none left is broken."""
    if not isinstance(body, dict) or not isinstance(body.get("keys"), list):
        raise VerifierUnavailable("the issuer's key set (JWKS) is not a JSON object with keys")
    found: list[jwk.Key] = []
    for entry in body["keys"][:MAX_KEYS]:
        if not isinstance(entry, dict) or entry.get("kty") == "oct":
            continue
        if entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwk.import_key(entry)
        except (JoseError, ValueError, TypeError, KeyError):
            continue
        found.append(key)
    if not found:
        raise VerifierUnavailable("the issuer's key set (JWKS) holds no usable signature key")
    return found


class JWTVerifier:
    """Verifies JWT access tokens issued by ``issuer`` (a :class:`TokenVerifier`).

    ``jwks_uri`` is where the issuer's keys are; without it, the issuer's metadata says (the
    OpenID Connect document, then the RFC 8414 one; its ``issuer`` must be exactly
    ``issuer``). ``algorithms`` is the allow-list (asymmetric ones only). ``leeway`` is the
    clock skew tolerated on ``exp``, ``nbf`` and ``iat``, in seconds. The key set is kept for
    ``cache_ttl`` seconds and fetched again for an unknown ``kid`` at most once per
    ``min_refresh_interval``; each fetch is bounded by ``timeout`` and ``max_response_bytes``.
    ``http_client`` is used for the fetches if given (left open). ``clock`` is the Unix time
    the token's times and the key set's age are measured with.
    """

    def __init__(
        self,
        issuer: str,
        *,
        jwks_uri: str | None = None,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        leeway: float = 30.0,
        cache_ttl: float = 3600.0,
        min_refresh_interval: float = 30.0,
        timeout: float = 10.0,
        http_client: httpx.AsyncClient | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not issuer:
            raise ValueError("JWTVerifier needs the issuer its tokens come from")
        algorithms = tuple(algorithms)
        if not algorithms:
            raise ValueError("JWTVerifier needs at least one algorithm")
        for alg in algorithms:
            if alg in _REFUSED_ALGORITHMS:
                raise ValueError(f"{alg!r} is never accepted: use an asymmetric algorithm")
            if alg not in jws.JWSRegistry.algorithms:
                raise ValueError(f"{alg!r} is not a JWS algorithm joserfc knows")
        self.issuer = issuer
        self.jwks_uri = jwks_uri
        self.algorithms = algorithms
        self.leeway = leeway
        self.cache_ttl = cache_ttl
        self.min_refresh_interval = min_refresh_interval
        self.clock = clock
        self._calls = AuthServerCalls(
            http_client=http_client, timeout=timeout, max_response_bytes=max_response_bytes
        )
        # Header parameters beyond the registered ones are let through (providers add their
        # own); crit, the one that could change the meaning, is refused before this sees it.
        self._registry = jws.JWSRegistry(algorithms=algorithms, strict_check_header=False)
        self._keys: list[jwk.Key] = []
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._failure: VerifierUnavailable | None = None
        #: Counts finished fetches: a verification that waited for the lock sees whether one
        #: happened meanwhile, and takes its outcome instead of fetching again.
        self._fetches = 0
        self._lock = trio.Lock()
        self._found_jwks_uri: str | None = None

    def __repr__(self) -> str:
        return f"JWTVerifier({self.issuer!r})"

    async def verify(self, token: str) -> Principal:
        try:
            return await self._verify(token)
        except InvalidToken as exc:
            logger.debug("JWT access token refused: %s", exc.description)
            raise

    async def _verify(self, token: str) -> Principal:
        signed = self._parse(token)
        header = signed.headers()
        alg = self._check_header(header)
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's key id (kid) is not a string")
        keys = await self._keys_for(kid)
        candidates = [key for key in keys if self._fits(key, kid, alg)]
        if not candidates:
            raise InvalidToken(
                "the token is signed with a key the issuer does not publish"
                if kid is not None
                else "the token names no key (kid) and no key of the issuer fits its algorithm"
            )
        if not any(self._signed_by(signed, key) for key in candidates):
            raise InvalidToken("the token's signature does not verify with the issuer's keys")
        try:
            claims = orjson.loads(signed.payload)
        except orjson.JSONDecodeError:
            claims = None
        if not isinstance(claims, dict):
            raise InvalidToken("the token's payload is not a JSON claim set")
        self._check_claims(claims)
        return read_principal(claims, issuer=self.issuer)

    # -- the token -------------------------------------------------------------------------------

    def _parse(self, token: str) -> jws.CompactSignature:
        dots = token.count(".")
        if dots == 4:
            raise InvalidToken(
                "the access token is encrypted (JWE), which this server does not take"
            )
        if dots != 2:
            raise InvalidToken("the access token is not a JWT")
        try:
            signed = jws.extract_compact(token.encode("ascii"), registry=self._registry)
        except (JoseError, ValueError, TypeError, KeyError, UnicodeError):
            raise InvalidToken("the access token is not a well-formed JWT") from None
        if not isinstance(signed.headers(), dict):
            raise InvalidToken("the access token is not a well-formed JWT")
        return signed

    def _check_header(self, header: Mapping[str, Any]) -> str:
        alg = header.get("alg")
        if alg == "none":
            raise InvalidToken("the access token is not signed (alg none)")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken("the token is signed with an algorithm this server does not accept")
        if "crit" in header:
            raise InvalidToken(
                "the token's header has critical extensions (crit) this server does not support"
            )
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in ACCESS_TOKEN_TYPES):
            raise InvalidToken("the token is not an access token (its typ is not at+jwt)")
        # jku, x5u, jwk and x5c are not read: the key comes from the issuer's key set only.
        return alg

    def _fits(self, key: jwk.Key, kid: str | None, alg: str) -> bool:
        if kid is not None and key.kid != kid:
            return False
        if key.alg is not None and key.alg != alg:
            return False
        ops = key.get("key_ops")
        if isinstance(ops, list) and "verify" not in ops:
            return False
        try:
            self._registry.get_alg(alg).check_key(key)
        except JoseError:
            return False
        return True

    def _signed_by(self, signed: jws.CompactSignature, key: jwk.Key) -> bool:
        try:
            return jws.validate_compact(signed, key, registry=self._registry)
        except (JoseError, ValueError, TypeError):
            return False

    def _check_claims(self, claims: Mapping[str, Any]) -> None:
        if claims.get("iss") != self.issuer:
            raise InvalidToken("the access token was issued by another authorization server")
        now = self.clock()
        expires = claims.get("exp")
        if not is_time(expires):
            raise InvalidToken("the access token has no expiry time (exp)")
        if now >= expires + self.leeway:
            raise InvalidToken("the access token expired")
        for name, what in (("nbf", "is not valid yet"), ("iat", "was issued in the future")):
            value = claims.get(name)
            if value is None:
                continue
            if not is_time(value):
                raise InvalidToken(f"the access token's {name} claim is not a time")
            if value > now + self.leeway:
                raise InvalidToken(
                    f"the access token {what} (check this server's clock if that is wrong)"
                )

    # -- the keys --------------------------------------------------------------------------------

    def _age(self, since: float | None, now: float) -> float | None:
        # None for never; a clock that went backwards makes everything old, not young.
        if since is None or now < since:
            return None
        return now - since

    def _usable(self, now: float) -> bool:
        age = self._age(self._fetched_at, now)
        return bool(self._keys) and age is not None and age < self.cache_ttl

    def _may_refetch(self, now: float) -> bool:
        age = self._age(self._attempted_at, now)
        return age is None or age >= self.min_refresh_interval

    def _known(self, kid: str | None) -> bool:
        return kid is None or any(key.kid == kid for key in self._keys)

    async def _keys_for(self, kid: str | None) -> list[jwk.Key]:
        """The key set to check a token naming ``kid`` with: the cached one while it is fresh
        and knows the ``kid`` (or may not be fetched again yet), else a fresh one."""
        now = self.clock()
        if self._usable(now) and (self._known(kid) or not self._may_refetch(now)):
            if self._known(kid) or self._failure is None:
                return self._keys
            # The last fetch failed: a new key may be what this token is signed with.
            raise self._failure
        seen = self._fetches
        async with self._lock:
            if self._fetches == seen:
                await self._fetch()
            # Otherwise another verification fetched while this one waited: its outcome
            # stands, so a burst of tokens costs one fetch.
            if self._failure is not None and (
                not self._usable(self.clock()) or not self._known(kid)
            ):
                raise self._failure
            return self._keys

    async def _fetch(self) -> None:
        try:
            uri = self.jwks_uri or self._found_jwks_uri or await self._discover()
            status, body = await self._calls.call("GET", uri, what="the issuer's key set (JWKS)")
            if body is None:
                raise VerifierUnavailable(f"the issuer's key set (JWKS) answered HTTP {status}")
            keys = _import_keys(body)
        except VerifierUnavailable as exc:
            logger.debug("the keys of %s could not be fetched: %s", self.issuer, exc)
            self._failure = exc
        else:
            logger.debug("fetched %d keys of %s", len(keys), self.issuer)
            self._keys, self._failure = keys, None
            self._fetched_at = self.clock()
        # Not reached when cancelled: then the next verification fetches.
        self._attempted_at = self.clock()
        self._fetches += 1

    def _metadata_urls(self) -> Iterable[str]:
        path = urlsplit(self.issuer).path.rstrip("/")
        yield self.issuer.rstrip("/") + OIDC_WELL_KNOWN
        yield origin(self.issuer) + OAUTH_WELL_KNOWN + path

    async def _discover(self) -> str:
        for url in self._metadata_urls():
            _, body = await self._calls.call("GET", url, what="the issuer's metadata")
            if body is None:
                continue
            if not isinstance(body, dict) or body.get("issuer") != self.issuer:
                raise VerifierUnavailable(
                    "the issuer's metadata names another issuer than the one configured"
                )
            try:
                uri = check_url(
                    body.get("jwks_uri"), step="keys", what="jwks_uri", server_url=self.issuer
                )
            except OAuthInvalid as exc:
                raise VerifierUnavailable(f"the issuer's metadata: {exc.message}") from None
            self._found_jwks_uri = uri
            return uri
        raise VerifierUnavailable("the issuer publishes no metadata naming its keys (jwks_uri)")
