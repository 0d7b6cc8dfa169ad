"""IntrospectionVerifier against oidc-provider's real introspection endpoint and opaque tokens.

The verifier's clock (``clock=``) is moved by the tests, the provider's is not. Requests to the
endpoint are counted through an event hook of the real httpx client the verifier is given.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import attrs
import orjson
import pytest
import trio
import trio.testing

from trio_mcp import (
    Auth,
    IntrospectionVerifier,
    InvalidToken,
    Principal,
    Server,
    VerifierUnavailable,
)

from .._http import VERSION, initialize_body, serving, serving_app
from ._oidc import BOB, USERNAME, OidcProvider, oidc_provider
from ._tokens import Clock, counting_client

#: A hang guard for each test, never a performance assertion.
GUARD = 60
#: A resource indicator only: nothing is served there.
RESOURCE = "http://127.0.0.1:8001/mcp"
#: The provider's access tokens live this long.
TTL = 300


@pytest.fixture
async def op() -> AsyncIterator[OidcProvider]:
    async with oidc_provider(access_token_format="opaque", access_token_ttl=TTL) as provider:
        yield provider


def resource_verifier(op: OidcProvider, **options: object) -> IntrospectionVerifier:
    """The protected resource's own client, posting its credentials in the form."""
    return IntrospectionVerifier(
        op.introspection_endpoint,
        client_id=op.resource_client_id,
        client_secret=op.resource_client_secret,
        auth_method="client_secret_post",
        issuer=op.issuer,
        **options,  # type: ignore[arg-type]
    )


async def test_a_real_opaque_token_gives_its_principal(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE, "mcp:tools mcp:admin")
        assert "." not in token
        principal = await resource_verifier(op).verify(token)
        # The same through the other client authentication, the pre-registered client's.
        basic = IntrospectionVerifier(
            op.introspection_endpoint, client_id=op.client_id, client_secret=op.client_secret
        )
        assert (await basic.verify(token)).identity == principal.identity
        bob = await basic.verify(await op.token(RESOURCE, user=BOB))
    assert principal == Principal(
        subject=USERNAME,
        client_id=op.client_id,
        scopes=frozenset({"mcp:tools", "mcp:admin"}),
        claims=principal.claims,
        issuer=op.issuer,
        expires_at=principal.expires_at,
        audience=(RESOURCE,),
    )
    assert principal.claims["active"] is True
    assert principal.expires_at is not None
    assert 0 < principal.expires_at - time.time() <= TTL
    assert bob.subject == BOB and bob.identity != principal.identity
    assert Auth(basic, resource=RESOURCE).accept(principal) is principal


