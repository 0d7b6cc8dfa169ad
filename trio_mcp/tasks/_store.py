"""Where tasks live (SEP-2663): the task record, the :class:`TaskStore` protocol and the
in-memory store.

:class:`TaskStore` is the seam for other stores: every method is async and keyed by task id, a
record is a plain value (JSON-able fields), terminal states never change, and answers are merged
by the store in one step (a Redis store does it in one script), so a store shared by several
workers can follow ``MemoryTaskStore`` without changing the manager.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs
import trio

from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INTERNAL_ERROR
from ..protocol._tasks import INPUT_REQUIRED, WORKING, TaskState


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


@runtime_checkable
class CountingTaskStore(Protocol):
    """A store that counts each principal's running tasks itself, so the per-principal cap
    (``Server(max_tasks_per_principal=...)``) holds across every worker sharing the store: the
    manager creates through :meth:`create_capped` instead of ``create``. A store without it is
    counted by each manager for its own process."""

    async def create_capped(self, record: TaskRecord, cap: int) -> bool:
        """Store a new record unless its owner has ``cap`` tasks running (or waiting for
        input) already, checked and stored in one step; whether it was stored."""
        ...


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
        #: The ids of each owner's tasks not yet settled (the per-principal cap counts them).
        self._unsettled: dict[str, set[str]] = {}

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
        if record.state.terminal:
            owned = self._unsettled.get(record.owner)
            if owned is not None:
                owned.discard(record.task_id)
                if not owned:
                    del self._unsettled[record.owner]
        else:
            self._unsettled.setdefault(record.owner, set()).add(record.task_id)
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

    async def create_capped(self, record: TaskRecord, cap: int) -> bool:
        await trio.lowlevel.checkpoint()
        self._sweep()
        if record.task_id in self._records:
            raise ValueError(f"a task {record.task_id!r} exists already")
        if len(self._unsettled.get(record.owner, ())) >= cap:
            return False
        self._put(record)
        return True

    def unsettled(self, owner: str) -> int:
        """How many of ``owner``'s tasks are running or waiting for input."""
        return len(self._unsettled.get(owner, ()))

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
