"""The attacks of issue 12 on a protected server, each one a test: a real hypercorn on loopback
serving ``Server(auth=Auth(JWTVerifier(op.issuer), resource=url, authorization_servers=
[op.issuer]))`` (or an ``IntrospectionVerifier``), real tokens from a real oidc-provider.

Each test asserts the exact status and ``WWW-Authenticate`` challenge, that nothing of MCP ran,
and that no token appears in any response (body or headers) or any log line of the server.

The resource URL is the one served: the listening socket is bound before the server is built,
so the tokens' audience, the metadata and the challenges all name the real address. The clock
of the verifier and the policy is the test's (moved for the expiry attacks); JWKS fetches are
counted through an event hook of the real httpx client the verifier uses.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import socket
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import orjson
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from trio_mcp import (
    Auth,
    Context,
    IntrospectionVerifier,
    JWTVerifier,
    Server,
    TokenVerifier,
)
from trio_mcp.http import McpHttpApp

from .._http import GUARD, VERSION, initialize_body
from ._oidc import BOB, OidcProvider, oidc_provider
from ._tokens import Clock, claims_of, header_of, hmac_signed, with_header

SCOPE = "mcp:tools"


@attrs.define
class Target:
    """The protected server as the attacker sees it, and what the test watches."""

    url: str
    app: McpHttpApp
    http: httpx.AsyncClient
    clock: Clock
    #: Paths the verifier fetched, counted.
    fetched: Counter[str]
    ran: list[str]
    #: Every response seen, for the leak check.
    responses: list[httpx.Response] = attrs.Factory(list)

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/mcp")

    @property
    def metadata_url(self) -> str:
        return self.origin + "/.well-known/oauth-protected-resource/mcp"

    def challenge(self, error: str, description: str, *, scope: bool = True) -> str:
        """The exact challenge expected (RFC 6750 §3 parameters in the server's order)."""
        params = [f'error="{error}"', f'error_description="{description}"']
        if scope:
            params.append(f'scope="{SCOPE}"')
        params.append(f'resource_metadata="{self.metadata_url}"')
        return "Bearer " + ", ".join(params)

    async def post(
        self,
        token: str | None,
        body: Any = None,
        *,
        session: str | None = None,
        query: str = "",
        authorization: str | None = None,
    ) -> httpx.Response:
        headers = {"accept": "application/json, text/event-stream"}
        headers["content-type"] = "application/json"
        if authorization is not None:
            headers["authorization"] = authorization
        elif token is not None:
            headers["authorization"] = f"Bearer {token}"
        if session is not None:
            headers["mcp-session-id"] = session
            headers["mcp-protocol-version"] = VERSION
        response = await self.http.post(
            self.url + query,
            content=orjson.dumps(body if body is not None else initialize_body()),
            headers=headers,
        )
        self.responses.append(response)
        return response

    async def refused(self, token: str | None, status: int, challenge: str, **kw: Any) -> None:
        """A request refused with ``status`` and exactly ``challenge``, before anything of MCP
        ran or any session was opened."""
        ran, sessions = list(self.ran), set(self.app.sessions)
        response = await self.post(token, **kw)
        assert response.status_code == status, response.text
        assert response.headers.get_list("www-authenticate") == [challenge]
        assert response.json()["error"]["code"] == -32600
        assert self.ran == ran and set(self.app.sessions) == sessions


@asynccontextmanager
async def protected(
    op: OidcProvider, verifier: TokenVerifier | None = None
) -> AsyncIterator[Target]:
    """The server, on a socket bound first so the resource URL is the served one."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    clock = Clock()
    fetched: Counter[str] = Counter()

    async def record(request: httpx.Request) -> None:
        fetched[request.url.path] += 1

    ran: list[str] = []
    async with (
        httpx.AsyncClient(event_hooks={"request": [record]}) as verifier_http,
        httpx.AsyncClient(timeout=GUARD) as http,
    ):
        if verifier is None:
            verifier = JWTVerifier(op.issuer, clock=clock, http_client=verifier_http)
        auth = Auth(
            verifier,
            resource=url,
            authorization_servers=[op.issuer],
            required_scopes=SCOPE,
            clock=clock,
        )
        server = Server("attacked", "1.0", auth=auth)

        @server.tool()
        async def whoami(ctx: Context) -> str:
            ran.append("whoami")
            assert ctx.auth is not None
            return str(ctx.auth.subject)

        app = server.http_app()
        asgi: Any = app  # hypercorn's own types of an ASGI app are narrower than any app's
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.accesslog = None
        config.graceful_timeout = 1.0
        stop = trio.Event()
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    functools.partial(serve, asgi, config, shutdown_trigger=stop.wait)
                )
                try:
                    yield Target(url, app, http, clock, fetched, ran)
                finally:
                    stop.set()


@pytest.fixture
async def op() -> AsyncIterator[OidcProvider]:
    async with oidc_provider() as provider:
        yield provider


def server_logs(caplog: pytest.LogCaptureFixture) -> str:
    """The server side's log lines (the test's own httpx client logs the URLs it requests,
    a token in the query among them: not the server's doing)."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(
        formatter.format(record)
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    )


