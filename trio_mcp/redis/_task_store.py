"""Task records on Redis (SEP-2663), shared by every worker, so ``tasks/get`` works on any of them.

coredis is imported only when a store starts: a server without Redis never loads it.

Each task is one hash, ``<prefix>{<task id>}:task``: ``s`` its status (plain, so a script can
tell a terminal one without decoding JSON), ``r`` the record (JSON written by Python: Redis's
own JSON would round numbers in a tool's result), ``v`` a version bumped by every write, and
``w`` the worker that runs it. Writes are Lua scripts over that one key (named in ``KEYS``):

- ``create`` stores the hash only if there is none (``HSETNX``-like), and returns once Redis
  has it: a ``tasks/get`` on any worker finds it from then on;
- ``transition`` replaces the record unless the stored status is terminal;
- ``answer`` is a compare-and-set on the version (read, merge in Python, write if nobody
  wrote meanwhile, else read again), so two updates racing cannot both resume the task.

A record with no terminal status never expires (a task may run, or wait for input, for as
long as it likes); once terminal it expires ``ttlMs`` after it settled.

**Per-principal quota** (:meth:`RedisTaskStore.create_capped`): each principal's running
tasks are a sorted set, ``<prefix>{<sha256 of the identity>}:task-quota``, of task ids scored
by when their lease ends (Redis's clock). One script drops the lapsed leases, counts, and adds
the task's lease only under the cap, so workers racing cannot overshoot it; then the record is
stored. A task's lease goes when any worker settles it; the worker running it renews it at
every heartbeat, so the leases of a worker that died lapse with its liveness.

**Liveness.** A worker's liveness is a key, ``<prefix>{<worker id>}:task-worker``, renewed by
:meth:`RedisTaskStore.run` every ``heartbeat`` seconds and lapsing after three. A key can
vanish with Redis itself (a restart, with or without its data), so a missing key is not yet
a lost worker: an *observer* (the store answering a ``tasks/get``) declares a task's worker
lost only after it has seen that worker's key missing, at each of its own heartbeats, for a
whole ``grace`` while its own view of Redis was continuous: no command of its own failed,
and its own liveness key was still there at each heartbeat (gone means Redis lost its data,
or this observer was away for longer than the lapse). Any break starts its clock again. Then
the ``tasks/get`` settles the task ``failed`` ("the worker running the task was lost"), so
clients polling see an end rather than ``working`` forever.

A worker re-asserts itself as soon as it reaches Redis again (its heartbeat retries quickly
while Redis is away): its liveness key, its tasks' leases, and the records of its running
tasks if Redis lost them (it keeps the last record it saw of each); reading or settling one
of its own tasks whose record vanished writes it again too.

**Two steps.** Each key carries its own thing's hash tag (:mod:`._keys`), so on a Redis
Cluster a task, its owner's quota and its worker's liveness live in different slots, where no
one script may touch them together. Every script therefore touches one thing's keys, and what
spans two things is two steps, each atomic, in an order whose in-between state is safe:

- *create, capped*: the lease first (the atomic count under the cap), then the record. In
  between, a lease without a record only counts against its owner (never over the cap); if
  the record cannot be stored the lease is given back, or lapses within three heartbeats.
- *settle*: the record's terminal write, then the lease given back (sent together, one round
  trip on one Redis, when the write is unconditional: a task that is or becomes terminal holds
  no lease either way; after a compare-and-set only once it won, since a lost one leaves a
  running task). A lease left behind by a failure lapses, as a dead worker's does.
- *a ``tasks/get`` judging the worker*: the record, then the worker's liveness key (pipelined
  once this store knows the task's worker, which never changes). The two reads are not one
  snapshot, and need not be: a worker is declared lost only after its key was seen missing
  across a whole ``grace`` of reads, and the write that fails the task is a compare-and-set on
  the version that was read, so a task its worker wrote meanwhile (a sign of life), or that
  settled, is left alone.
- *the heartbeat*: ``SET ... GET`` renews this worker's key and says whether it was there (one
  key, atomic), ``EXISTS`` per watched worker, one renewal script per quota: pipelined, one
  round trip on one Redis.

On one Redis the same steps run; none of them is slower than a round trip, and the common
``tasks/get`` stays one.

Faults: Redis unreachable at start fails the start with :class:`TaskStoreUnavailable` naming
the URL (never its password); lost later, every call raises it (a ``ProtocolError``, -32603
saying the task store is unavailable) until Redis answers again, and the rest of the server
goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from ..protocol._jsonrpc import INTERNAL_ERROR
from ..protocol._tasks import FAILED, TERMINAL, TaskState
from ..tasks import TaskRecord, TaskStoreUnavailable, answered
from ._keys import key
from ._link import LinkedStore, milliseconds

if TYPE_CHECKING:
    from ._client import Client

logger = logging.getLogger("trio_mcp.server")

_TERMINAL_LUA = "{" + ", ".join(f"[{status!r}] = true" for status in sorted(TERMINAL)) + "}"

#: Redis's clock, in milliseconds, in a script.
_NOW_LUA = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# Every script touches the keys of one thing only (one hash tag, one slot of a Redis Cluster),
# all named in KEYS; what spans several things (a task and its owner's quota, a task and its
# worker's liveness) is two steps, each atomic, ordered so that the state between them is a
# safe one (see "Two steps" in the module docstring).

# KEYS[1] an owner's quota. ARGV: cap ('' : none), lapse (ms), task id. Drops the lapsed
# leases, and adds the task's unless cap are held: 1 if added, 0 if not.
_CLAIM = (
    _NOW_LUA
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] ~= '' and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
)

# KEYS[1] an owner's quota. ARGV: lapse (ms), then task ids. Renews those tasks' leases (only
# those not given back meanwhile: XX).
_RENEW = (
    _NOW_LUA
    + """
