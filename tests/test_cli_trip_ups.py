"""What a new user trips on at the shell, each driven through the real ``trio-mcp`` command:
a server that wants a fixed token, a missing extra, a reader that stops reading, the tools'
parameter types, one ``--transport`` vocabulary, and secrets kept off the command line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.test_cli import CLI, DEMO_LINE, GUARD, HYPERCORN, MEDIA_LINE, ROOT, child_env, run_cli

#: An endpoint guarded by a fixed token, as a framework's static verifier guards it: every path
#: answers 401 with a bare challenge naming a realm, and there is no OAuth anywhere.
REALM_APP = """
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            kind = message["type"].rpartition(".")[2]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    await send({
        "type": "http.response.start",
        "status": 401,
        "headers": [(b"www-authenticate", b'Bearer realm="notes"')],
    })
    await send({"type": "http.response.body", "body": b""})
"""

BEARER_HINT = 'it wants a bearer token, pass it with -H "Authorization: Bearer TOKEN"'


@asynccontextmanager
async def serving(command: list[str], cwd: Path, env: dict[str, str]) -> AsyncIterator[str]:
    """A server process's base URL (``http://127.0.0.1:PORT``), read from its stderr. The
    process runs in a process group of its own, killed whole at the end: ``hypercorn`` serves
    from a worker process it spawned, which outlives a parent killed alone."""
    process = await trio.lowlevel.open_process(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        seen = b""
        with trio.fail_after(GUARD):
            while (found := re.search(rb"http://127\.0\.0\.1:(\d+)", seen)) is None:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, seen
                seen += chunk
        yield f"http://127.0.0.1:{found[1].decode()}"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def test_a_server_with_a_fixed_token_says_to_pass_one_with_h(tmp_path: Path) -> None:
    env = {**child_env(), "DEMO_TOKEN": "s3cret"}
    demo = [*CLI, "demo", "--transport", "http", "--port", "0", "--auth-token-env", "DEMO_TOKEN"]
    async with serving(demo, ROOT, env) as base:
        refused = await trio.to_thread.run_sync(run_cli, "tools", f"{base}/mcp")
        assert refused.returncode == 1
        assert refused.stderr == (
            f"trio-mcp: {base}/mcp answered 401 Unauthorized and offers no OAuth sign-in: "
            f"{BEARER_HINT}\n"
        )
        allowed = await trio.to_thread.run_sync(
            run_cli, "call", f"{base}/mcp", "echo", "text=hi", "-H", "Authorization: Bearer s3cret"
        )
        assert (allowed.returncode, allowed.stdout) == (0, "hi\n"), allowed.stderr
    (tmp_path / "realm_app.py").write_text(REALM_APP)
    hypercorn = [*HYPERCORN, "--worker-class", "trio", "realm_app:app"]
    async with serving(hypercorn, tmp_path, child_env()) as base:
        refused = await trio.to_thread.run_sync(run_cli, "tools", f"{base}/mcp")
    assert refused.returncode == 1
    assert refused.stderr == (
        f'trio-mcp: {base}/mcp answered 401 Unauthorized (realm "notes") and offers no OAuth '
        f"sign-in: {BEARER_HINT}\n"
    )


def test_a_ws_target_without_the_websocket_extra_is_one_line(tmp_path: Path) -> None:
    # trio-websocket shadowed by a package that fails to import, as when it is not installed.
    (tmp_path / "trio_websocket").mkdir()
    (tmp_path / "trio_websocket" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'trio_websocket'\")\n"
    )
    env = child_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    done = subprocess.run(
        [*CLI, "tools", "ws://127.0.0.1:9/ws"],
        capture_output=True,
        text=True,
        timeout=GUARD,
        env=env,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "trio-mcp: a ws:// or wss:// target needs trio-websocket: pip install "
        "'trio-mcp[websocket]' (or pip install trio-websocket)\n"
    )


def test_a_reader_that_stops_reading_ends_the_command_quietly() -> None:
    # `trio-mcp tools ... | head -1`, made certain: the pipe's reader is gone before a byte.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [*CLI, "tools", DEMO_LINE],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=GUARD,
            env=child_env(),
            check=False,
        )
    finally:
        os.close(writer)
    assert done.stderr == ""  # no "Broken pipe", no "Exception ignored"
    assert done.returncode == 128 + 13  # as a shell reports a tool ended by SIGPIPE


def test_tools_lists_each_parameters_type_optional_ones_in_brackets(tmp_path: Path) -> None:
    (tmp_path / "typed.py").write_text(
        "from typing import Literal\n"
        "from trio_mcp import Server\n"
        "server = Server('typed')\n"
        "@server.tool()\n"
        "def find(query: str, limit: int = 10, exact: bool | None = None,\n"
        "         tags: list[str] | None = None, order: Literal['asc', 'desc'] = 'asc') -> str:\n"
        "    '''Find things.'''\n"
        "    return query\n"
    )
    done = run_cli("tools", str(tmp_path / "typed.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "find(query: string, [limit: integer], [exact: boolean|null], [tags: string[]|null], "
        '[order: "asc"|"desc"])  Find things.\n'
    )
    media = run_cli("tools", MEDIA_LINE)
    assert "typed(count: integer, ratio: number, flag: boolean, name: string, tags: string[])" in (
        media.stdout
    )


async def test_server_and_client_commands_share_one_transport_vocabulary() -> None:
    for name in ("streamable-http", "http"):
        served = [*CLI, "demo", "--transport", name, "--port", "0"]
        async with serving(served, ROOT, child_env()) as base:
            for spoken in ("streamable-http", "http"):
                done = await trio.to_thread.run_sync(
                    run_cli, "call", f"{base}/mcp", "add", "a=1", "b=2", "--transport", spoken
                )
                assert (done.returncode, done.stdout) == (0, "3\n"), done.stderr
    helps = run_cli("serve", "--help").stdout + run_cli("tools", "--help").stdout
    assert "streamable-http" in helps.split("--transport", 2)[1]  # serve's
    assert "streamable-http" in helps.split("--transport")[-1]  # and the client's


def test_login_takes_its_client_secret_from_the_environment_never_the_command_line() -> None:
    helped = run_cli("login", "--help")
    assert "--client-secret-env" in helped.stdout and "--ask-client-secret" in helped.stdout
    assert "--client-secret " not in helped.stdout + "\n"
    assert "--client-secret\n" not in helped.stdout
    # The environment variable named is read (and its absence said, before any connection).
    unset = run_cli(
        "login", "http://127.0.0.1:9/mcp", "--client-id", "c", "--client-secret-env", "NOPE_X"
    )
    assert unset.returncode == 2
    assert unset.stderr == "trio-mcp: the environment variable NOPE_X is not set\n"
    alone = run_cli("login", "http://127.0.0.1:9/mcp", "--client-secret-env", "X")
    assert alone.returncode == 2
    assert "give the client id too" in alone.stderr
    # The old option still works for now, saying why it goes.
    old = run_cli(
        "login",
        "http://127.0.0.1:9/mcp",
        "--client-id",
        "c",
        "--client-secret",
        "s",
        "--timeout",
        "5",
    )
    assert old.stderr.startswith("trio-mcp: --client-secret is deprecated: ")
    assert "TRIO_MCP_CLIENT_SECRET" in old.stderr.splitlines()[0]
    assert " s " not in old.stderr  # the secret itself is never repeated
