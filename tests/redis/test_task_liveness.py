"""Task liveness across a Redis restart, for real: a worker in its own process runs tasks on a
real redis-server that is restarted under them, with its data (SAVE) and without; an observer
store on its own connections polls them. None is reported failed while its worker runs it; once
the worker is SIGKILLed, every one is, after the grace. And the per-principal quota, counted in
Redis across stores.

Short heartbeats and graces through the public options keep it bounded; times are hang guards.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from trio_mcp.protocol._tasks import COMPLETED, FAILED, INPUT_REQUIRED, WORKING, TaskState
from trio_mcp.redis import RedisTaskStore
from trio_mcp.redis._task_store import WORKER_LOST
from trio_mcp.tasks import TaskRecord, TaskStoreUnavailable

from ..deploy._fleet import ROOT, _child_env
from ..deploy._services import Redis, redis_server

WORKER = ROOT / "tests" / "servers" / "task_liveness_worker.py"
HEARTBEAT = 0.1
GRACE = 1.5
#: How long the worker stays paused after Redis is back (well under the grace): a worker slow
#: to come back, which an observer must not take for lost.
PAUSE = 0.5
GUARD = 20


@attrs.define
class Worker:
    """The worker process: orders in on stdin, task ids out on stdout."""

    process: trio.Process
    _buffer: bytes = b""

    async def line(self) -> str:
        assert self.process.stdout is not None
        with trio.fail_after(GUARD):
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some()
                assert chunk, "the worker ended"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    async def order(self, kind: str) -> str:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(kind.encode() + b"\n")
        return await self.line()


@asynccontextmanager
async def a_worker(url: str) -> AsyncIterator[Worker]:
    process = await trio.lowlevel.open_process(
        [sys.executable, str(WORKER), url, str(HEARTBEAT), str(GRACE)],
        cwd=ROOT,
        env=_child_env({}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    worker = Worker(process)
    try:
        assert await worker.line() == "ready"
        yield worker
    finally:
        process.kill()
        with trio.CancelScope(shield=True), trio.move_on_after(GUARD):
            await process.wait()


@asynccontextmanager
async def an_observer(url: str) -> AsyncIterator[RedisTaskStore]:
    """Another worker's store, started and beating (only a beating store judges liveness)."""
    store = RedisTaskStore(url, heartbeat=HEARTBEAT, grace=GRACE, timeout=1)
    await store.start()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.run)
            yield store
            nursery.cancel_scope.cancel()
    finally:
        await store.aclose()


async def statuses(store: RedisTaskStore, task_ids: list[str]) -> list[str | None]:
    """Each task's status as the observer reads it (None: no record; "?": Redis away)."""
    seen: list[str | None] = []
    for task_id in task_ids:
        try:
            record = await store.get(task_id)
        except TaskStoreUnavailable:
            seen.append("?")
            continue
        seen.append(record.state.status if record is not None else None)
    return seen


async def watch_through_a_restart(
    redis: Redis,
    worker: Worker,
    observer: RedisTaskStore,
    task_ids: list[str],
    *,
    keep_data: bool,
) -> list[list[str | None]]:
    """Restart Redis (down longer than a worker's liveness lapse), the worker paused (SIGSTOP)
    until :data:`PAUSE` after Redis is back, polling the tasks all along and for a while
    after; every poll's statuses."""
    import coredis

    async with coredis.Redis.from_url(redis.url) as raw:
        if keep_data:
            await raw.save()
    if not keep_data:
        (redis.directory / "dump.rdb").unlink(missing_ok=True)
    polls: list[list[str | None]] = []
    worker.process.send_signal(signal.SIGSTOP)
    try:
        await redis.stop()
        down_until = trio.current_time() + 1.0  # past the worker's liveness lapse (0.3 s)
        while trio.current_time() < down_until:
            polls.append(await statuses(observer, task_ids))
            await trio.sleep(0.05)
        await redis.start()
        paused_until = trio.current_time() + PAUSE
        while trio.current_time() < paused_until:
            polls.append(await statuses(observer, task_ids))
            await trio.sleep(0.02)
    finally:
        worker.process.send_signal(signal.SIGCONT)
    watch_until = trio.current_time() + 2 * GRACE
    while trio.current_time() < watch_until:
        polls.append(await statuses(observer, task_ids))
        await trio.sleep(0.02)
    return polls


async def running_tasks(worker: Worker, observer: RedisTaskStore) -> list[str]:
    task_ids = [await worker.order("slow"), await worker.order("slow"), await worker.order("ask")]
    with trio.fail_after(GUARD):
        while await statuses(observer, task_ids) != [WORKING, WORKING, INPUT_REQUIRED]:  # noqa: ASYNC110 - another process
            await trio.sleep(0.02)
    return task_ids


