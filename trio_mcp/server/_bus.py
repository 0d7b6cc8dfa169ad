"""The notification bus: change notifications that reach the listeners of every worker.

A change made in one process (a tool added, a resource updated) must reach the clients of all
of them: handshake-era GET streams and modern ``subscriptions/listen`` streams alike, wherever
their connection lives. A :class:`NotificationBus` carries :class:`BusEvent` values between the
processes; :class:`Notifier` sits between a server's synchronous ``notify_*`` and its bus.

How an event travels (theory of operation):

- ``Server.notify_list_changed(kind)`` is synchronous (handlers call it from sync code). The
  :class:`Notifier` delivers the event to this process's connections at once, as a server with
  no bus always has (so a change still reaches a handshake client before the response of the
  call that made it), and, while its pump runs, puts it in a bounded outbox.
- The pump (:meth:`Notifier.run`, a task of the HTTP app's lifespan nursery) drains the outbox
  into ``bus.publish`` and runs the bus's subscriber, which hands every event published by
  anyone to :meth:`Notifier.receive`. An event carries the ``origin`` of the notifier that
  published it, and a notifier skips its own: each event reaches each process exactly once,
  its own process included, even when the bus is down (then only its own process hears it).
- Without the pump (stdio, memory, an app whose lifespan has not run) nothing is queued: the
  local delivery is all there is, as before there was a bus.
- A publish that fails (the bus's broker down) keeps its event at the head of the outbox and
  is retried with a backoff (:data:`RETRY_INITIAL` to :data:`RETRY_MAX`), in order, until it
  works: an event accepted during an outage reaches the other workers once it is over.
- The outbox is bounded (:data:`DEFAULT_MAX_QUEUED`); when full, the oldest event is dropped
  with a warning, and a ``resync`` event (:meth:`BusEvent.resync`) is owed: published before
  the rest once publishing works, it has every worker tell its clients to list everything
  again, so what was dropped is never silently lost.
- A bus whose subscriber finds it missed events (its position fell out of what the broker
  keeps) delivers a ``resync`` event too; a server answers one with every list-changed
  notification (and ``resources/updated`` for every subscribed resource).

:class:`LocalBus` is the in-process bus (the default: one server alone sees what it always
saw; several servers in one process holding one ``LocalBus`` hear each other).
``RedisBus`` (``trio_mcp.redis._bus``, a Redis stream) spans processes and hosts.
"""

from __future__ import annotations

import collections
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import orjson
import trio

logger = logging.getLogger("trio_mcp.bus")

#: Events waiting for the publisher, at most; past it the oldest is dropped.
DEFAULT_MAX_QUEUED = 1024
#: A failed publish is retried after this long, doubling up to :data:`RETRY_MAX` (seconds).
RETRY_INITIAL = 0.1
RETRY_MAX = 2.0

#: The event kinds the core delivers. Others (an extension's, a newer worker's) are carried
#: by every bus: the server's extensions handle theirs, and the rest are ignored.
LIST_CHANGED = "list_changed"
RESOURCE_UPDATED = "resource_updated"
#: "You may have missed events": every list changed, every subscribed resource updated.
RESYNC = "resync"


class BusError(Exception):
    """The bus cannot be reached (at start: the app does not start; later: a publish failed)."""


@attrs.frozen
class BusEvent:
    """One notification for every worker: a ``kind`` and its JSON ``params``.

    ``origin`` names the notifier that published it (set by :class:`Notifier`), so that the
    process it came from does not deliver it twice.
    """

    kind: str
    params: Mapping[str, Any] = attrs.field(factory=dict)
    origin: str = ""

    @classmethod
    def list_changed(cls, kind: str) -> BusEvent:
        """``notifications/{kind}/list_changed`` (kind: tools, prompts or resources)."""
        return cls(LIST_CHANGED, {"kind": kind})

    @classmethod
    def resource_updated(cls, uri: str) -> BusEvent:
        """``notifications/resources/updated`` for the clients subscribed to ``uri``."""
        return cls(RESOURCE_UPDATED, {"uri": uri})

    @classmethod
    def resync(cls) -> BusEvent:
        """Events were missed (a subscriber away past what the bus keeps, or a full outbox):
        every worker tells its clients that every list changed, and every subscribed
        resource."""
        return cls(RESYNC)

    def encode(self) -> bytes:
        return orjson.dumps({"kind": self.kind, "params": self.params, "origin": self.origin})

    @classmethod
    def decode(cls, data: bytes | str) -> BusEvent:
        """The event ``data`` holds; ValueError when it is not one."""
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("not an object")
        kind, params, origin = value.get("kind"), value.get("params", {}), value.get("origin", "")
        if not isinstance(kind, str) or not isinstance(params, dict):
            raise ValueError("no kind, or params that are not an object")
        if not isinstance(origin, str):
            raise ValueError("an origin that is not a string")
        return cls(kind, params, origin)


Deliver = Callable[[BusEvent], None]