async def test_a_revoked_token_is_refused_once_its_cache_entry_is_gone(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        cached = resource_verifier(op, clock=clock, cache_ttl=30)
        uncached = resource_verifier(op, cache_ttl=0)
        assert (await cached.verify(token)).subject == USERNAME
        assert (await uncached.verify(token)).subject == USERNAME

        await op.revoke(token)
        with pytest.raises(InvalidToken) as caught:
            await uncached.verify(token)
        assert caught.value.description == "the access token is not active (revoked or expired)"
        # Cached answers stand for cache_ttl, then the endpoint is asked again.
        assert (await cached.verify(token)).subject == USERNAME
        clock.now += 30
        with pytest.raises(InvalidToken, match="not active"):
            await cached.verify(token)


async def test_the_cache_saves_requests_and_never_outlives_the_token(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            verifier = resource_verifier(op, clock=clock, cache_ttl=3600, http_client=http)
            principal = await verifier.verify(token)
            assert seen == {"/token/introspection": 1}
            assert await verifier.verify(token) is principal
            assert seen == {"/token/introspection": 1}
            # The entry is keyed by the token's digest, and never holds the token itself.
            assert list(verifier._cache) == [hashlib.sha256(token.encode()).digest()]
            assert token not in repr(verifier._cache)

            assert principal.expires_at is not None
            clock.now = principal.expires_at - 1
            assert await verifier.verify(token) is principal
            assert seen == {"/token/introspection": 1}
            # At exp the entry is gone, though cache_ttl is not over: the endpoint is asked
            # (the provider, on the real clock, still says active), and the expiry refuses it.
            clock.now = principal.expires_at
            with pytest.raises(InvalidToken, match="the access token expired"):
                await verifier.verify(token)
            assert seen == {"/token/introspection": 2}


async def test_the_cache_is_bounded_oldest_first(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        tokens = [await op.token(RESOURCE) for _ in range(3)]
        async with counting_client() as (http, seen):
            verifier = resource_verifier(op, max_cache=2, http_client=http)
            for token in tokens:
                await verifier.verify(token)
            assert len(verifier._cache) == 2
            await verifier.verify(tokens[2])
            await verifier.verify(tokens[1])
            assert seen["/token/introspection"] == 3
            await verifier.verify(tokens[0])
            assert seen["/token/introspection"] == 4


async def test_wrong_client_credentials_are_unavailable_not_invalid(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        for method in ("client_secret_basic", "client_secret_post"):
            verifier = IntrospectionVerifier(
                op.introspection_endpoint,
                client_id=op.resource_client_id,
                client_secret="not the secret",
                auth_method=method,
            )
            with pytest.raises(VerifierUnavailable, match="refused this server's client") as c:
                await verifier.verify(token)
            assert token not in str(c.value) and "not the secret" not in str(c.value)


async def test_an_unreachable_or_wrong_endpoint_is_unavailable(op: OidcProvider) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/introspect"
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        for endpoint, message in (
            (closed, "could not be fetched"),
            (op.issuer + "/no-such-endpoint", "HTTP 404"),
        ):
            verifier = IntrospectionVerifier(endpoint, client_id="rs", client_secret="s")
            with pytest.raises(VerifierUnavailable, match=message):
                await verifier.verify(token)


async def test_an_unknown_token_is_not_active(op: OidcProvider) -> None:
    with trio.fail_after(GUARD), pytest.raises(InvalidToken, match="not active"):
        await resource_verifier(op).verify("made-up-token")


async def test_a_token_of_another_issuer_is_refused(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        verifier = IntrospectionVerifier(
            op.introspection_endpoint,
            client_id=op.resource_client_id,
            client_secret=op.resource_client_secret,
            auth_method="client_secret_post",
            issuer="https://elsewhere.example",
        )
        with pytest.raises(InvalidToken, match="issued by another authorization server"):
            await verifier.verify(token)


async def test_a_refresh_token_sent_as_an_access_token_names_no_audience(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        tokens = await op.tokens(RESOURCE, "mcp:tools offline_access")
        auth = Auth(resource_verifier(op), resource=RESOURCE)
        assert (await auth.authenticate([f"Bearer {tokens['access_token']}"])).subject
        # The provider says a refresh token is active, with no audience: the policy refuses it.
        principal = await auth.verifier.verify(tokens["refresh_token"])
        assert principal.audience == ()
        with pytest.raises(InvalidToken, match="issued for another resource"):
            await auth.authenticate([f"Bearer {tokens['refresh_token']}"])


async def test_no_token_is_logged(op: OidcProvider, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        verifier = resource_verifier(op, cache_ttl=0)
        await verifier.verify(token)
        await op.revoke(token)
        with pytest.raises(InvalidToken):
            await verifier.verify(token)
    assert "introspected token refused" in caplog.text
    assert token not in caplog.text


def test_the_options_are_checked() -> None:
    with pytest.raises(ValueError, match="auth_method"):
        IntrospectionVerifier("https://as.example/i", client_id="rs", auth_method="none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be negative"):
        IntrospectionVerifier("https://as.example/i", client_id="rs", cache_ttl=-1)


# -- calls to the endpoint: a refused token is remembered, one token is one call ------------------


@attrs.define
class Endpoint:
    """A real RFC 7662 endpoint (an ASGI app on hypercorn): ``answers`` says which tokens are
    active, ``calls`` counts the introspections, and each waits for ``open`` to be set, so a
    test can hold them until every caller it started is waiting."""

    answers: dict[str, dict[str, Any]] = attrs.Factory(dict)
    calls: int = 0
    open: trio.Event = attrs.Factory(trio.Event)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": message["type"] + ".complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.calls += 1
        await self.open.wait()
        token = parse_qs(body.decode())["token"][0]
        answer = self.answers.get(token, {"active": False})
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": orjson.dumps(answer)})


def good_answer() -> dict[str, Any]:
    return {
        "active": True,
        "sub": "alice",
        "client_id": "app",
        "scope": "mcp:tools",
        "aud": RESOURCE,
        "exp": int(time.time()) + TTL,
    }


@asynccontextmanager
async def endpoint_serving(endpoint: Endpoint) -> AsyncIterator[str]:
    async with serving_app(endpoint) as url:
        yield url


async def test_a_refused_token_costs_one_call_until_its_negative_ttl(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        async with counting_client() as (http, seen):
            verifier = resource_verifier(op, clock=clock, negative_ttl=5, http_client=http)
            for _ in range(20):
                with pytest.raises(InvalidToken, match="not active"):
                    await verifier.verify("made-up-token")
            assert seen == {"/token/introspection": 1}
            # Kept under the digest, never the token.
            assert list(verifier._refused) == [hashlib.sha256(b"made-up-token").digest()]
            clock.advance(5)
            with pytest.raises(InvalidToken, match="not active"):
                await verifier.verify("made-up-token")
            assert seen == {"/token/introspection": 2}


async def test_concurrent_verifications_of_one_token_share_one_call(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            verifier = resource_verifier(op, http_client=http)
            found: list[Principal] = []

            async def verify(token: str) -> None:
                found.append(await verifier.verify(token))

            async with trio.open_nursery() as nursery:
                for _ in range(50):
                    nursery.start_soon(verify, token)
            assert seen == {"/token/introspection": 1}
            assert len(found) == 50 and {p.subject for p in found} == {USERNAME}


async def test_a_token_refused_then_issued_is_accepted_after_the_negative_ttl() -> None:
    clock = Clock()
    endpoint = Endpoint()
    endpoint.open.set()
    with trio.fail_after(GUARD):
        async with endpoint_serving(endpoint) as url:
            verifier = IntrospectionVerifier(url, client_id="rs", negative_ttl=2, clock=clock)
            with pytest.raises(InvalidToken, match="not active"):
                await verifier.verify("fresh-token")
            endpoint.answers["fresh-token"] = good_answer()
            clock.advance(1)
            with pytest.raises(InvalidToken, match="not active"):
                await verifier.verify("fresh-token")
            assert endpoint.calls == 1
            clock.advance(1)
            assert (await verifier.verify("fresh-token")).subject == "alice"
            assert endpoint.calls == 2
            assert not verifier._refused


async def test_concurrent_bad_and_good_tokens_each_cost_one_call() -> None:
    endpoint = Endpoint(answers={"good-token": good_answer()})
    outcomes: list[str] = []
    with trio.fail_after(GUARD):
        async with endpoint_serving(endpoint) as url:
            verifier = IntrospectionVerifier(url, client_id="rs")

            async def verify(token: str) -> None:
                try:
                    outcomes.append((await verifier.verify(token)).subject or "")
                except InvalidToken as exc:
                    outcomes.append(exc.description)

            async with trio.open_nursery() as nursery:
                for _ in range(50):
                    nursery.start_soon(verify, "good-token")
                    nursery.start_soon(verify, "bogus-token")
                # Every caller is waiting: on the endpoint, or on the call another one made.
                await trio.testing.wait_all_tasks_blocked()
                assert endpoint.calls == 2
                endpoint.open.set()
    assert outcomes.count("alice") == 50
    assert outcomes.count("the access token is not active (revoked or expired)") == 50


async def test_a_cancelled_caller_leaves_the_others_one_call() -> None:
    endpoint = Endpoint(answers={"good-token": good_answer()})
    found: list[str | None] = []
    with trio.fail_after(GUARD):
        async with endpoint_serving(endpoint) as url:
            verifier = IntrospectionVerifier(url, client_id="rs")
            async with trio.open_nursery() as nursery:
                first = trio.CancelScope()

                async def first_caller() -> None:
                    with first:
                        await verifier.verify("good-token")

                async def other() -> None:
                    found.append((await verifier.verify("good-token")).subject)

                nursery.start_soon(first_caller)
                await trio.testing.wait_all_tasks_blocked()
                for _ in range(3):
                    nursery.start_soon(other)
                await trio.testing.wait_all_tasks_blocked()
                assert endpoint.calls == 1
                first.cancel()
                await trio.testing.wait_all_tasks_blocked()
                endpoint.open.set()
    assert found == ["alice"] * 3
    # The cancelled call's answer never came; one of the others asked again, for all of them.
    assert endpoint.calls == 2
    assert not verifier._flights


async def test_a_flood_of_refused_tokens_is_bounded_and_keeps_the_good_ones() -> None:
    endpoint = Endpoint(answers={"good-token": good_answer()})
    endpoint.open.set()
    with trio.fail_after(GUARD):
        async with endpoint_serving(endpoint) as url:
            verifier = IntrospectionVerifier(url, client_id="rs", max_negative=5)
            await verifier.verify("good-token")
            for n in range(20):
                with pytest.raises(InvalidToken):
                    await verifier.verify(f"bogus-{n}")
            assert len(verifier._refused) == 5
            assert endpoint.calls == 21
            await verifier.verify("good-token")
            assert endpoint.calls == 21


async def test_bogus_and_good_bursts_at_a_served_mcp_endpoint_cost_one_call_each() -> None:
    """The measured attack, through a real hypercorn: 20 requests with one bogus token, then 50
    concurrent ones with one good token."""
    endpoint = Endpoint(answers={"good-token": good_answer()})
    with trio.fail_after(GUARD):
        async with endpoint_serving(endpoint) as url:
            verifier = IntrospectionVerifier(url, client_id="rs")
            server = Server("introspected", "1.0", auth=Auth(verifier, resource=RESOURCE))
            async with serving(server) as served:

                async def post(token: str, statuses: list[int]) -> None:
                    headers = served.headers(version=None, authorization=f"Bearer {token}")
                    response = await served.post(
                        initialize_body(VERSION), version=None, headers=headers
                    )
                    statuses.append(response.status_code)

                endpoint.open.set()
                refused: list[int] = []
                for _ in range(20):
                    await post("bogus-token", refused)
                assert refused == [401] * 20
                assert endpoint.calls == 1

                endpoint.open = trio.Event()
                admitted: list[int] = []
                async with trio.open_nursery() as nursery:
                    for _ in range(50):
                        nursery.start_soon(post, "good-token", admitted)
                    await trio.testing.wait_all_tasks_blocked()
                    endpoint.open.set()
                assert endpoint.calls == 2
                assert admitted == [200] * 50
