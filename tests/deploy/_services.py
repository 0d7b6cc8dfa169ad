"""Real services for the scale-out tests, each on 127.0.0.1 at a free port, for one block.

``async with redis_server() as redis:`` runs a real ``redis-server`` (no persistence, loopback
only; ``persistent=True``: an append-only file synced on every write, so a restart keeps every
acknowledged write) and yields a :class:`Redis` with its ``url``; ``await redis.stop()`` (a
SIGKILL) and ``await redis.start()`` take it away and bring it back on the same port (the
fault tests), ``redis.pause()`` and ``redis.resume()`` hang it (SIGSTOP) and wake it.
The server is killed when the block ends, within :data:`STOP_GUARD` seconds.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from . import system_packages

#: Hang guards, never performance assertions.
START_GUARD = 20
STOP_GUARD = 10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _answers(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    async with stream:
        await stream.send_all(b"PING\r\n")
        with trio.move_on_after(1):
            return (await stream.receive_some(64)).startswith(b"+PONG")
    return False


@attrs.define
class Redis:
    port: int
    directory: Path
    process: trio.Process | None = None
    persistent: bool = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        command = system_packages.find("redis-server")
        assert command is not None
        self.process = await trio.lowlevel.open_process(
            [
                command,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "yes" if self.persistent else "no",
                "--appendfsync",
                "always",
                "--dir",
                str(self.directory),
                "--protected-mode",
                "yes",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with trio.fail_after(START_GUARD):
            while not await _answers(self.port):
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.process.returncode}")
                await trio.sleep(0.05)

    def pause(self) -> None:
        """SIGSTOP: the server hangs (its sockets stay open, nothing answers)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: it answers again, the commands sent meanwhile first."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.kill()
        with trio.move_on_after(STOP_GUARD):
            await process.wait()


@asynccontextmanager
async def redis_server(directory: Path, *, persistent: bool = False) -> AsyncIterator[Redis]:
    """A real redis-server for the block; ``directory`` is its working directory (a tmp_path)."""
    await trio.to_thread.run_sync(system_packages.ensure)
    redis = Redis(free_port(), directory, persistent=persistent)
    await redis.start()
    try:
        yield redis
    finally:
        with trio.CancelScope(shield=True):
            await redis.stop()
