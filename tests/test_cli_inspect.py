"""``trio-mcp inspect``: a server file, a command and an HTTP URL, as text and as JSON."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio

from trio_mcp import Server
from trio_mcp.testing import HttpServer

from .test_cli import CLI, DEMO_LINE, GUARD, child_env, run_cli

SERVER_FILE = '''
from trio_mcp import Server

server = Server("inspected", instructions="Arithmetic and greetings.\\nNothing else.")


@server.tool()
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    More words that only the first line hides."""
    return a + b


@server.prompt()
def greet(name: str, style: str = "plain") -> str:
    """A greeting."""
    return f"hello {name}"


@server.resource("notes://one", mime_type="text/plain")
def one() -> str:
    """The first note."""
    return "1"


@server.resource("notes://{id}")
def note(id: str) -> str:
    """A note by id."""
    return id
'''

CAPABILITIES = (
    "logging, prompts (listChanged), resources (subscribe, listChanged), tools (listChanged)"
)
TEXT = f"""\
server: inspected 0.0.0
protocol: 2025-11-25 (handshake era)
capabilities: {CAPABILITIES}
instructions: Arithmetic and greetings.

tools (1)
  add(a, b)  Add two numbers.
      a: integer, required
      b: integer, optional (default 2)

prompts (1)
  greet(name, [style])  A greeting.

resources (1)
  notes://one [text/plain]  The first note.

resource templates (1)
  notes://{{id}}  A note by id.
"""


@pytest.fixture
def server_file(tmp_path: Path) -> Path:
    path = tmp_path / "inspected.py"
    path.write_text(SERVER_FILE)
    return path


def test_a_server_file_as_text_from_another_directory(server_file: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli("inspect", str(server_file), cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert done.stdout == TEXT


def test_a_server_file_with_its_attribute_as_json(server_file: Path) -> None:
    done = run_cli("inspect", f"{server_file}:server", "--json")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["serverInfo"] == {"name": "inspected", "version": "0.0.0"}
    assert report["era"] == "handshake"
    assert report["instructions"] == "Arithmetic and greetings.\nNothing else."
    assert report["capabilities"]["tools"] == {"listChanged": True}
    (tool,) = report["tools"]
    assert tool["name"] == "add"
    assert tool["inputSchema"]["required"] == ["a"]
    assert [p["name"] for p in report["prompts"]] == ["greet"]
    assert [r["uri"] for r in report["resources"]] == ["notes://one"]
    assert [t["uriTemplate"] for t in report["resourceTemplates"]] == ["notes://{id}"]


def test_a_command_line() -> None:
    done = run_cli("inspect", DEMO_LINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("server: trio-mcp-demo ")
    assert "\ntools (" in done.stdout and "  add(a, b)" in done.stdout


@pytest.fixture
def mcp_server() -> Server:
    server = Server("only-tools")

    @server.tool()
    def ping() -> str:
        return "pong"

    return server


async def test_an_http_url_and_what_the_server_does_not_offer(mcp_http: HttpServer) -> None:
    with trio.fail_after(GUARD):
        done = await trio.run_process(
            [*CLI, "inspect", mcp_http.url, "--json"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=child_env(),
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["serverInfo"]["name"] == "only-tools"
    assert [t["name"] for t in report["tools"]] == ["ping"]
    # Nothing is asked for what the capabilities do not announce.
    assert report["prompts"] == report["resources"] == report["resourceTemplates"] == []


@pytest.mark.parametrize(
    ("target", "status", "message"),
    [
        ("missing.py", 2, "trio-mcp: no such file: 'missing.py'\n"),
        (f"{sys.executable} -c pass", 1, "trio-mcp: the server process exited with status 0\n"),
        ("http://127.0.0.1:9/mcp", 1, "trio-mcp: cannot reach http://127.0.0.1:9/mcp: "),
    ],
)
def test_errors_are_one_line(target: str, status: int, message: str, tmp_path: Path) -> None:
    done = run_cli("inspect", target, cwd=tmp_path)
    assert done.returncode == status
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
