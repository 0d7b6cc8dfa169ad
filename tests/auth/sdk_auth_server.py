"""An MCP server that is its own authorization server, built the way the official Python SDK
(``mcp``) offers: its authorization-server routes and ``RequireAuthMiddleware`` around an
``OAuthAuthorizationServerProvider``, over Streamable HTTP on 127.0.0.1.

    python -m tests.auth.sdk_auth_server [--port PORT] [--scope SCOPE]...

(from the repository root). The SDK serves the authorization-server metadata (RFC 8414, at
``/.well-known/oauth-authorization-server``), ``/register`` (RFC 7591), ``/authorize`` (PKCE
S256), ``/token`` (``client_secret_post``/``client_secret_basic``, or none for a public
client), ``/revoke``, the Protected Resource Metadata for ``/mcp``, and the 401 and 403
challenges. The provider the SDK leaves to its users is :class:`MemoryProvider`: clients,
codes and tokens in memory, opaque random tokens bound to the requested resource, refresh
tokens rotated on use, and a login page at ``/login`` for the one account (``--user`` and
``--password``, the same defaults as the oidc-provider harness). It does not send RFC 9207
``iss`` (the SDK's metadata does not advertise it). One tool, ``whoami``, returns the token's
subject.

PORT 0 (the default) binds a free port. Once the socket listens, ``serving MCP at URL`` is
written to stderr. SIGINT or SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import html
import secrets
import sys
import time
from typing import Any

import anyio
import attrs
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .protected_server import add_whoami, loopback_listener, serve

CODE_TTL = 60
ACCESS_TTL = 600
REFRESH_TTL = 3600


@attrs.frozen
class _Pending:
    client_id: str
    params: AuthorizationParams


class MemoryProvider(
    OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]
):
    """The authorization server's state and decisions, in memory, for one account."""

    def __init__(self, base_url: str, user: str, password: str) -> None:
        self.base_url = base_url
        self.user = user
        self.password = password
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, _Pending] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        request = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[request] = _Pending(client.client_id, params)
        return f"{self.base_url}/login?request={request}"

    def login(self, request: str, user: str, password: str) -> str | None:
        """The redirect back to the client once the account signed in; None if refused."""
        pending = self.pending.get(request)
        if pending is None or user != self.user or password != self.password:
            return None
        del self.pending[request]
        params = pending.params
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + CODE_TTL,
            client_id=pending.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=user,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        if code is None or code.client_id != client.client_id:
            return None
        return code

    def _issue(
        self, client_id: str, scopes: list[str], resource: str | None, subject: str | None
    ) -> OAuthToken:
        now = int(time.time())
        access = secrets.token_urlsafe(32)
        refresh = secrets.token_urlsafe(32)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + ACCESS_TTL,
            resource=resource,
            subject=subject,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + REFRESH_TTL,
            resource=resource,
            subject=subject,
        )
        return OAuthToken(
            access_token=access,
            expires_in=ACCESS_TTL,
            scope=" ".join(scopes) or None,
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        assert client.client_id is not None
        return self._issue(
            client.client_id,
            authorization_code.scopes,
            authorization_code.resource,
            authorization_code.subject,
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        if token is None or token.client_id != client.client_id:
            return None
        if token.expires_at is not None and token.expires_at < time.time():
            return None
        return token

    async def exchange_refresh_token(
        self,
        client: OAuthClientInformationFull,
        refresh_token: RefreshToken,
        scopes: list[str],
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token already used")
        assert client.client_id is not None
        return self._issue(
            client.client_id,
            scopes or refresh_token.scopes,
            refresh_token.resource,
            refresh_token.subject,
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


LOGIN_PAGE = """<!DOCTYPE html>
<title>Sign in</title>
<form method="post" action="/login">
  <input type="hidden" name="request" value="{request}">
  <input type="text" name="login" required>
  <input type="password" name="password" required>
  <button type="submit">Sign in</button>
</form>
"""


def sdk_auth_server(base_url: str, scopes: list[str], user: str, password: str) -> MCPServer[Any]:
    provider = MemoryProvider(base_url, user, password)
    server: MCPServer[Any] = MCPServer(
        "sdk-auth-server",
        version="1.0.0",
        log_level="WARNING",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base_url,  # type: ignore[arg-type]  # pydantic validates the string
            resource_server_url=base_url + "/mcp",  # type: ignore[arg-type]
            required_scopes=scopes,
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=scopes, default_scopes=scopes
            ),
            revocation_options=RevocationOptions(enabled=True),
            validate_token_resource=True,
        ),
    )

    async def login(request: Request) -> Response:
        if request.method == "GET":
            pending = request.query_params.get("request", "")
            return HTMLResponse(LOGIN_PAGE.format(request=html.escape(pending, quote=True)))
        form = await request.form()
        redirect = provider.login(
            str(form.get("request", "")), str(form.get("login", "")), str(form.get("password", ""))
        )
        if redirect is None:
            return HTMLResponse("<p>Invalid login or password.</p>", status_code=401)
        return RedirectResponse(redirect, status_code=302)

    # The SDK's decorator is untyped: registered by a plain call, the handler keeps its type.
    server.custom_route("/login", methods=["GET", "POST"])(login)

    add_whoami(server)
    return server


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scope", action="append", dest="scopes")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--password", default="correct horse battery staple")
    args = parser.parse_args(argv)
    listener, base_url = loopback_listener(args.port)
    server = sdk_auth_server(base_url, args.scopes or ["mcp:tools"], args.user, args.password)
    await serve(server, listener, base_url)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
