"""Tasks (SEP-2663): task records, the store they live in, and the nursery their work runs in.

A task-capable tool called by a modern request that declares ``io.modelcontextprotocol/tasks``
becomes a task: its record is stored (durably: ``tasks/get`` resolves once ``create`` returned)
before the ``CreateTaskResult`` is sent, and its handler runs in a nursery the server owns (the
HTTP app's lifespan nursery, through ``Server.run_notifications``; on stdio and in memory the
connection's), under the task's own cancel scope, so it outlives the request that created it.

A task's questions (``await ctx.elicit(...)``) go through the multi round-trip machinery: the
handler ends with :class:`InputRequired`, the task parks at ``input_required`` with those
questions, ``tasks/update`` answers them (partially, if it likes), and once every one is answered
the handler runs again with the answers gathered, as a multi round-trip retry would.

:class:`TaskStore` is the seam for other stores: every method is async and keyed by task id, a
record is a plain value (JSON-able fields), terminal states never change, and answers are merged
by the store in one step (a Redis store does it in one script), so a store shared by several
workers can follow ``MemoryTaskStore`` without changing the manager.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

import attrs
import trio

from .._exception_groups import single_error
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JSONObject
from ..protocol._tasks import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    TaskState,
)
from ._input import InputRequired

logger = logging.getLogger("trio_mcp.server")

#: How long a task is kept, by default (milliseconds), counted from when it settles.
DEFAULT_TASK_TTL_MS = 300_000
#: How often a client is asked to poll ``tasks/get`` (milliseconds).
DEFAULT_POLL_INTERVAL_MS = 500
#: How many tasks one process runs (or keeps parked) at once; the next is refused (-32603).
DEFAULT_MAX_RUNNING = 1000
#: How long a task's final status write may take when the server stops under it (seconds).
FINAL_WRITE_BOUND = 2.0
#: How long a task's outcome waits for an unavailable store before it is written again: the
#: first wait and the longest (seconds).
SETTLE_RETRY_INITIAL = 0.1
SETTLE_RETRY_MAX = 5.0


@attrs.frozen
class TaskRecord:
    """What a store keeps of one task."""

    state: TaskState
    #: The principal that created it (its identity; "" without authorization).
    owner: str
    #: Answers to its input requests so far, by key (never reused over the task's life).
    answers: Mapping[str, Any] = attrs.field(factory=dict)
    #: The handler's own multi round-trip data (``ctx.state``) from before the task existed.
    data: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def task_id(self) -> str:
        return self.state.task_id


class TaskStoreUnavailable(ProtocolError):
    """The task store cannot be reached. Raised by a store's calls (a task request answers
    -32603 saying so, without internals); :attr:`reason` says where and why, for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(INTERNAL_ERROR, "Internal error: the task store is unavailable")
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


@runtime_checkable
class HostedTaskStore(Protocol):
    """A store with a lifetime (``RedisTaskStore``): started when the server starts hosting
    tasks (:class:`TaskStoreUnavailable` fails the start), ``run`` in the tasks' nursery
    meanwhile (a worker's liveness), closed at the end."""

    async def start(self) -> None: ...

    async def run(self) -> None: ...

    async def aclose(self) -> None: ...


