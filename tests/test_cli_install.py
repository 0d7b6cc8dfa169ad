"""``trio-mcp install``: the configuration it writes starts the server, as a host starts it.

The launcher below does what a host does with an entry: it takes ``command``, ``args`` and
``env`` from the JSON file, starts the command in a directory of its own (not the server's)
with a small environment, and speaks MCP to it over stdio.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from trio_mcp import TextContent
from trio_mcp._install import HOSTS, InstallError, config_path, parse_env
from trio_mcp.testing import stdio_client

from .test_cli import CLI, GUARD, ROOT

SERVER = '''
import os

from helper import greeting  # a neighbour of this file: the server runs from anywhere

from trio_mcp import Server

server = Server("installed")


@server.tool()
def hello() -> str:
    """Say hello with the token the host's configuration gives."""
    return f"{greeting()} {os.environ.get('API_TOKEN', 'no token')} from {os.getcwd()}"
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A server file (and a module beside it) in a directory of its own."""
    folder = tmp_path / "my project"
    folder.mkdir()
    (folder / "weather.py").write_text(SERVER)
    (folder / "helper.py").write_text("def greeting() -> str:\n    return 'hello'\n")
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def run_install(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``trio-mcp install ARGS`` with ``home`` as the user's home directory."""
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA")}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [*CLI, "install", *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=cwd,
        env=env,
        check=False,
    )


