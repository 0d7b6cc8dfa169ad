"""Task records on Redis (SEP-2663), shared by every worker, so ``tasks/get`` works on any of them.

coredis is imported only when a store starts: a server without Redis never loads it.

Each task is one hash, ``<prefix>task:<task id>``: ``s`` its status (plain, so a script can
tell a terminal one without decoding JSON), ``r`` the record (JSON written by Python: Redis's
own JSON would round numbers in a tool's result), ``v`` a version bumped by every write, and
``w`` the worker that runs it. Writes are Lua scripts, one round trip each:

- ``create`` stores the hash only if there is none (``HSETNX``-like), and returns once Redis
  has it: a ``tasks/get`` on any worker finds it from then on;
- ``transition`` replaces the record unless the stored status is terminal;
- ``answer`` is a compare-and-set on the version (read, merge in Python, write if nobody
  wrote meanwhile, else read again), so two updates racing cannot both resume the task.

A record with no terminal status never expires (a task may run, or wait for input, for as
long as it likes); once terminal it expires ``ttlMs`` after it settled.

A worker's liveness is a key, ``<prefix>task-worker:<worker id>``, refreshed by
:meth:`RedisTaskStore.run` every ``heartbeat`` seconds and lapsing after three (as the event
store's session liveness keys). A ``get`` that finds a running task whose worker's key has
lapsed marks it ``failed`` ("the worker running the task was lost"), so clients polling
``tasks/get`` see an end rather than ``working`` forever.

Faults: Redis unreachable at start fails the start with :class:`TaskStoreUnavailable` naming
the URL (never its password); lost later, every call raises it (a ``ProtocolError``, -32603
saying the task store is unavailable) until Redis answers again, and the rest of the server
goes on.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from ..protocol._jsonrpc import INTERNAL_ERROR
from ..protocol._tasks import FAILED, TERMINAL, TaskState
from ..tasks import TaskRecord, TaskStoreUnavailable, answered
from ._link import RedisLink, redact

if TYPE_CHECKING:
    import coredis

logger = logging.getLogger("trio_mcp.server")

_TERMINAL_LUA = "{" + ", ".join(f"[{status!r}] = true" for status in sorted(TERMINAL)) + "}"

# KEYS[1] the task; ARGV: record, status, worker. 1 if stored, 0 if the task exists already.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 's', ARGV[2], 'w', ARGV[3], 'v', 1)
return 1
"""

# KEYS[1] the task; ARGV: record, status, ttl (ms, 0: none), expected version ('' : any).
# Returns {stored status, stored record, 1 if written}; nil if there is no task.
_WRITE = (
    "local terminal = "
    + _TERMINAL_LUA
    + """
local current = redis.call('HMGET', KEYS[1], 's', 'r', 'v')
if not current[1] then return nil end
if terminal[current[1]] then return {current[1], current[2], 0} end
if ARGV[4] ~= '' and current[3] ~= ARGV[4] then return {current[1], current[2], 0} end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 's', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'v', 1)
if terminal[ARGV[2]] and tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {ARGV[2], ARGV[1], 1}
"""
)

# KEYS[1] the task; ARGV[1] the liveness keys' prefix. {record, 1 if its running task's worker
# is gone}; nil if there is no task. One round trip for a poll's tasks/get.
_GET = (
    "local terminal = "
    + _TERMINAL_LUA
    + """
local current = redis.call('HMGET', KEYS[1], 's', 'r', 'w')
if not current[2] then return nil end
if terminal[current[1]] or not current[3] or current[3] == '' then return {current[2], 0} end
if redis.call('EXISTS', ARGV[1] .. current[3]) == 1 then return {current[2], 0} end
return {current[2], 1}
"""
)

#: The error of a task whose worker was lost while running it.
WORKER_LOST = "The worker running the task was lost"


def encode_record(record: TaskRecord) -> bytes:
    state = record.state
    return orjson.dumps(
        {
            "state": attrs.asdict(state, recurse=False),
            "owner": record.owner,
            "answers": dict(record.answers),
            "data": dict(record.data),
        }
    )


def decode_record(data: bytes | str) -> TaskRecord:
    value = orjson.loads(data)
    return TaskRecord(TaskState(**value["state"]), value["owner"], value["answers"], value["data"])


