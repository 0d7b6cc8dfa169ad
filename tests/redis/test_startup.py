"""A start is all or nothing, and readiness follows Redis: real ``trio-mcp`` processes against
real ``redis-server`` processes (a read-only replica, a cluster node, one stopped and resumed).

A process whose Redis cannot be shared (a replica: writes answer READONLY; a node of a Redis
Cluster: commands answer CLUSTERDOWN, MOVED or CROSSSLOT) exits at once with one line and
status 1, never serving; plain hypercorn, given the same app, ends too. A served process whose
Redis stops answering says 503 on its readiness path (bounded, so a Redis that hangs never
hangs it), 200 on its liveness path, and 200 again once Redis is back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

from .._ports import free_port
from ..deploy import system_packages
from ..deploy._services import START_GUARD, STOP_GUARD

#: Hang guards, never performance assertions.
GUARD = 60
SERVERS = Path(__file__).parent.parent / "servers"
ROOT = Path(__file__).parent.parent.parent


async def _pong(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    async with stream:
        try:
            await stream.send_all(b"PING\r\n")
            with trio.move_on_after(1):
                return (await stream.receive_some(64)).startswith(b"+PONG")
        except trio.BrokenResourceError:
            return False  # reset while it starts: not yet
    return False


@asynccontextmanager
async def redis(
    directory: Path, *options: str, port: int | None = None
) -> AsyncIterator[tuple[int, trio.Process]]:
    """A real ``redis-server`` on 127.0.0.1 (``port``, else a free one) with ``options`` for
    the block: (port, process)."""
    await trio.to_thread.run_sync(system_packages.ensure)
    command = system_packages.find("redis-server")
    assert command is not None
    port = port or free_port()
    await trio.Path(directory).mkdir(parents=True, exist_ok=True)
    process = await trio.lowlevel.open_process(
        [
            *(command, "--bind", "127.0.0.1", "--port", str(port), "--save", ""),
            *("--appendonly", "no", "--dir", str(directory), *options),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(START_GUARD):
            while not await _pong(port):
                assert process.poll() is None, "redis-server exited"
                await trio.sleep(0.05)
        yield port, process
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                with trio.move_on_after(STOP_GUARD):
                    await process.wait()


async def serve_against(url: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    """``trio-mcp demo --transport http --redis-url url``, to its end (bounded)."""
    command = [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http", "--port", "0"]
    with trio.fail_after(GUARD):
        return await trio.run_process(
            [*command, "--redis-url", url, *extra],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            stdin=subprocess.DEVNULL,
            # The start's INFO lines aside (the state keys), it says one line.
            env={**os.environ, "TRIO_MCP_LOG_LEVEL": "warning"},
        )


def the_one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """The process ended with status 1 and said one line, ``trio-mcp: cannot start: ...``,
    with no traceback, no password, and never a word of serving."""
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("trio-mcp: cannot start: "), stderr
    assert "Traceback" not in stderr and "s3cret" not in stderr
    return stderr


async def test_serve_against_a_read_only_replica_exits_with_one_line(tmp_path: Path) -> None:
    async with redis(tmp_path / "primary") as (primary, _):
        replica_of = ["--replicaof", "127.0.0.1", str(primary)]
        async with redis(tmp_path / "replica", *replica_of) as (replica, _):
            done = await serve_against(f"redis://:s3cret@127.0.0.1:{replica}/0")
    line = the_one_line(done)
    assert f"Redis at redis://:***@127.0.0.1:{replica}/0 cannot be used" in line
    assert "replica" in line and "primary" in line


async def test_serve_against_a_cluster_node_exits_with_one_line(tmp_path: Path) -> None:
    # A cluster-enabled node with no slots assigned: CLUSTERDOWN to every key.
    node = tmp_path / "node"
    options = ["--cluster-enabled", "yes", "--cluster-config-file", str(node / "nodes.conf")]
    # Its cluster bus port, named: the default (its port + 10000) is past 65535 for a free port
    # above 55535, and the node would not start.
    options += ["--cluster-port", str(free_port())]
    async with redis(node, *options) as (port, _):
        done = await serve_against(f"redis://:s3cret@127.0.0.1:{port}/0", "--node-id", "n1")
    line = the_one_line(done)
    assert f"Redis at redis://:***@127.0.0.1:{port}/0 cannot be used" in line
    assert "Redis Cluster" in line and "redis+cluster://host:port[,host:port...]" in line


async def test_plain_hypercorn_ends_when_the_app_cannot_start(tmp_path: Path) -> None:
    """``hypercorn --worker-class trio`` runs the app's lifespan itself: a start that fails
    ends the process (with ``--workers 0``, status 1; hypercorn 0.18's supervisor of worker
    processes reports 0 for a worker that failed: docs/deploy.md says so)."""
    async with redis(tmp_path / "primary") as (primary, _):
        replica_of = ["--replicaof", "127.0.0.1", str(primary)]
        async with redis(tmp_path / "replica", *replica_of) as (replica, _):
            env = {
                **os.environ,
                "REDIS_APP_URL": f"redis://127.0.0.1:{replica}/0",
                "PYTHONPATH": os.pathsep.join([str(SERVERS), str(ROOT)]),
            }
            for workers in ("0", "1"):
                command = [sys.executable, "-m", "hypercorn", "--worker-class", "trio"]
                command += ["--workers", workers, "--bind", f"127.0.0.1:{free_port()}"]
                with trio.fail_after(GUARD):
                    done = await trio.run_process(
                        [*command, "redis_app:app"],
                        capture_stdout=True,
                        capture_stderr=True,
                        check=False,
                        env=env,
                        stdin=subprocess.DEVNULL,
                    )
                stderr = done.stderr.decode()
                assert "continuing without Lifespan support" not in stderr
                assert "Lifespan failure in startup" in stderr and "replica" in stderr
                if workers == "0":
                    assert done.returncode == 1


async def _status(client: httpx.AsyncClient, url: str) -> int:
    # Each probe bounded by the guard: a readiness check that hangs fails the test.
    with trio.fail_after(GUARD):
        return (await client.get(url)).status_code


async def _until(client: httpx.AsyncClient, url: str, status: int) -> None:
    # Polled over HTTP, as a load balancer would.
    while await _status(client, url) != status:  # noqa: ASYNC110
        await trio.sleep(0.1)


async def test_ready_follows_redis_and_live_stays_200(tmp_path: Path) -> None:
    """SIGSTOP (a Redis that hangs), then SIGCONT; then killed (a Redis gone), then back on
    the same port: /ready 503 while it does not answer, 200 after; /live 200 throughout."""
    async with redis(tmp_path / "a") as (port, redis_process):
        http_port = free_port()
        base = f"http://127.0.0.1:{http_port}"
        command = [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http"]
        command += ["--port", str(http_port), "--redis-url", f"redis://127.0.0.1:{port}/0"]
        process = await trio.lowlevel.open_process(
            command,
            env={**os.environ, "TRIO_MCP_READY_TIMEOUT": "0.5"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            async with httpx.AsyncClient(timeout=GUARD) as client:
                with trio.fail_after(GUARD):
                    while True:
                        try:
                            if await _status(client, base + "/ready") == 200:
                                break
                        except httpx.ConnectError:
                            await trio.sleep(0.05)
                assert await _status(client, base + "/live") == 200

                redis_process.send_signal(signal.SIGSTOP)
                with trio.fail_after(GUARD):
                    await _until(client, base + "/ready", 503)
                ready = await client.get(base + "/ready")
                assert ready.json() == {"status": "unavailable"}
                assert ready.headers["retry-after"] == "1"
                assert await _status(client, base + "/live") == 200

                redis_process.send_signal(signal.SIGCONT)
                with trio.fail_after(GUARD):
                    await _until(client, base + "/ready", 200)
                assert (await client.get(base + "/ready")).json() == {"status": "ready"}

                redis_process.kill()
                await redis_process.wait()
                with trio.fail_after(GUARD):
                    await _until(client, base + "/ready", 503)
                assert await _status(client, base + "/live") == 200
                async with redis(tmp_path / "b", port=port):
                    with trio.fail_after(GUARD):
                        await _until(client, base + "/ready", 200)
                    assert await _status(client, base + "/live") == 200
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
