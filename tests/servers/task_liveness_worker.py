"""A task worker of its own process, for the liveness tests: a ``TaskManager`` on a
``RedisTaskStore`` (short heartbeat and grace), taking orders on stdin, one a line.

- ``slow``: a task that runs until the process ends;
- ``ask``: a task that parks at ``input_required`` on one question.

Each order is answered on stdout with the new task's id; ``ready`` is printed once the store
is started.

    python tests/servers/task_liveness_worker.py redis://127.0.0.1:PORT/0 HEARTBEAT GRACE
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import trio

from trio_mcp.redis import RedisTaskStore
from trio_mcp.server._input import InputRequired
from trio_mcp.tasks import TaskManager

QUESTION = {"method": "elicitation/create", "params": {"message": "name?"}}
OWNER = "alice"


async def slow(answers: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    await trio.sleep_forever()
    raise AssertionError  # pragma: no cover


async def ask(answers: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    if "name" not in answers:
        raise InputRequired({"name": QUESTION})
    await trio.sleep_forever()
    raise AssertionError  # pragma: no cover


async def main(url: str, heartbeat: float, grace: float) -> None:
    store = RedisTaskStore(url, heartbeat=heartbeat, grace=grace, timeout=1)
    manager = TaskManager(store, max_per_principal=None)
    orders = trio.wrap_file(sys.stdin)
    async with manager.hosting():
        print("ready", flush=True)
        while line := (await orders.readline()).strip():
            attempt = {"slow": slow, "ask": ask}[line]
            while True:
                try:
                    state = await manager.create(attempt, owner=OWNER)
                    break
                except Exception as exc:  # Redis away for a moment: try again
                    print(f"# {exc}", file=sys.stderr, flush=True)
                    await trio.sleep(0.05)
            print(state.task_id, flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], float(sys.argv[2]), float(sys.argv[3]))
