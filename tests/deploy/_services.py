"""Real services for the scale-out tests, each on 127.0.0.1 at a free port, for one block.

``async with redis_server() as redis:`` runs a real ``redis-server`` (no persistence, loopback
only; ``persistent=True``: an append-only file synced on every write, so a restart keeps every
acknowledged write) and yields a :class:`Redis` with its ``url``; ``await redis.stop()`` (a
SIGKILL) and ``await redis.start()`` take it away and bring it back on the same port (the
fault tests), ``redis.pause()`` and ``redis.resume()`` hang it (SIGSTOP) and wake it.
The server is killed when the block ends, within :data:`STOP_GUARD` seconds.

:class:`RedisCluster` is a real three-primary Redis Cluster, started once for a test session
(the ``redis_cluster`` fixture) and emptied before each test that uses it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from .._ports import free_port
from . import system_packages

#: Hang guards, never performance assertions.
START_GUARD = 20
STOP_GUARD = 10


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


# -- a Redis Cluster -----------------------------------------------------------------------------

#: How many primaries the test cluster has (the fewest ``redis-cli --cluster create`` takes).
CLUSTER_PRIMARIES = 3


def _pong_sync(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _cli(port: int, *command: str) -> str:
    cli = system_packages.find("redis-cli")
    assert cli is not None, "redis-cli comes with redis-server (the redis-tools package)"
    done = subprocess.run(
        [cli, "-h", "127.0.0.1", "-p", str(port), *command],
        capture_output=True,
        text=True,
        timeout=START_GUARD,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"redis-cli {' '.join(command)}: {done.stdout}{done.stderr}")
    return done.stdout


@attrs.define
class RedisCluster:
    """A real three-primary Redis Cluster (``redis-server --cluster-enabled yes`` on free ports
    of 127.0.0.1, joined by ``redis-cli --cluster create``), started and stopped synchronously
    so that one serves a whole test session (see the ``redis_cluster`` fixture)."""

    directory: Path
    ports: list[int] = attrs.Factory(list)
    processes: list[subprocess.Popen[bytes]] = attrs.Factory(list)

    @property
    def url(self) -> str:
        """The cluster URL trio_mcp takes: every primary, as seed nodes."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self) -> None:
        system_packages.ensure()
        command = system_packages.find("redis-server")
        assert command is not None
        for number in range(CLUSTER_PRIMARIES):
            port = free_port()
            node = self.directory / f"node{number}"
            node.mkdir(parents=True, exist_ok=True)
            self.ports.append(port)
            self.processes.append(
                subprocess.Popen(
                    [
                        *(command, "--bind", "127.0.0.1", "--port", str(port), "--save", ""),
                        *("--appendonly", "no", "--dir", str(node), "--protected-mode", "yes"),
                        *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                        *("--cluster-node-timeout", "5000"),
                        # The cluster bus's port, else port + 10000 (past 65535 for some).
                        *("--cluster-port", str(free_port())),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = time.monotonic() + START_GUARD
        for port, process in zip(self.ports, self.processes, strict=True):
            while not _pong_sync(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server (cluster node :{port}) did not start")
                time.sleep(0.05)
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        _cli(
            self.ports[0], "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"
        )
        # Every node knows every slot's owner before anybody uses it.
        for port in self.ports:
            while "cluster_state:ok" not in _cli(port, "cluster", "info"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the cluster is not ok on :{port}")
                time.sleep(0.05)

    def flush(self) -> None:
        """Empty every primary (between tests sharing the cluster)."""
        for port in self.ports:
            _cli(port, "flushall")

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait(timeout=STOP_GUARD)
        self.processes.clear()


#: The kinds of shared Redis the fleet tests run on.
KINDS = ("single", "cluster")


@asynccontextmanager
async def shared_redis(
    kind: str, directory: Path, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """The URL of a real Redis of ``kind`` for the block: a fresh ``redis-server``
    (``"single"``), or the session's Redis Cluster emptied (``"cluster"``, its URL a
    ``redis+cluster://`` one naming every primary)."""
    if kind == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        await trio.to_thread.run_sync(cluster.flush)
        yield cluster.url
        return
    async with redis_server(directory) as redis:
        yield redis.url