def no_leak(target: Target, caplog: pytest.LogCaptureFixture, *tokens: str) -> None:
    logs = server_logs(caplog)
    for token in tokens:
        # A JWT's signature and payload are what a leak would show; an opaque token is whole.
        pieces = [p for p in token.split(".") if len(p) > 16] or [token]
        for piece in pieces:
            assert piece not in logs
            for response in target.responses:
                assert piece not in response.text
                assert piece not in str(response.headers)


@pytest.fixture(autouse=True)
def debug_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)


async def whoami(target: Target, token: str) -> str:
    """Open a session with ``token`` and call ``whoami``: the baseline the attacks differ
    from."""
    opened = await target.post(token)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami"}}
    answer = await target.post(token, call, session=session)
    assert answer.status_code == 200, answer.text
    lines = [line for line in answer.text.splitlines() if line.startswith("data: ")]
    text: str = orjson.loads(lines[-1][6:])["result"]["content"][0]["text"]
    return text


async def test_a_real_token_passes(op: OidcProvider, caplog: pytest.LogCaptureFixture) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        assert await whoami(target, token) == "alice"
        assert target.ran == ["whoami"]
        # Without a token: a 401 naming the metadata and the scope, no error code.
        response = await target.post(None)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == (
            f'Bearer scope="{SCOPE}", resource_metadata="{target.metadata_url}"'
        )
        metadata = (await target.http.get(target.metadata_url)).json()
        assert metadata["resource"] == target.url
        assert metadata["authorization_servers"] == [op.issuer]
    no_leak(target, caplog, token)


async def test_a_key_rotation_is_picked_up_and_tokens_of_the_old_key_still_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The provider signs with a new key (both published): the server fetches the key set once
    more for the new key id, once the refetch interval allows, and keeps accepting the old
    key's tokens."""
    async with oidc_provider() as op, protected(op) as target:
        old = await op.token(target.url, SCOPE)
        assert await whoami(target, old) == "alice"
        assert target.fetched["/jwks"] == 1
        kid = await op.rotate_keys()
        new = await op.token(target.url, SCOPE)
        assert header_of(new)["kid"] == kid != header_of(old)["kid"]
        target.clock.now += 30  # past the refetch interval of the first fetch
        assert await whoami(target, new) == "alice"
        assert target.fetched["/jwks"] == 2
        assert await whoami(target, old) == "alice"
        assert await whoami(target, new) == "alice"
        assert target.fetched["/jwks"] == 2
    no_leak(target, caplog, old, new)


async def test_an_expired_token(op: OidcProvider, caplog: pytest.LogCaptureFixture) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        target.clock.now = claims_of(token)["exp"] + 30
        await target.refused(
            token, 401, target.challenge("invalid_token", "the access token expired")
        )
        # Within the verifier's leeway, the policy (no leeway) still refuses it.
        target.clock.now = claims_of(token)["exp"]
        await target.refused(
            token, 401, target.challenge("invalid_token", "the access token expired")
        )
    no_leak(target, caplog, token)


async def test_a_token_not_valid_yet(op: OidcProvider, caplog: pytest.LogCaptureFixture) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        target.clock.now = claims_of(token)["iat"] - 31
        description = (
            "the access token was issued in the future (check this server's clock if that is wrong)"
        )
        await target.refused(token, 401, target.challenge("invalid_token", description))
    no_leak(target, caplog, token)