class TaskStore(Protocol):
    """Where task records live. Every method is atomic with respect to the others."""

    async def create(self, record: TaskRecord) -> None:
        """Store a new record; when this returns, :meth:`get` finds it (on any worker)."""

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None if there is none (never created, or expired)."""

    async def transition(self, task_id: str, state: TaskState) -> TaskRecord | None:
        """Replace the record's state, unless the stored one is terminal (then unchanged).
        Returns the record as stored afterwards; None if there is none."""

    async def answer(self, task_id: str, responses: Mapping[str, Any]) -> TaskRecord | None:
        """Take the responses whose keys the task is waiting for (others are ignored), and
        drop those keys from its input requests; when none is left, the task is ``working``
        again (in the same step, so two updates racing cannot both resume it). Returns the
        record afterwards; None if none."""


def answered(record: TaskRecord, responses: Mapping[str, Any]) -> TaskRecord | None:
    """The record with ``responses`` taken in, every store's rule for ``tasks/update``: only
    the keys the task is waiting for (each an object), the task back to ``working`` once none is
    left; None when nothing is taken (not waiting, or no key it asked for)."""
    if record.state.status != INPUT_REQUIRED:
        return None
    waiting = dict(record.state.input_requests or {})
    taken = {k: v for k, v in responses.items() if k in waiting and isinstance(v, dict)}
    if not taken:
        return None
    for key in taken:
        del waiting[key]
    state = attrs.evolve(
        record.state,
        status=INPUT_REQUIRED if waiting else WORKING,
        input_requests=waiting or None,
        last_updated_at=time.time(),
    )
    return attrs.evolve(record, state=state, answers={**record.answers, **taken})


class MemoryTaskStore:
    """Task records in this process's memory. A settled task is kept for its ``ttlMs``
    (counted from when it settled: never less than ``createdAt + ttlMs``), then forgotten;
    a task still running is never expired."""

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self._records: dict[str, TaskRecord] = {}
        #: When a settled record expires, on ``clock`` (Trio's clock by default).
        self._expiry: dict[str, float] = {}
        #: The same deadlines, soonest first, so expired records are dropped even if nobody
        #: asks for them again (the store stays bounded by what is alive).
        self._deadlines: list[tuple[float, str]] = []
        self._clock = clock

    def _now(self) -> float:
        return self._clock() if self._clock is not None else trio.current_time()

    def _sweep(self) -> None:
        now = self._now()
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, task_id = heapq.heappop(self._deadlines)
            if self._expiry.get(task_id) == deadline:
                del self._expiry[task_id]
                del self._records[task_id]

    def _live(self, task_id: str) -> TaskRecord | None:
        self._sweep()
        return self._records.get(task_id)

    def _put(self, record: TaskRecord) -> None:
        self._records[record.task_id] = record
        ttl = record.state.ttl_ms
        if record.state.terminal and ttl is not None:
            deadline = self._now() + ttl / 1000
            self._expiry[record.task_id] = deadline
            heapq.heappush(self._deadlines, (deadline, record.task_id))

    def __len__(self) -> int:
        return len(self._records)

    async def create(self, record: TaskRecord) -> None:
        await trio.lowlevel.checkpoint()
        self._sweep()
        if record.task_id in self._records:
            raise ValueError(f"a task {record.task_id!r} exists already")
        self._put(record)

    async def get(self, task_id: str) -> TaskRecord | None:
        await trio.lowlevel.checkpoint()
        return self._live(task_id)

    async def transition(self, task_id: str, state: TaskState) -> TaskRecord | None:
        await trio.lowlevel.checkpoint()
        record = self._live(task_id)
        if record is None or record.state.terminal:
            return record
        record = attrs.evolve(record, state=state)
        self._put(record)
        return record

    async def answer(self, task_id: str, responses: Mapping[str, Any]) -> TaskRecord | None:
        await trio.lowlevel.checkpoint()
        record = self._live(task_id)
        if record is None:
            return None
        merged = answered(record, responses)
        if merged is None:
            return record
        self._put(merged)
        return merged


#: One run of a task's handler, given the answers and data gathered so far: its result (a
#: ``CallToolResult``, wire form), or :class:`InputRequired`, or a :class:`ProtocolError`.
Attempt = Callable[[Mapping[str, Any], Mapping[str, Any]], Awaitable[JSONObject]]


@attrs.define(eq=False)
class _Running:
    scope: trio.CancelScope
    answered: trio.Event = attrs.field(factory=trio.Event)
    #: Whether the work waits on ``answered`` (its task stored as ``input_required``).
    parked: bool = False


def unknown_task(task_id: object) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, "Invalid params: unknown task", {"taskId": task_id})


class TaskManager:
    """A server's tasks: creates them, runs their handlers in its nursery, and answers the
    ``tasks/*`` methods against its :class:`TaskStore`."""

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        ttl_ms: int | None = DEFAULT_TASK_TTL_MS,
        poll_interval_ms: int | None = DEFAULT_POLL_INTERVAL_MS,
        max_running: int = DEFAULT_MAX_RUNNING,
    ) -> None:
        if ttl_ms is not None and ttl_ms < 1:
            raise ValueError("a task's ttl_ms must be a positive integer or None")
        if max_running < 1:
            raise ValueError("max_running must be a positive integer")
        self.max_running = max_running
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self._nursery: trio.Nursery | None = None
        self._running: dict[str, _Running] = {}
        #: Told of every change of a task's state this process makes or hears of (the server
        #: tells the listeners watching it: ``notifications/tasks``).
        self.on_change: Callable[[TaskState], None] | None = None
        #: Told of the id of every task whose state this process changed, for the other
        #: workers (the server puts it on its notification bus; they call :meth:`heard`).
        self.on_publish: Callable[[str], None] | None = None

    def _changed(self, record: TaskRecord | None) -> None:
        if record is None:
            return
        if self.on_change is not None:
            try:
                self.on_change(record.state)
            except Exception:
                logger.exception("a task status listener failed")
        if self.on_publish is not None:
            try:
                self.on_publish(record.task_id)
            except Exception:
                logger.exception("publishing a task's change failed")

    # -- across workers ------------------------------------------------------------------------

    def heard(self, task_id: str) -> None:
        """Another worker changed the task ``task_id`` (its id came over the notification bus).

        The bus carries only the id; the record is read again from the shared store, so an
        event heard late or twice does no harm. If the task runs here, a record now
        ``cancelled`` cancels its work, and one ``working`` again after ``input_required``
        (answered by a ``tasks/update`` on another worker) wakes it; either way this
        process's listeners hear of the new state. The bus was chosen over the relay: a
        worker need not know which worker runs a task (every worker hears, the one running
        it acts), and ``notifications/tasks`` must reach listeners on every worker anyway.
        """
        if self._nursery is not None:
            self._nursery.start_soon(self._hear, task_id)

    async def _hear(self, task_id: str) -> None:
        try:
            record = await self.store.get(task_id)
        except TaskStoreUnavailable as exc:
            logger.error("task %s changed elsewhere, but cannot be read: %s", task_id, exc)
            return
        except Exception:
            # Whatever a store does, one event heard must not stop the tasks' nursery.
            logger.exception("task %s changed elsewhere, but reading it failed", task_id)
            return
        if record is None:
            return
        running = self._running.get(task_id)
        if running is not None:
            if record.state.status == CANCELLED:
                running.scope.cancel()
            elif record.state.status == WORKING and running.parked:
                running.answered.set()
        if self.on_change is not None:
            try:
                self.on_change(record.state)
            except Exception:
                logger.exception("a task status listener failed")

    # -- the home of the tasks' work -----------------------------------------------------------

    @asynccontextmanager
    async def hosting(self) -> AsyncIterator[None]:
        """Give tasks a nursery for as long as this is entered, unless one already has it.
        Leaving it cancels the tasks still running there."""
        if self._nursery is not None:
            yield
            return
        store = self.store if isinstance(self.store, HostedTaskStore) else None
        if store is not None:
            await store.start()
        try:
            async with trio.open_nursery() as nursery:
                if store is not None:
                    nursery.start_soon(store.run)
                self._nursery = nursery
                try:
                    yield
                finally:
                    self._nursery = None
                    nursery.cancel_scope.cancel()
        finally:
            if store is not None:
                with trio.CancelScope(shield=True):
                    await store.aclose()

    @property
    def running(self) -> int:
        """How many tasks of this process are running (or parked) now."""
        return len(self._running)

    # -- creating and running ------------------------------------------------------------------

    async def create(
        self,
        attempt: Attempt,
        *,
        owner: str,
        answers: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> TaskState:
        """Store a new task, start its work, and return its state for the ``CreateTaskResult``."""
        nursery = self._nursery
        if nursery is None:
            raise ProtocolError(INTERNAL_ERROR, "Internal error: the server runs no tasks here")
        # Checked and claimed with no checkpoint between: creations racing in cannot overshoot.
        if len(self._running) >= self.max_running:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Task limit reached: at most {self.max_running} tasks run at once",
                {"maxRunning": self.max_running},
            )
        now = time.time()
        state = TaskState(
            task_id=secrets.token_urlsafe(24),
            status=WORKING,
            created_at=now,
            last_updated_at=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
        )
        record = TaskRecord(state, owner, dict(answers or {}), dict(data or {}))
        running = _Running(trio.CancelScope())
        # Registered before the store's checkpoint: a cancel racing the creation finds it.
        self._running[state.task_id] = running
        try:
            await self.store.create(record)
        except BaseException:
            del self._running[state.task_id]
            raise
        nursery.start_soon(self._run, state.task_id, attempt, running)
        return state

    async def _settle(self, task_id: str, status: str, **fields: Any) -> None:
        record = await self.store.get(task_id)
        if record is None:
            return
        if record.state.terminal:
            return
        state = attrs.evolve(record.state, status=status, last_updated_at=time.time(), **fields)
        after = await self.store.transition(task_id, state)
        if after is not None and after.state == state:
            self._changed(after)

    async def _settle_surely(self, task_id: str, status: str, **fields: Any) -> None:
        """:meth:`_settle`, again and again while the store is unavailable (backing off), so
        a short outage loses no outcome; until it is written or the server stops."""
        wait = SETTLE_RETRY_INITIAL
        while True:
            try:
                await self._settle(task_id, status, **fields)
                return
            except TaskStoreUnavailable as exc:
                logger.warning("task %s: cannot store its outcome yet: %s", task_id, exc)
            await trio.sleep(wait)
            wait = min(wait * 2, SETTLE_RETRY_MAX)

    async def _run(self, task_id: str, attempt: Attempt, running: _Running) -> None:
        try:
            with running.scope:
                await self._work(task_id, attempt, running)
            if running.scope.cancelled_caught:
                with trio.CancelScope(shield=True):
                    await self._settle(task_id, CANCELLED, input_requests=None)
        except TaskStoreUnavailable as exc:
            # The store was lost under the task (reading it, or parking it): the work is over,
            # and the record says so once the store is back, rather than "working" forever
            # (its worker lives on, so no liveness lapse would end it).
            logger.error("task %s: the task store was lost: %s", task_id, exc)
            await self._settle_surely(
                task_id,
                FAILED,
                input_requests=None,
                error={"code": INTERNAL_ERROR, "message": "The task store was unavailable"},
                status_message="The task store was unavailable while the task ran",
            )
        except trio.Cancelled:
            # The server stops under the task (its nursery ends): say so, rather than leave
            # it "working" for a poller forever (a shared store outlives this process).
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(FINAL_WRITE_BOUND),
                contextlib.suppress(TaskStoreUnavailable),
            ):
                await self._settle(
                    task_id,
                    FAILED,
                    input_requests=None,
                    error={"code": INTERNAL_ERROR, "message": "The server stopped"},
                    status_message="The server stopped before the task finished",
                )
            raise
        finally:
            if self._running.get(task_id) is running:
                del self._running[task_id]

    async def _work(self, task_id: str, attempt: Attempt, running: _Running) -> None:
        while True:
            record = await self.store.get(task_id)
            if record is None or record.state.terminal:
                return
            try:
                result = await attempt(record.answers, record.data)
            except Exception as exc:
                only = single_error(exc)
                if isinstance(only, InputRequired):
                    running.answered = trio.Event()
                    await self._settle(task_id, INPUT_REQUIRED, input_requests=only.requests)
                    running.parked = True
                    try:
                        # Read again once parked: an answer given on another worker while the
                        # status was being written was heard before there was anything to wake.
                        now = await self.store.get(task_id)
                        if now is not None and now.state.status == INPUT_REQUIRED:
                            await running.answered.wait()
                    finally:
                        running.parked = False
                    continue
                if isinstance(only, ProtocolError):
                    await self._settle_surely(
                        task_id,
                        FAILED,
                        input_requests=None,
                        error=only.error.to_json(),
                        status_message=only.message,
                    )
                    return
                logger.error("task %s failed", task_id, exc_info=exc)
                await self._settle_surely(
                    task_id,
                    FAILED,
                    input_requests=None,
                    error={"code": INTERNAL_ERROR, "message": "Internal error"},
                    status_message="Internal error",
                )
                return
            await self._settle_surely(task_id, COMPLETED, input_requests=None, result=result)
            return

    # -- the tasks/* methods -------------------------------------------------------------------

    async def get(self, task_id: str, *, owner: str) -> TaskState:
        """The task's state, for its owner; -32602 as unknown for anyone else."""
        record = await self.store.get(task_id)
        if record is None or record.owner != owner:
            raise unknown_task(task_id)
        return record.state

    async def update(self, task_id: str, responses: Mapping[str, Any], *, owner: str) -> None:
        """Answer some of the task's input requests; once all are, its handler runs again."""
        before = await self.get(task_id, owner=owner)
        record = await self.store.answer(task_id, responses)
        if record is None:
            raise unknown_task(task_id)
        # No checkpoint from here on: the runner cannot park on new questions in between.
        if record.state == before:
            return
        if before.status == INPUT_REQUIRED and record.state.status == WORKING:
            running = self._running.get(task_id)
            if running is not None:
                running.answered.set()
        self._changed(record)

    async def cancel(self, task_id: str, *, owner: str) -> None:
        """Cancel the task's work (cooperatively: its cancel scope); a finished task is left
        as it is. Either way the caller gets the same empty ack."""
        state = await self.get(task_id, owner=owner)
        if state.terminal:
            return
        # Settled at once, so a tasks/get after the ack says so; the work then stops.
        await self._settle(task_id, CANCELLED, input_requests=None)
        running = self._running.get(task_id)
        if running is not None:
            running.scope.cancel()
