"""Token requests and the grants, against a real hypercorn serving a token endpoint written here.

The endpoint is a small ASGI app whose answers each test scripts; it records every request
(headers and form) so the tests see exactly what reached the wire.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

import attrs
import httpx
import orjson
import pytest
import trio
from joserfc import jwk, jwt

from tests._http import GUARD, serving_app
from trio_mcp import HttpTarget, OAuth, open_client
from trio_mcp.client._grants import (
    CLIENT_ASSERTION_TYPE,
    ID_JAG,
    JWT_BEARER,
    MAX_DESCRIPTION,
    TOKEN_EXCHANGE,
    ClientAuth,
    ClientCredentials,
    DPoPSession,
    WorkloadIdentity,
    client_credentials,
    exchange_for_id_jag,
    jwt_bearer,
    token_request,
)
from trio_mcp.client._jose import DPoPKey, access_token_hash
from trio_mcp.client._oauth_errors import OAuthError


@attrs.frozen
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    form: dict[str, str]

    def proof(self) -> dict[str, Any]:
        """The DPoP proof's claims, its signature checked with the key it carries."""
        header = orjson.loads(base64.urlsafe_b64decode(self.headers["dpop"].split(".")[0] + "=="))
        claims: dict[str, Any] = jwt.decode(
            self.headers["dpop"], jwk.ECKey.import_key(header["jwk"]), algorithms=["ES256"]
        ).claims
        return claims


Answer = tuple[int, dict[str, str], Any]
Handler = Callable[[Seen], Awaitable[Answer]]


@attrs.define
class Endpoints:
    """An ASGI app: each path answered by its handler; every request kept in ``seen``."""

    routes: dict[str, Handler]
    seen: list[Seen] = attrs.Factory(list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        seen = Seen(scope["method"], scope["path"], headers, dict(parse_qsl(body.decode())))
        self.seen.append(seen)
        handler = self.routes.get(scope["path"])
        status, extra, payload = (404, {}, {}) if handler is None else await handler(seen)
        data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    *((k.encode(), v.encode()) for k, v in extra.items()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})


def granted(token: str = "the-access-token", **extra: Any) -> Handler:
    async def answer(seen: Seen) -> Answer:
        return 200, {}, {"access_token": token, "token_type": "Bearer", "expires_in": 60, **extra}

    return answer


@asynccontextmanager
async def served(
    routes: dict[str, Handler],
) -> AsyncIterator[tuple[str, Endpoints, httpx.AsyncClient]]:
    """The app on a real hypercorn on 127.0.0.1: its base URL, the app, and a client."""
    app = Endpoints(routes)
    with trio.fail_after(GUARD):
        async with serving_app(app) as mcp_url, httpx.AsyncClient() as http:
            yield mcp_url.removesuffix("/mcp"), app, http


# -- DPoP and the authorization server's nonce -----------------------------------------------------


def nonce_required(nonces: list[str]) -> Handler:
    """A token endpoint that wants the latest of ``nonces`` in the proof, and hands out the
    next one with each refusal."""

    async def answer(seen: Seen) -> Answer:
        if "dpop" in seen.headers and seen.proof().get("nonce") == nonces[0]:
            return 200, {}, {"access_token": "bound", "token_type": "DPoP", "expires_in": 60}
        if len(nonces) > 1:
            nonces.pop(0)
        return 400, {"DPoP-Nonce": nonces[0]}, {"error": "use_dpop_nonce"}

    return answer


async def test_the_nonce_retry_happens_once_and_the_nonce_is_kept() -> None:
    async with served({"/token": nonce_required(["", "n-1"])}) as (base, app, http):
        session = DPoPSession()
        tokens = await client_credentials(
            http, f"{base}/token", client_auth=ClientAuth.none("c"), dpop=session
        )
        assert tokens.token_type == "DPoP" and tokens.access_token == "bound"
        first, second = app.seen
        assert "nonce" not in first.proof() and second.proof()["nonce"] == "n-1"
        assert first.proof()["jti"] != second.proof()["jti"]
        assert second.proof()["htu"] == f"{base}/token" and second.proof()["htm"] == "POST"
        assert "ath" not in second.proof()
        # The next request carries the remembered nonce at once: no refusal, one request.
        await client_credentials(
            http, f"{base}/token", client_auth=ClientAuth.none("c"), dpop=session
        )
        assert len(app.seen) == 3 and app.seen[2].proof()["nonce"] == "n-1"


