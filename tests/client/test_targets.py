"""What ``open_client`` connects to: each kind of target with its own settings, the short forms,
the keywords that moved from ``open_client`` to a target, and the errors that name their home."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_mcp import (
    Auth,
    Command,
    Context,
    HttpTarget,
    MCPError,
    Principal,
    Server,
    StaticTokenVerifier,
    WebSocketTarget,
    open_client,
)
from trio_mcp._demo import demo_server
from trio_mcp.lowlevel import memory_transport_pair
from trio_mcp.transports._http_client import StreamableHttpTransport
from trio_mcp.transports._sse_client import SseClientTransport
from trio_mcp.transports._ws_client import WebSocketClientTransport

from .._http import GUARD, Served, serving, text_of
from .._raw_stdio import ROOT

#: A child that tells where it runs, what it was given, and writes a line to stderr.
WHERE_SERVER = """\
import os, sys
from trio_mcp import Server

server = Server("where")

@server.tool()
def where() -> str:
    print("asked where", file=sys.stderr, flush=True)
    return f"{os.getcwd()} {os.environ['TARGET_NOTE']}"

server.run()
"""

TOKEN = "alice-token-0123456789"


def where_script(tmp_path: Path) -> list[str]:
    script = tmp_path / "where_server.py"
    script.write_text(WHERE_SERVER)
    return [sys.executable, str(script)]


def child_env() -> dict[str, str]:
    return {"TARGET_NOTE": "noted", "PYTHONPATH": str(ROOT)}


def protected() -> Server:
    """A server that answers only a bearer token: proof that a target's headers arrive."""
    auth = Auth(
        StaticTokenVerifier({TOKEN: Principal("alice", scopes=frozenset({"mcp:base"}))}),
        "http://localhost/mcp",
        authorization_servers=("https://auth.example.com",),
        required_scopes="mcp:base",
    )
    server = Server("protected", auth=auth)

    @server.tool()
    async def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return str(ctx.auth.subject)

    return server


def ws_url(served: Served) -> str:
    return served.base.replace("http://", "ws://", 1) + "/ws"


