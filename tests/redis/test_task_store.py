"""Task records on a real redis-server: the TaskStore contract, workers' liveness, faults, and
tasks updated and cancelled through another worker's TaskManager (over a RedisBus)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from trio_mcp.protocol._jsonrpc import INTERNAL_ERROR, JSONObject
from trio_mcp.protocol._tasks import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TASKS_EXTENSION,
    WORKING,
    TaskState,
)
from trio_mcp.redis._bus import RedisBus
from trio_mcp.redis._task_store import WORKER_LOST, RedisTaskStore
from trio_mcp.server import Server
from trio_mcp.server._input import InputRequired
from trio_mcp.tasks import TaskManager, TaskRecord, TaskStoreUnavailable

from .._http import request_body, serving
from .._ports import free_port
from ..deploy._services import redis_server
from ..wire import wire_to

QUESTION = {"method": "elicitation/create", "params": {"message": "name?"}}


def a_record(task_id: str = "t1", *, ttl_ms: int | None = 60_000) -> TaskRecord:
    now = time.time()
    state = TaskState(task_id, WORKING, now, now, ttl_ms, poll_interval_ms=100)
    return TaskRecord(state, "alice", {}, {"round": 1})


@asynccontextmanager
async def a_store(url: str, **options: Any) -> AsyncIterator[RedisTaskStore]:
    store = RedisTaskStore(url, **options)
    await store.start()
    try:
        yield store
    finally:
        await store.aclose()


async def test_a_record_is_found_by_another_store_once_created(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        a_store(redis.url) as one,
        a_store(redis.url) as two,
    ):
        record = attrs.evolve(a_record(), data={"big": 2**60 + 1, "float": 0.1, "text": "é"})
        await one.create(record)
        assert await two.get("t1") == record
        assert await two.get("nope") is None
        with pytest.raises(ValueError, match="exists already"):
            await two.create(record)


async def test_a_terminal_state_never_changes(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis, a_store(redis.url) as store:
        record = a_record()
        await store.create(record)
        done = attrs.evolve(record.state, status=COMPLETED, result={"content": []})
        after = await store.transition("t1", done)
        assert after is not None and after.state == done
        again = await store.transition("t1", attrs.evolve(done, status=CANCELLED))
        assert again is not None and again.state == done
        assert await store.transition("nope", done) is None


async def test_answers_are_merged_and_the_last_resumes_the_task(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis, a_store(redis.url) as store:
        record = a_record()
        await store.create(record)
        parked = attrs.evolve(
            record.state, status=INPUT_REQUIRED, input_requests={"a": QUESTION, "b": QUESTION}
        )
        await store.transition("t1", parked)
        first = await store.answer("t1", {"a": {"action": "accept"}, "zzz": {"x": 1}})
        assert first is not None and first.state.status == INPUT_REQUIRED
        assert first.state.input_requests == {"b": QUESTION}
        assert first.answers == {"a": {"action": "accept"}}
        # Two updates racing for the last question: one resumes, the other changes nothing.
        results: list[TaskRecord | None] = []

        async def answer() -> None:
            results.append(await store.answer("t1", {"b": {"action": "decline"}}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer)
            nursery.start_soon(answer)
        final = await store.get("t1")
        assert final is not None and final.state.status == WORKING
        assert final.state.input_requests is None
        assert final.answers == {"a": {"action": "accept"}, "b": {"action": "decline"}}
        assert all(r is not None and r.state.status == WORKING for r in results)


async def test_a_running_task_never_expires_a_settled_one_does(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis, a_store(redis.url) as store:
        import coredis

        record = a_record(ttl_ms=300)
        await store.create(record)
        async with coredis.Redis.from_url(redis.url) as raw:
            assert await raw.pttl("trio_mcp:{t1}:task") == -1
            await trio.sleep(0.5)
            assert await store.get("t1") is not None
            failed = attrs.evolve(record.state, status=FAILED, error={"code": 1, "message": "x"})
            await store.transition("t1", failed)
            assert 0 < await raw.pttl("trio_mcp:{t1}:task") <= 300
        await trio.sleep(0.5)
        assert await store.get("t1") is None


async def test_a_task_whose_worker_is_lost_ends_failed_after_the_grace(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        a_store(redis.url, heartbeat=0.1, grace=0.5) as reader,
        a_store(redis.url, heartbeat=0.1) as runner,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(reader.run)
        await runner.create(a_record())
        with trio.CancelScope() as keeping:
            async with trio.open_nursery() as beating:
                beating.start_soon(runner.run)
                await trio.sleep(0.5)  # past the lapse: only the heartbeat keeps it
                found = await reader.get("t1")
                assert found is not None and found.state.status == WORKING
                keeping.cancel()
        await trio.sleep(0.5)  # the runner stopped beating, its key lapsed
        # The key is missing, but the reader has not seen it missing for a grace yet.
        found = await reader.get("t1")
        assert found is not None and found.state.status == WORKING
        with trio.fail_after(10):
            while found is not None and found.state.status == WORKING:
                await trio.sleep(0.05)
                found = await reader.get("t1")
        assert found is not None and found.state.status == FAILED
        assert found.state.error == {"code": INTERNAL_ERROR, "message": WORKER_LOST}
        assert found.state.status_message == WORKER_LOST
        nursery.cancel_scope.cancel()


async def test_redis_down_at_start_is_a_clear_error_without_the_password() -> None:
    url = f"redis://probe:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(TaskStoreUnavailable) as raised:
        await RedisTaskStore(url).start()
    message = str(raised.value)
    assert "127.0.0.1" in message and "cannot be reached" in message
    assert "hunter2" not in message


async def test_redis_lost_mid_run_is_a_32603_naming_the_store(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis, a_store(redis.url, timeout=2) as store:
        await store.create(a_record())
        await redis.stop()
        with pytest.raises(TaskStoreUnavailable) as raised:
            await store.get("t1")
        assert raised.value.code == INTERNAL_ERROR
        assert raised.value.message == "Internal error: the task store is unavailable"
        assert "failed" in raised.value.reason
        await redis.start()
        await store.create(a_record("t2"))
        assert await store.get("t2") is not None


async def test_a_server_does_not_start_on_an_unreachable_task_store() -> None:
    server = Server("probe", task_store=RedisTaskStore(f"redis://127.0.0.1:{free_port()}/0"))
    with pytest.raises(TaskStoreUnavailable, match="cannot be reached"):
        async with server.tasks.hosting():
            pass  # pragma: no cover


# -- across workers ------------------------------------------------------------------------------


def a_worker(url: str) -> Server:
    return Server("probe", bus=RedisBus(url), task_store=RedisTaskStore(url, heartbeat=0.2))


async def wait_for(manager: TaskManager, task_id: str, status: str) -> TaskState:
    with trio.fail_after(5):
        while True:
            state = await manager.get(task_id, owner="alice")
            if state.status == status:
                return state
            await trio.sleep(0.02)


async def test_another_worker_answers_and_cancels_a_task(tmp_path: Path) -> None:
    runs: list[Mapping[str, Any]] = []
    started = trio.Event()

    async def asks(answers: Mapping[str, Any], data: Mapping[str, Any]) -> JSONObject:
        runs.append(dict(answers))
        if "name" not in answers:
            raise InputRequired({"name": QUESTION})
        started.set()
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def answers_at_once(answers: Mapping[str, Any], data: Mapping[str, Any]) -> JSONObject:
        if "name" not in answers:
            raise InputRequired({"name": QUESTION})
        return {"content": [{"type": "text", "text": answers["name"]["content"]["n"]}]}

    async with redis_server(tmp_path) as redis, trio.open_nursery() as nursery:
        one, two = a_worker(redis.url), a_worker(redis.url)
        await nursery.start(one.run_notifications)
        await nursery.start(two.run_notifications)
        heard: list[TaskState] = []
        two.tasks.on_change = heard.append

        # Answered on the other worker: the work runs again on its own, and completes.
        quick = await one.tasks.create(answers_at_once, owner="alice")
        await wait_for(two.tasks, quick.task_id, INPUT_REQUIRED)
        reply = {"action": "accept", "content": {"n": "ada"}}
        await two.tasks.update(quick.task_id, {"name": reply}, owner="alice")
        done = await wait_for(two.tasks, quick.task_id, COMPLETED)
        assert done.result == {"content": [{"type": "text", "text": "ada"}]}
        # The other worker's listeners heard of the changes it did not make.
        with trio.fail_after(5):
            while not any(s.status == COMPLETED for s in heard):  # noqa: ASYNC110 - another worker
                await trio.sleep(0.02)

        # Cancelled on the other worker: the work's own cancel scope ends it.
        slow = await one.tasks.create(asks, owner="alice")
        await wait_for(two.tasks, slow.task_id, INPUT_REQUIRED)
        await two.tasks.update(slow.task_id, {"name": reply}, owner="alice")
        with trio.fail_after(5):
            await started.wait()
        assert one.tasks.running == 1
        await two.tasks.cancel(slow.task_id, owner="alice")
        assert (await two.tasks.get(slow.task_id, owner="alice")).status == CANCELLED
        with trio.fail_after(5):
            while one.tasks.running:  # noqa: ASYNC110 - the cancel comes from another worker
                await trio.sleep(0.02)
        assert (await one.tasks.get(slow.task_id, owner="alice")).status == CANCELLED
        assert runs == [{}, {"name": reply}]
        # Someone else's task is unknown on every worker.
        with pytest.raises(Exception, match="unknown task"):
            await two.tasks.get(slow.task_id, owner="mallory")
        nursery.cancel_scope.cancel()


# -- over HTTP -----------------------------------------------------------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}


async def test_an_app_does_not_start_on_an_unreachable_task_store() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    server = Server("probe", task_store=RedisTaskStore(url, timeout=1))
    with pytest.raises(TaskStoreUnavailable) as caught:
        async with server.http_app().running():
            pass  # pragma: no cover
    assert "the task store's Redis at redis://:***@127.0.0.1:" in str(caught.value)
    assert "s3cret" not in str(caught.value)


async def test_redis_lost_mid_run_task_requests_answer_32603_the_rest_goes_on(
    tmp_path: Path,
) -> None:
    async with redis_server(tmp_path) as redis:
        server = Server("probe", task_store=RedisTaskStore(redis.url, timeout=1))

        @server.tool(task=True)
        async def slow() -> str:
            await trio.sleep(3600)
            raise AssertionError  # pragma: no cover

        async with serving(server) as served:

            async def post(method: str, name: str, params: dict[str, Any]) -> Any:
                headers = {
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                    "mcp-protocol-version": "2026-07-28",
                    "mcp-method": method,
                    "mcp-name": name,
                }
                body = request_body(1, method, {**params, "_meta": MODERN_META})
                response = await served.client.post(served.url, json=body, headers=headers)
                return response.json()

            created = await post("tools/call", "slow", {"name": "slow", "arguments": {}})
            task_id = created["result"]["taskId"]
            got = await post("tasks/get", task_id, {"taskId": task_id})
            assert got["result"]["status"] == WORKING
            await redis.stop()
            for method in ("tasks/get", "tasks/cancel"):
                answer = await post(method, task_id, {"taskId": task_id})
                assert answer["error"]["code"] == INTERNAL_ERROR
                assert answer["error"]["message"] == "Internal error: the task store is unavailable"
            refused = await post("tools/call", "slow", {"name": "slow", "arguments": {}})
            assert refused["error"]["code"] == INTERNAL_ERROR
            listed = await post("tools/list", "", {})
            assert [tool["name"] for tool in listed["result"]["tools"]] == ["slow"]
            await redis.start()
            # Redis came back empty, but this worker runs the task: it is written again.
            got = await post("tasks/get", task_id, {"taskId": task_id})
            assert got["result"]["status"] == WORKING


async def test_a_listen_on_another_worker_hears_of_the_task(tmp_path: Path) -> None:
    async def asks(answers: Mapping[str, Any], data: Mapping[str, Any]) -> JSONObject:
        if "name" not in answers:
            raise InputRequired({"name": QUESTION})
        return {"content": [{"type": "text", "text": "done"}]}

    async with redis_server(tmp_path) as redis, trio.open_nursery() as nursery:
        one, two = a_worker(redis.url), a_worker(redis.url)
        await nursery.start(one.run_notifications)
        await nursery.start(two.run_notifications)
        task_id = (await one.tasks.create(asks, owner="")).task_id
        async with wire_to(two, initialize=False) as peer:
            listen = {"notifications": {"taskIds": [task_id]}, "_meta": MODERN_META}
            await peer.send(
                {"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen", "params": listen}
            )
            ack = await peer.recv()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
            await wait_for_owner(one.tasks, task_id, INPUT_REQUIRED)
            await one.tasks.update(task_id, {"name": {"action": "accept"}}, owner="")
            statuses: list[str] = []
            with trio.fail_after(10):
                while "completed" not in statuses:
                    frame = await peer.recv()
                    if frame.get("method") == "notifications/tasks":
                        assert frame["params"]["taskId"] == task_id
                        statuses.append(frame["params"]["status"])
            # Each is the state read when the event was heard (a late one may repeat a later).
            assert statuses[-1] == "completed"
            assert set(statuses) <= {INPUT_REQUIRED, WORKING, COMPLETED}
        nursery.cancel_scope.cancel()


async def wait_for_owner(manager: TaskManager, task_id: str, status: str) -> None:
    with trio.fail_after(5):
        while (await manager.get(task_id, owner="")).status != status:  # noqa: ASYNC110
            await trio.sleep(0.02)


async def test_an_outcome_is_written_once_a_stalled_redis_answers_again(tmp_path: Path) -> None:
    import coredis
    from coredis.tokens import PureToken

    go = trio.Event()

    async def waits(answers: Mapping[str, Any], data: Mapping[str, Any]) -> JSONObject:
        await go.wait()
        return {"content": [{"type": "text", "text": "done"}]}

    async with redis_server(tmp_path) as redis, coredis.Redis.from_url(redis.url) as raw:
        manager = TaskManager(RedisTaskStore(redis.url, timeout=0.3))
        async with manager.hosting():
            task_id = (await manager.create(waits, owner="")).task_id
            # Every command stalls for a while: the outcome's write times out, and is retried.
            await raw.client_pause(1500, PureToken.ALL)
            go.set()
            await trio.sleep(0.5)
            with pytest.raises(TaskStoreUnavailable):
                await manager.get(task_id, owner="")
            with trio.fail_after(10):
                while True:
                    with contextlib.suppress(TaskStoreUnavailable):
                        state = await manager.get(task_id, owner="")
                        if state.status == COMPLETED:
                            break
                    await trio.sleep(0.1)
            assert state.result == {"content": [{"type": "text", "text": "done"}]}