async def test_a_second_nonce_refusal_is_final() -> None:
    # Every answer asks for a new nonce: two requests, then the error.
    count = iter(range(100))

    async def new_nonce_each_time(seen: Seen) -> Answer:
        return 400, {"DPoP-Nonce": f"n-{next(count)}"}, {"error": "use_dpop_nonce"}

    async with served({"/token": new_nonce_each_time}) as (base, app, http):
        with pytest.raises(OAuthError) as caught:
            await client_credentials(
                http, f"{base}/token", client_auth=ClientAuth.none("c"), dpop=DPoPKey.generate()
            )
        assert caught.value.step == "token" and caught.value.error == "use_dpop_nonce"
        assert len(app.seen) == 2


async def test_without_dpop_a_nonce_refusal_is_not_retried() -> None:
    async with served({"/token": nonce_required(["x", "n-1"])}) as (base, app, http):
        with pytest.raises(OAuthError, match="use_dpop_nonce"):
            await client_credentials(http, f"{base}/token", client_auth=ClientAuth.none("c"))
        assert len(app.seen) == 1


async def test_a_dpop_token_without_a_key_is_refused() -> None:
    async def dpop_token(seen: Seen) -> Answer:
        return 200, {}, {"access_token": "bound", "token_type": "DPoP"}

    async with served({"/token": dpop_token}) as (base, _app, http):
        with pytest.raises(OAuthError, match="DPoP-bound token unasked"):
            await client_credentials(http, f"{base}/token", client_auth=ClientAuth.none("c"))


# -- client authentication -------------------------------------------------------------------------


async def test_client_secret_basic_form_encodes_the_id_and_the_secret() -> None:
    client_id, secret = "team:a b%", "p@ss:wörd+/= é"
    async with served({"/token": granted()}) as (base, app, http):
        await client_credentials(
            http, f"{base}/token", client_auth=ClientAuth.basic(client_id, secret)
        )
    (seen,) = app.seen
    scheme, _, encoded = seen.headers["authorization"].partition(" ")
    assert scheme == "Basic"
    user, _, password = base64.b64decode(encoded).decode("ascii").partition(":")
    # RFC 6749 §2.3.1: each part form-urlencoded before the join, so the first ':' splits.
    assert user == "team%3Aa+b%25" and password == "p%40ss%3Aw%C3%B6rd%2B%2F%3D+%C3%A9"
    assert (unquote_plus(user), unquote_plus(password)) == (client_id, secret)
    # The client is named in the form too (servers such as the Python SDK's read it there);
    # the secret only in the header.
    assert seen.form["client_id"] == client_id and "client_secret" not in seen.form


async def test_client_secret_post_and_none() -> None:
    async with served({"/token": granted()}) as (base, app, http):
        await client_credentials(http, f"{base}/token", client_auth=ClientAuth.post("c", "s3cret"))
        await client_credentials(http, f"{base}/token", client_auth=ClientAuth.none("c"))
    post, none = app.seen
    assert post.form["client_id"] == "c" and post.form["client_secret"] == "s3cret"
    assert "authorization" not in post.headers
    assert none.form == {"grant_type": "client_credentials", "client_id": "c"}


async def test_private_key_jwt_signs_for_the_issuer() -> None:
    signer = jwk.ECKey.generate_key("P-256", private=True)
    auth = ClientAuth.private_key_jwt("c", signer.as_pem(private=True).decode())
    async with served({"/token": granted()}) as (base, app, http):
        await client_credentials(http, f"{base}/token", client_auth=auth, issuer=base)
        await client_credentials(http, f"{base}/token", client_auth=auth)
    with_issuer, without = app.seen
    assert with_issuer.form["client_assertion_type"] == CLIENT_ASSERTION_TYPE
    claims = jwt.decode(with_issuer.form["client_assertion"], signer).claims
    assert claims["iss"] == claims["sub"] == "c" and claims["aud"] == base
    # With no issuer known, the token endpoint is the audience (RFC 7523 §3).
    assert jwt.decode(without.form["client_assertion"], signer).claims["aud"] == f"{base}/token"


# -- errors ----------------------------------------------------------------------------------------


