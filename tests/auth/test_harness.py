"""The OAuth harness itself, proven with plain httpx: a real oidc-provider and the official
Python SDK's protected MCP server, both on 127.0.0.1, and the authorization-code flow with PKCE
and a resource indicator done by hand (no OAuth code of trio_mcp); then the same flow against
the SDK's own authorization-server routes.

What the OAuth client's own tests then rely on: dynamic registration works, ``drive_login``
returns the redirect with ``code``, ``state`` and ``iss``, the token is a JWT for the MCP
resource that the protected server accepts (``whoami`` is the signed-in user), and the server
refuses no token, a forged token, a token for another resource, and a token without its scope.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
import trio
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from trio_mcp import HttpTarget, open_client

from ._oidc import (
    BOB,
    BOB_PASSWORD,
    PASSWORD,
    USERNAME,
    LoginError,
    OidcProvider,
    drive_login,
    oidc_provider,
    protected_mcp_server,
    sdk_auth_mcp_server,
)

#: A hang guard for each test, never a performance assertion.
GUARD = 60
REDIRECT_URI = "http://127.0.0.1:8765/callback"


@pytest.fixture
async def op() -> AsyncIterator[OidcProvider]:
    async with oidc_provider() as provider:
        yield provider


@pytest.fixture
async def mcp_url(op: OidcProvider) -> AsyncIterator[str]:
    async with protected_mcp_server(op.issuer) as url:
        yield url


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def query(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


async def discover(http: httpx.AsyncClient, mcp_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The protected resource's metadata, found through its 401, and its authorization server's
    metadata."""
    challenge = await http.post(mcp_url, json={})
    assert challenge.status_code == 401
    header = challenge.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    prm_url = header.split('resource_metadata="', 1)[1].split('"', 1)[0]
    prm = (await http.get(prm_url)).json()
    issuer = prm["authorization_servers"][0]
    for well_known in (
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server",
    ):
        found = await http.get(issuer + well_known)
        if found.status_code == 200:
            break
    metadata: dict[str, Any] = found.json()
    assert metadata["issuer"] == issuer
    return prm, metadata


async def authorize(
    http: httpx.AsyncClient,
    metadata: dict[str, Any],
    *,
    client_id: str,
    resource: str,
    scope: str,
    client_secret: str | None = None,
) -> dict[str, Any]:
    """The authorization-code flow with PKCE and ``resource``, the browser driven headlessly;
    the token response."""
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(16)
    url = (
        metadata["authorization_endpoint"]
        + "?"
        + urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": REDIRECT_URI,
                "scope": scope,
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": resource,
            }
        )
    )
    redirect = await drive_login(url)
    assert redirect.startswith(REDIRECT_URI + "?")
    params = query(redirect)
    assert params["state"] == state
    if metadata.get("authorization_response_iss_parameter_supported"):
        assert params["iss"] == metadata["issuer"]  # RFC 9207
    else:
        assert "iss" not in params
    form = {
        "grant_type": "authorization_code",
        "code": params["code"],
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
        "resource": resource,
    }
    if client_secret is None:
        form["client_id"] = client_id
        response = await http.post(metadata["token_endpoint"], data=form)
    else:
        secret = httpx.BasicAuth(client_id, client_secret)
        response = await http.post(metadata["token_endpoint"], data=form, auth=secret)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def provider_keys(response: httpx.Response) -> KeySet:
    return KeySet.import_key_set(response.json())


async def whoami(mcp_url: str, token: str) -> str:
    async with open_client(
        HttpTarget(mcp_url, headers={"Authorization": f"Bearer {token}"})
    ) as client:
        result = await client.call_tool("whoami", {})
    assert not result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


async def test_dynamic_registration_code_flow_and_whoami(op: OidcProvider, mcp_url: str) -> None:
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            started = time.monotonic()
            prm, metadata = await discover(http, mcp_url)
            assert prm["resource"] == mcp_url
            assert prm["authorization_servers"] == [op.issuer]
            assert prm["scopes_supported"] == ["mcp:tools"]
            assert metadata["code_challenge_methods_supported"] == ["S256"]
            assert metadata["authorization_response_iss_parameter_supported"] is True
            assert {"mcp:tools", "offline_access"} <= set(metadata["scopes_supported"])
            discovered = time.monotonic()

            registration = await http.post(
                metadata["registration_endpoint"],
                json={
                    "client_name": "harness test",
                    "application_type": "native",
                    "scope": "mcp:tools",
                    "redirect_uris": [REDIRECT_URI],
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                },
            )
            assert registration.status_code == 201, registration.text
            client_id = registration.json()["client_id"]
            registered = time.monotonic()

            tokens = await authorize(
                http,
                metadata,
                client_id=client_id,
                resource=prm["resource"],
                scope=" ".join(prm["scopes_supported"]),
            )
            authorized = time.monotonic()
            assert tokens["token_type"] == "Bearer"
            assert tokens["scope"] == "mcp:tools"
            assert "refresh_token" in tokens
            claims = jwt.decode(
                tokens["access_token"], provider_keys(await http.get(metadata["jwks_uri"]))
            ).claims
            assert claims["aud"] == mcp_url
            assert claims["iss"] == op.issuer
            assert claims["client_id"] == client_id

            assert await whoami(mcp_url, tokens["access_token"]) == USERNAME
            called = time.monotonic()
    print(
        f"discovery {discovered - started:.3f}s, registration {registered - discovered:.3f}s, "
        f"login and token {authorized - registered:.3f}s, MCP call {called - authorized:.3f}s"
    )


