"""The HTTP app's authorization gate, through a real hypercorn trio worker on loopback.

``Server(auth=Auth(StaticTokenVerifier(...)))``: the Protected Resource Metadata at both
well-known URIs (RFC 9728), 401/400/403/503 with their exact challenges (RFC 6750 §3), every
scope an operation needs in one 403, a handshake-era session bound to the identity that opened
it, the principal of each request's own token on ``ctx.auth`` in every era, bearer-only mode,
no token anywhere in a log or a response, and the official Python SDK's client reaching a
protected server with its token in a header.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from trio_mcp import (
    Auth,
    Context,
    InvalidToken,
    Principal,
    Server,
    StaticTokenVerifier,
    VerifierUnavailable,
)
from trio_mcp.http import HostRules, HttpOptions
from trio_mcp.protocol._oauth import Challenge, parse_www_authenticate

from .._http import (
    GUARD,
    VERSION,
    Served,
    error_of,
    initialize_body,
    parse_sse,
    request_body,
    serving,
    serving_app,
)

ISSUER = "https://auth.example.com"
#: The public URL, as a proxy in front would serve it: not the loopback address of the test.
RESOURCE = "https://mcp.example.com/mcp"
PRM = "/.well-known/oauth-protected-resource"
PRM_URL = "https://mcp.example.com" + PRM + "/mcp"
MODERN = "2026-07-28"

ALICE = Principal(
    "alice", client_id="app-a", scopes=frozenset({"mcp:base", "mcp:admin"}), issuer=ISSUER
)
#: Alice again, by a refreshed token with fewer scopes: the same identity.
ALICE_NARROW = Principal("alice", client_id="app-a", scopes=frozenset({"mcp:base"}), issuer=ISSUER)
BOB = Principal("bob", client_id="app-b", scopes=frozenset({"mcp:base"}), issuer=ISSUER)
#: Holds none of the base scopes.
CAROL = Principal("carol", client_id="app-c", scopes=frozenset({"other"}), issuer=ISSUER)
EXPIRED = Principal("dave", scopes=frozenset({"mcp:base"}), issuer=ISSUER, expires_at=1.0)

ALICE_TOKEN = "alice-token-0123456789abcdef"
ALICE_REFRESHED = "alice-refreshed-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"
CAROL_TOKEN = "carol-token-0123456789abcdef"
EXPIRED_TOKEN = "expired-token-0123456789abcdef"
UNKNOWN_TOKEN = "unknown-token-0123456789abcdef"
TOKENS = {
    ALICE_TOKEN: ALICE,
    ALICE_REFRESHED: ALICE_NARROW,
    BOB_TOKEN: BOB,
    CAROL_TOKEN: CAROL,
    EXPIRED_TOKEN: EXPIRED,
}
EVERY_TOKEN = [*TOKENS, UNKNOWN_TOKEN]
ADMIN_SCOPES = "mcp:admin mcp:base mcp:write"


def protected(
    *,
    authorization_servers: tuple[str, ...] = (ISSUER,),
    resource: str = RESOURCE,
    required_scopes: str | None = "mcp:base",
    verifier: Any = None,
) -> tuple[Server, list[str]]:
    """A protected server: ``whoami`` (any token with the base scope) and ``admin`` (which
    needs ``mcp:admin`` and ``mcp:write``; ``mcp:admin`` implies ``mcp:write``). The list
    records every handler that ran."""
    ran: list[str] = []
    auth = Auth(
        verifier if verifier is not None else StaticTokenVerifier(TOKENS),
        resource,
        authorization_servers=authorization_servers,
        required_scopes=required_scopes,
        implied_scopes={"mcp:admin": ["mcp:write"]},
    )
    server = Server("protected", "1.0", auth=auth)

    @server.tool()
    async def whoami(ctx: Context) -> str:
        ran.append("whoami")
        assert ctx.auth is not None
        return f"{ctx.auth.subject} {' '.join(sorted(ctx.auth.scopes))}"

    @server.tool()
    async def admin() -> str:
        ran.append("admin")
        return "done"

    # The decorator's own argument is another part's; the entry is what the gate reads.
    server.tools["admin"].scopes = frozenset({"mcp:admin", "mcp:write"})
    return server, ran


def headers(
    token: str | None,
    session: str | None = None,
    *,
    version: str | None = VERSION,
    accept: str = "application/json, text/event-stream",
) -> dict[str, str]:
    out = {"accept": accept, "content-type": "application/json"}
    if token is not None:
        out["authorization"] = f"Bearer {token}"
    if session is not None:
        out["mcp-session-id"] = session
    if version is not None:
        out["mcp-protocol-version"] = version
    return out


async def post(
    served: Served, body: Any, token: str | None, session: str | None = None, **kw: Any
) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return await served.client.post(
        served.url, content=content, headers=headers(token, session, **kw)
    )


async def open_session(served: Served, token: str) -> str:
    response = await post(served, initialize_body(), token, version=None)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await post(served, note, token, session)).status_code == 202
    return session


def result_of(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    if response.headers["content-type"] == "application/json":
        return response.json()
    return [e.json() for e in parse_sse(response.text) if e.data][-1]


def call(rid: Any, name: str) -> dict[str, Any]:
    return request_body(rid, "tools/call", {"name": name, "arguments": {}})


def text_of(message: Any) -> str:
    text: str = message["result"]["content"][0]["text"]
    return text


def server_logs(caplog: pytest.LogCaptureFixture) -> str:
    """Every log line of the server side, tracebacks included (the test's own HTTP client
    logs the URLs it requests, a token in the query among them: not the server's doing)."""
    formatter = logging.Formatter("%(name)s %(message)s")
    return "\n".join(
        formatter.format(record)
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    )


def challenge_of(response: httpx.Response) -> Challenge:
    """The one Bearer challenge of a response."""
    [challenge] = parse_www_authenticate(response.headers.get_list("www-authenticate"))
    assert challenge.scheme == "bearer"
    return challenge


def modern_call(rid: Any, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = request_body(rid, "tools/call", {"name": name, "arguments": {}, "_meta": envelope})
    extra = {"mcp-method": "tools/call", "mcp-name": name}
    return body, extra


# -- the Protected Resource Metadata --------------------------------------------------------------


async def test_the_metadata_is_served_at_both_well_known_uris_without_a_token() -> None:
    server, _ = protected()
    async with serving(server) as served:
        assert served.app.metadata_paths == (PRM + "/mcp", PRM)
        expected = {
            "resource": RESOURCE,
            "authorization_servers": [ISSUER],
            # The base scope and every entry's, sorted.
            "scopes_supported": ["mcp:admin", "mcp:base", "mcp:write"],
            "bearer_methods_supported": ["header"],
        }
        for path in (PRM + "/mcp", PRM):
            response = await served.client.get(served.base + path)
            assert response.status_code == 200, response.text
            assert response.headers["content-type"] == "application/json"
            assert response.headers["cache-control"] == "max-age=300"
            assert "www-authenticate" not in response.headers
            assert response.json() == expected
            head = await served.client.head(served.base + path)
            assert head.status_code == 200
            assert head.content == b""
            assert head.headers["content-length"] == str(len(response.content))
            refused = await served.client.post(served.base + path, content=b"{}")
            assert refused.status_code == 405
            assert refused.headers["allow"] == "GET, HEAD, OPTIONS"
        # Computed per request: a tool registered later adds its scopes.
        server.tool(name="later")(lambda: "later")
        server.tools["later"].scopes = frozenset({"mcp:later"})
        response = await served.client.get(served.base + PRM + "/mcp")
        assert response.json()["scopes_supported"] == [
            "mcp:admin",
            "mcp:base",
            "mcp:later",
            "mcp:write",
        ]


async def test_the_metadata_follows_the_resource_path_not_the_app_path() -> None:
    # Behind a proxy: the public resource is /api/v1/mcp; the app serves /mcp.
    server, _ = protected(resource="https://mcp.example.com/api/v1/mcp")
    async with serving(server) as served:
        path_based = PRM + "/api/v1/mcp"
        assert served.app.metadata_paths == (path_based, PRM)
        for path in (path_based, PRM):
            response = await served.client.get(served.base + path)
            assert response.status_code == 200, path
            assert response.json()["resource"] == "https://mcp.example.com/api/v1/mcp"
        assert (await served.client.get(served.base + PRM + "/mcp")).status_code == 404
        unauthorized = await post(served, initialize_body(), None, version=None)
        assert challenge_of(unauthorized).resource_metadata == (
            "https://mcp.example.com" + path_based
        )


async def test_the_metadata_has_the_same_host_and_origin_checks_as_the_mcp_path() -> None:
    server, _ = protected()
    async with serving(
        server, HttpOptions(hosts=HostRules(cors_origins=["http://app.example"]))
    ) as served:
        url = served.base + PRM + "/mcp"
        rebound = await served.client.get(url, headers={"host": "evil.example"})
        assert rebound.status_code == 403
        assert "Host" in error_of(rebound)["message"]
        foreign = await served.client.get(url, headers={"origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert "Origin" in error_of(foreign)["message"]
        # A browser client of an allowed origin reads it, and may preflight it.
        allowed = await served.client.get(url, headers={"origin": "http://app.example"})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "http://app.example"
        preflight = await served.client.options(
            url,
            headers={"origin": "http://app.example", "access-control-request-method": "GET"},
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-methods"] == "GET, HEAD, OPTIONS"


async def test_a_host_app_routes_the_well_known_paths_to_a_mounted_app() -> None:
    """Starlette mounts the MCP app at ``/api`` and routes the metadata paths to it: the root
    one by an exact route, the path-based one by a mount above it (a ``root_path``)."""
    server, _ = protected(resource="https://mcp.example.com/api/mcp")
    mcp = server.http_app()
    assert mcp.metadata_paths == (PRM + "/api/mcp", PRM)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running():
            yield

    host = Starlette(
        routes=[Route(PRM, endpoint=mcp), Mount(PRM, app=mcp), Mount("/api", app=mcp)],
        lifespan=lifespan,
    )
    async with serving_app(host) as url, httpx.AsyncClient(timeout=GUARD) as http:
        base = url.removesuffix("/mcp")
        for path in (PRM + "/api/mcp", PRM):
            response = await http.get(base + path)
            assert response.status_code == 200, (path, response.text)
            assert response.json()["resource"] == "https://mcp.example.com/api/mcp"
        unauthorized = await http.post(
            base + "/api/mcp",
            content=orjson.dumps(initialize_body()),
            headers=headers(None, version=None),
        )
        assert unauthorized.status_code == 401
        assert challenge_of(unauthorized).resource_metadata == (
            "https://mcp.example.com" + PRM + "/api/mcp"
        )
        opened = await http.post(
            base + "/api/mcp",
            content=orjson.dumps(initialize_body()),
            headers=headers(ALICE_TOKEN, version=None),
        )
        assert opened.status_code == 200
        assert "mcp-session-id" in opened.headers


async def test_without_auth_there_is_no_metadata() -> None:
    server = Server("open")
    async with serving(server) as served:
        assert served.app.metadata_paths == ()
        assert (await served.client.get(served.base + PRM + "/mcp")).status_code == 404
        assert (await served.client.get(served.base + PRM)).status_code == 404


# -- 401: no token, or one that is refused --------------------------------------------------------


async def test_no_token_is_a_401_naming_the_metadata_and_the_base_scope() -> None:
    server, ran = protected()
    async with serving(server) as served:
        responses = [
            await post(served, initialize_body(), None, version=None),
            await post(served, call(1, "whoami"), None, "some-session"),
            await served.client.get(served.url, headers=headers(None, "some-session")),
            await served.client.delete(served.url, headers=headers(None, "some-session")),
            # Another scheme is no Bearer token at all; so is a bare "Bearer".
            await served.client.post(
                served.url,
                content=orjson.dumps(initialize_body()),
                headers={**headers(None), "authorization": "Basic dXNlcjpwYXNz"},
            ),
            await served.client.post(
                served.url,
                content=orjson.dumps(initialize_body()),
                headers={**headers(None), "authorization": "Bearer"},
            ),
        ]
        for response in responses:
            assert response.status_code == 401, response.text
            challenge = challenge_of(response)
            # RFC 6750 §3.1: no error code when the request carried no credential.
            assert challenge.params == {"scope": "mcp:base", "resource_metadata": PRM_URL}
            error = error_of(response)
            assert error["code"] == -32600
            assert error["message"].startswith("Unauthorized: ")
            assert response.json()["id"] is None  # refused before the body was read
        assert ran == []
        assert served.app.sessions == {}


async def test_without_base_scopes_a_401_names_every_supported_scope() -> None:
    server, _ = protected(required_scopes=None)
    async with serving(server) as served:
        response = await post(served, initialize_body(), None, version=None)
        assert response.status_code == 401
        assert challenge_of(response).scope == "mcp:admin mcp:write"


@pytest.mark.parametrize(
    ("token", "description"),
    [(UNKNOWN_TOKEN, "unknown access token"), (EXPIRED_TOKEN, "the access token expired")],
)
async def test_a_refused_token_is_a_401_invalid_token(token: str, description: str) -> None:
    server, ran = protected()
    async with serving(server) as served:
        response = await post(served, initialize_body(), token, version=None)
        assert response.status_code == 401
        assert challenge_of(response).params == {
            "error": "invalid_token",
            "error_description": description,
            "scope": "mcp:base",
            "resource_metadata": PRM_URL,
        }
        assert error_of(response)["message"] == "Unauthorized: " + description
        assert token not in response.text
        assert token not in str(response.headers)
        assert ran == [] and served.app.sessions == {}


# -- 400: a malformed credential, a token in the URL ---------------------------------------------


async def test_a_token_in_the_query_string_is_refused_even_with_a_good_header() -> None:
    server, ran = protected()
    async with serving(server) as served:
        for query in (f"access_token={ALICE_TOKEN}", f"x=1&access%5Ftoken={ALICE_TOKEN}"):
            response = await served.client.post(
                served.url + "?" + query,
                content=orjson.dumps(initialize_body()),
                headers=headers(ALICE_TOKEN, version=None),
            )
            assert response.status_code == 400, response.text
            challenge = challenge_of(response)
            assert challenge.error == "invalid_request"
            assert challenge.resource_metadata == PRM_URL
            assert "URL" in challenge.params["error_description"]
            assert ALICE_TOKEN not in response.text
        assert ran == [] and served.app.sessions == {}


async def test_a_malformed_credential_is_a_400_invalid_request() -> None:
    server, _ = protected()
    async with serving(server) as served:
        body = orjson.dumps(initialize_body())
        base = [(k, v) for k, v in headers(None, version=None).items()]
        cases = {
            "more than one": [
                *base,
                ("authorization", f"Bearer {ALICE_TOKEN}"),
                ("authorization", f"Bearer {BOB_TOKEN}"),
            ],
            "over the limit": [*base, ("authorization", "Bearer " + "A" * 9000)],
            "not a token": [*base, ("authorization", f"Bearer {ALICE_TOKEN}, Bearer x")],
        }
        for fragment, sent in cases.items():
            response = await served.client.post(served.url, content=body, headers=sent)
            assert response.status_code == 400, (fragment, response.text)
            challenge = challenge_of(response)
            assert challenge.error == "invalid_request"
            assert fragment in challenge.params["error_description"]
            assert fragment in error_of(response)["message"]
            assert ALICE_TOKEN not in response.text and BOB_TOKEN not in response.text
            assert "AAAAAAAA" not in response.text
        assert served.app.sessions == {}


# -- 503 and 500: the verifier ---------------------------------------------------------------------


class Unavailable:
    async def verify(self, token: str) -> Principal:
        raise VerifierUnavailable("the authorization server's keys cannot be fetched")


class Broken:
    """A verifier with a bug whose message quotes the token, as a parser's often does."""

    async def verify(self, token: str) -> Principal:
        raise ValueError(f"cannot parse {token!r}")


async def test_an_unavailable_verifier_is_a_503_without_a_challenge() -> None:
    server, _ = protected(verifier=Unavailable())
    async with serving(server) as served:
        response = await post(served, initialize_body(), ALICE_TOKEN, version=None)
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert "www-authenticate" not in response.headers
        assert error_of(response)["message"].startswith("Service Unavailable")


async def test_a_broken_verifier_is_a_500_and_its_message_is_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server, _ = protected(verifier=Broken())
    async with serving(server) as served:
        response = await post(served, initialize_body(), ALICE_TOKEN, version=None)
        assert response.status_code == 500
        assert error_of(response) == {"code": -32603, "message": "Internal error"}
    logs = server_logs(caplog)
    assert "ValueError" in logs  # the fault is told, without its message
    assert ALICE_TOKEN not in logs
    assert ALICE_TOKEN not in response.text


# -- 403: scopes, before the engine ---------------------------------------------------------------


async def test_a_tool_needing_more_scopes_is_a_403_naming_all_of_them() -> None:
    server, ran = protected()
    async with serving(server) as served:
        session = await open_session(served, BOB_TOKEN)
        response = await post(served, call(7, "admin"), BOB_TOKEN, session)
        assert response.status_code == 403
        assert challenge_of(response).params == {
            "error": "insufficient_scope",
            "error_description": f"this request needs the scopes: {ADMIN_SCOPES}",
            # Every scope it needs, the base one too, in one challenge.
            "scope": ADMIN_SCOPES,
            "resource_metadata": PRM_URL,
        }
        assert response.json()["id"] == 7
        assert error_of(response)["message"].startswith("Forbidden: insufficient scope")
        assert ran == []
        # Bob may still do what his scopes allow, on the same session.
        assert text_of(result_of(await post(served, call(8, "whoami"), BOB_TOKEN, session)))
        # mcp:admin implies mcp:write: Alice holds all three.
        alice = await open_session(served, ALICE_TOKEN)
        answer = result_of(await post(served, call(9, "admin"), ALICE_TOKEN, alice))
        assert text_of(answer) == "done"
        assert ran == ["whoami", "admin"]


async def test_the_scopes_are_checked_in_the_modern_era_too() -> None:
    server, ran = protected()
    async with serving(server) as served:
        body, extra = modern_call(3, "admin")
        response = await served.client.post(
            served.url,
            content=orjson.dumps(body),
            headers={**headers(BOB_TOKEN, version=MODERN), **extra},
        )
        assert response.status_code == 403
        assert challenge_of(response).scope == ADMIN_SCOPES
        assert response.json()["id"] == 3
        assert ran == []


async def test_a_token_without_the_base_scope_is_a_403_on_every_method() -> None:
    server, ran = protected()
    async with serving(server) as served:
        alice = await open_session(served, ALICE_TOKEN)
        responses = [
            await post(served, initialize_body(), CAROL_TOKEN, version=None),
            await served.client.get(
                served.url, headers=headers(CAROL_TOKEN, alice, accept="text/event-stream")
            ),
            await served.client.delete(served.url, headers=headers(CAROL_TOKEN, alice)),
        ]
        for response in responses:
            assert response.status_code == 403, response.text
            assert challenge_of(response).params == {
                "error": "insufficient_scope",
                "error_description": "this request needs the scopes: mcp:base",
                "scope": "mcp:base",
                "resource_metadata": PRM_URL,
            }
        assert list(served.app.sessions) == [alice]
        assert ran == []


# -- sessions are bound to the identity that opened them -----------------------------------------


async def test_a_session_replayed_with_another_principal_is_not_found() -> None:
    server, ran = protected()
    async with serving(server) as served:
        alice = await open_session(served, ALICE_TOKEN)
        unknown = "0" * 32
        # Bob knows Alice's session id: to him it is exactly an unknown one.
        for session in (alice, unknown):
            replay = await post(served, call(1, "whoami"), BOB_TOKEN, session)
            assert replay.status_code == 404
            assert replay.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Session not found"},
            }
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await post(served, note, BOB_TOKEN, session)).status_code == 404
            get = await served.client.get(
                served.url, headers=headers(BOB_TOKEN, session, accept="text/event-stream")
            )
            assert get.status_code == 404
            assert get.json() == replay.json()
            delete = await served.client.delete(served.url, headers=headers(BOB_TOKEN, session))
            assert delete.status_code == 404
            assert delete.json() == replay.json()
        assert ran == []
        # Nor does a modern header route a foreign session any differently from an unknown one.
        body, extra = modern_call(2, "whoami")
        routed = []
        for session in (alice, unknown):
            response = await served.client.post(
                served.url,
                content=orjson.dumps(body),
                headers={**headers(BOB_TOKEN, session, version=MODERN), **extra},
            )
            routed.append((response.status_code, response.json()))
        assert routed[0] == routed[1]
        # Alice's session is untouched, and her refreshed token keeps working on it.
        assert list(served.app.sessions) == [alice]
        answer = result_of(await post(served, call(3, "whoami"), ALICE_REFRESHED, alice))
        assert text_of(answer) == "alice mcp:base"
        delete = await served.client.delete(served.url, headers=headers(ALICE_REFRESHED, alice))
        assert delete.status_code == 200
        assert served.app.sessions == {}


# -- ctx.auth: the principal of each request's own token -----------------------------------------


async def test_ctx_auth_on_a_handshake_session_is_each_requests_own() -> None:
    server, _ = protected()
    async with serving(server) as served:
        session = await open_session(served, ALICE_TOKEN)
        first = result_of(await post(served, call(1, "whoami"), ALICE_TOKEN, session))
        assert text_of(first) == "alice mcp:admin mcp:base"
        # The same identity with a narrower token: the request sees the token it carried.
        second = result_of(await post(served, call(2, "whoami"), ALICE_REFRESHED, session))
        assert text_of(second) == "alice mcp:base"


async def test_ctx_auth_in_stateless_mode() -> None:
    server, _ = protected()
    async with serving(server, HttpOptions(stateless=True, json_response=True)) as served:
        response = await post(served, call(1, "whoami"), BOB_TOKEN)
        assert text_of(result_of(response)) == "bob mcp:base"
        response = await post(served, call(2, "whoami"), ALICE_TOKEN)
        assert text_of(result_of(response)) == "alice mcp:admin mcp:base"


async def test_ctx_auth_in_the_modern_era() -> None:
    server, _ = protected()
    async with serving(server) as served:
        body, extra = modern_call(1, "whoami")
        response = await served.client.post(
            served.url,
            content=orjson.dumps(body),
            headers={**headers(BOB_TOKEN, version=MODERN), **extra},
        )
        assert text_of(result_of(response)) == "bob mcp:base"


# -- bearer-only mode -----------------------------------------------------------------------------


async def test_bearer_only_mode_publishes_nothing_and_names_no_metadata() -> None:
    server, _ = protected(authorization_servers=())
    async with serving(server) as served:
        assert served.app.metadata_paths == ()
        assert (await served.client.get(served.base + PRM + "/mcp")).status_code == 404
        assert (await served.client.get(served.base + PRM)).status_code == 404
        missing = await post(served, initialize_body(), None, version=None)
        assert missing.status_code == 401
        assert challenge_of(missing).params == {"scope": "mcp:base"}
        invalid = await post(served, initialize_body(), UNKNOWN_TOKEN, version=None)
        assert "resource_metadata" not in challenge_of(invalid).params
        session = await open_session(served, BOB_TOKEN)
        forbidden = await post(served, call(1, "admin"), BOB_TOKEN, session)
        assert forbidden.status_code == 403
        assert challenge_of(forbidden).params == {
            "error": "insufficient_scope",
            "error_description": f"this request needs the scopes: {ADMIN_SCOPES}",
            "scope": ADMIN_SCOPES,
        }


# -- CORS ------------------------------------------------------------------------------------------


async def test_a_browser_client_can_read_the_challenge() -> None:
    server, _ = protected()
    async with serving(
        server, HttpOptions(hosts=HostRules(cors_origins=["http://app.example"]))
    ) as served:
        # A preflight carries no credential and needs none.
        preflight = await served.client.options(
            served.url,
            headers={
                "origin": "http://app.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 204
        allowed = {h.strip() for h in preflight.headers["access-control-allow-headers"].split(",")}
        assert "authorization" in allowed
        response = await served.client.post(
            served.url,
            content=orjson.dumps(initialize_body()),
            headers={**headers(None, version=None), "origin": "http://app.example"},
        )
        assert response.status_code == 401
        exposed = {h.strip() for h in response.headers["access-control-expose-headers"].split(",")}
        assert "www-authenticate" in exposed


# -- no token anywhere -----------------------------------------------------------------------------


class Leaky:
    """A careless verifier whose every refusal quotes the token; the static tokens otherwise."""

    def __init__(self) -> None:
        self.static = StaticTokenVerifier(TOKENS)

    async def verify(self, token: str) -> Principal:
        if token == LEAKY_INVALID:
            raise InvalidToken(f"the token {token} is revoked")
        if token == LEAKY_UNAVAILABLE:
            raise VerifierUnavailable(f"cannot reach the introspection endpoint for {token}")
        if token == LEAKY_BROKEN:
            raise KeyError(token)
        return await self.static.verify(token)


LEAKY_INVALID = "leaky-invalid-0123456789abcdef"
LEAKY_UNAVAILABLE = "leaky-unavailable-0123456789abcdef"
LEAKY_BROKEN = "leaky-broken-0123456789abcdef"


async def test_no_token_reaches_a_log_line_or_a_response(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server, _ = protected(verifier=Leaky())
    seen: list[str] = []
    async with serving(server) as served:
        alice = await open_session(served, ALICE_TOKEN)
        leaked = await post(served, call(8, "whoami"), LEAKY_INVALID, alice)
        assert leaked.status_code == 401
        # The verifier's words quoted the token: they are not used.
        assert challenge_of(leaked).params["error_description"] == "the access token is not valid"
        exchanges = [
            leaked,
            await post(served, call(9, "whoami"), LEAKY_UNAVAILABLE, alice),
            await post(served, call(10, "whoami"), LEAKY_BROKEN, alice),
            await post(served, call(1, "whoami"), ALICE_TOKEN, alice),
            await post(served, call(2, "admin"), BOB_TOKEN, alice),
            await post(served, call(3, "admin"), CAROL_TOKEN, alice),
            await post(served, call(4, "whoami"), UNKNOWN_TOKEN, alice),
            await post(served, call(5, "whoami"), EXPIRED_TOKEN, alice),
            await post(served, b"not json", ALICE_TOKEN, alice),
            await post(served, request_body(6, "no/such/method"), ALICE_TOKEN, alice),
            await served.client.post(
                served.url + f"?access_token={BOB_TOKEN}",
                content=orjson.dumps(call(7, "whoami")),
                headers=headers(BOB_TOKEN, alice),
            ),
        ]
        assert [response.status_code for response in exchanges[:3]] == [401, 503, 500]
        for response in exchanges:
            seen.append(response.text)
            seen.append(str(response.headers))
    logs = server_logs(caplog)
    # The server did log the verifier's troubles, without their words.
    assert "could not be verified now" in logs and "KeyError" in logs
    for token in [*EVERY_TOKEN, LEAKY_INVALID, LEAKY_UNAVAILABLE, LEAKY_BROKEN]:
        assert token not in logs
        for text in seen:
            assert token not in text


# -- the official Python SDK's client --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_python_client_reaches_a_protected_server(mode: str) -> None:
    server, _ = protected()
    async with serving(server) as served:
        auth = {"authorization": f"Bearer {ALICE_TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=auth, timeout=30) as http,
            Client(streamable_http_client(served.url, http_client=http), mode=mode) as client,
        ):
            tools = await client.list_tools()
            assert sorted(tool.name for tool in tools.tools) == ["admin", "whoami"]
            result = await client.call_tool("whoami", {})
            assert result.content[0].text == "alice mcp:admin mcp:base"  # type: ignore[union-attr]
        # Without the header it is refused before anything is served.
        async with httpx2.AsyncClient(timeout=30) as bare:
            response = await bare.post(
                served.url, content=orjson.dumps(initialize_body()), headers=headers(None)
            )
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer ")
