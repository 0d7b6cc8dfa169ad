"""OAuth end to end against our protected demo: the official clients and ours sign in and call.

Every part is real and on 127.0.0.1: oidc-provider (``tests/auth/_oidc.py``), and trio_mcp's
demo served protected by the CLI in a child process, as a user would run it::

    trio-mcp demo --transport http --port 0 --auth-issuer ISSUER --auth-scope mcp:tools

so its tokens are JWTs checked against the provider's keys, issued for the demo's URL (the
default ``--public-url``). Each client starts from nothing but that URL: the 401, our Protected
Resource Metadata naming the provider, the provider's metadata, dynamic registration (or the
pre-registered client), PKCE, the browser step (``drive_login`` signs in as alice), the token
for our resource, the tool call. The demo's ``whoami`` answers with the token's subject, and
its ``admin`` tool needs ``mcp:admin`` of its own: a token without it gets a 403
``insufficient_scope`` naming every scope the call needs, and the client authorizes again.

- the official Python SDK (``py_oauth_client.py``, its ``OAuthClientProvider``, on asyncio);
- the official TypeScript SDK (``ts_oauth_client.mjs``, its ``OAuthClientProvider``);
- trio_mcp's own client (``OAuth(on_authorize=drive_login)``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import trio

from trio_mcp import HttpTarget, MemoryTokenStore, OAuth, TextContent, open_client
from trio_mcp.protocol._oauth import parse_www_authenticate

from ..auth._oidc import USERNAME, OidcProvider, drive_login, oidc_provider
from ._http_support import ServerProcess, start_server
from ._oauth_support import run_oauth_driver
from ._support import HERE, node

#: A hang guard, never a performance assertion: a whole flow takes a few seconds.
GUARD = 90
REQUIRED = "mcp:tools"
ADMIN = "mcp:admin"
WHOAMI = f"{USERNAME} (client "
#: What a caller with the required scope only may see.
SIGNED_IN_TOOLS = ["add", "echo", "sleep", "whoami"]
AS_ADMIN = f"{USERNAME} is signed in as an administrator"


def demo_command(issuer: str) -> list[str]:
    served = ["demo", "--transport", "http", "--port", "0"]
    return [
        sys.executable,
        "-m",
        "trio_mcp",
        *served,
        "--auth-issuer",
        issuer,
        "--auth-scope",
        REQUIRED,
    ]


@pytest.fixture
async def op() -> AsyncIterator[OidcProvider]:
    async with oidc_provider() as provider:
        yield provider


@pytest.fixture
async def demo(op: OidcProvider, nursery: trio.Nursery) -> AsyncIterator[ServerProcess]:
    with trio.fail_after(GUARD):
        server = await start_server(nursery, demo_command(op.issuer))
    yield server
    with trio.CancelScope(shield=True), trio.move_on_after(10):
        assert await server.stop() == 0, "\n".join(server.lines)
    # Tokens never reach a log line: no JWT (they all start "eyJ", a JSON header in base64).
    assert not [line for line in server.lines if "eyJ" in line], server.lines


def query(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def scopes_asked(authorization_url: str) -> set[str]:
    return set(query(authorization_url).get("scope", "").split())


async def test_our_protected_demo_says_where_to_sign_in(
    op: OidcProvider, demo: ServerProcess
) -> None:
    """What every client below starts from: the 401 and our metadata, naming the provider."""
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(timeout=10) as http:
            refused = await http.post(demo.url, json={})
            (challenge,) = parse_www_authenticate(refused.headers.get_list("www-authenticate"))
            metadata = await http.get(challenge.params["resource_metadata"])
    assert refused.status_code == 401
    assert challenge.scheme == "bearer"
    assert challenge.params["scope"] == REQUIRED
    assert metadata.status_code == 200
    document = metadata.json()
    assert document["resource"] == demo.url
    assert document["authorization_servers"] == [op.issuer]
    assert document["scopes_supported"] == [ADMIN, REQUIRED]


def check_sign_ins(authorizations: list[str], resource: str, *, step_up: bool) -> None:
    """The first sign-in asks for the scope our 401 named; after the admin tool's 403, the
    second asks for the union of that and the admin scope. Each is for our resource (RFC 8707),
    with PKCE S256."""
    assert len(authorizations) == (2 if step_up else 1), authorizations
    first, *later = (scopes_asked(url) for url in authorizations)
    assert REQUIRED in first and ADMIN not in first, first
    for scopes in later:
        assert {REQUIRED, ADMIN} <= scopes, scopes
    for url in authorizations:
        assert query(url)["resource"] == resource
        assert query(url)["code_challenge_method"] == "S256"


def check_report(report: dict[str, Any], *, step_up: bool) -> None:
    """whoami names alice; the admin tool, listed only to a caller who may use it, answers
    once the client has stepped up."""
    assert report["tools"] == SIGNED_IN_TOOLS
    assert report["calls"]["whoami"]["isError"] is False
    assert report["calls"]["whoami"]["text"].startswith(WHOAMI)
    if step_up:
        assert report["calls"]["admin"] == {"text": AS_ADMIN, "isError": False}
        assert report["tools_after"] == sorted([*SIGNED_IN_TOOLS, "admin"])
    else:
        assert report["tools_after"] == SIGNED_IN_TOOLS


#: How an official client gets its client id: dynamic registration, which ends with the
#: whoami call (these SDKs register for the scope of their first sign-in, and oidc-provider
#: holds a client to its registered scope, so no step-up is possible), or the pre-registered
#: client, which then steps up for the admin tool.
REGISTRATIONS = ["dynamic", "pre-registered"]


def driver_options(op: OidcProvider, registration: str) -> tuple[list[str], dict[str, str]]:
    """The driver's arguments after the URL, and its environment (the secret is never in
    argv)."""
    if registration == "dynamic":
        return ["whoami"], dict(os.environ)
    env = {**os.environ, "OAUTH_CLIENT_SECRET": op.client_secret}
    return ["--client-id", op.client_id, "whoami", "admin"], env


@pytest.mark.parametrize("registration", REGISTRATIONS)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_python_client_signs_in_to_our_demo(
    op: OidcProvider, demo: ServerProcess, tmp_path: Path, mode: str, registration: str
) -> None:
    options, env = driver_options(op, registration)
    command = [sys.executable, "-m", "tests.interop.py_oauth_client", mode, demo.url, *options]
    with trio.fail_after(GUARD):
        report, authorizations = await run_oauth_driver(command, tmp_path / "client.err", env=env)
    step_up = registration == "pre-registered"
    check_report(report, step_up=step_up)
    check_sign_ins(authorizations, demo.url, step_up=step_up)
    if step_up:
        assert {query(url)["client_id"] for url in authorizations} == {op.client_id}


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_the_official_typescript_client_signs_in_to_our_demo(
    op: OidcProvider, demo: ServerProcess, tmp_path: Path, registration: str
) -> None:
    options, env = driver_options(op, registration)
    command = [node(), str(HERE / "ts_oauth_client.mjs"), demo.url, *options]
    with trio.fail_after(GUARD):
        report, authorizations = await run_oauth_driver(command, tmp_path / "client.err", env=env)
    step_up = registration == "pre-registered"
    check_report(report, step_up=step_up)
    check_sign_ins(authorizations, demo.url, step_up=step_up)
    if step_up:
        assert {query(url)["client_id"] for url in authorizations} == {op.client_id}


def call_text(result: object) -> str:
    content = getattr(result, "content", [])
    assert len(content) == 1 and isinstance(content[0], TextContent), result
    return content[0].text


@pytest.mark.parametrize("registration", ["dynamic", "pre-registered"])
async def test_our_client_signs_in_to_our_demo_and_steps_up(
    op: OidcProvider, demo: ServerProcess, registration: str
) -> None:
    authorizations: list[str] = []

    async def sign_in(url: str) -> str:
        authorizations.append(url)
        return await drive_login(url)

    store = MemoryTokenStore()
    if registration == "pre-registered":
        auth = OAuth(
            store=store,
            on_authorize=sign_in,
            client_id=op.client_id,
            client_secret=op.client_secret,
        )
    else:
        auth = OAuth(store=store, on_authorize=sign_in)
    with trio.fail_after(GUARD):
        async with open_client(HttpTarget(demo.url, auth=auth)) as client:
            assert sorted(tool.name for tool in await client.list_tools()) == SIGNED_IN_TOOLS
            whoami = await client.call_tool("whoami", {})
            assert len(authorizations) == 1
            admin = await client.call_tool("admin", {})
            listed = sorted(tool.name for tool in await client.list_tools())
    assert listed == sorted([*SIGNED_IN_TOOLS, "admin"])
    assert not whoami.is_error and call_text(whoami).startswith(WHOAMI)
    assert not admin.is_error and call_text(admin) == AS_ADMIN
    check_sign_ins(authorizations, demo.url, step_up=True)
    client_ids = {query(url)["client_id"] for url in authorizations}
    if registration == "pre-registered":
        assert client_ids == {op.client_id}
        assert await store.get_client(op.issuer) is None
    else:
        registered = await store.get_client(op.issuer)
        assert registered is not None and client_ids == {registered.client_id} != {op.client_id}