async def failed_once_killed(worker: Worker, observer: RedisTaskStore, task_ids: list[str]) -> None:
    worker.process.kill()
    await worker.process.wait()
    with trio.fail_after(GUARD):
        while await statuses(observer, task_ids) != [FAILED] * len(task_ids):  # noqa: ASYNC110 - another process
            await trio.sleep(0.05)
    for task_id in task_ids:
        record = await observer.get(task_id)
        assert record is not None and record.state.status_message == WORKER_LOST


async def test_a_redis_restart_with_its_data_fails_no_running_task(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        a_worker(redis.url) as worker,
        an_observer(redis.url) as observer,
    ):
        task_ids = await running_tasks(worker, observer)
        polls = await watch_through_a_restart(redis, worker, observer, task_ids, keep_data=True)
        assert not any(FAILED in poll for poll in polls), polls
        assert polls[-1] == [WORKING, WORKING, INPUT_REQUIRED]
        # The records came back from disk (Redis was seen without them at no point), and
        # were seen while the worker's liveness key was gone, before the worker came back.
        assert not any(None in poll for poll in polls), polls
        assert any(poll[0] == WORKING for poll in polls[: len(polls) // 2]), polls
        # A task whose worker is gone still fails, after the grace.
        await failed_once_killed(worker, observer, task_ids)


async def test_a_redis_restart_without_its_data_fails_no_running_task(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        a_worker(redis.url) as worker,
        an_observer(redis.url) as observer,
    ):
        task_ids = await running_tasks(worker, observer)
        polls = await watch_through_a_restart(redis, worker, observer, task_ids, keep_data=False)
        assert not any(FAILED in poll for poll in polls), polls
        # The worker wrote its running tasks again once it reached the empty Redis.
        assert polls[-1] == [WORKING, WORKING, INPUT_REQUIRED]
        # A task created just after an empty restart, read at once, is running.
        await redis.stop()
        await redis.start()
        await trio.sleep(0.05)
        fresh = await worker.order("slow")
        [status] = await statuses(observer, [fresh])
        assert status == WORKING
        await trio.sleep(2 * GRACE)
        assert await statuses(observer, [*task_ids, fresh]) == [
            WORKING,
            WORKING,
            INPUT_REQUIRED,
            WORKING,
        ]
        await failed_once_killed(worker, observer, [*task_ids, fresh])


# -- the quota in Redis ----------------------------------------------------------------------------


def a_record(task_id: str, owner: str) -> TaskRecord:
    now = time.time()
    return TaskRecord(TaskState(task_id, WORKING, now, now, 60_000), owner)


async def test_the_quota_is_counted_across_stores_without_overshooting(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        an_observer(redis.url) as one,
        an_observer(redis.url) as two,
    ):
        stored: list[bool] = []

        async def create(store: RedisTaskStore, task_id: str) -> None:
            stored.append(await store.create_capped(a_record(task_id, "alice"), 3))

        async with trio.open_nursery() as nursery:
            for n in range(10):
                nursery.start_soon(create, one if n % 2 else two, f"a{n}")
        assert sorted(stored) == [False] * 7 + [True] * 3
        # Another principal is not held back by Alice's full quota.
        assert await two.create_capped(a_record("b0", "bob"), 3)
        # Settling one of Alice's tasks, on any store, gives her a slot back.
        mine = [t for t in (f"a{n}" for n in range(10)) if await one.get(t) is not None]
        done = attrs.evolve((await one.get(mine[0])).state, status=COMPLETED)  # type: ignore[union-attr]
        await two.transition(mine[0], done)
        assert await one.create_capped(a_record("a10", "alice"), 3)
        assert not await two.create_capped(a_record("a11", "alice"), 3)


async def test_the_quota_slots_of_a_worker_that_died_come_back(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis, an_observer(redis.url) as survivor:
        # A worker that takes Carol's only slot, then stops beating (as if killed).
        dead = RedisTaskStore(redis.url, heartbeat=HEARTBEAT, grace=GRACE, timeout=1)
        await dead.start()
        try:
            assert await dead.create_capped(a_record("c0", "carol"), 1)
            assert not await survivor.create_capped(a_record("c1", "carol"), 1)
        finally:
            with contextlib.suppress(Exception):
                await dead.aclose()
        # Its lease lapses with its liveness (three heartbeats).
        with trio.fail_after(GUARD):
            while not await survivor.create_capped(a_record("c1", "carol"), 1):  # noqa: ASYNC110 - a lease lapses in Redis
                await trio.sleep(0.05)


async def test_a_beating_worker_keeps_its_quota_slots(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        an_observer(redis.url) as runner,
        an_observer(redis.url) as other,
    ):
        assert await runner.create_capped(a_record("d0", "dave"), 1)
        await trio.sleep(10 * HEARTBEAT)  # many lapses: the runner's heartbeat renews it
        assert not await other.create_capped(a_record("d1", "dave"), 1)