@contextmanager
def one_deprecation(new_spelling: str) -> Iterator[None]:
    """Exactly one DeprecationWarning, naming ``new_spelling`` and pointing at the caller."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in deprecations]
    assert new_spelling in str(deprecations[0].message)
    assert deprecations[0].filename == __file__


# -- each kind connects --------------------------------------------------------------------------


async def test_a_command_spawns_its_child_with_its_env_cwd_and_stderr(tmp_path: Path) -> None:
    lines: list[str] = []
    command = Command(where_script(tmp_path), env=child_env(), cwd=tmp_path, stderr=lines.append)
    with trio.fail_after(GUARD):
        async with open_client(command) as client:
            answer = text_of(await client.call_tool("where", {}))
    assert answer == f"{await trio.Path(tmp_path).resolve()} noted"
    assert "asked where" in lines


async def test_a_command_is_a_program_alone_or_its_argv_never_split() -> None:
    assert Command("my server").argv == ("my server",)
    assert Command(["python", "-m", "x"]).argv == ("python", "-m", "x")
    assert str(Command(["python", "-m", "x"])) == "python -m x"
    with pytest.raises(TypeError, match="list of strings"):
        Command([])
    with pytest.raises(TypeError, match="list of strings"):
        Command(["python", 3])  # type: ignore[list-item]


async def test_the_short_form_of_a_command_connects_with_the_defaults() -> None:
    with trio.fail_after(GUARD):
        async with open_client([sys.executable, "-m", "trio_mcp", "demo"]) as client:
            assert client.server_info.name == "trio-mcp-demo"


async def test_an_http_target_sends_its_headers_through_its_http_client() -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with (
        serving(protected()) as served,
        httpx.AsyncClient(event_hooks={"request": [record]}) as http,
    ):
        target = HttpTarget(
            served.url, headers={"Authorization": f"Bearer {TOKEN}"}, http_client=http
        )
        async with open_client(target) as client:
            assert isinstance(client.session.transport, StreamableHttpTransport)
            assert text_of(await client.call_tool("whoami", {})) == "alice"
        assert sent and all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in sent)
        # The short form has no headers: refused.
        with pytest.raises(MCPError, match="no access token"):
            async with open_client(served.url):
                pass  # pragma: no cover


async def test_an_http_target_with_auth_authorizes_every_request() -> None:
    async with serving(protected()) as served:
        target = HttpTarget(served.url, auth=BearerAuth(TOKEN))
        async with open_client(target) as client:
            assert text_of(await client.call_tool("whoami", {})) == "alice"


class BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


async def test_an_http_target_reaches_an_http_sse_server_when_told() -> None:
    async with (
        serving(demo_server()) as served,
        open_client(HttpTarget(served.base + "/sse", transport="sse")) as client,
    ):
        assert isinstance(client.session.transport, SseClientTransport)
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


async def test_a_websocket_target_sends_its_headers_on_the_upgrade() -> None:
    async with serving(protected()) as served:
        target = WebSocketTarget(ws_url(served), headers={"Authorization": f"Bearer {TOKEN}"})
        async with open_client(target) as client:
            assert isinstance(client.session.transport, WebSocketClientTransport)
            assert text_of(await client.call_tool("whoami", {})) == "alice"


async def test_a_server_is_served_in_memory_and_a_transport_is_used_as_it_is() -> None:
    async with open_client(demo_server()) as client:
        assert client.server_info.name == "trio-mcp-demo"
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(demo_server().serve_transport, theirs)
        async with open_client(ours) as client:
            assert (await client.call_tool("add", {"a": 2, "b": 2})).structured_content == {
                "result": 4
            }
        nursery.cancel_scope.cancel()


def test_a_url_target_refuses_the_other_scheme_naming_its_sibling() -> None:
    with pytest.raises(ValueError, match=re.escape("WebSocketTarget('ws://h/ws')")):
        HttpTarget("ws://h/ws")
    with pytest.raises(ValueError, match="needs an http:// or https:// URL"):
        HttpTarget("h/mcp")
    with pytest.raises(ValueError, match="needs a ws:// or wss:// URL"):
        WebSocketTarget("http://h/mcp")
    with pytest.raises(ValueError, match="transport must be one of"):
        HttpTarget("http://h/mcp", transport="websocket")  # type: ignore[arg-type]


# -- a misplaced keyword names its home ----------------------------------------------------------

CHILD = "a child process: open_client(Command(..., {key}=...))"
HTTP = "an HTTP target: open_client(HttpTarget(url, {key}=...))"
HEADERS = "an HTTP or WebSocket target: open_client(HttpTarget(url, headers=...))"
ANY_TARGET = "the target: open_client(Command(..., close_timeout=...))"


@pytest.mark.parametrize(
    ("target", "key", "home"),
    [
        ("http://x/mcp", "cwd", CHILD),
        ("https://x/mcp", "env", CHILD),
        ("ws://x/ws", "stderr", CHILD),
        (["server"], "auth", HTTP),
        ("server", "http_client", HTTP),
        (["server"], "transport", HTTP),
        (["server"], "headers", HEADERS),
        (Server("s"), "env", CHILD),
        (Server("s"), "max_line_bytes", CHILD),
        (Server("s"), "headers", HEADERS),
        (Server("s"), "close_timeout", ANY_TARGET),
        # A typed target holds its settings: the keyword is never merged into it.
        (Command(["server"]), "cwd", CHILD),
        (Command(["server"]), "terminate_timeout", CHILD),
        (HttpTarget("http://x/mcp"), "headers", HEADERS),
        (HttpTarget("http://x/mcp"), "transport", HTTP),
        (WebSocketTarget("ws://x/ws"), "close_timeout", ANY_TARGET),
    ],
    ids=lambda value: value if isinstance(value, str) and "(" not in value else None,
)
def test_a_misplaced_keyword_is_refused_at_the_call_naming_its_home(
    target: Any, key: str, home: str
) -> None:
    with pytest.raises(TypeError) as refused:
        misplaced: dict[str, Any] = {key: "x"}
        open_client(target, **misplaced)
    assert str(refused.value).startswith(f"{key}= is an option of " + home.format(key=key))


def test_the_messages_in_full() -> None:
    with pytest.raises(TypeError) as refused:
        open_client("http://x/mcp", cwd="/srv")
    assert str(refused.value) == (
        "cwd= is an option of a child process: open_client(Command(..., cwd=...))"
    )
    with pytest.raises(TypeError) as refused:
        open_client(Server("s"), close_timeout=1.0)
    assert str(refused.value) == (
        "close_timeout= is an option of the target: open_client(Command(..., close_timeout=...)), "
        "open_client(HttpTarget(url, close_timeout=...)) or "
        "open_client(WebSocketTarget(url, close_timeout=...))"
    )


def test_an_http_only_keyword_for_a_ws_url_says_what_a_socket_takes() -> None:
    with pytest.raises(TypeError) as refused:
        open_client("ws://x/ws", auth=BearerAuth(TOKEN))
    assert str(refused.value) == (
        "auth= is an option of an http(s) URL: open_client(HttpTarget(url, auth=...)); "
        "a ws(s) URL takes headers= (an Authorization header, say)"
    )


def test_an_unknown_keyword_is_refused_as_python_would() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'cwdd'"):
        open_client(["server"], cwdd="/srv")  # type: ignore[call-arg]


# -- the old spellings, for one release ----------------------------------------------------------


async def test_a_command_with_its_old_keywords_warns_once_and_still_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    with one_deprecation("open_client(Command(command, env=..., cwd=..., stderr=...))"):
        opening = open_client(
            where_script(tmp_path), env=child_env(), cwd=tmp_path, stderr=lines.append
        )
    with trio.fail_after(GUARD):
        async with opening as client:
            answer = text_of(await client.call_tool("where", {}))
    assert answer == f"{await trio.Path(tmp_path).resolve()} noted"
    assert "asked where" in lines


async def test_a_command_with_its_old_stop_timeouts_warns_once_and_still_runs() -> None:
    with one_deprecation(
        "open_client(Command(command, close_timeout=..., terminate_timeout=..., "
        "max_line_bytes=...))"
    ):
        opening = open_client(
            [sys.executable, "-m", "trio_mcp", "demo"],
            close_timeout=1.0,
            terminate_timeout=1.0,
            max_line_bytes=1 << 20,
        )
    with trio.fail_after(GUARD):
        async with opening as client:
            assert client.server_info.name == "trio-mcp-demo"
            assert client.session.transport.max_line_bytes == 1 << 20  # type: ignore[attr-defined]


async def test_a_url_with_its_old_keywords_warns_once_and_still_connects() -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with (
        serving(protected()) as served,
        httpx.AsyncClient(event_hooks={"request": [record]}) as http,
    ):
        with one_deprecation(
            "open_client(HttpTarget(url, headers=..., http_client=..., close_timeout=...))"
        ):
            opening = open_client(
                served.url,
                headers={"Authorization": f"Bearer {TOKEN}"},
                http_client=http,
                close_timeout=1.0,
            )
        async with opening as client:
            assert text_of(await client.call_tool("whoami", {})) == "alice"
        assert sent
        with one_deprecation("open_client(HttpTarget(url, auth=...))"):
            opening = open_client(served.url, auth=BearerAuth(TOKEN))
        async with opening as client:
            assert text_of(await client.call_tool("whoami", {})) == "alice"


async def test_an_sse_url_with_the_old_transport_keyword_warns_once_and_still_connects() -> None:
    async with serving(demo_server()) as served:
        with one_deprecation("open_client(HttpTarget(url, transport=...))"):
            opening = open_client(served.base + "/sse", transport="sse")
        async with opening as client:
            assert isinstance(client.session.transport, SseClientTransport)


async def test_a_ws_url_with_the_old_headers_keyword_warns_once_and_still_connects() -> None:
    async with serving(protected()) as served:
        with one_deprecation("open_client(WebSocketTarget(url, headers=...))"):
            opening = open_client(ws_url(served), headers={"Authorization": f"Bearer {TOKEN}"})
        async with opening as client:
            assert text_of(await client.call_tool("whoami", {})) == "alice"


async def test_a_misplaced_keyword_given_as_none_is_still_ignored_with_a_warning() -> None:
    """Before, ``headers=None`` with a server (a caller forwarding its own options) was ignored:
    it still is, for this release, with the advice to leave it out."""
    with one_deprecation("headers=None, env=None has no effect with this target"):
        opening = open_client(demo_server(), headers=None, env=None)
    async with opening as client:
        assert client.server_info.name == "trio-mcp-demo"
    with one_deprecation("open_client(Command(command, stderr=...)); auth=None has no effect"):
        opening = open_client([sys.executable, "-m", "trio_mcp", "demo"], stderr=None, auth=None)
    with trio.fail_after(GUARD):
        async with opening as client:
            assert client.server_info.name == "trio-mcp-demo"


def test_the_new_spelling_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_client(Command(["server"], env={"A": "1"}))
        open_client(HttpTarget("http://x/mcp", headers={"A": "1"}))
        open_client("http://x/mcp", mode="modern")
        open_client(["server"], default_timeout=5)
