"""Per-entry scopes and the principal inside the connection: ``scopes=`` on the decorators,
lists filtered per principal (before paging), refusals before any handler runs (the check for
transports that cannot answer 403, and the second line behind HTTP), requestState bound to the
principal, private cache hints, and stdio credentials from the environment.

In memory, ``serve_transport(principal=...)`` sets who a connection acts for (what
``serve_stdio`` does with the environment's token); the stdio tests run a real child process.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp import (
    Auth,
    InvalidToken,
    Principal,
    ProtocolError,
    RequestRecord,
    Server,
    VerifierUnavailable,
    open_client,
)
from trio_mcp.testing import stdio_client
from trio_mcp.transports import Transport, memory_transport_pair

from .._raw_stdio import ROOT, SERVERS, raw_child
from ..servers.scoped_server import (
    ADMIN,
    ALICE,
    BOB,
    FORM,
    NOBODY,
    TOKENS,
    scoped_server,
    static_auth,
)
from ..wire import WirePeer

SCOPED = [sys.executable, str(SERVERS / "scoped_server.py")]
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
FORBIDDEN = -32600


def meta() -> dict[str, Any]:
    return {VERSION_KEY: "2026-07-28", CAPS_KEY: {"elicitation": {}}}


@asynccontextmanager
async def connected(
    server: Server, principal: Principal | None, *, initialize: bool = True
) -> AsyncIterator[WirePeer]:
    """A raw peer on an in-memory connection that acts for ``principal``."""
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(server.serve_transport, theirs, principal=principal))
        peer = WirePeer(ours)
        if initialize:
            response = await peer.initialize()
            assert "result" in response, response
        yield peer
        ours.close()
        nursery.cancel_scope.cancel()


class ServedAs:
    """A server served in memory for one principal, as a target of ``open_client``."""

    def __init__(self, server: Server, principal: Principal) -> None:
        self.server = server
        self.principal = principal

    async def serve_transport(
        self, transport: Transport, /, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        await self.server.serve_transport(
            transport, principal=self.principal, task_status=task_status
        )


async def pages(
    peer: WirePeer, method: str, key: str, field: str, *, modern: bool = False
) -> list[list[str]]:
    """Every page of a list, as the names (``field``) on each."""
    found: list[list[str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
        if modern:
            params["_meta"] = meta()
        response = await peer.request(f"{method}-{len(found)}", method, params)
        assert "result" in response, response
        found.append([item[field] for item in response["result"][key]])
        cursor = response["result"].get("nextCursor")
        if cursor is None:
            return found


def refused(response: dict[str, Any]) -> dict[str, Any]:
    assert "error" in response, response
    error: dict[str, Any] = response["error"]
    assert error["code"] == FORBIDDEN, error
    return error


# -- registration --------------------------------------------------------------------------------


def test_every_decorator_takes_scopes_and_stores_them_on_its_entry() -> None:
    server = scoped_server()
    assert server.tools["hello"].scopes == frozenset()
    assert server.tools["whoami"].scopes == {"mcp:tools"}
    assert server.tools["deploy"].scopes == {"mcp:admin"}
    # One space-separated string, as in a token's scope claim.
    assert server.tools["purge"].scopes == {"mcp:admin", "files:write"}
    assert server.prompts["secret_prompt"].scopes == {"mcp:admin"}
    assert server.resources["file:///private"].scopes == {"files:read"}
    assert server.templates["file:///docs/{name}"].scopes == {"files:read"}
    assert server.templates["file:///notes/{name}"].scopes == frozenset()


@pytest.mark.parametrize("bad", ['mcp:"quoted"', ["mcp:tools", ""], "back\\slash", ["tab\tbed"]])
def test_scopes_that_are_not_scopes_fail_at_registration(bad: Any) -> None:
    server = Server("bad")
    with pytest.raises(ValueError, match="is not a scope"):
        server.tool(scopes=bad)
    with pytest.raises(ValueError, match="is not a scope"):
        server.prompt(scopes=bad)
    with pytest.raises(ValueError, match="is not a scope"):
        server.resource("file:///x", scopes=bad)
    assert not server.tools and not server.prompts and not server.resources


# -- lists -----------------------------------------------------------------------------------------


async def test_lists_show_what_the_principal_may_use_page_by_page() -> None:
    server = scoped_server(page_size=2)
    async with connected(server, ALICE) as peer:
        # Filtered before paging: two full pages would otherwise end in an empty third.
        assert await pages(peer, "tools/list", "tools", "name") == [
            ["hello", "whoami"],
            ["greet"],
        ]
        assert await pages(peer, "prompts/list", "prompts", "name") == [["open_prompt"]]
        assert await pages(peer, "resources/list", "resources", "uri") == [["file:///public"]]
        templates = await pages(
            peer, "resources/templates/list", "resourceTemplates", "uriTemplate"
        )
        assert templates == [["file:///notes/{name}"]]
    async with connected(server, NOBODY) as peer:
        assert await pages(peer, "tools/list", "tools", "name") == [["hello"]]


async def test_implied_scopes_count_in_lists() -> None:
    async with connected(scoped_server(page_size=2), ADMIN) as peer:
        # mcp:admin implies mcp:tools and files:read; purge also needs files:write.
        assert await pages(peer, "tools/list", "tools", "name") == [
            ["hello", "whoami"],
            ["greet", "deploy"],
        ]
        assert await pages(peer, "prompts/list", "prompts", "name") == [
            ["open_prompt", "secret_prompt"]
        ]
        assert await pages(peer, "resources/list", "resources", "uri") == [
            ["file:///public", "file:///private"]
        ]
        assert await pages(
            peer, "resources/templates/list", "resourceTemplates", "uriTemplate"
        ) == [["file:///docs/{name}", "file:///notes/{name}"]]


async def test_modern_lists_are_filtered_too() -> None:
    async with connected(scoped_server(page_size=None), ALICE, initialize=False) as peer:
        assert await pages(peer, "tools/list", "tools", "name", modern=True) == [
            ["hello", "whoami", "greet"]
        ]


async def test_without_auth_scopes_change_nothing() -> None:
    calls: list[str] = []
    async with connected(scoped_server(protected=False, calls=calls), None) as peer:
        assert await pages(peer, "tools/list", "tools", "name") == [
            ["hello", "whoami"],
            ["greet", "deploy"],
            ["purge"],
        ]
        response = await peer.request(1, "tools/call", {"name": "purge"})
        assert response["result"]["content"][0]["text"] == "purged"
    assert calls == ["purge"]


# -- the check inside the connection -----------------------------------------------------------


async def test_a_request_lacking_scopes_is_refused_naming_them_and_its_handler_never_runs() -> None:
    calls: list[str] = []
    async with connected(scoped_server(calls=calls), ALICE) as peer:
        error = refused(await peer.request(1, "tools/call", {"name": "deploy"}))
        assert error["message"] == (
            "Forbidden: tools/call needs the scope mcp:admin, which the access token does not grant"
        )
        assert error["data"] == {"error": "insufficient_scope", "scope": "mcp:admin"}

        error = refused(await peer.request(2, "tools/call", {"name": "purge"}))
        assert "the scopes files:write mcp:admin" in error["message"]
        assert error["data"]["scope"] == "files:write mcp:admin"

        others: list[tuple[str, dict[str, Any], str]] = [
            ("prompts/get", {"name": "secret_prompt", "arguments": {"topic": "x"}}, "mcp:admin"),
            ("resources/read", {"uri": "file:///private"}, "files:read"),
            ("resources/read", {"uri": "file:///docs/plan"}, "files:read"),
            ("resources/subscribe", {"uri": "file:///private"}, "files:read"),
            (
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": "secret_prompt"},
                    "argument": {"name": "topic", "value": ""},
                },
                "mcp:admin",
            ),
            (
                "completion/complete",
                {
                    "ref": {"type": "ref/resource", "uri": "file:///docs/{name}"},
                    "argument": {"name": "name", "value": ""},
                },
                "files:read",
            ),
        ]
        for rid, (method, params, scope) in enumerate(others, start=3):
            error = refused(await peer.request(rid, method, params))
            assert scope in error["message"], (method, error)
            assert error["data"] == {"error": "insufficient_scope", "scope": scope}

        # What Alice may use still works on the same connection.
        allowed = await peer.request(20, "tools/call", {"name": "whoami"})
        assert allowed["result"]["content"][0]["text"] == "alice mcp:tools"
        note = await peer.request(21, "resources/read", {"uri": "file:///notes/n"})
        assert note["result"]["contents"][0]["text"] == "note n"
    assert calls == ["whoami", "note"]


async def test_the_instrumentation_hook_is_told_of_each_refusal() -> None:
    records: list[RequestRecord] = []
    server = scoped_server(on_request=records.append)
    async with connected(server, ALICE) as peer:
        refused(await peer.request(1, "tools/call", {"name": "deploy"}))
        assert "result" in await peer.request(2, "tools/call", {"name": "hello"})
    calls = [(r.method, r.name, r.error_code) for r in records if r.method == "tools/call"]
    assert calls == [("tools/call", "deploy", FORBIDDEN), ("tools/call", "hello", None)]


async def test_modern_requests_are_refused_the_same_way() -> None:
    calls: list[str] = []
    async with connected(scoped_server(calls=calls), ALICE, initialize=False) as peer:
        error = refused(await peer.request(1, "tools/call", {"name": "deploy", "_meta": meta()}))
        assert error["data"] == {"error": "insufficient_scope", "scope": "mcp:admin"}
    assert calls == []


async def test_implied_scopes_count_for_calls() -> None:
    calls: list[str] = []
    async with connected(scoped_server(calls=calls), ADMIN) as peer:
        for rid, name in enumerate(["whoami", "deploy"]):
            assert "result" in await peer.request(rid, "tools/call", {"name": name})
        read = await peer.request(5, "resources/read", {"uri": "file:///docs/plan"})
        assert read["result"]["contents"][0]["text"] == "doc plan"
        # Implied scopes do not reach what nothing implies.
        error = refused(await peer.request(6, "tools/call", {"name": "purge"}))
        assert error["message"].startswith("Forbidden: tools/call needs the scope files:write,")
        assert error["data"]["scope"] == "files:write mcp:admin"
    assert calls == ["whoami", "deploy", "doc"]


async def test_required_scopes_are_needed_by_every_request_and_named_with_the_entrys() -> None:
    calls: list[str] = []
    server = scoped_server(auth=static_auth(required_scopes="mcp:use"), calls=calls)
    user = Principal("carol", "client-5", frozenset({"mcp:use", "mcp:tools"}))
    async with connected(server, ALICE) as peer:
        error = refused(await peer.request(1, "tools/list"))
        assert "mcp:use" in error["message"]
        assert error["data"] == {"error": "insufficient_scope", "scope": "mcp:use"}
        assert "result" in await peer.request(2, "ping")
    async with connected(server, user) as peer:
        assert "result" in await peer.request(1, "tools/call", {"name": "whoami"})
        error = refused(await peer.request(2, "tools/call", {"name": "deploy"}))
        assert "the scope mcp:admin," in error["message"]
        # Every scope the call needs, in one challenge.
        assert error["data"]["scope"] == "mcp:admin mcp:use"
    assert calls == ["whoami"]


async def test_without_a_principal_only_the_handshake_ping_and_discover_are_answered() -> None:
    calls: list[str] = []
    server = scoped_server(calls=calls)
    async with connected(server, None) as peer:  # initialize is answered
        assert await peer.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        for rid, (method, params) in enumerate(
            [("tools/list", {}), ("tools/call", {"name": "hello"}), ("logging/setLevel", {})],
            start=2,
        ):
            error = refused(await peer.request(rid, method, params))
            assert error["message"] == (
                "Unauthorized: this server requires an access token, and the request has none"
            )
            assert "data" not in error
    async with connected(server, None, initialize=False) as peer:
        discovered = await peer.request(1, "server/discover", {"_meta": meta()})
        assert "result" in discovered, discovered
        refused(await peer.request(2, "tools/call", {"name": "hello", "_meta": meta()}))
    assert calls == []


async def test_a_token_that_expired_since_it_was_verified_is_refused() -> None:
    now = [999.0]
    calls: list[str] = []
    server = scoped_server(auth=static_auth(clock=lambda: now[0]), calls=calls)
    carol = Principal("carol", scopes=frozenset({"mcp:tools"}), expires_at=1000.0)
    async with connected(server, carol) as peer:
        assert "result" in await peer.request(1, "tools/call", {"name": "whoami"})
        now[0] = 1000.0
        error = refused(await peer.request(2, "tools/call", {"name": "whoami"}))
        assert error["message"] == "Unauthorized: the access token expired"
        assert error["data"] == {"error": "invalid_token", "scope": "mcp:tools"}
    assert calls == ["whoami"]


async def test_the_handler_sees_the_connections_principal() -> None:
    async with open_client(ServedAs(scoped_server(), ALICE)) as client:
        assert [tool.name for tool in await client.list_tools()] == ["hello", "whoami", "greet"]
        result = await client.call_tool("whoami")
        assert result.content[0].text == "alice mcp:tools"  # type: ignore[union-attr]
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("deploy")
        assert caught.value.code == FORBIDDEN
        assert "mcp:admin" in caught.value.message


async def test_a_listen_hears_only_of_resources_the_principal_may_read() -> None:
    server = scoped_server()
    uris = ["file:///public", "file:///private", "file:///docs/plan"]
    for principal, honoured in [
        (ALICE, ["file:///public"]),
        (ADMIN, sorted(uris)),
    ]:
        async with connected(server, principal, initialize=False) as peer:
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": "listen",
                    "method": "subscriptions/listen",
                    "params": {
                        "notifications": {"resourceSubscriptions": uris},
                        "_meta": meta(),
                    },
                }
            )
            ack = await peer.recv()
            assert ack["method"] == "notifications/subscriptions/acknowledged", ack
            assert ack["params"]["notifications"]["resourceSubscriptions"] == honoured
            await peer.cancel("listen")


# -- requestState --------------------------------------------------------------------------------


@pytest.mark.invariant(10)
async def test_a_request_state_sealed_for_alice_never_opens_for_bob() -> None:
    server = scoped_server()
    answered = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}

    def retry(state: str) -> dict[str, Any]:
        return {
            "name": "greet",
            "_meta": meta(),
            "inputResponses": answered,
            "requestState": state,
        }

    async with connected(server, ALICE, initialize=False) as alice:
        first = await alice.request(1, "tools/call", {"name": "greet", "_meta": meta()})
        assert first["result"]["resultType"] == "input_required"
        assert first["result"]["inputRequests"]["elicitation-1"]["params"]["requestedSchema"] == (
            FORM
        )
        state = first["result"]["requestState"]
    # Bob holds the same scopes: only who he is differs.
    async with connected(server, BOB, initialize=False) as bob:
        replayed = await bob.request(2, "tools/call", retry(state))
        assert replayed["error"]["code"] == -32602, replayed
        assert "requestState is not valid" in replayed["error"]["message"]
    # Alice, on another connection, still can: the state is bound to her, not to a connection.
    async with connected(server, ALICE, initialize=False) as alice:
        done = await alice.request(3, "tools/call", retry(state))
        assert done["result"]["content"][0]["text"] == "Hello Ada", done


# -- cache hints ---------------------------------------------------------------------------------


async def test_cacheable_results_are_private_under_auth_keeping_the_ttl() -> None:
    for protected, scope in [(True, "private"), (False, "public")]:
        server = scoped_server(protected=protected, ttl_ms=5000, cache_scope="public")
        async with connected(server, ALICE, initialize=False) as peer:
            for rid, (method, params) in enumerate(
                [
                    ("tools/list", {}),
                    ("resources/read", {"uri": "file:///public"}),
                    ("server/discover", {}),
                ]
            ):
                response = await peer.request(rid, method, {**params, "_meta": meta()})
                result = response["result"]
                assert (result["ttlMs"], result["cacheScope"]) == (5000, scope), (method, result)
        # The handshake era carries the configured hints too, made private the same way.
        async with connected(server, ALICE) as peer:
            result = (await peer.request(9, "prompts/list"))["result"]
            assert (result["ttlMs"], result["cacheScope"]) == (5000, scope)


# -- stdio: the token comes from the environment --------------------------------------------------


async def test_stdio_serves_for_the_principal_of_the_environments_token() -> None:
    token = "alice-token-1234"
    async with raw_child(SCOPED, env={"MCP_ACCESS_TOKEN": token}) as child:
        await child.initialize()
        listed = await child.request(1, "tools/list")
        assert [tool["name"] for tool in listed["result"]["tools"]] == ["hello", "whoami"]
        assert listed["result"]["nextCursor"]
        whoami = await child.request(2, "tools/call", {"name": "whoami"})
        assert whoami["result"]["content"][0]["text"] == "alice mcp:tools"
        error = refused(await child.request(3, "tools/call", {"name": "deploy"}))
        assert "mcp:admin" in error["message"]
    assert child.process.returncode == 0
    assert token.encode() not in child.stderr


async def test_our_client_reaches_a_stdio_server_with_a_token_in_its_environment() -> None:
    env = {"MCP_ACCESS_TOKEN": "admin-token-9012"}
    async with stdio_client(SCOPED, env=env, cwd=ROOT) as client:
        names = [tool.name for tool in await client.list_tools()]
        assert names == ["hello", "whoami", "greet", "deploy"]
        result = await client.call_tool("deploy")
        assert result.content[0].text == "deployed"  # type: ignore[union-attr]


async def stdio_exit(env: dict[str, str], *args: str, cli: bool = False) -> tuple[int, str]:
    """Run the scoped server (``cli``: through ``trio-mcp serve``) with ``env`` on top of this
    process's environment and nothing on its stdin: its exit status and its stderr."""
    target = "tests/servers/scoped_server.py:scoped_server"
    command = [sys.executable, "-m", "trio_mcp", "serve", target] if cli else [*SCOPED, *args]
    with trio.fail_after(30):
        done = await trio.run_process(
            command,
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env={**os.environ, **env},
        )
    assert done.stdout == b""
    return done.returncode, done.stderr.decode()


