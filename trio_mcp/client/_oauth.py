"""OAuth for MCP clients: an ``httpx.Auth`` that runs the whole authorization flow on Trio.

``open_client(HttpTarget(url, auth=OAuth(...)))`` sends every HTTP request of the connection
through :meth:`OAuth.async_auth_flow`. A request goes out with the stored access token
(refreshed first when it is about to expire). On a 401 the flow starts, in this order (MCP
"Authorization", 2025-11-25 and 2026-07-28):

1. discovery: the Protected Resource Metadata (RFC 9728) at the challenge's
   ``resource_metadata``, then the path-based and root well-known URIs; its ``resource`` must
   name this server. Without one (a 2025-03-26 server), the authorization server is the MCP
   server's origin, with default endpoints if it publishes no metadata either;
2. the authorization server's metadata (RFC 8414 and OpenID forms, in the spec's order), whose
   ``issuer`` must be exactly the one the URL was built from, and which must offer PKCE S256;
3. registration: pre-registered credentials, else a Client ID Metadata Document URL when the
   server supports them, else dynamic registration (RFC 7591); kept per issuer in the
   :class:`~trio_mcp.client.TokenStore`, so a new authorization server means a new
   registration, never the old credentials;
4. authorization: PKCE S256, ``state``, RFC 8707 ``resource`` and the chosen scope; the driver
   (``on_authorize``, or a browser and a loopback receiver) returns the redirect, whose
   ``state`` and RFC 9207 ``iss`` are checked by exact string;
5. the code is exchanged for tokens at the token endpoint (``client_secret_basic``,
   ``client_secret_post`` or ``none``, as registered or advertised), and the request is sent
   again.

A 403 ``insufficient_scope`` re-authorizes with the union of the scope held and the scope
challenged (step-up), at most ``max_authorizations`` times per request. A refresh token is used
before expiry and on a 401, and kept when the server does not rotate it. Every call to the
authorization server is bounded by ``timeout``; every failure is an
:class:`~trio_mcp.client.OAuthError` naming the step, and no token or secret is ever logged.

Two plug-in points are constructor arguments: ``grant`` obtains tokens another way than the
authorization-code flow (client credentials, a JWT bearer assertion), and ``dpop`` signs
proofs that bind the tokens to a key (RFC 9449).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx
import orjson
import trio

from .._exception_groups import collapse_exception_groups
from ..protocol._oauth import (
    Challenge,
    OAuthInvalid,
    ResourceMetadata,
    ServerMetadata,
    as_metadata_urls,
    authorization_url,
    bearer_challenge,
    canonical_resource,
    check_url,
    choose_scope,
    is_loopback_host,
    legacy_metadata,
    new_state,
    origin,
    parse_redirect,
    parse_resource_metadata,
    parse_server_metadata,
    pkce_challenge,
    pkce_verifier,
    prm_urls,
    scope_union,
    split_scope,
    token_error,
)
from ._grants import ClientAuth, DPoPSession, DPoPSigner, Grant, GrantRequest, token_request
from ._oauth_errors import OAuthError
from ._redirect import LoopbackReceiver, open_browser
from ._tokens import ClientRegistration, MemoryTokenStore, StoredTokens, TokenSet, TokenStore

logger = logging.getLogger("trio_mcp.client.oauth")

#: The largest metadata, registration or token response read.
MAX_BODY_BYTES = 1 << 20
#: Refresh this long before the access token expires.
REFRESH_MARGIN = 60.0
HEADLESS_REDIRECT_URI = "http://127.0.0.1/callback"
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")

Authorize = Callable[[str], Awaitable[str]]


async def _read_json(response: httpx.Response, step: str) -> Any:
    chunks = bytearray()
    async for chunk in response.aiter_bytes():
        chunks += chunk
        if len(chunks) > MAX_BODY_BYTES:
            raise OAuthError(step, "the authorization server's response is too large")
    try:
        return orjson.loads(chunks)
    except orjson.JSONDecodeError:
        raise OAuthError(
            step, f"HTTP {response.status_code} with a body that is not JSON"
        ) from None


async def _call(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    step: str,
    timeout: float,
    form: dict[str, str] | None = None,
    json: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[httpx.Response, Any]:
    """One request to an authorization server (or a metadata host), bounded in time, never
    following a redirect; the response and its JSON body (None when it has none)."""
    logger.debug("OAuth %s: %s %s", step, method, urlsplit(url)._replace(query="").geturl())
    try:
        with trio.fail_after(timeout):
            async with http.stream(
                method,
                url,
                data=form,
                content=orjson.dumps(json) if json is not None else None,
                headers={
                    "Accept": "application/json",
                    **({"Content-Type": "application/json"} if json is not None else {}),
                    **(headers or {}),
                },
                timeout=timeout,
                follow_redirects=False,
                # Never our own auth: these requests go to the authorization server.
                auth=None,
            ) as response:
                kind = response.headers.get("content-type", "")
                if "json" not in kind.lower():
                    await response.aclose()
                    return response, None
                return response, await _read_json(response, step)
    except trio.TooSlowError:
        raise OAuthError(
            step, f"{urlsplit(url).netloc} did not answer within {timeout:g}s"
        ) from None
    except httpx.HTTPError as exc:
        raise OAuthError(
            step, f"cannot reach {urlsplit(url).netloc}: {type(exc).__name__}"
        ) from None


@attrs.define
class _Server:
    """What the flow knows about one MCP server (by its canonical URI) in this process."""

    url: str
    resource: str
    resource_metadata: ResourceMetadata | None = None
    metadata: ServerMetadata | None = None
    stored: StoredTokens | None = None
    loaded: bool = False
    #: The realm of its last challenge, if it named one (for the error when it offers no OAuth).
    realm: str | None = None


class OAuth(httpx.Auth):
    """The MCP authorization flow, as an ``httpx.Auth`` for ``HttpTarget(url, auth=...)``.

    - ``store``: where tokens and registrations live (default: in memory);
    - ``client_id``/``client_secret``/``token_endpoint_auth_method``: pre-registered
      credentials, used first; ``client_issuer`` binds them to one authorization server
      (elsewhere the flow registers afresh);
    - ``client_metadata_url``: this client's Client ID Metadata Document (an https URL), used as
      the ``client_id`` where the authorization server supports it;
    - ``client_name``, ``application_type`` (``"native"`` or ``"web"``), ``redirect_uri``: what
      dynamic registration sends (the redirect URI defaults to a loopback one);
    - ``on_authorize``: the headless hook, given the authorization URL, returning the full
      redirect URL the browser landed on; without it the browser is opened and a receiver on
      127.0.0.1 waits up to ``authorize_timeout`` seconds;
    - ``timeout``: the bound on every call to an authorization server;
    - ``max_authorizations``: authorizations per request (the first one and step-ups);
    - ``http_client``: the ``httpx.AsyncClient`` for authorization-server calls (left open);
      without it one is made for each run of the flow;
    - ``grant``: obtains tokens instead of the authorization-code step; ``dpop``: signs DPoP
      proofs for the token endpoint and for every request to the server;
    - ``clock``: wall-clock seconds, for expiry.
    """

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        *,
        store: TokenStore | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        token_endpoint_auth_method: str | None = None,
        client_issuer: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "trio-mcp",
        application_type: str = "native",
        redirect_uri: str | None = None,
        on_authorize: Authorize | None = None,
        authorize_timeout: float = 300.0,
        timeout: float = 30.0,
        max_authorizations: int = 3,
        http_client: httpx.AsyncClient | None = None,
        grant: Grant | None = None,
        dpop: DPoPSigner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret= needs client_id=")
        if token_endpoint_auth_method not in (None, *AUTH_METHODS):
            raise ValueError(f"token_endpoint_auth_method must be one of {AUTH_METHODS}")
        if application_type not in ("native", "web"):
            raise ValueError('application_type must be "native" or "web"')
        if client_metadata_url is not None:
            parts = urlsplit(client_metadata_url)
            if parts.scheme != "https" or parts.path in ("", "/"):
                raise ValueError("client_metadata_url must be an https URL with a path")
        if max_authorizations < 1:
            raise ValueError("max_authorizations must be at least 1")
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.client_id = client_id
        self._client_secret = client_secret
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self.client_issuer = client_issuer
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.application_type = application_type
        self.redirect_uri = redirect_uri
        self.on_authorize = on_authorize
        self.authorize_timeout = authorize_timeout
        self.timeout = timeout
        self.max_authorizations = max_authorizations
        self.http_client = http_client
        self.grant = grant
        self.dpop = dpop
        #: The key and the nonces servers gave for it: the authorization server's per token
        #: endpoint, the resource server's per origin (RFC 9449 §8, §9).
        self._dpop = DPoPSession(dpop) if dpop is not None else None
        self.clock = clock
        self._servers: dict[str, _Server] = {}
        self._lock = trio.Lock()

    def __repr__(self) -> str:
        return f"OAuth(client_id={self.client_id!r}, store={type(self.store).__name__})"

    # -- httpx.Auth ------------------------------------------------------------------------------

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        raise RuntimeError("OAuth runs on an httpx.AsyncClient (under Trio), not a sync client")
        yield request  # pragma: no cover - makes this a generator

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        server = self._server(request)
        async with self._lock:
            stored = await self._usable(server)
        self._sign(request, stored, server)
        response = yield request
        if request.method == "DELETE":
            return  # ending a session never starts an authorization
        authorizations = 0
        # Bounded: each turn either authorizes (at most max_authorizations times), refreshes
        # or takes a DPoP nonce (once each), or ends the loop.
        refreshed = nonce_taken = False
        for _turn in range(2 * self.max_authorizations + 3):
            challenge = bearer_challenge(response.headers.get_list("www-authenticate"))
            wants_nonce = self._dpop is not None and self._dpop.learn(response)
            if wants_nonce and not nonce_taken:
                nonce_taken = True  # RFC 9449 §9: the resource server wants a fresh nonce
            elif response.status_code == 401:
                async with self._lock:
                    fresher = server.stored
                    if fresher is not None and fresher is not stored:
                        stored = fresher  # another request already authorized meanwhile
                    else:
                        await self._discover(server, challenge)
                        stored = None
                        if not refreshed and self._refreshable(server, fresher):
                            refreshed = True
                            assert fresher is not None
                            stored = await self._refresh(server, fresher)
                        if stored is None:
                            if authorizations >= self.max_authorizations:
                                break
                            authorizations += 1
                            stored = await self._authorize(server, challenge, scope=None)
            elif (
                response.status_code == 403
                and challenge is not None
                and challenge.error == "insufficient_scope"
            ):
                async with self._lock:
                    held = stored.requested_scope if stored is not None else None
                    wanted = scope_union(held, challenge.scope)
                    if stored is not None and set(split_scope(wanted)) <= set(split_scope(held)):
                        # Asking again for what was already asked for cannot help.
                        logger.debug("OAuth: 403 insufficient_scope for a scope already held")
                        break
                    if authorizations >= self.max_authorizations:
                        break
                    authorizations += 1
                    await self._discover(server, challenge)
                    stored = await self._authorize(server, challenge, scope=wanted)
            else:
                break
            self._sign(request, stored, server)
            response = yield request

    # -- state per server ------------------------------------------------------------------------

    def _server(self, request: httpx.Request) -> _Server:
        url = str(request.url.copy_with(query=None, fragment=None))
        resource = canonical_resource(url)
        server = self._servers.get(resource)
        if server is None:
            server = self._servers[resource] = _Server(url, resource)
        return server

    def _sign(self, request: httpx.Request, stored: StoredTokens | None, server: _Server) -> None:
        if stored is None:
            request.headers.pop("Authorization", None)
            request.headers.pop("DPoP", None)
            return
        tokens = stored.tokens
        if tokens.token_type == "DPoP" and self._dpop is not None:
            self._dpop.sign(request, tokens.access_token, now=self.clock())
        else:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"

    async def _usable(self, server: _Server) -> StoredTokens | None:
        """The tokens to send now: from memory or the store, refreshed if about to expire."""
        if not server.loaded:
            server.stored = await self.store.get_tokens(server.resource)
            server.loaded = True
        stored = server.stored
        if stored is not None and stored.tokens.expired(self.clock(), margin=REFRESH_MARGIN):
            if stored.tokens.refresh_token is not None:
                try:
                    return await self._refresh(server, stored)
                except OAuthError as exc:
                    logger.info("OAuth: refresh before expiry failed (%s); authorizing again", exc)
                    return None
            if self.grant is not None and server.metadata is not None:
                # A grant needs no user: renewed before expiry, where it was granted.
                return await self._authorize(server, None, scope=stored.requested_scope)
            await self._keep(server, None)  # of no more use: never sent once more
            return None
        return stored

    def _refreshable(self, server: _Server, stored: StoredTokens | None) -> bool:
        if stored is None or stored.tokens.refresh_token is None:
            return False
        prm = server.resource_metadata
        # Never refresh at an authorization server the resource no longer names.
        return prm is None or stored.issuer in prm.authorization_servers

    async def _keep(self, server: _Server, stored: StoredTokens | None) -> None:
        server.stored = stored
        server.loaded = True
        if stored is None:
            await self.store.delete_tokens(server.resource)
        else:
            await self.store.set_tokens(server.resource, stored)

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[httpx.AsyncClient]:
        if self.http_client is not None:
            yield self.http_client
            return
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout), follow_redirects=False
        ) as http:
            yield http

    # -- discovery -------------------------------------------------------------------------------

    async def _discover(self, server: _Server, challenge: Challenge | None) -> None:
        """Fetch the Protected Resource Metadata again (the resource may have moved to another
        authorization server since), or learn that the server publishes none."""
        server.realm = challenge.params.get("realm") if challenge is not None else None
        try:
            urls = prm_urls(server.url, challenge.resource_metadata if challenge else None)
        except OAuthInvalid as exc:
            raise OAuthError(exc.step, exc.message, error=exc.error) from None
        async with self._http() as http:
            for url in urls:
                response, body = await _call(
                    http, "GET", url, step="discovery", timeout=self.timeout
                )
                if response.status_code >= 500:
                    # Broken, not absent: falling back to the 2025-03-26 form would send the
                    # user to an authorization server the resource never named.
                    raise OAuthError(
                        "discovery", f"HTTP {response.status_code} for the resource metadata"
                    )
                if not response.is_success or body is None:
                    continue
                try:
                    server.resource_metadata = parse_resource_metadata(body, server_url=server.url)
                except OAuthInvalid as exc:
                    raise OAuthError(exc.step, exc.message, error=exc.error) from None
                return
        server.resource_metadata = None

    async def _server_metadata(self, http: httpx.AsyncClient, server: _Server) -> ServerMetadata:
        prm = server.resource_metadata
        if prm is None:
            # 2025-03-26: the MCP server's origin is the authorization server.
            issuer = origin(server.url)
            found = await self._fetch_metadata(http, server, issuer, as_metadata_urls(issuer)[:1])
            if found is not None:
                return found
            return legacy_metadata(server.url)
        issuer = prm.authorization_servers[0]
        cached = server.metadata
        if cached is not None and cached.issuer == issuer:
            return cached
        found = await self._fetch_metadata(http, server, issuer, as_metadata_urls(issuer))
        if found is None:
            raise OAuthError("metadata", f"no authorization server metadata for {issuer}")
        return found

    async def _fetch_metadata(
        self, http: httpx.AsyncClient, server: _Server, issuer: str, urls: list[str]
    ) -> ServerMetadata | None:
        for url in urls:
            response, body = await _call(http, "GET", url, step="metadata", timeout=self.timeout)
            if not response.is_success or body is None:
                continue
            try:
                found = parse_server_metadata(
                    body,
                    issuer=issuer,
                    server_url=server.url,
                    authorization_code=self.grant is None,
                )
            except OAuthInvalid as exc:
                raise OAuthError(exc.step, exc.message, error=exc.error) from None
            server.metadata = found
            return found
        return None

    # -- registration ----------------------------------------------------------------------------

    async def _registration(
        self, http: httpx.AsyncClient, server: _Server, metadata: ServerMetadata, redirect: str
    ) -> ClientRegistration:
        issuer = metadata.issuer
        if self.client_id is not None and self.client_issuer in (None, issuer):
            return ClientRegistration(
                self.client_id, self._client_secret, self.token_endpoint_auth_method, (redirect,)
            )
        stored = await self.store.get_client(issuer)
        if stored is not None and self._still_valid(stored, redirect):
            return stored
        if metadata.client_id_metadata_document_supported and self.client_metadata_url:
            registration = ClientRegistration(self.client_metadata_url, None, "none", (redirect,))
        elif metadata.registration_endpoint is not None:
            registration = await self._register(http, server, metadata, redirect)
        else:
            raise OAuthError(
                "registration",
                "the authorization server offers no registration and no client_id was given",
            )
        await self.store.set_client(issuer, registration)
        return registration

    def _still_valid(self, stored: ClientRegistration, redirect: str) -> bool:
        expires = stored.client_secret_expires_at
        if expires and self.clock() >= expires:
            return False
        if stored.client_id == self.client_metadata_url:
            return True
        return any(_same_redirect(uri, redirect) for uri in stored.redirect_uris)

    async def _register(
        self, http: httpx.AsyncClient, server: _Server, metadata: ServerMetadata, redirect: str
    ) -> ClientRegistration:
        assert metadata.registration_endpoint is not None
        supported = metadata.token_endpoint_auth_methods_supported
        method = next((m for m in ("none", *AUTH_METHODS) if supported and m in supported), "none")
        request = {
            "client_name": self.client_name,
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": self.application_type,
        }
        response, body = await _call(
            http,
            "POST",
            metadata.registration_endpoint,
            step="registration",
            timeout=self.timeout,
            json=request,
        )
        if not response.is_success:
            error, text = token_error(body)
            guessed = server.resource_metadata is None and server.metadata is None
            if response.status_code in (401, 403, 404, 405) and guessed:
                # Nothing was found, and the 2025-03-26 default endpoint is not one either
                # (absent, or guarded like every other path): the server checks tokens it does
                # not issue (a fixed token, say).
                raise OAuthError(
                    "unavailable",
                    "the server wants a bearer token and publishes no way to get one (no "
                    "resource or authorization server metadata, HTTP "
                    f"{response.status_code} at {metadata.registration_endpoint})",
                    realm=server.realm,
                )
            raise OAuthError("registration", f"HTTP {response.status_code}: {text}", error=error)
        if not isinstance(body, dict) or not isinstance(body.get("client_id"), str):
            raise OAuthError("registration", "the registration response has no client_id")
        secret = body.get("client_secret")
        returned = body.get("token_endpoint_auth_method")
        expires = body.get("client_secret_expires_at")
        return ClientRegistration(
            body["client_id"],
            secret if isinstance(secret, str) and secret else None,
            returned if returned in AUTH_METHODS else None,
            (redirect,),
            float(expires) if isinstance(expires, int | float) and expires > 0 else None,
        )

    def _client_auth(
        self, registration: ClientRegistration, metadata: ServerMetadata
    ) -> ClientAuth:
        method = registration.token_endpoint_auth_method
        secret = registration.client_secret
        if method in ("client_secret_basic", "client_secret_post") and not secret:
            method = "none"  # registered for a secret it never got: a public client
        if method is None:
            supported = metadata.token_endpoint_auth_methods_supported or (
                ("client_secret_basic",) if secret else ("none",)
            )
            order = ("client_secret_basic", "client_secret_post") if secret else ("none",)
            method = next((m for m in order if m in supported), order[0])
        if method == "client_secret_basic" and secret:
            return ClientAuth.basic(registration.client_id, secret)
        if method == "client_secret_post" and secret:
            return ClientAuth.post(registration.client_id, secret)
        return ClientAuth.none(registration.client_id)

    # -- authorization and tokens ----------------------------------------------------------------

    def _resource(self, server: _Server) -> str:
        prm = server.resource_metadata
        return prm.resource if prm is not None else server.resource

    async def _authorize(
        self, server: _Server, challenge: Challenge | None, *, scope: str | None
    ) -> StoredTokens:
        async with self._http() as http:
            metadata = await self._server_metadata(http, server)
            prm = server.resource_metadata
            if scope is None:
                scope = choose_scope(
                    challenge.scope if challenge else None,
                    prm.scopes_supported if prm else None,
                    metadata.scopes_supported,
                )
            resource = self._resource(server)
            if self.grant is not None:
                tokens = await self.grant(
                    GrantRequest(http, metadata, resource, scope, self._dpop, self.clock)
                )
            else:
                tokens = await self._authorization_code(http, server, metadata, resource, scope)
        stored = StoredTokens(metadata.issuer, tokens, scope)
        await self._keep(server, stored)
        return stored

    async def _authorization_code(
        self,
        http: httpx.AsyncClient,
        server: _Server,
        metadata: ServerMetadata,
        resource: str,
        scope: str | None,
    ) -> TokenSet:
        verifier = pkce_verifier()
        state = new_state()

        async def run(redirect: str, drive: Authorize) -> TokenSet:
            registration = await self._registration(http, server, metadata, redirect)
            url = authorization_url(
                metadata.authorization_endpoint,
                {
                    "response_type": "code",
                    "client_id": registration.client_id,
                    "redirect_uri": redirect,
                    "scope": scope,
                    "state": state,
                    "code_challenge": pkce_challenge(verifier),
                    "code_challenge_method": "S256",
                    "resource": resource,
                },
            )
            landed = await drive(url)
            try:
                code = parse_redirect(
                    landed,
                    state=state,
                    issuer=metadata.issuer,
                    iss_required=metadata.authorization_response_iss_parameter_supported,
                )
            except OAuthInvalid as exc:
                raise OAuthError(exc.step, exc.message, error=exc.error) from None
            form = {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect,
                "code_verifier": verifier,
                "resource": resource,
            }
            return await token_request(
                http,
                metadata.token_endpoint,
                form,
                client_auth=self._client_auth(registration, metadata),
                dpop=self._dpop,
                issuer=metadata.issuer,
                timeout=self.timeout,
                now=self.clock,
            )

        if self.on_authorize is not None:
            return await run(self.redirect_uri or HEADLESS_REDIRECT_URI, self._headless)
        async with LoopbackReceiver(self.redirect_uri) as receiver:

            async def browse(url: str) -> str:
                # The wait starts at once: a browser that blocks while it runs (some do)
                # delays nothing, and is abandoned once the redirect arrives.
                with collapse_exception_groups():
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(open_browser, url)
                        landed = await receiver.wait(self.authorize_timeout)
                        nursery.cancel_scope.cancel()
                return landed

            return await run(receiver.redirect_uri, browse)

    async def _headless(self, url: str) -> str:
        assert self.on_authorize is not None
        with trio.move_on_after(self.authorize_timeout):
            landed = await self.on_authorize(url)
            if not isinstance(landed, str):
                raise OAuthError("authorization", "on_authorize returned no redirect URL")
            return landed
        raise OAuthError("authorization", f"no redirect within {self.authorize_timeout:g}s")

    async def _refresh(self, server: _Server, stored: StoredTokens) -> StoredTokens | None:
        """Refresh at the issuer that granted the tokens; None (and the tokens forgotten) if the
        server refuses. The refresh token is kept when the answer brings no new one."""
        refresh_token = stored.tokens.refresh_token
        assert refresh_token is not None
        async with self._http() as http:
            metadata = server.metadata
            if metadata is None or metadata.issuer != stored.issuer:
                check_url(stored.issuer, step="refresh", what="issuer", server_url=server.url)
                metadata = await self._fetch_metadata(
                    http, server, stored.issuer, as_metadata_urls(stored.issuer)
                )
                if metadata is None:
                    return None
            registration = await self._registration_for_refresh(stored.issuer)
            if registration is None:
                return None
            form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
            form["resource"] = self._resource(server)
            # No scope: a refresh gets what was granted (RFC 6749 §6). Repeating the scope asked
            # for fails where the server granted less (offline_access is often dropped).
            try:
                tokens = await token_request(
                    http,
                    metadata.token_endpoint,
                    form,
                    client_auth=self._client_auth(registration, metadata),
                    dpop=self._dpop,
                    issuer=metadata.issuer,
                    step="refresh",
                    timeout=self.timeout,
                    now=self.clock,
                )
            except OAuthError as exc:
                if exc.error is None:
                    raise
                logger.info("OAuth: the refresh was refused (%s)", exc.error)
                await self._keep(server, None)
                return None
        if tokens.refresh_token is None:
            tokens = attrs.evolve(tokens, refresh_token=refresh_token)
        renewed = StoredTokens(stored.issuer, tokens, stored.requested_scope)
        await self._keep(server, renewed)
        return renewed

    async def _registration_for_refresh(self, issuer: str) -> ClientRegistration | None:
        if self.client_id is not None and self.client_issuer in (None, issuer):
            return ClientRegistration(
                self.client_id, self._client_secret, self.token_endpoint_auth_method
            )
        return await self.store.get_client(issuer)


def _same_redirect(registered: str, wanted: str) -> bool:
    """Equal, or both loopback and equal but for the port (RFC 8252 §7.3)."""
    if registered == wanted:
        return True
    a, b = urlsplit(registered), urlsplit(wanted)
    return (
        is_loopback_host(a.hostname)
        and a.scheme == b.scheme
        and a.hostname == b.hostname
        and a.path == b.path
    )
