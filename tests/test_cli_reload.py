"""``trio-mcp serve FILE --reload``, for real: a change to the file restarts the server."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from trio_mcp import MCPError, ProtocolError, open_client
from trio_mcp.protocol import SESSION_EXPIRED

from .test_cli import CLI, GUARD, child_env, run_cli, served_line

APP = """
from trio_mcp import Server

server = Server("reloaded")


@server.tool()
def version() -> str:
    return {answer!r}
"""


BLOCKING = """
from pathlib import Path

import trio
from trio_mcp import Server

server = Server("reloaded")


@server.tool()
async def wait() -> str:
    Path("entered.txt").write_text("{version}")
    await trio.sleep_forever()
    return "never"
"""


def children_of(pid: int) -> list[int]:
    """The children of process ``pid``, whichever of its threads started them."""
    tasks = Path(f"/proc/{pid}/task").glob("*/children")
    return sorted(int(word) for task in tasks for word in task.read_text().split())


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def answer(url: str) -> str | None:
    """The ``version`` tool's text, or None while no server answers (a call that meets a
    server as it is replaced is abandoned after a few seconds and asked again)."""
    result = None
    try:
        with trio.move_on_after(5):
            async with open_client(url) as client:
                result = await client.call_tool("version", {})
    except (OSError, MCPError):  # ConnectionClosed: between two servers
        return None
    if result is None:
        return None
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


@asynccontextmanager
async def supervisor(tmp_path: Path, *options: str) -> AsyncIterator[tuple[trio.Process, str]]:
    """``trio-mcp serve app.py --transport http --port 0 --reload OPTIONS`` in ``tmp_path``,
    and the URL it serves at. Its stderr (the supervisor's and every server's log) is read
    all along, so that a full pipe never stops a server, and shown when the body fails."""
    # Bytecode written as by default (the servers cache app.py's, as a user's do).
    env = {k: v for k, v in child_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    process = await trio.lowlevel.open_process(
        [*CLI, "serve", "app.py", "--transport", "http", "--port", "0", "--reload", *options],
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    stderr = process.stderr
    assert stderr is not None
    log = bytearray()
    announced = trio.Event()

    async def read_log() -> None:
        while chunk := await stderr.receive_some(65536):
            log.extend(chunk)
            if served_line(bytes(log)) is not None:
                announced.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_log)
            with trio.fail_after(GUARD):
                await announced.wait()
            url = served_line(bytes(log))
            assert url is not None
            try:
                with trio.fail_after(GUARD):
                    yield process, url
            except BaseException as exc:
                exc.add_note("the supervisor's stderr:\n" + log.decode(errors="replace"))
                raise
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
async def test_a_change_to_the_server_file_restarts_it_and_sigterm_leaves_no_child(
    tmp_path: Path,
) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP.format(answer="one"))
    children: list[int] = []
    async with supervisor(tmp_path) as (process, url):
        assert await answer(url) == "one"
        children = children_of(process.pid)
        assert len(children) == 1
        # The same size, and the same modification time to the second as the code the first
        # server compiled (and cached): the next server runs the new code all the same.
        before = app.stat()
        app.write_text(APP.format(answer="two"))
        os.utime(app, ns=(before.st_atime_ns, before.st_mtime_ns))
        # The same URL (one socket for every child), a new server behind it.
        while (now := await answer(url)) != "two":
            assert now in (None, "one")
            await trio.sleep(0.2)
        assert children_of(process.pid) != children
        children += children_of(process.pid)
        process.send_signal(signal.SIGTERM)
        await process.wait()
    assert process.returncode == 0
    assert not [pid for pid in children if is_running(pid)]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("how", ["drained", "killed"])
async def test_a_call_in_flight_when_the_server_is_replaced_fails_instead_of_waiting(
    tmp_path: Path, how: str
) -> None:
    """A call that is running when the server is replaced gets an error, never a hang: the
    drain's retry error when a change restarts the server, or the lost stream's own error when
    the server dies under it and a new one (which never knew its session) takes the socket."""
    app = tmp_path / "app.py"
    app.write_text(BLOCKING.format(version="one"))
    entered = tmp_path / "entered.txt"
    async with supervisor(tmp_path, "--drain-grace", "0.5") as (process, url):

        async def replace_once_entered() -> None:
            while not entered.exists():  # noqa: ASYNC110 - a file to poll
                await trio.sleep(0.05)
            if how == "killed":
                for pid in children_of(process.pid):
                    os.kill(pid, signal.SIGKILL)
            app.write_text(BLOCKING.format(version="two"))

        async with open_client(url) as client, trio.open_nursery() as calls:
            calls.start_soon(replace_once_entered)
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("wait", {})
        process.send_signal(signal.SIGTERM)
        await process.wait()
    if how == "drained":
        assert info.value.message.startswith("Server shutting down: the request was ended")
    else:
        # The resume met the new server (it never knew the session), or found no server.
        assert info.value.code == SESSION_EXPIRED or info.value.message.startswith(
            "the response stream broke and could not be resumed"
        ), info.value


def test_reload_over_stdio_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP.format(answer="one"))
    done = run_cli("serve", str(tmp_path / "app.py"), "--reload")
    assert done.returncode == 2
    assert done.stderr == (
        "trio-mcp: --reload needs --transport http (or sse, ws): over stdio a restart would "
        "cut the client's session on the pipe\n"
    )


def test_reload_with_an_inherited_socket_is_refused_in_one_line(tmp_path: Path) -> None:
    """``--reload`` binds the one socket its servers share; a socket handed to it is refused."""
    (tmp_path / "app.py").write_text(APP.format(answer="one"))
    app = str(tmp_path / "app.py")
    done = run_cli("serve", app, "--transport", "http", "--fd", "3", "--reload")
    assert done.returncode == 2
    assert done.stderr == (
        "trio-mcp: --reload binds the port itself: give --host and --port, not --fd\n"
    )