local lapse = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + lapse, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], lapse)
return 1
"""
)

# KEYS[1] the task. ARGV: record, status, worker. 1 if stored, 0 if the task exists already.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 's', ARGV[2], 'w', ARGV[3], 'v', 1)
return 1
"""

# KEYS[1] the task. ARGV: record, status, worker. A running task of this worker, written again
# if Redis lost it: 1 if written again, 0 if it was there, -1 if it settled meanwhile.
_RESTORE = (
    "local terminal = "
    + _TERMINAL_LUA
    + """
local status = redis.call('HGET', KEYS[1], 's')
if status and terminal[status] then return -1 end
if status then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 's', ARGV[2], 'w', ARGV[3], 'v', 1)
return 1
"""
)

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
if terminal[ARGV[2]] and tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {ARGV[2], ARGV[1], 1}
"""
)

#: The error of a task whose worker was lost while running it.
WORKER_LOST = "The worker running the task was lost"
#: How soon a worker tries Redis again after its heartbeat failed (seconds; at most its
#: heartbeat), so it re-asserts itself soon after Redis is back.
RETRY = 0.25
#: How many tasks of other workers a store remembers the worker of.
REMEMBERED = 4096


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


@attrs.define
class _Watch:
    """A worker whose liveness key this store saw missing."""

    #: Since when (Trio's clock) it has been seen missing.
    since: float
    #: When a ``tasks/get`` last asked about it (a watch nobody asks about is dropped).
    asked: float


class RedisTaskStore(LinkedStore):
    """A :class:`~trio_mcp.tasks.TaskStore` on Redis, shared by every worker that names the
    same Redis and ``prefix``: ``Server(task_store=RedisTaskStore("redis://host:6379/0"))``.

    The server starts it (and keeps this worker's liveness key) while it hosts tasks; see the
    module docstring for the layout, the quota, the liveness of workers, and faults.
    ``heartbeat``: how often a worker renews its liveness (its key lapses after three);
    ``grace``: how long an observer must see a worker's key missing before that worker's tasks
    are failed (twice the heartbeat by default; more than one heartbeat, so a worker that
    re-asserts itself after Redis came back empty is never taken for lost).
    """

    what = "the task store"
    unavailable = TaskStoreUnavailable

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "trio_mcp:",
        heartbeat: float = 5.0,
        grace: float | None = None,
        timeout: float = 5.0,
    ) -> None:
        if heartbeat <= 0:
            raise ValueError("heartbeat must be positive")
        grace = 2 * heartbeat if grace is None else grace
        if grace <= heartbeat:
            raise ValueError("grace must be longer than the heartbeat")
        super().__init__(url, prefix=prefix, timeout=timeout)
        self.heartbeat = heartbeat
        self.grace = grace
        #: This worker, as the records of the tasks it runs name it.
        self.worker = secrets.token_hex(8)
        #: The tasks this worker runs, as last seen, until seen settled; and which of them
        #: hold a lease of their owner's quota.
        self._mine: dict[str, TaskRecord] = {}
        self._leased: set[str] = set()
        #: The worker of each task of other workers read while running (see :meth:`get`).
        self._workers: dict[str, str] = {}
        #: Workers seen missing, by id.
        self._watch: dict[str, _Watch] = {}
        #: Since when (Trio's clock) this store's view of Redis has been continuous; None
        #: while it is broken (a command failed) and until the heartbeat finds Redis again.
        self._view_since: float | None = None
        #: Whether :meth:`run` keeps the heartbeat (only then does this store judge others).
        self._beating = False

    # -- lifetime --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, and mark this worker alive; :class:`TaskStoreUnavailable` if Redis cannot
        be reached."""
        if self._link.started:
            raise RuntimeError("a RedisTaskStore is started once: give each its own")

        async def alive(client: Client) -> None:
            await client.set(self._live(self.worker), b"1", px=self._lapse_ms())

        await self._link.start(alive)
        self._view_since = trio.current_time()

    async def run(self) -> None:
        """Keep this worker's liveness (and its tasks' leases), watch the workers seen
        missing, and re-assert this worker once Redis is back, until cancelled (a lost Redis is
        logged, and the loop goes on, trying again every :data:`RETRY` seconds)."""
        self._beating = True
        failing = False
        try:
            while True:
                broken = self._view_since is None
                await trio.sleep(min(self.heartbeat, RETRY) if broken else self.heartbeat)
                try:
                    kept = await self._beat()
                    if broken or not kept:
                        # Back after a break, or Redis lost what it had (this worker's own key
                        # with it): the view starts again now, and this worker re-asserts its
                        # running tasks.
                        self._view_since = trio.current_time()
                        await self._restore()
                except Exception as exc:
                    self._view_since = None
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
        finally:
            self._beating = False

    async def aclose(self) -> None:
        """Drop this worker's liveness key and close the connections."""
        self._mine.clear()
        self._leased.clear()
        if not self._link.started:
            return
        with contextlib.suppress(Exception), trio.move_on_after(self.timeout):
            await self._redis().delete([self._live(self.worker)])
        await self._link.aclose()

    # -- the store -------------------------------------------------------------------------------

    async def create(self, record: TaskRecord) -> None:
        await self._create(record, None)

    async def create_capped(self, record: TaskRecord, cap: int) -> bool:
        """Store the record unless its owner has ``cap`` tasks running (or waiting for input)
        on any worker sharing this Redis; whether it was stored (one script: racing workers
        cannot overshoot)."""
        return await self._create(record, cap)

    async def get(self, task_id: str) -> TaskRecord | None:
        # The task's hash, and its worker's liveness when this store knows the worker (a
        # task's worker never changes): one round trip on one Redis, whatever the slots. The
        # first read of a task of another worker asks for the liveness after (two steps: see
        # the module docstring).
        known = self._workers.get(task_id)
        async with self._errors(), self._redis().pipeline(transaction=False) as pipe:
            fields_request = pipe.hmget(self._key(task_id), ["s", "r", "w", "v"])
            there_request = pipe.exists([self._live(known)]) if known else None
        async with self._errors():
            status, data, stored, version = await fields_request
            there = await there_request if there_request is not None else 0
        if data is None:
            self._workers.pop(task_id, None)
            return await self._lost_record(task_id, None)
        record = decode_record(data)
        worker = _text(stored) if stored is not None else ""
        if _text(status or b"") in TERMINAL or not worker or worker == self.worker:
            self._workers.pop(task_id, None)
            return self._seen(record)
        if worker != known:
            self._remember(task_id, worker)
            async with self._errors():
                there = await self._redis().exists([self._live(worker)])
        if not self._judge(worker, missing=there == 0):
            return self._seen(record)
        failed = attrs.evolve(
            record.state,
            status=FAILED,
            input_requests=None,
            error={"code": INTERNAL_ERROR, "message": WORKER_LOST},
            status_message=WORKER_LOST,
            last_updated_at=time.time(),
        )
        # Only if nobody wrote the task since it was read (its worker's write is a sign of
        # life), and never over a terminal state.
        after, written = await self._write(attrs.evolve(record, state=failed), version)
        if written:
            logger.warning("task %s: its worker %s was lost; the task failed", task_id, worker)
        return after

    async def transition(self, task_id: str, state: TaskState) -> TaskRecord | None:
        record = await self._read(task_id)
        if record is None:
            return await self._lost_record(task_id, state)
        after, _ = await self._write(attrs.evolve(record, state=state), None)
        if after is None:
            return await self._lost_record(task_id, state)
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
                return self._seen(record)
            after, written = await self._write(merged, version)
            if written or after is None:
                return after
            # Somebody wrote in between: read again and merge into what they wrote.

    # -- this worker's tasks ---------------------------------------------------------------------

    async def _create(self, record: TaskRecord, cap: int | None) -> bool:
        task_id = record.task_id
        if cap is not None:
            # First the lease, atomically under the cap: racing workers cannot overshoot it.
            async with self._errors():
                claimed = await self._redis().eval(
                    _CLAIM,
                    keys=[self._quota(record.owner)],
                    args=[cap, self._lapse_ms(), task_id],
                )
            if claimed != 1:
                return False
        args: list[Any] = [encode_record(record), record.state.status, self.worker]
        try:
            async with self._errors(), self._redis().pipeline(transaction=False) as pipe:
                pipe.set(self._live(self.worker), b"1", px=self._lapse_ms())
                stored_request = pipe.eval(_CREATE, keys=[self._key(task_id)], args=args)
            async with self._errors():
                stored = await stored_request
        except BaseException:
            if cap is not None:
                await self._give_back(record.owner, task_id)
            raise
        if stored != 1:
            if cap is not None:
                await self._give_back(record.owner, task_id)
            raise ValueError(f"a task {task_id!r} exists already")
        self._mine[record.task_id] = record
        if cap is not None:
            self._leased.add(record.task_id)
        return True

    def _seen(self, record: TaskRecord) -> TaskRecord:
        """Keep the latest record of a task of this worker (forgotten once settled)."""
        if record.task_id in self._mine:
            if record.state.terminal:
                del self._mine[record.task_id]
                self._leased.discard(record.task_id)
            else:
                self._mine[record.task_id] = record
        return record

    async def _lost_record(self, task_id: str, state: TaskState | None) -> TaskRecord | None:
        """A task with no record: if this worker runs it, Redis lost it (a restart without
        its data), and it is written again (with ``state`` if given); else there is none."""
        mine = self._mine.get(task_id)
        if mine is None:
            return None
        await self._restore_one(mine)
        if state is None:
            return mine
        after, _ = await self._write(attrs.evolve(mine, state=state), None)
        return after

    async def _restore(self) -> None:
        """Re-assert this worker's running tasks: their records if Redis lost them, their
        leases either way."""
        restored = 0
        for record in list(self._mine.values()):
            restored += await self._restore_one(record)
        if restored:
            logger.warning("task store: wrote again %d running tasks Redis had lost", restored)

    async def _restore_one(self, record: TaskRecord) -> int:
        args: list[Any] = [encode_record(record), record.state.status, self.worker]
        async with self._errors():
            made = await self._redis().eval(_RESTORE, keys=[self._key(record.task_id)], args=args)
        if made == -1:
            return 0  # settled meanwhile: its lease is given back, not renewed
        if record.task_id in self._leased:
            lease: list[Any] = [self._lapse_ms(), record.task_id]
            async with self._errors():
                # ZADD as a claim does, without the cap: the task holds its seat already.
                await self._redis().eval(
                    _CLAIM, keys=[self._quota(record.owner)], args=["", *lease]
                )
        return int(made) if isinstance(made, int) else 0

    # -- liveness --------------------------------------------------------------------------------

    async def _beat(self) -> bool:
        """One heartbeat: renew this worker and its leases, look at the workers watched;
        whether this worker's own key was still there."""
        now = trio.current_time()
        for worker, watch in list(self._watch.items()):
            if now - watch.asked > 2 * self.grace:
                del self._watch[worker]  # nobody asks about it any more
        watched = list(self._watch)
        leases: dict[str, list[str]] = {}
        for task_id in self._leased:
            mine = self._mine.get(task_id)
            if mine is not None:
                leases.setdefault(mine.owner, []).append(task_id)
        # One command per key (each atomic on its own), pipelined: one round trip on one Redis.
        lapse = self._lapse_ms()
        async with self._errors(), self._redis().pipeline(transaction=False) as pipe:
            kept_request = pipe.set(self._live(self.worker), b"1", px=lapse, get=True)
            there_requests = [pipe.exists([self._live(worker)]) for worker in watched]
            for owner, task_ids in leases.items():
                pipe.eval(_RENEW, keys=[self._quota(owner)], args=[lapse, *task_ids])
        async with self._errors():
            kept = await kept_request
            there = [await request for request in there_requests]
        for worker, found in zip(watched, there, strict=True):
            if found:
                self._watch.pop(worker, None)
        return kept is not None

    def _judge(self, worker: str, *, missing: bool) -> bool:
        """Whether the running task of ``worker`` (whose liveness key a read just found
        ``missing`` or not) is lost: only once this store, beating with a continuous view of
        Redis, has seen the key missing for a whole grace."""
        if not worker or worker == self.worker:
            return False
        if not missing:
            self._watch.pop(worker, None)
            return False
        now = trio.current_time()
        view = self._view_since
        watch = self._watch.get(worker)
        if watch is None:
            self._watch[worker] = _Watch(since=now, asked=now)
            return False
        watch.asked = now
        if not self._beating or view is None:
            return False
        return now - max(watch.since, view) >= self.grace

    # -- helpers ---------------------------------------------------------------------------------

    async def _read(self, task_id: str) -> TaskRecord | None:
        async with self._errors():
            data = await self._redis().hget(self._key(task_id), "r")
        return self._seen(decode_record(data)) if data is not None else None

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
        # A terminal state gives back the task's lease of its owner's quota (another slot: a
        # second command). Unconditional writes send both at once: whatever the script says
        # (written, terminal already, or no task), a task that is or will be terminal holds no
        # lease. A compare-and-set gives it back only once written: its loss leaves a running
        # task, whose lease must stay.
        settles = record.state.terminal and bool(record.owner)
        async with self._errors(), self._redis().pipeline(transaction=False) as pipe:
            reply_request = pipe.eval(_WRITE, keys=[self._key(record.task_id)], args=args)
            if settles and version is None:
                pipe.zrem(self._quota(record.owner), [record.task_id])
        async with self._errors():
            reply = await reply_request
        if reply is None:
            return None, False
        assert isinstance(reply, list)
        written = reply[2] == 1
        if settles and version is not None and written:
            await self._give_back(record.owner, record.task_id)
        return self._seen(decode_record(reply[1])), written

    async def _give_back(self, owner: str, task_id: str) -> None:
        """Give back a task's lease (best effort: one that stays lapses within the lapse)."""
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(self.timeout),
            contextlib.suppress(TaskStoreUnavailable),
        ):
            async with self._errors():
                await self._redis().zrem(self._quota(owner), [task_id])

    def _redis(self) -> Client:
        try:
            return self._link.client
        except TaskStoreUnavailable:
            self._view_since = None
            raise

    @contextlib.asynccontextmanager
    async def _errors(self) -> AsyncIterator[None]:
        """Any failure to talk to Redis, as :class:`TaskStoreUnavailable`, bounded in time;
        it breaks this store's continuous view of Redis (see :meth:`_judge`)."""
        try:
            async with self._link.errors():
                yield
        except TaskStoreUnavailable:
            self._view_since = None
            raise

    def _lapse_ms(self) -> int:
        return milliseconds(3 * self.heartbeat)

    def _remember(self, task_id: str, worker: str) -> None:
        """Keep which worker runs a task of another worker (bounded: the oldest go first)."""
        self._workers.pop(task_id, None)
        self._workers[task_id] = worker
        while len(self._workers) > REMEMBERED:
            del self._workers[next(iter(self._workers))]

    def _key(self, task_id: str) -> str:
        return key(self.prefix, task_id, "task")

    def _live(self, worker: str) -> str:
        return key(self.prefix, worker, "task-worker")

    def _quota(self, owner: str) -> str:
        digest = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()
        return key(self.prefix, digest, "task-quota")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
