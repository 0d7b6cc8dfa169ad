"""The notification bus across processes: two real hypercorn processes on one real Redis.

A tool call on process B adds a tool; a modern ``subscriptions/listen`` and a handshake GET
stream on process A hear the ``tools/list_changed``. With Redis stopped mid-run the calls
that do not need it go on; after Redis is back the bus carries changes again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from trio_mcp import MCPError, open_client

from .._http import GUARD, VERSION, SseReader, initialize_body
from .._ports import free_port
from ._services import redis_server

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def _hypercorn(redis_url: str) -> AsyncIterator[str]:
    """``tests.servers.bus_server:app`` in a child hypercorn process; yields its MCP URL."""
    port = free_port()
    env = {**os.environ, "TRIO_MCP_REDIS_URL": redis_url, "PYTHONPATH": str(ROOT)}
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "hypercorn",
            "--worker-class",
            "trio",
            "--bind",
            f"127.0.0.1:{port}",
            "--graceful-timeout",
            "1",
            "tests.servers.bus_server:app",
        ],
        cwd=str(ROOT),
        env=env,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with trio.fail_after(GUARD):
            while True:
                assert process.poll() is None, f"hypercorn exited with {process.returncode}"
                try:
                    async with open_client(url, mode="modern"):
                        break
                except (OSError, httpx.HTTPError, MCPError):
                    await trio.sleep(0.1)
        yield url
    finally:
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()


@asynccontextmanager
async def _get_stream(client: httpx.AsyncClient, url: str) -> AsyncIterator[SseReader]:
    """A handshake-era session on ``url`` and its GET stream."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    response = await client.post(url, json=initialize_body(VERSION), headers=headers)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    headers |= {"mcp-session-id": session, "mcp-protocol-version": VERSION}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=note, headers=headers)).status_code == 202
    headers["accept"] = "text/event-stream"
    async with client.stream("GET", url, headers=headers) as stream:
        assert stream.status_code == 200
        yield SseReader(stream)


async def _changed(subscription: Any, stream: SseReader) -> None:
    note = await subscription.__anext__()
    assert note.method == "notifications/tools/list_changed"
    assert (await stream.message())["method"] == "notifications/tools/list_changed"


async def test_a_change_on_one_process_reaches_the_listeners_of_the_other(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        _hypercorn(redis.url) as url_a,
        _hypercorn(redis.url) as url_b,
        httpx.AsyncClient(timeout=GUARD) as http,
        open_client(url_a, mode="modern") as on_a,
        open_client(url_b, mode="modern") as on_b,
    ):
        pid_a = (await on_a.call_tool("whoami")).structured_content
        pid_b = (await on_b.call_tool("whoami")).structured_content
        assert pid_a != pid_b  # two processes indeed
        async with on_a.listen(tools=True) as subscription, _get_stream(http, url_a) as stream:
            with trio.fail_after(GUARD):
                await subscription.wait_acknowledged()
                await on_b.call_tool("grow", {"name": "first"})
                await _changed(subscription, stream)

                # Redis stopped: what does not need it goes on (B's calls, A's own calls).
                await redis.stop()
                result = await on_b.call_tool("grow", {"name": "during"})
                assert not result.is_error
                assert not (await on_a.call_tool("whoami")).is_error

                # Back: the subscribers reconnect by themselves; a change crosses again.
                await redis.start()
                # B's change made during the outage reaches A once both are back (kept by
                # B's publisher; or as a resync, this Redis restarts empty); or a later one.
                note = None
                attempt = 0
                while note is None:
                    attempt += 1
                    await on_b.call_tool("grow", {"name": f"after{attempt}"})
                    with trio.move_on_after(0.5):
                        note = await subscription.__anext__()
                assert note.method == "notifications/tools/list_changed"
                assert (await stream.message())["method"] == "notifications/tools/list_changed"
