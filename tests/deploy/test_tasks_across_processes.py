"""Tasks (SEP-2663) across processes, for real: three backends sharing a real Redis (task
records and the notification bus, ``--redis-url``), behind nginx with plain round robin. A task
created through one process is read, answered and cancelled through the others, and survives
the restart of a process that does not run it; a task whose process is killed ends ``failed``.
Modern-era raw HTTP (no sessions).

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.protocol._tasks import TASKS_EXTENSION

from .._http import request_body
from ._fleet import ROOT, Backend, Fleet, _child_env, _ready, fleet
from ._services import KINDS, redis_server, shared_redis

MODERN = "2026-07-28"
SERVER = ROOT / "tests" / "servers" / "task_fleet_server.py"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {},
        "extensions": {TASKS_EXTENSION: {}},
    },
}
GUARD = 20
#: The liveness heartbeat (seconds) of the workers whose death the tests wait out: their own
#: task store's (the default's 5 s would make each such test wait 25 s).
HEARTBEAT = 1.0


async def post(
    client: httpx.AsyncClient, url: str, method: str, mcp_name: str, **params: Any
) -> Any:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        "mcp-name": mcp_name,
    }
    body = request_body(1, method, {**params, "_meta": META})
    response = await client.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "result" in answer, answer
    return answer["result"]


async def get(client: httpx.AsyncClient, url: str, task_id: str) -> Any:
    return await post(client, url, "tasks/get", task_id, taskId=task_id)


async def until(client: httpx.AsyncClient, url: str, task_id: str, status: str) -> Any:
    with trio.fail_after(GUARD):
        while (task := await get(client, url, task_id))["status"] != status:  # noqa: ASYNC110 - polling
            await trio.sleep(0.05)
    return task


async def parked(client: httpx.AsyncClient, running: Fleet, tag: str) -> tuple[str, int, str]:
    """A new ``hold`` task, created through nginx and parked at its question: its id, the pid
    of the process running it, and the key of its question."""
    created = await post(
        client,
        running.url,
        "tools/call",
        "hold",
        name="hold",
        arguments={"tag": tag, "seconds": 3600},
    )
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    task = await until(client, running.url, task_id, "input_required")
    [(key, question)] = task["inputRequests"].items()
    found = re.search(r"asked by pid (\d+)", question["params"]["message"])
    assert found is not None
    return task_id, int(found[1]), key


async def written(path: Path) -> str:
    """Wait until another process wrote ``path``, and give what it wrote. Found empty, it is
    still being written (the server creates the file, then writes its pid in it)."""
    with trio.fail_after(GUARD):
        while True:
            if await trio.Path(path).exists():
                text = await trio.Path(path).read_text()
                if text:
                    return text
            await trio.sleep(0.05)


def others(running: Fleet, pid: int) -> list[Backend]:
    rest = [b for b in running.backends if b.pid != pid]
    assert len(rest) == len(running.backends) - 1, "the task runs on none of the backends"
    return rest


async def restart(
    running: Fleet, backend: Backend, options: list[str], env: dict[str, str]
) -> Backend:
    """SIGKILL ``backend`` and start it again on its port (the caller kills the new one)."""
    backend.kill()
    await backend.wait()
    command = [sys.executable, "-m", "trio_mcp", "serve", str(SERVER)]
    command += ["--transport", "http", "--port", str(backend.port)]
    command += ["--node-id", backend.node_id, *options]
    log = running.directory / f"{backend.node_id}.restarted.log"
    with log.open("wb") as out:
        process = await trio.lowlevel.open_process(
            command,
            cwd=ROOT,
            env=_child_env({"TRIO_MCP_NODE_ID": backend.node_id, **env}),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    again = Backend(backend.node_id, backend.port, log, process)
    running.backends[running.backends.index(backend)] = again
    return again


@pytest.mark.parametrize("kind", KINDS)
async def test_a_task_is_read_answered_cancelled_through_other_processes(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "fleet").mkdir()
    env = {"TASK_FLEET_DIR": str(tmp_path)}
    options = ["--redis-url", ""]
    async with shared_redis(kind, tmp_path, request) as redis_url:
        options[1] = redis_url
        async with (
            fleet(
                tmp_path / "fleet", 3, server=str(SERVER), options=options, env=env, routing="any"
            ) as running,
            httpx.AsyncClient(timeout=10) as client,
        ):
            # Created through nginx, read through every process.
            task_id, runner, key = await parked(client, running, "answered")
            rest = others(running, runner)
            for backend in running.backends:
                task = await get(client, backend.base + "/mcp", task_id)
                assert task["status"] == "input_required"
            # Answered through a process that does not run it: the runner goes on.
            answer = {key: {"action": "accept", "content": {"name": "ada"}}}
            url = rest[0].base + "/mcp"
            await post(client, url, "tasks/update", task_id, taskId=task_id, inputResponses=answer)
            task = await until(client, rest[1].base + "/mcp", task_id, "working")
            await written(tmp_path / "answered.waiting")  # the runner's work goes on
            # Cancelled through the third process: the runner's work stops (it says so).
            cancelled = await post(
                client, rest[1].base + "/mcp", "tasks/cancel", task_id, taskId=task_id
            )
            assert cancelled["resultType"] == "complete"
            assert await written(tmp_path / "answered.cancelled") == str(runner)
            for backend in running.backends:
                task = await get(client, backend.base + "/mcp", task_id)
                assert task["status"] == "cancelled"

            # A process that does not run the task restarts; the task lives on, and the
            # restarted process answers it.
            task_id, runner, key = await parked(client, running, "restarted")
            again = await restart(running, others(running, runner)[0], options, env)
            try:
                await _ready(client, again)
                task = await get(client, again.base + "/mcp", task_id)
                assert task["status"] == "input_required"
                answer = {key: {"action": "accept", "content": {"name": "grace"}}}
                url = again.base + "/mcp"
                await post(
                    client, url, "tasks/update", task_id, taskId=task_id, inputResponses=answer
                )
                task = await until(client, running.url, task_id, "working")
                await written(tmp_path / "restarted.waiting")
                await post(client, url, "tasks/cancel", task_id, taskId=task_id)
                assert await written(tmp_path / "restarted.cancelled") == str(runner)
            finally:
                again.kill()
                with trio.move_on_after(5):
                    await again.wait()


async def test_a_task_whose_process_died_ends_failed(tmp_path: Path) -> None:
    (tmp_path / "fleet").mkdir()
    async with redis_server(tmp_path) as redis:
        # The workers' own task store, with a heartbeat of 1 s, which --redis-url keeps.
        env = {
            "TASK_FLEET_DIR": str(tmp_path),
            "TASK_FLEET_REDIS_URL": redis.url,
            "TASK_FLEET_HEARTBEAT": str(HEARTBEAT),
        }
        options = ["--redis-url", redis.url]
        async with (
            fleet(
                tmp_path / "fleet", 2, server=str(SERVER), options=options, env=env, routing="any"
            ) as running,
            httpx.AsyncClient(timeout=10) as client,
        ):
            task_id, runner, _ = await parked(client, running, "died")
            [survivor] = others(running, runner)
            dead = running.by_pid()[runner]
            dead.kill()
            await dead.wait()
            # Its liveness key lapses within three heartbeats; once the survivor has seen it
            # missing for the grace (two heartbeats), a tasks/get settles it failed.
            url = survivor.base + "/mcp"
            assert (await get(client, url, task_id))["status"] == "input_required"
            with trio.fail_after(5 * HEARTBEAT + GUARD):
                while (task := await get(client, url, task_id))["status"] != "failed":  # noqa: ASYNC110
                    await trio.sleep(0.5)
            assert task["error"]["message"] == "The worker running the task was lost"
            assert "inputRequests" not in task
