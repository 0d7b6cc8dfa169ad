"""Resumption on another worker: two real hypercorn processes share a real redis-server; the
worker holding a session is killed with SIGKILL, and the other serves the client's resume from
the shared event store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

from .._http import call_body
from .._ports import free_port
from ._services import redis_server
from ._streams import open_session, progress_of, read_then_drop, resume

#: A hang guard, never a performance assertion.
GUARD = 60

APP = textwrap.dedent(
    """
    import os

    import trio

    from trio_mcp import HttpOptions, RedisEventStore, ScaleOut, Server
    from trio_mcp.server import Context

    server = Server("resume-probe")


    @server.tool()
    async def steps(ctx: Context, count: int, hang: bool = False) -> str:
        for step in range(count):
            await ctx.report_progress(step, count, message=f"step {step}")
            await trio.sleep(0.05)
        if hang:
            await trio.sleep_forever()
        return f"{count} steps"


    store = RedisEventStore(os.environ["PROBE_REDIS_URL"], heartbeat=0.2)
    app = server.http_app(HttpOptions(scale_out=ScaleOut(event_store=store)))
    """
)


@asynccontextmanager
async def worker(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[str, trio.Process]]:
    """A hypercorn process serving the probe app; yields its MCP URL and the process."""
    port = free_port()
    env = {**os.environ, "PROBE_REDIS_URL": redis_url}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    log = tmp_path / f"worker-{port}.log"
    with log.open("wb") as output:
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "hypercorn",
                "--worker-class",
                "trio",
                "--bind",
                f"127.0.0.1:{port}",
                "resume_probe:app",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=output,
            # Its own process group: hypercorn serves from a worker process under its
            # supervisor, and the kill must take both.
            start_new_session=True,
        )
    try:
        with trio.fail_after(GUARD):
            while b"Running on" not in log.read_bytes():
                assert process.poll() is None, f"hypercorn ended early: {log.read_text()}"
                await trio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        with trio.move_on_after(10):
            await process.wait()


async def test_a_resume_on_another_worker_after_sigkill(tmp_path: Path) -> None:
    (tmp_path / "resume_probe.py").write_text(APP)
    async with (
        redis_server(tmp_path) as redis,
        worker(tmp_path, redis.url) as (url_a, process_a),
        worker(tmp_path, redis.url) as (url_b, _),
        httpx.AsyncClient(timeout=GUARD) as client,
    ):
        with trio.fail_after(GUARD):
            session = await open_session(client, url_a)
            # A request that never answers: the client drops it after the priming event and two
            # progress notifications; A goes on storing the rest.
            hanging = await read_then_drop(
                client, url_a, session, call_body("hang", "steps", {"count": 6, "hang": True}), 3
            )
            assert progress_of(hanging) == ["step 0", "step 1"]
            # A request that answers while its client is away: finished, never delivered.
            finished = await read_then_drop(
                client, url_a, session, call_body("done", "steps", {"count": 3}), 1
            )
            assert finished[0].data == ""  # the priming event
            await trio.sleep(1.0)  # both tools are done storing what they will store

            os.killpg(process_a.pid, signal.SIGKILL)  # the supervisor and its worker
            await process_a.wait()

            last = hanging[-1].id
            assert last is not None
            status, events = await resume(client, url_b, session, last)
            assert status == 200
            assert progress_of(events) == ["step 2", "step 3", "step 4", "step 5"]
            end = events[-1].json()
            assert end["id"] == "hang"
            assert "stopped before it answered" in end["error"]["message"]

            prime = finished[0].id
            assert prime is not None
            status, events = await resume(client, url_b, session, prime)
            assert status == 200
            assert progress_of(events) == ["step 0", "step 1", "step 2"]
            assert events[-1].json()["result"]["content"][0]["text"] == "3 steps"

            # A resume id of another session is refused as an unknown session.
            other = await open_session(client, url_b)
            status, _ = await resume(client, url_b, other + "x", prime)
            assert status == 404
            status, _ = await resume(client, url_b, "not-a-session", last)
            assert status == 404