async def test_pre_registered_client_refresh_introspection_revocation(op: OidcProvider) -> None:
    resource = "http://127.0.0.1:1/mcp"  # a resource indicator only: nothing is served there
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            metadata = (await http.get(op.metadata_url)).json()
            secret = httpx.BasicAuth(op.client_id, op.client_secret)
            tokens = await authorize(
                http,
                metadata,
                client_id=op.client_id,
                client_secret=op.client_secret,
                resource=resource,
                scope="mcp:tools offline_access",
            )
            refreshed = await http.post(
                metadata["token_endpoint"],
                data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
                auth=secret,
            )
            assert refreshed.status_code == 200, refreshed.text
            rotated = refreshed.json()["refresh_token"]
            assert rotated != tokens["refresh_token"]

            endpoint = metadata["introspection_endpoint"]
            active = (await http.post(endpoint, data={"token": rotated}, auth=secret)).json()
            assert active["active"] is True
            assert active["sub"] == USERNAME
            assert active["client_id"] == op.client_id
            revoked = await http.post(
                metadata["revocation_endpoint"], data={"token": rotated}, auth=secret
            )
            assert revoked.status_code == 200
            gone = (await http.post(endpoint, data={"token": rotated}, auth=secret)).json()
            assert gone == {"active": False}

            # A rotated-out refresh token is refused.
            again = await http.post(
                metadata["token_endpoint"],
                data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
                auth=secret,
            )
            assert again.status_code == 400
            assert again.json()["error"] == "invalid_grant"


async def test_no_token_is_a_401_naming_the_metadata(mcp_url: str) -> None:
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(mcp_url, json={})
    assert response.status_code == 401
    header = response.headers["www-authenticate"]
    parts = urlsplit(mcp_url)
    prm = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    assert f'resource_metadata="{prm}"' in header


def _forged(op: OidcProvider, audience: str) -> str:
    """A token with every right claim, signed by a key that is not the provider's."""
    now = int(time.time())
    claims = {
        "iss": op.issuer,
        "aud": audience,
        "sub": USERNAME,
        "client_id": op.client_id,
        "scope": "mcp:tools",
        "iat": now,
        "exp": now + 600,
        "jti": secrets.token_urlsafe(8),
    }
    header = {"alg": "ES256", "typ": "at+jwt", "kid": "es256-test"}
    return jwt.encode(header, claims, ECKey.generate_key("P-256"))


