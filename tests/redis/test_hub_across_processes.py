"""One subscriber per worker, across real processes: two ``--any-worker`` backends on one real
Redis, each using the bus (a list change), the relay (an elicitation answered through the
other) and task status (a task cancelled through the other) at once. ``CLIENT LIST`` shows one
pub/sub connection per worker, carrying the relay's two channels, and one reader of the bus's
stream; after ``CLIENT KILL TYPE pubsub`` each comes back with both, and everything crosses
again.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

import collections
from pathlib import Path

import httpx
import orjson
import trio
from coredis.tokens import PureToken

from trio_mcp import open_client

from .._http import SseReader, call_body
from ..deploy._fleet import ROOT, Backend, fleet
from ..deploy._services import redis_server
from ..deploy.test_sessions_anywhere import headers, open_session
from ..deploy.test_tasks_across_processes import post, written
from .test_hub import raw_redis

SERVER = ROOT / "tests" / "servers" / "hub_server.py"
GUARD = 30


async def _notified(on: Backend, by: Backend, name: str) -> None:
    """A list change made on ``by`` reaches a listener on ``on``."""
    async with (
        open_client(on.base + "/mcp", mode="modern") as listener,
        open_client(by.base + "/mcp", mode="modern") as changer,
        listener.listen(tools=True) as subscription,
    ):
        await subscription.wait_acknowledged()
        grown = await changer.call_tool("grow", {"name": name})
        assert grown.structured_content == {"result": by.pid}
        note = await subscription.__anext__()
        assert note.method == "notifications/tools/list_changed"


async def _relayed(http: httpx.AsyncClient, asker: Backend, other: Backend, name: str) -> None:
    """An elicitation of ``asker`` answered through ``other`` (the relay carries it back)."""
    session = await open_session(http, asker.base + "/mcp", {"elicitation": {}})
    body = orjson.dumps(call_body(1, "ask"))
    async with http.stream(
        "POST", asker.base + "/mcp", content=body, headers=headers(session)
    ) as stream:
        reader = SseReader(stream)
        asked = await reader.message()
        assert asked["method"] == "elicitation/create"
        answer = {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"action": "accept", "content": {"name": name}},
        }
        posted = await http.post(other.base + "/mcp", json=answer, headers=headers(session))
        assert posted.status_code == 202, posted.text
        done = await reader.message()
    result = orjson.loads(done["result"]["content"][0]["text"])
    assert result == {"asked_by": asker.pid, "name": name}


async def _task_cancelled(
    http: httpx.AsyncClient, runner: Backend, other: Backend, tag: str, directory: Path
) -> None:
    """A task running on ``runner``, cancelled through ``other``: its work stops."""
    created = await post(
        http, runner.base + "/mcp", "tools/call", "hold", name="hold", arguments={"tag": tag}
    )
    assert created["resultType"] == "task"
    await written(directory / f"{tag}.waiting")
    task_id = created["taskId"]
    await post(http, other.base + "/mcp", "tasks/cancel", task_id, taskId=task_id)
    assert await written(directory / f"{tag}.cancelled") == str(runner.pid)


async def test_each_worker_has_one_subscriber_and_everything_crosses(tmp_path: Path) -> None:
    (tmp_path / "fleet").mkdir()
    async with (
        redis_server(tmp_path) as redis,
        raw_redis(redis) as raw,
        fleet(
            tmp_path / "fleet",
            2,
            server=str(SERVER),
            options=["--redis-url", redis.url, "--any-worker"],
            env={"HUB_DIR": str(tmp_path)},
            routing="any",
        ) as running,
        httpx.AsyncClient(timeout=GUARD) as http,
    ):
        a, b = running.backends

        async def everything_crosses(tag: str) -> None:
            with trio.fail_after(GUARD):
                await _notified(a, b, f"{tag}_ab")
                await _notified(b, a, f"{tag}_ba")
                await _relayed(http, a, b, f"{tag}-ab")
                await _relayed(http, b, a, f"{tag}-ba")
                await _task_cancelled(http, a, b, f"{tag}-ab", tmp_path)
                await _task_cancelled(http, b, a, f"{tag}-ba", tmp_path)

        async def one_subscriber_each() -> list[int]:
            """Each worker's pub/sub connections: one, carrying the relay's channel of its
            node and the relay's channel for all."""
            found = await raw.client_list(type_=PureToken.PUBSUB)
            by_name = collections.Counter(str(c["name"]) for c in found)
            assert by_name == {f"trio_mcp:{a.pid}:sub": 1, f"trio_mcp:{b.pid}:sub": 1}
            assert [int(c["sub"]) for c in found] == [2, 2]
            # Every other connection of the workers is their pool's or their bus reader's.
            names = {str(c["name"]) for c in await raw.client_list()} - {""}
            assert names == {
                f"trio_mcp:{p}:{role}" for p in (a.pid, b.pid) for role in ("sub", "pool", "bus")
            }
            return [int(c["id"]) for c in found]

        await everything_crosses("before")
        killed = await one_subscriber_each()
        assert await raw.client_kill(type_=PureToken.PUBSUB) == 2
        with trio.fail_after(GUARD):
            while True:
                found = await raw.client_list(type_=PureToken.PUBSUB)
                if len(found) == 2 and all(
                    int(c["id"]) not in killed and int(c["sub"]) == 2 for c in found
                ):
                    break
                await trio.sleep(0.05)
        await one_subscriber_each()
        await everything_crosses("after")
