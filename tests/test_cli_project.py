"""The project file (``trio-mcp.toml``, or ``[tool.trio-mcp]`` of pyproject.toml) driving
``trio-mcp serve``, ``install`` and ``card``, for real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio

from trio_mcp import TextContent, open_client
from trio_mcp._cli import _project_keys, _use_project, build_parser
from trio_mcp._settings import SERVE_SETTINGS, UsageError
from trio_mcp.testing import stdio_client

from .test_cli import CLI, GUARD, ROOT, child_env, run_cli, served_url

APP = """
import os

from trio_mcp import Server

server = Server("project-app")


@server.tool()
def where() -> str:
    return f"{server.tasks.max_running} {os.getcwd()}"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "my app"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    return folder


async def test_serve_takes_the_server_transport_and_settings_from_trio_mcp_toml(
    project: Path,
) -> None:
    (project / "trio-mcp.toml").write_text(
        'server = "app.py:server"\ntransport = "http"\nport = 0\nmax-tasks = 7\n'
    )
    process = await trio.lowlevel.open_process(
        [*CLI, "serve"], stderr=subprocess.PIPE, cwd=project, env=child_env()
    )
    try:
        with trio.fail_after(GUARD):
            async with open_client(await served_url(process)) as client:
                result = await client.call_tool("where", {})
            assert result.content[0].text == f"7 {project}"  # type: ignore[union-attr]
    finally:
        process.send_signal(signal.SIGINT)
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0


def parsed(folder: Path, monkeypatch: pytest.MonkeyPatch, *words: str) -> dict[str, object]:
    monkeypatch.chdir(folder)
    args = build_parser().parse_args(list(words))
    _use_project(args, words)
    return vars(args)


def test_a_flag_wins_over_a_variable_which_wins_over_the_file(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.trio-mcp]\nserver = "app.py"\nport = 9001\n'
        'host = "127.0.0.2"\nmax-sessions = 5\nredis-url = "redis://file"\n'
        'auth-scope = ["a", "b"]\nsingle-use-state = true\n'
    )
    monkeypatch.setenv("TRIO_MCP_MAX_SESSIONS", "6")
    monkeypatch.setenv("TRIO_MCP_REDIS_URL", "")
    args = parsed(project, monkeypatch, "serve", "--port", "9002")
    assert args["server"] == str(project / "app.py")
    assert args["port"] == 9002  # the flag
    assert args["max_sessions"] is None  # the variable, read later, wins over the file
    assert args["host"] == "127.0.0.2"  # the file, over the default
    assert args["redis_url"] == "redis://file"  # an empty variable is no value
    assert args["auth_scope"] == ["a", "b"]
    assert args["single_use_state"] is True
    # trio-mcp.toml wins over pyproject.toml; a server on the command line, over both.
    (project / "trio-mcp.toml").write_text('server = "other.py"\n')
    assert parsed(project, monkeypatch, "serve")["server"] == str(project / "other.py")
    assert parsed(project, monkeypatch, "serve", "mine.py")["port"] == 8000


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('server = "app.py"\nprot = 1\n', "unknown key 'prot' (the keys are serve's flag names)"),
        ('server = "app.py"\nport = "x"\n', "port: expected a port number (0-65535), not 'x'"),
        ('server = "app.py"\nmax-sessions = 0\n', "max-sessions: expected a whole number"),
        ('server = "app.py"\ntransport = "pipe"\n', "transport: expected one of stdio,"),
        ("server = [\n", "not valid TOML"),
    ],
)
def test_a_bad_project_file_is_one_line_naming_the_file(
    project: Path, text: str, error: str
) -> None:
    (project / "trio-mcp.toml").write_text(text)
    done = run_cli("serve", cwd=project)
    assert done.returncode == 2
    assert done.stderr.startswith(f"trio-mcp: {project / 'trio-mcp.toml'}")
    assert error in done.stderr and done.stderr.count("\n") == 1


def test_every_key_is_a_flag_of_serve() -> None:
    import argparse

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {
        flag for action in commands.choices["serve"]._actions for flag in action.option_strings
    }
    assert {f"--{key}" for key in _project_keys() - {"server", "dependencies"}} <= flags
    assert {setting.flag for setting in SERVE_SETTINGS} <= {f"--{k}" for k in _project_keys()}
    assert "reload" not in _project_keys()  # a child started by --reload reads the file too


def test_without_a_server_or_a_project_file_each_command_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["card"])
    with pytest.raises(UsageError, match=r"card needs a server, or a trio-mcp\.toml"):
        _use_project(args, ["card"])


def test_card_reads_the_project_file(project: Path) -> None:
    (project / "trio-mcp.toml").write_text('server = "app.py"\n')
    done = run_cli(
        "card", "--name", "io.github.you/project-app", "--description", "where", cwd=project
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["name"] == "io.github.you/project-app"
    assert '"where"' in done.stdout.replace('"description": "where"', "")  # its tool


async def launch(entry: dict[str, object], cwd: Path) -> str:
    """Start ``entry`` as a host does and call ``where``."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}
    command = [str(entry["command"]), *entry["args"]]  # type: ignore[misc]
    with trio.fail_after(GUARD):
        async with stdio_client(command, env=env, cwd=cwd) as client:
            result = await client.call_tool("where", {})
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def install_in(project: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**child_env(), "PATH": path, "HOME": str(project)}
    return subprocess.run(
        [*CLI, "install", "json", "--config", str(project / "host.json"), *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=project,
        env=env,
        check=False,
    )


async def test_install_writes_the_project_files_server_and_a_host_starts_it(
    project: Path,
) -> None:
    (project / "trio-mcp.toml").write_text('server = "app.py"\n')
    done = await trio.to_thread.run_sync(install_in, project, os.defpath)
    assert done.returncode == 0, done.stderr
    entry = orjson.loads((project / "host.json").read_bytes())["mcpServers"]["app"]
    assert entry == {
        "command": sys.executable,
        "args": ["-m", "trio_mcp", "serve", str(project / "app.py")],
    }
    assert await launch(entry, ROOT) == f"1000 {ROOT}"


def test_install_runs_through_uv_when_it_is_on_path(project: Path) -> None:
    (project / "trio-mcp.toml").write_text(
        'server = "app.py:server"\ndependencies = ["httpx>=0.27"]\n'
    )
    bin = project / "bin"
    bin.mkdir()
    uv = bin / "uv"
    uv.write_text("#!/bin/sh\nexit 1\n")
    uv.chmod(0o755)
    done = install_in(project, str(bin), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["mcpServers"]["server"] == {
        "command": str(uv),
        "args": [
            *("run", "--with", "trio-mcp", "--with", "httpx>=0.27", "trio-mcp"),
            *("serve", f"{project / 'app.py'}:server"),
        ],
    }
    plain = install_in(project, str(bin), "--dry-run", "--no-uv")
    assert orjson.loads(plain.stdout)["mcpServers"]["server"]["command"] == sys.executable
