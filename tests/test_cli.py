"""The ``trio-mcp`` command for real: child processes, a pty, hypercorn, files served by path."""

from __future__ import annotations

import argparse
import os
import pty
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio

from trio_mcp import Auth, Command, __version__, open_client
from trio_mcp.testing import stdio_client

ROOT = Path(__file__).resolve().parents[1]
MEDIA = ROOT / "tests" / "servers" / "media_server.py"
#: A hang guard for anything that spawns a process, never a performance assertion.
GUARD = 60
CLI = [sys.executable, "-m", "trio_mcp"]
DEMO_LINE = f"{sys.executable} -m trio_mcp demo"
MEDIA_LINE = f"{sys.executable} -m trio_mcp serve {MEDIA}"
HYPERCORN = [sys.executable, "-m", "hypercorn", "--bind", "127.0.0.1:0"]


def child_env() -> dict[str, str]:
    """This environment, with this checkout importable from any working directory."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=cwd,
        env=child_env(),
        check=False,
    )


def served_line(log: bytes, path: bytes = rb"/mcp") -> str | None:
    """The URL of the first ``serving MCP at URL`` line of a ``serve`` child's stderr whose URL
    ends in ``path``, if one came yet."""
    found = re.search(rb"serving MCP at (http://\S+" + re.escape(path) + rb")\n", log)
    return None if found is None else found[1].decode()


async def served_url(process: trio.Process, path: bytes = rb"/mcp") -> str:
    """The URL a ``serve`` child says it serves at, read as its stderr comes; the child's
    stderr must be a pipe."""
    assert process.stderr is not None
    seen = b""
    while (url := served_line(seen, path)) is None:
        chunk = await process.stderr.receive_some(4096)
        assert chunk, seen
        seen += chunk
    return url


def test_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"trio-mcp {__version__}"


def test_key_value_arguments_are_typed_by_the_tools_schema() -> None:
    done = run_cli(
        "call", MEDIA_LINE, "typed", "count=3", "ratio=2", "flag=true", "name=007", 'tags=["a"]'
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "int:3 float:2.0 bool:True str:'007' list:['a']\n"
    demo = run_cli("call", DEMO_LINE, "add", "a=1", "b=2.5")
    assert demo.stdout == "3.5\n", demo.stderr
    # A string property keeps what was written, even when it looks like JSON.
    echoed = run_cli("call", DEMO_LINE, "echo", "text=[1, 2]")
    assert echoed.stdout == "[1, 2]\n", echoed.stderr
    # What the schema refuses is the server's to say, as a tool error.
    bad = run_cli("call", DEMO_LINE, "add", "a=x", "b=1")
    assert bad.returncode == 1
    assert "expected a number" in bad.stderr
    assert "Traceback" not in bad.stderr
    malformed = run_cli("call", DEMO_LINE, "add", "a")
    assert malformed.returncode == 2
    assert malformed.stderr == "trio-mcp: expected key=value or one JSON object, got 'a'\n"


def test_resources_templates_read_prompts_and_get() -> None:
    resources = run_cli("resources", DEMO_LINE)
    assert resources.returncode == 0, resources.stderr
    assert resources.stdout == (
        "demo://readme  About this server\n"
        "ui://trio-mcp-demo/adder  A view of add's result that can add again\n"
    )
    templates = run_cli("templates", DEMO_LINE)
    assert templates.stdout == "demo://greeting/{name}  A greeting by name\n", templates.stderr
    read = run_cli("read", DEMO_LINE, "demo://greeting/Bob")
    assert read.stdout == "Hello, Bob!\n", read.stderr
    prompts = run_cli("prompts", DEMO_LINE)
    assert prompts.stdout == "greeting(name, [style])  A friendly greeting for someone\n"
    got = run_cli("get", DEMO_LINE, "greeting", "name=Ada", "style=short")
    assert got.stdout == "user: Write a short greeting for Ada.\n", got.stderr
    as_json = run_cli("prompts", DEMO_LINE, "--json")
    assert [p["name"] for p in orjson.loads(as_json.stdout)] == ["greeting"]
    missing = run_cli("read", DEMO_LINE, "demo://nothing")
    assert missing.returncode == 1
    assert missing.stderr.startswith("trio-mcp: ")
    assert "Traceback" not in missing.stderr


def test_images_audio_and_binary_resources_are_saved_to_files(tmp_path: Path) -> None:
    from tests.servers.media_server import PNG, WAV

    saved = tmp_path / "out"
    picture = run_cli("call", MEDIA_LINE, "picture", "--save-dir", str(saved))
    assert picture.returncode == 0, picture.stderr
    first, caption = picture.stdout.splitlines()
    assert caption == "a caption"
    match = re.fullmatch(r"image \(image/png\) saved to (.+\.png)", first)
    assert match is not None, first
    assert Path(match[1]).parent == saved
    assert Path(match[1]).read_bytes() == PNG
    sound = run_cli("call", MEDIA_LINE, "sound", "--save-dir", str(saved))
    match = re.fullmatch(r"audio \(audio/wav\) saved to (.+\.wav)\n", sound.stdout)
    assert match is not None, sound.stdout
    assert Path(match[1]).read_bytes() == WAV
    logo = run_cli("read", MEDIA_LINE, "media://logo", "--save-dir", str(saved))
    match = re.fullmatch(r"media://logo \(image/png\) saved to (.+\.png)\n", logo.stdout)
    assert match is not None, logo.stdout
    assert Path(match[1]).read_bytes() == PNG
    assert "iVBOR" not in picture.stdout + logo.stdout  # no base64 on the terminal


def test_server_log_messages_are_shown_on_stderr() -> None:
    done = run_cli("call", MEDIA_LINE, "chatty", "word=hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    assert "[info media] heard hi" in done.stderr.splitlines()
    assert "debug hi" not in done.stderr
    verbose = run_cli("call", MEDIA_LINE, "chatty", "word=hi", "--log-level", "debug")
    assert "[debug] debug hi" in verbose.stderr.splitlines()


def test_no_escape_codes_when_stderr_is_not_a_terminal() -> None:
    done = run_cli("call", DEMO_LINE, "sleep", "seconds=0.3")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "slept 0.3s\n"
    assert "progress 0.3/0.3  slept 0.3s" in done.stderr.splitlines()
    assert "\x1b" not in done.stderr
    assert "\r" not in done.stderr


def test_timeout_cancels_and_fails() -> None:
    done = run_cli("call", DEMO_LINE, "sleep", "seconds=600", "--timeout", "0.5")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "trio-mcp: no answer within --timeout 0.5s; cancelled"
    assert "Traceback" not in done.stderr


GUARDED_APP = """
from trio_mcp._demo import demo_server