class NotificationBus(Protocol):
    """Carries :class:`BusEvent` values to every subscriber, the publisher's own included.

    - ``subscribe(deliver)`` is a background service for a nursery: it connects, calls
      ``task_status.started()`` once it is subscribed (or raises :class:`BusError` when it
      cannot be, say the broker is down at start), then calls ``deliver`` (synchronous, it
      must not block) for every event published while it runs, until cancelled. A connection
      lost later is not an error: it reconnects, and delivers the events published meanwhile
      if it can, or a ``resync`` event (:meth:`BusEvent.resync`) if it cannot.
    - ``publish(event)`` sends one event to every subscriber; :class:`BusError` when it cannot.
      It may be called only while a ``subscribe`` of the same bus runs.
    """

    async def publish(self, event: BusEvent) -> None: ...

    async def subscribe(
        self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None: ...


class LocalBus:
    """The in-process bus: ``publish`` hands the event to every running ``subscribe``."""

    def __init__(self) -> None:
        self._subscribers: list[Deliver] = []

    async def publish(self, event: BusEvent) -> None:
        for deliver in list(self._subscribers):
            deliver(event)
        await trio.lowlevel.checkpoint()

    async def subscribe(
        self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self._subscribers.append(deliver)
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            self._subscribers.remove(deliver)


class Notifier:
    """Between a server's synchronous ``notify_*`` and its bus (see the module docstring).

    ``deliver`` hands an event to this process's connections; it is called at once for the
    events of :meth:`notify`, and by the subscriber for everyone else's.
    """

    def __init__(
        self, bus: NotificationBus, deliver: Deliver, *, max_queued: int = DEFAULT_MAX_QUEUED
    ) -> None:
        if max_queued < 1:
            raise ValueError("max_queued must be a positive integer")
        self.bus = bus
        self.max_queued = max_queued
        self._deliver = deliver
        #: Tells this notifier's events from others' on the bus.
        self.origin = secrets.token_hex(8)
        self._outbox: collections.deque[BusEvent] = collections.deque()
        self._wakeup = trio.Event()
        self._running = False
        #: Events dropped from a full outbox since the last warning was followed by a publish.
        self.dropped = 0
        #: Whether a resync is owed to the other workers (events were dropped).
        self._owe_resync = False
        #: Whether the last publish failed (its error is logged once, until one succeeds).
        self._failing = False

    @property
    def running(self) -> bool:
        return self._running

    def notify(self, event: BusEvent, *, here: bool = True) -> None:
        """Deliver ``event`` here at once (unless ``here`` is false: this process knows
        already) and, while the pump runs, queue it for the bus."""
        if here:
            self._deliver_safely(event)
        if not self._running:
            return
        if len(self._outbox) >= self.max_queued:
            self._outbox.popleft()
            self.dropped += 1
            self._owe_resync = True
            if self.dropped == 1:
                logger.warning(
                    "notification bus: %d events wait for the publisher; dropping the oldest "
                    "(the other workers are told to resync once publishing works)",
                    self.max_queued,
                )
        self._outbox.append(attrs.evolve(event, origin=self.origin))
        self._wakeup.set()

    def receive(self, event: BusEvent) -> None:
        """An event from the bus: delivered here unless this notifier published it."""
        if event.origin != self.origin:
            self._deliver_safely(event)

    def _deliver_safely(self, event: BusEvent) -> None:
        try:
            self._deliver(event)
        except Exception:
            logger.exception("delivering a %s notification failed", event.kind)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pump: the bus's subscriber and the publisher, until cancelled.

        Started once subscribed; :class:`BusError` when the bus cannot be reached at start.
        While one pump runs, another (a second app of the same server) only waits: the
        events of a process go out once.
        """
        if self._running:
            task_status.started()
            await trio.sleep_forever()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.bus.subscribe, self.receive)
            self._running = True
            try:
                nursery.start_soon(self._publish_forever)
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._running = False
                self._outbox.clear()

    async def _publish_forever(self) -> None:
        delay = RETRY_INITIAL
        while True:
            while not self._outbox and not self._owe_resync:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
            resync = self._owe_resync
            if resync:
                event = attrs.evolve(BusEvent.resync(), origin=self.origin)
            else:
                event = self._outbox[0]
            try:
                await self.bus.publish(event)
            except Exception as exc:
                # Already delivered here; kept, and retried until the bus takes it. Logged
                # once per outage; whatever went wrong, the pump (and its app) goes on.
                if not self._failing:
                    logger.error(
                        "notification bus: publishing failed, the other workers hear of "
                        "changes once it works again: %s",
                        exc,
                        exc_info=not isinstance(exc, BusError),
                    )
                self._failing = True
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            delay = RETRY_INITIAL
            if resync:
                self._owe_resync = False
            elif self._outbox and self._outbox[0] is event:
                self._outbox.popleft()  # (unless a full outbox dropped it meanwhile)
            if self._failing:
                logger.warning("notification bus: publishing works again")
                self._failing = False
            if self.dropped:
                logger.warning(
                    "notification bus: %d events were dropped; the other workers resync",
                    self.dropped,
                )
                self.dropped = 0
