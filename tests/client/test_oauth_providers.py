"""``OAuth`` against real authorization servers: oidc-provider (the certified OpenID Connect
provider, from npm) in front of the official Python SDK's protected server, and the SDK's own
authorization server. Every process runs on 127.0.0.1, started and stopped by the test; the
login and consent screens are driven over HTTP by ``drive_login``, the headless hook."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from trio_mcp import HttpTarget, MemoryTokenStore, OAuth, TextContent, open_client

from ..auth._oidc import (
    USERNAME,
    LoginError,
    drive_login,
    oidc_provider,
    protected_mcp_server,
    sdk_auth_mcp_server,
)

#: A hang guard, never a performance assertion: one whole flow takes about two seconds.
GUARD = 90


async def refuse_to_sign_in(url: str) -> str:
    raise AssertionError(f"asked to sign in again: {url}")


async def whoami(url: str, auth: OAuth) -> str:
    async with open_client(HttpTarget(url, auth=auth)) as client:
        result = await client.call_tool("whoami", {})
    assert isinstance(result.content[0], TextContent), result
    return result.content[0].text


async def test_a_dynamically_registered_client_signs_in_and_reuses_its_tokens() -> None:
    with trio.fail_after(GUARD):
        async with oidc_provider() as op, protected_mcp_server(op.issuer) as url:
            store = MemoryTokenStore()
            assert await whoami(url, OAuth(store=store, on_authorize=drive_login)) == USERNAME
            registration = await store.get_client(op.issuer)
            assert registration is not None and registration.client_id != op.client_id
            stored = await store.get_tokens(url)
            assert stored is not None and stored.issuer == op.issuer
            # A second connection uses the stored token: no sign-in.
            assert await whoami(url, OAuth(store=store, on_authorize=refuse_to_sign_in)) == USERNAME


async def test_a_pre_registered_client_signs_in_with_its_secret() -> None:
    with trio.fail_after(GUARD):
        async with oidc_provider() as op, protected_mcp_server(op.issuer) as url:
            store = MemoryTokenStore()
            auth = OAuth(
                store=store,
                client_id=op.client_id,
                client_secret=op.client_secret,
                on_authorize=drive_login,
            )
            assert await whoami(url, auth) == USERNAME
            assert await store.get_client(op.issuer) is None  # nothing was registered


async def test_an_expired_token_is_refreshed_and_the_refresh_token_rotated() -> None:
    with trio.fail_after(GUARD):
        async with oidc_provider() as op, protected_mcp_server(op.issuer) as url:
            store = MemoryTokenStore()
            assert await whoami(url, OAuth(store=store, on_authorize=drive_login)) == USERNAME
            first = await store.get_tokens(url)
            assert first is not None and first.tokens.refresh_token is not None

            # Two hours later, as far as the client can tell: the token has expired.
            def later() -> float:
                return time.time() + 7200

            auth = OAuth(store=store, on_authorize=refuse_to_sign_in, clock=later)
            assert await whoami(url, auth) == USERNAME
            second = await store.get_tokens(url)
            assert second is not None
            assert second.tokens.access_token != first.tokens.access_token
            assert second.tokens.refresh_token not in (None, first.tokens.refresh_token)


async def test_a_sign_in_that_fails_fails_the_connection_and_stores_nothing() -> None:
    async def wrong_password(url: str) -> str:
        return await drive_login(url, password="not the password")

    with trio.fail_after(GUARD):
        async with oidc_provider() as op, protected_mcp_server(op.issuer) as url:
            store = MemoryTokenStore()
            with pytest.raises(LoginError):
                await whoami(url, OAuth(store=store, on_authorize=wrong_password))
            assert await store.get_tokens(url) is None


async def test_our_client_against_the_official_python_sdks_authorization_server() -> None:
    with trio.fail_after(GUARD):
        async with sdk_auth_mcp_server() as url:
            store = MemoryTokenStore()
            assert await whoami(url, OAuth(store=store, on_authorize=drive_login)) == USERNAME
            stored: Any = await store.get_tokens(url)
            assert stored is not None and url.startswith(stored.issuer)