inner = demo_server().http_app()


async def app(scope, receive, send):
    if scope["type"] == "http" and (b"authorization", b"Bearer s3cret") not in scope["headers"]:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no token"})
        return
    await inner(scope, receive, send)
"""


async def test_headers_reach_an_http_server(tmp_path: Path) -> None:
    (tmp_path / "guarded.py").write_text(GUARDED_APP)
    with trio.fail_after(GUARD):
        process = await trio.lowlevel.open_process(
            [*HYPERCORN, "--worker-class", "trio", "guarded:app"],
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=child_env(),
        )
        try:
            assert process.stderr is not None
            seen = b""
            while (found := re.search(rb"http://127\.0\.0\.1:(\d+)", seen)) is None:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, seen
                seen += chunk
            url = f"http://127.0.0.1:{found[1].decode()}/mcp"
            refused = await trio.to_thread.run_sync(run_cli, "tools", url)
            assert refused.returncode == 1
            assert "401" in refused.stderr
            allowed = await trio.to_thread.run_sync(
                run_cli, "call", url, "echo", "text=hi", "--header", "Authorization: Bearer s3cret"
            )
            assert allowed.returncode == 0, allowed.stderr
            assert allowed.stdout == "hi\n"
            wrong = await trio.to_thread.run_sync(run_cli, "tools", DEMO_LINE, "-H", "a:b")
            assert wrong.returncode == 2
            assert wrong.stderr == "trio-mcp: --header is for an http(s):// or ws(s):// TARGET\n"
        finally:
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


# -- serve: a file by its path, from any working directory ----------------------------------------

ONE_SERVER = """
from helper import GREETING
from trio_mcp import Server