def refusal(status: int, payload: Any) -> Handler:
    async def answer(seen: Seen) -> Answer:
        return status, {}, payload

    return answer


async def test_an_error_body_becomes_an_oauth_error_without_secrets_or_controls() -> None:
    secret = "the-client-secret-value"
    description = f"bad secret {secret}\x1b[31m\r\nInjected: header" + "x" * 500
    routes = {"/token": refusal(401, {"error": "invalid_client", "error_description": description})}
    async with served(routes) as (base, _app, http):
        with pytest.raises(OAuthError) as caught:
            await client_credentials(
                http, f"{base}/token", client_auth=ClientAuth.post("c", secret)
            )
    error = caught.value
    assert error.step == "token" and error.error == "invalid_client"
    message = str(error)
    assert message.startswith("OAuth token failed: the token endpoint refused (invalid_client)")
    assert secret not in message and "[redacted]" in message
    assert all(ch.isprintable() for ch in message)
    assert len(error.message) < MAX_DESCRIPTION + 60


async def test_a_token_never_appears_in_an_error() -> None:
    # A hostile endpoint echoes the assertion it was sent.
    async def echo(seen: Seen) -> Answer:
        return 400, {}, {"error": "invalid_grant", "error_description": seen.form["assertion"]}

    assertion = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.c2lnbmF0dXJl"
    async with served({"/token": echo}) as (base, _app, http):
        with pytest.raises(OAuthError) as caught:
            await jwt_bearer(http, f"{base}/token", assertion, client_auth=ClientAuth.none("c"))
    assert assertion not in str(caught.value) and caught.value.error == "invalid_grant"


@pytest.mark.parametrize(
    ("status", "payload", "expected"),
    [
        (500, b"<html>oops</html>", "answered HTTP 500 with no error code"),
        (400, {"error": 'bad"code\\'}, "answered HTTP 400 with no error code"),
        (400, ["not", "an", "object"], "answered HTTP 400 with no error code"),
        (200, b"not json", "answered 200 without a JSON object"),
        (200, {"token_type": "Bearer"}, "has no access_token"),
        (200, {"access_token": "t", "token_type": "mac"}, "has an unknown token_type"),
        (200, {"access_token": "t", "token_type": "Bearer", "expires_in": "soon"}, "expires_in"),
    ],
)
async def test_bad_answers(status: int, payload: Any, expected: str) -> None:
    async with served({"/token": refusal(status, payload)}) as (base, _app, http):
        with pytest.raises(OAuthError, match=expected) as caught:
            await client_credentials(http, f"{base}/token", client_auth=ClientAuth.none("c"))
    assert caught.value.step == "token" and caught.value.error is None


async def test_a_huge_answer_is_not_read_whole() -> None:
    async with served({"/token": refusal(200, b"x" * 200_000)}) as (base, _app, http):
        with pytest.raises(OAuthError, match="exceeds"):
            await client_credentials(http, f"{base}/token", client_auth=ClientAuth.none("c"))


async def test_a_hanging_token_endpoint_times_out() -> None:
    async def hang(seen: Seen) -> Answer:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with served({"/token": hang}) as (base, _app, http):
        started = trio.current_time()
        with pytest.raises(OAuthError, match=r"did not answer within 0\.5 s") as caught:
            await token_request(
                http,
                f"{base}/token",
                {"grant_type": "client_credentials"},
                client_auth=ClientAuth.none("c"),
                timeout=0.5,
            )
        assert trio.current_time() - started < 5
        assert caught.value.step == "token"


async def test_an_unreachable_token_endpoint() -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(OAuthError, match="could not reach"):
            # Port 9 (discard) on loopback: nothing listens, the connection is refused.
            await client_credentials(
                http, "http://127.0.0.1:9/token", client_auth=ClientAuth.none("c")
            )


# -- the grants' forms -----------------------------------------------------------------------------


