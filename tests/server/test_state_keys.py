"""A server's requestState keys: a ring given in code or by the environment (a list or a key
file), a random key of its own otherwise (said in the log), and the audience a state is sealed
for (the server's name, ``Auth.resource`` with authorization, or ``state_audience``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import Auth, Context, Principal, Server, StaticTokenVerifier
from trio_mcp.protocol._request_state import key_id
from trio_mcp.transports import memory_transport_pair

from ..wire import WirePeer

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
META = {VERSION_KEY: "2026-07-28", CAPS_KEY: {"elicitation": {}}}
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ANSWER = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}
OLD, NEW = b"o" * 32, b"n" * 32
KEYS_ENV, FILE_ENV = "TRIO_MCP_STATE_KEYS", "TRIO_MCP_STATE_KEYS_FILE"
ALICE = Principal("alice", "client-1", frozenset())


def asking(name: str = "greeter", **options: Any) -> Server:
    server = Server(name, **options)

    @server.tool()
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", FORM)
        return f"Hello {answer.content['name'] if answer.content else 'nobody'}"

    return server


@asynccontextmanager
async def wired(server: Server, principal: Principal | None = None) -> AsyncIterator[WirePeer]:
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: server.serve_transport(theirs, principal=principal))
        yield WirePeer(ours)
        ours.close()
        nursery.cancel_scope.cancel()


async def issued_state(server: Server, principal: Principal | None = None) -> str:
    async with wired(server, principal) as peer:
        first = await peer.request(1, "tools/call", {"name": "greet", "_meta": META})
        assert first["result"]["resultType"] == "input_required", first
        state: str = first["result"]["requestState"]
        return state


async def retried(server: Server, state: str, principal: Principal | None = None) -> Any:
    """The retry's result, or None when the state was refused (-32602)."""
    params = {"name": "greet", "_meta": META, "inputResponses": ANSWER, "requestState": state}
    async with wired(server, principal) as peer:
        answer = await peer.request(2, "tools/call", params)
    if "error" in answer:
        assert answer["error"]["code"] == -32602, answer
        assert "requestState is not valid" in answer["error"]["message"]
        return None
    return answer["result"]["content"][0]["text"]