def entry_of(config: Path, key: str, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = orjson.loads(config.read_bytes())[key][name]
    return entry


def names_in(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


async def launch(entry: dict[str, Any], cwd: Path) -> str:
    """Start ``entry`` as a host does, list its tools, call ``hello``."""
    # What a host passes on: little of its own environment (this checkout importable, as the
    # tests run from it), and the entry's.
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **entry.get("env", {})}
    command = [entry["command"], *entry["args"]]
    with trio.fail_after(GUARD):
        async with stdio_client(command, env=env, cwd=cwd) as client:
            assert [tool.name for tool in await client.list_tools()] == ["hello"]
            result = await client.call_tool("hello", {})
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


#: Each host, the file it reads (under the fake home, or the project for claude-code), its key.
WHERE = {
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "mcpServers"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
    "vscode": (".config/Code/User/mcp.json", "servers"),
    "windsurf": (".codeium/windsurf/mcp_config.json", "mcpServers"),
    "claude-code": ("PROJECT/.mcp.json", "mcpServers"),
}


@pytest.mark.skipif(sys.platform != "linux", reason="the user paths checked are Linux's")
@pytest.mark.parametrize("host", list(WHERE))
async def test_a_host_starts_what_install_wrote(
    host: str, project: Path, home: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    done = run_install(home, workspace, host, "../my project/weather.py", "--env", "API_TOKEN=t0k")
    assert done.returncode == 0, done.stderr
    relative, key = WHERE[host]
    config = (
        workspace / relative.removeprefix("PROJECT/")
        if relative.startswith("PROJECT/")
        else home / relative
    )
    assert done.stderr == f"trio-mcp: added 'weather' in {config}\n"
    entry = entry_of(config, key, "weather")
    assert entry["command"] == sys.executable
    assert entry["args"] == ["-m", "trio_mcp", "serve", str(project / "weather.py")]
    assert entry["env"] == {"API_TOKEN": "t0k"}
    assert ("type" in entry) is HOSTS[host].typed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert await launch(entry, elsewhere) == f"hello t0k from {elsewhere}"


async def test_a_json_host_given_by_path_keeps_every_other_entry(
    project: Path, home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "host.json"
    other = {"command": "other-server", "args": ["--flag"]}
    config.write_text(orjson.dumps({"theme": "dark", "mcpServers": {"other": other}}).decode())
    config.chmod(0o640)
    done = run_install(
        home, tmp_path, "json", f"{project / 'weather.py'}:server", "--config", str(config)
    )
    assert done.returncode == 0, done.stderr
    written = orjson.loads(config.read_bytes())
    assert written["theme"] == "dark"
    assert written["mcpServers"]["other"] == other
    assert list(written["mcpServers"]) == ["other", "server"]
    assert written["mcpServers"]["server"]["args"][-1] == f"{project / 'weather.py'}:server"
    assert stat.S_IMODE(config.stat().st_mode) == 0o640  # the permissions it had
    # No temporary file is left beside it.
    assert names_in(tmp_path) == ["home", "host.json", "my project"]
    assert (
        await launch(written["mcpServers"]["server"], tmp_path) == f"hello no token from {tmp_path}"
    )


def test_an_existing_entry_is_replaced_only_with_force(
    project: Path, home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "host.json"
    server = str(project / "weather.py")
    assert run_install(home, tmp_path, "json", server, "--config", str(config)).returncode == 0
    first = config.read_bytes()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # a new file: the user's alone
    # The same entry again changes nothing.
    again = run_install(home, tmp_path, "json", server, "--config", str(config))
    assert again.returncode == 0
    assert "unchanged" in again.stderr
    # Another one under the same name is refused, the file untouched.
    refused = run_install(home, tmp_path, "json", server, "--config", str(config), "--env", "A=1")
    assert refused.returncode == 2
    assert refused.stderr == (
        f"trio-mcp: '{config}' has a server named 'weather' already: --force replaces it, "
        "--name installs under another name\n"
    )
    assert config.read_bytes() == first
    forced = run_install(
        home, tmp_path, "json", server, "--config", str(config), "--env", "A=1", "--force"
    )
    assert forced.returncode == 0
    assert forced.stderr == f"trio-mcp: replaced 'weather' in {config}\n"
    assert orjson.loads(config.read_bytes())["mcpServers"]["weather"]["env"] == {"A": "1"}
    named = run_install(
        home, tmp_path, "json", server, "--config", str(config), "--name", "Weather 2"
    )
    assert named.returncode == 0
    assert list(orjson.loads(config.read_bytes())["mcpServers"]) == ["weather", "Weather 2"]


def test_a_dry_run_prints_the_entry_and_writes_nothing(project: Path, home: Path) -> None:
    env_file = project / ".env"
    env_file.write_text("# secrets\nexport API_TOKEN='from file'\nREGION=eu\n")
    done = run_install(
        home,
        project,
        "vscode",
        "weather.py",
        "--env-file",
        str(env_file),
        "--env",
        "REGION=us",
        "--dry-run",
        "--project",
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {
        "servers": {
            "weather": {
                "type": "stdio",
                "command": sys.executable,
                "args": ["-m", "trio_mcp", "serve", str(project / "weather.py")],
                "env": {"API_TOKEN": "from file", "REGION": "us"},
            }
        }
    }
    assert done.stderr == (
        f"trio-mcp: would write 'weather' to {project / '.vscode' / 'mcp.json'} (dry run)\n"
    )
    assert list(home.iterdir()) == []
    assert not (project / ".vscode").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cursor", "missing.py"], "no such file: 'missing.py'"),
        (["cursor", "weather.txt"], "SERVER_FILE must be a Python file"),
        (["json", "weather.py"], "json has no known configuration file: give one with --config"),
        (["windsurf", "weather.py", "--project"], "windsurf has no project configuration"),
        (["cursor", "weather.py", "--env", "NOPE"], "--env expects KEY=VALUE, got 'NOPE'"),
    ],
)
def test_bad_requests_are_one_line_and_exit_2(
    args: list[str], message: str, project: Path, home: Path
) -> None:
    done = run_install(home, project, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(f"trio-mcp: {message}"), done.stderr
    assert list(home.iterdir()) == []


@pytest.mark.parametrize(
    ("server_file", "message"),
    [
        ("weather.py:nosuch", "has no attribute 'nosuch'"),
        ("broken.py", "importing {broken} failed: ModuleNotFoundError"),
        ("empty.py", "{empty} defines no trio_mcp.Server"),
    ],
)
def test_an_entry_that_cannot_start_is_refused_before_anything_is_written(
    server_file: str, message: str, project: Path, home: Path
) -> None:
    (project / "broken.py").write_text("import no_such_module_anywhere\n")
    (project / "empty.py").write_text("x = 1\n")
    config = project / "mcp.json"
    done = run_install(home, project, "json", server_file, "--config", str(config))
    assert done.returncode == 2
    paths = {"broken": repr(str(project / "broken.py")), "empty": str(project / "empty.py")}
    assert done.stderr.startswith("trio-mcp: "), done.stderr
    assert message.format(**paths) in done.stderr
    assert done.stderr.endswith(
        "; nothing written (--no-check installs without loading the server)\n"
    )
    assert len(done.stderr.splitlines()) == 1
    assert not config.exists()
    # --no-check writes it anyway (a server that imports only in its host's environment).
    forced = run_install(home, project, "json", server_file, "--config", str(config), "--no-check")
    assert forced.returncode == 0, forced.stderr
    assert config.exists()


def test_the_check_sees_the_entrys_environment(project: Path, home: Path) -> None:
    (project / "needs_env.py").write_text(
        "import os\nfrom trio_mcp import Server\nserver = Server(os.environ['SERVER_NAME'])\n"
    )
    config = project / "mcp.json"
    without = run_install(home, project, "json", "needs_env.py", "--config", str(config))
    assert without.returncode == 2 and "KeyError" in without.stderr
    done = run_install(
        home, project, "json", "needs_env.py", "--config", str(config), "--env", "SERVER_NAME=x"
    )
    assert done.returncode == 0, done.stderr
    assert entry_of(config, "mcpServers", "needs_env")["env"] == {"SERVER_NAME": "x"}


def test_a_file_that_is_not_plain_json_is_left_alone(project: Path, home: Path) -> None:
    config = project / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text('{\n  // my servers\n  "mcpServers": {}\n}\n')
    before = config.read_bytes()
    done = run_install(home, project, "cursor", "weather.py", "--project")
    assert done.returncode == 2
    assert "is not plain JSON" in done.stderr and "--dry-run prints it" in done.stderr
    assert config.read_bytes() == before


def test_the_user_files_on_each_system() -> None:
    home = Path("/h")
    mac = config_path("claude-desktop", platform="darwin", environ={}, home=home)
    assert mac == home / "Library/Application Support/Claude/claude_desktop_config.json"
    windows = config_path("claude-desktop", platform="win32", environ={"APPDATA": "/A"}, home=home)
    assert windows == Path("/A/Claude/claude_desktop_config.json")
    linux = config_path("vscode", platform="linux", environ={"XDG_CONFIG_HOME": "/x"}, home=home)
    assert linux == Path("/x/Code/User/mcp.json")
    assert config_path("vscode", platform="darwin", environ={}, home=home) == (
        home / "Library/Application Support/Code/User/mcp.json"
    )
    assert (
        config_path("cursor", platform="win32", environ={}, home=home) == home / ".cursor/mcp.json"
    )
    assert config_path("windsurf", platform="darwin", environ={}, home=home) == (
        home / ".codeium/windsurf/mcp_config.json"
    )
    assert config_path("claude-code", cwd=Path("/p")) == Path("/p/.mcp.json")
    with pytest.raises(InstallError):
        config_path("json")


def test_env_files(tmp_path: Path) -> None:
    env = tmp_path / "env"
    env.write_text('A=1\n\n# note\nexport B = "two words"\nC=\n')
    assert parse_env(["C=3"], [str(env)]) == {"A": "1", "B": "two words", "C": "3"}
    env.write_text("not a pair\n")
    with pytest.raises(InstallError, match=r"env:1: expected KEY=VALUE"):
        parse_env([], [str(env)])
    with pytest.raises(InstallError, match="cannot read --env-file"):
        parse_env([], [str(tmp_path / "missing")])