async def test_forged_token_is_a_401(op: OidcProvider, mcp_url: str) -> None:
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(
                mcp_url, json={}, headers={"Authorization": f"Bearer {_forged(op, mcp_url)}"}
            )
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_token_for_another_resource_is_a_401(op: OidcProvider, mcp_url: str) -> None:
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            metadata = (await http.get(op.metadata_url)).json()
            tokens = await authorize(
                http,
                metadata,
                client_id=op.client_id,
                client_secret=op.client_secret,
                resource=mcp_url + "/other",
                scope="mcp:tools",
            )
            response = await http.post(
                mcp_url, json={}, headers={"Authorization": f"Bearer {tokens['access_token']}"}
            )
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_missing_scope_is_a_403(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        async with (
            protected_mcp_server(op.issuer, scopes=["mcp:tools", "mcp:admin"]) as url,
            httpx.AsyncClient(timeout=10) as http,
        ):
            metadata = (await http.get(op.metadata_url)).json()
            tokens = await authorize(
                http,
                metadata,
                client_id=op.client_id,
                client_secret=op.client_secret,
                resource=url,
                scope="mcp:tools",
            )
            response = await http.post(
                url, json={}, headers={"Authorization": f"Bearer {tokens['access_token']}"}
            )
    assert response.status_code == 403
    header = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in header


async def test_wrong_password_is_refused(op: OidcProvider) -> None:
    _, challenge = pkce()
    url = (
        op.issuer
        + "/auth?"
        + urlencode(
            {
                "response_type": "code",
                "client_id": op.client_id,
                "redirect_uri": REDIRECT_URI,
                "state": "s",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
    )
    with pytest.raises(LoginError, match="401"):
        await drive_login(url, password="not the password")
    with pytest.raises(LoginError, match="401"):
        await drive_login(url, username="mallory")
    assert query(await drive_login(url))["state"] == "s"


async def test_sdk_authorization_server_code_flow_refresh_and_whoami() -> None:
    with trio.fail_after(GUARD):
        async with sdk_auth_mcp_server() as url, httpx.AsyncClient(timeout=10) as http:
            prm, metadata = await discover(http, url)
            assert prm["resource"] == url
            issuer = metadata["issuer"]
            assert prm["authorization_servers"] == [issuer]
            assert url.startswith(issuer)
            assert metadata["code_challenge_methods_supported"] == ["S256"]
            assert "authorization_response_iss_parameter_supported" not in metadata

            registration = await http.post(
                metadata["registration_endpoint"],
                json={
                    "client_name": "harness test",
                    "redirect_uris": [REDIRECT_URI],
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                },
            )
            assert registration.status_code == 201, registration.text
            client_id = registration.json()["client_id"]
            tokens = await authorize(
                http,
                metadata,
                client_id=client_id,
                resource=url,
                scope=" ".join(prm["scopes_supported"]),
            )
            assert await whoami(url, tokens["access_token"]) == USERNAME

            refreshed = await http.post(
                metadata["token_endpoint"],
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": tokens["refresh_token"],
                    "client_id": client_id,
                },
            )
            assert refreshed.status_code == 200, refreshed.text
            assert await whoami(url, refreshed.json()["access_token"]) == USERNAME
            assert refreshed.json()["refresh_token"] != tokens["refresh_token"]
            again = await http.post(
                metadata["token_endpoint"],
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": tokens["refresh_token"],
                    "client_id": client_id,
                },
            )
            assert again.status_code == 400
            assert again.json()["error"] == "invalid_grant"

            forged = await http.post(url, json={}, headers={"Authorization": "Bearer forged"})
            assert forged.status_code == 401


async def test_pkce_is_required(op: OidcProvider) -> None:
    base = {
        "response_type": "code",
        "client_id": op.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "s",
    }
    _, challenge = pkce()
    for extra in ({}, {"code_challenge": challenge, "code_challenge_method": "plain"}):
        redirect = await drive_login(op.issuer + "/auth?" + urlencode(base | extra))
        params = query(redirect)
        assert redirect.startswith(REDIRECT_URI + "?")
        assert params["error"] == "invalid_request", params
        assert "code" not in params


async def test_bob_signs_in_with_his_own_password_only(op: OidcProvider) -> None:
    _, challenge = pkce()
    url = (
        op.issuer
        + "/auth?"
        + urlencode(
            {
                "response_type": "code",
                "client_id": op.client_id,
                "redirect_uri": REDIRECT_URI,
                "state": "s",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
    )
    with pytest.raises(LoginError, match="401"):
        await drive_login(url, username=BOB, password=PASSWORD)
    assert query(await drive_login(url, username=BOB, password=BOB_PASSWORD))["state"] == "s"


async def test_token_helper_rotation_and_revocation(op: OidcProvider) -> None:
    resource = "http://127.0.0.1:1/mcp"  # a resource indicator only
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            tokens = await op.tokens(resource, "mcp:tools offline_access", user=BOB)
            first = jwt.decode(tokens["access_token"], provider_keys(await http.get(op.jwks_uri)))
            assert (first.claims["sub"], first.claims["aud"]) == (BOB, resource)
            assert first.header["kid"] == "es256-test"

            kid = await op.rotate_keys()
            assert kid != "es256-test"
            published = provider_keys(await http.get(op.jwks_uri))
            assert {"es256-test", kid} <= {key.kid for key in published.keys}
            second = jwt.decode(await op.token(resource), published)
            assert (second.header["kid"], second.claims["sub"]) == (kid, USERNAME)
            # What was issued before the rotation is still the provider's.
            secret = httpx.BasicAuth(op.client_id, op.client_secret)
            endpoint = op.introspection_endpoint
            body = {"token": tokens["refresh_token"]}
            assert (await http.post(endpoint, data=body, auth=secret)).json()["active"] is True
            await op.revoke(tokens["refresh_token"])
            assert (await http.post(endpoint, data=body, auth=secret)).json() == {"active": False}


async def test_opaque_tokens_are_introspected_by_the_resource_client() -> None:
    resource = "http://127.0.0.1:1/mcp"
    with trio.fail_after(GUARD):
        async with (
            oidc_provider(access_token_format="opaque", access_token_ttl=120) as op,
            httpx.AsyncClient(timeout=10) as http,
        ):
            tokens = await op.tokens(resource)
            assert tokens["access_token"].count(".") == 0
            assert tokens["expires_in"] == 120
            answer = (
                await http.post(
                    op.introspection_endpoint,
                    data={
                        "token": tokens["access_token"],
                        "client_id": op.resource_client_id,
                        "client_secret": op.resource_client_secret,
                    },
                )
            ).json()
            assert answer["active"] is True
            assert (answer["sub"], answer["aud"], answer["iss"]) == (USERNAME, resource, op.issuer)
            assert answer["client_id"] == op.client_id
