"""After a connection is up, an ``OAuthError`` (a grant revoked at the authorization server, its
refresh refused, the user declining to sign in again) fails the one request it happened to, and
the connection stays usable: the next request, once the user signs in again through the same
``OAuth``, works. Against a real authorization server (oidc-provider, opaque tokens) and our own
server checking each token at its introspection endpoint, served by hypercorn on 127.0.0.1."""

from __future__ import annotations

import functools
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from trio_mcp import (
    Auth,
    Context,
    HttpTarget,
    MemoryTokenStore,
    OAuth,
    OAuthError,
    Server,
    open_client,
)
from trio_mcp.auth import IntrospectionVerifier

from .._http import text_of
from ..auth._oidc import USERNAME, OidcProvider, drive_login, oidc_provider

#: A hang guard, never a performance assertion.
GUARD = 90


@asynccontextmanager
async def introspected_server(op: OidcProvider) -> AsyncIterator[str]:
    """Our server, every token checked at ``op``'s introspection endpoint on every request
    (no cache: a revocation counts at once); yields its URL, which is its resource."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    verifier = IntrospectionVerifier(
        op.introspection_endpoint,
        client_id=op.resource_client_id,
        client_secret=op.resource_client_secret,
        auth_method="client_secret_post",
        issuer=op.issuer,
        cache_ttl=0,
        negative_ttl=0,
    )
    auth = Auth(
        verifier,
        resource=url,
        authorization_servers=[op.issuer],
        required_scopes=["mcp:tools"],
        scopes_supported=["mcp:tools"],
    )
    server = Server("guarded", auth=auth)

    @server.tool()
    def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return ctx.auth.subject or ""

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # hypercorn owns (and closes) it from here
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    app: Any = server.http_app()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve, app, config, shutdown_trigger=stop.wait))
        try:
            yield url
        finally:
            stop.set()


class User:
    """The person at the browser: signs in, or (``declines``) answers the authorization
    server's screen with "deny", as the provider then redirects."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.declines = False
        self.sign_ins = 0

    async def __call__(self, authorization_url: str) -> str:
        if not self.declines:
            self.sign_ins += 1
            return await drive_login(authorization_url)
        await trio.lowlevel.checkpoint()
        query = parse_qs(urlsplit(authorization_url).query)
        denied = {"error": "access_denied", "state": query["state"][0], "iss": self.issuer}
        return f"{query['redirect_uri'][0]}?{urlencode(denied)}"


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_a_revoked_grant_fails_one_request_and_the_connection_goes_on(mode: str) -> None:
    with trio.fail_after(GUARD):
        async with (
            oidc_provider(access_token_format="opaque") as op,
            introspected_server(op) as url,
        ):
            store = MemoryTokenStore()
            user = User(op.issuer)
            # The pre-registered client, so that the test can revoke its tokens as it.
            auth = OAuth(
                store=store,
                client_id=op.client_id,
                client_secret=op.client_secret,
                on_authorize=user,
            )
            target = HttpTarget(url, auth=auth)
            async with open_client(target, mode=mode) as client:
                assert text_of(await client.call_tool("whoami")) == USERNAME
                assert user.sign_ins == 1
                # The grant is revoked at the authorization server: the access token is no
                # longer accepted, and its refresh token (if any) is refused.
                stored = await store.get_tokens(url)
                assert stored is not None
                await op.revoke(stored.tokens.access_token)
                if stored.tokens.refresh_token is not None:
                    await op.revoke(stored.tokens.refresh_token)
                user.declines = True
                with pytest.raises(OAuthError) as caught:
                    await client.call_tool("whoami")
                assert (caught.value.step, caught.value.error) == ("authorization", "access_denied")
                assert not client.session.is_closed
                # The user signs in again: the next request works, on the same connection.
                user.declines = False
                assert text_of(await client.call_tool("whoami")) == USERNAME
                assert user.sign_ins == 2
                assert text_of(await client.call_tool("whoami")) == USERNAME
                assert user.sign_ins == 2