@pytest.mark.parametrize("args", [(), ("--run",)])
async def test_stdio_without_a_token_exits_at_once_saying_so(args: tuple[str, ...]) -> None:
    status, stderr = await stdio_exit({"MCP_ACCESS_TOKEN": ""}, *args)
    assert status == 1
    assert "MCP_ACCESS_TOKEN is not set" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("mallory-token-0000", "is refused: unknown access token"),
        ("late-token-7890", "is refused: the access token expired"),
        ("bad,cred;value", "is refused: the Bearer credential is not a token"),
    ],
)
async def test_stdio_with_a_refused_token_exits_at_once_saying_why(token: str, reason: str) -> None:
    assert token not in TOKENS or TOKENS[token].expires_at is not None
    status, stderr = await stdio_exit({"MCP_ACCESS_TOKEN": token})
    assert status == 1
    assert f"the access token in MCP_ACCESS_TOKEN {reason}" in stderr
    assert token not in stderr
    assert "Traceback" not in stderr


class Leaky:
    """A verifier that breaks its promise: its refusals quote the token."""

    async def verify(self, token: str) -> Principal:
        await trio.lowlevel.checkpoint()
        if token.startswith("down"):
            raise VerifierUnavailable(f"the authorization server is down (token {token})")
        raise InvalidToken(f"no such token: {token}")


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("secret-value-42", "the access token in HOST_TOKEN is refused: no such token: "),
        ("down-value-43", "the access token in HOST_TOKEN could not be checked: the "),
    ],
)
async def test_serve_stdio_never_repeats_the_token_even_from_a_verifier_that_does(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    token: str,
    said: str,
) -> None:
    monkeypatch.setenv("HOST_TOKEN", token)
    policy = Auth(Leaky(), "https://mcp.example.com/mcp", stdio_token_env="HOST_TOKEN")
    server = Server("leaky", auth=policy)
    # Refused before anything touches stdin or stdout.
    with pytest.raises(SystemExit) as exited:
        await server.serve_stdio()
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"leaky: {said}")
    assert err.count("\n") == 1
    assert token not in err
    assert token not in caplog.text
    monkeypatch.delenv("HOST_TOKEN")
    with pytest.raises(SystemExit):
        await server.serve_stdio()
    assert "leaky: HOST_TOKEN is not set" in capsys.readouterr().err


async def test_the_command_line_shows_why_it_stops_too() -> None:
    """``trio-mcp serve`` turns ``SystemExit`` into its exit status; the line still reaches the
    host's log."""
    status, stderr = await stdio_exit({"MCP_ACCESS_TOKEN": "mallory-token-0000"}, cli=True)
    assert status == 1
    assert "scoped: the access token in MCP_ACCESS_TOKEN is refused: unknown access token" in (
        stderr
    )
    assert "mallory-token-0000" not in stderr
