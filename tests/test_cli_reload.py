"""``trio-mcp serve FILE --reload``, for real: a change to the file restarts the server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import trio

from trio_mcp import MCPError, open_client

from .test_cli import CLI, GUARD, child_env, run_cli

APP = """
from trio_mcp import Server

server = Server("reloaded")


@server.tool()
def version() -> str:
    return {answer!r}
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


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
async def test_a_change_to_the_server_file_restarts_it_and_sigterm_leaves_no_child(
    tmp_path: Path,
) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP.format(answer="one"))
    process = await trio.lowlevel.open_process(
        [*CLI, "serve", "app.py", "--transport", "http", "--port", "0", "--reload"],
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=child_env(),
    )
    children: list[int] = []
    try:
        with trio.fail_after(GUARD):
            assert process.stderr is not None
            seen = b""
            while (found := re.search(rb"serving MCP at (http://\S+/mcp)\n", seen)) is None:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, seen
                seen += chunk
            url = found[1].decode()
            assert await answer(url) == "one"
            children = children_of(process.pid)
            assert len(children) == 1
            app.write_text(APP.format(answer="two"))
            # The same URL (one port for every child), a new server behind it.
            while (now := await answer(url)) != "two":
                assert now in (None, "one")
                await trio.sleep(0.2)
            assert children_of(process.pid) != children
            children += children_of(process.pid)
            process.send_signal(signal.SIGTERM)
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
    assert not [pid for pid in children if is_running(pid)]


def test_reload_over_stdio_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP.format(answer="one"))
    done = run_cli("serve", str(tmp_path / "app.py"), "--reload")
    assert done.returncode == 2
    assert done.stderr == (
        "trio-mcp: --reload needs --transport http (or sse, ws): over stdio a restart would "
        "cut the client's session on the pipe\n"
    )
