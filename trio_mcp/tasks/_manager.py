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

Where the records live is :mod:`._store`'s (:class:`TaskStore`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .._exception_groups import single_error
from ..otel import count_limit_hit, current_link, linked_span
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RATE_LIMITED, JSONObject
from ..protocol._tasks import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    TaskState,
)
from ..server._input import InputRequired
from ._store import (
    CountingTaskStore,
    HostedTaskStore,
    MemoryTaskStore,
    TaskRecord,
    TaskStore,
    TaskStoreUnavailable,
)

logger = logging.getLogger("trio_mcp.server")

#: How long a task is kept, by default (milliseconds), counted from when it settles.
DEFAULT_TASK_TTL_MS = 300_000
#: How often a client is asked to poll ``tasks/get`` (milliseconds).
DEFAULT_POLL_INTERVAL_MS = 500
#: How many tasks one process runs (or keeps parked) at once; the next is refused (-32603).
DEFAULT_MAX_RUNNING = 1000
#: How many tasks one principal may have running (or parked) at once, on every worker sharing
#: the store; the next is refused with -32000 "Task quota reached". Well below
#: :data:`DEFAULT_MAX_RUNNING`, so one principal cannot take every slot.
DEFAULT_MAX_PER_PRINCIPAL = 100
#: How long a task waits at ``input_required`` for its answers (seconds) before it fails.
DEFAULT_INPUT_TIMEOUT = 600.0
#: How long a task's final status write may take when the server stops under it (seconds).
FINAL_WRITE_BOUND = 2.0
#: How long a task's outcome waits for an unavailable store before it is written again: the
#: first wait and the longest (seconds).
SETTLE_RETRY_INITIAL = 0.1
SETTLE_RETRY_MAX = 5.0


#: One run of a task's handler, given the answers and data gathered so far: its result (a
#: ``CallToolResult``, wire form), or :class:`InputRequired`, or a :class:`ProtocolError`.
Attempt = Callable[[Mapping[str, Any], Mapping[str, Any]], Awaitable[JSONObject]]


@attrs.define(eq=False)
class _Running:
    scope: trio.CancelScope
    answered: trio.Event = attrs.field(factory=trio.Event)
    #: The principal whose task it is (its identity).
    owner: str = ""
    #: Whether the work waits on ``answered`` (its task stored as ``input_required``).
    parked: bool = False


def unknown_task(task_id: object) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, "Invalid params: unknown task", {"taskId": task_id})


def quota_reached(cap: int) -> ProtocolError:
    """The refusal of a task beyond its principal's cap: -32000, as a rate limit's (a limit
    refused it; the same call succeeds later), with the cap in ``data``."""
    return ProtocolError(
        RATE_LIMITED,
        f"Task quota reached: this principal already has {cap} tasks running or waiting for "
        "input, the most it may have at once; wait for one to finish, or cancel one with "
        "tasks/cancel, then try again",
        {"maxTasksPerPrincipal": cap},
    )