async def test_the_grants_send_their_parameters() -> None:
    async with served({"/token": granted(scope="read")}) as (base, app, http):
        tokens = await client_credentials(
            http,
            f"{base}/token",
            client_auth=ClientAuth.none("c"),
            scope="read write",
            resource="https://mcp.example/mcp",
        )
        await jwt_bearer(
            http, f"{base}/token", "workload.jwt.value", client_auth=ClientAuth.none("w")
        )
    assert tokens.scope == "read" and tokens.expires_at is not None
    cc, bearer = app.seen
    assert cc.form == {
        "grant_type": "client_credentials",
        "scope": "read write",
        "resource": "https://mcp.example/mcp",
        "client_id": "c",
    }
    assert bearer.form == {
        "grant_type": JWT_BEARER,
        "assertion": "workload.jwt.value",
        "client_id": "w",
    }


async def test_jwt_bearer_is_never_retried() -> None:
    routes = {"/token": refusal(400, {"error": "unauthorized_client"})}
    async with served(routes) as (base, app, http):
        with pytest.raises(OAuthError, match="unauthorized_client"):
            await jwt_bearer(http, f"{base}/token", "a.b.c", client_auth=ClientAuth.none("w"))
    assert len(app.seen) == 1


async def test_the_id_jag_exchange() -> None:
    async def idp(seen: Seen) -> Answer:
        return (
            200,
            {},
            {"access_token": "the-id-jag", "issued_token_type": ID_JAG, "token_type": "N_A"},
        )

    async with served({"/token": idp}) as (base, app, http):
        grant = await exchange_for_id_jag(
            http,
            f"{base}/token",
            "the-id-token",
            audience="https://as.example",
            resource="https://mcp.example/mcp",
            client_auth=ClientAuth.none("idp-client"),
        )
    assert grant == "the-id-jag"
    assert app.seen[0].form == {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "audience": "https://as.example",
        "resource": "https://mcp.example/mcp",
        "subject_token": "the-id-token",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "client_id": "idp-client",
    }


async def test_an_exchange_that_issues_something_else_is_refused() -> None:
    wrong = {
        "access_token": "x",
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }
    async with served({"/token": refusal(200, wrong)}) as (base, _app, http):
        with pytest.raises(OAuthError, match="did not issue an ID-JAG") as caught:
            await exchange_for_id_jag(
                http,
                f"{base}/token",
                "t",
                audience="a",
                resource="r",
                client_auth=ClientAuth.none("c"),
            )
    assert caught.value.step == "token-exchange"


# -- DPoP on resource requests ---------------------------------------------------------------------


async def test_a_resource_request_is_signed_and_learns_the_nonce() -> None:
    async def resource(seen: Seen) -> Answer:
        if seen.proof().get("nonce") != "rs-nonce":
            challenge = 'DPoP error="use_dpop_nonce", error_description="fresh nonce"'
            return 401, {"WWW-Authenticate": challenge, "DPoP-Nonce": "rs-nonce"}, {}
        return 200, {}, {"ok": True}

    session = DPoPSession()
    async with served({"/mcp": resource}) as (base, app, http):
        request = http.build_request("POST", f"{base}/mcp?x=1", content=b"{}")
        session.sign(request, "the-token")
        response = await http.send(request)
        assert response.status_code == 401 and session.learn(response)
        session.sign(request, "the-token")
        response = await http.send(request)
        assert response.status_code == 200 and not session.learn(response)
    first, second = app.seen
    assert first.headers["authorization"] == "DPoP the-token"
    claims = second.proof()
    assert claims["nonce"] == "rs-nonce" and claims["ath"] == access_token_hash("the-token")
    assert claims["htu"] == f"{base}/mcp" and claims["htm"] == "POST"
    assert claims["jti"] != first.proof()["jti"]


# -- the httpx.Auth --------------------------------------------------------------------------------


def protected(
    base: list[str], *, issuer: str | None = None, token: str = "the-access-token"
) -> dict[str, Handler]:
    """PRM, authorization server metadata, a token endpoint and an MCP endpoint that wants
    ``token``."""

    async def prm(seen: Seen) -> Answer:
        return 200, {}, {"resource": f"{base[0]}/mcp", "authorization_servers": [issuer or base[0]]}

    async def metadata(seen: Seen) -> Answer:
        return 200, {}, {"issuer": base[0], "token_endpoint": f"{base[0]}/token"}

    async def mcp(seen: Seen) -> Answer:
        if seen.headers.get("authorization") == f"Bearer {token}":
            return 200, {}, {"ok": True}
        challenge = f'Bearer resource_metadata="{base[0]}/.well-known/oauth-protected-resource/mcp"'
        return 401, {"WWW-Authenticate": challenge}, {}

    return {
        "/.well-known/oauth-protected-resource/mcp": prm,
        "/.well-known/oauth-authorization-server": metadata,
        "/token": granted(token, expires_in=3600),
        "/mcp": mcp,
    }