mine = Server("by-path")


@mine.tool()
def hello() -> str:
    return GREETING
"""

TWO_SERVERS = """
from trio_mcp import Server

first = Server("first")
second = Server("second")


@second.tool()
def which() -> str:
    return "second"
"""


def test_serve_a_file_by_path_from_another_directory(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(ONE_SERVER)
    (project / "helper.py").write_text('GREETING = "hello from a file"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # As an MCP host runs it: a command and its arguments, in a directory of its own.
    for spec, cwd in [
        (str(project / "app.py"), elsewhere),
        (f"{project / 'app.py'}:mine", elsewhere),
        ("./app.py", project),
        ("app.py:mine", project),
    ]:
        done = run_cli("call", f"{sys.executable} -m trio_mcp serve {spec}", "hello", cwd=cwd)
        assert done.returncode == 0, (spec, done.stderr)
        assert done.stdout == "hello from a file\n"
    # A file named like a module already loaded is served without replacing that module.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "helper.py").write_text('GREETING = "still served"\n')
    (shadow / "trio_mcp.py").write_text(ONE_SERVER)  # it imports the real trio_mcp
    serve_shadow = f"{sys.executable} -m trio_mcp serve {shadow / 'trio_mcp.py'}"
    done = run_cli("call", serve_shadow, "hello", cwd=elsewhere)
    assert done.stdout == "still served\n", done.stderr


def test_a_bad_serve_target_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "two.py").write_text(TWO_SERVERS)
    (tmp_path / "none.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_text("raise ValueError('boom')\n")
    expected = {
        "./missing.py": "trio-mcp: no such file: ",
        "./two.py": "trio-mcp: ./two.py defines several servers (first, second); pick one",
        "./none.py": "trio-mcp: ./none.py defines no trio_mcp.Server",
        "./none.py:x": "trio-mcp: './none.py:x' is a int, not a trio_mcp.Server",
        "./none.py:y": "trio-mcp: './none.py' has no attribute 'y'",
        "./broken.py": "trio-mcp: importing ",
        "no_such_module:server": "trio-mcp: cannot import 'no_such_module'",
    }
    for spec, start in expected.items():
        done = run_cli("serve", spec, cwd=tmp_path)
        assert done.returncode == 2, (spec, done.stderr)
        assert done.stderr.startswith(start), (spec, done.stderr)
        assert len(done.stderr.splitlines()) == 1, done.stderr
    second = f"{sys.executable} -m trio_mcp serve two.py:second"
    picked = run_cli("call", second, "which", cwd=tmp_path)
    assert picked.stdout == "second\n", picked.stderr
    # A server without prompts has none to list: said, not failed with "Method not found".
    no_prompts = run_cli("prompts", second, cwd=tmp_path)
    assert no_prompts.returncode == 0
    assert no_prompts.stderr == "trio-mcp: the server offers no prompts\n"
    as_json = run_cli("resources", second, "--json", cwd=tmp_path)
    assert as_json.stdout == "[]\n", as_json.stderr


# -- stdio serving: what a person at a terminal sees, and Ctrl-C ----------------------------------


async def _read_until(fd: int, marker: bytes, seen: bytes = b"") -> bytes:
    while marker not in seen:
        await trio.lowlevel.wait_readable(fd)
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the pty's other side is gone
            chunk = b""
        assert chunk, seen
        seen += chunk
    return seen


async def _drain(fd: int) -> bytes:
    seen = b""
    while True:
        with trio.move_on_after(5):
            await trio.lowlevel.wait_readable(fd)
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return seen
        if not chunk:
            return seen
        seen += chunk


async def test_demo_on_a_terminal_says_what_it_is_and_ctrl_c_exits_130_quietly() -> None:
    controller, terminal = pty.openpty()
    try:
        with trio.fail_after(GUARD):
            process = await trio.lowlevel.open_process(
                [*CLI, "demo"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=terminal,
                cwd=ROOT,
                env=child_env(),
            )
            os.close(terminal)
            terminal = -1
            seen = await _read_until(controller, b"Ctrl-C")
            assert b"trio-mcp-demo 0.1.0: an MCP server on stdio" in seen
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 130
            seen += await _drain(controller)
            assert b"Traceback" not in seen
            assert b"Error" not in seen
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)


async def test_without_a_terminal_stderr_stays_silent_and_ctrl_c_exits_130() -> None:
    with trio.fail_after(GUARD):
        async with stdio_client([*CLI, "demo"], env=child_env()) as client:
            assert client.server_info.name == "trio-mcp-demo"
        process = await trio.lowlevel.open_process(
            [*CLI, "demo"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=child_env(),
        )
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        # Once it answers a ping it is serving (and has said whatever it says at start).
        await process.stdin.send_all(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        answer = await process.stdout.receive_some(4096)
        assert orjson.loads(answer) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        process.send_signal(signal.SIGINT)
        assert await process.wait() == 130
        stderr = b""
        while chunk := await process.stderr.receive_some(4096):
            stderr += chunk
        assert stderr == b""


# -- outside Trio, and server.run() ---------------------------------------------------------------

RUN_SCRIPT = """
import sys