def input_timed_out(timeout: float) -> dict[str, Any]:
    """The error of a task whose questions were not answered in time."""
    return {
        "code": RATE_LIMITED,
        "message": f"Input timed out: the task's questions were not answered within {timeout:g} s",
        "data": {"inputTimeoutMs": round(timeout * 1000)},
    }


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
        max_per_principal: int | None = DEFAULT_MAX_PER_PRINCIPAL,
        input_timeout: float | None = DEFAULT_INPUT_TIMEOUT,
    ) -> None:
        if ttl_ms is not None and ttl_ms < 1:
            raise ValueError("a task's ttl_ms must be a positive integer or None")
        if max_running < 1:
            raise ValueError("max_running must be a positive integer")
        if max_per_principal is not None and max_per_principal < 1:
            raise ValueError("max_per_principal must be a positive integer or None")
        if input_timeout is not None and not input_timeout > 0:
            raise ValueError("input_timeout must be a positive number of seconds or None")
        self.max_running = max_running
        #: How many tasks one principal may have running or waiting for input at once (counted
        #: by the store across workers when it can, else in this process); None: no cap. The
        #: anonymous principal (no authorization: every caller is it) is bounded by
        #: ``max_running`` alone.
        self.max_per_principal = max_per_principal
        #: How long a task waits at ``input_required`` (seconds) before it fails; None: forever.
        self.input_timeout = input_timeout
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
            count_limit_hit("tasks")
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
        cap = self.max_per_principal if owner else None
        counting = self.store if isinstance(self.store, CountingTaskStore) else None
        if cap is not None and counting is None:
            mine = sum(
                1
                for other in self._running.values()
                if other.owner == owner and not other.scope.cancel_called
            )
            if mine >= cap:
                raise quota_reached(cap)
        running = _Running(trio.CancelScope(), owner=owner)
        # Registered before the store's checkpoint: a cancel racing the creation finds it.
        self._running[state.task_id] = running
        try:
            if cap is not None and counting is not None:
                if not await counting.create_capped(record, cap):
                    raise quota_reached(cap)
            else:
                await self.store.create(record)
        except BaseException:
            del self._running[state.task_id]
            raise
        # Its execution is a trace of its own, linked to the request that created it.
        nursery.start_soon(self._run, state.task_id, attempt, running, current_link())
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

    async def _read_surely(self, task_id: str) -> TaskRecord | None:
        """The task's record, read again and again while the store is unavailable (backing
        off), so a short outage (Redis restarting) costs a running task nothing."""
        wait = SETTLE_RETRY_INITIAL
        while True:
            try:
                return await self.store.get(task_id)
            except TaskStoreUnavailable as exc:
                logger.warning("task %s: cannot read it yet: %s", task_id, exc)
            await trio.sleep(wait)
            wait = min(wait * 2, SETTLE_RETRY_MAX)

    async def _run(
        self, task_id: str, attempt: Attempt, running: _Running, link: Any = None
    ) -> None:
        try:
            with running.scope, linked_span("tasks/run", link, **{"trio_mcp.task.id": task_id}):
                await self._work(task_id, attempt, running)
            if running.scope.cancelled_caught:
                with trio.CancelScope(shield=True):
                    await self._settle(task_id, CANCELLED, input_requests=None)
        except TaskStoreUnavailable as exc:
            # The store was lost where the task could not wait for it (writing its cancellation,
            # or that its questions expired): the work is over, and the record says so once the
            # store is back, rather than "working" forever (its worker lives on, so no liveness
            # lapse would end it). Reads and other writes wait for the store instead.
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
            record = await self._read_surely(task_id)
            if record is None or record.state.terminal:
                return
            try:
                result = await attempt(record.answers, record.data)
            except Exception as exc:
                only = single_error(exc)
                if isinstance(only, InputRequired):
                    running.answered = trio.Event()
                    await self._settle_surely(task_id, INPUT_REQUIRED, input_requests=only.requests)
                    running.parked = True
                    try:
                        # Read again once parked: an answer given on another worker while the
                        # status was being written was heard before there was anything to wake.
                        now = await self._read_surely(task_id)
                        if now is not None and now.state.status == INPUT_REQUIRED:
                            timeout = self.input_timeout
                            with trio.move_on_after(timeout if timeout is not None else math.inf):
                                await running.answered.wait()
                            if not running.answered.is_set() and await self._input_expired(task_id):
                                return
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

    async def _input_expired(self, task_id: str) -> bool:
        """The task's questions went unanswered for ``input_timeout``: it fails, saying so;
        whether its work is over (False: an answer landed meanwhile, it runs again)."""
        record = await self._read_surely(task_id)
        if record is None or record.state.terminal:
            return True
        if record.state.status != INPUT_REQUIRED:
            return False
        assert self.input_timeout is not None
        error = input_timed_out(self.input_timeout)
        await self._settle(
            task_id,
            FAILED,
            input_requests=None,
            error=error,
            status_message=error["message"],
        )
        return True

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
