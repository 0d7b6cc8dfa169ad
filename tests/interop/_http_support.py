"""Child processes for the Streamable HTTP interoperability tests: servers and client drivers.

A server is started in the test's nursery (pytest-trio's ``nursery`` fixture, cancelled when
the test ends, which terminates the child). It binds 127.0.0.1 at a free port and announces
``serving MCP at URL`` on stderr; its stderr is read line by line for the markers it writes.

A client driver prints one JSON report on stdout, then keeps its connection open until its
stdin is closed: the test checks the server side (a handler's cancel marker) while the client
is still connected, so a cancel that only happened when the client went away cannot pass.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from ._support import ROOT

READY = "serving MCP at "


class ServerProcess:
    """A server in a child process, and the lines of its stderr so far."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.url = ""
        self._changed = trio.Event()
        self._eof = trio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def read_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        buffer = b""
        while chunk := await stream.receive_some():
            *complete, buffer = (buffer + chunk).split(b"\n")
            self.lines.extend(line.decode(errors="replace") for line in complete)
            self._notify()
        if buffer:
            self.lines.append(buffer.decode(errors="replace"))
        self._eof.set()
        self._notify()

    def matching(self, predicate: Callable[[str], bool]) -> list[str]:
        return [line for line in self.lines if predicate(line)]

    async def wait_for(self, predicate: Callable[[str], bool]) -> str:
        """The first stderr line that satisfies ``predicate``, once the server has written it
        (the caller's hang guard bounds the wait); a failure if the server exits first."""
        while True:
            found = self.matching(predicate)
            if found:
                return found[0]
            if self._eof.is_set():
                pytest.fail("the server exited first; its stderr:\n" + "\n".join(self.lines))
            await self._changed.wait()

    async def stop(self) -> int:
        """SIGTERM, then wait for the exit and the end of stderr; the exit status."""
        self.process.terminate()
        status = await self.process.wait()
        await self._eof.wait()
        return status


async def start_server(nursery: trio.Nursery, command: Sequence[str]) -> ServerProcess:
    """Start ``command`` in ``nursery`` and wait until it serves; its URL is ``.url``."""
    process: trio.Process = await nursery.start(
        functools.partial(
            trio.run_process,
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            cwd=ROOT,
        )
    )
    server = ServerProcess(process)
    nursery.start_soon(server.read_stderr)
    ready = await server.wait_for(lambda line: line.startswith(READY))
    server.url = ready.removeprefix(READY).strip()
    assert server.url.startswith("http://127.0.0.1:"), server.url
    return server


@asynccontextmanager
async def client_driver(command: Sequence[str], stderr_log: Path) -> AsyncIterator[Any]:
    """Run a client driver; yield its JSON report while it stays connected. On exit its stdin
    is closed and it must end with status 0 (it closed its connection cleanly)."""
    with stderr_log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )
    assert process.stdin is not None and process.stdout is not None

    def failure(what: str) -> str:
        return f"{command!r} {what}\n{stderr_log.read_text(errors='replace')}"

    try:
        output = b""
        while b"\n" not in output:
            chunk = await process.stdout.receive_some()
            if not chunk:
                status = await process.wait()
                pytest.fail(failure(f"exited with {status} before its report\n{output!r}"))
            output += chunk
        yield json.loads(output.split(b"\n", 1)[0])
        await process.stdin.aclose()
        status = await process.wait()
        if status != 0:
            pytest.fail(failure(f"exited with {status}"))
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