class RedisTaskStore:
    """A :class:`~trio_mcp.server.TaskStore` on Redis, shared by every worker that names the
    same Redis and ``prefix``: ``Server(task_store=RedisTaskStore("redis://host:6379/0"))``.

    The server starts it (and keeps this worker's liveness key) while it hosts tasks; see the
    module docstring for the layout, the liveness of workers, and faults.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "trio_mcp:",
        heartbeat: float = 5.0,
        timeout: float = 5.0,
    ) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"a Redis URL starts with redis://, rediss:// or unix://, not {redact(url)!r}"
            )
        if heartbeat <= 0:
            raise ValueError("heartbeat must be positive")
        self.url = url
        self.prefix = prefix
        self.heartbeat = heartbeat
        self.timeout = timeout
        #: This worker, as the records of the tasks it runs name it.
        self.worker = secrets.token_hex(8)
        self._link = RedisLink(
            url, what="the task store", unavailable=TaskStoreUnavailable, timeout=timeout
        )

    @property
    def where(self) -> str:
        return self._link.where

    # -- lifetime --------------------------------------------------------------------------------

    async def probe(self) -> None:
        """Whether its Redis answers now (for a readiness check), within its timeout."""
        await self._link.probe()

    async def start(self) -> None:
        """Connect, and mark this worker alive; :class:`TaskStoreUnavailable` if Redis cannot
        be reached."""
        if self._link.started:
            raise RuntimeError("a RedisTaskStore is started once: give each server its own")

        async def alive(client: coredis.Redis[bytes]) -> None:
            await client.set(self._live(self.worker), b"1", px=self._lapse_ms())

        await self._link.start(alive)

    async def run(self) -> None:
        """Keep this worker's liveness key, until cancelled (a lost Redis is logged, and the
        loop goes on)."""
        failing = False
        while True:
            await trio.sleep(self.heartbeat)
            try:
                async with self._errors():
                    await self._redis().set(self._live(self.worker), b"1", px=self._lapse_ms())
            except Exception as exc:
                if not failing:
                    logger.error(
                        "task store: cannot keep this worker alive: %s",
                        exc,
                        exc_info=not isinstance(exc, TaskStoreUnavailable),
                    )
                failing = True
                continue
            if failing:
                logger.warning("task store: Redis answers again")
                failing = False

    async def aclose(self) -> None:
        """Drop this worker's liveness key and close the connections."""
        if not self._link.started:
            return
        with contextlib.suppress(Exception), trio.move_on_after(self.timeout):
            await self._redis().delete([self._live(self.worker)])
        await self._link.aclose()

    # -- the store -------------------------------------------------------------------------------

    async def create(self, record: TaskRecord) -> None:
        args: list[Any] = [encode_record(record), record.state.status, self.worker]
        async with self._errors():
            stored = await self._redis().eval(_CREATE, keys=[self._key(record.task_id)], args=args)
        if stored != 1:
            raise ValueError(f"a task {record.task_id!r} exists already")

    async def get(self, task_id: str) -> TaskRecord | None:
        async with self._errors():
            reply = await self._redis().eval(_GET, keys=[self._key(task_id)], args=[self._live("")])
        if reply is None:
            return None
        assert isinstance(reply, list)
        record = decode_record(reply[0])
        if reply[1] != 1:
            return record
        failed = attrs.evolve(
            record.state,
            status=FAILED,
            input_requests=None,
            error={"code": INTERNAL_ERROR, "message": WORKER_LOST},
            status_message=WORKER_LOST,
            last_updated_at=time.time(),
        )
        after, _ = await self._write(attrs.evolve(record, state=failed), None)
        return after

    async def transition(self, task_id: str, state: TaskState) -> TaskRecord | None:
        record = await self._read(task_id)
        if record is None:
            return None
        after, _ = await self._write(attrs.evolve(record, state=state), None)
        return after

    async def answer(self, task_id: str, responses: Mapping[str, Any]) -> TaskRecord | None:
        while True:
            async with self._errors():
                data, version = await self._redis().hmget(self._key(task_id), ["r", "v"])
            if data is None or version is None:
                return None
            record = decode_record(data)
            merged = answered(record, responses)
            if merged is None:
                return record
            after, written = await self._write(merged, version)
            if written or after is None:
                return after
            # Somebody wrote in between: read again and merge into what they wrote.

    # -- helpers ---------------------------------------------------------------------------------

    async def _read(self, task_id: str) -> TaskRecord | None:
        async with self._errors():
            data = await self._redis().hget(self._key(task_id), "r")
        return decode_record(data) if data is not None else None

    async def _write(
        self, record: TaskRecord, version: bytes | None
    ) -> tuple[TaskRecord | None, bool]:
        ttl = record.state.ttl_ms if record.state.ttl_ms is not None else 0
        args: list[Any] = [
            encode_record(record),
            record.state.status,
            ttl,
            version if version is not None else b"",
        ]
        async with self._errors():
            reply = await self._redis().eval(_WRITE, keys=[self._key(record.task_id)], args=args)
        if reply is None:
            return None, False
        assert isinstance(reply, list)
        return decode_record(reply[1]), reply[2] == 1

    def _redis(self) -> coredis.Redis[bytes]:
        return self._link.client

    def _errors(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Any failure to talk to Redis, as :class:`TaskStoreUnavailable`, bounded in time."""
        return self._link.errors()

    def _lapse_ms(self) -> int:
        return max(1, int(3 * self.heartbeat * 1000))

    def _key(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def _live(self, worker: str) -> str:
        return f"{self.prefix}task-worker:{worker}"
