"""``httpx.Auth`` for the grants that need no user: client credentials, workload identity,
enterprise-managed authorization, each optionally through DPoP.

Pass one as the ``auth`` of the ``httpx.AsyncClient`` an MCP client connects with::

    auth = ClientCredentialsAuth(ClientAuth.basic("my-client", secret))
    async with httpx.AsyncClient(auth=auth) as http, open_client(url, http_client=http) as c:
        ...

On the first 401 it finds the server's authorization server (Protected Resource Metadata,
then the authorization server's metadata), runs its grant, and sends the request again with
the token; it keeps the token until it expires (or is refused) and then runs the grant again.
With ``dpop=DPoPKey.generate()`` (or any :class:`DPoPKey`) the token request carries a proof,
every request carries ``Authorization: DPoP`` and a fresh proof, and the servers' nonces are
honoured (one retry each time a server asks for a new one).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx
import orjson
import trio

from ._grants import (
    ClientAuth,
    DPoPSession,
    _auth_params,
    client_credentials,
    exchange_for_id_jag,
    jwt_bearer,
)
from ._jose import DPoPKey
from ._oauth_errors import OAuthError
from ._tokens import TokenSet

#: A token this close to its expiry is replaced before it is sent (seconds).
EXPIRY_MARGIN = 30.0
#: The bound on each discovery request, and the largest metadata document read.
DISCOVERY_TIMEOUT = 30.0
MAX_METADATA = 256 * 1024


@attrs.frozen
class AuthServer:
    """What discovery found: the authorization server of one MCP server."""

    issuer: str
    token_endpoint: str
    #: The MCP server's resource identifier, as its Protected Resource Metadata publishes it.
    resource: str
    #: The scope to ask for: the challenge's, else every one the server lists, else None.
    scope: str | None
    metadata: dict[str, Any] = attrs.field(repr=False)


#: A grant: given a client for the token endpoint, the authorization server and the DPoP
#: session (None without DPoP), a fresh token.
Grant = Callable[[httpx.AsyncClient, AuthServer, DPoPSession | None], Awaitable[TokenSet]]
#: A credential given as a value, or as a function that returns the current one (a workload
#: token file that is rotated, a user's identity token that is refreshed).
Credential = str | Callable[[], str | Awaitable[str]]


async def _current(credential: Credential) -> str:
    if isinstance(credential, str):
        return credential
    value = credential()
    return value if isinstance(value, str) else await value


# -- discovery (minimal: the interactive flow has the full one) ------------------------------------


def _checked_url(url: object, what: str) -> str:
    """``url`` if it is https, or http to a loopback host; anything else is refused before a
    request reaches it (metadata must not steer the client to an arbitrary origin)."""
    if not isinstance(url, str):
        raise OAuthError("discovery", f"the {what} is not a URL")
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if loopback:
            return url
    raise OAuthError("discovery", f"the {what} {url!r} is neither https nor loopback http")


async def _get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """The JSON object at ``url``, or None for any answer that is not a 200 JSON object."""
    with trio.move_on_after(DISCOVERY_TIMEOUT):
        try:
            async with http.stream("GET", url, headers={"Accept": "application/json"}) as got:
                if got.status_code != 200:
                    return None
                body = b""
                async for chunk in got.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_METADATA:
                        return None
        except httpx.HTTPError:
            return None
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
    raise OAuthError("discovery", f"{url} did not answer within {DISCOVERY_TIMEOUT:g} s")


async def _discover(http: httpx.AsyncClient, server_url: str, challenges: list[str]) -> AuthServer:
    """Protected Resource Metadata (from the challenge's ``resource_metadata``, else the
    path-based then the root well-known URI), then its first authorization server's metadata
    (RFC 8414 and OpenID forms, path-inserted first), whose ``issuer`` must be the one asked."""
    params: dict[str, str] = {}
    for challenge in challenges:
        params |= {k: v for k, v in _auth_params(challenge).items() if k not in params}
    server = urlsplit(server_url)
    resource = urlunsplit((server.scheme, server.netloc, server.path, "", ""))
    origin = f"{server.scheme}://{server.netloc}"
    path = server.path.rstrip("/")
    if "resource_metadata" in params:
        places = [_checked_url(params["resource_metadata"], "resource metadata URL")]
    else:
        places = [f"{origin}/.well-known/oauth-protected-resource{path}"] * bool(path)
        places.append(f"{origin}/.well-known/oauth-protected-resource")
    for place in places:
        prm = await _get_json(http, place)
        if prm is not None:
            break
    else:
        raise OAuthError("discovery", f"no protected resource metadata for {resource}")
    published = prm.get("resource")
    if not isinstance(published, str) or not (
        resource == published or resource.startswith(published.rstrip("/") + "/")
    ):
        raise OAuthError("discovery", f"the metadata's resource is not {resource}")
    servers = prm.get("authorization_servers")
    if not isinstance(servers, list) or not servers:
        raise OAuthError(
            "discovery", "the protected resource metadata names no authorization server"
        )
    issuer = _checked_url(servers[0], "authorization server")
    parts = urlsplit(issuer)
    base, tail = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    candidates = [
        f"{base}/.well-known/oauth-authorization-server{tail}",
        f"{base}/.well-known/openid-configuration{tail}",
    ]
    if tail:
        candidates.append(f"{base}{tail}/.well-known/openid-configuration")
    for candidate in candidates:
        metadata = await _get_json(http, candidate)
        if metadata is not None:
            break
    else:
        raise OAuthError("metadata", f"no authorization server metadata for {issuer}")
    if metadata.get("issuer") != issuer:
        raise OAuthError("metadata", f"the metadata's issuer is not {issuer}")
    token_endpoint = _checked_url(metadata.get("token_endpoint"), "token endpoint")
    supported = prm.get("scopes_supported")
    scope = params.get("scope") or (
        " ".join(s for s in supported if isinstance(s, str)) if isinstance(supported, list) else ""
    )
    return AuthServer(issuer, token_endpoint, published, scope or None, metadata)


# -- the auth --------------------------------------------------------------------------------------


class GrantAuth(httpx.Auth):
    """An ``httpx.Auth`` that gets its token by running ``grant`` (see :data:`Grant`) against
    the authorization server it discovers on the first 401.

    ``dpop`` (a :class:`DPoPKey`) sends everything through DPoP. ``http_client`` is the client
    for discovery and token requests (left open); without it one is made for each run of the
    grant. Runs on Trio (an ``httpx.AsyncClient``); a sync client cannot use it.
    """

    def __init__(
        self,
        grant: Grant,
        *,
        dpop: DPoPKey | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._grant = grant
        self._dpop = DPoPSession(dpop) if dpop is not None else None
        self._http = http_client
        self._lock = trio.Lock()
        self._server: AuthServer | None = None
        self._token: TokenSet | None = None

    @property
    def token(self) -> TokenSet | None:
        """The token in use, if any."""
        return self._token

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        raise RuntimeError(f"{type(self).__name__} needs an httpx.AsyncClient")
        yield request  # pragma: no cover

    def _present(self, request: httpx.Request, token: TokenSet) -> None:
        if self._dpop is not None and token.token_type == "DPoP":
            self._dpop.sign(request, token.access_token)
        else:
            request.headers["Authorization"] = f"Bearer {token.access_token}"

    def _fresh(self, token: TokenSet | None) -> bool:
        return token is not None and (
            token.expires_at is None or token.expires_at - EXPIRY_MARGIN > time.time()
        )

    async def _renew(
        self, request: httpx.Request, refused: TokenSet | None, challenges: list[str]
    ) -> TokenSet:
        """A new token, unless another request got one since ``refused`` was sent."""
        async with self._lock:
            if self._token is not refused and self._fresh(self._token):
                assert self._token is not None
                return self._token
            if self._http is not None:
                self._token = await self._run(self._http, request, challenges)
            else:
                async with httpx.AsyncClient(follow_redirects=False) as http:
                    self._token = await self._run(http, request, challenges)
            return self._token

    async def _run(
        self, http: httpx.AsyncClient, request: httpx.Request, challenges: list[str]
    ) -> TokenSet:
        if self._server is None or challenges:
            self._server = await _discover(http, str(request.url), challenges)
        return await self._grant(http, self._server, self._dpop)

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = self._token
        if token is not None and not self._fresh(token) and self._server is not None:
            token = await self._renew(request, token, [])
        if token is not None:
            self._present(request, token)
        response = yield request
        if self._dpop is not None and self._dpop.learn(response) and token is not None:
            self._present(request, token)  # the server's new nonce: a fresh proof, once
            response = yield request
        if response.status_code != 401:
            return
        token = await self._renew(request, token, response.headers.get_list("WWW-Authenticate"))
        self._present(request, token)
        response = yield request
        if self._dpop is not None and self._dpop.learn(response):
            self._present(request, token)
            yield request


class ClientCredentialsAuth(GrantAuth):
    """The client credentials grant (SEP-1046): the client authenticates as itself, with a
    secret (``ClientAuth.basic`` / ``ClientAuth.post``) or a key (``ClientAuth.private_key_jwt``).
    ``scope`` overrides the discovered one."""

    def __init__(
        self,
        client_auth: ClientAuth,
        *,
        scope: str | None = None,
        dpop: DPoPKey | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        async def grant(
            http: httpx.AsyncClient, server: AuthServer, session: DPoPSession | None
        ) -> TokenSet:
            return await client_credentials(
                http,
                server.token_endpoint,
                client_auth=client_auth,
                scope=scope or server.scope,
                resource=server.resource,
                dpop=session,
                issuer=server.issuer,
            )

        super().__init__(grant, dpop=dpop, http_client=http_client)


class WorkloadIdentityAuth(GrantAuth):
    """Workload identity federation (SEP-1933): the workload's JWT (from its platform: a
    Kubernetes service account token, a cloud identity token) is the grant, through the JWT
    bearer grant. ``assertion`` is the token, or a function returning the current one. A
    refused grant raises :class:`OAuthError` at once and is never retried: a later request
    that needs a token raises the same error without asking again, until the assertion
    changes (a function that returns a rotated one)."""

    def __init__(
        self,
        assertion: Credential,
        *,
        client_id: str | None = None,
        client_auth: ClientAuth | None = None,
        scope: str | None = None,
        dpop: DPoPKey | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if client_auth is None:
            if client_id is None:
                raise ValueError("give client_id (a public client) or client_auth")
            client_auth = ClientAuth.none(client_id)
        auth = client_auth
        refused: dict[str, OAuthError] = {}

        async def grant(
            http: httpx.AsyncClient, server: AuthServer, session: DPoPSession | None
        ) -> TokenSet:
            current = await _current(assertion)
            if current in refused:
                was = refused[current]
                raise OAuthError(was.step, was.message, error=was.error)
            try:
                return await jwt_bearer(
                    http,
                    server.token_endpoint,
                    current,
                    client_auth=auth,
                    scope=scope or server.scope,
                    resource=server.resource,
                    dpop=session,
                    issuer=server.issuer,
                )
            except OAuthError as exc:
                refused.clear()
                refused[current] = exc
                raise

        super().__init__(grant, dpop=dpop, http_client=http_client)


class EnterpriseAuth(GrantAuth):
    """Enterprise-managed authorization (SEP-990): the user's identity token from the
    enterprise IdP (``id_token``, or a function returning the current one) is exchanged at
    ``idp_token_endpoint`` (authenticated by ``idp_client_auth``) for an ID-JAG addressed to
    the MCP server's authorization server, which grants the access token for it (the client
    authenticated by ``client_auth``)."""

    def __init__(
        self,
        *,
        idp_token_endpoint: str,
        id_token: Credential,
        idp_client_auth: ClientAuth,
        client_auth: ClientAuth,
        scope: str | None = None,
        dpop: DPoPKey | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        async def grant(
            http: httpx.AsyncClient, server: AuthServer, session: DPoPSession | None
        ) -> TokenSet:
            id_jag = await exchange_for_id_jag(
                http,
                idp_token_endpoint,
                await _current(id_token),
                audience=server.issuer,
                resource=server.resource,
                client_auth=idp_client_auth,
                scope=scope or server.scope,
            )
            return await jwt_bearer(
                http,
                server.token_endpoint,
                id_jag,
                client_auth=client_auth,
                scope=scope or server.scope,
                resource=server.resource,
                dpop=session,
                issuer=server.issuer,
            )

        super().__init__(grant, dpop=dpop, http_client=http_client)