@pytest.fixture(autouse=True)
def no_configured_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sets the variables it is about, and only those."""
    monkeypatch.delenv(KEYS_ENV, raising=False)
    monkeypatch.delenv(FILE_ENV, raising=False)


# -- the ring, given in code -----------------------------------------------------------------------


async def test_a_rotated_ring_opens_the_old_keys_states_and_seals_under_the_new() -> None:
    before = asking(state_key=OLD)
    after = asking(state_keys=[NEW, OLD])
    state = await issued_state(before)
    assert await retried(after, state) == "Hello Ada"
    fresh = await issued_state(after)
    assert fresh.split(".")[1] == key_id(NEW)
    assert await retried(before, fresh) is None  # the old process never had the new key
    # Once the old key is dropped, what it sealed is refused like a forged state.
    assert await retried(asking(state_keys=[NEW]), state) is None
    assert await retried(asking(state_keys=[NEW]), fresh) == "Hello Ada"


def test_state_key_and_state_keys_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="state_key or state_keys, not both"):
        Server("s", state_key=OLD, state_keys=[NEW])
    with pytest.raises(ValueError, match="at least 16 bytes"):
        Server("s", state_keys=[NEW, b"short"])
    assert Server("s", state_keys=iter([NEW, OLD])).state_sealer.keys == (NEW, OLD)
    assert Server("s", state_key=OLD).state_sealer.keys == (OLD,)


# -- the ring, from the environment ----------------------------------------------------------------


async def test_keys_from_the_environment_are_shared_by_every_server_built_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEYS_ENV, f"{NEW.hex()},{OLD.hex()}")
    one, two = asking(), asking()
    assert one.state_sealer.keys == (NEW, OLD)
    assert one.state_keys_origin == KEYS_ENV
    assert await retried(two, await issued_state(one)) == "Hello Ada"
    # Keys given in code win over the environment.
    assert asking(state_key=OLD).state_sealer.keys == (OLD,)


async def test_keys_from_a_key_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keys = tmp_path / "state-keys"
    keys.write_text(f"# newest first\n{NEW.hex()}\n\n# until its states expire\n{OLD.hex()}\n")
    monkeypatch.setenv(FILE_ENV, str(keys))
    server = asking()
    assert server.state_sealer.keys == (NEW, OLD)
    assert server.state_keys_origin == f"{FILE_ENV} ({keys})"
    assert await retried(server, await issued_state(asking(state_key=OLD))) == "Hello Ada"


def test_a_malformed_or_short_key_in_the_environment_stops_the_server_and_names_the_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "ab" * 12  # 12 bytes: too short
    monkeypatch.setenv(KEYS_ENV, f"{NEW.hex()},{secret}")
    with pytest.raises(ValueError, match=rf"^{KEYS_ENV}: key 2: the key is 12 bytes") as caught:
        Server("s")
    assert secret not in str(caught.value)
    monkeypatch.setenv(KEYS_ENV, "")
    with pytest.raises(ValueError, match=rf"^{KEYS_ENV}: key 1: the key is empty"):
        Server("s")
    monkeypatch.delenv(KEYS_ENV)

    keys = tmp_path / "keys.txt"
    keys.write_text(f"{NEW.hex()}\n# a comment\nhunter2 is my password\n")
    monkeypatch.setenv(FILE_ENV, str(keys))
    with pytest.raises(ValueError, match=r"keys.txt', line 3: the key is neither") as caught:
        Server("s")
    assert "hunter2" not in str(caught.value)
    keys.write_text("# nothing yet\n")
    with pytest.raises(ValueError, match=r"keys.txt' holds no key"):
        Server("s")
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=r"cannot read the state key file '.*missing'"):
        Server("s")
    monkeypatch.setenv(FILE_ENV, " ")
    with pytest.raises(ValueError, match=rf"{FILE_ENV} is set but names no file"):
        Server("s")
    monkeypatch.setenv(FILE_ENV, str(keys))
    monkeypatch.setenv(KEYS_ENV, NEW.hex())
    with pytest.raises(ValueError, match="are both set: choose one"):
        Server("s")


async def test_without_keys_each_process_has_its_own_and_the_log_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    one, two = asking(), asking()
    assert one.state_sealer.ephemeral and one.state_keys_origin is None
    assert one.state_sealer.key != two.state_sealer.key
    assert await retried(two, await issued_state(one)) is None
    with caplog.at_level(logging.INFO, logger="trio_mcp.server"):
        one.http_app()
        one.http_app()  # said once
    said = [r.getMessage() for r in caplog.records if "requestState" in r.getMessage()]
    assert len(said) == 1, said
    assert "random key of this process" in said[0]
    assert "will not survive a restart nor open on another worker" in said[0]
    assert KEYS_ENV in said[0] and FILE_ENV in said[0]


def test_the_log_says_where_the_keys_came_from(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, f"{NEW.hex()},{OLD.hex()}")
    with caplog.at_level(logging.INFO, logger="trio_mcp.server"):
        asking().http_app()
    said = [r.getMessage() for r in caplog.records if "requestState" in r.getMessage()]
    assert said == [f"greeter: requestState is sealed under key {key_id(NEW)} of 2 from {KEYS_ENV}"]
    assert NEW.hex() not in said[0]


# -- the audience ----------------------------------------------------------------------------------


@pytest.mark.invariant(10)
async def test_another_server_sharing_the_key_cannot_open_the_state() -> None:
    state = await issued_state(asking("billing", state_key=OLD))
    assert await retried(asking("billing", state_key=OLD), state) == "Hello Ada"
    assert await retried(asking("chat", state_key=OLD), state) is None


async def test_state_audience_lets_differently_named_replicas_share_states() -> None:
    state = await issued_state(asking("billing-1", state_key=OLD, state_audience="billing"))
    replica = asking("billing-2", state_key=OLD, state_audience="billing")
    assert await retried(replica, state) == "Hello Ada"
    assert await retried(asking("billing-2", state_key=OLD), state) is None


def auth(resource: str) -> Auth:
    return Auth(StaticTokenVerifier({"t": ALICE}), resource)


async def test_with_authorization_the_audience_is_the_resource() -> None:
    first = asking("one", state_key=OLD, auth=auth("https://a.example/mcp"))
    assert first.state_audience == "https://a.example/mcp"
    state = await issued_state(first, ALICE)
    # Another name, the same resource: a replica of the same protected server.
    assert await retried(
        asking("two", state_key=OLD, auth=auth("https://a.example/mcp")), state, ALICE
    )
    # The same name, another resource: another server.
    other = asking("one", state_key=OLD, auth=auth("https://b.example/mcp"))
    assert await retried(other, state, ALICE) is None
    # Authorization set after the server was built (as the command line does) counts too.
    late = asking("one", state_key=OLD)
    assert late.state_audience == "one"
    late.auth = auth("https://a.example/mcp")
    assert await retried(late, state, ALICE) == "Hello Ada"
    late.state_audience = "pinned"
    assert late.state_audience == "pinned"
    assert await retried(late, state, ALICE) is None


# -- the command line ------------------------------------------------------------------------------

OWN_KEYS = """\
from trio_mcp import Server

server = Server("own", state_key=b"k" * 32)
"""


def test_the_key_file_option_refuses_what_would_be_ambiguous(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit status 2 and one line (never a key) before anything is served: the file is
    unreadable or malformed, the environment gives keys too, or the server has its own."""
    from trio_mcp._cli import build_parser, main

    keys = tmp_path / "keys.txt"
    keys.write_text(f"{NEW.hex()}\n")
    assert build_parser().parse_args(["demo", "--state-key-file", str(keys)]).state_key_file == (
        str(keys)
    )
    served = tmp_path / "own.py"
    served.write_text(OWN_KEYS)
    http = ["--transport", "http", "--port", "0"]
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["demo", "--state-key-file", str(tmp_path / "nope")], {}, "cannot read the state key"),
        (["demo", "--state-key-file", str(keys)], {KEYS_ENV: OLD.hex()}, f"and {KEYS_ENV} both"),
        (["demo", "--state-key-file", str(keys)], {FILE_ENV: str(keys)}, f"and {FILE_ENV} both"),
        (
            ["serve", str(served), "--state-key-file", str(keys)],
            {},
            "has state keys of its own (Server(state_key=...)): --state-key-file would replace",
        ),
        (["demo"], {KEYS_ENV: "ab" * 16 + ",x"}, f"{KEYS_ENV}: key 2: the key is neither"),
    ]
    for options, environment, said in cases:
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        assert main([*options, *http]) == 2, options
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, (options, err)
        assert NEW.hex() not in err and OLD.hex() not in err
        for name in environment:
            monkeypatch.delenv(name)
    keys.write_text(f"{NEW.hex()}\nabc!\n")
    assert main(["demo", "--state-key-file", str(keys), *http]) == 2
    assert "keys.txt', line 2: the key is neither" in capsys.readouterr().err
