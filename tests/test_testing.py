"""The pytest plugin ``trio_mcp.testing``: its fixtures used here as a user's tests use them, and
a user's test file run by a real pytest in a child process (what a failure report shows)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
import trio

from trio_mcp import Client, Command, ConnectionClosed, Context, Server, TextContent, open_client
from trio_mcp.http import HttpOptions
from trio_mcp.testing import HttpServer, connected, http_client, http_server, stdio_client

#: A hang guard, never a performance assertion.
GUARD = 60
ROOT = Path(__file__).resolve().parent.parent
#: pytest with the plugin and pytest-trio's trio_mode, as a user's configuration would have them.
PYTEST = [sys.executable, "-m", "pytest", "-p", "trio_mcp.testing", "-o", "trio_mode=true"]
PYTEST += ["-p", "no:cacheprovider"]


@pytest.fixture
def mcp_server() -> Server:
    server = Server("under-test")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def era(ctx: Context) -> str:
        return "modern" if ctx.modern else "legacy"

    return server


async def test_mcp_client_is_connected_in_memory_to_the_modules_server(
    mcp_client: Client,
) -> None:
    assert mcp_client.server_info.name == "under-test"
    assert [tool.name for tool in await mcp_client.list_tools()] == ["add", "era"]
    result = await mcp_client.call_tool("add", {"a": 2, "b": 3})
    assert result.structured_content == {"result": 5}


seen_eras: list[str] = []


async def test_mcp_era_client_runs_the_test_once_per_era(
    mcp_era_client: Client, mcp_era: str
) -> None:
    assert mcp_era_client.modern is (mcp_era == "modern")
    result = await mcp_era_client.call_tool("era", {})
    assert result.content == [TextContent(mcp_era)]
    seen_eras.append(mcp_era)


def test_both_eras_ran() -> None:
    assert sorted(seen_eras) == ["legacy", "modern"]


async def test_mcp_http_is_a_real_server_on_loopback(
    mcp_http: HttpServer, mcp_http_client: Client
) -> None:
    assert mcp_http.url.startswith("http://127.0.0.1:")
    assert mcp_http.url.endswith("/mcp")
    assert mcp_http.app.server is not None
    result = await mcp_http_client.call_tool("add", {"a": 1, "b": 1})
    assert result.structured_content == {"result": 2}
    # The raw client reaches the same endpoint.
    response = await mcp_http.http_client.get(mcp_http.url, headers={"accept": "text/plain"})
    assert response.status_code == 406


async def test_http_client_takes_the_settings_of_an_http_target_as_its_own(
    mcp_server: Server,
) -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    with trio.fail_after(GUARD), warnings.catch_warnings():
        warnings.simplefilter("error")
        async with (
            http_server(mcp_server) as running,
            httpx.AsyncClient(event_hooks={"request": [record]}) as raw,
            http_client(running, headers={"X-Note": "mine"}, http_client=raw, mode="modern") as c,
        ):
            assert (await c.call_tool("era", {})).content == [TextContent("modern")]
    assert sent and all(request.headers["x-note"] == "mine" for request in sent)


async def test_http_server_stops_at_the_end_of_its_block(mcp_server: Server) -> None:
    with trio.fail_after(GUARD):
        async with http_server(mcp_server) as running, http_client(running, mode="modern") as c:
            assert c.modern
            assert (await c.call_tool("era", {})).content == [TextContent("modern")]
        assert running.stopped.is_set()
        async with httpx.AsyncClient() as raw:
            with pytest.raises(httpx.ConnectError):
                await raw.get(running.url)


async def test_http_server_fails_when_the_app_raised(mcp_server: Server) -> None:
    with trio.fail_after(GUARD), pytest.raises(AssertionError, match="the HTTP app raised"):
        async with http_server(mcp_server) as running:
            running.errors.append(RuntimeError("escaped the app"))


async def test_connected_takes_open_clients_options(mcp_server: Server) -> None:
    async with connected(mcp_server, mode="modern") as client:
        assert client.modern


async def test_stdio_client_speaks_to_a_real_child() -> None:
    lines: list[str] = []
    command = [sys.executable, "-m", "trio_mcp", "demo"]
    with trio.fail_after(GUARD):
        async with stdio_client(command, on_stderr=lines.append) as client:
            assert client.server_info.name == "trio-mcp-demo"
            assert await client.list_tools()


async def test_stdio_client_attaches_the_childs_stderr_to_a_failure() -> None:
    script = "import sys; sys.stderr.write('no server here\\n'); sys.exit(3)"
    with trio.fail_after(GUARD), pytest.raises(ConnectionClosed) as caught:
        async with stdio_client([sys.executable, "-c", script]):
            pass  # pragma: no cover - connecting fails
    assert any("no server here" in note for note in caught.value.__notes__)


async def test_stdio_client_takes_a_command_and_its_settings_as_its_own(tmp_path: Path) -> None:
    """A helper for a child process: ``env=``/``cwd=`` are at home in it (no warning), given
    loose or on a :class:`Command`; the child's stderr stays the helper's to collect."""
    script = "from trio_mcp._demo import demo_server; demo_server().run()"
    command = Command([sys.executable, "-c", script], env={"PYTHONPATH": str(ROOT)})
    with trio.fail_after(GUARD), warnings.catch_warnings():
        warnings.simplefilter("error")
        async with stdio_client(command, cwd=tmp_path, mode="legacy") as client:
            assert client.server_info.name == "trio-mcp-demo"
    with pytest.raises(TypeError, match="on_stderr="):
        async with stdio_client(command, stderr="discard"):
            pass  # pragma: no cover


async def test_stdio_client_wants_a_sequence() -> None:
    with pytest.raises(TypeError, match="sequence"):
        async with stdio_client("python -m trio_mcp demo"):
            pass  # pragma: no cover


async def test_mcp_stdio_is_a_factory(
    mcp_stdio: Callable[..., AbstractAsyncContextManager[Client]],
) -> None:
    with trio.fail_after(GUARD):
        async with mcp_stdio([sys.executable, "-m", "trio_mcp", "demo"]) as client:
            assert client.server_info.name == "trio-mcp-demo"


USER_TESTS = """
    import sys

    import pytest

    from trio_mcp import Server


    @pytest.fixture
    def mcp_server():
        server = Server("mine")

        @server.tool()
        def hello(name: str) -> str:
            return f"hello {name}"

        return server


    async def test_in_memory(mcp_client):
        result = await mcp_client.call_tool("hello", {"name": "ada"})
        assert result.content[0].text == "hello ada"


    async def test_a_child_that_is_no_server(mcp_stdio):
        script = "import sys; sys.stderr.write('the-childs-last-words\\\\n')"
        async with mcp_stdio([sys.executable, "-c", script]):
            pass