from trio_mcp import Server

server = Server("runner", "1.2.3")


@server.tool()
def ping() -> str:
    return "pong"


if sys.argv[1] == "stdio":
    server.run()
else:
    server.run("http", port=0)
"""


async def test_server_run_serves_stdio_and_http(tmp_path: Path) -> None:
    script = tmp_path / "runner.py"
    script.write_text(RUN_SCRIPT)
    with trio.fail_after(GUARD):
        async with open_client(
            Command([sys.executable, str(script), "stdio"], stderr="discard", env=child_env())
        ) as client:
            assert client.server_info.version == "1.2.3"
            assert (await client.call_tool("ping")).content[0].text == "pong"  # type: ignore[union-attr]
        process = await trio.lowlevel.open_process(
            [sys.executable, str(script), "http"],
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=child_env(),
        )
        async with open_client(await served_url(process)) as client:
            assert (await client.call_tool("ping")).content[0].text == "pong"  # type: ignore[union-attr]
        process.send_signal(signal.SIGINT)  # over HTTP, a graceful shutdown
        assert await process.wait() == 0
        assert process.stderr is not None
        seen = b""  # what it wrote after the line that named its URL
        while chunk := await process.stderr.receive_some(4096):
            seen += chunk
        assert b"Traceback" not in seen


async def test_serve_fd_serves_on_the_listening_socket_it_inherits() -> None:
    """``--fd N``: the server serves on a socket bound and handed down by its parent (a
    supervisor, systemd's socket activation), at that socket's port whatever ``--port`` says."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        process = await trio.lowlevel.open_process(
            [*CLI, "demo", *HTTP, "--port", "1", "--fd", str(sock.fileno())],
            stderr=subprocess.PIPE,
            env=child_env(),
            pass_fds=[sock.fileno()],
        )
    try:  # the child's copy of the socket is the only one now
        with trio.fail_after(GUARD):
            url = await served_url(process)
            assert url == f"http://127.0.0.1:{port}/mcp"
            async with open_client(url) as client:
                assert "add" in [tool.name for tool in await client.list_tools()]
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_serve_fd_that_is_no_socket_is_one_line() -> None:
    done = run_cli("demo", *HTTP, "--fd", "97")
    assert done.returncode == 2
    assert done.stderr == "trio-mcp: --fd 97: not a socket (Bad file descriptor)\n"