async def test_a_token_for_another_resource(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with protected(op) as target:
        # Another loopback resource: a real token, a good signature, someone else's audience.
        token = await op.token(target.origin + "/other", SCOPE)
        assert claims_of(token)["aud"] == target.origin + "/other"
        description = "the access token was issued for another resource"
        await target.refused(token, 401, target.challenge("invalid_token", description))
    no_leak(target, caplog, token)


async def test_a_token_of_another_issuer(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with oidc_provider() as other:
        async with protected(op) as target:
            token = await other.token(target.url, SCOPE)
            # Same kid, another provider's key: the signature is what gives it away.
            assert header_of(token)["kid"] == "es256-test"
            description = "the token's signature does not verify with the issuer's keys"
            await target.refused(token, 401, target.challenge("invalid_token", description))
        no_leak(target, caplog, token)
        # A server misconfigured with the other provider's keys still refuses it, on its iss.
        crossed = JWTVerifier(op.issuer, jwks_uri=other.jwks_uri)
        async with protected(op, crossed) as target:
            description = "the access token was issued by another authorization server"
            await target.refused(token, 401, target.challenge("invalid_token", description))
        no_leak(target, caplog, token)


async def test_alg_none(op: OidcProvider, caplog: pytest.LogCaptureFixture) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        unsigned = with_header(token, alg="none").rsplit(".", 1)[0] + "."
        description = "the access token is not signed (alg none)"
        await target.refused(unsigned, 401, target.challenge("invalid_token", description))
        assert target.fetched == {}
    no_leak(target, caplog, token, unsigned)


async def test_hmac_signed_with_the_public_key(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        published = (await target.http.get(op.jwks_uri)).json()
        [key] = [k for k in published["keys"] if k["kid"] == header_of(token)["kid"]]
        forged = hmac_signed(token, json.dumps(key).encode())
        description = "the token is signed with an algorithm this server does not accept"
        await target.refused(forged, 401, target.challenge("invalid_token", description))
        assert target.fetched == {}
    no_leak(target, caplog, token, forged)


async def test_an_unknown_kid_flood_is_fetched_for_at_most_once_per_interval(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        assert await whoami(target, token) == "alice"
        assert target.fetched["/jwks"] == 1
        description = "the token is signed with a key the issuer does not publish"
        forged = [with_header(token, kid=secrets.token_hex(8)) for _ in range(40)]

        async def flood() -> None:
            async with trio.open_nursery() as nursery:
                for one in forged:
                    nursery.start_soon(
                        functools.partial(
                            target.refused, one, 401, target.challenge("invalid_token", description)
                        )
                    )

        await flood()
        assert target.fetched["/jwks"] == 1  # within the interval of the first fetch: none
        target.clock.now += 30
        await flood()
        assert target.fetched["/jwks"] == 2  # 40 requests, one fetch
        await flood()
        assert target.fetched["/jwks"] == 2
    no_leak(target, caplog, token, *forged)


async def test_a_revoked_token_under_introspection(caplog: pytest.LogCaptureFixture) -> None:
    async with oidc_provider(access_token_format="opaque") as op:
        verifier = IntrospectionVerifier(
            op.introspection_endpoint,
            client_id=op.resource_client_id,
            client_secret=op.resource_client_secret,
            auth_method="client_secret_post",
            issuer=op.issuer,
            cache_ttl=0,
        )
        async with protected(op, verifier) as target:
            token = await op.token(target.url, SCOPE)
            assert await whoami(target, token) == "alice"
            await op.revoke(token)
            description = "the access token is not active (revoked or expired)"
            await target.refused(token, 401, target.challenge("invalid_token", description))
        no_leak(target, caplog, token)


async def test_a_session_replayed_with_another_principals_token(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with protected(op) as target:
        alices = await op.token(target.url, SCOPE)
        bobs = await op.token(target.url, SCOPE, user=BOB)
        opened = await target.post(alices)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami"}}
        replay = await target.post(bobs, call, session=session)
        assert replay.status_code == 404
        assert replay.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Session not found"},
        }
        assert "www-authenticate" not in replay.headers
        assert target.ran == []
        # Alice's session is hers still.
        answer = await target.post(alices, call, session=session)
        assert answer.status_code == 200 and '"text":"alice"' in answer.text.replace(" ", "")
        assert list(target.app.sessions) == [session]
    no_leak(target, caplog, alices, bobs)


async def test_a_token_in_the_query_string(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        description = "an access token goes in the Authorization header, never in the URL"
        challenge = target.challenge("invalid_request", description, scope=False)
        # Alone, and beside a good header: both refused before anything is read.
        await target.refused(None, 400, challenge, query=f"?access_token={token}")
        await target.refused(token, 400, challenge, query=f"?access_token={token}")
    no_leak(target, caplog, token)


async def test_an_oversized_authorization_header(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    async with protected(op) as target:
        token = await op.token(target.url, SCOPE)
        padded = f"Bearer {token}{'A' * (8192 - len(token))}"
        description = "the Authorization header is over the limit of 8192 bytes"
        challenge = target.challenge("invalid_request", description, scope=False)
        await target.refused(None, 400, challenge, authorization=padded)
        # Far past it (beyond h11's 16 KiB head), hypercorn itself answers 431, before the app.
        huge = await target.post(None, authorization="Bearer " + token + "A" * 70_000)
        assert huge.status_code == 431
        assert target.ran == [] and target.app.sessions == {}
    no_leak(target, caplog, token)
