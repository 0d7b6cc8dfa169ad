"""The demo server plus task tools that say which process runs them (what the tasks-across-
processes tests need to pick another process for ``tasks/update`` and ``tasks/cancel``).

``hold`` asks a name (the task parks at ``input_required``, the question naming the pid that
asks), then waits ``seconds`` and answers with the pid that ran it and the name. Into
``$TASK_FLEET_DIR`` it writes ``<tag>.waiting`` once it waits, and ``<tag>.cancelled`` (with its
pid) if its work is cancelled while it waits.

With ``$TASK_FLEET_HEARTBEAT`` (seconds), the server keeps its tasks in its own Redis task store
on ``$TASK_FLEET_REDIS_URL`` with that heartbeat, which ``--redis-url`` leaves in place: a dead
worker's tasks are failed within a few heartbeats instead of the default's 25 seconds.

    trio-mcp serve tests/servers/task_fleet_server.py --transport http --port P --redis-url URL
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from trio_mcp import Context
from trio_mcp._demo import demo_server
from trio_mcp.redis import RedisTaskStore

server = demo_server()
if os.environ.get("TASK_FLEET_HEARTBEAT"):
    server.tasks.store = RedisTaskStore(
        os.environ["TASK_FLEET_REDIS_URL"], heartbeat=float(os.environ["TASK_FLEET_HEARTBEAT"])
    )

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool(task=True)
async def hold(tag: str, ctx: Context, seconds: float = 0) -> dict[str, int | str | None]:
    """Ask a name, then wait ``seconds``; say which process ran the task."""
    answer = await ctx.elicit(f"Your name? (asked by pid {os.getpid()})", FORM)
    name = answer.content.get("name") if answer.content is not None else None
    directory = trio.Path(os.environ["TASK_FLEET_DIR"])
    await (directory / f"{tag}.waiting").write_text(str(os.getpid()))
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        # Written synchronously: a cancelled task cannot await a thread.
        Path(directory / f"{tag}.cancelled").write_text(str(os.getpid()))  # noqa: ASYNC240
        raise
    return {"ran_on": os.getpid(), "name": name if isinstance(name, str) else None}