async def test_the_auth_discovers_gets_a_token_and_keeps_it() -> None:
    base: list[str] = []
    async with served(protected(base)) as (url, app, _):
        base.append(url)
        auth = OAuth(grant=ClientCredentials(ClientAuth.basic("c", "s"), scope="tools"))
        async with httpx.AsyncClient(auth=auth) as http:
            assert (await http.post(f"{url}/mcp", content=b"{}")).status_code == 200
            assert (await http.post(f"{url}/mcp", content=b"{}")).status_code == 200
    paths = [seen.path for seen in app.seen]
    assert paths == [
        "/mcp",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/token",
        "/mcp",
        "/mcp",
    ]
    token = app.seen[3]
    assert token.form["scope"] == "tools" and token.form["resource"] == f"{url}/mcp"


async def test_a_grant_is_renewed_before_its_token_expires() -> None:
    base: list[str] = []
    now = [1_000_000.0]
    async with served(protected(base)) as (url, app, _):
        base.append(url)
        auth = OAuth(grant=ClientCredentials(ClientAuth.basic("c", "s")), clock=lambda: now[0])
        async with httpx.AsyncClient(auth=auth) as http:
            assert (await http.post(f"{url}/mcp", content=b"{}")).status_code == 200
            now[0] += 3600 - 30  # within the margin: renewed before it is sent, no 401
            assert (await http.post(f"{url}/mcp", content=b"{}")).status_code == 200
    paths = [seen.path for seen in app.seen]
    assert paths[3:] == ["/token", "/mcp", "/token", "/mcp"]
    assert app.seen[-1].headers["authorization"] == "Bearer the-access-token"


async def test_a_refused_workload_grant_is_raised_not_retried() -> None:
    base: list[str] = []
    routes = protected(base) | {"/token": refusal(400, {"error": "invalid_grant"})}
    async with served(routes) as (url, app, _):
        base.append(url)
        assertions = iter(["a.b.c", "a.b.c", "d.e.f"])
        auth = OAuth(grant=WorkloadIdentity(lambda: next(assertions), client_id="w"))
        async with httpx.AsyncClient(auth=auth) as http:
            with pytest.raises(OAuthError, match="invalid_grant"):
                await http.post(f"{url}/mcp", content=b"{}")
            # The same assertion again: the same error, and nothing sent.
            with pytest.raises(OAuthError, match="invalid_grant"):
                await http.post(f"{url}/mcp", content=b"{}")
            assert [seen.path for seen in app.seen].count("/token") == 1
            # A rotated assertion is a new grant.
            with pytest.raises(OAuthError, match="invalid_grant"):
                await http.post(f"{url}/mcp", content=b"{}")
    assert [seen.form.get("assertion") for seen in app.seen if seen.path == "/token"] == [
        "a.b.c",
        "d.e.f",
    ]


async def test_metadata_cannot_send_the_client_to_another_origin() -> None:
    base: list[str] = []
    async with served(protected(base, issuer="http://attacker.example")) as (url, app, _):
        base.append(url)
        auth = OAuth(grant=ClientCredentials(ClientAuth.basic("c", "s")))
        async with httpx.AsyncClient(auth=auth) as http:
            with pytest.raises(OAuthError, match="https outside loopback") as caught:
                await http.post(f"{url}/mcp", content=b"{}")
    assert caught.value.step == "discovery"
    assert "/token" not in [seen.path for seen in app.seen]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_open_client_raises_the_oauth_error(version: str) -> None:
    base: list[str] = []
    routes = protected(base) | {"/token": refusal(400, {"error": "invalid_grant"})}
    async with served(routes) as (url, _app, _):
        base.append(url)
        async with httpx.AsyncClient(
            auth=OAuth(grant=WorkloadIdentity("a.b.c", client_id="w"))
        ) as http:
            with pytest.raises(OAuthError, match="invalid_grant") as caught:
                async with open_client(
                    HttpTarget(f"{url}/mcp", http_client=http), protocol_version=version
                ):
                    pass
    assert caught.value.step == "token"