"""

NO_SERVER = """
async def test_no_server_given(mcp_http):
    pass
"""


def test_a_users_test_file_with_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(textwrap.dedent(USER_TESTS))
    (tmp_path / "test_other.py").write_text(NO_SERVER)
    (tmp_path / "conftest.py").write_text("")
    done = subprocess.run(
        [*PYTEST, "-q", "test_mine.py", "test_other.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "1 passed" in out and "1 failed" in out and "1 error" in out, out
    # The child's stderr is a section of the failed test's report.
    assert "stderr of" in out and "the-childs-last-words" in out, out
    # The plugin's own mcp_server asks for one.
    assert "define a fixture named mcp_server" in out, out


TRIO_MODE_OFF = """
import pytest

from trio_mcp import Server


@pytest.fixture
def mcp_server():
    return Server("mine")


async def test_uses_the_client(mcp_client):
    pass


@pytest.mark.trio
async def test_marked(mcp_client):
    assert mcp_client.server_info.name == "mine"
"""


@pytest.mark.parametrize("pytest_trio", ["installed", "missing"])
def test_without_trio_mode_the_plugin_says_what_to_turn_on(
    tmp_path: Path, pytest_trio: str
) -> None:
    (tmp_path / "test_off.py").write_text(TRIO_MODE_OFF)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # no trio_mode: pytest-trio's default
    command = [sys.executable, "-m", "pytest", "-q", "-p", "trio_mcp.testing"]
    command += ["-p", "no:cacheprovider", "-p", "no:randomly"]
    if pytest_trio == "missing":
        command += ["-p", "no:trio"]
    done = subprocess.run(
        [*command, "test_off.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    said = "trio_mcp.testing: test_uses_the_client uses mcp_client: the trio_mcp fixtures run "
    assert said in out, out
    assert "trio_mode = true under [tool.pytest.ini_options] in pyproject.toml" in out, out
    if pytest_trio == "missing":
        assert "pip install pytest-trio" in out, out
    else:
        assert "1 passed" in out, out  # a test marked @pytest.mark.trio runs as it is


async def test_open_client_is_what_connected_wraps(mcp_server: Server) -> None:
    async with open_client(mcp_server) as direct, connected(mcp_server) as helper:
        assert direct.server_info == helper.server_info


class TestOptionsOfTheFixtures:
    """A module or a class overrides the options fixtures as it overrides ``mcp_server``."""

    @pytest.fixture
    def mcp_client_options(self) -> dict[str, object]:
        return {"mode": "modern"}

    @pytest.fixture
    def mcp_http_options(self) -> HttpOptions:
        return HttpOptions(ready_path="/healthz")

    async def test_the_clients_take_the_options(
        self, mcp_client: Client, mcp_http_client: Client
    ) -> None:
        assert mcp_client.modern
        assert mcp_http_client.modern

    async def test_the_http_server_takes_the_options(self, mcp_http: HttpServer) -> None:
        response = await mcp_http.http_client.get(mcp_http.base + "/healthz")
        assert response.status_code == 200