def test_asyncio_run_of_serve_stdio_names_the_real_cause() -> None:
    code = "import asyncio\nfrom trio_mcp import Server\nasyncio.run(Server('x').serve_stdio())\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=GUARD,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "must run under Trio" in last
    assert "trio.run(server.serve_stdio)" in last
    assert "server.run()" in last


def test_hypercorns_asyncio_worker_is_told_to_use_the_trio_worker(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "from trio_mcp._demo import demo_server\napp = demo_server().http_app()\n"
    )
    done = subprocess.run(
        [*HYPERCORN, "--worker-class", "asyncio", "app:app"],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=tmp_path,
        env=child_env(),
        check=False,
    )
    assert "start hypercorn with --worker-class trio" in done.stderr
    assert "lifespan did not run" not in done.stderr


@pytest.mark.parametrize("transport", ["websocket"])
def test_server_run_refuses_an_unknown_transport(transport: str) -> None:
    from trio_mcp import Server

    with pytest.raises(ValueError, match="transport must be 'stdio', 'streamable-http'"):
        Server("x").run(transport)


# -- OAuth ---------------------------------------------------------------------------------------


async def test_login_then_tools_against_a_server_protected_by_oidc_provider(
    tmp_path: Path,
) -> None:
    """The installed ``trio-mcp`` script: ``login`` shows the sign-in URL (the harness's browser
    signs in as alice and lands on the script's loopback receiver), keeps the tokens on disk
    (0600), and ``tools`` then works without a sign-in."""
    import httpx

    from .auth._oidc import drive_login, oidc_provider, protected_mcp_server

    script = Path(sys.executable).parent / "trio-mcp"
    assert script.exists(), "the trio-mcp console script is not installed beside this Python"
    tokens = tmp_path / "tokens"
    # BROWSER=true: the script "opens" the browser with a command that does nothing.
    env = {**child_env(), "TRIO_MCP_TOKEN_DIR": str(tokens), "BROWSER": "true"}
    with trio.fail_after(GUARD):
        async with oidc_provider() as op, protected_mcp_server(op.issuer) as url:
            login = await trio.lowlevel.open_process(
                [str(script), "login", url],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            assert login.stderr is not None
            seen = b""
            while b"sign in at " not in seen or not seen.endswith(b"\n"):
                chunk = await login.stderr.receive_some(65536)
                assert chunk, f"login ended before showing a URL: {seen!r}"
                seen += chunk
            shown = seen.decode().split("sign in at ", 1)[1].split()[0]
            landed = await drive_login(shown)
            async with httpx.AsyncClient() as http:
                page = await http.get(landed)
            assert page.status_code == 200
            rest = b""
            async for chunk in login.stderr:
                rest += chunk
            assert await login.wait() == 0, rest
            assert f"signed in to {url}".encode() in rest
            stored = list(tokens.rglob("*.json"))
            assert stored and all(p.stat().st_mode & 0o777 == 0o600 for p in stored)
            listed = await trio.run_process(
                [str(script), "tools", url, "--login-timeout", "5"],
                capture_stdout=True,
                capture_stderr=True,
                env=env,
                check=False,
            )
            assert listed.returncode == 0, listed.stderr
            assert "whoami" in listed.stdout.decode()
            assert b"sign in at" not in listed.stderr


# -- serving protected: the --auth options --------------------------------------------------------

HTTP = ["--transport", "http"]
INTROSPECT = ["--auth-introspect", "http://127.0.0.1:1/introspect", "--auth-client-id", "rs"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([*HTTP, "--auth-scope", "mcp:tools"], "--auth-scope is for a protected server: add "),
        ([*HTTP, "--public-url", "http://127.0.0.1:1/mcp"], "--public-url is for a protected"),
        ([*HTTP, "--auth-client-id", "rs"], "--auth-client-id is for --auth-introspect"),
        ([*HTTP, "--auth-client-secret-env", "S"], "--auth-client-secret-env is for --auth-intr"),
        ([*HTTP, "--auth-client-auth", "client_secret_post"], "--auth-client-auth is for --auth-"),
        ([*HTTP, *INTROSPECT[:2]], "--auth-introspect needs --auth-client-id"),
        (
            [*HTTP, *INTROSPECT, "--auth-token-env", "DEV"],
            "--auth-introspect and --auth-token-env are two sources of tokens: choose one",
        ),
        (
            [*HTTP, "--auth-issuer", "http://127.0.0.1:1", "--auth-token-env", "DEV"],
            "--auth-token-env serves development tokens of its own: it takes no --auth-issuer",
        ),
        (["--auth-issuer", "http://127.0.0.1:1"], "the --auth options protect an HTTP server"),
        ([*HTTP, "--auth-token-env", "DEV", "--host", "0.0.0.0"], "--host '0.0.0.0' listens on"),
        ([*HTTP, "--auth-token-env", "DEV", "--host", "::"], "--host '::' listens on every"),
        ([*HTTP, "--auth-token-env", "UNSET"], "the environment variable UNSET is not set"),
        ([*HTTP, "--auth-token-env", "SPACED"], "SPACED does not hold a bearer token"),
        ([*HTTP, "--auth-token-env", "DEV", "--public-url", "ftp://x/mcp"], "--public-url must"),
        ([*HTTP, "--auth-issuer", "127.0.0.1:9000"], "--auth-issuer must be an http(s):// URL"),
        ([*HTTP, "--auth-introspect", "/i", "--auth-client-id", "rs"], "--auth-introspect must"),
        ([*HTTP, "--auth-token-env", "DEV", "--auth-scope", "a b"], "required_scopes: 'a b' is"),
        ([*HTTP, *INTROSPECT], "the environment variable TRIO_MCP_AUTH_CLIENT_SECRET is not set"),
        (
            [*HTTP, *INTROSPECT, "--auth-client-secret-env", "UNSET"],
            "the environment variable UNSET is not set",
        ),
    ],
)
def test_auth_options_that_make_no_sense_are_one_line_and_exit_2(
    options: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trio_mcp._cli import main

    monkeypatch.setenv("DEV", "dev-token")
    monkeypatch.setenv("SPACED", "two words")
    monkeypatch.delenv("UNSET", raising=False)
    monkeypatch.delenv("TRIO_MCP_AUTH_CLIENT_SECRET", raising=False)
    assert main(["demo", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trio-mcp: {message}"), err
    assert len(err.splitlines()) == 1
    assert "two words" not in err  # a token is never shown, not even a malformed one


def test_no_secret_is_taken_on_the_command_line() -> None:
    from trio_mcp._cli import build_parser

    for option in ("--auth-client-secret", "--client-secret", "--auth-token"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["demo", *HTTP, *INTROSPECT, option, "s3cret"])


SELF_PROTECTED = """
from trio_mcp import Auth, Server, StaticTokenVerifier

guarded = Server("guarded", auth=Auth(StaticTokenVerifier({}), resource="http://127.0.0.1:1/mcp"))
"""


def test_a_served_file_with_an_auth_of_its_own_takes_no_auth_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_mcp._cli import main

    monkeypatch.setenv("DEV", "dev-token")
    (tmp_path / "guarded_app.py").write_text(SELF_PROTECTED)
    spec = str(tmp_path / "guarded_app.py")
    assert main(["serve", spec, *HTTP, "--auth-token-env", "DEV"]) == 2
    assert capsys.readouterr().err == (
        f"trio-mcp: {spec} has an authorization of its own (Server(auth=...)): "
        "the --auth options would replace it\n"
    )


def _protected_demo(*options: str) -> tuple[argparse.Namespace, Auth]:
    """What ``demo --transport http OPTIONS`` builds for its auth, bound as it binds first."""
    from trio_mcp._cli import build_parser
    from trio_mcp._demo import add_signed_in_tools, demo_server
    from trio_mcp._serve_http import build_auth, take_listener

    args = build_parser().parse_args(["demo", *HTTP, *options])
    take_listener(args)
    if args.fd is not None:
        os.close(args.fd)  # nothing serves it here
    server = demo_server()
    add_signed_in_tools(server)
    return args, build_auth(args, server)


async def test_a_development_token_stands_for_a_developer_with_every_scope_the_server_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trio_mcp import InvalidToken

    monkeypatch.setenv("DEV", "dev-token")
    args, auth = _protected_demo("--port", "0", "--auth-token-env", "DEV", "--auth-scope", "a:b")
    # --port 0: a socket is bound first, since the resource names its port.
    assert args.port != 0
    assert auth.resource == f"http://127.0.0.1:{args.port}/mcp"
    assert auth.bearer_only  # no authorization server: nothing to discover
    assert auth.required_scopes == {"a:b"}
    principal = await auth.authenticate(["Bearer dev-token"])
    assert principal.subject == "developer"
    assert principal.scopes == {"a:b", "mcp:admin"}
    with pytest.raises(InvalidToken):
        await auth.authenticate(["Bearer dev-tokens"])


def test_the_issuer_and_introspection_options_build_their_verifiers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trio_mcp import IntrospectionVerifier, JWTVerifier

    issuer = ["--auth-issuer", "http://127.0.0.1:9000", "--auth-scope", "mcp:tools"]
    _, auth = _protected_demo("--port", "8123", *issuer)
    assert isinstance(auth.verifier, JWTVerifier)
    assert auth.verifier.issuer == "http://127.0.0.1:9000"
    assert list(auth.authorization_servers) == ["http://127.0.0.1:9000"]
    assert auth.required_scopes == {"mcp:tools"}
    assert auth.resource == "http://127.0.0.1:8123/mcp"

    monkeypatch.setenv("RS_SECRET", "rs-secret")
    introspect = [*INTROSPECT, "--auth-client-secret-env", "RS_SECRET"]
    _, auth = _protected_demo("--port", "8123", *introspect)
    assert isinstance(auth.verifier, IntrospectionVerifier)
    assert (auth.verifier.endpoint, auth.verifier.client_id) == (INTROSPECT[1], "rs")
    assert auth.verifier.auth_method == "client_secret_basic"
    assert auth.verifier.issuer is None
    assert auth.bearer_only  # no issuer named: nothing for a client to discover
    _, auth = _protected_demo(
        "--port", "8123", *introspect, *issuer, "--auth-client-auth", "client_secret_post"
    )
    assert isinstance(auth.verifier, IntrospectionVerifier)
    assert auth.verifier.auth_method == "client_secret_post"
    assert auth.verifier.issuer == "http://127.0.0.1:9000"  # the introspection's iss, checked
    assert list(auth.authorization_servers) == ["http://127.0.0.1:9000"]


def test_the_public_url_is_the_binds_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEV", "dev-token")
    _, auth = _protected_demo("--host", "::1", "--port", "8123", "--auth-token-env", "DEV")
    assert auth.resource == "http://[::1]:8123/mcp"
    args, auth = _protected_demo(
        "--host", "0.0.0.0", "--auth-token-env", "DEV", "--public-url", "https://MCP.example/mcp/"
    )
    assert auth.resource == "https://mcp.example/mcp/"
    assert args.port == 8000


async def test_the_demo_served_with_a_development_token(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--auth-token-env``: bearer-only (no metadata to discover), the one token accepted as
    the developer with every scope, any other refused; the token never in the server's log."""
    import secrets

    import httpx

    from .interop._http_support import start_server

    token = secrets.token_urlsafe(24)
    monkeypatch.setenv("TRIO_MCP_TEST_TOKEN", token)
    command = [*CLI, "demo", *HTTP, "--port", "0", "--auth-token-env", "TRIO_MCP_TEST_TOKEN"]
    with trio.fail_after(GUARD):
        server = await start_server(nursery, command)
        async with httpx.AsyncClient(timeout=10) as http:
            refused = await http.post(server.url, json={})
            wrong = await http.post(
                server.url, json={}, headers={"Authorization": f"Bearer {token}x"}
            )
            base = server.url.removesuffix("/mcp")
            metadata = await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "resource_metadata" not in refused.headers["www-authenticate"]
        assert wrong.status_code == 401
        assert metadata.status_code == 404
        header = ["--header", f"Authorization: Bearer {token}"]
        whoami = await trio.to_thread.run_sync(run_cli, "call", server.url, "whoami", *header)
        assert whoami.stdout == "developer (client unknown; scopes: mcp:admin)\n", whoami.stderr
        admin = await trio.to_thread.run_sync(run_cli, "call", server.url, "admin", *header)
        assert admin.stdout == "developer is signed in as an administrator\n", admin.stderr
        assert await server.stop() == 0
    assert not [line for line in server.lines if token in line]


async def test_the_demo_served_with_introspection(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--auth-introspect``: oidc-provider's opaque tokens, asked about at its introspection
    endpoint as the resource's own client (``client_secret_post``, the secret from the
    environment); the per-tool scope still holds, and no token or secret reaches the log."""
    from .auth._oidc import oidc_provider
    from .interop._http_support import start_server

    with trio.fail_after(GUARD):
        async with oidc_provider(access_token_format="opaque") as op:
            monkeypatch.setenv("TRIO_MCP_AUTH_CLIENT_SECRET", op.resource_client_secret)
            command = [*CLI, "demo", *HTTP, "--port", "0", "--auth-issuer", op.issuer]
            command += ["--auth-introspect", op.introspection_endpoint]
            command += ["--auth-client-id", op.resource_client_id]
            command += ["--auth-client-auth", "client_secret_post", "--auth-scope", "mcp:tools"]
            server = await start_server(nursery, command)
            token = await op.token(server.url, "mcp:tools")
            assert not token.startswith("eyJ")  # opaque: only introspection can tell
            header = ["--header", f"Authorization: Bearer {token}"]
            whoami = await trio.to_thread.run_sync(run_cli, "call", server.url, "whoami", *header)
            assert whoami.stdout == f"alice (client {op.client_id}; scopes: mcp:tools)\n", (
                whoami.stderr
            )
            admin = await trio.to_thread.run_sync(run_cli, "call", server.url, "admin", *header)
            assert admin.returncode == 1
            assert "insufficient scope" in admin.stderr, admin.stderr
            assert "mcp:admin" in admin.stderr
            assert await server.stop() == 0
    logged = "\n".join(server.lines)
    assert token not in logged
    assert op.resource_client_secret not in logged


@pytest.mark.parametrize(
    "options",
    [
        ["--transport", "http", "--any-worker"],
        ["--transport", "http", "--any-worker", "--redis-url", "redis://127.0.0.1:1/0"],
        ["--transport", "http", "--any-worker", "--node-id", "n1"],
        ["--any-worker", "--redis-url", "redis://127.0.0.1:1/0", "--node-id", "n1"],
    ],
)
def test_any_worker_needs_http_a_redis_url_and_a_node_id(
    options: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_mcp._cli import main

    monkeypatch.delenv("TRIO_MCP_REDIS_URL", raising=False)
    monkeypatch.delenv("TRIO_MCP_NODE_ID", raising=False)
    assert main(["demo", *options]) == 2
    assert capsys.readouterr().err == (
        "trio-mcp: --any-worker needs --transport http, --redis-url and --node-id\n"
    )
